"""codec/detection_msgs.Detection3DArrayBuilder: the same message as detections_to_msg / tracks_to_msg, frame after
frame, while it reuses its objects (growing and shrinking), and a message serialised before the next build keeps its
content."""
import numpy as np
import pytest

pytest.importorskip('vision_msgs.msg')
serialization = pytest.importorskip('rclpy.serialization')

from string_perception.codec.image_cdr import RawHeader, RawStamp  # noqa: E402
from string_perception.codec.detection_msgs import Detection3DArrayBuilder, detections_to_msg  # noqa: E402
from string_perception.runtime.postprocess import Detections  # noqa: E402


def deserialize(raw):
    from vision_msgs.msg import Detection3DArray
    return serialization.deserialize_message(raw, Detection3DArray)


def roundtrip(msg):
    return deserialize(serialization.serialize_message(msg))      # (CDR padding bytes are not defined: compare fields)


def boxes(m, seed):
    rng = np.random.default_rng(seed)
    return Detections.from_boxes(rng.uniform(-1, 2, (m, 3)), rng.uniform(0.05, 0.5, (m, 3)),
                                 class_ids=rng.integers(0, 3, m), scores=rng.uniform(0, 1, m), labels=['a', 'b', 'c'])


def test_builder_equals_fresh_messages_across_frames():
    builder = Detection3DArrayBuilder()
    for k, m in enumerate([3, 5, 0, 2, 6, 1]):
        dets, header = boxes(m, k), RawHeader(RawStamp(100 + k, 7 * k), f'cam{k % 2}')
        ids = None if k % 3 == 0 else np.arange(m) - 1                # -1: no track yet -> empty id
        built = builder.build(dets, header, ids)
        fresh = detections_to_msg(dets, header, ids)
        assert built == fresh, k
        assert roundtrip(built) == fresh                              # what a subscriber receives
        assert len(built.detections) == m


def test_a_serialised_message_is_not_changed_by_the_next_build():
    builder = Detection3DArrayBuilder()
    first = serialization.serialize_message(builder.build(boxes(4, 0), RawHeader(RawStamp(1, 2), 'cam')))
    builder.build(boxes(4, 1), RawHeader(RawStamp(3, 4), 'cam'))
    assert deserialize(first) == detections_to_msg(boxes(4, 0), RawHeader(RawStamp(1, 2), 'cam'))


def test_tracks_message_equals_tracks_to_msg():
    from string_perception.ros.track_messages import tracks_to_msg
    from string_perception.runtime.tracking import Tracker, TrackerConfig
    tracker = Tracker(TrackerConfig(birth_hits=1))
    tracks = None
    for k in range(3):
        tracks = tracker.update(boxes(3, 0), stamp_s=0.1 * k)
    assert len(tracks) > 0
    header = RawHeader(RawStamp(9, 9), 'cam')
    assert Detection3DArrayBuilder().build(tracks, header, tracks.ids) == tracks_to_msg(tracks, header)

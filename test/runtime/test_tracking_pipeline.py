"""Tracking as the pipeline's last stage: same detections, tracks per stream, reset, batch == one by one."""
import importlib.util

import numpy as np
import pytest

from string_perception.runtime import Pipeline, TrackerConfig
from test.support.tiny_model import save_tiny_model

CPU_ONLY = ('CPUExecutionProvider',)


@pytest.fixture(scope='module')
def model_path(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp('models') / 'tiny.onnx', logit_bias=3.0)


def _frame(h=120, w=160, seed=0):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)                   # [h,w,3]
    depth = rng.integers(500, 3000, (h, w)).astype(np.uint16)                # [h,w] mm
    K = np.array([[150.0, 0, (w - 1) / 2], [0, 150.0, (h - 1) / 2], [0, 0, 1]])
    return rgb, depth, K


def test_tracking_stage_ids_a_repeated_frame_and_resets(model_path):
    plain = Pipeline(model_path, CPU_ONLY, intra_op_threads=1)
    tracked = Pipeline.from_model(plain.model, tracking=TrackerConfig(birth_hits=2))
    frame = _frame()
    ref = plain(*frame)
    assert ref.tracks is None and 'tracking_ms' not in ref.timings
    n = len(ref.detections)
    assert n > 0
    first = tracked(*frame, stamp_s=0.0)
    assert len(first.tracks) == 0 and (first.tracks.detection_ids == -1).all()   # tentative after 1 hit
    second = tracked(*frame, stamp_s=0.1)
    np.testing.assert_allclose(second.detections.translations, ref.detections.translations)  # detections unchanged
    assert sorted(second.tracks.detection_ids.tolist()) == list(range(1, n + 1))  # one id per detection
    assert second.tracks.ids.tolist() == list(range(1, n + 1))
    np.testing.assert_allclose(second.tracks.velocities, 0.0, atol=1e-9)         # a static frame
    assert second.timings['tracking_ms'] >= 0.0
    assert second.timings['total_ms'] == pytest.approx(sum(v for k, v in second.timings.items() if k != 'total_ms'))
    tracked.reset_tracking()
    assert len(tracked(*frame, stamp_s=0.2).tracks) == 0                           # a new stream starts tentative


def test_run_batch_tracks_in_order_like_single_calls(model_path):
    frames = [_frame(seed=0)] * 3 + [_frame(seed=1)]
    stamps = [0.0, 0.1, 0.2, 0.3]
    one = Pipeline(model_path, CPU_ONLY, intra_op_threads=1, tracking=TrackerConfig(birth_hits=2))
    singles = [one(*f, stamp_s=s) for f, s in zip(frames, stamps)]
    batch = Pipeline.from_model(one.model, tracking=TrackerConfig(birth_hits=2)).run_batch(frames, batch_size=3,
                                                                                          stamps=stamps)
    for a, b in zip(singles, batch):
        assert a.tracks.ids.tolist() == b.tracks.ids.tolist()
        assert a.tracks.detection_ids.tolist() == b.tracks.detection_ids.tolist()
        np.testing.assert_allclose(a.tracks.translations, b.tracks.translations, atol=1e-6)


def test_bag_evaluator_tracks_the_published_detections(tmp_path):
    """evaluate_bag tracks what the node would publish: with birth after 1 hit every detection at the operating
    threshold gets an id (unique in its frame), the output bag carries them, and tracking=None turns it off."""
    from test.support.bag_helpers import frames, write_bag
    from string_perception.bags.eval_bag import evaluate_bag
    from string_perception.scenes import CLASS_NAMES
    model = save_tiny_model(tmp_path / 'tiny.onnx', labels=CLASS_NAMES, logit_bias=3.0)
    bag = write_bag(tmp_path / 'bag', frames(4))
    pipe = Pipeline(model, CPU_ONLY, score_threshold=0.05)
    with_msgs = importlib.util.find_spec('vision_msgs') is not None and importlib.util.find_spec('rclpy') is not None
    res = evaluate_bag(bag, pipe, operating_threshold=0.5, tracking=TrackerConfig(birth_hits=1), output_bag=with_msgs)
    published = []
    for i in range(4):
        f = frames(4)[i]
        published.append(int((Pipeline.from_model(pipe.model, score_threshold=0.05)(
            f.rgb, f.depth_mm, f.K, depth_encoding='16UC1').detections.scores >= 0.5).sum()))
    assert sum(published) > 0
    assert sum(res.track_lengths.values()) == sum(published)
    assert pipe.tracker.config.min_score == 0.5
    if with_msgs:
        from rclpy.serialization import deserialize_message
        from vision_msgs.msg import Detection3DArray
        from string_perception.bags.output_bag import DETECTIONS_TOPIC
        msgs = [deserialize_message(raw, Detection3DArray) for _, topic, _, raw in res.outputs.messages
                if topic == DETECTIONS_TOPIC]
        ids = [[d.id for d in m.detections] for m in msgs]
        assert [len(i) for i in ids] == published
        assert all(len(set(i)) == len(i) and all(x.isdigit() for x in i) for i in ids)
        assert {int(x) for i in ids for x in i} == set(res.track_lengths)
    off = evaluate_bag(bag, Pipeline.from_model(pipe.model, score_threshold=0.05), operating_threshold=0.5,
                       tracking=None)
    assert off.track_lengths == {}

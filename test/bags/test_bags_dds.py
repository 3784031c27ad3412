"""record -> play -> node -> record over real DDS (loopback profile, own ROS_DOMAIN_ID), all as separate processes.

1. ``string-perception-play`` plays the bundled recording into the node while ``string-perception-record`` records
   the camera topics, the ground truth and the node's detections/markers (bag A, mcap, split into files of
   ~1 MB with ``--max-bag-size``);
2. bag A (read across its files) is played again (only its camera + ground-truth topics) into the same node and
   recorded (bag B, sqlite3, one file, zstd-compressed per message).

Checks: the recorder stores the player's messages byte for byte (A == sample, B == A on those topics); the
node's detections in A and B carry input stamps and equal the offline pipeline on the same frames.
"""
import numpy as np
import pytest

from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs')))]

CAMERA = ['/camera/color/image_raw/compressed', '/camera/depth/image_raw', '/camera/color/camera_info']
GT = '/ground_truth/detections'
OUTPUTS = ['/string_perception/detections', '/string_perception/markers']
RATE = 0.5


def _messages(bag, topics):
    from string_perception.bags.reader import open_bag
    reader = open_bag(bag)
    try:
        return {t: [bytes(raw) for c, _, raw in reader.messages([c for c in reader.connections if c.topic == t])]
                for t in topics}
    finally:
        reader.close()


def _unpadded(got, sent):
    """DDS pads every serialised payload to a multiple of 4 bytes (zeros), as ``ros2 bag record`` stores it too:
    strip that padding (and only that) so the comparison is on the message bytes."""
    out = []
    for g, s in zip(got, sent):
        pad = len(g) - len(s)
        ok = 0 <= pad < 4 and len(g) % 4 == 0 and g[len(s):] == bytes(pad)
        out.append(g[:len(s)] if ok else g)
    return out + list(got[len(sent):])


def _round(pg, name, bag, out, storage, topics, node, compression='none', extra=()):
    from string_perception.bags.record import RECORDING_LINE
    rec = pg.start_python(f'record_{name}', ['-m', 'string_perception.bags.record', *CAMERA, GT, *OUTPUTS,
                                             '-o', str(out), '-s', storage, '--compression-mode', compression,
                                             *extra])
    for t in OUTPUTS:                                    # the node's outputs are subscribed before anything plays
        assert rec.wait_for_line(f'{RECORDING_LINE} {t}', 30), pg.logs()
    play = pg.start_python(f'play_{name}', ['-m', 'string_perception.bags.play', str(bag), '--rate', str(RATE),
                                            '--topics', *topics, '--wait-for-subscribers', '2',
                                            '--wait-topics', *CAMERA, f'{GT}=1'])   # node + recorder; recorder
    assert play.wait(timeout=60) == 0, pg.logs()
    import time
    time.sleep(2.0)                                      # the node's last answers
    assert rec.stop() == 0 and node.popen.poll() is None, pg.logs()
    assert 'wrote' in rec.log(), pg.logs()


def test_record_play_node_record_round_trip(tmp_path, model_path):
    from string_perception.bags.reader import BagFrameReader
    from string_perception.bags.sample import default_sample_path
    from string_perception.bags.typestore import make_typestore
    from string_perception.ros.node import READY_LINE, node_command
    from string_perception.node_params import effective_score_threshold
    from string_perception.runtime import Pipeline
    from string_perception.runtime.model_variant import node_model_choice

    sample = default_sample_path()
    bag_a, bag_b = tmp_path / 'a', tmp_path / 'b'
    # the second round replays the same stamps 0.8 s back in time: with the default stamp_reset_jump (0.25 s)
    # that is a clock reset for the node (as a looping bag), not out-of-order frames
    # lossless inputs: the node's defaults keep only the newest frame (QoS depth 1, best effort: latest wins), and on
    # a loaded machine a dropped depth image lets the approximate synchroniser pair a colour frame with its
    # neighbour's depth (within sync_slop), which the offline reader below never does; this test checks that the
    # node computes what the offline pipeline computes on the same frames, so every input frame must arrive
    lossless = {f'{inp}_{k}': v for inp in ('image', 'depth', 'camera_info')
                for k, v in (('qos_depth', 50), ('qos_reliability', 'reliable'))}
    cmd = node_command(model_path, params={'providers': ['CPUExecutionProvider'], 'image_transport': 'compressed',
                                           **lossless},
                       remaps={'image': '/camera/color/image_raw', 'depth': CAMERA[1], 'camera_info': CAMERA[2]})
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        node = pg.start_python('node', cmd[1:])
        assert node.wait_for_line(READY_LINE, 60), pg.logs()
        _round(pg, 'a', sample, bag_a, 'mcap', CAMERA + [GT], node, extra=['--max-bag-size', '1000000'])
        _round(pg, 'b', bag_a, bag_b, 'sqlite3', CAMERA + [GT], node, compression='message')
        assert node.stop() == 0, pg.logs()

    import yaml
    meta = [yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
            for bag in (bag_a, bag_b)]
    assert [m['compression_mode'] for m in meta] == ['', 'message']          # B: zstd per message, read below
    files_a = meta[0]['relative_file_paths']                                  # the sample's 4.4 MB in 1 MB files
    assert len(files_a) >= 3 and files_a == [f'a_{i}.mcap' for i in range(len(files_a))]
    assert meta[1]['relative_file_paths'] == ['b.db3']
    sent, a, b = _messages(sample, CAMERA + [GT]), _messages(bag_a, CAMERA + [GT] + OUTPUTS), \
        _messages(bag_b, CAMERA + [GT] + OUTPUTS)
    for t in CAMERA + [GT]:                               # reliable, in order, byte for byte
        assert _unpadded(a[t], sent[t]) == sent[t], t
        assert _unpadded(b[t], sent[t]) == sent[t], t
    store = make_typestore()
    pipe = Pipeline(node_model_choice(model_path).path, ('CPUExecutionProvider',))   # the file the node ran
    pipe.set_params(score_threshold=effective_score_threshold(-1.0, pipe.model.metadata))
    offline = {}
    for frame in BagFrameReader(bag_b):
        offline[frame.stamp_ns] = pipe(frame.rgb, frame.depth, frame.K, encoding=frame.encoding,
                                       depth_encoding=frame.depth_encoding, intrinsics_hw=frame.info_hw).detections
    for name, got in (('a', a), ('b', b)):
        dets = [store.deserialize_cdr(raw, 'vision_msgs/msg/Detection3DArray') for raw in got[OUTPUTS[0]]]
        assert len(dets) >= 0.5 * len(sent[CAMERA[0]]), f'bag {name}: only {len(dets)} detection messages'
        assert len(got[OUTPUTS[1]]) == len(dets)
        for d in dets:
            stamp = d.header.stamp.sec * 10**9 + d.header.stamp.nanosec
            ref = offline[stamp]                          # KeyError: a stamp that no input frame had
            assert [x.results[0].hypothesis.class_id for x in d.detections] == [str(k) for k in ref.class_ids]
            np.testing.assert_allclose([x.results[0].hypothesis.score for x in d.detections], ref.scores, atol=1e-6)
            np.testing.assert_allclose([[x.bbox.center.position.x, x.bbox.center.position.y,
                                         x.bbox.center.position.z] for x in d.detections],
                                       ref.translations.reshape(-1, 3), atol=1e-6)
    print(f'\n[bags dds] detections for {len(a[OUTPUTS[0]])} + {len(b[OUTPUTS[0]])} of 2 x {len(sent[CAMERA[0]])} '
          f'frames at x{RATE}')

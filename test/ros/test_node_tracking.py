"""The node's tracking outputs: track messages, velocities, per-track markers, TF frames (fallback and over DDS)."""
import json
import textwrap

import numpy as np
import pytest

from test.support.ros_helpers import ros_skip_reason
from string_perception import node_params as P
from string_perception.runtime.postprocess import Detections
from string_perception.runtime.tracking import Tracker, TrackerConfig

needs_msgs = pytest.mark.skipif(ros_skip_reason('vision_msgs', 'tf2_msgs') is not None,
                                reason=str(ros_skip_reason('vision_msgs', 'tf2_msgs')))
TFMESSAGE_UPSTREAM_HASH = 'RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087'  # ros2/geometry2


class _Header:
    class stamp:
        sec, nanosec = 12, 500
    frame_id = 'cam_optical'


def _two_tracks():
    """Tracks 1 and 2 after two frames: object A moving +x at 0.5 m/s, B static."""
    tr = Tracker(TrackerConfig(birth_hits=2, measurement_std_m=1e-6, accel_std=1e-6))
    for k in range(3):
        d = Detections.from_boxes([[0.05 * k, 0, 1], [0.3, 0.1, 0.9]], [[0.1, 0.2, 0.3]] * 2, class_ids=[0, 1],
                                  labels=('cube', 'ball'))
        out = tr.update(d, stamp_s=0.1 * k)
    return out


@needs_msgs
def test_tracks_velocities_and_transforms_messages():
    from string_perception.codec.detection_msgs import image_to_tensor
    from string_perception.ros.track_messages import track_velocities_image, tracks_to_msg, tracks_to_transforms
    tracks = _two_tracks()
    assert tracks.ids.tolist() == [1, 2]
    msg = tracks_to_msg(tracks, _Header)
    assert [d.id for d in msg.detections] == ['1', '2'] and msg.header.frame_id == 'cam_optical'
    assert [d.results[0].hypothesis.class_id for d in msg.detections] == ['0', '1']     # ids; LabelInfo names them
    assert msg.detections[0].bbox.center.position.x == pytest.approx(0.1, abs=1e-6)
    vel = image_to_tensor(track_velocities_image(tracks, _Header))              # [T,4]
    np.testing.assert_allclose(vel, [[1, 0.5, 0, 0], [2, 0, 0, 0]], atol=1e-5)
    tfs = tracks_to_transforms(tracks, _Header, 'cam_left/object_')
    assert [t.child_frame_id for t in tfs] == ['cam_left/object_1', 'cam_left/object_2']
    assert all(t.header.frame_id == 'cam_optical' and (t.header.stamp.sec, t.header.stamp.nanosec) == (12, 500)
               for t in tfs)
    assert (tfs[1].transform.translation.x, tfs[1].transform.translation.y) == pytest.approx((0.3, 0.1))
    assert image_to_tensor(track_velocities_image(Tracker().update(Detections.empty()), _Header)).shape[1] == 4


def test_transform_tracks_rotates_velocities():
    from string_perception.ros.track_messages import transform_tracks
    tracks = _two_tracks()
    Rz = np.array([[0, -1.0, 0], [1, 0, 0], [0, 0, 1]])                      # 90 degrees about z
    moved = transform_tracks(tracks, Rz, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(moved.velocities[0], [0, 0.5, 0], atol=1e-5)
    np.testing.assert_allclose(moved.translations[1], [1.0 - 0.1, 2.0 + 0.3, 3.9], atol=1e-6)
    np.testing.assert_allclose(moved.rotations[0], Rz @ tracks.rotations[0], atol=1e-12)


@needs_msgs
def test_markers_are_coloured_per_track_and_labelled_with_the_id():
    from string_perception.codec.markers import BOX_NS, TEXT_NS, MarkerBuilder, track_colour
    tracks = _two_tracks()
    arr = MarkerBuilder().build(tracks, _Header)
    cubes = [m for m in arr.markers if m.ns == BOX_NS]
    texts = [m for m in arr.markers if m.ns == TEXT_NS]
    np.testing.assert_allclose([(m.color.r, m.color.g, m.color.b) for m in cubes], [track_colour(1), track_colour(2)],
                               atol=1e-6)                         # float32 colour fields
    assert [m.text for m in texts] == ['cube #1', 'ball #2']
    assert track_colour(1) != track_colour(2) and track_colour(7) == track_colour(7)


def test_tracker_config_from_parameters():
    cfg = P.validate_all({'track_birth_hits': 4, 'track_max_gap': 20, 'track_association': 'iou'})
    tc = P.tracker_config(cfg)
    assert (tc.birth_hits, tc.death_misses, tc.max_gap, tc.association) == (4, 3, 20, 'iou')
    assert P.tracker_config({**cfg, 'tracking': False}) is None
    with pytest.raises(ValueError, match='max_gap'):
        P.tracker_config({**cfg, 'track_death_misses': 30})
    with pytest.raises(ValueError):
        P.validate('track_association', 'greedy')


@needs_msgs
def test_vendored_tfmessage_has_the_upstream_type_hash():
    from pathlib import Path
    import tf2_msgs
    for parent in Path(tf2_msgs.__file__).resolve().parents:
        desc = parent / 'share' / 'tf2_msgs' / 'msg' / 'TFMessage.json'
        if desc.is_file():
            top = json.loads(desc.read_text())['type_hashes'][0]
            assert top == {'type_name': 'tf2_msgs/msg/TFMessage', 'hash_string': TFMESSAGE_UPSTREAM_HASH}
            return
    pytest.skip('tf2_msgs share directory not found next to the Python package')


# ---------------------------------------------------------------------------------------- a real node process
NODE_SCRIPT = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import rclpy
    from sensor_msgs.msg import CameraInfo, Image
    from tf2_msgs.msg import TFMessage
    from vision_msgs.msg import Detection3DArray
    from string_perception.codec.image_conversion import array_to_imgmsg
    from string_perception.ros.latency import FrameTiming
    from string_perception.codec.detection_msgs import image_to_tensor, stamp_to_ns
    from string_perception.ros.node import SUCCESS, StringPerceptionNode
    from string_perception.ros.track_messages import TfMessagePublisher
    from string_perception.scenes import SceneConfig, generate_frame
    rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', 'model_path:=' + sys.argv[1],
                     '-p', 'providers:=["CPUExecutionProvider"]', '-p', 'track_birth_hits:=2',
                     '-p', 'publish_tf:=true', '-p', 'tf_prefix:=obj_', '-p', 'skip_unsubscribed_outputs:=false'])
    node = StringPerceptionNode()
    assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
    out = {'tf_impl': type(node.outputs.tf_broadcaster).__name__}
    got = {'detections': [], 'tracks': [], 'velocities': [], 'tf': []}
    lis = rclpy.create_node('tracking_listener')
    ns = node.get_fully_qualified_name()
    lis.create_subscription(Detection3DArray, ns + '/detections', got['detections'].append, 50)
    lis.create_subscription(Detection3DArray, ns + '/tracks', got['tracks'].append, 50)
    lis.create_subscription(Image, ns + '/track_velocities', got['velocities'].append, 50)
    lis.create_subscription(TFMessage, '/tf', got['tf'].append, 50)
    deadline = time.monotonic() + 15
    while (lis.count_publishers('/tf') < 1 or lis.count_publishers(ns + '/tracks') < 1) and time.monotonic() < deadline:
        rclpy.spin_once(lis, timeout_sec=0.05)
    time.sleep(0.5)
    f = generate_frame(2_000_000_003, SceneConfig(height=240, width=320))
    info = CameraInfo(height=240, width=320, k=[float(v) for v in f.K.reshape(-1)])
    stamps = []
    for k in range(4):                       # the same scene 4 times, 100 ms apart: a static world
        img, dep = array_to_imgmsg(f.rgb, 'rgb8'), array_to_imgmsg(f.depth_mm, '16UC1')
        for m in (img, dep, info):
            m.header.frame_id = 'cam_optical'
            m.header.stamp.sec, m.header.stamp.nanosec = 100, k * 100_000_000
        s = stamp_to_ns(img.header.stamp)
        stamps.append(s)
        node._process((img, dep, info, FrameTiming(s, None, s, node.inputs.now_ns)))
    while len(got['detections']) < 4 and time.monotonic() < deadline:
        rclpy.spin_once(lis, timeout_sec=0.05)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        rclpy.spin_once(lis, timeout_sec=0.05)
    out['det_ids'] = [[d.id for d in m.detections] for m in got['detections']]
    out['det_stamps'] = [stamp_to_ns(m.header.stamp) for m in got['detections']]
    out['track_ids'] = [[d.id for d in m.detections] for m in got['tracks']]
    out['velocities'] = [image_to_tensor(m).tolist() for m in got['velocities']]
    out['tf'] = [[(t.header.frame_id, t.child_frame_id, stamp_to_ns(t.header.stamp)) for t in m.transforms]
                 for m in got['tf']]
    out['stamps'] = stamps
    lis.destroy_node()
    node.trigger_shutdown()
    print('RESULT ' + json.dumps(out), flush=True)
    node.destroy_node(); rclpy.try_shutdown()
''')


@pytest.mark.ros
@needs_msgs
def test_node_ids_velocities_and_tf_frames(tmp_path, model_path):
    from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_test_env
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        proc = pg.start_python('tracking_node', ['-c', NODE_SCRIPT, model_path])
        rc = proc.wait(timeout=90)
        log = proc.log(20000)
    assert rc == 0, log
    out = json.loads(log.split('RESULT ', 1)[1].splitlines()[0])
    assert out['tf_impl'] in ('TransformBroadcaster', 'TfMessagePublisher')
    ids = out['det_ids']
    assert out['det_stamps'] == out['stamps'] and len(ids) == 4
    n = len(ids[0])
    assert n > 0, 'the model detected nothing in the scene: the test would be vacuous'
    assert ids[0] == [''] * n                                   # one hit: tentative, no id yet
    assert sorted(ids[1], key=int) == [str(i) for i in range(1, n + 1)]   # confirmed at the 2nd hit
    assert ids[2] == ids[1] == ids[3]                           # the same detection keeps its id
    assert out['track_ids'][0] == [] and out['track_ids'][1] == sorted(ids[1], key=int)
    for v in out['velocities'][1:]:
        np.testing.assert_allclose(np.array(v)[:, 1:], 0.0, atol=1e-6)   # a static scene
    frames = [t for msg in out['tf'] for t in msg]
    want = {('cam_optical', f'obj_{i}', s) for i in range(1, n + 1) for s in out['stamps'][1:]}
    assert {tuple(t) for t in frames} == want


# ---------------------------------------------------------------------------------------- over DDS, moving objects
PEERS_MOVING_SEED, MOVING_FRAMES, H, W = 2_000_000_000, 30, 480, 640


@pytest.mark.ros
@pytest.mark.slow
@needs_msgs
def test_node_track_ids_over_dds_match_the_offline_tracker(tmp_path, model_path):
    """Publisher, node and listener processes on loopback DDS; one scene whose objects move. The node's
    Detection3D ids, ~/tracks ids and /tf frames equal the offline Pipeline + tracker run on the frames the node
    processed, with the same stamps; some object keeps its id for at least 10 frames."""
    from test.support.ros_helpers import HELPERS, ProcessGroup, percentile, reserved_domain_id, ros_test_env
    from string_perception.ros.node import node_command
    from string_perception.runtime import Pipeline
    from string_perception.runtime.model_variant import node_model_choice
    from string_perception.scenes import SceneConfig
    from string_perception.scenes.sequence import SequenceConfig, generate_sequence

    seq = generate_sequence(PEERS_MOVING_SEED, SequenceConfig(frames=MOVING_FRAMES), SceneConfig(height=H, width=W))
    offline = Pipeline(node_model_choice(model_path).path, providers=('CPUExecutionProvider',),   # the node's file
                       tracking=P.tracker_config(P.defaults()))
    offline.set_params(score_threshold=P.effective_score_threshold(-1.0, offline.model.metadata))
    total_ms = percentile([offline(s.frame.rgb, s.frame.depth_mm, s.frame.K).timings['total_ms'] for s in seq[:5]], 95)
    rate = min(30.0, 1000.0 / (2.5 * total_ms))                      # the node keeps up on a loaded CPU
    offline.set_tracking(P.tracker_config(P.defaults()))             # a fresh tracker: ids from 1, as the node
    prefix, peers = '/sp_track_cam', HELPERS.parent / 'node_peers.py'
    pub_json, lis_json, ready = tmp_path / 'published.json', tmp_path / 'received.json', tmp_path / 'ready'
    cmd = node_command(model_path, params={'providers': ['CPUExecutionProvider'], 'sync_slop': 0.02,
                                           'publish_tf': True, 'tf_prefix': 'obj_'},
                       remaps={'image': f'{prefix}/color/image_raw', 'depth': f'{prefix}/depth/image_raw',
                               'camera_info': f'{prefix}/color/camera_info'})
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        lis = pg.start_python('listener', [str(peers), 'output-listener', '--out', str(lis_json), '--ready',
                                           str(ready), '--publisher-done', str(pub_json), '--timeout', '80',
                                           '--tracking'])
        node = pg.start_python('node', cmd[1:])
        pub = pg.start_python('publisher', [str(peers), 'frame-publisher', '--prefix', prefix, '--out', str(pub_json),
                                            '--listener-ready', str(ready), '--frames', str(MOVING_FRAMES),
                                            '--rate', str(rate), '--first-seed', str(PEERS_MOVING_SEED),
                                            '--height', str(H), '--width', str(W), '--moving'])
        rc_pub, rc_lis = pub.wait(timeout=90), lis.wait(timeout=30)
        node.stop()
        logs = pg.logs()
    assert rc_pub == 0 and rc_lis == 0, logs
    sent, got = json.loads(pub_json.read_text()), json.loads(lis_json.read_text())
    index_of = {int(s): int(k) - PEERS_MOVING_SEED for k, s in sent['stamps'].items()}
    processed = sorted(int(s) for s in got['detections'])
    assert len(processed) >= 0.8 * MOVING_FRAMES, logs

    life: dict[str, int] = {}
    for stamp in processed:                                         # the frames the node's tracker saw, in order
        s = seq[index_of[stamp]]
        ref = offline(s.frame.rgb, s.frame.depth_mm, s.frame.K, encoding='rgb8', depth_encoding='16UC1',
                      intrinsics_hw=(H, W), stamp_s=stamp * 1e-9)
        want = [str(i) if i >= 0 else '' for i in ref.tracks.detection_ids]
        assert got['detections'][str(stamp)]['ids'] == want, f'frame {index_of[stamp]}'
        assert got['tracks'].get(str(stamp)) == [str(i) for i in ref.tracks.ids], f'frame {index_of[stamp]}'
        for i in want:
            if i:
                life[i] = life.get(i, 0) + 1
    assert life and max(life.values()) >= 10, life
    tf = {tuple(t) for t in got['tf']}
    assert tf == {(FRAME, f'obj_{i}', int(s)) for s, ids in got['tracks'].items() for i in ids}, logs


FRAME = 'camera_color_optical_frame'

"""What the node publishes besides boxes (issue 34 items 1, 6, 7, 8; issue 36 item 3): a /diagnostics status named
after the node whose level recovers once a window passes without trouble (totals kept); transforms to
target_frame looked up without waiting in the input callback, from a listener with its own thread; the tf2_ros
fallbacks demanding what tf2_ros demands; marker lifetime; labels drawn along the frame's up axis."""
import inspect
import sys
import threading
import time
import types

import numpy as np
import pytest

from test.support.ros_helpers import ros_skip_reason
from test.support.tf2_stand_in import FakeTf2
from string_perception import node_params as P
from string_perception.ros.diagnostics import NodeStats, status_name
from string_perception.runtime.postprocess import Detections

needs_msgs = pytest.mark.skipif(ros_skip_reason('vision_msgs', 'tf2_msgs') is not None,
                                reason='message packages missing')


def _header(frame='cam_optical', sec=3):
    from std_msgs.msg import Header
    h = Header(frame_id=frame)
    h.stamp.sec = sec
    return h


# ---------------------------------------------------------------------------------------------- diagnostics
def _status(stats, node_name='string_perception', active=True):
    from builtin_interfaces.msg import Time
    from string_perception.ros.diagnostics import diagnostic_array
    st = diagnostic_array(stats.snapshot(), Time(), node_name=node_name, hardware_id=f'/{node_name}',
                          provider='CPUExecutionProvider', active=active).status[0]
    return st.level[0], st.message, {v.key: v.value for v in st.values}, st.name


def test_status_name_is_diagnostic_updaters_node_colon_task():
    assert status_name('string_perception_left') == 'string_perception_left: pipeline'
    assert status_name('string_perception_policy', 'policy') == 'string_perception_policy: policy'


@needs_msgs
def test_nodes_of_one_launch_publish_distinct_statuses():
    names = [_status(NodeStats(), f'string_perception_{cam}')[3] for cam in ('left', 'right', 'top')]
    assert names == ['string_perception_left: pipeline', 'string_perception_right: pipeline',
                     'string_perception_top: pipeline']


@needs_msgs
def test_level_returns_to_ok_after_the_window_and_the_totals_stay():
    now = [0.0]
    s = NodeStats(clock=lambda: now[0], level_window_s=5.0)
    levels = []
    for t in range(1, 15):                   # one diagnostics period per second, frames flowing throughout
        s.count_input('image'), s.count_synced(), s.frame_done(10.0, 3.0)
        if t == 2:
            s.error('internal')              # e.g. the 57-byte PNG claiming 50000 x 50000 (issue 36)
        if t == 9:
            s.bad_input('bad_intrinsics')
        now[0] = float(t)
        level, message, kv, _ = _status(s)
        levels.append(level)
        if t == 3:
            assert message == 'inference errors in the last 5 s: internal=1' and kv['recent_errors.internal'] == '1'
    # error counted at the snapshot of t=2; the window [t-5, t] still holds it until t=7; the bad input likewise
    assert levels == [0, 2, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 1, 0], levels
    s.count_input('image'), s.count_synced(), s.frame_done(10.0, 3.0)
    now[0] = 15.0
    level, message, kv, _ = _status(s)
    assert level == 0 and message.endswith('Hz, latency p50 10.0 ms')
    assert kv['errors.internal'] == '1' and kv['bad_inputs.bad_intrinsics'] == '1'      # totals since configure
    assert not any(k.startswith('recent_') for k in kv) and kv['level_window_s'] == '5.000'


def test_recent_counts_come_from_the_snapshot_at_least_a_window_old():
    now = [0.0]
    s = NodeStats(clock=lambda: now[0], level_window_s=2.0)
    s.error('internal'), s.error('internal')
    assert s.snapshot()['recent_errors'] == {'internal': 2}       # t=0: all since configure
    now[0] = 1.0
    s.error('runtime_failure')
    assert s.snapshot()['recent_errors'] == {'internal': 2, 'runtime_failure': 1}
    now[0] = 2.5                              # the t=0 snapshot is the newest one at least 2 s old
    assert s.snapshot()['recent_errors'] == {'runtime_failure': 1}
    now[0] = 3.0                              # now the t=1 one
    assert s.snapshot()['recent_errors'] == {}
    assert s.snapshot()['errors'] == {'internal': 2, 'runtime_failure': 1}


# ---------------------------------------------------------------------------------------------- markers
def _one_box(t=(1.0, 2.0, 3.0), size=(0.1, 0.2, 0.05)) -> Detections:
    R = np.eye(3)[None]
    return Detections(translations=np.array([t]), rotations=R, quaternions_xyzw=np.array([[0.0, 0.0, 0.0, 1.0]]),
                      sizes=np.array([size]), class_ids=np.array([0]), class_names=['mug'], scores=np.array([0.9]),
                      token_indices=np.array([0]))


@needs_msgs
@pytest.mark.parametrize('seconds,expected', [(1.0, (1, 0)), (0.25, (0, 250_000_000)), (2.5, (2, 500_000_000)),
                                              (0.0, (0, 0))])
def test_every_marker_carries_the_lifetime(seconds, expected):
    from string_perception.codec.markers import MarkerBuilder
    out = MarkerBuilder(lifetime_s=seconds).build(_one_box(), _header())
    assert len(out.markers) == 2
    assert [(m.lifetime.sec, m.lifetime.nanosec) for m in out.markers] == [expected, expected]


def test_up_axis_of_optical_and_other_frames():
    from string_perception.codec.markers import up_axis
    assert up_axis('cam_optical', 'cam_optical').tolist() == [0.0, -1.0, 0.0]     # the image's own frame
    assert up_axis('camera_color_optical_frame', 'x').tolist() == [0.0, -1.0, 0.0]
    assert up_axis('base_link', 'camera_color_optical_frame').tolist() == [0.0, 0.0, 1.0]
    assert up_axis('world').tolist() == [0.0, 0.0, 1.0]


@needs_msgs
def test_label_sits_above_the_box_along_the_frames_up_axis():
    from string_perception.codec.markers import TEXT_NS, MarkerBuilder
    b, lift = MarkerBuilder(), 0.5 * 0.2 + 0.02          # half the largest extent + 2 cm

    def label(frame, image_frame=None):
        out = b.build(_one_box(), _header(frame), image_frame)
        (m,) = [m for m in out.markers if m.ns == TEXT_NS]
        return [m.pose.position.x, m.pose.position.y, m.pose.position.z]
    assert label('cam_optical') == pytest.approx([1.0, 2.0 - lift, 3.0])                   # optical: -y is up
    assert label('cam_optical', 'cam_optical') == pytest.approx([1.0, 2.0 - lift, 3.0])
    assert label('base_link', 'cam_optical') == pytest.approx([1.0, 2.0, 3.0 + lift])      # target_frame z-up
    assert label('left_camera_optical_frame', 'cam_optical') == pytest.approx([1.0, 2.0 - lift, 3.0])


# ---------------------------------------------------------------------------------------------- tf2 checks
def test_target_frame_is_accepted_exactly_when_tf_lookup_can_work(monkeypatch):
    from string_perception.node_params import TF2_NAMES, import_tf2
    fake = FakeTf2().module
    monkeypatch.setitem(sys.modules, 'tf2_ros', fake)
    assert import_tf2() is fake and P.tf2_available() and P.validate('target_frame', 'base_link') == 'base_link'
    for name in TF2_NAMES:                     # a tf2_ros without one of them: tf_lookup could not run
        partial = types.ModuleType('tf2_ros')
        for other in set(TF2_NAMES) - {name}:
            setattr(partial, other, getattr(fake, other))
        monkeypatch.setitem(sys.modules, 'tf2_ros', partial)
        with pytest.raises(ImportError, match=name):
            import_tf2()
        assert P.tf2_available() is False
        with pytest.raises(ValueError, match='needs tf2_ros'):
            P.validate('target_frame', 'base_link')
    monkeypatch.setitem(sys.modules, 'tf2_ros', None)
    assert P.tf2_available() is False


def _ros_context(monkeypatch, domain):
    import rclpy
    from string_perception.dds_env import merged_dds_env
    for k, v in merged_dds_env(domain).items():
        monkeypatch.setenv(k, v)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    return ctx


def _transform(parent, child, xyz, stamp_sec=3):
    from geometry_msgs.msg import TransformStamped
    tf = TransformStamped()
    tf.header.frame_id, tf.child_frame_id = parent, child
    tf.header.stamp.sec = stamp_sec
    tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z = xyz
    s = np.sqrt(0.5)                           # 90 degrees about x
    tf.transform.rotation.x, tf.transform.rotation.w = s, s
    return tf


@pytest.mark.ros
@needs_msgs
def test_tf_miss_costs_no_wait_and_transforms_arrive_while_the_node_is_busy(monkeypatch):
    """The node's executor never spins here (as while the inline callback runs the pipeline): a lookup that misses
    returns at once without asking the buffer to wait and counts the miss, and a transform published meanwhile
    still reaches the buffer, through the listener's own node and thread."""
    import rclpy
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.ros.tf_lookup import TfLookup
    from string_perception.ros.track_messages import TfMessagePublisher
    fake = FakeTf2()
    with reserved_domain_id() as domain:
        ctx = _ros_context(monkeypatch, domain)
        try:
            node = rclpy.create_node('sp_tf_test', namespace='/cell', context=ctx)
            tf = TfLookup(node, tf2=fake.module)
            assert fake.listener.node is tf.listener_node and tf.listener_node is not node
            assert (tf.listener_node.get_name(), tf.listener_node.get_namespace()) == ('sp_tf_test_tf_listener',
                                                                                       '/cell')
            assert tf.lookup('base_link', 'cam_optical', _header().stamp) is None
            assert tf.misses == 1 and fake.buffer.timeouts == [0] and 'does not exist' in tf.last_error

            sender = rclpy.create_node('tf_sender', context=ctx)
            broadcaster = TfMessagePublisher(sender)
            deadline, moved = time.monotonic() + 60, None
            while moved is None and time.monotonic() < deadline:      # discovery, then the listener thread
                broadcaster.sendTransform(_transform('base_link', 'cam_optical', (0.5, -0.25, 1.0)))
                time.sleep(0.05)
                moved = tf.lookup('base_link', 'cam_optical', _header().stamp)
            assert moved is not None, 'the listener thread never received /tf'
            R, t = moved
            assert t.tolist() == [0.5, -0.25, 1.0]
            assert R == pytest.approx(np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]]), abs=1e-12)
            assert set(fake.buffer.timeouts) == {0}                  # tf_timeout 0: never asked to wait

            tf.wait_s = 0.2                                           # tf_timeout > 0 is passed on as the wait
            assert tf.lookup('map', 'cam_optical', _header().stamp) is None
            assert fake.buffer.timeouts[-1] == 200_000_000

            thread = tf._thread
            tf.close()
            tf.close()                                                # idempotent
            assert not thread.is_alive()
        finally:
            rclpy.shutdown(context=ctx)


@pytest.mark.ros
@needs_msgs
def test_fallback_broadcaster_takes_and_does_what_tf2_ros_does(monkeypatch):
    """geometry2's TransformBroadcaster(node, qos=None): QoSProfile(depth=100) or the given profile / depth, the
    publisher as pub_tf, sendTransform of one transform, a list or any iterable; anything else is refused when
    the TFMessage is published, as upstream's is."""
    import rclpy
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.ros.track_messages import TfMessagePublisher
    assert list(inspect.signature(TfMessagePublisher).parameters) == ['node', 'qos']
    with reserved_domain_id() as domain:
        ctx = _ros_context(monkeypatch, domain)
        try:
            node = rclpy.create_node('tf_fallback_test', context=ctx)
            b = TfMessagePublisher(node)
            q = b.pub_tf.qos_profile
            assert (q.depth, q.history, q.reliability, q.durability) == (
                100, HistoryPolicy.KEEP_LAST, ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE)
            assert b.pub_tf.topic_name == '/tf'
            assert TfMessagePublisher(node, 7).pub_tf.qos_profile.depth == 7
            latched = TfMessagePublisher(node, QoSProfile(depth=3, durability=DurabilityPolicy.TRANSIENT_LOCAL))
            assert latched.pub_tf.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL

            sent, lock = [], threading.Lock()

            class Recorder:
                def publish(self, msg):
                    with lock:
                        sent.append([t.child_frame_id for t in msg.transforms])
            b.pub_tf = Recorder()
            a, c = _transform('cam', 'object_1', (0, 0, 1)), _transform('cam', 'object_2', (0, 0, 2))
            b.sendTransform(a)
            b.sendTransform([a, c])
            b.sendTransform((c, a))
            b.sendTransform(t for t in (a, c))
            assert sent == [['object_1'], ['object_1', 'object_2'], ['object_2', 'object_1'],
                            ['object_1', 'object_2']]
            with pytest.raises((AssertionError, AttributeError, TypeError)):    # a str is an iterable of str:
                TfMessagePublisher(node).sendTransform('object_1')      # refused on publish, as with tf2_ros
            assert node.destroy_publisher(latched.pub_tf)     # what the node does at cleanup
        finally:
            rclpy.shutdown(context=ctx)


# ---------------------------------------------------------------------------------------------- the node, target_frame
NODE_TF_SCRIPT = r'''
import json, sys, time
from test.support.tf2_stand_in import FakeTf2
fake = FakeTf2()
sys.modules['tf2_ros'] = fake.module              # tf2_ros is not on PyPI: the stand-in with upstream's API
import numpy as np
import rclpy
from sensor_msgs.msg import CameraInfo
from vision_msgs.msg import Detection3DArray
from visualization_msgs.msg import MarkerArray
from string_perception.codec.image_conversion import array_to_imgmsg
from string_perception.ros.node import StringPerceptionNode, SUCCESS
from string_perception.ros.track_messages import TfMessagePublisher
rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', 'model_path:=' + sys.argv[1],
                 '-p', 'providers:=["CPUExecutionProvider"]', '-p', 'target_frame:=base_link',
                 '-p', 'score_threshold:=0.0', '-p', 'max_detections:=3', '-p', 'tracking:=false'])
node = StringPerceptionNode()
out = {'configure': node.trigger_configure() == SUCCESS, 'activate': node.trigger_activate() == SUCCESS}
peer = rclpy.create_node('tf_peer')
dets, markers = [], []
peer.create_subscription(Detection3DArray, node.outputs.publishers['detections'].topic_name, dets.append, 10)
peer.create_subscription(MarkerArray, node.outputs.publishers['markers'].topic_name, markers.append, 10)
deadline = time.monotonic() + 60
while node.outputs.publishers['markers'].get_subscription_count() < 1 and time.monotonic() < deadline:
    rclpy.spin_once(peer, timeout_sec=0.05)
rgb, depth = np.full((48, 64, 3), 90, np.uint8), np.full((48, 64), 800, np.uint16)
info = CameraInfo(height=48, width=64, k=[60.0, 0.0, 32.0, 0.0, 60.0, 24.0, 0.0, 0.0, 1.0])

def frame(sec):
    img, dep = array_to_imgmsg(rgb, 'rgb8'), array_to_imgmsg(depth, '16UC1')
    for m in (img, dep):
        m.header.frame_id, m.header.stamp.sec = 'cam_optical', sec
    return img, dep, info

node._process(frame(5))                # no transform yet: dropped at once, never waited for
snap = node.stats.snapshot()
out['miss'] = {'drops_tf': snap['drops']['tf'], 'published': snap['published'], 'timeouts': list(fake.buffer.timeouts),
               'listener_node': fake.listener.node.get_name()}
tf = TfMessagePublisher(peer)
from geometry_msgs.msg import TransformStamped
t = TransformStamped()
t.header.frame_id, t.child_frame_id, t.header.stamp.sec = 'base_link', 'cam_optical', 5
t.transform.translation.z = 1.0
t.transform.rotation.w = 1.0
while node.target.tf.lookup('base_link', 'cam_optical', t.header.stamp) is None and time.monotonic() < deadline:
    tf.sendTransform(t)                # nobody spins the node: the listener's own thread takes it
    time.sleep(0.05)
node._process(frame(5))
while (not dets or not markers) and time.monotonic() < deadline:
    rclpy.spin_once(peer, timeout_sec=0.05)
out['hit'] = {'published': node.stats.snapshot()['published'], 'frames': [d.header.frame_id for d in dets],
              'boxes': [[d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.position.z]
                        for d in dets[0].detections] if dets else [],
              'labels': [[m.pose.position.x, m.pose.position.y, m.pose.position.z] for m in markers[0].markers
                         if m.ns == 'labels'] if markers else [],
              'label_frames': sorted({m.header.frame_id for m in markers[0].markers}) if markers else []}
thread = node.target.tf._thread
out['cleanup'] = node.trigger_deactivate() == SUCCESS and node.trigger_cleanup() == SUCCESS
out['closed'] = node.target.tf is None and not thread.is_alive()
print('RESULT ' + json.dumps(out), flush=True)
peer.destroy_node(); node.destroy_node(); rclpy.try_shutdown()
'''


@pytest.mark.ros
@needs_msgs
def test_node_drops_a_frame_without_its_transform_at_once_and_moves_boxes_when_it_comes(tmp_path, model_path):
    import json
    from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_test_env
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        proc = pg.start_python('node_tf', ['-c', NODE_TF_SCRIPT, model_path])
        assert proc.wait(timeout=300) == 0, proc.log(20000)
        log = proc.log(20000)
    out = json.loads(log.split('RESULT ', 1)[1].splitlines()[0])
    assert out['configure'] and out['activate'] and out['cleanup'] and out['closed'], log
    assert out['miss'] == {'drops_tf': 1, 'published': 0, 'timeouts': [0], 'listener_node':
                           'string_perception_tf_listener'}, log
    hit = out['hit']
    assert hit['published'] == 1 and hit['frames'] == ['base_link'] and hit['label_frames'] == ['base_link'], log
    assert len(hit['boxes']) == len(hit['labels']) > 0, log
    for box, label in zip(hit['boxes'], hit['labels']):        # base_link is z-up: labels above along +z
        assert label[:2] == pytest.approx(box[:2]) and label[2] > box[2]

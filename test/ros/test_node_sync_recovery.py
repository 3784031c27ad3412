"""The node's default input path over real DDS (raw_image_input: image_cdr's RawImage into the synchroniser that
ros/synchronizer.py loaded) recovers by itself from poisoned synchroniser queues (issue 36 item 1, ros/sync_watchdog.py).

One node (tiny model, in this process) and one publisher node on a private loopback domain. Per pattern: the
poison is published, then good frames (colour + depth + CameraInfo, stamped with the node clock) one every
``PERIOD`` until one is processed. Every pattern must be answered within a bounded number of good frames
(derived from ``input_timeout``, never a wall-clock threshold), counted under its own ``sync_recoveries`` cause;
the good frames before and after must all be processed with no bad input counted.
"""
import time

import numpy as np
import pytest

from test.support.ros_helpers import reserved_domain_id, ros_skip_reason

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs')))]

S = 1_000_000_000
PERIOD, INPUT_TIMEOUT, QUEUE = 0.05, 0.5, 10
# good frames until the watchdog fires (one input_timeout of arrivals), + 1 to notice, + 3 to refill the partners;
# twice, for a recovery whose first guess does not help
MAX_GOOD_FRAMES = 2 * (int(INPUT_TIMEOUT / PERIOD) + 1) + 3


class Rig:
    def __init__(self, node, peer, executor):
        from sensor_msgs.msg import CameraInfo, Image
        from string_perception.codec.image_conversion import array_to_imgmsg
        from string_perception.qos import qos_profile
        self.node, self.executor = node, executor
        qos = qos_profile('reliable', 100)
        self.pubs = {'image': peer.create_publisher(Image, 'image', qos),
                     'depth': peer.create_publisher(Image, 'depth', qos),
                     'camera_info': peer.create_publisher(CameraInfo, 'camera_info', qos)}
        rng = np.random.default_rng(0)
        self.msgs = {'image': array_to_imgmsg(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8), 'rgb8'),
                     'depth': array_to_imgmsg(np.full((48, 64), 1500, np.uint16), '16UC1'),
                     'camera_info': CameraInfo(height=48, width=64, k=[60.0, 0, 32, 0, 60.0, 24, 0, 0, 1])}
        for m in self.msgs.values():
            m.header.frame_id = 'cam'

    def spin(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.005)

    def publish(self, names, stamp_ns):
        for n in names:
            m = self.msgs[n]
            m.header.stamp.sec, m.header.stamp.nanosec = stamp_ns // S, stamp_ns % S
            self.pubs[n].publish(m)

    def now_ns(self):
        return self.node.get_clock().now().nanoseconds

    def snap(self):
        return self.node.stats.snapshot()

    def good_until_processed(self, limit):
        """Good frames one per PERIOD until one is processed; returns how many were sent (None: none processed)."""
        before = self.snap()['processed']
        for k in range(1, limit + 1):
            self.publish(('image', 'depth', 'camera_info'), self.now_ns())
            self.spin(PERIOD)
            if self.snap()['processed'] > before:
                return k
        self.spin(1.0)
        return None

    def good_frames(self, n):
        """n good frames; returns how many were processed."""
        before = self.snap()['processed']
        for _ in range(n):
            self.publish(('image', 'depth', 'camera_info'), self.now_ns())
            self.spin(PERIOD)
        self.spin(0.5)
        return self.snap()['processed'] - before


@pytest.fixture
def rig(tmp_path, monkeypatch):
    rclpy = pytest.importorskip('rclpy')
    from rclpy.executors import SingleThreadedExecutor
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import SUCCESS, StringPerceptionNode
    from test.support.tiny_model import save_tiny_model
    model = save_tiny_model(tmp_path / 'tiny.onnx')
    args = ['-p', 'autostart:=false', '-p', f'model_path:={model}', '-p', 'providers:=["CPUExecutionProvider"]',
            '-p', f'input_timeout:={INPUT_TIMEOUT}', '-p', f'sync_queue_size:={QUEUE}', '-p', 'log_throttle:=0.0']
    for inp in ('image', 'depth', 'camera_info'):      # the patterns must not depend on best-effort luck
        args += ['-p', f'{inp}_qos_reliability:=reliable', '-p', f'{inp}_qos_depth:=100']
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(args=['x', '--ros-args', *args], context=ctx)
        node = StringPerceptionNode(context=ctx)
        peer = rclpy.create_node('sync_recovery_peer', context=ctx)
        executor = SingleThreadedExecutor(context=ctx)
        try:
            assert node.cfg == {} and node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
            assert node.cfg['raw_image_input'] is True          # the default input path
            executor.add_node(node)
            executor.add_node(peer)
            r = Rig(node, peer, executor)
            deadline = time.monotonic() + 30
            while not all(p.get_subscription_count() for p in r.pubs.values()) and time.monotonic() < deadline:
                r.spin(0.05)
            assert r.good_until_processed(200) is not None, 'the default input path never processed a frame'
            yield r
        finally:
            executor.shutdown()
            peer.destroy_node()
            node.destroy_node()
            rclpy.shutdown(context=ctx)


@pytest.mark.parametrize('names, offset_s, count, cause', [
    (('camera_info',), 3600.0, 11, 'ahead_camera_info'),      # the case: CameraInfo-only, 1 h ahead
    (('camera_info',), 3600.0, 40, 'ahead_camera_info'),      # more of them
    (('depth',), 10.0, 11, 'ahead_depth'),                    # depth-only, 10 s ahead
    (('image',), 3600.0, 11, 'ahead_image'),
    (('image', 'depth'), 3600.0, 11, 'ahead_image'),          # two inputs: the node clock tells who is wrong
    (('camera_info',), -10.0, 11, None),                      # stale: never blocks, no recovery needed
    (('depth',), -10.0, 11, None),
], ids=['camera_info_1h_x11', 'camera_info_1h_x40', 'depth_10s_x11', 'image_1h_x11', 'image_depth_1h_x11',
        'camera_info_stale_x11', 'depth_stale_x11'])
def test_poisoned_queues_recover_and_good_frames_are_answered(rig, names, offset_s, count, cause):
    before = rig.snap()
    base = rig.now_ns() + int(offset_s * S)
    for j in range(count):
        rig.publish(names, base + j * 1_000_000)
    rig.spin(0.2)
    sent = rig.good_until_processed(MAX_GOOD_FRAMES)
    after = rig.snap()
    assert sent is not None, f'not one good frame answered after {MAX_GOOD_FRAMES}: {after}'
    grew = {k: v - before['sync_recoveries'].get(k, 0) for k, v in after['sync_recoveries'].items()}
    grew = {k: v for k, v in grew.items() if v}
    print(f'[sync recovery] {"+".join(names)} {offset_s:+g} s x{count}: answered at good frame {sent} '
          f'(bound {MAX_GOOD_FRAMES}), recoveries {grew}')
    if cause is None:
        assert sent == 1 and grew == {}, (sent, grew)
    else:
        assert cause in grew, grew
        assert 'input warning (sync_stuck)' in rig.node._last_warn          # said why, in one (throttled) line
    assert after['bad_inputs'] == before['bad_inputs'], after['bad_inputs']  # poison is not a bad frame
    assert rig.good_frames(10) == 10                                       # and everything after is answered


def test_the_normal_path_is_unaffected(rig):
    """Good frames only: every one processed, no recovery, nothing refused."""
    n = 60
    assert rig.good_frames(n) == n
    snap = rig.snap()
    assert snap['sync_recoveries'] == {} and snap['bad_inputs'] == {}, snap


def test_a_stamp_the_synchroniser_refuses_is_a_bad_input_not_a_crash(rig):
    """A negative stamp makes rclpy.time.Time.from_msg raise (the real message_filters would raise it in the
    executor): counted as bad_stamp, never passed on; the node keeps answering."""
    from sensor_msgs.msg import CameraInfo
    bad = CameraInfo(height=48, width=64, k=[60.0, 0, 32, 0, 60.0, 24, 0, 0, 1])
    bad.header.stamp.sec = -5
    for _ in range(3):
        rig.pubs['camera_info'].publish(bad)
    rig.spin(0.3)
    assert rig.snap()['bad_inputs'].get('bad_stamp') == 3
    assert rig.good_frames(5) == 5

"""``string-perception-play --clock``: the player is a ROS time source (as ``ros2 bag play --clock``), and a node
with ``use_sim_time`` runs on the recording's time.

Over real DDS (loopback profile, own ROS_DOMAIN_ID): the player runs as its own process; this test process
subscribes to /clock, or starts the node (use_sim_time true) and listens to its detections and diagnostics.
"""
import time

import pytest

from test.support.bag_helpers import PERIOD_NS, START_NS, frames, write_bag
from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs', 'rosgraph_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs', 'rosgraph_msgs')))]

CAMERA_INFO = '/camera/color/camera_info'


def _log_times(bag):
    from string_perception.bags.reader import open_bag
    reader = open_bag(bag)
    try:
        return [t for _, t, _ in reader.messages()]
    finally:
        reader.close()


class _Listener:
    """An rclpy context of this process on the test's domain; ``spin_while(cond)`` spins its node."""

    def __init__(self, monkeypatch, domain):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from string_perception.dds_env import merged_dds_env
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        self.ctx = rclpy.Context()
        rclpy.init(args=None, context=self.ctx)
        self.node = rclpy.create_node('clock_listener', context=self.ctx)
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)

    def subscribe(self, msg_class, topic, callback, best_effort=False):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else
                         ReliabilityPolicy.RELIABLE)
        return self.node.create_subscription(msg_class, topic, callback, qos)

    def spin_while(self, cond, timeout):
        deadline = time.monotonic() + timeout
        while cond() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.02)

    def close(self):
        import rclpy
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def test_play_clock_publishes_the_recorded_time(tmp_path, monkeypatch):
    """/clock starts at the bag's first recorded time and steps by 1/HZ s of bag time (x rate), never past the
    last message, in order; without --clock nothing is published on /clock."""
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo
    bag = write_bag(tmp_path / 'bag', frames(24))                     # 0.77 s of recording
    times = _log_times(bag)
    first, last = times[0], times[-1]
    hz, rate = 50.0, 2.0
    step_ns = round(1e9 / hz * rate)
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        listener = _Listener(monkeypatch, domain)
        try:
            clocks, infos = [], []
            listener.subscribe(Clock, '/clock', lambda m: clocks.append(_ns(m.clock)), best_effort=True)
            listener.subscribe(CameraInfo, CAMERA_INFO, lambda m: infos.append(_ns(m.header.stamp)))
            for with_clock in (False, True):
                args = ['-m', 'string_perception.bags.play', str(bag), '--rate', str(rate),
                        '--wait-for-subscribers', '1', '--wait-topics', CAMERA_INFO]
                play = pg.start_python(f'play_{with_clock}', args + (['--clock', str(hz)] if with_clock else []))
                listener.spin_while(lambda: play.popen.poll() is None, 60)
                assert play.wait(timeout=10) == 0, pg.logs()
                listener.spin_while(lambda: True, 0.5)                 # the last samples in flight
                if not with_clock:
                    assert clocks == [] and len(infos) == 24, pg.logs()
        finally:
            listener.close()
    assert len(infos) == 48                                           # both plays delivered the bag
    # 0.77 s of bag at x2 is ~0.38 s of wall time: ~19 ticks at 50 Hz; best effort may drop a few
    assert len(clocks) >= 10, clocks
    assert clocks == sorted(clocks)
    assert all(first <= c <= last and (c - first) % step_ns == 0 for c in clocks), (first, last, clocks)
    assert clocks[-1] >= last - 3 * step_ns                            # it reached the end of the recording


def test_node_with_use_sim_time_answers_a_replayed_bag_on_its_time(tmp_path, monkeypatch, model_path):
    """The node (use_sim_time true) fed by ``play --clock``: it answers the frames with their stamps, and its
    clock (the stamps of its /diagnostics, a timer on the node clock) is the recording's, not the wall clock."""
    from diagnostic_msgs.msg import DiagnosticArray
    from vision_msgs.msg import Detection3DArray
    from string_perception.ros.node import READY_LINE, node_command
    n = 30
    bag = write_bag(tmp_path / 'bag', frames(n))                      # 1 s of recording
    times = _log_times(bag)
    stamps = {START_NS + i * PERIOD_NS for i in range(n)}
    cmd = node_command(model_path, params={'providers': ['CPUExecutionProvider'], 'use_sim_time': True,
                                           'diagnostics_period': 0.1},
                       remaps={'image': '/camera/color/image_raw', 'depth': '/camera/depth/image_raw',
                               'camera_info': CAMERA_INFO})
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        listener = _Listener(monkeypatch, domain)
        try:
            dets, diags = [], []
            listener.subscribe(Detection3DArray, '/string_perception/detections',
                               lambda m: dets.append(_ns(m.header.stamp)))
            listener.subscribe(DiagnosticArray, '/diagnostics', lambda m: diags.append(_ns(m.header.stamp)))
            node = pg.start_python('node', cmd[1:])
            assert node.wait_for_line(READY_LINE, 60), pg.logs()
            play = pg.start_python('play', ['-m', 'string_perception.bags.play', str(bag), '--clock', '--rate',
                                            '0.5', '--wait-for-subscribers', '1', '--wait-topics', CAMERA_INFO])
            listener.spin_while(lambda: play.popen.poll() is None, 90)
            assert play.wait(timeout=10) == 0, pg.logs()
            listener.spin_while(lambda: len(dets) < n, 5)               # the last answers
            assert node.stop() == 0, pg.logs()
        finally:
            listener.close()
    assert len(dets) >= n // 2 and set(dets) <= stamps, (len(dets), pg.logs())
    on_bag_time = [d for d in diags if times[0] <= d <= times[-1]]
    # diagnostics every 0.1 s of sim time over ~1 s of recording; before the first /clock the node clock reads 0
    assert len(on_bag_time) >= 5 and all(d == 0 or times[0] <= d <= times[-1] for d in diags), diags

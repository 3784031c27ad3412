"""ros/lifecycle_node.py: what the perception and policy nodes share (QoS from parameters, per-kind throttled
warnings, cleanup releasing timer + publishers, the diagnostics guard after shutdown, the console script's exit
statuses). In-process nodes on a reserved loopback domain."""
import signal

import pytest

from test.support.ros_helpers import ros_skip_reason

pytestmark = [pytest.mark.ros, pytest.mark.skipif(ros_skip_reason('diagnostic_msgs') is not None,
                                                  reason='rclpy / diagnostic_msgs missing')]


@pytest.fixture
def dds_env(monkeypatch):
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.dds_env import merged_dds_env
    old = signal.getsignal(signal.SIGTERM)                  # run_lifecycle_node installs its own handler
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        yield domain
    signal.signal(signal.SIGTERM, old)


def test_qos_profile_maps_the_parameter_values():
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, ReliabilityPolicy
    from string_perception.qos import qos_profile
    q = qos_profile('best_effort', 3)
    assert (q.reliability, q.depth, q.history, q.durability) == (
        ReliabilityPolicy.BEST_EFFORT, 3, HistoryPolicy.KEEP_LAST, DurabilityPolicy.VOLATILE)
    q = qos_profile('reliable', 1, DurabilityPolicy.TRANSIENT_LOCAL)
    assert (q.reliability, q.depth, q.durability) == (ReliabilityPolicy.RELIABLE, 1, DurabilityPolicy.TRANSIENT_LOCAL)


class _Log:
    def __init__(self):
        self.lines = []

    def warning(self, msg):
        self.lines.append(msg)


def test_warnings_throttle_per_kind_cleanup_releases_outputs_and_no_diagnostics_after_shutdown(dds_env):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from string_perception.qos import qos_profile
    from string_perception.ros.lifecycle_node import SUCCESS, ManagedNode
    ctx = rclpy.Context()
    rclpy.init(args=['x'], context=ctx)
    node = ManagedNode('managed_node_test', context=ctx)
    diag_qos = qos_profile('reliable', 10)
    try:
        log = _Log()
        node.get_logger = lambda: log
        node.cfg = {'log_throttle': 60.0}
        node._warn('a', 'first')
        node._warn('a', 'second')                           # same kind within the throttle: dropped
        node._warn('b', 'other kind')                       # another kind is not hidden by the first
        assert log.lines == ['a: first (counted in /diagnostics; node continues)',
                             'b: other kind (counted in /diagnostics; node continues)']
        node.cfg = {'log_throttle': 0.0}
        node._warn('a', 'third')
        assert len(log.lines) == 3

        assert node._diagnostics_publisher() is None        # not configured: nothing to publish on
        assert node.trigger_configure() == SUCCESS
        before = len(list(node.publishers))
        node._pubs = {'diagnostics': node.create_publisher(DiagnosticArray, '/diagnostics', diag_qos)}
        node._diag_timer = node.create_timer(10.0, lambda: None)
        assert node._diagnostics_publisher() is node._pubs['diagnostics']
        assert node.trigger_cleanup() == SUCCESS            # cleanup: timer and publishers destroyed
        assert node._pubs == {} and node._diag_timer is None and len(list(node.publishers)) == before
        assert not list(node.timers)

        assert node.trigger_configure() == SUCCESS
        node._pubs = {'diagnostics': node.create_publisher(DiagnosticArray, '/diagnostics', diag_qos)}
        rclpy.shutdown(context=ctx)                         # SIGINT / SIGTERM: the context goes down first
        assert node._diagnostics_publisher() is None        # a late timer publishes nothing
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)


def _node_class(configure_ok: bool):
    from string_perception.ros.lifecycle_node import FAILURE, SUCCESS, ManagedNode

    class Node(ManagedNode):
        def __init__(self):
            super().__init__('run_lifecycle_node_test')
            self.declare_parameter('autostart', True)

        def on_configure(self, state):
            return SUCCESS if configure_ok else FAILURE
    return Node


class _Executor:
    """Records the node; ``spin`` does what the test asks."""
    def __init__(self, spin):
        self.spin, self.shut = spin, False

    def add_node(self, node):
        self.node = node

    def shutdown(self):
        self.shut = True


def test_run_lifecycle_node_exit_statuses(dds_env, capsys):
    import rclpy
    from string_perception.ros.lifecycle_node import run_lifecycle_node

    def bad_executor(_node):
        raise ValueError("executor must be one of ['single_threaded', ...], got 'fancy'")
    assert run_lifecycle_node(_node_class(True), 'demo', ['x'], bad_executor, lambda n: 'ready') == 2
    assert "demo: invalid parameter: executor must be" in capsys.readouterr().err and not rclpy.ok()

    ex = _Executor(spin=lambda: pytest.fail('spun after a failed autostart'))
    assert run_lifecycle_node(_node_class(False), 'demo', ['x'], lambda n: (ex, ex.spin), lambda n: 'ready') == 1
    assert ex.shut and not rclpy.ok()

    def spin_until_signal():                                # a callback raising while SIGINT shuts the context down
        rclpy.shutdown()
        raise RuntimeError("publisher's context is invalid")
    ex = _Executor(spin=spin_until_signal)
    assert run_lifecycle_node(_node_class(True), 'demo', ['x'], lambda n: (ex, ex.spin), lambda n: 'demo ready') == 0
    out = capsys.readouterr()
    assert 'demo ready' in out.out and "ignored during shutdown: RuntimeError: publisher's context" in out.err

    def spin_fails():                                       # the same error with the context up is a real failure
        raise RuntimeError('a real bug')
    ex = _Executor(spin=spin_fails)
    with pytest.raises(RuntimeError, match='a real bug'):
        run_lifecycle_node(_node_class(True), 'demo', ['x'], lambda n: (ex, ex.spin), lambda n: 'ready')
    assert ex.shut and not rclpy.ok()                       # stopped and shut down all the same


def test_make_executor_gives_each_kind_its_executor(dds_env):
    import rclpy
    from string_perception.ros.lifecycle_node import make_executor
    rclpy.init(args=['x'])
    try:
        for kind, name in (('single_threaded', 'SingleThreadedExecutor'), ('multi_threaded', 'MultiThreadedExecutor'),
                           ('events', 'EventsExecutor')):     # rclpy.experimental.EventsExecutor is a factory
            executor, spin = make_executor(kind)
            assert type(executor).__name__ == name, kind
            assert (spin == executor.spin) == (kind != 'events'), kind     # events: spun in 0.1 s slices
            executor.shutdown()
    finally:
        rclpy.try_shutdown()

"""What the package's two lifecycle nodes share: the perception node (``node.py``) and the policy node
(``policy_node.py``) differ in what they subscribe, run and publish, not in how they start, log and stop (their
QoS profile: ``string_perception.qos``).

- :class:`ManagedNode`: a ``LifecycleNode`` with the per-kind throttled warning, /diagnostics (counters, publisher
  and timer made at configure; the timer's guard: a timer that fires after SIGINT / SIGTERM shut the context down
  publishes nothing; the message named after the node), and cleanup / shutdown as
  "stop the inputs, release the outputs" (subclasses extend ``_stop_inputs`` / ``_release_outputs``);
- :func:`make_executor`: the ``executor`` parameter's value -> an rclpy executor and the function that spins it;
- :func:`run_lifecycle_node`: the console script's body (parameters checked at construction -> exit 2, autostart
  configure + activate -> ready line or exit 1, spin until SIGINT / SIGTERM, an exception raised after shutdown
  began is printed instead of failing the process, inputs stopped before the node is destroyed).
"""
from __future__ import annotations

import math
import signal
import sys
import time
from typing import Any, Callable, Sequence

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from ..qos import qos_profile
from .diagnostics import LEVEL_WINDOW_PERIODS, TASK_NAME, NodeStats, diagnostic_array

__all__ = ['ManagedNode', 'make_executor', 'run_lifecycle_node', 'SUCCESS', 'FAILURE']

SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE


class ManagedNode(LifecycleNode):
    """Lifecycle node state both nodes keep: ``cfg`` (validated parameters of the current configuration),
    ``stats`` (counters published on /diagnostics), publishers ``_pubs``, input subscribers ``_subs`` and their
    synchroniser ``_sync``, the diagnostics timer, whether the node is active."""

    def __init__(self, node_name: str, **kwargs):
        super().__init__(node_name, **kwargs)
        self.cfg: dict[str, Any] = {}
        self.stats = NodeStats()
        self._pubs: dict[str, Any] = {}
        self._subs: list[Any] = []
        self._sync = None
        self._diag_timer = None
        self._active = False
        self._last_warn: dict[str, float] = {}

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self._stop_inputs()
        self._release_outputs()
        return SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        return self.on_cleanup(state)

    def _stop_inputs(self) -> None:
        """Deactivate: no input callback does anything from here on; the subscriptions are gone."""
        self._active = False
        for sub in self._subs:      # an input that owns more than one subscription destroys itself
            sub.destroy_input() if hasattr(type(sub), 'destroy_input') else self.destroy_subscription(sub.sub)
        self._subs, self._sync = [], None

    def _release_outputs(self) -> None:
        """Cleanup: the diagnostics timer and every publisher are destroyed."""
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}

    def _warn(self, kind: str, message: str) -> None:
        """Warning throttled per kind (``log_throttle`` seconds), so one kind never hides another."""
        now = time.monotonic()
        if now - self._last_warn.get(kind, -math.inf) < self.cfg.get('log_throttle', 5.0):
            return
        self._last_warn[kind] = now
        self.get_logger().warning(f'{kind}: {message} (counted in /diagnostics; node continues)')

    def _start_diagnostics(self, period_s: float, publish: Callable[[], None], callback_group=None) -> None:
        """Configure: fresh ``stats`` (status level judged over :data:`LEVEL_WINDOW_PERIODS` periods), the
        /diagnostics publisher (reliable, depth 10) and the timer calling ``publish`` every ``period_s`` seconds."""
        self.stats = NodeStats(level_window_s=LEVEL_WINDOW_PERIODS * period_s)
        self._pubs['diagnostics'] = self.create_publisher(DiagnosticArray, '/diagnostics', qos_profile('reliable', 10))
        self._diag_timer = self.create_timer(period_s, publish, callback_group=callback_group)

    def _diagnostics_message(self, snap: dict[str, Any], provider: str, extra: dict[str, Any], task: str = TASK_NAME):
        """``diagnostics.diagnostic_array`` of ``snap`` stamped now, named after this node (status
        ``<node name>: <task>``, hardware id its fully qualified name)."""
        return diagnostic_array(snap, self.get_clock().now().to_msg(), node_name=self.get_name(), task=task,
                                hardware_id=self.get_fully_qualified_name(), provider=provider, active=self._active,
                                extra=extra)

    def _diagnostics_publisher(self):
        """The /diagnostics publisher, or None when there is nothing to publish on: not configured, or the
        context already shut down (the timer fired late, during SIGINT / SIGTERM)."""
        pub = self._pubs.get('diagnostics')
        return pub if pub is not None and self.context.ok() else None


def make_executor(kind: str = 'single_threaded') -> tuple[Any, Callable[[], None]]:
    """``kind`` (``single_threaded``, ``multi_threaded``: 2 threads, or ``events``) -> (executor, spin function).
    The events executor is spun in 0.1 s slices: its ``spin()`` holds the GIL, so a worker thread would never run."""
    if kind == 'events':
        from rclpy.experimental import EventsExecutor   # rclpy of Kilted and later only: imported when chosen
        executor = EventsExecutor()

        def spin_events():
            while rclpy.ok():
                executor.spin_once(timeout_sec=0.1)
        return executor, spin_events
    executor = MultiThreadedExecutor(num_threads=2) if kind == 'multi_threaded' else SingleThreadedExecutor()
    return executor, executor.spin


def run_lifecycle_node(make_node: Callable[[], ManagedNode], label: str, argv: Sequence[str] | None,
                       make_executor: Callable[[ManagedNode], tuple[Any, Callable[[], None]]],
                       ready_line: Callable[[ManagedNode], str]) -> int:
    """A console script's body; returns its exit status. ``make_executor(node)`` -> (executor, spin function); a
    ValueError from it is a bad parameter (exit 2, as a bad parameter at construction). With ``autostart`` the node
    configures and activates itself and prints ``ready_line(node)`` (exit 1 when either transition fails)."""
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
    from rclpy.executors import ExternalShutdownException
    rclpy.init(args=list(sys.argv if argv is None else argv))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        node = make_node()
    except (InvalidParameterTypeException, InvalidParameterValueException) as e:
        print(f'{label}: invalid parameter: {e}', file=sys.stderr, flush=True)
        rclpy.try_shutdown()
        return 2
    try:
        executor, spin = make_executor(node)
    except ValueError as e:
        print(f'{label}: invalid parameter: {e}', file=sys.stderr, flush=True)
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    executor.add_node(node)
    rc = 0
    try:
        if node.get_parameter('autostart').value:
            if node.trigger_configure() != SUCCESS or node.trigger_activate() != SUCCESS:
                node.get_logger().fatal('autostart failed (see the error above); exiting')
                rc = 1
            else:
                print(ready_line(node), flush=True)
        if rc == 0:
            spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as e:          # a callback still running when SIGINT / SIGTERM shut the context down
        if rclpy.ok():
            raise
        print(f'[{label}] ignored during shutdown: {type(e).__name__}: {e}', file=sys.stderr, flush=True)
    finally:
        node._stop_inputs()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return rc

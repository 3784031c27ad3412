"""What the package's two lifecycle nodes share: the perception node (``node.py``) and the policy node
(``policy_node.py``) differ in what they subscribe, run and publish, not in how they start, log and stop (their
QoS profile: ``string_perception.qos``).

- :class:`ManagedNode`: a ``LifecycleNode`` with the per-kind throttled warning, the diagnostics timer's guard
  (a timer that fires after SIGINT / SIGTERM shut the context down publishes nothing), and cleanup / shutdown as
  "stop the inputs, release the outputs" (subclasses extend ``_stop_inputs`` / ``_release_outputs``);
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
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from .diagnostics import NodeStats

__all__ = ['ManagedNode', 'run_lifecycle_node', 'SUCCESS', 'FAILURE']

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

    def _diagnostics_publisher(self):
        """The /diagnostics publisher, or None when there is nothing to publish on: not configured, or the
        context already shut down (the timer fired late, during SIGINT / SIGTERM)."""
        pub = self._pubs.get('diagnostics')
        return pub if pub is not None and self.context.ok() else None


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

"""Our ``message_filters`` (ROS 2, Python): ``ApproximateTimeSynchronizer``, ``Subscriber``, ``SimpleFilter``, same
contract.

The synchroniser and ``Subscriber`` are used only when the real ``message_filters`` is not importable (it is not on
PyPI); ``synchronizer.py`` picks. ``SimpleFilter`` and ``stamp_error`` also serve the node's own inputs
(``sequence_gaps``, ``compressed_input``), which feed either synchroniser. It demands
what the real package demands, with rclpy's own functions, so an input the real one refuses is refused here too
(in CI, where only this one runs):

- a stamp is converted as upstream does: used as is when it has ``nanoseconds`` (an ``rclpy.time.Time``), else
  ``rclpy.time.Time.from_msg(stamp)``, which accepts only a ``builtin_interfaces.msg.Time``
  (``TypeError: Must pass a builtin_interfaces.msg.Time object`` for anything else, a look-alike dataclass too)
  and refuses a negative one (``ValueError``);
- ``slop`` is ``rclpy.duration.Duration(seconds=slop)``; headerless messages (``allow_headerless=True``) get
  ``rclpy.clock.ROSClock().now()``.

The matching follows the upstream Python implementation (ros2/message_filters, Humble .. Kilted) step by step,
on the integer nanoseconds of those rclpy objects:

- one queue per input: a dict ``{stamp_ns: msg}`` (``sync.queues``, the dicts registered with each input, as
  upstream); a message whose stamp is already queued on that input replaces the earlier one;
- after inserting, while a queue holds more than ``queue_size`` messages the one with the OLDEST stamp is
  dropped (by stamp, not by arrival: a late message older than everything queued is dropped at once; a queue
  full of future stamps therefore drops every good message at once, see ``ros/sync_watchdog.py``);
- a match is searched only when a message arrives, and only around its stamp: every other input must have a
  queued stamp within ``slop`` of it (``|dt| <= slop``), candidates are tried closest first
  (``itertools.product`` order) and the first combination whose spread is STRICTLY below ``slop``
  (``max - min < slop``) is emitted; so two stamps exactly ``slop`` apart never match;
- the emitted messages are removed from their queues; nothing else is (older unmatched messages stay until
  pushed out by ``queue_size``);
- messages without ``header.stamp`` are ignored with a warning unless ``allow_headerless=True``;
- callbacks (``registerCallback(cb, *args)``) are called as ``cb(*msgs, *args)`` with one message per
  input, in input order, while the synchroniser's lock (``sync.lock``) is held (as upstream).

The synchroniser's arguments after ``slop`` are keyword-only here: upstream inserted ``queue_offset`` between
``slop`` and ``allow_headerless`` in 2026 (then ``sync_arrival_time``, ``time_getter``), so a fourth positional
argument means different things in different releases. :class:`Subscriber` accepts only the call form every
release accepts (see its docstring).
"""
from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, Callable

from rclpy.clock import ROSClock
from rclpy.duration import Duration
from rclpy.time import Time

__all__ = ['SimpleFilter', 'StampInput', 'Subscriber', 'ApproximateTimeSynchronizer', 'stamp_to_ns',
           'header_stamp_ns', 'slop_to_ns', 'stamp_error']

_log = logging.getLogger('message_filters_approx')


def stamp_to_ns(stamp: Any) -> int:
    """Nanoseconds of a stamp exactly as message_filters takes it: an object with ``nanoseconds`` (rclpy Time)
    as is, anything else through ``rclpy.time.Time.from_msg`` (TypeError unless a builtin_interfaces/Time,
    ValueError if negative)."""
    if hasattr(stamp, 'nanoseconds'):
        return int(stamp.nanoseconds)
    return Time.from_msg(stamp).nanoseconds


def header_stamp_ns(msg: Any) -> int | None:
    """``msg.header.stamp`` in nanoseconds (see :func:`stamp_to_ns`), or None for headerless messages."""
    if not hasattr(msg, 'header') or not hasattr(msg.header, 'stamp'):
        return None
    return stamp_to_ns(msg.header.stamp)


def stamp_error(msg: Any) -> str | None:
    """Why the synchroniser would refuse ``msg``'s stamp (its TypeError / ValueError text), or None if it would
    take it (headerless messages included). For inputs that must not raise inside the executor."""
    try:
        header_stamp_ns(msg)
    except (TypeError, ValueError, OverflowError) as e:
        return f'{type(e).__name__}: {e}'
    return None


def slop_to_ns(slop: float) -> int:
    """Seconds to integer nanoseconds: ``rclpy.duration.Duration(seconds=slop).nanoseconds``."""
    return Duration(seconds=slop).nanoseconds


class SimpleFilter:
    """Base of all filters: ``registerCallback`` / ``signalMessage`` as in message_filters."""

    def __init__(self) -> None:
        self.callbacks: dict[int, tuple[Callable, tuple]] = {}

    def registerCallback(self, cb: Callable, *args) -> int:  # noqa: N802 (upstream name)
        """Call ``cb(*messages, *args)`` whenever this filter outputs; returns a connection id."""
        conn = len(self.callbacks)
        self.callbacks[conn] = (cb, args)
        return conn

    def signalMessage(self, *msg) -> None:  # noqa: N802 (upstream name)
        for cb, args in list(self.callbacks.values()):
            cb(*(msg + args))


class StampInput(SimpleFilter):
    """A manually fed input (tests, bag playback): ``inp.add(msg)`` passes ``msg`` on."""

    def add(self, msg: Any) -> None:
        self.signalMessage(msg)


class Subscriber(SimpleFilter):
    """rclpy subscription as a filter: ``Subscriber(node, MsgType, topic, qos_profile=qos)``, nothing else.

    That is the one call form every release of the real ``message_filters.Subscriber`` accepts. Humble/Jazzy
    until late 2025 took ``(*args, **kwargs)`` and passed ``args[1:]`` positionally before its callback, so a
    positional fourth argument (the QoS) collided with ``qos_profile`` (TypeError); the releases with #220/#226
    (backported; Humble 4.3.12, Jan. 2026) took ``(node, msg_type, topic, qos_profile)`` with no ``**kwargs``
    (``callback_group=`` a TypeError) until #247 restored them (4.3.13 / 4.11.11 / 7.1.6, Feb. 2026). So: the QoS by keyword only,
    no other keyword, and node, type and topic positionally (``*args`` releases index them: IndexError as
    keywords). A caller that needs a callback group or a raw subscription subscribes itself, as
    ``ros/sequence_gaps.SequencedSubscriber`` does. Other attributes are served by the underlying subscription.
    """

    def __init__(self, node, msg_type, topic: str, /, *, qos_profile=10) -> None:
        SimpleFilter.__init__(self)
        self.node = node
        self.topic = topic
        self.sub = node.create_subscription(msg_type, topic, self.callback, qos_profile)

    def callback(self, msg) -> None:
        self.signalMessage(msg)

    def getTopic(self) -> str:  # noqa: N802 (upstream name)
        return self.topic

    def __getattr__(self, key):
        if key == 'sub':  # not yet set (failed construction): avoid infinite recursion
            raise AttributeError(key)
        return getattr(self.sub, key)


class ApproximateTimeSynchronizer(SimpleFilter):
    """Approximate-time synchroniser over ``fs`` (filters with ``registerCallback``); see module docstring.

    queue_size: messages kept per input; slop: seconds; allow_headerless: stamp headerless messages with the
    current ROS time instead of ignoring them (``clock``: a test hook returning that time in ns).
    """

    def __init__(self, fs, queue_size: int, slop: float, *, allow_headerless: bool = False,
                 clock: Callable[[], int] | None = None) -> None:
        SimpleFilter.__init__(self)
        self.queue_size = queue_size
        self.lock = threading.Lock()
        self.slop = Duration(seconds=slop)
        self.slop_ns = self.slop.nanoseconds
        self.allow_headerless = allow_headerless
        self.clock = clock or (lambda: ROSClock().now().nanoseconds)
        self.connectInput(fs)

    def connectInput(self, fs) -> None:  # noqa: N802 (upstream name)
        self.queues: list[dict[int, Any]] = [{} for _ in fs]
        self.input_connections = [f.registerCallback(self.add, q, i_q)
                                  for i_q, (f, q) in enumerate(zip(fs, self.queues))]

    def add(self, msg: Any, my_queue: dict[int, Any], my_queue_index: int | None = None) -> None:
        stamp = header_stamp_ns(msg)
        if stamp is None:
            if not self.allow_headerless:
                _log.warning('can not use message filters for messages without timestamp information when '
                             '"allow_headerless" is disabled; enable it to stamp headerless messages with '
                             'the current time')
                return
            stamp = int(self.clock())
        with self.lock:
            my_queue[stamp] = msg
            while len(my_queue) > self.queue_size:
                del my_queue[min(my_queue)]
            if my_queue_index is None:
                search_queues = self.queues
            else:
                search_queues = self.queues[:my_queue_index] + self.queues[my_queue_index + 1:]
            # per other input: stamps within slop of the new one, closest first (stable for ties)
            candidates: list[list[int]] = []
            for queue in search_queues:
                near = [(s, abs(s - stamp)) for s in queue if abs(s - stamp) <= self.slop_ns]
                if not near:
                    return
                near.sort(key=lambda x: x[1])
                candidates.append([s for s, _ in near])
            for combo in itertools.product(*candidates):
                vv = list(combo)
                if my_queue_index is not None:
                    vv.insert(my_queue_index, stamp)
                qt = list(zip(self.queues, vv))
                if max(vv) - min(vv) < self.slop_ns and all(t in q for q, t in qt):
                    msgs = [q[t] for q, t in qt]
                    self.signalMessage(*msgs)
                    for q, t in qt:
                        del q[t]
                    break

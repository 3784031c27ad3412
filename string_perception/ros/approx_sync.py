"""ROS-free equivalent of ROS 2 ``message_filters.ApproximateTimeSynchronizer`` (Python) and ``Subscriber``.

Used only when the real ``message_filters`` is not importable (it is not on PyPI); ``sync.py`` picks. The
behaviour follows the upstream Python implementation (ros2/message_filters, Humble .. Kilted) step by step,
on integer nanosecond stamps instead of rclpy Time/Duration objects:

- one queue per input: a dict ``{stamp_ns: msg}``; a message whose stamp is already queued on that input
  replaces the earlier one;
- after inserting, while a queue holds more than ``queue_size`` messages the one with the OLDEST stamp is
  dropped (by stamp, not by arrival: a late message older than everything queued is dropped at once);
- a match is searched only when a message arrives, and only around its stamp: every other input must have a
  queued stamp within ``slop`` of it (``|dt| <= slop``), candidates are tried closest first
  (``itertools.product`` order) and the first combination whose spread is STRICTLY below ``slop``
  (``max - min < slop``) is emitted; so two stamps exactly ``slop`` apart never match;
- the emitted messages are removed from their queues; nothing else is (older unmatched messages stay until
  pushed out by ``queue_size``);
- ``slop`` is seconds, converted like ``rclpy.duration.Duration(seconds=slop)`` (``int(slop * 1e9)`` ns);
- messages without ``header.stamp`` are ignored with a warning unless ``allow_headerless=True``, in which
  case they get the current time (``clock()``, default wall-clock ns, like ``ROSClock().now()`` without
  sim time);
- callbacks (``registerCallback(cb, *args)``) are called as ``cb(*msgs, *args)`` with one message per
  input, in input order, while the synchroniser's lock is held (as upstream).

Keep the synchroniser's constructor arguments after ``slop`` as keywords: upstream added parameters between
``slop`` and ``allow_headerless`` in later releases.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any, Callable

__all__ = ['SimpleFilter', 'StampInput', 'Subscriber', 'ApproximateTimeSynchronizer', 'stamp_to_ns',
           'header_stamp_ns']

_log = logging.getLogger('message_filters_approx')
S_TO_NS = 1000 * 1000 * 1000


def stamp_to_ns(stamp: Any) -> int:
    """Nanoseconds of an int, an rclpy Time (``.nanoseconds``) or a builtin_interfaces/Time (sec, nanosec)."""
    if isinstance(stamp, int):
        return stamp
    ns = getattr(stamp, 'nanoseconds', None)
    if ns is not None:
        return int(ns)
    return int(stamp.sec) * S_TO_NS + int(stamp.nanosec)


def header_stamp_ns(msg: Any) -> int | None:
    """``msg.header.stamp`` in nanoseconds, or None for headerless messages."""
    header = getattr(msg, 'header', None)
    if header is None or not hasattr(header, 'stamp'):
        return None
    return stamp_to_ns(header.stamp)


def slop_to_ns(slop: float) -> int:
    """Seconds to integer nanoseconds exactly as ``rclpy.duration.Duration(seconds=slop)`` does."""
    return int(slop * S_TO_NS)


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
    """rclpy subscription as a filter: ``Subscriber(node, MsgType, topic, qos_profile=10, **kwargs)``.

    Extra keyword arguments (``callback_group``, ``event_callbacks``, ...) go to
    ``node.create_subscription``; other attributes are served by the underlying subscription.
    """

    def __init__(self, node, msg_type, topic: str, qos_profile=10, **kwargs) -> None:
        SimpleFilter.__init__(self)
        self.node = node
        self.topic = topic
        self.sub = node.create_subscription(msg_type, topic, self.callback, qos_profile, **kwargs)

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

    queue_size: messages kept per input; slop: seconds; allow_headerless: stamp headerless messages with
    ``clock()`` (ns) instead of ignoring them.
    """

    def __init__(self, fs, queue_size: int, slop: float, allow_headerless: bool = False, *,
                 clock: Callable[[], int] | None = None) -> None:
        SimpleFilter.__init__(self)
        self.queue_size = queue_size
        self.lock = threading.Lock()
        self.slop = slop
        self.slop_ns = slop_to_ns(slop)
        self.allow_headerless = allow_headerless
        self.clock = clock or time.time_ns
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

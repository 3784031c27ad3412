"""Messages a subscription never received, counted from the publishers' sequence numbers.

A frame can be lost before any callback sees it: overwritten in the subscription's QoS history (depth 1 keeps only
the newest while the node processes a frame) or dropped by a best-effort transport. rclpy hands a callback with two
parameters the ``MessageInfo`` of each message (``publication_sequence_number``, ``publisher_gid``); a publisher
numbers its messages 1, 2, 3, ..., so a jump from 7 to 10 means 2 messages of that publisher were never received.

:class:`SequenceGaps` (ROS-free) does the arithmetic per publisher: the first message of a publisher and a number
that goes back (the publisher restarted) count nothing; an RMW that reports no sequence number (None or 0) counts
nothing. ``publisher_gid`` is in rclpy's ``MessageInfo`` only since Kilted: without it (Jazzy and older) the numbers
are keyed per topic only (:attr:`SequenceGaps.keyed_by` says which), and since two publishers' numbers
interleaved would read as gaps, they are counted only while the topic has exactly one publisher
(``publisher_count``, e.g. ``lambda: node.count_publishers(topic)``, asked only then); with none given, every
gid-less message is taken as the one publisher's.

:class:`SequencedSubscriber` is a synchroniser input (a message_filters-style filter: ``registerCallback``;
the real ``message_filters`` synchroniser or ours takes it) that owns its rclpy subscription, whose callback also
takes the ``MessageInfo`` and passes it to ``on_info`` before the message goes on
(:meth:`SequencedSubscriber.pass_on`: subclasses that convert the message override that, not the callback). It does
not derive from ``message_filters.Subscriber``: some releases of that refuse every keyword but ``qos_profile``
(see ``ros/message_filters_fallback.Subscriber``), and the node needs ``callback_group`` and ``raw``.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Mapping

from .message_filters_fallback import SimpleFilter, stamp_error

__all__ = ['SequenceGaps', 'SequencedSubscriber']


class SequenceGaps:
    """``missed(info)`` -> how many messages of ``info``'s publisher came between its previous one and this one.
    Remembers at most ``max_publishers`` publishers (the least recently heard is forgotten). ``keyed_by``:
    ``'publisher'`` once a message carried a gid, ``'topic'`` while none did (Jazzy), ``''`` before any."""

    def __init__(self, max_publishers: int = 64, publisher_count: Callable[[], int] | None = None) -> None:
        self.max_publishers = max_publishers
        self.publisher_count = publisher_count
        self.keyed_by = ''
        self._last: OrderedDict[bytes | None, int] = OrderedDict()   # publisher gid (None: the topic) -> last number

    def missed(self, info: Mapping[str, Any] | None) -> int:
        seq = info.get('publication_sequence_number') if info else None
        if not seq:                                   # not reported by this RMW
            return 0
        gid = info.get('publisher_gid')
        key = bytes(gid['data']) if isinstance(gid, Mapping) and gid.get('data') is not None else None
        if key is not None:
            self.keyed_by = 'publisher'
        elif self.keyed_by != 'publisher':
            self.keyed_by = 'topic'
        if key is None and self.publisher_count is not None and self.publisher_count() != 1:
            self._last.pop(None, None)                # several publishers, numbers mixed: count nothing, restart
            return 0
        last = self._last.pop(key, None)
        self._last[key] = seq
        while len(self._last) > self.max_publishers:
            self._last.popitem(last=False)
        if last is None or seq <= last:               # first message heard, or the publisher restarted
            return 0
        return seq - last - 1


class SequencedSubscriber(SimpleFilter):
    """``SequencedSubscriber(node, MsgType, topic, qos_profile=..., on_info=cb, **kwargs)``: a synchroniser input
    over ``node.create_subscription(MsgType, topic, callback, qos_profile, **kwargs)`` (``callback_group``,
    ``raw``, ...); ``on_info(MessageInfo)`` is called for every message before it is passed on. A message whose
    stamp the synchroniser would refuse (``message_filters_fallback.stamp_error``: not a builtin_interfaces/Time, negative)
    goes to ``on_bad_stamp(reason)`` instead of on (given ``on_bad_stamp``): it would raise in the executor."""

    def __init__(self, node, msg_type, topic: str, qos_profile=10,
                 on_info: Callable[[Mapping[str, Any]], None] | None = None,
                 on_bad_stamp: Callable[[str], None] | None = None, **kwargs) -> None:
        super().__init__()
        self._on_info, self._on_bad_stamp = on_info, on_bad_stamp
        self.node, self.topic = node, topic
        self.sub = node.create_subscription(msg_type, topic, self.callback, qos_profile, **kwargs)

    def getTopic(self) -> str:  # noqa: N802 (message_filters name)
        return self.topic

    def callback(self, msg, info) -> None:      # two parameters: rclpy passes the MessageInfo
        if self._on_info is not None:
            self._on_info(info)
        self.pass_on(msg)

    def pass_on(self, msg) -> None:
        """The received message to the connected filters (override to convert it first, then :meth:`deliver`)."""
        self.deliver(msg)

    def deliver(self, msg) -> None:
        """``msg`` to the connected filters, unless ``on_bad_stamp`` is given and its stamp would be refused."""
        if self._on_bad_stamp is not None:
            reason = stamp_error(msg)
            if reason is not None:
                self._on_bad_stamp(reason)
                return
        self.signalMessage(msg)

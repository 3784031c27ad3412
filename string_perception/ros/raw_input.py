"""A synchroniser input that subscribes to sensor_msgs/Image raw (serialized) and reads it with ``image_cdr``.

``RawImageSubscriber(node, Image, topic, qos_profile=qos, on_bad=cb, on_info=cb, callback_group=...)`` behaves
like the synchroniser's ``Subscriber`` (``on_info``: see ros/sequence_gaps.SequencedSubscriber) but passes on
:class:`~string_perception.codec.image_cdr.RawImage` objects (a numpy
view over the serialized bytes as ``data``) instead of rclpy-converted messages; a buffer the reader rejects goes
to ``on_bad(ImageCdrError)`` and is not passed on. The node uses it with ``raw_image_input:=true``. The
RawImage's ``header.stamp`` is a real builtin_interfaces/Time (``image_cdr.make_stamp``), which is what the real
``message_filters`` synchroniser (``rclpy.time.Time.from_msg``) demands.
"""
from __future__ import annotations

from typing import Callable

from ..codec.image_cdr import ImageCdrError, read_image
from .sequence_gaps import SequencedSubscriber

__all__ = ['RawImageSubscriber']


class RawImageSubscriber(SequencedSubscriber):
    def __init__(self, node, msg_type, topic: str, qos_profile=10,
                 on_bad: Callable[[ImageCdrError], None] | None = None, **kwargs) -> None:
        self._on_bad = on_bad
        super().__init__(node, msg_type, topic, qos_profile=qos_profile, raw=True, **kwargs)

    def pass_on(self, serialized) -> None:
        try:
            msg = read_image(serialized)
        except ImageCdrError as e:
            if self._on_bad is not None:
                self._on_bad(e)
            return
        self.deliver(msg)

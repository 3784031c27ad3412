"""The colour input on image_transport's ``compressed`` transport: ``image_transport_py`` where the distribution has it
(Kilted and later), our own ``<image>/compressed`` subscriber otherwise; one contract for both.

Contract (what image_transport's subscriber gives, and so what the fallback gives): a synchroniser input (a
message_filters-style filter, ``registerCallback``) whose messages are DECODED ``sensor_msgs/Image``s with the
compressed message's header and the encoding the publisher compressed (the ``format`` field's first word: ``rgb8;
jpeg compressed bgr8`` gives rgb8, as compressed_image_transport converts OpenCV's BGR back; a format without it
gives what OpenCV decoded: bgr8, bgra8, mono8, mono16), delivered on the node's executor in its input callback
group. A compressed image that cannot be decoded goes to ``on_bad`` (the fallback; image_transport logs it itself)
and is not passed on.

- :class:`CompressedImageInput` (fallback): ``SequencedSubscriber`` on ``sensor_msgs/CompressedImage`` at
  ``<resolved image topic>/compressed`` with the node's QoS and callback group; decodes with
  :func:`decode_compressed_image` (cv2).
- :class:`ImageTransportInput`: ``image_transport_py.ImageTransport(..., image_transport='compressed')``. Its
  subscriber runs on a C++ executor thread of a helper rclcpp node, so each image is queued (newest ``depth``
  kept) and handed to the rclpy executor through a guard condition in the input callback group: the node never
  runs two input callbacks at once. The base topic is resolved by the node first (Kilted's helper node ignores the
  node's namespace and remaps, ros-perception/image_common#357). Both the published signature
  ``ImageTransport(node_name, image_transport=...)`` / ``subscribe(base_topic, queue_size, callback)`` and the
  one that takes the rclpy node first are accepted.
- :func:`make_compressed_input` picks (``image_transport_py`` importable -> it, else the fallback) and says which.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable

import numpy as np

from ..runtime.errors import InputError
from .message_filters_fallback import SimpleFilter, stamp_error
from ..codec.image_conversion import ImageEncodingError, array_to_imgmsg, compressed_imgmsg_to_array, encoding_info
from .sequence_gaps import SequencedSubscriber

__all__ = ['decode_compressed_image', 'CompressedImageInput', 'ImageTransportInput', 'make_compressed_input',
           'image_transport_py_available']

_DECODED = {2: 'mono8', 3: 'bgr8', 4: 'bgra8'}
_TO = {'rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8'}     # colour encodings compressed_image_transport converts back to


def decode_compressed_image(msg) -> Any:
    """sensor_msgs/CompressedImage -> sensor_msgs/Image (header copied) as image_transport's compressed subscriber
    decodes it; ImageEncodingError if it cannot."""
    fmt = str(getattr(msg, 'format', ''))
    original = fmt.split(';', 1)[0].strip() if ';' in fmt else ''
    if original in _TO:
        arr, enc = compressed_imgmsg_to_array(msg, original), original
    else:
        arr = compressed_imgmsg_to_array(msg)       # passthrough: what OpenCV decoded
        if arr.dtype == np.uint16 and arr.ndim == 2:
            enc = original if original and encoding_info(original) == (np.dtype(np.uint16), 1) else 'mono16'
        elif arr.dtype == np.uint8:
            enc = _DECODED.get(arr.ndim if arr.ndim == 2 else arr.shape[2])
            if enc is None:
                raise ImageEncodingError(f'decoded compressed image has shape {arr.shape}')
        else:
            raise ImageEncodingError(f'decoded compressed image is {arr.dtype}')
    return array_to_imgmsg(arr, enc, header=getattr(msg, 'header', None))


class CompressedImageInput(SequencedSubscriber):
    """``CompressedImageInput(node, topic, qos_profile=..., on_bad=cb, on_info=cb, callback_group=...)``: the
    fallback (see the module docstring); ``topic`` is the ``.../compressed`` topic."""

    implementation = 'string_perception.ros.compressed_input'

    def __init__(self, node, topic: str, qos_profile=10, on_bad: Callable[[Exception], None] | None = None,
                 **kwargs) -> None:
        from sensor_msgs.msg import CompressedImage
        self._on_bad = on_bad
        super().__init__(node, CompressedImage, topic, qos_profile=qos_profile, **kwargs)

    def pass_on(self, msg) -> None:
        try:
            image = decode_compressed_image(msg)
        except (ImageEncodingError, InputError) as e:     # InputError: refused from its header, before decoding
            if self._on_bad is not None:
                self._on_bad(e)
            return
        self.deliver(image)


class ImageTransportInput(SimpleFilter):
    """image_transport_py's compressed subscriber as a synchroniser input (see the module docstring).
    ``base_topic``: the node's resolved image topic (without ``/compressed``); ``depth``: images kept while the
    executor is busy (the newest win, like a depth-``depth`` QoS history)."""

    implementation = 'image_transport_py'

    def __init__(self, node, base_topic: str, depth: int = 1, callback_group=None, module=None,
                 on_bad_stamp: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self._on_bad_stamp = on_bad_stamp
        if module is None:
            import image_transport_py as module
        itp = module
        self.node, self.topic = node, base_topic
        self._pending: collections.deque = collections.deque(maxlen=max(1, int(depth)))
        self._lock = threading.Lock()
        self._guard = node.create_guard_condition(self._drain, callback_group=callback_group)
        name = f'{node.get_name()}_image_transport'
        try:                                    # newer bindings take the rclpy node first
            self._it = itp.ImageTransport(node, name, image_transport='compressed')
            self._sub = self._it.subscribe(node, base_topic, max(1, int(depth)), self._received)
        except TypeError:                       # Kilted: ImageTransport(node_name, ...), subscribe(topic, qs, cb)
            self._it = itp.ImageTransport(name, image_transport='compressed')
            self._sub = self._it.subscribe(base_topic, max(1, int(depth)), self._received)

    def _received(self, msg) -> None:
        """image_transport's thread: queue and wake the rclpy executor."""
        with self._lock:
            self._pending.append(msg)
        self._guard.trigger()

    def _drain(self) -> None:
        """rclpy executor, input callback group: pass the queued images on, oldest first."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                msg = self._pending.popleft()
            reason = stamp_error(msg) if self._on_bad_stamp is not None else None
            if reason is not None:       # the synchroniser would raise on it in the executor
                self._on_bad_stamp(reason)
                continue
            self.signalMessage(msg)

    def getTopic(self) -> str:  # noqa: N802 (message_filters name)
        return self.topic

    def destroy_input(self) -> None:
        """Shut the image_transport subscriber down, destroy the guard condition (lifecycle_node._stop_inputs)."""
        if self._sub is not None:
            self._sub.shutdown()
            self._sub = None
        self.node.destroy_guard_condition(self._guard)


def image_transport_py_available() -> bool:
    try:
        import image_transport_py  # noqa: F401
    except ImportError:
        return False
    return True


def make_compressed_input(node, base_topic: str, qos_profile, depth: int, *, callback_group=None,
                          on_bad=None, on_info=None, on_bad_stamp=None, prefer_image_transport: bool = True):
    """The colour input on ``<base_topic>/compressed`` (``base_topic`` resolved): image_transport_py's when
    importable (and ``prefer_image_transport``), else :class:`CompressedImageInput` with ``qos_profile``."""
    if prefer_image_transport and image_transport_py_available():
        return ImageTransportInput(node, base_topic, depth=depth, callback_group=callback_group,
                                   on_bad_stamp=on_bad_stamp)
    return CompressedImageInput(node, base_topic + '/compressed', qos_profile=qos_profile, on_bad=on_bad,
                                on_info=on_info, on_bad_stamp=on_bad_stamp, callback_group=callback_group)

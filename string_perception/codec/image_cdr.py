"""sensor_msgs/Image straight from its serialized CDR bytes, without rclpy's message conversion (ROS-free).

A raw subscription (``create_subscription(Image, topic, cb, qos, raw=True)``) hands over the serialized message
as ``bytes``; :func:`read_image` parses the header, size, encoding and step and returns a :class:`RawImage` whose
``data`` is a numpy uint8 view over those bytes (no copy). rclpy's own conversion copies the pixel data into an
``array.array`` and builds four Python message objects per image; this is the node's ``raw_image_input`` path.

Layout (OMG CDR as Fast DDS / rmw_fastrtps writes it; alignment counted from after the 4-byte encapsulation
header): ``int32 sec, uint32 nanosec, string frame_id, uint32 height, uint32 width, string encoding,
uint8 is_bigendian, uint32 step, uint8[] data``; a string is ``uint32 length (with its NUL), bytes, NUL``.
Encapsulations read: CDR and PLAIN_CDR2, big or little endian (the type has no 8-byte field, so both place every
field alike). Anything else, or a buffer that ends early, raises :class:`ImageCdrError`.

``header.stamp`` is a real ``builtin_interfaces.msg.Time`` whenever that package is importable (always beside
rclpy): ``rclpy.time.Time.from_msg`` accepts nothing else, and the real ``message_filters`` synchroniser and tf2
look-ups call it on every stamp. :class:`RawStamp` (same fields) stands in only where builtin_interfaces is absent.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ['RawStamp', 'RawHeader', 'make_stamp', 'stamp_type', 'RawImage', 'ImageCdrError', 'read_image']

_HEADER_BYTES = 4
# encapsulation id (big-endian uint16) -> byte order; 0/1 = CDR BE/LE, 6/7 = PLAIN_CDR2 BE/LE (final types)
_ENCAPSULATIONS = {0x0000: '>', 0x0001: '<', 0x0006: '>', 0x0007: '<'}
_MAX_STRING = 4096     # frame ids and encodings are short; a larger length means a corrupt or foreign buffer


class ImageCdrError(ValueError):
    """The bytes are not a serialized sensor_msgs/Image this reader understands (the node counts ``bad_cdr``)."""


@dataclass
class RawStamp:
    sec: int = 0
    nanosec: int = 0


@functools.cache
def stamp_type() -> type:
    """``builtin_interfaces.msg.Time`` (what rclpy.time.Time.from_msg demands) when importable, else
    :class:`RawStamp` (ROS-free use of the reader). Looked up once, on first use: codec/ imports no message package
    at import time."""
    try:
        from builtin_interfaces.msg import Time
    except ImportError:
        return RawStamp
    return Time


def make_stamp(sec: int, nanosec: int):
    """``builtin_interfaces.msg.Time(sec, nanosec)`` when importable, else :class:`RawStamp`."""
    return stamp_type()(sec=sec, nanosec=nanosec)


@dataclass
class RawHeader:
    stamp: Any = field(default_factory=lambda: make_stamp(0, 0))     # builtin_interfaces/Time (see above)
    frame_id: str = ''


@dataclass
class RawImage:
    """sensor_msgs/Image's fields; ``data``: uint8 view over the serialized bytes (read-only, keeps them alive)."""
    header: RawHeader
    height: int
    width: int
    encoding: str
    is_bigendian: int
    step: int
    data: np.ndarray


class _Cursor:
    """Reads CDR primitives from ``buf`` at ``pos`` (aligned relative to the end of the encapsulation header)."""

    def __init__(self, buf: memoryview, order: str):
        self.buf, self.pos = buf, _HEADER_BYTES
        self.u32, self.i32 = struct.Struct(order + 'I'), struct.Struct(order + 'i')

    def _need(self, n: int, what: str) -> None:
        if self.pos + n > len(self.buf):
            raise ImageCdrError(f'serialized Image ends inside {what} (needs {self.pos + n} bytes, has '
                                f'{len(self.buf)})')

    def align(self, n: int) -> None:
        self.pos += -(self.pos - _HEADER_BYTES) % n

    def uint32(self, what: str, fmt: struct.Struct | None = None) -> int:
        self.align(4)
        self._need(4, what)
        (value,) = (fmt or self.u32).unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def uint8(self, what: str) -> int:
        self._need(1, what)
        value = self.buf[self.pos]
        self.pos += 1
        return value

    def string(self, what: str) -> str:
        n = self.uint32(f'{what} length')
        if n > _MAX_STRING:
            raise ImageCdrError(f'serialized Image: {what} length {n} is not plausible (corrupt buffer?)')
        self._need(n, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        if n and raw[-1] != 0:
            raise ImageCdrError(f'serialized Image: {what} is not NUL-terminated')
        try:
            return raw[:-1].decode('utf-8') if n else ''
        except UnicodeDecodeError:
            raise ImageCdrError(f'serialized Image: {what} is not UTF-8') from None


def read_image(serialized: bytes | bytearray | memoryview) -> RawImage:
    """Serialized sensor_msgs/Image -> :class:`RawImage` (``data`` a view, no pixel copy); ImageCdrError if bad."""
    buf = memoryview(serialized).cast('B')
    if len(buf) < _HEADER_BYTES:
        raise ImageCdrError(f'serialized Image has {len(buf)} bytes, less than its 4-byte encapsulation header')
    kind = (buf[0] << 8) | buf[1]
    order = _ENCAPSULATIONS.get(kind)
    if order is None:
        raise ImageCdrError(f'serialized Image: encapsulation 0x{kind:04x} is not CDR or PLAIN_CDR2')
    cur = _Cursor(buf, order)
    sec = cur.uint32('header.stamp.sec', cur.i32)
    nanosec = cur.uint32('header.stamp.nanosec')
    frame_id = cur.string('header.frame_id')
    height, width = cur.uint32('height'), cur.uint32('width')
    encoding = cur.string('encoding')
    is_bigendian = cur.uint8('is_bigendian')
    step = cur.uint32('step')
    n = cur.uint32('data length')
    cur._need(n, f'data ({n} bytes)')
    data = np.frombuffer(buf, np.uint8, count=n, offset=cur.pos)    # [n] uint8 view, no copy
    return RawImage(RawHeader(make_stamp(sec, nanosec), frame_id), height, width, encoding, is_bigendian, step, data)

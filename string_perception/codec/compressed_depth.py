"""image_transport's ``compressedDepth`` format (compressed_depth_image_transport), ROS-free.

A ``sensor_msgs/CompressedImage`` whose ``format`` is ``'<encoding>; compressedDepth png'`` (older publishers:
``'<encoding>; compressedDepth'``, also PNG) and whose ``data`` is a 12-byte configuration header followed by a
PNG image. The header is the publisher's C struct, little endian: ``int32 format`` (0 = inverse depth), then
``float32 depthParam[2]`` = the quantisation constants (A, B).

- ``16UC1`` (millimetres): the PNG holds the depth itself (values above ``depth_max`` are set to 0 = invalid);
  A, B are not used.
- ``32FC1`` (metres): the PNG holds the quantised inverse depth ``q = A / d + B`` as uint16 with
  ``A = z0 (z0 + 1)``, ``B = 1 - A / depth_max`` (``z0`` = ``depth_quantization``), ``q = 0`` for invalid or
  too-far depth; decoding gives ``d = A / (q - B)``, NaN where ``q = 0``.

``rvl`` (the other compression ``compressedDepth`` can carry) is refused with a clear error.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .image_data import CompressedImageData, ImageEncodingError, guarded_imdecode

__all__ = ['HEADER', 'INV_DEPTH', 'depth_format', 'decode_compressed_depth', 'encode_compressed_depth']

HEADER = struct.Struct('<iff')      # compression format (enum), depthParam[0] (A), depthParam[1] (B): 12 bytes
INV_DEPTH = 0
DEFAULT_DEPTH_MAX = 10.0            # metres (the publisher's depth_max parameter default)
DEFAULT_DEPTH_QUANTIZATION = 100.0  # the publisher's depth_quantization parameter default


def _error(message: str) -> Exception:
    return ImageEncodingError(message)


def depth_format(encoding: str, compression: str = 'png') -> str:
    """The ``format`` string a compressedDepth publisher writes, e.g. ``'16UC1; compressedDepth png'``."""
    return f'{encoding}; compressedDepth {compression}'


def _parse_format(fmt: str) -> tuple[str, str]:
    encoding, _, rest = fmt.partition(';')
    encoding, rest = encoding.strip(), rest.strip()
    if 'compressedDepth' not in rest:
        raise _error(f'format {fmt!r} is not compressedDepth (expected "<encoding>; compressedDepth png")')
    compression = rest.replace('compressedDepth', '').strip() or 'png'
    return encoding, compression


def decode_compressed_depth(msg: Any) -> tuple[np.ndarray, str]:
    """A compressedDepth CompressedImage(-like) -> (uint16 [H,W] mm for 16UC1 | float32 [H,W] m for 32FC1,
    encoding). Raises ImageEncodingError (a ValueError) on anything else."""
    fmt = str(getattr(msg, 'format', ''))
    encoding, compression = _parse_format(fmt)
    if compression != 'png':
        raise _error(f'compressedDepth {compression!r} ({fmt!r}) is not supported; publish with png')
    if encoding not in ('16UC1', 'mono16', '32FC1'):
        raise _error(f'compressedDepth of {encoding!r} is not supported (16UC1, mono16 or 32FC1)')
    data = bytes(memoryview(getattr(msg, 'data', b'')).cast('B'))
    if len(data) <= HEADER.size:
        raise _error(f'compressedDepth message has {len(data)} bytes: no room for the {HEADER.size}-byte header '
                     'and a PNG')
    _, quant_a, quant_b = HEADER.unpack_from(data)
    png = guarded_imdecode(np.frombuffer(data, np.uint8, offset=HEADER.size), f'compressedDepth PNG ({fmt!r})')
    if png.dtype != np.uint16 or png.ndim != 2:
        got = f'a {png.dtype} image of shape {png.shape}'
        raise _error(f'compressedDepth ({fmt!r}): expected a 16-bit one-channel PNG after the header, got {got}')
    if encoding != '32FC1':
        return png, encoding
    q = png.astype(np.float32)                                                  # [H,W]
    with np.errstate(divide='ignore', invalid='ignore'):
        depth = np.where(png > 0, np.float32(quant_a) / (q - np.float32(quant_b)), np.nan).astype(np.float32)
    return depth, encoding


def encode_compressed_depth(depth: np.ndarray, encoding: str, *, depth_max: float = DEFAULT_DEPTH_MAX,
                            depth_quantization: float = DEFAULT_DEPTH_QUANTIZATION, png_level: int = 1,
                            header: Any = None, msg_type: Any = None):
    """The message a compressedDepth publisher sends for ``depth`` (uint16 mm as 16UC1/mono16, float32 m as
    32FC1); for tests, recordings and the bag tools."""
    import cv2
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise _error(f'compressedDepth needs a one-channel [H,W] image, got shape {depth.shape}')
    if encoding in ('16UC1', 'mono16') and depth.dtype == np.uint16:
        img = np.where(depth > np.uint16(min(depth_max * 1000.0, 65535)), 0, depth).astype(np.uint16)
        params = (0.0, 0.0)
    elif encoding == '32FC1' and depth.dtype == np.float32:
        quant_a = np.float32(depth_quantization * (depth_quantization + 1.0))
        quant_b = np.float32(1.0 - quant_a / np.float32(depth_max))
        valid = np.isfinite(depth) & (depth > 0) & (depth < depth_max)
        with np.errstate(divide='ignore', invalid='ignore'):
            q = np.where(valid, quant_a / depth + quant_b, 0.0)
        img = np.clip(q, 0, 65535).astype(np.uint16)                            # truncation, as the C++ cast
        params = (float(quant_a), float(quant_b))
    else:
        raise _error(f'compressedDepth encodes uint16 16UC1/mono16 or float32 32FC1, got {depth.dtype} {encoding!r}')
    ok, png = cv2.imencode('.png', img, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    if not ok:
        raise _error('OpenCV could not encode the depth PNG')
    payload = HEADER.pack(INV_DEPTH, *params) + png.tobytes()
    if msg_type is None:
        try:
            from sensor_msgs.msg import CompressedImage as msg_type
        except ImportError:
            msg_type = CompressedImageData
    msg = msg_type()
    if header is not None:
        msg.header = header
    msg.format = depth_format(encoding)
    if isinstance(getattr(msg, 'data', b''), bytes):
        msg.data = payload
    else:
        import array as pyarray
        buf = pyarray.array('B')
        buf.frombytes(payload)
        msg.data = buf
    return msg

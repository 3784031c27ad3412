"""sensor_msgs/Image and CompressedImage <-> numpy, with the real ROS 2 cv_bridge first.

    from string_perception.codec.image_conversion import make_bridge, CONVERSION_ERRORS
    bridge = make_bridge()                   # cv_bridge.CvBridge on a ROS install, else FallbackBridge
    rgb = bridge.imgmsg_to_cv2(msg, desired_encoding='rgb8')
    depth = bridge.imgmsg_to_cv2(depth_msg)  # passthrough: uint16 (16UC1/mono16) or float32 (32FC1)

Both bridges have cv_bridge's method names and argument conventions (``imgmsg_to_cv2``, ``cv2_to_imgmsg``,
``compressed_imgmsg_to_cv2``, ``cv2_to_compressed_imgmsg``), so the node does not care which it got; catch
``CONVERSION_ERRORS``. The PyPI package called ``cv-bridge`` is a broken ROS 1 port and is never used: the
real one is recognised by its compiled ``cv_bridge.boost.cv_bridge_boost`` module.

The ROS-free functions (no rclpy, no message packages; cv2 only for compressed data and colour changes) work on
any object with the Image fields (height, width, encoding, is_bigendian, step, data) or CompressedImage fields
(format, data):

- ``imgmsg_to_array(msg)``: a new C-contiguous, native-endian array, (H, W) for one channel, (H, W, C)
  otherwise; honours row padding (step > width * bytes per pixel) and big-endian data; strict checks.
- ``array_to_imgmsg(array, encoding, header=None)``: a ``sensor_msgs.msg.Image`` when sensor_msgs is
  importable (else an ``ImageData``), tightly packed, little-endian (host order).
- ``compressed_imgmsg_to_array(msg, desired_encoding='passthrough')``, ``array_to_compressed_imgmsg(...)``:
  jpeg/png through cv2 (OpenCV's BGR order, like cv_bridge; ``format`` as image_transport writes it);
  ``compressedDepth`` (16UC1 PNG, 32FC1 quantised inverse depth) is decoded too (``compressed_depth.py``).

The error type, the message stand-ins and the guarded decoder live in ``image_data.py`` (shared with
``compressed_depth.py``, which this module calls) and are re-exported here.

Supported encodings: rgb8, bgr8, rgba8, bgra8, mono8, mono16, and the generic ``{8U,8S,16U,16S,32S,32F,64F}C{n}``
(16UC1 depth in mm, 32FC1 depth in m, ...). Anything else raises ``ImageEncodingError`` (a ValueError).
"""
from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np

from .compressed_depth import decode_compressed_depth
from .image_data import CompressedImageData, ImageData, ImageEncodingError, guarded_imdecode

__all__ = ['ImageEncodingError', 'ImageData', 'CompressedImageData', 'encoding_info', 'imgmsg_to_array',
           'array_to_imgmsg', 'compressed_imgmsg_to_array', 'guarded_imdecode', 'array_to_compressed_imgmsg',
           'compressed_format', 'convert_encoding',
           'BridgeError', 'FallbackBridge', 'make_bridge', 'real_cv_bridge_available', 'CONVERSION_ERRORS']


# encoding -> (numpy dtype, channels)
_NAMED = {
    'rgb8': ('uint8', 3), 'bgr8': ('uint8', 3), 'rgba8': ('uint8', 4), 'bgra8': ('uint8', 4),
    'mono8': ('uint8', 1), 'mono16': ('uint16', 1),
    'rgb16': ('uint16', 3), 'bgr16': ('uint16', 3), 'rgba16': ('uint16', 4), 'bgra16': ('uint16', 4),
}
_GENERIC = re.compile(r'(8U|8S|16U|16S|32S|32F|64F)C([1-9][0-9]*)')
_DEPTH = {'8U': 'uint8', '8S': 'int8', '16U': 'uint16', '16S': 'int16', '32S': 'int32', '32F': 'float32',
          '64F': 'float64'}
_DTYPE_TO_DEPTH = {v: k for k, v in _DEPTH.items()}
# colour layouts cv2 can convert between (8-bit); mono16/16-bit colour only to themselves
_COLOUR = {'rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8'}


def encoding_info(encoding: str) -> tuple[np.dtype, int]:
    """(dtype, channels) of a sensor_msgs/Image encoding; ImageEncodingError if unsupported."""
    if not isinstance(encoding, str):
        raise ImageEncodingError(f'image encoding must be a string, got {type(encoding).__name__}')
    if encoding in _NAMED:
        dt, ch = _NAMED[encoding]
        return np.dtype(dt), ch
    m = _GENERIC.fullmatch(encoding)
    if m:
        return np.dtype(_DEPTH[m.group(1)]), int(m.group(2))
    raise ImageEncodingError(
        f'unsupported image encoding {encoding!r} (supported: {", ".join(sorted(_NAMED))}, '
        '8UC1..64FC4 style generic encodings such as 16UC1 and 32FC1)')


def _buffer(data) -> memoryview:
    """Raw bytes of a message's data field without copying (bytes, array.array, numpy, list of ints)."""
    if isinstance(data, (list, tuple)):
        try:
            return memoryview(np.asarray(data, dtype=np.uint8))
        except (ValueError, OverflowError, TypeError) as exc:
            raise ImageEncodingError(f'image data is not a byte sequence: {exc}') from None
    try:
        mv = memoryview(data)
    except TypeError:
        raise ImageEncodingError(f'image data of type {type(data).__name__} is not a byte buffer') from None
    return mv.cast('B') if mv.format != 'B' or mv.ndim != 1 else mv


def _int_field(msg, name: str) -> int:
    try:
        value = getattr(msg, name)
    except AttributeError:
        raise ImageEncodingError(f'image message has no field {name!r}') from None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ImageEncodingError(f'image {name} must be a non-negative integer, got {value!r}')
    return int(value)


def imgmsg_to_array(msg, copy: bool = True) -> np.ndarray:
    """Decode a sensor_msgs/Image(-like) message to a new native-endian, C-contiguous array.

    ``copy=False``: a view over the message's buffer when its byte order is the host's (no copy; rows keep the
    message's step, so it may not be contiguous); big-endian data is still converted into a new array."""
    dtype, channels = encoding_info(getattr(msg, 'encoding', None))
    height, width, step = (_int_field(msg, n) for n in ('height', 'width', 'step'))
    buf = _buffer(getattr(msg, 'data', None))
    pixel = dtype.itemsize * channels
    if step < width * pixel:
        raise ImageEncodingError(f'{msg.encoding} image: step {step} < width {width} x {pixel} bytes per pixel')
    if len(buf) != step * height:
        raise ImageEncodingError(f'{msg.encoding} image: data has {len(buf)} bytes, expected step x height = '
                                 f'{step} x {height} = {step * height}')
    big = bool(getattr(msg, 'is_bigendian', 0))
    src_dtype = dtype.newbyteorder('>' if big else '<') if dtype.itemsize > 1 else dtype
    shape = (height, width, channels)
    strides = (step, pixel, dtype.itemsize)
    if height == 0 or width == 0:
        arr = np.zeros(shape, dtype=dtype)
    else:
        view = np.ndarray(shape, dtype=src_dtype, buffer=buf, strides=strides)  # no copy, may be unaligned
        if not copy and view.dtype.isnative:
            return view[:, :, 0] if channels == 1 else view
        arr = np.ascontiguousarray(view.astype(dtype.newbyteorder('='), copy=True))
    return arr[:, :, 0] if channels == 1 else arr


def _image_type():
    try:
        from sensor_msgs.msg import Image
        return Image
    except ImportError:
        return ImageData


def array_to_imgmsg(array: np.ndarray, encoding: str, header: Any = None, msg_type: Any = None):
    """Encode an array as a sensor_msgs/Image (tightly packed, host byte order).

    ``array`` must match ``encoding``: dtype, and shape (H, W) or (H, W, 1) for one channel, (H, W, C) else.
    """
    if not isinstance(array, np.ndarray):
        raise ImageEncodingError(f'expected a numpy array, got {type(array).__name__}')
    dtype, channels = encoding_info(encoding)
    if array.ndim == 2:
        got_channels = 1
    elif array.ndim == 3:
        got_channels = array.shape[2]
    else:
        raise ImageEncodingError(f'{encoding}: expected a 2-D or 3-D array, got shape {array.shape}')
    if got_channels != channels:
        raise ImageEncodingError(f'{encoding} has {channels} channel(s), array shape {array.shape} has '
                                 f'{got_channels}')
    if array.dtype.newbyteorder('=') != dtype.newbyteorder('='):
        raise ImageEncodingError(f'{encoding} needs dtype {dtype}, array has {array.dtype}')
    data = np.ascontiguousarray(array, dtype=dtype.newbyteorder('='))
    cls = msg_type or _image_type()
    msg = cls()
    if header is not None:
        msg.header = header
    msg.height, msg.width = int(array.shape[0]), int(array.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(sys.byteorder == 'big')
    msg.step = int(msg.width * dtype.itemsize * channels)
    raw = data.tobytes()
    if cls is ImageData:
        msg.data = raw
    else:
        import array as pyarray
        buf = pyarray.array('B')
        buf.frombytes(raw)
        msg.data = buf   # array.array('B') is the fast path for uint8[] in rclpy messages
    return msg


def convert_encoding(array: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Colour-layout conversion between rgb8, bgr8, rgba8, bgra8 and mono8 (cv2); identity when src == dst."""
    if src == dst:
        return array
    if src not in _COLOUR or dst not in _COLOUR:
        raise ImageEncodingError(f'conversion {src} -> {dst} is not supported (only between '
                                 f'{", ".join(sorted(_COLOUR))}, or to the same encoding)')
    import cv2
    name = {'rgb8': 'RGB', 'bgr8': 'BGR', 'rgba8': 'RGBA', 'bgra8': 'BGRA', 'mono8': 'GRAY'}
    code = getattr(cv2, f'COLOR_{name[src]}2{name[dst]}', None)
    if code is None:
        raise ImageEncodingError(f'conversion {src} -> {dst} is not supported by OpenCV')
    return np.ascontiguousarray(cv2.cvtColor(array, code))


def compressed_imgmsg_to_array(msg, desired_encoding: str = 'passthrough') -> np.ndarray:
    """Decode a sensor_msgs/CompressedImage(-like) message.

    passthrough: what OpenCV decodes (bgr8 / bgra8 / mono8 / 16-bit mono), like cv_bridge; otherwise one of
    rgb8, bgr8, rgba8, bgra8, mono8. ``compressedDepth`` (image_transport's depth format, see
    :mod:`.compressed_depth`) gives uint16 mm (16UC1) or float32 m (32FC1).
    """
    fmt = str(getattr(msg, 'format', ''))
    if 'compresseddepth' in fmt.lower():
        depth, _ = decode_compressed_depth(msg)
        if desired_encoding not in ('passthrough', '16UC1', 'mono16', '32FC1'):
            raise ImageEncodingError(f'compressedDepth gives depth; cannot give {desired_encoding}')
        return depth
    buf = _buffer(getattr(msg, 'data', None))
    raw = np.frombuffer(buf, dtype=np.uint8)
    if raw.size == 0:
        raise ImageEncodingError('compressed image has no data')
    img = guarded_imdecode(raw, f'compressed image (format {fmt!r}, {raw.size} bytes)')
    if desired_encoding == 'passthrough':
        return img
    if img.dtype != np.uint8:
        if desired_encoding in ('mono16', '16UC1') and img.ndim == 2:
            return img
        raise ImageEncodingError(f'decoded a {img.dtype} image; cannot give {desired_encoding}')
    src = 'mono8' if img.ndim == 2 else {3: 'bgr8', 4: 'bgra8'}.get(img.shape[2])
    if src is None:
        raise ImageEncodingError(f'decoded image has unexpected shape {img.shape}')
    return convert_encoding(img, src, desired_encoding)


def _default_encoding(array: np.ndarray) -> str:
    channels = 1 if array.ndim == 2 else array.shape[-1]
    if array.dtype == np.uint8:
        return {1: 'mono8', 3: 'bgr8', 4: 'bgra8'}.get(channels, f'8UC{channels}')
    if array.dtype == np.uint16:
        return {1: '16UC1', 3: 'bgr16', 4: 'bgra16'}.get(channels, f'16UC{channels}')
    raise ImageEncodingError(f'no compressed encoding for a {array.dtype} array')


def compressed_format(encoding: str, compression: str) -> str:
    """image_transport's ``CompressedImage.format``: ``'<encoding>; <jpeg|png> compressed <target>'`` where the
    target is the colour layout OpenCV wrote (``bgr8`` for JPEG colour, ``bgr8``/``bgr16`` for PNG colour) and
    empty for one-channel images (mono8, mono16, 16UC1, ...), e.g. ``'16UC1; png compressed '``."""
    compression = 'jpeg' if compression in ('jpg', 'jpeg') else compression
    dtype, channels = encoding_info(encoding)
    colour = channels >= 3 and not _GENERIC.fullmatch(encoding)
    target = ('bgr8' if compression == 'jpeg' else f'bgr{8 * dtype.itemsize}') if colour else ''
    return f'{encoding}; {compression} compressed {target}'


def array_to_compressed_imgmsg(array: np.ndarray, dst_format: str = 'jpg', encoding: str | None = None,
                               header: Any = None, msg_type: Any = None):
    """Encode with cv2 (``jpg``/``jpeg``/``png``). Colour arrays are taken as BGR unless ``encoding`` says
    rgb8/rgba8/rgb16/rgba16; colour is written as BGR without alpha, as image_transport does. ``encoding`` defaults
    from dtype and channels (uint16 one-channel: 16UC1). ``format`` follows image_transport's compressed publisher (:func:`compressed_format`)."""
    import cv2
    if not isinstance(array, np.ndarray):
        raise ImageEncodingError(f'expected a numpy array, got {type(array).__name__}')
    fmt = dst_format.lower().lstrip('.')
    if fmt not in ('jpg', 'jpeg', 'png'):
        raise ImageEncodingError(f'compressed format {dst_format!r} not supported (jpg, jpeg, png)')
    fmt = 'jpeg' if fmt == 'jpg' else fmt
    if encoding is None:
        encoding = _default_encoding(array)
    dtype, channels = encoding_info(encoding)
    if array.dtype != dtype or (array.shape[2] if array.ndim == 3 else 1) != channels:
        raise ImageEncodingError(f'{encoding} needs {dtype} with {channels} channel(s), got {array.dtype} '
                                 f'{array.shape}')
    if fmt == 'jpeg' and dtype != np.uint8:
        raise ImageEncodingError(f'JPEG holds 8-bit images; {encoding} needs png')
    if dtype not in (np.uint8, np.uint16):
        raise ImageEncodingError(f'compressed images are 8 or 16 bit; {encoding} is {dtype}')
    img = array
    if encoding in _NAMED and channels >= 3:      # colour: written as BGR (OpenCV's order), alpha dropped
        img = np.ascontiguousarray(array[..., [2, 1, 0]] if encoding.startswith('rgb') else array[..., :3])
    ok, enc = cv2.imencode('.jpg' if fmt == 'jpeg' else '.png', img)
    if not ok:
        raise ImageEncodingError(f'OpenCV could not encode a {array.dtype} {array.shape} image as {fmt}')
    cls = msg_type
    if cls is None:
        try:
            from sensor_msgs.msg import CompressedImage as cls
        except ImportError:
            cls = CompressedImageData
    msg = cls()
    if header is not None:
        msg.header = header
    msg.format = compressed_format(encoding, fmt)
    if cls is CompressedImageData:
        msg.data = enc.tobytes()
    else:
        import array as pyarray
        buf = pyarray.array('B')
        buf.frombytes(enc.tobytes())
        msg.data = buf
    return msg


class BridgeError(ImageEncodingError, TypeError):
    """What :class:`FallbackBridge` raises: ``cv_bridge.CvBridgeError`` derives from TypeError, so this is a
    TypeError too (code that catches the real one catches it) as well as an :class:`ImageEncodingError`."""


def _bridge_errors(fn):
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BridgeError:
            raise
        except ImageEncodingError as e:
            raise BridgeError(str(e)) from e
    wrapped.__name__, wrapped.__doc__ = fn.__name__, fn.__doc__
    return wrapped


# cv_bridge's compressed_imgmsg_to_cv2 takes what OpenCV decoded as 'bgr8' and converts with cv2 codes
_FROM_BGR = {'rgb8': 'COLOR_BGR2RGB', 'bgra8': 'COLOR_BGR2BGRA', 'rgba8': 'COLOR_BGR2RGBA', 'mono8': 'COLOR_BGR2GRAY'}


class FallbackBridge:
    """cv_bridge.CvBridge's interface over the ROS-free functions above, with the real one's contract for what the
    node uses (ros-perception/vision_opencv ``cv_bridge/core.py``); failures raise :class:`BridgeError` (a
    TypeError, like ``CvBridgeError``):

    - ``compressed_imgmsg_to_cv2(msg, desired)``: ``cv2.imdecode(data, IMREAD_UNCHANGED)``; passthrough returns
      that as is (None when undecodable, as the real one); any other ``desired_encoding`` treats the decoded
      image as ``bgr8``, so it must be 8-bit with 3 or 4 channels: a one-channel (mono JPEG) or 16-bit PNG, or
      undecodable data, is refused, as the real cv_bridge's colour conversion refuses it. ``bgr8`` returns the
      decoded image unchanged (4 channels stay 4); rgb8, bgra8, rgba8, mono8 convert. It never decodes
      ``compressedDepth`` (the real one cannot; the node uses ``compressed_depth.py``).
    - ``imgmsg_to_cv2``: unknown encodings and inconsistent sizes refused; passthrough or a colour conversion.
    - ``cv2_to_imgmsg(array, encoding)``: a non-array, or an encoding the array's dtype/channels do not match, is
      refused (the real one: TypeError / CvBridgeError).
    Stricter than the real one only where it refuses conversions the real one would make (16-bit colour, Bayer,
    YUV): never the other way round.
    """

    name = 'string_perception.codec.image_conversion'

    @_bridge_errors
    def imgmsg_to_cv2(self, img_msg, desired_encoding: str = 'passthrough') -> np.ndarray:
        arr = imgmsg_to_array(img_msg)
        if desired_encoding == 'passthrough':
            return arr
        return convert_encoding(arr, img_msg.encoding, desired_encoding)

    @_bridge_errors
    def cv2_to_imgmsg(self, cvim: np.ndarray, encoding: str = 'passthrough', header: Any = None):
        if not isinstance(cvim, (np.ndarray, np.generic)):
            raise BridgeError('Your input type is not a numpy array')
        if encoding == 'passthrough':
            if cvim.dtype.newbyteorder('=').name not in _DTYPE_TO_DEPTH:
                raise ImageEncodingError(f'passthrough: unsupported array {getattr(cvim, "dtype", cvim)!r}')
            encoding = f'{_DTYPE_TO_DEPTH[cvim.dtype.newbyteorder("=").name]}C{1 if cvim.ndim == 2 else cvim.shape[2]}'
        return array_to_imgmsg(cvim, encoding, header=header)

    @_bridge_errors
    def compressed_imgmsg_to_cv2(self, cmprs_img_msg, desired_encoding: str = 'passthrough') -> np.ndarray:
        import cv2
        raw = np.frombuffer(_buffer(getattr(cmprs_img_msg, 'data', None)), dtype=np.uint8)
        if raw.size == 0:
            raise BridgeError('compressed image has no data')
        im = cv2.imdecode(raw, cv2.IMREAD_UNCHANGED)
        if desired_encoding == 'passthrough':
            return im
        if im is None:
            raise BridgeError(f'could not decode compressed image ({raw.size} bytes) to convert it to '
                              f'{desired_encoding}')
        if im.dtype != np.uint8 or im.ndim != 3 or im.shape[2] not in (3, 4):
            raise BridgeError(f'decoded a {im.dtype} image of shape {im.shape}: cv_bridge takes it as bgr8 and '
                              f'cannot convert it to {desired_encoding}')
        if desired_encoding == 'bgr8':
            return im
        code = _FROM_BGR.get(desired_encoding)
        if code is None:
            raise BridgeError(f'bgr8 -> {desired_encoding} is not supported for compressed images')
        return np.ascontiguousarray(cv2.cvtColor(im, getattr(cv2, code)))

    @_bridge_errors
    def cv2_to_compressed_imgmsg(self, cvim: np.ndarray, dst_format: str = 'jpg'):
        """(No ``header`` argument: the real one has none.)"""
        if not isinstance(cvim, (np.ndarray, np.generic)):
            raise BridgeError('Your input type is not a numpy array')
        return array_to_compressed_imgmsg(cvim, dst_format)


def real_cv_bridge_available() -> bool:
    """True when the ROS 2 cv_bridge (with its compiled boost module) is importable; never the PyPI port."""
    try:
        import cv_bridge  # noqa: F401
        from cv_bridge.boost import cv_bridge_boost  # noqa: F401
    except Exception:  # ImportError, or the broken PyPI port failing in its own way
        return False
    return True


def make_bridge():
    """``cv_bridge.CvBridge()`` when the real ROS 2 cv_bridge is installed, else ``FallbackBridge()``."""
    if real_cv_bridge_available():
        from cv_bridge import CvBridge
        return CvBridge()
    return FallbackBridge()


def _conversion_errors() -> tuple[type[BaseException], ...]:
    """ImageEncodingError (BridgeError), the real CvBridgeError, and cv2.error (the real cv_bridge lets OpenCV's
    own errors through, e.g. ``imdecode`` of an empty buffer)."""
    errors: list[type[BaseException]] = [ImageEncodingError]
    try:
        import cv2
        errors.append(cv2.error)
    except ImportError:
        pass
    if real_cv_bridge_available():
        from cv_bridge import CvBridgeError
        errors.append(CvBridgeError)
    return tuple(errors)


CONVERSION_ERRORS = _conversion_errors()

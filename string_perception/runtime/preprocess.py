"""Camera frame -> model inputs: colour conversion, depth units, pad (or crop) + resize, intrinsics update.

Pixel convention (OpenCV / ROS CameraInfo): pixel ``(u, v)`` has its centre at integer coordinates, so the
continuous image spans ``[-0.5, w - 0.5]``. Resize policy (``resize_mode``):

- ``'pad'`` (default, the whole field of view): the window ``x0, y0, cw, ch`` is the smallest centred box with the
  model's aspect ratio that CONTAINS the frame (``x0, y0 <= 0``, integer source pixels); the frame is padded to it
  with :data:`PAD_RGB` (about the normalisation mean, so padding is ~0 after it) and invalid depth, then resized.
  A frame with the model's aspect ratio (640x480 for a 120x160 model) is only resized. Tokens whose patch centre
  lies in the padding see no image: :meth:`ModelInputs.token_in_frame` tells the pipeline which to ignore.
- ``'crop'``: the largest centred crop with the model's aspect ratio (the behaviour before full field of view:
  a 640x480 frame into a square model loses its outer quarter of columns).

Either way the window is then resized to ``(H, W)`` with ``cv2.INTER_AREA``. A source pixel
position ``u`` maps to ``u' = sx * (u - x0 + 0.5) - 0.5`` with ``sx = W / cw`` (same for v), so the new
intrinsics are ``K' = A @ K`` with ``A = [[sx, 0, sx*(0.5 - x0) - 0.5], [0, sy, sy*(0.5 - y0) - 0.5], [0, 0, 1]]``:
a 3D point projected with ``K`` onto the source frame lands, after the crop/resize, where ``K'`` projects it.

Depth (registered to colour) is sampled at the same model-pixel centres with nearest neighbour (centre-aligned,
like ``cv2.INTER_NEAREST_EXACT`` but in exact integer arithmetic, so colour and depth stay registered and no
depth values are blended). A depth image of another size is accepted when it is the colour frame scaled by one
factor (up to one pixel of rounding each way, e.g. 320x240 for 640x480): it is resized by that factor within the
same sampling; any other size is ``InputError('size_mismatch')``. Units come from the dtype, never a user
divisor: ``uint16`` = millimetres (16UC1), ``float32``/``float64`` = metres (32FC1). 0, NaN, ±inf, negative
(and beyond ``max_depth_m`` when set) are invalid and become 0 in the model input.

A frame whose depth has no valid pixel in the crop is still processed (the model sees the colour image and
treats all depth as missing): it is flagged with the warning kind ``'no_valid_depth'`` in ``ModelInputs.warnings``
rather than raised, so the node keeps publishing and counts the condition. Everything else wrong with a frame
raises :class:`~string_perception.runtime.errors.InputError` with one of ``INPUT_ERROR_KINDS``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from .errors import InputError

__all__ = [
    'ModelInputs', 'prepare_inputs', 'stack_inputs', 'to_rgb', 'mono8_to_rgb', 'bgr_to_rgb', 'rgba_to_rgb',
    'bgra_to_rgb', 'depth_to_metres', 'check_depth_array', 'check_registered', 'center_crop_box',
    'crop_resize_intrinsics', 'validate_intrinsics',
    'COLOR_ENCODINGS', 'DEPTH_ENCODINGS', 'DEFAULT_MAX_PIXELS', 'DEFAULT_MAX_SIDE', 'RESIZE_MODES', 'PAD_RGB',
    'fit_box', 'centre_samples',
]

COLOR_ENCODINGS = ('rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8')
DEPTH_ENCODINGS = ('16UC1', 'mono16', '32FC1')
# 8K UHD (7680x4320 = 33.2 Mpx) is handled; far bigger frames are refused before any work is done.
DEFAULT_MAX_PIXELS = 50_000_000
DEFAULT_MAX_SIDE = 16384
RESIZE_MODES = ('pad', 'crop')
PAD_RGB = (124, 116, 104)                # ~ ImageNet mean x 255: padding is ~0 after the in-graph normalisation
_MIN_FOCAL, _MAX_ABS_K = 1e-2, 1e8   # pixels; keeps K and the rescaled K finite and invertible in float32


@dataclass(frozen=True)
class ModelInputs:
    """One frame, ready for the model (batch of 1)."""

    image: np.ndarray                  # uint8 [1,H,W,3] RGB
    depth: np.ndarray                  # float32 [1,H,W] metres, invalid -> 0
    intrinsics: np.ndarray             # float32 [1,3,3], K of `image`
    crop_xywh: tuple[int, int, int, int]   # window of the source colour frame: x0, y0, width, height (pixels;
                                           # x0, y0 < 0 when the frame was padded)
    scale_xy: tuple[float, float]      # model pixels per source pixel (sx = W / cw, sy = H / ch)
    valid_depth_fraction: float        # fraction of model depth pixels that are valid
    warnings: tuple[str, ...] = ()     # warning kinds, e.g. ('no_valid_depth',)

    source_hw: tuple[int, int] = (0, 0)    # (h, w) of the source colour frame

    @property
    def input_hw(self) -> tuple[int, int]:
        return (int(self.image.shape[1]), int(self.image.shape[2]))

    def token_in_frame(self, patch_size: int) -> np.ndarray:
        """bool ``[N]`` (row-major patches of ``patch_size``): whether each token's patch centre images the
        source frame (False only for patches in the padding of ``resize_mode='pad'``)."""
        H, W = self.input_hw
        x0, y0, cw, ch = self.crop_xywh
        sx, sy = self.scale_xy
        h, w = self.source_hw
        uc = (np.arange(W // patch_size) + 0.5) * patch_size - 0.5                # [gw] patch centres, model px
        vc = (np.arange(H // patch_size) + 0.5) * patch_size - 0.5                # [gh]
        u = (uc + 0.5) / sx - 0.5 + x0                                            # [gw] source px
        v = (vc + 0.5) / sy - 0.5 + y0                                            # [gh]
        inside_u = (u >= -0.5) & (u <= w - 0.5)
        inside_v = (v >= -0.5) & (v <= h - 0.5)
        return (inside_v[:, None] & inside_u[None, :]).reshape(-1)                # [N]

    def feed(self) -> dict[str, np.ndarray]:
        """``{'image', 'depth', 'intrinsics'}`` for :meth:`OnnxModel.run` (``**inputs.feed()``)."""
        return {'image': self.image, 'depth': self.depth, 'intrinsics': self.intrinsics}


# ---------------------------------------------------------------------------------------------- colour
def _as_array(x, what: str) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception as e:  # ragged lists, odd objects
        raise InputError('bad_shape', f'{what} is not an array ({type(x).__name__}): {e}') from None


def _check_uint8_image(img: np.ndarray, what: str, channels: tuple[int, ...]) -> np.ndarray:
    if img.size == 0:
        raise InputError('empty_image', f'{what} is empty (shape {img.shape})')
    if img.ndim == 2 and 1 in channels:
        img = img[:, :, None]                                   # [h,w] -> [h,w,1]
    if img.ndim != 3 or img.shape[2] not in channels:
        raise InputError('bad_shape', f'{what} must be [h,w,{"|".join(map(str, channels))}], got shape {img.shape}')
    if img.dtype != np.uint8:
        raise InputError('bad_encoding', f'{what} must be uint8 (8-bit per channel), got {img.dtype}')
    return img


def _cvt(img: np.ndarray, code: int) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(img), code)


def mono8_to_rgb(image) -> np.ndarray:
    """mono8 ``uint8 [h,w]`` or ``[h,w,1]`` -> RGB ``uint8 [h,w,3]`` (grey replicated)."""
    img = _check_uint8_image(_as_array(image, 'mono8 image'), 'mono8 image', (1,))
    return _cvt(img[:, :, 0], cv2.COLOR_GRAY2RGB)


def bgr_to_rgb(image) -> np.ndarray:
    """bgr8 ``uint8 [h,w,3]`` -> RGB ``uint8 [h,w,3]``."""
    return _cvt(_check_uint8_image(_as_array(image, 'bgr8 image'), 'bgr8 image', (3,)), cv2.COLOR_BGR2RGB)


def rgba_to_rgb(image) -> np.ndarray:
    """rgba8 ``uint8 [h,w,4]`` -> RGB ``uint8 [h,w,3]`` (alpha dropped, not blended)."""
    return _cvt(_check_uint8_image(_as_array(image, 'rgba8 image'), 'rgba8 image', (4,)), cv2.COLOR_RGBA2RGB)


def bgra_to_rgb(image) -> np.ndarray:
    """bgra8 ``uint8 [h,w,4]`` -> RGB ``uint8 [h,w,3]`` (alpha dropped, not blended)."""
    return _cvt(_check_uint8_image(_as_array(image, 'bgra8 image'), 'bgra8 image', (4,)), cv2.COLOR_BGRA2RGB)


def to_rgb(image, encoding: str) -> np.ndarray:
    """Any of :data:`COLOR_ENCODINGS` (ROS ``sensor_msgs/Image.encoding``) -> RGB ``uint8 [h,w,3]``.

    ``rgb8`` input is returned as is (no copy). Unknown encodings raise ``InputError('bad_encoding')``.
    """
    enc = str(encoding).strip().lower()
    if enc == 'rgb8':
        return _check_uint8_image(_as_array(image, 'rgb8 image'), 'rgb8 image', (3,))
    conv = {'bgr8': bgr_to_rgb, 'rgba8': rgba_to_rgb, 'bgra8': bgra_to_rgb, 'mono8': mono8_to_rgb}.get(enc)
    if conv is None:
        raise InputError('bad_encoding', f'unsupported colour encoding {encoding!r}; supported: {COLOR_ENCODINGS}')
    return conv(image)


# ---------------------------------------------------------------------------------------------- depth
def _check_depth(depth, encoding: str | None) -> np.ndarray:
    d = _as_array(depth, 'depth image')
    if d.size == 0:
        raise InputError('empty_image', f'depth image is empty (shape {d.shape})')
    if d.ndim == 3 and d.shape[2] == 1:
        d = d[:, :, 0]                                          # [h,w,1] -> [h,w]
    if d.ndim != 2:
        raise InputError('bad_shape', f'depth image must be [h,w] (one channel), got shape {d.shape}')
    if d.dtype not in (np.uint16, np.float32, np.float64):
        raise InputError('bad_encoding', f'depth must be uint16 millimetres (16UC1) or float32 metres (32FC1), '
                                         f'got dtype {d.dtype}')
    if encoding is not None:
        enc = str(encoding).strip()
        want = {'16uc1': np.uint16, 'mono16': np.uint16, '32fc1': np.float32}.get(enc.lower())
        if want is None:
            raise InputError('bad_encoding', f'unsupported depth encoding {encoding!r}; supported: {DEPTH_ENCODINGS}')
        if d.dtype != want:
            raise InputError('bad_encoding', f'depth encoding {encoding!r} needs dtype {np.dtype(want)}, got {d.dtype}')
    return d


def check_depth_array(depth, encoding: str | None = None) -> np.ndarray:
    """A depth image as ``[h,w]`` uint16 / float32 / float64 (``[h,w,1]`` squeezed), its dtype matching the ROS
    ``encoding`` when given; ``InputError`` (``empty_image``, ``bad_shape``, ``bad_encoding``) otherwise."""
    return _check_depth(depth, encoding)


def check_registered(colour_hw: tuple[int, int], depth_hw: tuple[int, int]) -> None:
    """Registered depth of another size must be the colour frame scaled by one factor, up to a pixel of rounding;
    ``InputError('size_mismatch')`` otherwise."""
    (h, w), (hd, wd) = colour_hw, depth_hw
    if (hd, wd) != (h, w) and (abs(hd * w / wd - h) > 1.0 + 1e-9 or abs(wd * h / hd - w) > 1.0 + 1e-9):
        raise InputError('size_mismatch', f'depth {wd}x{hd} is not registered to colour {w}x{h}: different aspect '
                                          'ratio, so it cannot be resized by one factor')


def _to_metres(raw: np.ndarray, max_depth_m: float | None) -> np.ndarray:
    """Raw depth samples (uint16 mm or float m, any shape) -> float32 metres with invalid -> 0."""
    if raw.dtype == np.uint16:
        m = raw.astype(np.float32) / np.float32(1000.0)         # mm -> m (correctly rounded); 0 stays 0
    else:
        with np.errstate(invalid='ignore', over='ignore'):
            m = raw.astype(np.float32, copy=True)               # float64 beyond float32 range -> inf
            m[~(np.isfinite(m) & (m > 0))] = 0.0                # NaN, inf, <= 0 (and float64 overflow) -> 0
    if max_depth_m is not None:
        m[m > max_depth_m] = 0.0
    return m


def depth_to_metres(depth, encoding: str | None = None, max_depth_m: float | None = None) -> np.ndarray:
    """Depth image (uint16 mm or float32/float64 m) -> float32 ``[h,w]`` metres, invalid -> 0.

    ``encoding`` (optional, ROS ``16UC1`` / ``mono16`` / ``32FC1``) is checked against the dtype.
    """
    return _to_metres(_check_depth(depth, encoding), max_depth_m)


# ---------------------------------------------------------------------------------------------- geometry
def center_crop_box(h: int, w: int, out_h: int, out_w: int) -> tuple[int, int, int, int]:
    """Largest centred crop of an ``h x w`` frame with the aspect ratio of ``out_h x out_w`` -> (x0, y0, cw, ch)."""
    if w * out_h > h * out_w:                                   # frame wider than the model: crop columns
        cw = min(w, max(1, int(round(h * out_w / out_h))))
        return ((w - cw) // 2, 0, cw, h)
    ch = min(h, max(1, int(round(w * out_h / out_w))))          # frame taller (or equal): crop rows
    return (0, (h - ch) // 2, w, ch)


def centre_samples(n: int, start: int, window: int, src: int, dst: int) -> np.ndarray:
    """Indices ``[n]`` into an axis of ``dst`` pixels sampled at the centres of ``n`` model pixels spanning the window
    ``[start, start + window)`` of a ``src``-pixel axis (``dst`` = ``src`` scaled by one factor), in exact integer
    arithmetic: ``floor((start + (i + 1/2) * window / n) * dst / src)``. Unclipped: padding gives indices outside
    ``[0, dst)``. The depth (and, in training, instance-mask) sampling of :func:`prepare_inputs`."""
    k2 = 2 * np.arange(n, dtype=np.int64) + 1                   # [n] 2i+1
    return (2 * n * start + k2 * window) * dst // (2 * n * src)


def fit_box(h: int, w: int, out_h: int, out_w: int) -> tuple[int, int, int, int]:
    """Smallest centred window with the aspect ratio of ``out_h x out_w`` that contains an ``h x w`` frame ->
    (x0, y0, cw, ch) in source pixels, ``x0, y0 <= 0`` (the padding before the frame)."""
    if w * out_h > h * out_w:                                   # frame wider than the model: pad rows
        ch = max(h, int(round(w * out_h / out_w)))
        return (0, -((ch - h) // 2), w, ch)
    cw = max(w, int(round(h * out_w / out_h)))                  # frame taller (or equal): pad columns
    return (-((cw - w) // 2), 0, cw, h)


def crop_resize_intrinsics(K, crop_xywh: tuple[int, int, int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """K of the source frame -> K of the crop ``(x0, y0, cw, ch)`` resized to ``out_hw`` (float64 [3,3])."""
    x0, y0, cw, ch = crop_xywh
    sx, sy = out_hw[1] / cw, out_hw[0] / ch
    A = np.array([[sx, 0.0, sx * (0.5 - x0) - 0.5],
                  [0.0, sy, sy * (0.5 - y0) - 0.5],
                  [0.0, 0.0, 1.0]])                             # [3,3] source pixel -> model pixel
    return A @ np.asarray(K, dtype=np.float64)


def validate_intrinsics(K, hw: tuple[int, int] | None = None) -> np.ndarray:
    """Check a pinhole K (3x3 or 9 numbers, e.g. CameraInfo.k) -> float64 [3,3]; ``InputError('bad_intrinsics')``.

    Requires finite values, ``fx, fy`` in ``[0.01, 1e8]`` px (and every entry within ±1e8), last row ``[0, 0, 1]``,
    ``K[1,0] == 0`` and (given the image size ``hw``) a principal point inside the image ``[0, w] x [0, h]``.
    Skew ``K[0,1]`` is allowed.
    """
    try:
        K = np.asarray(K, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError('bad_intrinsics', f'intrinsics are not numeric: {e}') from None
    if K.size != 9:
        raise InputError('bad_intrinsics', f'intrinsics must be 3x3 (or 9 numbers), got shape {K.shape}')
    K = K.reshape(3, 3)
    if not np.all(np.isfinite(K)):
        raise InputError('bad_intrinsics', f'intrinsics contain NaN/inf: {K.tolist()}')
    if not np.any(K):
        raise InputError('bad_intrinsics', 'intrinsics are all zero (uncalibrated camera?)')
    if not (K[0, 0] > 0 and K[1, 1] > 0):
        raise InputError('bad_intrinsics', f'fx and fy must be > 0, got fx={K[0, 0]} fy={K[1, 1]}')
    if not (_MIN_FOCAL <= min(K[0, 0], K[1, 1]) and np.all(np.abs(K) <= _MAX_ABS_K)):
        raise InputError('bad_intrinsics', f'intrinsics out of range (fx, fy in [{_MIN_FOCAL}, {_MAX_ABS_K:g}] px, '
                                           f'|entries| <= {_MAX_ABS_K:g}): {K.tolist()}')
    if not (np.allclose(K[2], [0.0, 0.0, 1.0], atol=1e-6) and abs(K[1, 0]) <= 1e-9):
        raise InputError('bad_intrinsics', f'intrinsics must be [[fx,s,cx],[0,fy,cy],[0,0,1]], got {K.tolist()}')
    if hw is not None:
        h, w = hw
        if not (0.0 <= K[0, 2] <= w and 0.0 <= K[1, 2] <= h):
            raise InputError('bad_intrinsics', f'principal point ({K[0, 2]:.1f}, {K[1, 2]:.1f}) lies outside the '
                                               f'{w}x{h} image: CameraInfo for another resolution?')
    return K


# ---------------------------------------------------------------------------------------------- main entry
def prepare_inputs(rgb, depth, K, model_hw: tuple[int, int], *, max_depth_m: float | None = None,
                   intrinsics_hw: tuple[int, int] | None = None, depth_encoding: str | None = None,
                   max_pixels: int = DEFAULT_MAX_PIXELS, max_side: int = DEFAULT_MAX_SIDE,
                   resize_mode: str = 'pad', window_xywh: tuple[int, int, int, int] | None = None) -> ModelInputs:
    """Camera frame -> :class:`ModelInputs` for a model of input size ``model_hw = (H, W)``.

    ``rgb``: uint8 ``[h,w,3]`` RGB (convert other encodings with :func:`to_rgb`). ``depth``: uint16 mm or
    float32/float64 m, ``[h',w']`` registered to colour (same size, or same aspect ratio). ``K``: 3x3 of the
    colour frame. ``intrinsics_hw``: the (height, width) the intrinsics were calibrated for (CameraInfo), checked
    against the colour size when given. ``depth_encoding`` (ROS ``16UC1`` / ``mono16`` / ``32FC1``), when given, must
    match the depth dtype. ``resize_mode``: ``'pad'`` (whole frame) or ``'crop'`` (module docstring).
    ``window_xywh``: an explicit window ``(x0, y0, cw, ch)`` of the colour frame (integer pixels, inside the frame)
    instead of the one ``resize_mode`` chooses (tiled inference, :mod:`.tiling`); ``ValueError`` when it leaves the
    frame. Raises :class:`InputError`; warnings are returned in ``.warnings``.
    """
    if resize_mode not in RESIZE_MODES:
        raise ValueError(f'resize_mode must be one of {RESIZE_MODES}, got {resize_mode!r}')
    H, W = (int(v) for v in model_hw)
    if H <= 0 or W <= 0:
        raise ValueError(f'model_hw must be positive, got {model_hw}')  # programming error, not a bad frame
    if max_depth_m is not None and not (max_depth_m > 0):
        raise ValueError(f'max_depth_m must be > 0 or None, got {max_depth_m}')

    img = _check_uint8_image(_as_array(rgb, 'colour image'), 'colour image (RGB)', (3,))
    d = _check_depth(depth, depth_encoding)
    h, w = img.shape[:2]
    hd, wd = d.shape
    for what, (a, b) in (('colour', (h, w)), ('depth', (hd, wd))):
        if a > max_side or b > max_side or a * b > max_pixels:
            raise InputError('image_too_large', f'{what} image {b}x{a} exceeds the limits '
                                                f'({max_side} px per side, {max_pixels} px in all)')
    if intrinsics_hw is not None and tuple(int(v) for v in intrinsics_hw) != (h, w):
        raise InputError('bad_intrinsics', f'intrinsics are for a {intrinsics_hw[1]}x{intrinsics_hw[0]} image but '
                                           f'the colour image is {w}x{h}')
    K = validate_intrinsics(K, (h, w))

    check_registered((h, w), (hd, wd))

    if window_xywh is None:
        x0, y0, cw, ch = (fit_box if resize_mode == 'pad' else center_crop_box)(h, w, H, W)
    else:
        x0, y0, cw, ch = (int(v) for v in window_xywh)
        if not (x0 >= 0 and y0 >= 0 and cw >= 1 and ch >= 1 and x0 + cw <= w and y0 + ch <= h):
            raise ValueError(f'window {window_xywh} does not lie inside the {w}x{h} frame')
    if x0 < 0 or y0 < 0:                                        # pad: the frame inside a larger window
        crop = cv2.copyMakeBorder(img, -y0, ch - h + y0, -x0, cw - w + x0, cv2.BORDER_CONSTANT,
                                  value=PAD_RGB)                # [ch,cw,3]
    else:
        crop = img[y0:y0 + ch, x0:x0 + cw]                      # [ch,cw,3] view
    if (ch, cw) == (H, W):
        image = np.array(crop, dtype=np.uint8, order='C')       # [H,W,3] copy
    else:
        image = cv2.resize(np.ascontiguousarray(crop), (W, H), interpolation=cv2.INTER_AREA)  # [H,W,3]

    # Model pixel centres -> source colour coordinates -> depth pixel indices (centre-aligned nearest), in exact
    # integer arithmetic: row i samples floor((y0 + (i + 1/2) * ch / H) * hd / h) (edge-based coordinates).
    rows = centre_samples(H, y0, ch, h, hd)                     # [H] (negative in the top padding)
    cols = centre_samples(W, x0, cw, w, wd)                     # [W]
    depth_m = _to_metres(d[np.clip(rows, 0, hd - 1)[:, None], np.clip(cols, 0, wd - 1)[None, :]],
                         max_depth_m)                           # [H,W] float32
    if x0 < 0 or y0 < 0:                                        # padding has no depth
        depth_m[(rows < 0) | (rows >= hd), :] = 0.0
        depth_m[:, (cols < 0) | (cols >= wd)] = 0.0

    valid = float(np.count_nonzero(depth_m)) / depth_m.size
    warnings = ('no_valid_depth',) if valid == 0.0 else ()
    K_new = crop_resize_intrinsics(K, (x0, y0, cw, ch), (H, W))
    return ModelInputs(
        image=image[None],                                      # [1,H,W,3]
        depth=depth_m[None],                                    # [1,H,W]
        intrinsics=K_new.astype(np.float32)[None],              # [1,3,3]
        crop_xywh=(int(x0), int(y0), int(cw), int(ch)),
        scale_xy=(W / cw, H / ch),
        valid_depth_fraction=valid,
        warnings=warnings,
        source_hw=(int(h), int(w)),
    )


def stack_inputs(inputs: Sequence[ModelInputs]) -> dict[str, np.ndarray]:
    """Batch several frames' :class:`ModelInputs` (same model size) -> ``{'image' [B,H,W,3], 'depth' [B,H,W],
    'intrinsics' [B,3,3]}``."""
    if not inputs:
        raise ValueError('stack_inputs needs at least one frame')
    return {k: np.concatenate([getattr(x, k) for x in inputs], axis=0) for k in ('image', 'depth', 'intrinsics')}

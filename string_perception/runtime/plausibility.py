"""Plausibility of a decoded camera frame: values that are well-formed but cannot be what the camera saw (ROS-free).

:mod:`.preprocess` refuses what is *malformed* (NaN in K, sizes that do not match, unknown encodings). This module
catches the well-formed nonsense that would otherwise give confident wrong boxes: depth in the wrong unit, a focal
length no lens has, intrinsics made for another image size. Every threshold lives in :class:`PlausibilityLimits`
(one frozen dataclass; :data:`DEFAULT_LIMITS` is what the node uses). Each check is a pure function that raises
:class:`~string_perception.runtime.errors.InputError` with one of :data:`PLAUSIBILITY_KINDS`:

- :func:`check_image_sizes`: ``image_too_small`` (colour or depth narrower than ``min_image_side`` px, e.g. 1x1);
- :func:`check_depth_scale`: ``implausible_depth``: the median of the valid depth values (a fixed sample of pixels) is
  beyond ``max_median_depth_m`` (a 16UC1 image of 65535s, random values, tenths of a millimetre), or its scale is
  1000x off for the encoding (32FC1 whose median exceeds ``max_median_float_depth_m``: millimetres sent as metres;
  16UC1 whose median is below ``min_median_depth_m``: metres sent as millimetres). Tenths of a millimetre are
  caught once the scene is beyond a tenth of ``max_median_depth_m`` (1 m by default), centimetres never: such
  values are plausible millimetres;
- :func:`check_intrinsics_plausible`: ``implausible_intrinsics``: a horizontal or vertical field of view outside
  ``[min_fov_deg, max_fov_deg]`` (fx = 2 px, fx = 1e7 px), or a principal point further than
  ``max_principal_offset`` of the longer image side from the centre (K of a 320x240 camera used with 640x480
  images is 25 % off; the simulated cells' largest principal-point jitter, 20 %, passes).

A frame with no valid depth pixel passes :func:`check_depth_scale` (``no_valid_depth`` is the pipeline's warning).
:func:`check_frame_plausible` runs them all on a decoded frame, after the preprocess checks they depend on
(malformed depth, too large, K for another size, malformed K, unregistered depth), so each frame gets the one kind
that names its first problem.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .preprocess import (DEFAULT_MAX_PIXELS, DEFAULT_MAX_SIDE, check_depth_array, check_registered,
                         validate_intrinsics)

__all__ = ['PlausibilityLimits', 'DEFAULT_LIMITS', 'PLAUSIBILITY_KINDS', 'check_image_sizes', 'check_depth_scale',
           'check_intrinsics_plausible', 'check_frame_plausible', 'median_valid_depth_m', 'field_of_view_deg']

PLAUSIBILITY_KINDS = ('image_too_small', 'implausible_depth', 'implausible_intrinsics')


@dataclass(frozen=True)
class PlausibilityLimits:
    """Thresholds of the plausibility checks (module docstring); frozen, so one instance is shared safely."""

    min_image_side: int = 16                  # px, colour and depth: smaller is no camera frame (1x1)
    min_median_depth_m: float = 0.02          # 16UC1 median below 2 cm: metres written as mm
    max_median_depth_m: float = 10.0          # median beyond the indoor RGB-D range this node serves (0.2-3 m)
    max_median_float_depth_m: float = 100.0   # 32FC1 median beyond 100 "m": millimetres written as metres
    depth_samples: int = 4096                 # pixels sampled for the median (cost independent of image size)
    min_fov_deg: float = 5.0                  # horizontal and vertical field of view of a pinhole K
    max_fov_deg: float = 170.0
    max_principal_offset: float = 0.22        # |cx - centre| and |cy - centre| over the longer image side
    warn_stamp_ahead_s: float = 0.1           # node: a stamp this far ahead of its clock is warned (stamp_ahead)

    def __post_init__(self):
        if not (0 < self.min_median_depth_m < self.max_median_depth_m <= self.max_median_float_depth_m):
            raise ValueError('need 0 < min_median_depth_m < max_median_depth_m <= max_median_float_depth_m')
        if not (0 < self.min_fov_deg < self.max_fov_deg < 180):
            raise ValueError('need 0 < min_fov_deg < max_fov_deg < 180')
        if self.min_image_side < 1 or self.depth_samples < 1 or not (0 < self.max_principal_offset <= 0.5):
            raise ValueError('min_image_side and depth_samples >= 1, max_principal_offset in (0, 0.5]')


DEFAULT_LIMITS = PlausibilityLimits()


def check_image_sizes(colour_hw: tuple[int, int], depth_hw: tuple[int, int],
                      limits: PlausibilityLimits = DEFAULT_LIMITS) -> None:
    """``image_too_small`` when either image has a side below ``limits.min_image_side`` pixels."""
    for what, (h, w) in (('colour', colour_hw), ('depth', depth_hw)):
        if min(h, w) < limits.min_image_side:
            raise InputError('image_too_small', f'{what} image is {w}x{h}: below {limits.min_image_side} px per '
                                                'side, not a camera frame')


def median_valid_depth_m(depth: np.ndarray, samples: int = DEFAULT_LIMITS.depth_samples) -> float | None:
    """Median of the valid values (finite, > 0) of ``depth`` [h,w] in the depth's own unit, over ``samples``
    pixels drawn with a fixed seed (no grid, so no row/column pattern can alias it; all pixels when there are
    fewer); None when no sampled pixel is valid."""
    if depth.ndim == 3:
        depth = depth[:, :, 0]
    h, w = depth.shape[:2]
    if h * w <= samples:
        picked = np.asarray(depth, dtype=np.float64).ravel()
    else:
        rows, cols = np.unravel_index(np.random.default_rng(0).integers(0, h * w, samples), (h, w))
        picked = np.asarray(depth[rows, cols], dtype=np.float64)
    valid = picked[np.isfinite(picked) & (picked > 0)]
    return float(np.median(valid)) if valid.size else None


def check_depth_scale(depth: np.ndarray, limits: PlausibilityLimits = DEFAULT_LIMITS) -> None:
    """``implausible_depth`` when the valid depth of ``depth`` (uint16 mm, or float metres) cannot be a camera's.

    Refused (module docstring): float median > ``max_median_float_depth_m`` (looks like millimetres); any median >
    ``max_median_depth_m``; uint16 median < ``min_median_depth_m`` (looks like metres).
    """
    median = median_valid_depth_m(depth, limits.depth_samples)
    if median is None:
        return
    is_mm = depth.dtype == np.uint16
    m = median / 1000.0 if is_mm else median
    unit = '16UC1 millimetres' if is_mm else '32FC1 metres'
    if not is_mm and m > limits.max_median_float_depth_m:
        raise InputError('implausible_depth', f'median valid depth is {m:.4g} m as {unit}: 1000x too large, '
                                              'millimetres published as 32FC1? (32FC1 must be metres)')
    if m > limits.max_median_depth_m:
        raise InputError('implausible_depth', f'median valid depth is {m:.4g} m as {unit}: beyond '
                                              f'{limits.max_median_depth_m:g} m, no RGB-D sensor\'s range (wrong '
                                              'unit or scale, saturated 65535s, or noise?)')
    if is_mm and m < limits.min_median_depth_m:
        raise InputError('implausible_depth', f'median valid depth is {median:.4g} mm as {unit}: below '
                                              f'{limits.min_median_depth_m * 1000:g} mm, metres published as '
                                              '16UC1? (16UC1 must be millimetres)')


def field_of_view_deg(focal_px: float, size_px: int) -> float:
    """Full field of view (degrees) of a pinhole of focal length ``focal_px`` over ``size_px`` pixels."""
    return math.degrees(2.0 * math.atan(0.5 * size_px / focal_px))


def check_intrinsics_plausible(K: np.ndarray, hw: tuple[int, int], limits: PlausibilityLimits = DEFAULT_LIMITS) -> None:
    """``implausible_intrinsics`` when a (validated, fx, fy > 0) K cannot belong to a camera whose image is ``hw``:
    field of view outside ``[min_fov_deg, max_fov_deg]`` or principal point off-centre by more than
    ``max_principal_offset`` of the longer image side."""
    h, w = hw
    K = np.asarray(K, np.float64).reshape(3, 3)
    for axis, focal, size in (('horizontal', K[0, 0], w), ('vertical', K[1, 1], h)):
        fov = field_of_view_deg(focal, size)
        if not (limits.min_fov_deg <= fov <= limits.max_fov_deg):
            raise InputError('implausible_intrinsics', f'{axis} field of view {fov:.3g} deg (focal {focal:.4g} px '
                                                       f'over {size} px) is outside [{limits.min_fov_deg:g}, '
                                                       f'{limits.max_fov_deg:g}] deg: K not in pixels of this image?')
    for axis, c, size in (('cx', K[0, 2], w), ('cy', K[1, 2], h)):
        offset = abs(c - 0.5 * (size - 1)) / max(h, w)
        if offset > limits.max_principal_offset:
            raise InputError('implausible_intrinsics', f'{axis} = {c:.1f} px is {offset:.0%} of the image\'s longer '
                                                       f'side off its centre ({w}x{h} image; limit '
                                                       f'{limits.max_principal_offset:.0%}): K calibrated for '
                                                       'another resolution?')


def check_frame_plausible(colour_hw: tuple[int, int], depth: np.ndarray, K, intrinsics_hw: tuple[int, int] | None,
                          limits: PlausibilityLimits = DEFAULT_LIMITS, depth_encoding: str | None = None) -> None:
    """Every check of this module on a decoded frame (colour size, depth array and its ROS encoding, K, and the
    CameraInfo size or None).

    What :func:`.preprocess.prepare_inputs` refuses comes first, with its kinds and in its order (depth array
    ``bad_encoding`` / ``bad_shape`` / ``empty_image``, ``image_too_large``, ``bad_intrinsics`` for a K of another
    size or a malformed K, ``size_mismatch``), so a malformed frame is named as before; then ``image_too_small``,
    ``implausible_intrinsics``, ``implausible_depth``. A colour image with no pixels is left to the pipeline.
    """
    depth = check_depth_array(depth, depth_encoding)
    colour_hw = (int(colour_hw[0]), int(colour_hw[1]))
    depth_hw = (int(depth.shape[0]), int(depth.shape[1]))
    if min(colour_hw) == 0:
        return
    for what, (h, w) in (('colour', colour_hw), ('depth', depth_hw)):
        if h > DEFAULT_MAX_SIDE or w > DEFAULT_MAX_SIDE or h * w > DEFAULT_MAX_PIXELS:
            raise InputError('image_too_large', f'{what} image {w}x{h} exceeds the limits ({DEFAULT_MAX_SIDE} px '
                                                f'per side, {DEFAULT_MAX_PIXELS} px in all)')
    if intrinsics_hw is not None and tuple(intrinsics_hw) != colour_hw:
        raise InputError('bad_intrinsics', f'intrinsics are for a {intrinsics_hw[1]}x{intrinsics_hw[0]} image but '
                                           f'the colour image is {colour_hw[1]}x{colour_hw[0]}')
    K = validate_intrinsics(K, colour_hw)
    check_registered(colour_hw, depth_hw)
    check_image_sizes(colour_hw, depth_hw, limits)
    check_intrinsics_plausible(K, colour_hw, limits)
    check_depth_scale(depth, limits)

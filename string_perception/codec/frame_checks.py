"""Header-level checks of incoming camera messages, before any pixel is touched (ROS-free, duck-typed messages).

The node runs these in the synchroniser callback, so a bad frame is refused before it can take the worker's
slot from a good one (the worker keeps only the newest frame). Pixel-level problems (intrinsics, sizes, depth
values) stay in :mod:`string_perception.runtime.preprocess`. Every refusal is an
:class:`~string_perception.runtime.errors.InputError` whose ``kind`` the node counts in /diagnostics:

- :func:`check_image_layout` (raw ``sensor_msgs/Image``): ``bad_encoding`` (unknown or not a colour / depth
  encoding), ``empty_image`` (height or width 0), ``bad_layout`` (step shorter than a row, or data length not
  ``step * height``);
  ``step * height``), ``big_endian`` (``is_bigendian`` set on multi-byte data: refused, never misread as
  little-endian);
- :func:`check_frame_ids`: ``frame_id_mismatch`` (colour, depth and CameraInfo name frames, and not the same one:
  depth that is not registered to colour, or the intrinsics of another camera); an empty colour frame id is the
  warning ``empty_frame_id`` (processed; the outputs then name no frame);
- :func:`check_stamp_fields`: ``bad_stamp`` (``nanosec`` >= 1e9 or negative ``sec``: not a valid time);
- :func:`check_camera_info`: ``bad_distortion`` (a distortion coefficient NaN or inf); warnings
  ``distortion_ignored`` (a model the node treats as pinhole but is not close to one: ``equidistant`` / fisheye or
  an unknown model, with non-zero coefficients; the node never undistorts) and ``camera_info_no_size`` (height or
  width 0: K cannot be checked against the image size, only for plausibility);
- :class:`StampGate`: ``zero_stamp``; ``future_stamp`` (more than ``max_future_s`` ahead of the node clock; not
  checked while the clock reads 0, e.g. sim time before the first /clock); ``out_of_order_stamp`` (not newer
  than the last accepted frame). A step back of more than ``reset_jump_s`` is taken as a clock reset (bag loop,
  restarted simulation): the frame is accepted and reported as the warning ``stamp_reset``; a stamp more than
  ``warn_future_s`` (but at most ``max_future_s``) ahead is processed with the warning ``stamp_ahead``.

:class:`InputWatch` notices an input that went silent (``missing_depth`` / ``missing_camera_info`` while colour
images keep arriving; with depth as the primary, ``missing_image``) or that arrives stamped zero
(``zero_stamp_<input>``): the synchroniser never completes a frame then, so nothing else would say why.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..runtime.errors import InputError
from ..runtime.preprocess import COLOR_ENCODINGS, DEPTH_ENCODINGS
from .image_conversion import ImageEncodingError, encoding_info

__all__ = ['FRAME_CHECK_KINDS', 'FRAME_CHECK_WARNINGS', 'PINHOLE_MODELS', 'check_image_layout', 'check_frame_ids',
           'check_stamp_fields', 'check_camera_info', 'StampGate', 'InputWatch']

FRAME_CHECK_KINDS = ('bad_encoding', 'empty_image', 'bad_layout', 'big_endian', 'frame_id_mismatch', 'bad_stamp',
                     'bad_distortion', 'zero_stamp', 'future_stamp', 'out_of_order_stamp')
FRAME_CHECK_WARNINGS = ('empty_frame_id', 'distortion_ignored', 'camera_info_no_size', 'stamp_reset', 'stamp_ahead')
# Models whose coefficients are a (small) correction of a pinhole: processed as the pinhole K, silently. The
# rest (equidistant / fisheye, unknown names) are processed as a pinhole too, with the warning distortion_ignored.
PINHOLE_MODELS = ('', 'plumb_bob', 'rational_polynomial')
S_TO_NS = 1_000_000_000


def check_image_layout(msg: Any, role: str) -> None:
    """A raw Image's encoding, size, step and data length; ``role`` is 'colour' or 'depth'."""
    allowed = {'colour': COLOR_ENCODINGS, 'depth': DEPTH_ENCODINGS}[role]
    enc = str(msg.encoding)
    if enc.strip().lower() not in {e.lower() for e in allowed}:
        raise InputError('bad_encoding', f'{role} image encoding {enc!r} is not one of {", ".join(allowed)}')
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if h == 0 or w == 0:
        raise InputError('empty_image', f'{role} image is {w}x{h}')
    try:
        dtype, channels = encoding_info(enc)
    except ImageEncodingError as e:  # an allowed name always parses; kept for safety
        raise InputError('bad_encoding', str(e)) from None
    row = w * channels * dtype.itemsize
    n = len(msg.data)
    if step < row or n != step * h:
        raise InputError('bad_layout', f'{role} image {w}x{h} {enc}: step {step} (a row needs >= {row}) and '
                                       f'{n} data bytes (expected step x height = {step * h})')
    if dtype.itemsize > 1 and int(getattr(msg, 'is_bigendian', 0) or 0):
        raise InputError('big_endian', f'{role} image {enc} has is_bigendian set: only little-endian (host order) '
                                       'data is read; refused rather than misread')


def check_frame_ids(colour_frame: str, depth_frame: str, info_frame: str | None = None) -> tuple[str, ...]:
    """Registered depth and the colour CameraInfo carry the colour frame id: two different non-empty ids raise
    ``frame_id_mismatch``. Returns ``('empty_frame_id',)`` when the colour frame id is empty, else ``()``."""
    if colour_frame and depth_frame and colour_frame != depth_frame:
        raise InputError('frame_id_mismatch', f'depth frame {depth_frame!r} != colour frame {colour_frame!r}: '
                                              'the depth image must be registered (aligned) to the colour image')
    if info_frame and (colour_frame or depth_frame) and info_frame != (colour_frame or depth_frame):
        raise InputError('frame_id_mismatch', f'CameraInfo frame {info_frame!r} != image frame '
                                              f'{colour_frame or depth_frame!r}: the camera_info topic must be the '
                                              "colour camera's (remapped to another camera's?)")
    return () if colour_frame else ('empty_frame_id',)


def check_stamp_fields(stamp: Any, what: str) -> None:
    """A builtin_interfaces/Time must have ``0 <= nanosec < 1e9`` and ``sec >= 0``; else ``bad_stamp``."""
    sec, nanosec = int(stamp.sec), int(stamp.nanosec)
    if not 0 <= nanosec < S_TO_NS:
        raise InputError('bad_stamp', f'{what} stamp has nanosec = {nanosec} (must be below 1e9): not a valid time')
    if sec < 0:
        raise InputError('bad_stamp', f'{what} stamp has sec = {sec}: negative, not a valid time')


def check_camera_info(info: Any) -> tuple[str, ...]:
    """A CameraInfo's distortion and size (module docstring) -> warning kinds; ``bad_distortion`` raises."""
    d = np.asarray(list(info.d), dtype=np.float64)
    if not np.all(np.isfinite(d)):
        raise InputError('bad_distortion', f'distortion coefficients contain NaN/inf: {d.tolist()}')
    warnings: tuple[str, ...] = ()
    if str(info.distortion_model) not in PINHOLE_MODELS and np.any(d):
        warnings += ('distortion_ignored',)
    if int(info.height) == 0 or int(info.width) == 0:
        warnings += ('camera_info_no_size',)
    return warnings


class StampGate:
    """Accepts frames whose stamps move forward. ``check(stamp_ns, now_ns)`` -> warning kinds (tuple), or raises.

    ``max_future_s`` (0 = no future check), ``reset_jump_s`` and ``warn_future_s`` (0 = no ``stamp_ahead``
    warning) may be changed at any time.
    """

    def __init__(self, max_future_s: float, reset_jump_s: float, warn_future_s: float = 0.0):
        self.max_future_s, self.reset_jump_s = float(max_future_s), float(reset_jump_s)
        self.warn_future_s = float(warn_future_s)
        self.last_ns: int | None = None

    def check(self, stamp_ns: int, now_ns: int) -> tuple[str, ...]:
        if stamp_ns == 0:
            raise InputError('zero_stamp', 'header stamp is 0 (driver not stamping, or sim time without /clock)')
        ahead = (stamp_ns - now_ns) / S_TO_NS
        if self.max_future_s > 0 and now_ns > 0 and ahead > self.max_future_s:
            raise InputError('future_stamp', f'stamp is {ahead:.3f} s ahead of the node clock '
                                             f'(limit {self.max_future_s:g} s): clocks not synchronised?')
        warnings: tuple[str, ...] = ()
        if self.warn_future_s > 0 and now_ns > 0 and ahead > self.warn_future_s:
            warnings = ('stamp_ahead',)
        if self.last_ns is not None and stamp_ns <= self.last_ns:
            back = (self.last_ns - stamp_ns) / S_TO_NS
            if back <= self.reset_jump_s:
                raise InputError('out_of_order_stamp', f'stamp is {back * 1e3:.1f} ms older than (or equal to) the '
                                                       'last processed frame')
            warnings += ('stamp_reset',)
        self.last_ns = stamp_ns
        return warnings


class InputWatch:
    """Notices partner inputs (depth, camera_info) that stay silent while the primary (colour) keeps arriving.

    ``seen(name, now_ns, stamp_ns=None)`` on every message (monotonic ns); ``missing(now_ns)``: partners not seen
    since the first primary message that came after their last one, more than ``timeout_s`` ago. A partner seen
    less than ``timeout_s`` before a primary answers it (small messages overtake a large colour image on the wire),
    so its clock starts only at a primary that finds it silent for longer. A stream that pauses and resumes is not
    missing: the first colour image after the pause starts the clock and its partners stop it. A partner message
    stamped 0 (``stamp_ns == 0``) cannot be paired, so it does not count as seen; :meth:`problems` names such a
    partner ``zero_stamp_<name>`` instead of ``missing_<name>``.
    """

    def __init__(self, primary: str, partners: Iterable[str], timeout_s: float):
        self.primary, self.timeout_s = primary, float(timeout_s)
        self._waiting_since: dict[str, int | None] = {name: None for name in partners}
        self._last_seen: dict[str, int | None] = {name: None for name in partners}
        self._zero_stamped: dict[str, bool] = {name: False for name in partners}

    def seen(self, name: str, now_ns: int, stamp_ns: int | None = None) -> None:
        if name == self.primary:
            limit = self.timeout_s * S_TO_NS
            for partner, since in self._waiting_since.items():
                last = self._last_seen[partner]
                if since is None and (last is None or now_ns - last > limit):
                    self._waiting_since[partner] = int(now_ns)
        elif name in self._waiting_since:
            self._zero_stamped[name] = stamp_ns == 0
            if stamp_ns != 0:
                self._waiting_since[name] = None
                self._last_seen[name] = int(now_ns)

    def missing(self, now_ns: int) -> list[str]:
        limit = self.timeout_s * S_TO_NS
        return [n for n, since in self._waiting_since.items() if since is not None and now_ns - since > limit]

    def problems(self, now_ns: int) -> list[tuple[str, str]]:
        """``(kind, partner)`` for the :meth:`missing` partners: kind ``zero_stamp_<partner>`` when its last message
        was stamped 0, else ``missing_<partner>``."""
        return [(f'{"zero_stamp" if self._zero_stamped[n] else "missing"}_{n}', n) for n in self.missing(now_ns)]

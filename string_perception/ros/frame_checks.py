"""Header-level checks of incoming camera messages, before any pixel is touched (ROS-free, duck-typed messages).

The node runs these in the synchroniser callback, so a bad frame is refused before it can take the worker's
slot from a good one (the worker keeps only the newest frame). Pixel-level problems (intrinsics, sizes, depth
values) stay in :mod:`string_perception.runtime.preprocess`. Every refusal is an
:class:`~string_perception.runtime.errors.InputError` whose ``kind`` the node counts in /diagnostics:

- :func:`check_image_layout` (raw ``sensor_msgs/Image``): ``bad_encoding`` (unknown or not a colour / depth
  encoding), ``empty_image`` (height or width 0), ``bad_layout`` (step shorter than a row, or data length not
  ``step * height``);
- :func:`check_frame_ids`: ``frame_id_mismatch`` (colour and depth both name a frame, and not the same one:
  depth that is not registered to colour);
- :class:`StampGate`: ``zero_stamp``; ``future_stamp`` (more than ``max_future_s`` ahead of the node clock; not
  checked while the clock reads 0, e.g. sim time before the first /clock); ``out_of_order_stamp`` (not newer
  than the last accepted frame). A step back of more than ``reset_jump_s`` is taken as a clock reset (bag loop,
  restarted simulation): the frame is accepted and reported as the warning ``stamp_reset``.

:class:`InputWatch` notices an input that went silent (``missing_depth`` / ``missing_camera_info`` while colour
images keep arriving): the synchroniser never completes a frame then, so nothing else would say why.
"""
from __future__ import annotations

from typing import Any, Iterable

from ..runtime.errors import InputError
from ..runtime.preprocess import COLOR_ENCODINGS, DEPTH_ENCODINGS
from .image_conversion import ImageEncodingError, encoding_info

__all__ = ['FRAME_CHECK_KINDS', 'check_image_layout', 'check_frame_ids', 'StampGate', 'InputWatch']

FRAME_CHECK_KINDS = ('bad_encoding', 'empty_image', 'bad_layout', 'frame_id_mismatch', 'zero_stamp',
                     'future_stamp', 'out_of_order_stamp')
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


def check_frame_ids(colour_frame: str, depth_frame: str) -> None:
    """Registered depth carries the colour frame id; two different non-empty ids mean it is not registered."""
    if colour_frame and depth_frame and colour_frame != depth_frame:
        raise InputError('frame_id_mismatch', f'depth frame {depth_frame!r} != colour frame {colour_frame!r}: '
                                              'the depth image must be registered (aligned) to the colour image')


class StampGate:
    """Accepts frames whose stamps move forward. ``check(stamp_ns, now_ns)`` -> warning kinds (tuple), or raises.

    ``max_future_s`` (0 = no future check) and ``reset_jump_s`` may be changed at any time.
    """

    def __init__(self, max_future_s: float, reset_jump_s: float):
        self.max_future_s, self.reset_jump_s = float(max_future_s), float(reset_jump_s)
        self.last_ns: int | None = None

    def check(self, stamp_ns: int, now_ns: int) -> tuple[str, ...]:
        if stamp_ns == 0:
            raise InputError('zero_stamp', 'header stamp is 0 (driver not stamping, or sim time without /clock)')
        ahead = (stamp_ns - now_ns) / S_TO_NS
        if self.max_future_s > 0 and now_ns > 0 and ahead > self.max_future_s:
            raise InputError('future_stamp', f'stamp is {ahead:.3f} s ahead of the node clock '
                                             f'(limit {self.max_future_s:g} s): clocks not synchronised?')
        warnings: tuple[str, ...] = ()
        if self.last_ns is not None and stamp_ns <= self.last_ns:
            back = (self.last_ns - stamp_ns) / S_TO_NS
            if back <= self.reset_jump_s:
                raise InputError('out_of_order_stamp', f'stamp is {back * 1e3:.1f} ms older than (or equal to) the '
                                                       'last processed frame')
            warnings = ('stamp_reset',)
        self.last_ns = stamp_ns
        return warnings


class InputWatch:
    """Notices partner inputs (depth, camera_info) that stay silent while the primary (colour) keeps arriving.

    ``seen(name, now_ns)`` on every message (monotonic ns); ``missing(now_ns)``: partners not seen since the first
    primary message that came after their last one, more than ``timeout_s`` ago. A partner seen less than
    ``timeout_s`` before a primary answers it (small messages overtake a large colour image on the wire), so its
    clock starts only at a primary that finds it silent for longer. A stream that pauses and resumes is not
    missing: the first colour image after the pause starts the clock and its partners stop it.
    """

    def __init__(self, primary: str, partners: Iterable[str], timeout_s: float):
        self.primary, self.timeout_s = primary, float(timeout_s)
        self._waiting_since: dict[str, int | None] = {name: None for name in partners}
        self._last_seen: dict[str, int | None] = {name: None for name in partners}

    def seen(self, name: str, now_ns: int) -> None:
        if name == self.primary:
            limit = self.timeout_s * S_TO_NS
            for partner, since in self._waiting_since.items():
                last = self._last_seen[partner]
                if since is None and (last is None or now_ns - last > limit):
                    self._waiting_since[partner] = int(now_ns)
        elif name in self._waiting_since:
            self._waiting_since[name] = None
            self._last_seen[name] = int(now_ns)

    def missing(self, now_ns: int) -> list[str]:
        limit = self.timeout_s * S_TO_NS
        return [n for n, since in self._waiting_since.items() if since is not None and now_ns - since > limit]

"""Tiled inference: the whole frame plus overlapping windows, each at the model's input size, merged into one box list.

A 640x480 frame into a 120x160 model is downscaled 4x, so an object 16-64 px across is 4-16 px at the input. Tiling
runs the same model (no retraining) on the whole frame AND on ``rows x cols`` windows cropped from the full-resolution
frame, each resized to the model's input with its own intrinsics (:func:`.preprocess.prepare_inputs` with
``window_xywh``; :func:`.preprocess.crop_resize_intrinsics`), so a 2x2 grid sees objects at ~1.8x the resolution.
The model predicts boxes in the camera frame, in metres, from depth and the intrinsics it is given, so every pass's
boxes are already in one frame: the candidates of all passes go into one list, and the runtime's usual decoding
(threshold, top-k, oriented 3D NMS of :mod:`.nms`) makes one set of detections out of it (``Pipeline(tiling=...)``).

Layout (:func:`window_layout`): windows have the model's aspect ratio (to the pixel), are the smallest that let the
grid cover the frame with neighbours sharing at least ``overlap`` of a window's side, and are spaced evenly, the
first flush with the top-left corner and the last with the bottom-right one; a grid side of 1 spans the frame.

Border rule (:func:`window_keep`): a window's token is dropped when its box's centre, projected with the window's
intrinsics, lies within ``margin`` (a fraction of the window's side) of one of the window's INNER borders (those that
are not the image border), or beyond it: an object cut by that border gives a truncated box there, and a
neighbouring window (they overlap) or the full-frame pass sees it whole. ``margin <= overlap / 2``, else the middle
of the overlap is dropped by both windows. Measured on the workcell test frames (docs/results/workcell.md, "Tiled
inference"), the rule costs more than it saves, so the default margin is 0 (boxes beyond a window are still dropped). The full-frame pass keeps its boxes
(``full_frame_boxes``) for objects larger than a window.

Merge rule (:mod:`.tile_merge`, ``TilingConfig.merge``): the windows, zoomed in, fire on structure the whole frame
does not call an object, so a window candidate enters the merge at full score only when the full-frame pass has a
candidate scoring >= 0.2 near it (centre within 0.4 x its half diagonal); any other window candidate's score is
multiplied by 0.3 (:data:`DEFAULT_MERGE`, measured in docs/results/tiling_precision.md). ``confirm=0`` merges every
window candidate at its own score, as the first version did.

Spec strings (:func:`parse_tiling`, the evaluator's ``MODEL:tiles2x2``; the node's ``tiling`` parameter takes ``none``, ``2x2``
or ``3x3``): ``'none'``,
``'2x2'``, ``'2x2,overlap=0.2,margin=0.05,full=0,batch=0,agnostic=1'``; the window-candidate merge rules of
:mod:`.tile_merge` (:class:`.tile_merge.MergeRule`): ``confirm=F`` (a window box needs a full-frame candidate
scoring >= F near it), ``radius=F``, ``cross=0|1`` (another window's candidate confirms too), ``unconfirmed=F``
(0 drops an unconfirmed box, else its score x F), ``wscale=F`` (every window box's score x F),
``replace=0|1`` (a full-frame candidate that confirms a window box leaves the merge).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .tile_merge import MergeRule

__all__ = ['TilingConfig', 'DEFAULT_MERGE', 'parse_tiling', 'window_layout', 'inner_borders', 'window_keep', 'merge_candidates']


# the tiled mode's merge rule (docs/results/tiling_precision.md): a window box needs a full-frame candidate scoring
# >= 0.2 within 0.4 x its half diagonal, else its score x 0.3 (precision at 0.3: 0.22 -> 0.36 ALOHA, 0.15 -> 0.34
# KUKA; AP3D@0.25 +0.03 / +0.06; class-aware IoU within 0.002). 'confirm=0' merges every window box as before.
DEFAULT_MERGE = MergeRule(confirm=0.2, radius=0.4, unconfirmed=0.3)


@dataclass(frozen=True)
class TilingConfig:
    """How to tile a frame (module docstring)."""

    grid: tuple[int, int] = (2, 2)    # (rows, cols) of windows
    overlap: float = 0.3              # neighbours share at least this fraction of a window's side, in [0, 1)
    margin: float = 0.0               # drop a window's box whose projected centre is this close (fraction of the
                                      # window's side) to an inner border, in [0, overlap / 2]
    full_frame_boxes: bool = True     # the full-frame pass's boxes enter the merge (it always runs: the embedding)
    batch: bool = True                # run all passes in one model call (else one call per pass)
    agnostic: bool = False            # the merge's NMS is class-agnostic (whatever the pipeline's nms_class_agnostic)
    merge: MergeRule = DEFAULT_MERGE  # which window candidates enter the merge, with what score (.tile_merge)

    def __post_init__(self):
        rows, cols = self.grid
        if int(rows) != rows or int(cols) != cols or rows < 1 or cols < 1:
            raise ValueError(f'grid must be two integers >= 1, got {self.grid}')
        if not (0.0 <= self.overlap < 1.0):
            raise ValueError(f'overlap must be in [0, 1), got {self.overlap}')
        if not (0.0 <= self.margin <= self.overlap / 2 + 1e-12):
            raise ValueError(f'margin must be in [0, overlap / 2 = {self.overlap / 2:g}], got {self.margin}: a larger '
                             'one drops the centres in the middle of the overlap in both windows')

    @property
    def spec(self) -> str:
        """The spec string that :func:`parse_tiling` turns back into this config."""
        d = TilingConfig()
        out = f'{self.grid[0]}x{self.grid[1]}'
        for key, name in (('overlap', 'overlap'), ('margin', 'margin')):
            if getattr(self, key) != getattr(d, key):
                out += f',{name}={getattr(self, key):g}'
        for key, name in (('full_frame_boxes', 'full'), ('batch', 'batch'), ('agnostic', 'agnostic')):
            if getattr(self, key) != getattr(d, key):
                out += f',{name}={int(getattr(self, key))}'
        m, dm = self.merge, d.merge
        for key, name in MERGE_OPTIONS.items():
            v = getattr(m, key)
            if v != getattr(dm, key):
                out += f',{name}={int(v)}' if isinstance(v, bool) else f',{name}={v:g}'
        return out


MERGE_OPTIONS = {'confirm': 'confirm', 'radius': 'radius', 'cross': 'cross', 'unconfirmed': 'unconfirmed',
                 'window_scale': 'wscale', 'replace': 'replace'}   # MergeRule field -> spec option name


def parse_tiling(spec: str | None) -> TilingConfig | None:
    """``'none'`` / ``''`` / None -> None (no tiling); ``'RxC[,overlap=F][,margin=F][,full=0|1][,batch=0|1]
    [,agnostic=0|1][,confirm=F][,radius=F][,cross=0|1][,unconfirmed=F][,wscale=F][,replace=0|1]'``
    ->
    :class:`TilingConfig`; ``ValueError`` for anything else (an unknown option, a value out of range)."""
    if spec is None or spec.strip().lower() in ('', 'none'):
        return None
    head, *opts = [s.strip() for s in spec.strip().lower().split(',')]
    try:
        rows, cols = (int(v) for v in head.split('x'))
    except ValueError:
        raise ValueError(f"tiling spec must start with ROWSxCOLS (e.g. '2x2'), got {spec!r}") from None
    fields: dict = {'grid': (rows, cols)}
    merge: dict = {}
    for opt in opts:
        key, _, val = opt.partition('=')
        try:
            if key in ('overlap', 'margin'):
                fields[key] = float(val)
            elif key in ('full', 'batch', 'agnostic') and val in ('0', '1'):
                fields['full_frame_boxes' if key == 'full' else key] = val == '1'
            elif key in ('confirm', 'radius', 'unconfirmed', 'wscale'):
                merge['window_scale' if key == 'wscale' else key] = float(val)
            elif key in ('cross', 'replace') and val in ('0', '1'):
                merge[key] = val == '1'
            else:
                raise KeyError(key)
        except (KeyError, ValueError):
            raise ValueError(f'unknown tiling option {opt!r} in {spec!r} (overlap=F, margin=F, full=0|1, batch=0|1, '
                             'agnostic=0|1, confirm=F, radius=F, cross=0|1, unconfirmed=F, wscale=F, replace=0|1)'
                             ) from None
    return TilingConfig(**fields, merge=dataclasses.replace(DEFAULT_MERGE, **merge))


def window_layout(h: int, w: int, input_hw: tuple[int, int], grid: tuple[int, int],
                  overlap: float) -> list[tuple[int, int, int, int]]:
    """Windows ``(x0, y0, cw, ch)`` (integer source pixels, inside the ``h x w`` frame, row-major) of a ``grid =
    (rows, cols)`` layout for a model of input ``(H, W)``: the model's aspect ratio, each neighbour pair sharing
    at least ``overlap`` of the window's side (up to a pixel of rounding), the union exactly the frame."""
    rows, cols = grid
    H, W = input_hw
    need_w = w / (cols - (cols - 1) * overlap)                # n windows of side s with overlap o cover s(n-(n-1)o)
    need_h = h / (rows - (rows - 1) * overlap)
    cw = max(need_w, need_h * W / H)                          # the model's aspect ratio, large enough on both axes
    cw, ch = min(w, math.ceil(cw - 1e-9)), min(h, math.ceil(cw * H / W - 1e-9))

    def starts(n: int, length: int, side: int) -> list[int]:
        return [0] if n == 1 else [int(round(i * (length - side) / (n - 1))) for i in range(n)]

    return [(x0, y0, cw, ch) for y0 in starts(rows, h, ch) for x0 in starts(cols, w, cw)]


def inner_borders(window: tuple[int, int, int, int], h: int, w: int) -> tuple[bool, bool, bool, bool]:
    """Which of the window's (left, top, right, bottom) borders lie inside the ``h x w`` frame (not its border)."""
    x0, y0, cw, ch = window
    return (x0 > 0, y0 > 0, x0 + cw < w, y0 + ch < h)


def window_keep(boxes: np.ndarray, K: np.ndarray, input_hw: tuple[int, int],
                inner: tuple[bool, bool, bool, bool], margin: float) -> np.ndarray:
    """bool ``[N]``: which of a window's tokens ``boxes[N,12]`` (centre = first 3, camera frame) to keep: False when
    the centre, in front of the camera, projects with the window's model-input ``K[3,3]`` within ``margin`` x the
    window's side of an ``inner`` (left, top, right, bottom) border, or beyond it. Non-finite rows are kept (the
    decoder drops and counts them)."""
    H, W = input_hw
    t = np.asarray(boxes, np.float64)[:, :3]                                   # [N,3]
    K = np.asarray(K, np.float64)
    with np.errstate(invalid='ignore', divide='ignore', over='ignore'):
        z = t[:, 2]
        u = (K[0, 0] * t[:, 0] + K[0, 1] * t[:, 1]) / z + K[0, 2]             # [N] model pixels
        v = (K[1, 1] * t[:, 1]) / z + K[1, 2]                                  # [N]
        left, top, right, bottom = inner
        mu, mv = margin * W, margin * H
        near = np.zeros(len(t), dtype=bool)
        if left:
            near |= u < -0.5 + mu
        if right:
            near |= u > W - 0.5 - mu
        if top:
            near |= v < -0.5 + mv
        if bottom:
            near |= v > H - 0.5 - mv
        return ~(near & (z > 0) & np.isfinite(t).all(axis=1))


def merge_candidates(boxes: Sequence[np.ndarray], logits: Sequence[np.ndarray],
                     keeps: Sequence[np.ndarray | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One candidate list from several passes: pass ``i`` gives ``boxes[i] [N_i,12]``, ``logits[i] [N_i,C]`` and
    ``keeps[i]`` (token indices to keep, None = all) -> ``(boxes [M,12], logits [M,C], index [M])`` where ``index``
    numbers the tokens of all passes in order (pass ``i``'s token ``j`` is ``sum(N_<i) + j``)."""
    out_b, out_l, out_i = [], [], []
    offset = 0
    for b, lg, keep in zip(boxes, logits, keeps):
        idx = np.arange(len(b)) if keep is None else np.asarray(keep, np.int64)
        out_b.append(np.asarray(b)[idx])                                       # [n_i,12]
        out_l.append(np.asarray(lg)[idx])                                      # [n_i,C]
        out_i.append(idx + offset)
        offset += len(b)
    return np.concatenate(out_b), np.concatenate(out_l), np.concatenate(out_i).astype(np.int64)

"""Greedy oriented 3D NMS whose answers are those of the exact IoU, at a fraction of its cost (numpy only).

``greedy_nms(t[k,3], R[k,3,3], size[k,3], groups[k], nms_iou, max_detections) -> kept positions`` over candidates
already sorted by decreasing score: a kept box suppresses every later box of its group (its class, or one group
for class-agnostic NMS) whose IoU with it is ``> nms_iou``; at most ``max_detections`` are kept.

"IoU" here means exactly what :func:`string_perception.iou3d.pairwise_box3d_iou` answers, including its cheap
exact rejections: a pair whose volume ratio ``min/max`` is ``<= nms_iou`` or whose centres are farther apart than
the sum of the half-diagonals never suppresses (the same floating-point tests as before). Every other pair is
settled by the cheapest certain means (see :mod:`string_perception.iou3d_bounds`):

1. the bounds: ``upper < nms_iou`` (the boxes barely overlap) -> no, ``lower > nms_iou`` -> suppress (each with
   1e-9 to spare);
2. the rest by :func:`~string_perception.iou3d_bounds.edge_iou`, which settles those farther than 1e-7 from the
   threshold;
3. what is left (nearly parallel axes, or within 1e-7 of the threshold) by the exact IoU.

Pairs are asked only when needed, in waves (:func:`greedy_nms`): each wave settles, in one vectorised call per
step, the open pairs of the boxes that are certain to be kept (~1.5 waves a frame on the shipped model's frames).

test/runtime/test_nms.py checks the bounds against the exact IoU and the whole against the former implementation (one
exact-IoU call per kept box) on 1,000 frames of the shipped model.
"""
from __future__ import annotations

import numpy as np

from ..box_ops import Box3D
from ..iou3d import paired_box3d_iou
from ..iou3d_bounds import edge_iou, iou_bounds, relative_pose

__all__ = ['greedy_nms', 'candidate_pairs']

_BOUND_MARGIN = 1e-9   # a bound must clear the threshold by this much to settle a pair
_EDGE_MARGIN = 1e-7    # the edge formula's IoU must be this far from the threshold (its error is ~1e-14)


def candidate_pairs(t, size, groups, nms_iou: float):
    """Pairs ``(i, j)``, ``i < j``, of the same group that the exact IoU would not reject outright: volume ratio
    ``> nms_iou`` and bounding spheres (radius = half-diagonal) touching -> ``(i[P], j[P])``, by ``i`` then ``j``.
    The tests are the exact IoU's own floating-point expressions, so they reject exactly the same pairs."""
    k = len(t)
    volume = np.prod(size, axis=1)                                              # [k]
    ratio = np.minimum(volume[:, None], volume[None]) / np.maximum(volume[:, None], volume[None])
    ok = (ratio > nms_iou) & (groups[:, None] == groups[None])
    ok &= _UPPER[:k, :k] if k <= len(_UPPER) else np.triu(np.ones_like(ok), 1)
    i, j = np.nonzero(ok)
    radius = 0.5 * np.linalg.norm(size, axis=-1)
    near = np.linalg.norm(t[i] - t[j], axis=-1) <= radius[i] + radius[j]      # per pair: the same bits as [k,k]
    return i[near], j[near]


_UPPER = np.triu(np.ones((256, 256), dtype=bool), 1)   # i < j


def _settle(t, R, size, i, j, thr: float, lower=None, upper=None) -> np.ndarray:
    """``IoU > thr`` for the pairs ``(i, j)``: the edge formula where it is certain, else the exact IoU."""
    tr, Rr = relative_pose(t[i], R[i], t[j], R[j])
    iou, reliable = edge_iou(tr, Rr, size[i], size[j], lower, upper)
    suppress = iou > thr
    todo = np.flatnonzero(~reliable | (np.abs(iou - thr) <= _EDGE_MARGIN))
    if todo.size:
        a, b = i[todo], j[todo]
        suppress[todo] = paired_box3d_iou(Box3D(t[a], R[a], size[a]), Box3D(t[b], R[b], size[b])) > thr
    return suppress


def greedy_nms(t, R, size, groups, nms_iou: float, max_detections: int) -> list[int]:
    """Kept positions (increasing) of the candidates ``t[k,3], R[k,3,3], size[k,3]`` (sorted by decreasing
    score), ``groups[k]`` int; see the module docstring.

    Works in waves instead of one box at a time: the boxes that no live higher-scored box can still suppress (no
    open pair with one) are kept now, all together, and all their open pairs with live boxes are settled in one
    vectorised step; repeat until every box is kept or suppressed. Each box's fate is the sequential greedy's,
    since it is decided only once every higher-scored box that could suppress it is decided."""
    k = t.shape[0]
    if nms_iou >= 1.0 or k <= 1:
        return list(range(min(k, max_detections)))
    open_ = np.zeros((k, k), dtype=bool)                                        # pairs not yet settled
    i, j = candidate_pairs(t, size, groups, nms_iou)
    open_[i, j] = True
    kept = np.zeros(k, dtype=bool)
    suppressed = np.zeros(k, dtype=bool)
    while True:
        undecided = ~(kept | suppressed)
        if not undecided.any() or np.count_nonzero(kept[:np.argmax(undecided)]) >= max_detections:
            break                                   # every box decided, or the first max_detections kept are
        blocked = (open_ & ~suppressed[:, None]).any(axis=0)                    # a live box may suppress it
        leaders = undecided & ~blocked
        kept |= leaders
        a, b = np.nonzero(open_ & leaders[:, None] & ~suppressed[None])
        open_[leaders] = False
        if a.size:
            suppressed[b[_suppresses(t, R, size, a, b, nms_iou, any_per_target=True)]] = True
    return np.flatnonzero(kept)[:max_detections].tolist()


def _suppresses(t, R, size, i, j, thr: float, any_per_target: bool = False) -> np.ndarray:
    """``IoU > thr`` for the pairs ``(i, j)``: the bounds, then the edge formula, then the exact IoU.
    ``any_per_target``: only whether each ``j`` is suppressed by any of its pairs matters, so a pair whose ``j`` a
    bound already suppresses is left False instead of being settled (the NMS waves need no more)."""
    tr, Rr = relative_pose(t[i], R[i], t[j], R[j])
    lower, upper = iou_bounds(tr, Rr, size[i], size[j])
    out = lower - _BOUND_MARGIN > thr
    todo = ~out & (upper + _BOUND_MARGIN >= thr)
    if any_per_target and out.any():
        hit = np.zeros(len(t), dtype=bool)
        hit[j[out]] = True
        todo &= ~hit[j]
    todo = np.flatnonzero(todo)
    if todo.size:
        out[todo] = _settle(t, R, size, i[todo], j[todo], thr, lower[todo], upper[todo])
    return out

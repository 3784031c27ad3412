"""The decoder as it was before issue 37 (one exact-IoU call per kept box; box_ops' rotation functions of then),
kept only as the reference that test/runtime/test_nms.py and benchmarks/postprocess_latency.py compare
:func:`string_perception.runtime.postprocess.decode_detections` with, box for box. Not part of the package; do not
import it from package code (here, not under test/, because a benchmark imports it and nothing outside test/
imports test/)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.special import expit

from string_perception.box_ops import Box3D
from string_perception.iou3d import pairwise_box3d_iou
from string_perception.runtime.errors import OutputError
from string_perception.runtime.postprocess import (DEGENERATE_EPS, MAX_CENTRE_M, MAX_SIZE_M, Detections,
                                                   as_output, check_decode_params)

__all__ = ['decode_detections_reference', 'greedy_nms_reference', 'same_detections']


_EPS = 1e-12   # box_ops._EPS


# box_ops' rotation functions as they were before issue 37 (frozen here, so that the comparison also catches a
# change of a single bit in today's faster versions)
def _normalize(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors along the last axis and their norms ``[..., 1]``."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, _EPS), n


def _any_perpendicular(u: np.ndarray) -> np.ndarray:
    """A unit vector perpendicular to each unit vector ``u[..., 3]`` (used for degenerate 6D inputs)."""
    # Cross with the basis axis least aligned with u.
    axis = np.eye(3)[np.argmin(np.abs(u), axis=-1)]
    return _normalize(np.cross(u, axis))[0]


def rotation_from_6d(x6) -> np.ndarray:
    """``x6[..., 6]`` (two columns, any scale) -> ``R[..., 3, 3]`` in SO(3) by Gram-Schmidt.

    ``R[..., :, 0]`` is the first column normalised; the second column is the second input column with its
    component along the first removed, normalised; the third is their cross product. Degenerate input (a zero
    or parallel column) falls back to an arbitrary but valid completion instead of producing NaN.
    """
    x6 = np.asarray(x6, dtype=np.float64)
    a1, a2 = x6[..., 0:3], x6[..., 3:6]
    b1, n1 = _normalize(a1)
    b1 = np.where(n1 > _EPS, b1, np.array([1.0, 0.0, 0.0]))
    b2, n2 = _normalize(a2 - np.sum(b1 * a2, axis=-1, keepdims=True) * b1)
    b2 = np.where(n2 > _EPS * np.maximum(1.0, np.linalg.norm(a2, axis=-1, keepdims=True)), b2,
                  _any_perpendicular(b1))
    b3 = np.cross(b1, b2)
    return np.stack([b1, b2, b3], axis=-1)


def rotation_to_6d(R) -> np.ndarray:
    """``R[..., 3, 3]`` -> ``x6[..., 6]`` = first two columns, concatenated."""
    R = np.asarray(R, dtype=np.float64)
    return np.concatenate([R[..., :, 0], R[..., :, 1]], axis=-1)


def rotation_to_quaternion(R) -> np.ndarray:
    """``R[..., 3, 3]`` -> unit quaternion ``q[..., 4]`` as ``(x, y, z, w)`` with ``w >= 0``.

    Shepperd's method: per matrix, pick whichever of ``w, x, y, z`` has the largest magnitude (from the trace
    and the diagonal) and derive the others from off-diagonal sums/differences, so no branch divides by a small
    number (robust near 180 degrees). The result is normalised, then negated where ``w < 0``.
    """
    R = np.asarray(R, dtype=np.float64)
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    m01, m02, m10 = R[..., 0, 1], R[..., 0, 2], R[..., 1, 0]
    m12, m20, m21 = R[..., 1, 2], R[..., 2, 0], R[..., 2, 1]
    # Four candidate (x, y, z, w) tuples, each scaled by 4 * (its largest component); [..., 4, 4].
    cands = np.stack([
        np.stack([m21 - m12, m02 - m20, m10 - m01, 1.0 + m00 + m11 + m22], axis=-1),   # w largest
        np.stack([1.0 + m00 - m11 - m22, m01 + m10, m02 + m20, m21 - m12], axis=-1),   # x largest
        np.stack([m01 + m10, 1.0 - m00 + m11 - m22, m12 + m21, m02 - m20], axis=-1),   # y largest
        np.stack([m02 + m20, m12 + m21, 1.0 - m00 - m11 + m22, m10 - m01], axis=-1),   # z largest
    ], axis=-2)
    choice = np.argmax(np.stack([m00 + m11 + m22, m00, m11, m22], axis=-1), axis=-1)  # [...]
    q = np.take_along_axis(cands, choice[..., None, None], axis=-2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:4] < 0.0, -q, q)


def same_detections(a: Detections, b: Detections) -> bool:
    """Identical results: the same tokens, classes, scores and boxes, bit for bit, and the same drop counts."""
    arrays = ('token_indices', 'class_ids', 'scores', 'translations', 'rotations', 'sizes', 'quaternions_xyzw')
    return (all(np.array_equal(getattr(a, f), getattr(b, f)) for f in arrays) and a.class_names == b.class_names
            and (a.num_non_finite, a.num_invalid) == (b.num_non_finite, b.num_invalid))


def decode_detections_reference(boxes, logits, labels: Sequence[str], score_threshold: float = 0.3,
                                nms_iou: float = 0.3, max_detections: int = 50, pre_nms_top_k: int = 200,
                                class_agnostic: bool = False, multi_label: bool = False) -> Detections:
    """``boxes[N,12]``, ``logits[N,C]`` (a leading batch of 1 is accepted) -> :class:`Detections`.

    Steps: drop non-finite / invalid tokens; score = sigmoid(max logit), class = argmax; keep
    ``score >= score_threshold``; keep the ``pre_nms_top_k`` best; greedy class-wise NMS at ``nms_iou``
    (``1.0`` disables it; ``class_agnostic=True``: a box also suppresses overlapping boxes of other classes, which
    a densely trained model needs, since several tokens on one object may name different classes); at most
    ``max_detections`` results, sorted by decreasing score (ties by token index, then class).

    ``multi_label=True`` decodes as RetinaNet / FCOS do with independent sigmoid classes: every (token, class)
    pair scoring at least ``score_threshold`` is a candidate, so an uncertain token can give one box per class it
    names (the same geometry, each with its own score); class-wise NMS then runs over all candidates.
    """
    check_decode_params(score_threshold, nms_iou, max_detections, pre_nms_top_k)
    b = as_output(boxes, 'boxes', 12)                          # [N,12]
    lg = as_output(logits, 'logits', None)                     # [N,C]
    labels = [str(s) for s in labels]
    if lg.shape[0] != b.shape[0]:
        raise OutputError('bad_output', f'boxes has {b.shape[0]} tokens but logits has {lg.shape[0]}')
    if lg.shape[1] != len(labels) or not labels:
        raise OutputError('bad_output', f'logits has {lg.shape[1]} classes but there are {len(labels)} labels')

    finite = np.isfinite(b).all(axis=1) & np.isfinite(lg).all(axis=1)          # [N]
    num_non_finite = int(np.count_nonzero(~finite))
    with np.errstate(invalid='ignore', over='ignore'):
        a1, a2 = b[:, 3:6], b[:, 6:9]
        n1 = np.linalg.norm(a1, axis=1)
        n2 = np.linalg.norm(a2, axis=1)
        ncross = np.linalg.norm(np.cross(a1, a2), axis=1)
        sane = ((b[:, 9:12] > 0).all(axis=1) & (b[:, 9:12] <= MAX_SIZE_M).all(axis=1)
                & (np.abs(b[:, 0:3]) <= MAX_CENTRE_M).all(axis=1)
                & (n1 > DEGENERATE_EPS) & (ncross > DEGENERATE_EPS * n1 * n2))   # [N]
    ok = finite & sane
    num_invalid = int(np.count_nonzero(finite & ~sane))
    if max_detections == 0 or not ok.any():
        return Detections.empty(num_non_finite, num_invalid)

    if multi_label:
        prob = expit(lg)                                        # [N,C] per-class sigmoid scores
        idx, cls = np.nonzero((prob >= score_threshold) & ok[:, None])   # [n], [n] token and class of each candidate
        scores = prob[idx, cls]                                 # [n]
    else:
        idx = np.flatnonzero(ok)                                # [n] surviving token indices
        cls = np.argmax(lg[idx], axis=1)                        # [n] best class per token
        scores = expit(lg[idx, cls])                            # [n] sigmoid of the best logit, in [0,1]
        keep = scores >= score_threshold
        idx, cls, scores = idx[keep], cls[keep], scores[keep]
    if idx.size == 0:
        return Detections.empty(num_non_finite, num_invalid)
    order = np.lexsort((cls, idx, -scores))[:int(pre_nms_top_k)]   # by score desc, then token index, then class
    idx, cls, scores = idx[order], cls[order], scores[order]

    t = b[idx, 0:3]                                             # [k,3]
    R = rotation_from_6d(b[idx, 3:9])                           # [k,3,3]
    size = b[idx, 9:12]                                         # [k,3]
    chosen = greedy_nms_reference(t, R, size, np.zeros_like(cls) if class_agnostic else cls, float(nms_iou),
                                  int(max_detections))
    sel = np.asarray(chosen, dtype=np.int64)                    # [M] positions in the candidate list
    return Detections(
        translations=t[sel], rotations=R[sel], quaternions_xyzw=rotation_to_quaternion(R[sel]).reshape(-1, 4),
        sizes=size[sel], class_ids=cls[sel].astype(np.int64), class_names=[labels[c] for c in cls[sel]],
        scores=scores[sel], token_indices=idx[sel].astype(np.int64),
        num_non_finite=num_non_finite, num_invalid=num_invalid)


def greedy_nms_reference(t, R, size, cls, nms_iou: float, max_detections: int) -> list[int]:
    """Greedy class-wise NMS over candidates already sorted by decreasing score -> kept positions."""
    k = t.shape[0]
    volume = np.prod(size, axis=1)                              # [k]
    suppressed = np.zeros(k, dtype=bool)
    kept: list[int] = []
    for i in range(k):
        if suppressed[i]:
            continue
        kept.append(i)
        if len(kept) >= max_detections:
            break
        if nms_iou >= 1.0:
            continue
        rest = np.flatnonzero(~suppressed[i + 1:] & (cls[i + 1:] == cls[i])) + i + 1   # same class, lower score
        if rest.size == 0:
            continue
        # IoU <= min(vol)/max(vol): skip pairs that cannot reach the threshold (cheap, exact bound).
        ratio = np.minimum(volume[rest], volume[i]) / np.maximum(volume[rest], volume[i])
        rest = rest[ratio > nms_iou]
        if rest.size == 0:
            continue
        iou = pairwise_box3d_iou(Box3D(t[i:i + 1], R[i:i + 1], size[i:i + 1]),
                                 Box3D(t[rest], R[rest], size[rest]))[0]   # [len(rest)]
        suppressed[rest[iou > nms_iou]] = True
    return kept

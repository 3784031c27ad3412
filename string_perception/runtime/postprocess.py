"""Model outputs -> 3D detections: sigmoid scores, per-token best class, threshold, top-k, class-wise 3D NMS.

``decode_detections(boxes[N,12], logits[N,C], labels)`` follows docs/ARCHITECTURE.md: a box row is
``[t(3), rot6d(6), size(3)]`` (metres, camera optical frame; 6D = first two rotation COLUMNS, Gram-Schmidt via
:func:`string_perception.box_ops.rotation_from_6d`), ``logits`` are per-class sigmoid logits (OWL-ViT style).
NMS is greedy and class-wise with the exact oriented IoU of :mod:`string_perception.iou3d`: a box suppresses
lower-scored boxes **of the same class** whose IoU with it is ``> nms_iou``; other classes are never suppressed.
:mod:`.nms` gets the exact IoU's answers mostly from cheap certain bounds (issue 37: ~10x faster, same boxes).

Bad model outputs never raise: tokens with any non-finite number (NaN/inf in boxes or logits) are dropped and
counted in ``Detections.num_non_finite``; tokens with a non-positive or absurd size (> 1 km), an absurd centre
(> 1000 km) or a degenerate 6D rotation (zero or parallel columns) are dropped and counted in
``Detections.num_invalid``. Only arrays of the wrong shape/dtype raise
:class:`~string_perception.runtime.errors.OutputError` (kind ``'bad_output'``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.special import expit

from ..box_ops import cross3, rotation_from_6d, rotation_to_quaternion, vector_norm
from .errors import OutputError
from .nms import greedy_nms

__all__ = ['Detections', 'decode_detections', 'check_decode_params', 'as_output', 'MAX_SIZE_M', 'MAX_CENTRE_M',
           'DEGENERATE_EPS']

# the sanity limits a decoded box must meet (shared with benchmarks/common/postprocess_reference.py)
MAX_SIZE_M = 1e3        # larger boxes are model garbage (and would make volumes meaningless)
MAX_CENTRE_M = 1e6
DEGENERATE_EPS = 1e-9   # relative: |a1| and |a1 x a2| / (|a1||a2|) below this -> no rotation


@dataclass(frozen=True)
class Detections:
    """Detections of one frame, sorted by decreasing score. All float arrays are float64."""

    translations: np.ndarray        # [M,3] box centres, metres, camera optical frame
    rotations: np.ndarray           # [M,3,3] columns = box axes in the camera frame
    quaternions_xyzw: np.ndarray    # [M,4] unit, (x, y, z, w), w >= 0
    sizes: np.ndarray               # [M,3] full edge lengths, metres, > 0
    class_ids: np.ndarray           # [M] int64 index into labels
    class_names: list[str]          # [M]
    scores: np.ndarray              # [M] in [0, 1]
    token_indices: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [M] source token
    num_non_finite: int = 0         # tokens dropped for NaN/inf outputs
    num_invalid: int = 0            # tokens dropped for size <= 0, absurd values or degenerate rotation

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @classmethod
    def empty(cls, num_non_finite: int = 0, num_invalid: int = 0) -> 'Detections':
        return cls(translations=np.zeros((0, 3)), rotations=np.zeros((0, 3, 3)), quaternions_xyzw=np.zeros((0, 4)),
                   sizes=np.zeros((0, 3)), class_ids=np.zeros(0, np.int64), class_names=[], scores=np.zeros(0),
                   token_indices=np.zeros(0, np.int64), num_non_finite=num_non_finite, num_invalid=num_invalid)

    @classmethod
    def from_boxes(cls, translations, sizes, rotations=None, class_ids=None, scores=None,
                   labels: Sequence[str] = ()) -> 'Detections':
        """Detections from plain boxes (ground truth, synthetic sequences): ``translations[M,3]``, ``sizes[M,3]``,
        ``rotations[M,3,3]`` (default identity), ``class_ids[M]`` (default 0), ``scores[M]`` (default 1),
        ``labels`` names class ids (default: the id as text)."""
        t = np.asarray(translations, np.float64).reshape(-1, 3)                 # [M,3]
        m = t.shape[0]
        R = np.broadcast_to(np.eye(3), (m, 3, 3)).copy() if rotations is None else \
            np.asarray(rotations, np.float64).reshape(m, 3, 3)                   # [M,3,3]
        cls_ids = np.zeros(m, np.int64) if class_ids is None else np.asarray(class_ids, np.int64).reshape(m)
        return cls(translations=t, rotations=R, quaternions_xyzw=rotation_to_quaternion(R).reshape(-1, 4),
                   sizes=np.asarray(sizes, np.float64).reshape(m, 3), class_ids=cls_ids,
                   class_names=[labels[c] if c < len(labels) else str(c) for c in cls_ids],
                   scores=np.ones(m) if scores is None else np.asarray(scores, np.float64).reshape(m),
                   token_indices=np.arange(m, dtype=np.int64))


def as_output(x, name: str, last: int | None) -> np.ndarray:
    """A model output as float64 ``[N,last]`` (``[N,C]`` when ``last`` is None); a ``[1,N,k]`` batch of one is
    unwrapped. ``OutputError('bad_output')`` for anything else (not an array, wrong rank or width, not real)."""
    try:
        a = np.asarray(x)
    except Exception as e:
        raise OutputError('bad_output', f'{name} is not an array: {e}') from None
    if a.ndim == 3 and a.shape[0] == 1:
        a = a[0]                                                # [1,N,k] -> [N,k]
    if a.ndim != 2 or (last is not None and a.shape[1] != last):
        raise OutputError('bad_output', f'{name} must be [N,{last if last is not None else "C"}] (or [1,N,..]), '
                                        f'got shape {a.shape}')
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise OutputError('bad_output', f'{name} must be a real-valued array, got dtype {a.dtype}')
    return a.astype(np.float64, copy=False)


def check_decode_params(score_threshold, nms_iou, max_detections, pre_nms_top_k) -> None:
    """ValueError naming the first of :func:`decode_detections`' parameters that is out of range."""
    if not (0.0 <= score_threshold <= 1.0):
        raise ValueError(f'score_threshold must be in [0, 1], got {score_threshold}')
    if not (0.0 < nms_iou <= 1.0):
        raise ValueError(f'nms_iou must be in (0, 1] (1 disables NMS), got {nms_iou}')
    if int(max_detections) != max_detections or max_detections < 0:
        raise ValueError(f'max_detections must be an integer >= 0, got {max_detections}')
    if int(pre_nms_top_k) != pre_nms_top_k or pre_nms_top_k < 1:
        raise ValueError(f'pre_nms_top_k must be an integer >= 1, got {pre_nms_top_k}')


def decode_detections(boxes, logits, labels: Sequence[str], score_threshold: float = 0.3, nms_iou: float = 0.3,
                      max_detections: int = 50, pre_nms_top_k: int = 200, class_agnostic: bool = False,
                      multi_label: bool = False) -> Detections:
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
        n1 = vector_norm(a1)                                    # = np.linalg.norm(axis=-1), same bits
        n2 = vector_norm(a2)
        ncross = vector_norm(cross3(a1, a2))
        sane = (((b[:, 9:12] > 0) & (b[:, 9:12] <= MAX_SIZE_M) & (np.abs(b[:, 0:3]) <= MAX_CENTRE_M)).all(axis=1)
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
    chosen = greedy_nms(t, R, size, np.zeros_like(cls) if class_agnostic else cls, float(nms_iou),
                        int(max_detections))
    sel = np.asarray(chosen, dtype=np.int64)                    # [M] positions in the candidate list
    return Detections(
        translations=t[sel], rotations=R[sel], quaternions_xyzw=rotation_to_quaternion(R[sel]).reshape(-1, 4),
        sizes=size[sel], class_ids=cls[sel].astype(np.int64), class_names=[labels[c] for c in cls[sel]],
        scores=scores[sel], token_indices=idx[sel].astype(np.int64),
        num_non_finite=num_non_finite, num_invalid=num_invalid)

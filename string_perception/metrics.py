"""Detection metrics for oriented 3D boxes: the paper's average best 3D IoU, AP3D, PR curves (numpy, no torch).

Inputs are per-frame lists of dicts (``evaluation/evaluate.py`` produces them):

* prediction: ``{'params': float[K,12], 'labels': int[K], 'scores': float[K]}``
* ground truth: ``{'params': float[M,12], 'labels': int[M]}``

(``'boxes'`` is accepted in place of ``'params'``; 12 numbers = ``[t, rot6d, size]``, see ``box_ops``). IoU is the
exact oriented IoU of ``iou3d``, computed once per frame and shared by every metric of :func:`summarize`.

* **Average best IoU** (paper Table 4, "average 3D IoU over all objects"): for every ground-truth box, the best
  IoU among the frame's predictions *of the same class* (``class_aware=False``: of any class), 0 when there is
  none; averaged over all ground-truth boxes of all frames. It ignores scores and does not penalise false
  positives, so it is reported next to AP.
* **AP3D** at an IoU threshold, per class (COCO-style matching): the class's predictions over all frames are
  sorted by score (descending, stable); each is a true positive if the still-unmatched ground-truth box of its
  frame and class with the highest IoU has IoU >= threshold (that box is then matched), else a false positive.
  AP = area under the all-point interpolated precision envelope (VOC 2010+). Classes without ground truth have
  no AP (``None`` in JSON) and are left out of the mean; classes with ground truth but no prediction score 0.
* **Symmetry-aware** variants (``_sym`` keys, next to the strict ones): the same metrics on the symmetry-aware IoU
  of :mod:`~string_perception.symmetry` (best IoU over the ground truth's symmetry group, chosen by its class
  name), so a cylinder turned about its axis or a sphere's cube in another rotation is not counted as an error.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .iou3d import pairwise_box3d_iou
from .symmetry import paired_symmetric_iou, symmetry_kind

Frame = Mapping[str, Any]


def _params(frame: Frame) -> np.ndarray:
    p = frame['params'] if 'params' in frame else frame['boxes']
    return np.asarray(p, dtype=np.float64).reshape(-1, 12)


def _labels(frame: Frame) -> np.ndarray:
    return np.asarray(frame['labels'], dtype=np.int64).reshape(-1)


def _check(preds: Sequence[Frame], gts: Sequence[Frame]) -> None:
    if len(preds) != len(gts):
        raise ValueError(f'{len(preds)} prediction frames but {len(gts)} ground-truth frames')


def frame_ious(preds: Sequence[Frame], gts: Sequence[Frame]) -> list[np.ndarray]:
    """Per frame, the class-agnostic exact IoU matrix ``[K_pred, M_gt]``."""
    _check(preds, gts)
    return [pairwise_box3d_iou(_params(p), _params(g)) for p, g in zip(preds, gts)]


def frame_ious_sym(preds: Sequence[Frame], gts: Sequence[Frame], class_names: Sequence[str] | None,
                   ious: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Per frame, the class-agnostic symmetry-aware IoU matrix ``[K_pred, M_gt]`` (the group is the ground truth's
    class, ``class_names[label]``; without names every box is a plain box). One batched search over all frames;
    pairs whose strict IoU is 0 and whose bounding spheres miss stay 0, plain boxes keep their strict IoU."""
    ious = frame_ious(preds, gts) if ious is None else ious
    out = [iou.copy() for iou in ious]
    name = (lambda c: class_names[c] if class_names is not None and 0 <= c < len(class_names) else str(c))
    rows, pred_p, gt_p, names = [], [], [], []
    for f, (p, g) in enumerate(zip(preds, gts)):
        gl = _labels(g)
        sym = np.array([symmetry_kind(name(int(c))) != 'box' for c in gl], dtype=bool)       # [M]
        if not sym.any() or not len(_labels(p)):
            continue
        i, j = np.nonzero(np.broadcast_to(sym, ious[f].shape))
        rows.append(np.stack([np.full(len(i), f), i, j], 1))
        pred_p.append(_params(p)[i])
        gt_p.append(_params(g)[j])
        names += [name(int(c)) for c in gl[j]]
    if rows:
        rows = np.concatenate(rows)
        vals = paired_symmetric_iou(np.concatenate(pred_p), np.concatenate(gt_p), names)
        for (f, i, j), v in zip(rows.tolist(), vals.tolist()):
            out[f][i, j] = v
    return out


def best_iou_per_gt(preds: Sequence[Frame], gts: Sequence[Frame], class_aware: bool = True,
                    ious: list[np.ndarray] | None = None) -> np.ndarray:
    """Best IoU of each ground-truth box (all frames concatenated, frame order) -> ``[sum M]``; 0 if unmatched."""
    ious = frame_ious(preds, gts) if ious is None else ious
    out = []
    for p, g, iou in zip(preds, gts, ious):
        if iou.shape[1] == 0:
            continue
        if class_aware:
            iou = np.where(_labels(p)[:, None] == _labels(g)[None, :], iou, 0.0)
        out.append(iou.max(axis=0) if iou.shape[0] else np.zeros(iou.shape[1]))
    return np.concatenate(out) if out else np.zeros(0)


def average_best_iou(preds: Sequence[Frame], gts: Sequence[Frame], class_aware: bool = True,
                     ious: list[np.ndarray] | None = None) -> float:
    """The paper's average 3D IoU over all objects (see module doc); NaN when there is no ground truth."""
    best = best_iou_per_gt(preds, gts, class_aware, ious)
    return float(best.mean()) if len(best) else float('nan')


def pr_curve(preds: Sequence[Frame], gts: Sequence[Frame], label: int, iou_threshold: float,
             ious: list[np.ndarray] | None = None) -> dict[str, np.ndarray | int]:
    """Precision/recall of class ``label`` as the score threshold falls: ``{'precision': [K], 'recall': [K],
    'scores': [K] (descending), 'tp': bool[K], 'num_gt': int}`` with K = number of predictions of the class."""
    ious = frame_ious(preds, gts) if ious is None else ious
    frame_of, index_of, scores = [], [], []
    matched, num_gt = [], 0
    for f, (p, g) in enumerate(zip(preds, gts)):
        sel = np.nonzero(_labels(p) == label)[0]
        frame_of += [f] * len(sel)
        index_of += sel.tolist()
        scores.append(np.asarray(p['scores'], dtype=np.float64).reshape(-1)[sel])
        gt_mask = _labels(g) == label
        num_gt += int(gt_mask.sum())
        matched.append(~gt_mask)                         # other classes' boxes count as already taken
    scores = np.concatenate(scores) if scores else np.zeros(0)
    order = np.argsort(-scores, kind='stable')
    tp = np.zeros(len(order), dtype=bool)
    for r, k in enumerate(order):
        f, i = frame_of[k], index_of[k]
        cand = np.where(matched[f], -1.0, ious[f][i])    # [M_f]
        if cand.size and cand.max() >= iou_threshold:
            j = int(np.argmax(cand))
            matched[f][j] = True
            tp[r] = True
    ctp = np.cumsum(tp)
    precision = ctp / np.arange(1, len(tp) + 1)
    recall = ctp / num_gt if num_gt else np.zeros(len(tp))
    return {'precision': precision, 'recall': recall, 'scores': scores[order], 'tp': tp, 'num_gt': num_gt}


def average_precision(precision: np.ndarray, recall: np.ndarray) -> float:
    """All-point interpolated AP: area under the monotone precision envelope of the PR curve."""
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    step = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[step + 1] - mrec[step]) * mpre[step + 1]))


def _class_labels(preds: Sequence[Frame], gts: Sequence[Frame], num_classes: int | None) -> list[int]:
    """``range(num_classes)``, or every label seen in ``preds`` and ``gts`` when ``None``."""
    if num_classes is not None:
        return list(range(num_classes))
    seen = [_labels(f) for f in (*preds, *gts)]
    return sorted(set(np.concatenate(seen).tolist())) if seen else []


def ap3d(preds: Sequence[Frame], gts: Sequence[Frame], iou_threshold: float, num_classes: int | None = None,
         ious: list[np.ndarray] | None = None) -> dict[str, Any]:
    """AP at ``iou_threshold`` -> ``{'per_class': {label: AP or NaN (no ground truth)}, 'mean': mean over classes
    with ground truth (NaN if none)}``. Classes: ``range(num_classes)``, or every label seen when ``None``."""
    ious = frame_ious(preds, gts) if ious is None else ious
    labels = _class_labels(preds, gts, num_classes)
    per_class = {}
    for c in labels:
        curve = pr_curve(preds, gts, c, iou_threshold, ious)
        per_class[c] = average_precision(curve['precision'], curve['recall']) if curve['num_gt'] else float('nan')
    valid = [v for v in per_class.values() if not math.isnan(v)]
    return {'per_class': per_class, 'mean': float(np.mean(valid)) if valid else float('nan')}


def _cumulative_tp(preds: Sequence[Frame], gts: Sequence[Frame], iou_threshold: float, num_classes: int | None,
                   ious: list[np.ndarray] | None):
    """All classes' predictions in decreasing score order at ``iou_threshold`` (class-aware matching as in
    :func:`pr_curve`) -> ``(scores[K], cumulative TP[K], cut positions, num_gt)``; a cut keeps every box scoring at
    least ``scores[cut]`` (ties in score are kept together), or None when there is nothing to cut."""
    ious = frame_ious(preds, gts) if ious is None else ious
    labels = _class_labels(preds, gts, num_classes)
    scores, tps, num_gt = [], [], 0
    for c in labels:
        cur = pr_curve(preds, gts, c, iou_threshold, ious)
        scores.append(cur['scores'])
        tps.append(cur['tp'])
        num_gt += cur['num_gt']
    scores = np.concatenate(scores) if scores else np.zeros(0)
    tp = np.concatenate(tps) if tps else np.zeros(0, bool)
    if not len(scores) or num_gt == 0:
        return None
    order = np.argsort(-scores, kind='stable')
    s, ctp = scores[order], np.cumsum(tp[order])            # [K] descending scores, true positives kept so far
    last = np.r_[s[1:] != s[:-1], True]                      # cut only between different scores
    return s, ctp, np.nonzero(last)[0], num_gt


_NO_OPERATING_POINT = {'threshold': float('nan'), 'f1': 0.0, 'precision': 0.0, 'recall': 0.0}   # no cut: nothing predicted, no ground truth, or no cut qualifies


def _operating_point(s, ctp, i: int, num_gt: int) -> dict[str, float]:
    return {'threshold': float(s[i]), 'f1': float(2 * ctp[i] / (i + 1 + num_gt)),
            'precision': float(ctp[i] / (i + 1)), 'recall': float(ctp[i] / num_gt)}


def f1_threshold(preds: Sequence[Frame], gts: Sequence[Frame], iou_threshold: float = 0.25,
                 num_classes: int | None = None, ious: list[np.ndarray] | None = None) -> dict[str, float]:
    """The score threshold that maximises F1 = 2·TP / (#predictions + #ground truth) over all classes at
    ``iou_threshold`` (class-aware matching as in :func:`pr_curve`) -> ``{'threshold', 'f1', 'precision',
    'recall'}``. Keeping every box scoring at least ``threshold`` gives that F1 (ties in score are kept together)."""
    cuts = _cumulative_tp(preds, gts, iou_threshold, num_classes, ious)
    if cuts is None:
        return dict(_NO_OPERATING_POINT)
    s, ctp, k, num_gt = cuts
    f1 = 2 * ctp[k] / (k + 1 + num_gt)
    return _operating_point(s, ctp, int(k[np.argmax(f1)]), num_gt)


def precision_threshold(preds: Sequence[Frame], gts: Sequence[Frame], min_precision: float = 0.8,
                        iou_threshold: float = 0.25, num_classes: int | None = None,
                        ious: list[np.ndarray] | None = None) -> dict[str, float]:
    """The lowest score threshold whose kept boxes have precision >= ``min_precision`` at ``iou_threshold`` (the
    most recall under a precision floor) -> ``{'threshold', 'f1', 'precision', 'recall'}``; threshold NaN and
    zeros when no cut reaches the floor. This is how the shipped model's recommended operating threshold is
    chosen, on the validation split (the node's precision goal is 0.8 at IoU 0.25)."""
    cuts = _cumulative_tp(preds, gts, iou_threshold, num_classes, ious)
    if cuts is not None:
        s, ctp, k, num_gt = cuts
        ok = k[ctp[k] >= min_precision * (k + 1)]             # cuts meeting the floor (exact, no division)
        if len(ok):
            return _operating_point(s, ctp, int(ok[-1]), num_gt)
    return dict(_NO_OPERATING_POINT)


def _json(x: Any) -> Any:
    """NaN -> None, numpy scalars/arrays -> Python, recursively."""
    if isinstance(x, dict):
        return {str(k): _json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_json(v) for v in (x.tolist() if isinstance(x, np.ndarray) else x)]
    if isinstance(x, (np.integer, int)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return None if math.isnan(x) else float(x)
    return x


def _key(threshold: float) -> str:
    return f'ap3d_{round(threshold * 100):d}'


def _scores(preds, gts, ious, class_names, iou_thresholds, include_curves, suffix='') -> dict[str, Any]:
    """The IoU-based entries of :func:`summarize` for one IoU matrix set, keys ending in ``suffix``."""
    num_classes = len(class_names) if class_names is not None else None
    name = (lambda c: class_names[c] if class_names is not None and 0 <= c < len(class_names) else str(c))
    gt_labels = np.concatenate([_labels(g) for g in gts]) if gts else np.zeros(0, np.int64)
    best = best_iou_per_gt(preds, gts, True, ious)
    classes = range(num_classes) if num_classes is not None else sorted(set(gt_labels.tolist()))
    out: dict[str, Any] = {
        f'avg_best_iou{suffix}': float(best.mean()) if len(best) else float('nan'),
        f'avg_best_iou_agnostic{suffix}': average_best_iou(preds, gts, False, ious),
        f'avg_best_iou_per_class{suffix}': {name(c): float(best[gt_labels == c].mean())
                                            if np.any(gt_labels == c) else float('nan') for c in classes},
        f'ap3d{suffix}': {},
    }
    if include_curves:
        out[f'pr_curves{suffix}'] = {}
    for thr in iou_thresholds:
        res = ap3d(preds, gts, thr, num_classes, ious)
        out[_key(thr) + suffix] = res['mean']
        out[f'ap3d{suffix}'][f'{thr:g}'] = {'mean': res['mean'],
                                           'per_class': {name(c): v for c, v in res['per_class'].items()}}
        if include_curves:
            curves = {}
            for c in res['per_class']:
                cur = pr_curve(preds, gts, c, thr, ious)
                curves[name(c)] = {'precision': cur['precision'], 'recall': cur['recall']}
            out[f'pr_curves{suffix}'][f'{thr:g}'] = curves
    return out


def summarize(preds: Sequence[Frame], gts: Sequence[Frame], class_names: Sequence[str] | None = None,
              iou_thresholds: Sequence[float] = (0.25, 0.5), include_curves: bool = False,
              symmetric: bool = True, ious: list[np.ndarray] | None = None,
              ious_sym: list[np.ndarray] | None = None) -> dict[str, Any]:
    """All metrics as a JSON-ready dict (NaN -> None). Keys: ``num_frames, num_gt, num_pred, avg_best_iou``
    (class-aware), ``avg_best_iou_agnostic``, ``avg_best_iou_per_class {name: v}``, ``ap3d_25``, ``ap3d_50``
    (means; one per threshold), ``ap3d {'0.25': {'mean', 'per_class': {name: v}}}``, ``iou_thresholds``; with
    ``include_curves``, ``pr_curves {'0.25': {name: {'precision': [...], 'recall': [...]}}}``. With ``symmetric``
    (default) every one of these IoU entries again on the symmetry-aware IoU, its key ending in ``_sym``
    (``avg_best_iou_sym``, ``ap3d_25_sym``, ``ap3d_sym``, ...; the group needs ``class_names``: without them the
    ``_sym`` entries equal the strict ones). Class names default to the label number as a string. ``ious`` /
    ``ious_sym``: the per-frame IoU matrices (:func:`frame_ious` / :func:`frame_ious_sym`) if already computed."""
    ious = frame_ious(preds, gts) if ious is None else ious
    gt_labels = np.concatenate([_labels(g) for g in gts]) if gts else np.zeros(0, np.int64)
    out: dict[str, Any] = {
        'num_frames': len(gts), 'num_gt': int(len(gt_labels)),
        'num_pred': int(sum(len(_labels(p)) for p in preds)),
        **_scores(preds, gts, ious, class_names, iou_thresholds, include_curves),
        'iou_thresholds': list(iou_thresholds),
    }
    if symmetric:
        ious_sym = frame_ious_sym(preds, gts, class_names, ious) if ious_sym is None else ious_sym
        out.update(_scores(preds, gts, ious_sym, class_names, iou_thresholds, include_curves, suffix='_sym'))
    return _json(out)


def headline(summary: Mapping[str, Any]) -> dict[str, float]:
    """The scalar numbers tracked during training: ``avg_best_iou``, ``avg_best_iou_agnostic``, ``ap3d_<thr>``
    and, where the summary has them, the same with ``_sym`` (None -> NaN)."""
    keys = ['avg_best_iou', 'avg_best_iou_agnostic'] + [_key(t) for t in summary.get('iou_thresholds', ())]
    keys += [k + '_sym' for k in keys]
    return {k: float('nan') if summary.get(k) is None else float(summary[k]) for k in keys if k in summary}

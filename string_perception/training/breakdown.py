"""Error breakdown of matched detections in the nuScenes true-positive style, per class and overall (numpy only).

Matching: each ground-truth box is matched to the prediction *of its class* with the highest **symmetry-aware**
IoU (:mod:`~string_perception.symmetry`; scores ignored), when that IoU is above ``min_iou`` (default 0: any
overlap). On the matched pairs:

* ``centre_xy_m`` (camera x, y: across the image), ``centre_z_m`` (depth), ``centre_3d_m``: centre distances;
* ``scale_error``: ``1 - IoU`` of the two boxes after aligning centre and rotation, the predicted sizes taken
  along the ground-truth axes nearest to its own (:func:`~string_perception.symmetry.nearest_relabelling`), i.e.
  ``1 - prod(min(s_p, s_g)) / (prod(s_p) + prod(s_g) - prod(min))``;
* ``orientation_deg``: symmetry-aware (:func:`~string_perception.symmetry.orientation_error_deg`: 0 for a sphere,
  the angle between symmetry axes for cylinder / cone / capsule, modulo a flip except for a cone, the smallest
  angle over the 24 relabellings for a box);
* ``volume_ratio``: predicted / true volume (its median says "too small" below 1);
* ``size_ratio_longest`` / ``_middle`` / ``_shortest``: predicted / true size along the ground truth's longest,
  middle and shortest side (predicted sizes relabelled as for ``scale_error``): which side a box is too small on;
* ``iou``: the matched symmetry-aware IoU;
* ``iou_true_centre`` / ``iou_true_rotation`` / ``iou_true_size``: the same IoU with one part of the prediction
  replaced by the ground truth's (the rotation with the predicted sizes relabelled onto its axes, the sizes
  taken along the predicted axes nearest the ground truth's): how much IoU each part alone costs, so that the
  part worth fixing is read off the data (the gain over ``iou`` is what a perfect centre / rotation / size buys).

Each of these is reported as ``{'mean', 'median'}`` (None without matches). Besides:

* ``class_accuracy``: for every ground-truth box with an overlapping prediction of any class, whether the one with
  the highest class-agnostic symmetry-aware IoU (the closest box) has the right class; the fraction;
* ``confusion`` (top level): ``{true class: {class of the closest box: count}}`` over the same ground-truth
  boxes as ``class_accuracy`` (those with an overlapping prediction): which class takes the score where the class
  is wrong;
* ``duplicates_per_object``: predictions kept at ``score_threshold`` (all, when None) with symmetry-aware IoU >=
  ``dup_iou`` to the object, beyond the first, of any class, averaged over all ground-truth boxes;
* ``precision`` / ``recall`` at ``score_threshold`` and IoU ``dup_iou`` (class-aware greedy matching as AP3D,
  symmetry-aware IoU), with ``num_kept``: how far the score can be trusted at the node's threshold.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from string_perception import metrics
from string_perception.box_ops import decode_box_params
from string_perception.symmetry import nearest_relabelling, orientation_error_deg, paired_symmetric_iou

STATS = ('iou', 'iou_true_centre', 'iou_true_rotation', 'iou_true_size', 'centre_xy_m', 'centre_z_m', 'centre_3d_m',
         'scale_error', 'orientation_deg', 'volume_ratio',
         'size_ratio_longest', 'size_ratio_middle', 'size_ratio_shortest')


def aligned_scale_iou(size_pred: np.ndarray, R_pred: np.ndarray, size_gt: np.ndarray, R_gt: np.ndarray) -> np.ndarray:
    """IoU of co-centred, co-rotated boxes: predicted sizes ``[N,3]`` relabelled onto the ground-truth axes nearest
    its own (``R_pred P`` closest to ``R_gt``) -> ``[N]``."""
    s = _sizes_along_gt_axes(size_pred, R_pred, R_gt)                                 # [N,3]
    inter = np.prod(np.minimum(s, size_gt), axis=1)
    union = np.prod(s, axis=1) + np.prod(size_gt, axis=1) - inter
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(union > 0, inter / union, 0.0)


def aligned_size_ratios(size_pred: np.ndarray, R_pred: np.ndarray, size_gt: np.ndarray,
                        R_gt: np.ndarray) -> np.ndarray:
    """Predicted / true size along each ground-truth axis (predicted sizes relabelled as in
    :func:`aligned_scale_iou`), columns ordered longest to shortest ground-truth side -> ``[N,3]``."""
    ratio = _sizes_along_gt_axes(size_pred, R_pred, R_gt) / np.maximum(size_gt, 1e-12)   # [N,3] per gt axis
    order = np.argsort(-size_gt, axis=1, kind='stable')                                   # [N,3] longest first
    return np.take_along_axis(ratio, order, axis=1)


def _sizes_along_gt_axes(size_pred: np.ndarray, R_pred: np.ndarray, R_gt: np.ndarray) -> np.ndarray:
    """Predicted sizes ``[N,3]`` taken along the ground-truth axes nearest its own (``R_pred P`` closest to ``R_gt``)."""
    P = nearest_relabelling(R_pred, R_gt)                                              # [N,3,3]
    return np.einsum('nij,ni->nj', np.abs(P), size_pred)                              # [N,3]


def oracle_ious(pred: tuple[np.ndarray, np.ndarray, np.ndarray], gt: tuple[np.ndarray, np.ndarray, np.ndarray],
                gt_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Symmetry-aware IoU of each prediction ``(t[N,3], R[N,3,3], size[N,3])`` with its ground truth after replacing
    one part by the truth's -> ``{'iou_true_centre', 'iou_true_rotation', 'iou_true_size'}``, each ``[N]``.
    A rotation is only comparable with sizes along its own axes: the true rotation takes the predicted sizes along
    the true axes nearest the predicted ones, the true sizes are taken along the predicted axes nearest the true."""
    (tp, Rp, sp), (tg, Rg, sg) = pred, gt
    P = np.abs(nearest_relabelling(Rp, Rg))                                           # [N,3,3] Rp P ~ Rg
    sg_on_pred = np.einsum('nij,nj->ni', P, sg)                                       # [N,3] true sizes, pred axes
    swapped = {'iou_true_centre': (tg, Rp, sp), 'iou_true_rotation': (tp, Rg, _sizes_along_gt_axes(sp, Rp, Rg)),
               'iou_true_size': (tp, Rp, sg_on_pred)}
    return {k: paired_symmetric_iou(b, (tg, Rg, sg), gt_names) for k, b in swapped.items()}


def _arrays(frame: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(params[K,12], labels[K], scores[K])`` of a frame (ground truth: scores 1)."""
    params = np.asarray(frame['params'] if 'params' in frame else frame['boxes'], np.float64).reshape(-1, 12)
    labels = np.asarray(frame['labels'], np.int64).reshape(-1)
    scores = np.asarray(frame['scores'], np.float64).reshape(-1) if 'scores' in frame else np.ones(len(labels))
    return params, labels, scores


def _stat(x: np.ndarray) -> dict[str, float | None]:
    return {'mean': float(np.mean(x)), 'median': float(np.median(x))} if len(x) else {'mean': None, 'median': None}


def _fraction(num: float, den: float) -> float | None:
    return float(num / den) if den else None


def breakdown(preds: Sequence[dict], gts: Sequence[dict], class_names: Sequence[str],
              score_threshold: float | None = None, dup_iou: float = 0.25, min_iou: float = 0.0,
              ious_sym: list[np.ndarray] | None = None) -> dict[str, Any]:
    """Per-frame predictions (``params[K,12]``, ``labels[K]``, ``scores[K]``) and ground truth (``params[M,12]``,
    ``labels[M]``) -> ``{'matching', 'score_threshold', 'dup_iou', 'overall': {...}, 'per_class': {name: {...}}}``
    with, in each, ``num_gt, num_matched``, the :data:`STATS` as ``{'mean', 'median'}``, ``class_accuracy``,
    ``duplicates_per_object``, ``precision``, ``recall``, ``num_kept`` (JSON-ready; see the module doc).
    ``ious_sym``: the per-frame symmetry-aware IoU matrices, if already computed (``metrics.frame_ious_sym``)."""
    names = list(class_names)
    if ious_sym is None:
        ious_sym = metrics.frame_ious_sym(preds, gts, names)
    rows: dict[str, list] = {k: [] for k in ('label', 'matched', 'closest', 'dups')}
    pairs: dict[str, list] = {k: [] for k in ('label', 'pred', 'gt', 'iou')}
    for p, g, iou in zip(preds, gts, ious_sym):
        (gp, gl, _), (pp, pl, scores) = _arrays(g), _arrays(p)
        kept = scores >= score_threshold if score_threshold is not None else np.ones(len(pl), bool)
        same = np.where(pl[:, None] == gl[None, :], iou, -1.0)                        # [K,M] class-aware
        for j in range(len(gl)):
            rows['label'].append(gl[j])
            k = int(np.argmax(same[:, j])) if len(pl) else -1
            matched = k >= 0 and same[k, j] > min_iou
            rows['matched'].append(matched)
            if matched:
                pairs['label'].append(gl[j])
                pairs['pred'].append(pp[k])
                pairs['gt'].append(gp[j])
                pairs['iou'].append(same[k, j])
            c = int(np.argmax(iou[:, j])) if len(pl) else -1
            rows['closest'].append(int(pl[c]) if c >= 0 and iou[c, j] > 0 else -1)   # its class; -1: no overlap
            rows['dups'].append(max(int(np.sum(kept & (iou[:, j] >= dup_iou))) - 1, 0))
    per_gt = {k: np.asarray(v) for k, v in rows.items()}
    labels = np.asarray(rows['label'], np.int64)                                      # [M] over all frames
    closest = np.asarray(rows['closest'], np.int64)                                   # [M] class of the closest box
    has_closest, closest_ok = closest >= 0, closest == labels
    errors = _pair_errors(pairs, names)
    tp, kept_by_class, num_gt_by_class = _precision_counts(preds, gts, ious_sym, len(names), score_threshold, dup_iou)

    def block(gt_mask: np.ndarray, pair_mask: np.ndarray, classes: list[int]) -> dict[str, Any]:
        kept = sum(kept_by_class[c] for c in classes)
        return {
            'num_gt': int(gt_mask.sum()), 'num_matched': int(per_gt['matched'][gt_mask].sum()) if gt_mask.any() else 0,
            **{k: _stat(errors[k][pair_mask]) for k in STATS},
            'class_accuracy': _fraction(closest_ok[gt_mask].sum(), has_closest[gt_mask].sum()),
            'duplicates_per_object': float(per_gt['dups'][gt_mask].mean()) if gt_mask.any() else None,
            'precision': _fraction(sum(tp[c] for c in classes), kept),
            'recall': _fraction(sum(tp[c] for c in classes), sum(num_gt_by_class[c] for c in classes)),
            'num_kept': int(kept),
        }

    plabels = errors['label']
    out = {'matching': f'class-aware, best symmetry-aware IoU > {min_iou:g}',
           'score_threshold': None if score_threshold is None else float(score_threshold), 'dup_iou': float(dup_iou),
           'overall': block(np.ones(len(labels), bool), np.ones(len(plabels), bool), list(range(len(names)))),
           'per_class': {n: block(labels == c, plabels == c, [c]) for c, n in enumerate(names)},
           'confusion': _confusion(labels, closest, names)}
    return out


def _confusion(labels: np.ndarray, closest: np.ndarray, names: list[str]) -> dict[str, dict[str, int]]:
    """``{true name: {closest box's name: count}}`` over ground truth with a closest box (``closest`` >= 0)."""
    out: dict[str, dict[str, int]] = {}
    for t, c in zip(labels.tolist(), closest.tolist()):
        if c >= 0:
            row, name = out.setdefault(_class_name(names, t), {}), _class_name(names, c)
            row[name] = row.get(name, 0) + 1
    return out


def _class_name(names: list[str], c: int) -> str:
    """``names[c]``, or the number itself for a label outside the class list."""
    return names[c] if 0 <= c < len(names) else str(c)


def _pair_errors(pairs: dict[str, list], names: list[str]) -> dict[str, np.ndarray]:
    """Per matched pair: label and the :data:`STATS` values."""
    if not pairs['label']:
        return {'label': np.zeros(0, np.int64), **{k: np.zeros(0) for k in STATS}}
    tp, Rp, sp = decode_box_params(np.stack(pairs['pred']))                             # [N,3] [N,3,3] [N,3]
    tg, Rg, sg = decode_box_params(np.stack(pairs['gt']))
    label = np.asarray(pairs['label'], np.int64)
    d = tp - tg
    gt_names = [_class_name(names, c) for c in label]
    return {'label': label, 'iou': np.asarray(pairs['iou'], np.float64),
            **oracle_ious((tp, Rp, sp), (tg, Rg, sg), gt_names),
            'centre_xy_m': np.linalg.norm(d[:, :2], axis=1), 'centre_z_m': np.abs(d[:, 2]),
            'centre_3d_m': np.linalg.norm(d, axis=1), 'scale_error': 1.0 - aligned_scale_iou(sp, Rp, sg, Rg),
            'orientation_deg': orientation_error_deg(Rp, Rg, gt_names),
            'volume_ratio': np.prod(sp, axis=1) / np.maximum(np.prod(sg, axis=1), 1e-12),
            **dict(zip(('size_ratio_longest', 'size_ratio_middle', 'size_ratio_shortest'),
                       aligned_size_ratios(sp, Rp, sg, Rg).T))}


def _precision_counts(preds, gts, ious_sym, num_classes, score_threshold, iou_threshold):
    """Per class: true positives and kept predictions at ``score_threshold`` (IoU ``iou_threshold``, class-aware
    greedy matching as AP3D), and ground-truth counts."""
    kept, ious = [], []
    for p, iou in zip(preds, ious_sym):
        params, labels, scores = _arrays(p)
        keep = scores >= score_threshold if score_threshold is not None else np.ones(len(labels), bool)
        kept.append({'params': params[keep], 'labels': labels[keep], 'scores': scores[keep]})
        ious.append(iou[keep])
    tp, n_kept, n_gt = {}, {}, {}
    for c in range(num_classes):
        cur = metrics.pr_curve(kept, gts, c, iou_threshold, ious)
        tp[c], n_kept[c], n_gt[c] = int(cur['tp'].sum()), len(cur['tp']), int(cur['num_gt'])
    return tp, n_kept, n_gt

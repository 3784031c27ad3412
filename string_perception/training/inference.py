"""From model outputs to metrics: decode as the node decodes, run a model over a dataset, score predictions.

The library half of the evaluator (``evaluate.py`` is its CLI): the training loop's validation
(``training/engine.run_validation``), the checkpoint evaluator, the bag evaluator and the workcell evaluator all
use these. :func:`decode_outputs` decodes one image's ``boxes`` / ``logits`` exactly as the ROS node does
(``runtime.postprocess.decode_detections``: score threshold, class-wise 3D NMS, top-k); :func:`predict` runs a
model over a ``SceneDataset``; :func:`evaluate_predictions` scores per-frame predictions with ``metrics.summarize``
(average best 3D IoU, AP3D at IoU 0.25 / 0.5, per class, strict and symmetry-aware ``_sym``) and
``training.breakdown``; :func:`headline` keeps the scalar numbers that are tracked. torch is imported only where a
model runs (the bag evaluator scores ONNX outputs without it).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:  # torch only where a model runs: the bag evaluator reuses the rest without torch
    import torch


# ----------------------------------------------------------------------------------------------------------------
# Decoding: model outputs of one image -> detections (the node's decoder)
# ----------------------------------------------------------------------------------------------------------------


def decode_outputs(boxes: np.ndarray, logits: np.ndarray, labels: Sequence[str], score_threshold: float = 0.3,
                   nms_iou: float = 0.5, max_detections: int = 20, multi_label: bool = False
                   ) -> dict[str, np.ndarray]:
    """``boxes[N,12]``, ``logits[N,C]`` of one image -> ``{'params': float64[K,12], 'scores': float64[K],
    'labels': int64[K]}`` sorted by score, via ``runtime.postprocess.decode_detections``."""
    from string_perception.runtime.postprocess import decode_detections
    det = decode_detections(np.asarray(boxes, np.float32), np.asarray(logits, np.float32), list(labels),
                            score_threshold=score_threshold, nms_iou=nms_iou, max_detections=max_detections,
                            multi_label=multi_label)
    return detections_to_arrays(det)


def detections_to_arrays(det) -> dict[str, np.ndarray]:
    """A runtime ``Detections`` -> the plain arrays the metrics take."""
    from string_perception import box_ops
    t = np.asarray(det.translations, np.float64).reshape(-1, 3)   # [K,3]
    R = np.asarray(det.rotations, np.float64).reshape(-1, 3, 3)   # [K,3,3]
    s = np.asarray(det.sizes, np.float64).reshape(-1, 3)          # [K,3]
    return {'params': box_ops.encode_box_params(t, R, s).reshape(-1, 12),
            'scores': np.asarray(det.scores, np.float64).reshape(-1),
            'labels': np.asarray(det.class_ids, np.int64).reshape(-1)}


# ----------------------------------------------------------------------------------------------------------------
# Inference over a dataset
# ----------------------------------------------------------------------------------------------------------------

def _no_grad(fn):
    """``torch.no_grad()`` as a decorator, importing torch on the first call rather than at import time."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch
        with torch.no_grad():
            return fn(*args, **kwargs)
    return wrapper


@_no_grad
def predict(model: torch.nn.Module, dataset, *, device: torch.device | str = 'cpu', batch_size: int = 16,
            decode: dict[str, Any] | None = None, criterion=None, num_workers: int = 0,
            progress: bool = False, flip_tta: bool = False) -> dict[str, Any]:
    """Run ``model`` over every frame of ``dataset`` (a :class:`~string_perception.training.data.SceneDataset`).
    ``flip_tta``: each frame also runs mirrored left-right and the two passes are fused per token before decoding,
    as the runtime's ``flip_tta`` does (``runtime/flip_tta.py``; the losses are the plain pass's).

    Returns ``{'preds': [per-frame decode_outputs dict], 'gts': [{'params': float64[M,12], 'labels': int64[M]}],
    'seeds': [int], 'losses': {name: mean over batches} (when ``criterion`` is given)}``.
    """
    import torch
    from torch.utils.data import DataLoader

    from string_perception.training.data import collate
    device = torch.device(device)
    was_training = model.training
    model.eval()
    labels = list(model.config.class_names)
    decode = dict(decode or {})
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate, num_workers=num_workers)
    preds, gts, seeds, loss_sums, n_batches = [], [], [], {}, 0
    it = loader
    if progress:
        from tqdm import tqdm
        it = tqdm(loader, desc='predict', unit='batch', dynamic_ncols=True)
    for batch in it:
        image, depth, K = batch['image'].to(device), batch['depth'].to(device), batch['K'].to(device)
        out = model(image, depth, K)
        if criterion is not None:
            targets = [{k: v.to(device) for k, v in t.items()} for t in batch['targets']]
            for k, v in criterion(out, targets).items():
                loss_sums[k] = loss_sums.get(k, 0.0) + float(v)
            n_batches += 1
        boxes = out['boxes'].float().cpu().numpy()     # [B,N,12]
        logits = out['logits'].float().cpu().numpy()   # [B,N,C]
        if flip_tta:
            boxes, logits = _fused_with_flip(model, image, depth, K, boxes, logits)
        for b in range(boxes.shape[0]):
            preds.append(decode_outputs(boxes[b], logits[b], labels, **decode))
            gts.append(batch['gts'][b])                  # the generator's boxes, never the canonical targets
        seeds.extend(int(s) for s in batch['seeds'])
    model.train(was_training)
    return {'preds': preds, 'gts': gts, 'seeds': seeds,
            'losses': {k: v / max(n_batches, 1) for k, v in loss_sums.items()}}


def _fused_with_flip(model, image, depth, K, boxes: np.ndarray,
                     logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``boxes [B,N,12]``, ``logits [B,N,C]`` of a batch fused per frame with the model's outputs on the batch
    mirrored left-right (``image [B,H,W,3]``, ``depth [B,H,W]``, ``K [B,3,3]``: cx -> W - 1 - cx)."""
    from string_perception.runtime.flip_tta import fuse_flip_passes, mirrored_cx
    Kf = K.clone()
    Kf[:, 0, 2] = mirrored_cx(K[:, 0, 2], image.shape[2])
    out = model(image.flip(2), depth.flip(2), Kf)
    fb, fl = out['boxes'].float().cpu().numpy(), out['logits'].float().cpu().numpy()   # [B,N,12], [B,N,C]
    grid = model.config.grid_size
    fused = [fuse_flip_passes({'boxes': np.stack([boxes[b], fb[b]]), 'logits': np.stack([logits[b], fl[b]])}, grid)
             for b in range(len(boxes))]
    return np.concatenate([f['boxes'] for f in fused]), np.concatenate([f['logits'] for f in fused])


def _keep_masks(preds: Sequence[dict], score_threshold: float) -> list[np.ndarray]:
    return [np.asarray(p['scores']) >= score_threshold for p in preds]


def filter_predictions(preds: Sequence[dict], score_threshold: float) -> list[dict]:
    """Keep the predictions with ``score >= score_threshold`` (per frame)."""
    masks = _keep_masks(preds, score_threshold)
    return [{k: np.asarray(v)[keep] for k, v in p.items()} for p, keep in zip(preds, masks)]


def evaluate_predictions(preds: Sequence[dict], gts: Sequence[dict], class_names: Sequence[str],
                         operating_threshold: float | None = None, include_curves: bool = False,
                         breakdown: bool = True) -> dict[str, Any]:
    """Per-frame predictions (``params[K,12]``, ``scores[K]``, ``labels[K]``) and ground truth (``params[M,12]``,
    ``labels[M]``) -> the ``metrics.summarize`` dict (average best IoU, AP3D@0.25/0.5, per class, strict and
    symmetry-aware ``_sym``, ...).

    AP needs the low-score tail, so decode with a low threshold; the average best IoU ignores scores, so it reads
    higher the more boxes are kept. With ``operating_threshold`` the headline numbers of only the predictions
    scoring at least that much (what the node publishes) are added under ``'at_operating_threshold'``. With
    ``breakdown``, the error breakdown of :mod:`.breakdown` (at ``operating_threshold``) under ``'breakdown'``.
    """
    from string_perception import metrics
    from string_perception.training.breakdown import breakdown as error_breakdown
    preds, gts, names = list(preds), list(gts), list(class_names)
    ious = metrics.frame_ious(preds, gts)
    ious_sym = metrics.frame_ious_sym(preds, gts, names, ious)       # the costly part: computed once, shared
    summary = metrics.summarize(preds, gts, class_names=names, include_curves=include_curves, ious=ious,
                                ious_sym=ious_sym)
    if operating_threshold is not None:
        keep = _keep_masks(preds, operating_threshold)
        op = metrics.summarize(filter_predictions(preds, operating_threshold), gts, class_names=names,
                               ious=[m[k] for m, k in zip(ious, keep)], ious_sym=[m[k] for m, k in zip(ious_sym, keep)])
        summary['at_operating_threshold'] = {'score_threshold': float(operating_threshold),
                                             'num_pred': op['num_pred'], **metrics.headline(op)}
    if breakdown:
        summary['breakdown'] = error_breakdown(preds, gts, names, score_threshold=operating_threshold,
                                               ious_sym=ious_sym)
    return summary


def headline(summary: dict[str, Any]) -> dict[str, float]:
    """The scalar numbers we track: ``avg_best_iou``, ``avg_best_iou_agnostic``, ``ap3d_25``, ``ap3d_50``, the same
    with ``_sym`` (symmetry-aware) and ``op_<name>`` at the operating threshold when present."""
    from string_perception import metrics
    out = metrics.headline(summary)
    for k, v in summary.get('at_operating_threshold', {}).items():
        if k in out:
            out[f'op_{k}'] = float(v)
    return out


__all__ = ['decode_outputs', 'detections_to_arrays', 'predict', 'filter_predictions', 'evaluate_predictions',
           'headline']

"""Losses for dense one-to-many training (``assignment.py``): every token on an object learns that object's box.

With ``K`` positive tokens in the batch, ``P`` objects that received at least one token and ``k_m`` tokens on
object ``m``:

* ``class``: sigmoid focal loss over ALL tokens and classes, target = one-hot of the assigned object's class for
  positive tokens and all-zero elsewhere, summed and divided by ``K``;
* ``params``: L1 over the 12 numbers ``[t, rot6d, size]``, each positive token weighted ``1 / k_m``, divided by ``P``
  (so every object counts once, however many tokens it covers);
* ``corners``: the mean corner L1 (``box_ops.CORNER_SIGNS`` order, L1 summed over xyz, averaged over the 8 corners)
  with the same weights and normaliser.

``class_weights`` (``{class name: w}``, needs ``class_names``; unnamed classes weigh 1) multiplies the class loss of
every token assigned to an object of that class, over all its class columns (class-balanced loss, Cui et al. 2019):
``{'object': 0.5}`` halves the pull of mesh tokens towards ``object`` while primitive tokens keep the full push away
from it. Background tokens weigh 1; the normaliser stays ``K``.

With ``symmetric=True`` (needs ``class_names``) each target is first moved to the member of its symmetry group
nearest the prediction (``symmetric_targets.align_targets``), so a prediction is never punished for choosing
another description of the same box. ``K`` and ``P`` are averaged over DDP ranks when ``torch.distributed`` is
initialised (at least 1). Targets must hold ``'mask'`` (int[H,W] instance mask, see ``training/data.py``) next to
``'labels'`` and ``'boxes'``.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..assignment import assign_from_mask
from ..box_ops_torch import params_to_corners
from .losses import sigmoid_focal_loss
from .symmetric_targets import align_targets, class_kinds

DENSE_WEIGHTS = {'class': 2.0, 'params': 2.0, 'corners': 10.0}


def _global_count(n: float, device: torch.device) -> torch.Tensor:
    t = torch.tensor(float(n), device=device)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t)
        t = t / dist.get_world_size()
    return t.clamp(min=1.0)


def build_class_weights(num_classes: int, class_names: Sequence[str] | None,
                        class_weights: Mapping[str, float] | None) -> torch.Tensor:
    """float32[C] per-class weights of the class loss: ``class_weights[name]`` for the named classes, 1 elsewhere."""
    w = torch.ones(num_classes)
    for name, value in dict(class_weights or {}).items():
        if name not in (class_names or ()):
            raise ValueError(f'class_weights names {name!r}; the classes are {list(class_names or ())}')
        if not (math.isfinite(float(value)) and float(value) > 0):
            raise ValueError(f'class_weights[{name!r}] must be a finite number > 0, got {value!r}')
        w[list(class_names).index(name)] = float(value)
    return w


def object_weights(indices: list[tuple[torch.Tensor, torch.Tensor]],
                   num_objects: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per assigned token ``1 / (tokens on its object)`` float32[K] (every object weighs 1 in the box losses,
    however many tokens cover it), and the token count of each object that has tokens int64[M]. Objects are
    numbered per image, so they are keyed by (image, object) with a stride of the largest object count."""
    stride = max(num_objects, default=0) + 1
    key = torch.cat([o + stride * b for b, (_, o) in enumerate(indices)]) if indices else torch.zeros(0)  # [K]
    _, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse].float(), counts


class DenseCriterion(nn.Module):
    """``criterion(outputs, targets) -> {'class', 'params', 'corners', 'loss', 'positives'}`` (scalar tensors)."""

    def __init__(self, num_classes: int, patch_size: int, weights: Mapping[str, float] | None = None,
                 min_coverage: float = 0.5, focal_alpha: float = 0.25, focal_gamma: float = 2.0,
                 symmetric: bool = False, class_names: Sequence[str] | None = None,
                 class_weights: Mapping[str, float] | None = None):
        super().__init__()
        if (symmetric or class_weights) and (class_names is None or len(class_names) != num_classes):
            raise ValueError(f"{'symmetric=True' if symmetric else 'class_weights'} needs class_names, one per class")
        self.kinds = class_kinds(class_names) if symmetric else None
        self.register_buffer('class_weight', build_class_weights(num_classes, class_names, class_weights),
                             persistent=False)                                  # [C]
        unknown = set(weights or {}) - set(DENSE_WEIGHTS)
        if unknown:
            raise ValueError(f'unknown loss weights {sorted(unknown)}; expected {sorted(DENSE_WEIGHTS)}')
        self.num_classes, self.patch_size = int(num_classes), int(patch_size)
        self.weights = {**DENSE_WEIGHTS, **dict(weights or {})}
        self.min_coverage = float(min_coverage)
        self.focal_alpha, self.focal_gamma = focal_alpha, focal_gamma

    @torch.no_grad()
    def assign(self, targets: list[dict]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per image ``(token_idx int64[K_b], object_idx int64[K_b])`` from its instance mask."""
        out = []
        for t in targets:
            if 'mask' not in t:
                raise ValueError("DenseCriterion needs targets with an instance 'mask' (training/data.py)")
            out.append(assign_from_mask(t['mask'], int(t['labels'].numel()), self.patch_size, self.min_coverage))
        return out

    def forward(self, outputs: dict, targets: list[dict]) -> dict[str, torch.Tensor]:
        logits, boxes = outputs['logits'].float(), outputs['boxes'].float()      # [B,N,C], [B,N,12]
        if logits.shape[-1] != self.num_classes:
            raise ValueError(f'logits have {logits.shape[-1]} classes, criterion expects {self.num_classes}')
        device = logits.device
        indices = self.assign(targets)
        batch_idx = torch.cat([torch.full_like(tok, b) for b, (tok, _) in enumerate(indices)]).to(device)  # [K]
        tok_idx = torch.cat([tok for tok, _ in indices]).to(device)                                       # [K]
        labels = torch.cat([t['labels'].to(device)[o] for t, (_, o) in zip(targets, indices)])            # [K]
        tgt = torch.cat([t['boxes'].to(device, torch.float32)[o] for t, (_, o) in zip(targets, indices)])  # [K,12]
        weight, counts = object_weights(indices, [int(t['labels'].numel()) for t in targets])
        weight, counts = weight.to(device), counts.to(device)                     # [K], [objects with tokens]
        num_pos = _global_count(tok_idx.numel(), device)
        num_obj = _global_count(counts.numel(), device)

        onehot = torch.zeros_like(logits)                                        # [B,N,C]
        onehot[batch_idx, tok_idx, labels] = 1.0
        token_weight = torch.ones(logits.shape[:2], device=device)               # [B,N] background: 1
        token_weight[batch_idx, tok_idx] = self.class_weight.to(device)[labels]
        focal = sigmoid_focal_loss(logits, onehot, self.focal_alpha, self.focal_gamma)    # [B,N,C]
        loss_class = (focal * token_weight[..., None]).sum() / num_pos

        src = boxes[batch_idx, tok_idx]                                          # [K,12]
        if self.kinds is not None:
            tgt = align_targets(src, tgt, labels, self.kinds)                    # [K,12] nearest equivalent box
        loss_params = ((src - tgt).abs().sum(-1) * weight).sum() / num_obj
        corner_l1 = (params_to_corners(src) - params_to_corners(tgt)).abs().sum(-1).mean(-1)             # [K]
        loss_corners = (corner_l1 * weight).sum() / num_obj

        losses = {'class': loss_class, 'params': loss_params, 'corners': loss_corners}
        losses['loss'] = sum(self.weights[k] * v for k, v in losses.items())
        losses['positives'] = tok_idx.new_tensor(tok_idx.numel(), dtype=torch.float32)
        return losses


__all__ = ['DENSE_WEIGHTS', 'DenseCriterion', 'build_class_weights', 'object_weights']

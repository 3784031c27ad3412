"""Set-prediction losses for the 3D box head (OWL-ViT / DETR style, paper App. F.2.2).

After Hungarian matching (``matcher.py``):

* ``class``: sigmoid focal loss over ALL tokens and classes; a matched token's target is the one-hot of its
  target's class, every other token's target is all-zero ("no object").
* ``params``: L1 over the 12 numbers ``[t, rot6d, size]`` of matched pairs (summed over the 12).
* ``corners``: L1 over the 8 box corners (fixed ``box_ops.CORNER_SIGNS`` order) of matched pairs, L1 summed over
  xyz and averaged over the 8 corners (so it reads like a translation error in metres). This replaces the 2D
  gIoU loss, as in the paper (exact 3D IoU is not differentiable).

Each term is summed over the batch and divided by the number of target boxes (averaged over DDP ranks when
``torch.distributed`` is initialised, at least 1); ``loss`` is the weighted sum.

Known limitation: the 6D rotation of a box with symmetries (a cylinder, a cube, any box under a 180 degree turn
about one of its axes) is ambiguous, so ``params`` and ``corners`` penalise rotations that describe the same
physical box. We leave this as in the paper; a symmetry-aware (min over equivalent rotations) loss is future work.
"""
from __future__ import annotations

from typing import Mapping

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..box_ops_torch import params_to_corners
from ..matcher import HungarianMatcher

DEFAULT_WEIGHTS = {'class': 2.0, 'params': 5.0, 'corners': 2.0}   # DETR's (class, L1, gIoU) values, as the paper


def sigmoid_focal_loss(logits: torch.Tensor, targets: torch.Tensor, alpha: float = 0.25,
                       gamma: float = 2.0) -> torch.Tensor:
    """Element-wise sigmoid focal loss (Lin et al. 2017), same shape as ``logits``; ``alpha < 0`` disables alpha."""
    p = logits.sigmoid()
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction='none')
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    return loss


class SetCriterion(nn.Module):
    """``criterion(outputs, targets) -> {'class', 'params', 'corners', 'loss'}`` (scalar tensors).

    ``outputs = {'logits': [B,N,C], 'boxes': [B,N,12]}``; ``targets[b] = {'labels': int64[M], 'boxes': [M,12]}``
    (M may be 0). ``weights`` overrides entries of :data:`DEFAULT_WEIGHTS`; without a ``matcher`` a
    :class:`~string_perception.matcher.HungarianMatcher` with the same weights as costs is built.
    """

    def __init__(self, num_classes: int, matcher: nn.Module | None = None,
                 weights: Mapping[str, float] | None = None, focal_alpha: float = 0.25, focal_gamma: float = 2.0):
        super().__init__()
        unknown = set(weights or {}) - set(DEFAULT_WEIGHTS)
        if unknown:
            raise ValueError(f'unknown loss weights {sorted(unknown)}; expected {sorted(DEFAULT_WEIGHTS)}')
        self.num_classes = int(num_classes)
        self.weights = {**DEFAULT_WEIGHTS, **dict(weights or {})}
        self.focal_alpha, self.focal_gamma = focal_alpha, focal_gamma
        self.matcher = matcher if matcher is not None else HungarianMatcher(
            cost_class=self.weights['class'], cost_params=self.weights['params'],
            cost_corners=self.weights['corners'], focal_alpha=focal_alpha, focal_gamma=focal_gamma)

    @staticmethod
    def _num_boxes(targets: list[dict], device: torch.device) -> torch.Tensor:
        n = torch.tensor(float(sum(int(t['labels'].numel()) for t in targets)), device=device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(n)
            n = n / dist.get_world_size()
        return n.clamp(min=1.0)

    def forward(self, outputs: dict, targets: list[dict]) -> dict[str, torch.Tensor]:
        logits, boxes = outputs['logits'].float(), outputs['boxes'].float()  # [B,N,C], [B,N,12]; fp32 under AMP
        if logits.shape[-1] != self.num_classes:
            raise ValueError(f'logits have {logits.shape[-1]} classes, criterion expects {self.num_classes}')
        indices = self.matcher(outputs, targets)
        num_boxes = self._num_boxes(targets, logits.device)

        batch_idx = torch.cat([torch.full_like(p, b) for b, (p, _) in enumerate(indices)]).to(logits.device)
        pred_idx = torch.cat([p for p, _ in indices]).to(logits.device)
        tgt_labels = torch.cat([t['labels'].to(logits.device)[j] for t, (_, j) in zip(targets, indices)])
        tgt_boxes = torch.cat([t['boxes'].to(boxes.device, boxes.dtype)[j] for t, (_, j) in zip(targets, indices)])

        onehot = torch.zeros_like(logits)                                    # [B,N,C]; unmatched -> all zero
        onehot[batch_idx, pred_idx, tgt_labels] = 1.0
        loss_class = sigmoid_focal_loss(logits, onehot, self.focal_alpha, self.focal_gamma).sum() / num_boxes

        src_boxes = boxes[batch_idx, pred_idx]                               # [K,12]
        loss_params = (src_boxes - tgt_boxes).abs().sum() / num_boxes
        corner_l1 = (params_to_corners(src_boxes) - params_to_corners(tgt_boxes)).abs().sum(-1)  # [K,8]
        loss_corners = corner_l1.mean(-1).sum() / num_boxes

        losses = {'class': loss_class, 'params': loss_params, 'corners': loss_corners}
        losses['loss'] = sum(self.weights[k] * v for k, v in losses.items())
        return losses

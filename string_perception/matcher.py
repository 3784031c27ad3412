"""Hungarian matching of per-token box predictions to ground-truth boxes (DETR / OWL-ViT style, paper App. F.2.4).

Cost of assigning prediction ``i`` to target ``j`` of the same image::

    C[i, j] = cost_class * class_cost(logits[i], label[j])
            + cost_params * |params_i - params_j|_1                    (sum over the 12 numbers)
            + cost_corners * mean_k |corner_ik - corner_jk|_1          (8 corners, fixed order, L1 summed over xyz)

``class_cost`` is the sigmoid focal-style cost of Deformable DETR / OWL-ViT (``'focal'``, default) or the negative
probability of the target class (``'prob'``). The same quantities, normalised the same way, are the training
losses (``training/losses.py``). Assignment: ``scipy.optimize.linear_sum_assignment`` per image.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn

from .box_ops_torch import params_to_corners

_BIG = 1e8  # replaces non-finite costs so that a diverging prediction cannot crash the assignment


def focal_class_cost(logits: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0) -> torch.Tensor:
    """Per-class focal matching cost ``[..., C]`` (positive-class focal term minus negative-class term)."""
    p = logits.sigmoid()
    pos = alpha * (1 - p) ** gamma * F.softplus(-logits)           # -log p = softplus(-x)
    neg = (1 - alpha) * p ** gamma * F.softplus(logits)            # -log(1 - p) = softplus(x)
    return pos - neg


class HungarianMatcher(nn.Module):
    """One-to-one assignment between the N predictions of each image and its M targets (``min(N, M)`` pairs)."""

    def __init__(self, cost_class: float = 2.0, cost_params: float = 5.0, cost_corners: float = 2.0,
                 class_cost: str = 'focal', focal_alpha: float = 0.25, focal_gamma: float = 2.0):
        super().__init__()
        if class_cost not in ('focal', 'prob'):
            raise ValueError(f"class_cost must be 'focal' or 'prob', got {class_cost!r}")
        self.cost_class, self.cost_params, self.cost_corners = cost_class, cost_params, cost_corners
        self.class_cost, self.focal_alpha, self.focal_gamma = class_cost, focal_alpha, focal_gamma

    @torch.no_grad()
    def cost_matrices(self, outputs: dict, targets: list[dict]) -> torch.Tensor:
        """Padded cost ``[B, N, Mmax]`` (float32, CPU); columns ``>= len(targets[b]['labels'])`` are padding."""
        logits = outputs['logits'].float()                         # [B,N,C]
        boxes = outputs['boxes'].float()                           # [B,N,12]
        B, N, _ = logits.shape
        m_max = max((int(t['labels'].numel()) for t in targets), default=0)
        labels = torch.zeros(B, m_max, dtype=torch.long, device=logits.device)
        tboxes = torch.zeros(B, m_max, 12, device=logits.device)
        tboxes[..., 3] = tboxes[..., 7] = tboxes[..., 9:] = 1.0   # harmless identity-box padding
        for b, t in enumerate(targets):
            m = int(t['labels'].numel())
            labels[b, :m] = t['labels'].to(logits.device)
            tboxes[b, :m] = t['boxes'].to(device=logits.device, dtype=torch.float32)
        if self.class_cost == 'focal':
            per_class = focal_class_cost(logits, self.focal_alpha, self.focal_gamma)
        else:
            per_class = -logits.sigmoid()
        c_class = torch.gather(per_class, 2, labels[:, None, :].expand(B, N, m_max))          # [B,N,Mmax]
        c_params = torch.cdist(boxes, tboxes, p=1)                                             # [B,N,Mmax]
        c_corners = torch.cdist(params_to_corners(boxes).flatten(-2), params_to_corners(tboxes).flatten(-2),
                                p=1) / 8.0                                                     # [B,N,Mmax]
        C = self.cost_class * c_class + self.cost_params * c_params + self.cost_corners * c_corners
        return torch.nan_to_num(C, nan=_BIG, posinf=_BIG, neginf=-_BIG).cpu()

    @torch.no_grad()
    def forward(self, outputs: dict, targets: list[dict]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``outputs = {'logits': [B,N,C], 'boxes': [B,N,12]}``, ``targets[b] = {'labels': int64[M], 'boxes':
        [M,12]}`` -> per image ``(pred_idx int64[K], tgt_idx int64[K])``, ``K = min(N, M)``, sorted by pred_idx.
        """
        C = self.cost_matrices(outputs, targets)
        out = []
        for b, t in enumerate(targets):
            m = int(t['labels'].numel())
            if m == 0:
                empty = torch.empty(0, dtype=torch.int64)
                out.append((empty, empty.clone()))
                continue
            rows, cols = linear_sum_assignment(C[b, :, :m].double().numpy())
            out.append((torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)))
        return out

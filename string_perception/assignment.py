"""Dense one-to-many assignment of tokens to ground-truth objects from instance masks (FCOS / CenterNet style).

Hungarian matching (``matcher.py``) gives each object exactly one token, so the other ~6 tokens lying on the same
object are trained as "no object" although they see it as well as the matched one. The dense assignment instead
makes every token whose patch is mostly covered by an object a positive for that object::

    coverage[m, n] = fraction of the pixels of patch n that belong to object m (instance mask)
    token n is positive for m  <=>  m = argmax_m coverage[m, n]  and  coverage[m, n] >= min_coverage

An object that covers no patch that much (small or thin ones) gets its best-covered token that is still free, so
every object with at least one visible pixel is trained. Tokens are numbered row-major, as the model's patches.
At inference one-to-many training needs NMS (``runtime/postprocess.py``) to keep one box per object.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def patch_coverage(mask: torch.Tensor, num_objects: int, patch_size: int) -> torch.Tensor:
    """``mask`` int[H,W] (object index, -1 = none) -> ``coverage`` float32[M, N] (N = (H/p)(W/p), row-major)."""
    H, W = mask.shape
    if H % patch_size or W % patch_size:
        raise ValueError(f'mask {H}x{W} is not a multiple of patch_size={patch_size}')
    ids = torch.arange(num_objects, device=mask.device).view(-1, 1, 1)          # [M,1,1]
    onehot = (mask.long().unsqueeze(0) == ids).float()                          # [M,H,W]
    cov = F.avg_pool2d(onehot.unsqueeze(1), patch_size, patch_size)             # [M,1,H/p,W/p]
    return cov.flatten(1)                                                        # [M,N]


def dense_assignment(coverage: torch.Tensor, min_coverage: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """``coverage`` [M, N] -> ``(token_idx int64[K], object_idx int64[K])``, sorted by token, each token at most once.

    Token ``n`` goes to its best-covering object when that covers at least ``min_coverage`` of the patch; then each
    object still without a token takes its best-covered free token (if it covers any pixel of one), objects in
    index order.
    """
    if not 0.0 < min_coverage <= 1.0:
        raise ValueError(f'min_coverage must be in (0, 1], got {min_coverage}')
    M, N = coverage.shape
    owner = torch.full((N,), -1, dtype=torch.int64, device=coverage.device)     # [N] object per token, -1 none
    if M == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=coverage.device)
        return empty, empty.clone()
    best_cov, best_obj = coverage.max(dim=0)                                     # [N] each
    owner = torch.where(best_cov >= min_coverage, best_obj, owner)
    has = torch.zeros(M, dtype=torch.bool, device=coverage.device)
    has[owner[owner >= 0]] = True
    for m in torch.nonzero(~has).flatten().tolist():
        free = torch.where(owner < 0, coverage[m], torch.full_like(coverage[m], -1.0))   # [N]
        n = int(torch.argmax(free))
        if free[n] > 0:
            owner[n] = m
    tokens = torch.nonzero(owner >= 0).flatten()                                     # [K] ascending
    return tokens, owner[tokens]


def assign_from_mask(mask: torch.Tensor, num_objects: int, patch_size: int,
                     min_coverage: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`dense_assignment` of :func:`patch_coverage` for one image."""
    return dense_assignment(patch_coverage(mask, num_objects, patch_size), min_coverage)


__all__ = ['patch_coverage', 'dense_assignment', 'assign_from_mask']

"""Fold a canonical basis into the query/key projections (docs/DESIGN.md §2 "deployment identity").

qᵢᵀ R(rᵢ)ᵀ R(rⱼ) kⱼ with R(r) = Pᵀ Rot(Λr) P equals (P qᵢ)ᵀ Rot(Λrᵢ)ᵀ Rot(Λrⱼ) (P kⱼ), so W ← P W per head
and the exported graph only needs `apply_rope_mixed` ([ESPR] Thm 1).
"""
from __future__ import annotations

import torch

__all__ = ['fold_basis_into_projection']


def fold_basis_into_projection(weight: torch.Tensor, bias: torch.Tensor | None,
                               basis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """weight[H*Dh, D_in], bias[H*Dh] | None, basis[H (or 1), E, Dh] -> (P W [H*E, D_in], P b [H*E]) per head,
    in weight's dtype. E = Dh for every rotation encoding; E = 2m·Dh for ⊗-STRING's lift (tensor_product.py).

    Output rows h*E .. (h+1)*E-1 are head h (the usual `.view(B, N, H, E)` split of a fused projection).
    """
    if basis.dim() != 3 or basis.shape[-2] < basis.shape[-1]:
        raise ValueError(f'basis must have shape [H, E, Dh] with E >= Dh ([H, Dh, Dh] for rotations), '
                         f'got {tuple(basis.shape)}')
    e, dh = basis.shape[-2], basis.shape[-1]
    if weight.dim() != 2 or weight.shape[0] % dh:
        raise ValueError(f'weight must have shape [H*Dh, D_in] with Dh={dh}, got {tuple(weight.shape)}')
    h = weight.shape[0] // dh
    if basis.shape[0] not in (1, h):
        raise ValueError(f'basis has {basis.shape[0]} heads but weight has {h} (= {weight.shape[0]}/{dh})')
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f'bias must have shape [{weight.shape[0]}], got {tuple(bias.shape)}')
    dt = torch.float64
    p = basis.to(device=weight.device, dtype=dt).expand(h, e, dh)  # [H, E, Dh]
    w = (p @ weight.to(dt).reshape(h, dh, -1)).reshape(h * e, weight.shape[1])  # [H, E, D_in] -> [H*E, D_in]
    b = None if bias is None else (p @ bias.to(dt).reshape(h, dh, 1)).reshape(h * e)  # [H*E]
    return w.to(weight.dtype), (None if b is None else b.to(bias.dtype))

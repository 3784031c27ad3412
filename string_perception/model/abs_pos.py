"""Absolute position embeddings added to the tokens (the paper's "ViT" baseline, [PE-survey] §absolute PE).

'learned' is a [1, N, D] parameter in `ViTD` (one vector per patch index). 'sincos' is fixed: sin/cos features of
the token coordinates the encoder sees (ViT: (row, col), 2D; ViTD: (row, col, a·d) or the camera point, 3D), so
for a ViTD it changes with the depth of every frame. Both are additive, so the exported graph needs nothing new.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ['SINCOS_BASE', 'sincos_position_embedding']

SINCOS_BASE = 10_000.0   # longest wavelength 2π·base coordinate units (Vaswani et al.; MAE's 2D sin-cos)


def sincos_position_embedding(coords: Tensor, dim: int, base: float = SINCOS_BASE) -> Tensor:
    """coords [B,N,dc] -> [B,N,dim]: per axis k, F = dim // (2·dc) frequencies ω_j = base^(-j/F), features
    [sin(ω r_k), cos(ω r_k)] axis after axis; the dim − 2·dc·F leftover dims are 0. Needs dim >= 2·dc."""
    dc = coords.shape[-1]
    per_axis = dim // (2 * dc)
    if per_axis == 0:
        raise ValueError(f'sincos position embedding: dim={dim} < 2 * coord_dim={2 * dc}')
    omega = base ** (-torch.arange(per_axis, dtype=coords.dtype, device=coords.device) / per_axis)   # [F]
    angles = (coords.unsqueeze(-1) * omega).flatten(-2)                  # [B,N,dc,F] -> [B,N,dc·F]
    features = torch.stack([angles.sin(), angles.cos()], dim=-1)         # [B,N,dc·F,2]
    features = features.reshape(*coords.shape[:-1], dc, per_axis * 2).flatten(-2)   # [B,N,2·dc·F] axis-major
    pad = dim - features.shape[-1]
    return torch.nn.functional.pad(features, (0, pad)) if pad else features

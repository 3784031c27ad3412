"""Torch twins of :mod:`string_perception.box_ops` needed by training (differentiable, any device/dtype).

Same conventions and corner order as ``box_ops`` (6D = first two COLUMNS; corners in ``box_ops.CORNER_SIGNS``
order). Degenerate 6D inputs are not special-cased here (norms are clamped at ``eps`` so values stay finite);
the numpy version is the reference for inference.
"""
from __future__ import annotations

import torch

from .box_ops import BOX_EDGES, CORNER_SIGNS  # noqa: F401  (re-exported for convenience)

_CORNER_SIGNS = torch.as_tensor(CORNER_SIGNS)


def rotation_from_6d(x6: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``x6[..., 6]`` -> ``R[..., 3, 3]`` by Gram-Schmidt on the two columns (see ``box_ops.rotation_from_6d``)."""
    a1, a2 = x6[..., 0:3], x6[..., 3:6]
    b1 = a1 / a1.norm(dim=-1, keepdim=True).clamp_min(eps)
    u2 = a2 - (b1 * a2).sum(-1, keepdim=True) * b1
    b2 = u2 / u2.norm(dim=-1, keepdim=True).clamp_min(eps)
    b3 = torch.linalg.cross(b1, b2, dim=-1)
    return torch.stack([b1, b2, b3], dim=-1)


def rotation_to_6d(R: torch.Tensor) -> torch.Tensor:
    """``R[..., 3, 3]`` -> ``x6[..., 6]`` (first two columns)."""
    return torch.cat([R[..., :, 0], R[..., :, 1]], dim=-1)


def box_corners(t: torch.Tensor, R: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """``t[...,3], R[...,3,3], size[...,3]`` -> corners ``[..., 8, 3]`` in the fixed ``CORNER_SIGNS`` order."""
    local = _CORNER_SIGNS.to(device=size.device, dtype=size.dtype) * (0.5 * size[..., None, :])  # [..., 8, 3]
    return torch.einsum('...ij,...kj->...ki', R, local) + t[..., None, :]


def decode_box_params(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``params[..., 12]`` = ``[t(3), rot6d(6), size(3)]`` -> ``(t[...,3], R[...,3,3], size[...,3])``."""
    if params.shape[-1] != 12:
        raise ValueError(f'box params must end in 12 numbers, got shape {tuple(params.shape)}')
    return params[..., 0:3], rotation_from_6d(params[..., 3:9]), params[..., 9:12]


def params_to_corners(params: torch.Tensor) -> torch.Tensor:
    """``params[..., 12]`` -> corners ``[..., 8, 3]`` (decode, then ``box_corners``)."""
    return box_corners(*decode_box_params(params))

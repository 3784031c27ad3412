"""Lie-group STRING ([STRING] §3.3, Extension 2): canonical coordinates before any STRING variant.

A canonical coordinate system ρ of an Abelian transformation group T_ψ turns the group into translations,
ρ(T_ψ x) = ρ(x) + Σ_i ψ_i e_i, so STRING (exactly translation invariant) on ρ(r) is invariant to the group.

    COORDINATE_TRANSFORMS        ('identity', 'azimuth_polar')
    canonical_coordinates(name, points[..., 3]) -> [..., 3]

'azimuth_polar' (the paper's example, camera optical frame: z is the camera axis):
    θ = polar angle from +z = atan2(√(x² + y²), z) ∈ [0, π]
    φ = azimuth about z     = atan2(y, x)           ∈ (−π, π]
    ρ = ‖r‖                                         (keeps the map injective; rotations about the origin keep it)
Rotating every point about the camera axis by α maps φ -> φ + α and leaves θ, ρ unchanged, so logits are
invariant -- except where φ + α leaves (−π, π] and wraps by 2π: R(r) is 2π-periodic in φ only when every
frequency on the φ axis is an integer. Points whose φ stays on one side of the cut (−π) are exactly invariant
for any frequencies (test_encodings_family.py tests both cases).
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ['COORDINATE_TRANSFORMS', 'azimuth_polar_coordinates', 'canonical_coordinates']


def azimuth_polar_coordinates(points: torch.Tensor) -> torch.Tensor:
    """(θ polar, φ azimuth, ‖r‖) of points [..., 3] (x, y, z); finite with finite gradients everywhere except
    r = 0 (on the camera axis x = y = 0, φ := 0 with zero gradient)."""
    x, y, z = points.unbind(-1)
    on_axis = (x == 0) & (y == 0)
    safe_x = torch.where(on_axis, torch.ones_like(x), x)  # keeps atan2/sqrt gradients finite on the axis
    rho_xy = torch.where(on_axis, torch.zeros_like(x), torch.sqrt(safe_x * safe_x + y * y))  # (no ONNX hypot)
    theta = torch.atan2(rho_xy, z)
    phi = torch.where(on_axis, torch.zeros_like(x), torch.atan2(y, safe_x))
    radius = torch.sqrt(rho_xy * rho_xy + z * z)
    return torch.stack([theta, phi, radius], dim=-1)


_TRANSFORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    'identity': lambda points: points,
    'azimuth_polar': azimuth_polar_coordinates,
}
COORDINATE_TRANSFORMS = tuple(_TRANSFORMS)


def canonical_coordinates(name: str, points: torch.Tensor) -> torch.Tensor:
    """Apply the canonical-coordinate map `name` (one of COORDINATE_TRANSFORMS) to points [..., 3]."""
    if name not in _TRANSFORMS:
        raise ValueError(f'unknown coordinate transform {name!r}; valid: {", ".join(COORDINATE_TRANSFORMS)}')
    return _TRANSFORMS[name](points)

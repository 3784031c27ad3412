"""Defects of a generator set ([ESPR] Thm 2, eq. 25-26): how far a learned family is from exact STRING.

    ε      = max_{k,l} ‖[L_k, L_l]‖₂                     (commutator defect; 0 <=> the L_k commute)
    η_mix  = ‖Π_act P Π_null‖₂ + ‖Π_null P Π_act‖₂        (active/null leakage of a post-rotation P)

Π_act / Π_null project onto the active subspace (sum of the generators' ranges) and the null subspace (their
common kernel, the kernel of Σ_k L_kᵀ L_k). P defaults to R(0) = I, the post-rotation of every built-in
variant, so η_mix = 0 for them; the paper's form RoPE(r)·P_S has P_S as its post-rotation.
Logit error bound: |Δα_ij| <= C (ε |r_i|₁ |r_j|₁ + η_mix) |q_act| |k_act|.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ['Defects', 'commutator_defect', 'active_projector', 'mixing_defect', 'generator_defects']


@dataclass(frozen=True)
class Defects:
    epsilon: float  # max commutator norm over heads and pairs (k, l)
    eta_mix: float  # max active/null leakage over heads
    active_dim: int  # 2m of the head with the largest active subspace


def commutator_defect(generators: torch.Tensor) -> torch.Tensor:
    """ε per head: generators [H, dc, Dh, Dh] -> [H] = max_{k,l} spectral norm of L_k L_l − L_l L_k."""
    g = generators.to(torch.float64)
    comm = g.unsqueeze(2) @ g.unsqueeze(1) - g.unsqueeze(1) @ g.unsqueeze(2)  # [H, dc, dc, Dh, Dh]
    return torch.linalg.matrix_norm(comm, ord=2).flatten(1).amax(dim=1)


def active_projector(generators: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
    """Π_act [H, Dh, Dh]: projector onto the orthogonal complement of the common kernel of the L_k."""
    g = generators.to(torch.float64)
    m = (g.transpose(-1, -2) @ g).sum(dim=1)  # Σ_k L_kᵀ L_k: [H, Dh, Dh], PSD, kernel = common kernel
    w, v = torch.linalg.eigh(m)
    keep = (w > tol * w.amax(dim=-1, keepdim=True).clamp_min(1e-300)).to(torch.float64)  # [H, Dh]
    return (v * keep.unsqueeze(-2)) @ v.transpose(-1, -2)


def mixing_defect(generators: torch.Tensor, post_rotation: torch.Tensor | None = None,
                  tol: float = 1e-9) -> torch.Tensor:
    """η_mix per head [H] for post-rotation P [H or 1, Dh, Dh] (default I) against the generators' split."""
    pa = active_projector(generators, tol)
    eye = torch.eye(pa.shape[-1], dtype=torch.float64, device=pa.device)
    p = eye if post_rotation is None else post_rotation.to(device=pa.device, dtype=torch.float64)
    pn = eye - pa
    return torch.linalg.matrix_norm(pa @ p @ pn, ord=2) + torch.linalg.matrix_norm(pn @ p @ pa, ord=2)


def generator_defects(generators: torch.Tensor, post_rotation: torch.Tensor | None = None,
                      tol: float = 1e-9) -> Defects:
    """ε, η_mix ([ESPR] eq. 25-26) and the active dimension of generators [H, dc, Dh, Dh].

    Use `generator_defects(encoding.generators())` for a PositionEncoding.
    """
    if generators.dim() != 4 or generators.shape[-1] != generators.shape[-2]:
        raise ValueError(f'generators must have shape [H, dc, Dh, Dh], got {tuple(generators.shape)}')
    pa = active_projector(generators, tol)
    act = int(torch.diagonal(pa, dim1=-2, dim2=-1).sum(-1).round().max().item())
    return Defects(float(commutator_defect(generators).max()),
                   float(mixing_defect(generators, post_rotation, tol).max()), act)

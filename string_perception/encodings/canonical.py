"""Compile any commuting generator set to RoPE-Mixed in a fixed basis ([ESPR] Lemma 1-2; [STRING] Thm 3.4).

    U ᵀ L_k U = (⊕_u λ_{k,u} J) ⊕ 0   =>   expm(Σ_k r_k L_k) = basisᵀ · Rot(Λ r) · basis,  basis = Uᵀ (rows)

Every variant's canonical() has a closed form (rope: I; cayley: P; circulant: real DFT; dense: Q); this module
gives the generic route (used as a cross-check and for learned, unstructured generators) and the helper that
materialises R(r) for tests and export checks.
"""
from __future__ import annotations

from typing import Callable

import torch

from .base import CanonicalForm

__all__ = ['joint_block_diagonalize', 'canonical_from_generators', 'materialize_rotations']


def joint_block_diagonalize(generators: torch.Tensor, *, tol: float = 1e-9,
                            generator: torch.Generator | None = None) -> CanonicalForm:
    """Canonical form of one commuting skew family L [dc, Dh, Dh] (float64), [ESPR] Lemma 1.

    Eigen-decompose the Hermitian matrix i·A, A = Σ_k α_k L_k with random α (a generic combination separates
    every joint eigenspace). For each eigenvalue μ > tol·max|μ| and eigenvector v (A v = −iμ v, its conjugate
    pairs with −μ): the plane (a, b) = √2 (Im v, Re v) is invariant under every L_k with L_k a = λ_k b,
    L_k b = −λ_k a, read off as λ_{k} = bᵀ L_k a (eq. 7-8). The eigenvalue-zero space is the common kernel
    (the null subspace, frequency 0); its real orthonormal basis is the complement of the active planes.
    Returns basis [Dh, Dh] (rows; pair u = rows u, u + Dh/2, active pairs first) and freqs [Dh/2, dc].
    """
    dc, dh, _ = generators.shape
    half = dh // 2
    lk = generators.to(torch.float64)
    alpha = torch.randn(dc, dtype=torch.float64, generator=generator).to(lk.device)
    a = torch.einsum('k,kij->ij', alpha, lk)  # [Dh, Dh] skew
    mu, v = torch.linalg.eigh(1j * a.to(torch.complex128))  # ascending real μ, v [Dh, Dh] complex
    scale = mu.abs().max().clamp_min(1e-300)
    active = mu > tol * scale  # one per conjugate pair
    va = v[:, active]  # [Dh, m]
    first = (2 ** 0.5) * va.imag.T  # [m, Dh]  a_u
    second = (2 ** 0.5) * va.real.T  # [m, Dh] b_u
    m = first.shape[0]
    act = torch.cat([first, second])  # [2m, Dh]
    q, _ = torch.linalg.qr(act.T, mode='complete')  # [Dh, Dh]; columns 2m.. span the complement
    null = q[:, 2 * m:].T  # [Dh − 2m, Dh]
    n_null_pairs = half - m
    basis = torch.cat([first, null[:n_null_pairs], second, null[n_null_pairs:]])  # half-split rows
    freqs = torch.zeros(half, dc, dtype=torch.float64, device=lk.device)
    freqs[:m] = torch.einsum('ui,kij,uj->uk', second, lk, first)  # λ_{k,u} = b_uᵀ L_k a_u
    return CanonicalForm(basis, freqs)


def canonical_from_generators(generators: torch.Tensor, *, tol: float = 1e-9,
                              generator: torch.Generator | None = None) -> CanonicalForm:
    """Per-head joint block-diagonalisation: generators [H, dc, Dh, Dh] -> CanonicalForm([H,Dh,Dh], [H,Dh/2,dc])."""
    if generators.dim() != 4 or generators.shape[-1] != generators.shape[-2] or generators.shape[-1] % 2:
        raise ValueError(f'generators must have shape [H, dc, Dh, Dh] with even Dh, got {tuple(generators.shape)}')
    forms = [joint_block_diagonalize(g, tol=tol, generator=generator) for g in generators]
    return CanonicalForm(torch.stack([f.basis for f in forms]), torch.stack([f.freqs for f in forms]))


def materialize_rotations(encode: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], coords: torch.Tensor,
                          num_heads: int, head_dim: int) -> torch.Tensor:
    """R[H, N, Dh, Dh] for coords [N, dc] by applying `encode(x, coords)` (e.g. a PositionEncoding) to I.

    Column c of R(r_n) is encode(e_c) at token n: batch the Dh unit vectors as the batch dimension.
    """
    n = coords.shape[0]
    eye = torch.eye(head_dim, dtype=coords.dtype, device=coords.device)  # [Dh, Dh]
    x = eye[:, None, None, :].expand(head_dim, num_heads, n, head_dim)  # x[c, h, n, :] = e_c
    out = encode(x, coords.unsqueeze(0).expand(head_dim, n, coords.shape[1]))  # [Dh(c), H, N, Dh(row)]
    return out.permute(1, 2, 3, 0)  # R[h, n, row, c]

"""Identity, axial RoPE and RoPE-Mixed ([STRING] §2 eq. 3-5; RoPE = STRING with the block generators of Thm 3.3).

Pairs use the half-split convention of `base.py`: pair u is the plane (u, u + Dh/2).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .base import CanonicalForm, PositionEncoding, apply_rope_mixed, rot_generator

__all__ = ['axial_rope_freqs', 'mixed_rope_freqs', 'rope_generators', 'IdentityEncoding', 'RoPEEncoding',
           'RoPEMixedEncoding']


def axial_rope_freqs(head_dim: int, coord_dim: int, base: float = 10_000.0) -> torch.Tensor:
    """Axial RoPE frequencies [Dh/2, dc]: pair u rotates with axis k = u mod dc only.

    Axis k gets pairs u = k, k + dc, ...; its j-th pair (j = u // dc) has frequency base^(-j/n),
    n = ceil((Dh/2)/dc), the 1D RoPE spectrum θ_n = base^(-2(n-1)/d) ([STRING] §2) per axis.
    """
    half = head_dim // 2
    n = math.ceil(half / coord_dim)
    u = torch.arange(half)
    freqs = torch.zeros(half, coord_dim, dtype=torch.float64)  # [Dh/2, dc]
    freqs[u, u % coord_dim] = base ** (-(u // coord_dim).double() / n)
    return freqs


def mixed_rope_freqs(head_dim: int, coord_dim: int, num_heads: int, base: float = 100.0,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """RoPE-Mixed init [H, Dh/2, dc]: magnitudes base^(-j/n) along random directions ([STRING] App. E,
    max wavelength `base`=100; Heo et al. 2024 use 10 for their mixed variant).

    Per head draw a random orthonormal frame Q ∈ O(dc); pair u gets direction Q[:, u mod dc] and magnitude
    base^(-(u // dc)/n). For dc = 2 this is Heo et al.'s init (angles φ and φ + π/2 per magnitude).
    """
    half = head_dim // 2
    n = math.ceil(half / coord_dim)
    u = torch.arange(half)
    mag = base ** (-(u // coord_dim).double() / n)  # [Dh/2]
    g = torch.randn(num_heads, coord_dim, coord_dim, dtype=torch.float64, generator=generator)
    q, r = torch.linalg.qr(g)  # [H, dc, dc]
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar-distributed frame
    directions = q[:, :, u % coord_dim].transpose(1, 2)  # [H, Dh/2, dc]
    return mag[None, :, None] * directions


def rope_generators(freqs: torch.Tensor) -> torch.Tensor:
    """Block generators of [STRING] Thm 3.3: L[h, k] = Σ_u freqs[h, u, k] J_u.

    freqs [H, Dh/2, dc] -> [H, dc, Dh, Dh]."""
    j = rot_generator(2 * freqs.shape[1], dtype=freqs.dtype).to(freqs.device)  # [Dh/2, Dh, Dh]
    return torch.einsum('huk,uab->hkab', freqs, j)


class IdentityEncoding(PositionEncoding):
    """'none': R(r) = I (no position information in attention)."""

    name = 'none'

    def _encode(self, x, coords):
        return x

    def generators(self) -> torch.Tensor:
        return torch.zeros(self.num_heads, self.coord_dim, self.head_dim, self.head_dim, dtype=torch.float64)

    def canonical(self) -> CanonicalForm:
        eye = torch.eye(self.head_dim, dtype=torch.float64).expand(self.num_heads, -1, -1).clone()
        return CanonicalForm(eye, torch.zeros(self.num_heads, self.head_dim // 2, self.coord_dim,
                                              dtype=torch.float64))


class _FreqEncoding(PositionEncoding):
    """R(r) = Rot(freqs · r); subclasses hold `freqs` [1 or H, Dh/2, dc] as a buffer or a parameter."""

    freqs: torch.Tensor

    def _encode(self, x, coords):
        return apply_rope_mixed(x, coords, self.freqs.to(x.dtype))

    def generators(self) -> torch.Tensor:
        return rope_generators(self._expand_heads(self.freqs.detach().double()))

    def canonical(self) -> CanonicalForm:
        eye = torch.eye(self.head_dim, dtype=torch.float64, device=self.freqs.device)
        return CanonicalForm(eye.expand(self.num_heads, -1, -1).clone(),
                             self._expand_heads(self.freqs.detach().double()).clone())


class RoPEEncoding(_FreqEncoding):
    """'rope': axial RoPE with fixed frequencies (base 10 000), pairs split among the coordinate axes."""

    name = 'rope'

    def __init__(self, *, base: float = 10_000.0, **kw):
        super().__init__(**kw)
        self.base = float(base)
        # fixed, identical for every head: [1, Dh/2, dc]
        self.register_buffer('freqs', axial_rope_freqs(self.head_dim, self.coord_dim, self.base)[None].float())


class RoPEMixedEncoding(_FreqEncoding):
    """'rope_mixed': learnable frequencies λ [H (or 1), Dh/2, dc], R(r) = Rot(λ r) (Heo et al. 2024)."""

    name = 'rope_mixed'

    def __init__(self, *, base: float = 100.0, generator: torch.Generator | None = None, **kw):
        super().__init__(**kw)
        self.base = float(base)
        init = mixed_rope_freqs(self.head_dim, self.coord_dim, self.param_heads, self.base, generator)
        self.freqs = nn.Parameter(init.float())  # [H or 1, Dh/2, dc]

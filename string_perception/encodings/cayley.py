"""Cayley-STRING ([STRING] §3.2 eq. 8; [ESPR] Lemma 3): a learnable orthogonal basis change, then RoPE-Mixed.

    P = (I − S)(I + S)⁻¹ = (I + S)⁻¹(I − S),   S = −Sᵀ learnable (dense or banded), S = 0 at init (P = I).
    R(r) = Pᵀ · Rot(λ r) · P                  (STRING with generators L_k = Pᵀ (Σ_u λ_{k,u} J_u) P)

P is applied FIRST, then the rotation. The paper writes R(r) = RoPE(r)·P; our extra left factor Pᵀ cancels in
qᵀk (Pᵀ... P Pᵀ ...P), so logits are identical, but with it R is a true STRING: R(0) = I and
R(r)ᵀR(s) = R(s − r) hold for R itself, and canonical() is exactly (basis = P, freqs = λ).
(Applying P *after* RoPE instead, R = P·RoPE(r), makes P cancel in qᵀk: it learns nothing.)
P is obtained with torch.linalg.solve (never an explicit inverse), once per forward (O(Dh³) per head, not per
token), then applied to tokens with a matmul.
"""
from __future__ import annotations

import torch
from torch import nn

from .base import CanonicalForm, PositionEncoding, apply_rope_mixed
from .dense import basis_generators
from .rope import mixed_rope_freqs

__all__ = ['cayley_transform', 'CayleyStringEncoding']


def cayley_transform(s: torch.Tensor) -> torch.Tensor:
    """P[..., d, d] = (I + S)⁻¹(I − S) = (I − S)(I + S)⁻¹ for skew S, via a linear solve (I ± S commute)."""
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    return torch.linalg.solve(eye + s, eye - s)


class CayleyStringEncoding(PositionEncoding):
    """'cayley': R(r) = Pᵀ Rot(λ r) P, P = Cayley(S).

    kwargs: band (None = dense S; int b = only |i − j| <= b non-zero, a sparse S), base (RoPE-Mixed init of λ,
    default 100), generator (torch.Generator for the init).
    """

    name = 'cayley'

    def __init__(self, *, band: int | None = None, base: float = 100.0, generator: torch.Generator | None = None,
                 **kw):
        super().__init__(**kw)
        hp, dh = self.param_heads, self.head_dim
        if band is not None and (not isinstance(band, int) or band < 1):
            raise ValueError(f'band must be None (dense S) or a positive integer, got {band!r}')
        self.band = band
        i = torch.arange(dh)
        off = i[None, :] - i[:, None]  # j − i
        mask = (off > 0) & ((off <= band) if band is not None else True)  # strict upper triangle (within band)
        self.register_buffer('mask', mask.float(), persistent=False)  # [Dh, Dh]
        self.weight = nn.Parameter(torch.zeros(hp, dh, dh))  # [Hp, Dh, Dh]; S = U − Uᵀ, U = mask ⊙ weight
        self.freqs = nn.Parameter(mixed_rope_freqs(dh, self.coord_dim, hp, base, generator).float())  # [Hp,Dh/2,dc]

    def skew(self) -> torch.Tensor:
        """S [Hp, Dh, Dh], skew-symmetric (and banded when band is set)."""
        u = self.weight * self.mask
        return u - u.transpose(-1, -2)

    def rotation(self) -> torch.Tensor:
        """P [Hp, Dh, Dh] = Cayley(S) ∈ SO(Dh)."""
        return cayley_transform(self.skew())

    def _encode(self, x, coords):
        p = cayley_transform(self.skew().to(x.dtype))  # [Hp, Dh, Dh]
        y = x @ p.transpose(-1, -2).unsqueeze(0)  # P x for every token: [B,H,N,Dh]
        y = apply_rope_mixed(y, coords, self.freqs.to(x.dtype))
        return y @ p.unsqueeze(0)  # Pᵀ y

    def canonical(self) -> CanonicalForm:
        with torch.no_grad():
            p = cayley_transform(self.skew().double())
            return CanonicalForm(self._expand_heads(p).clone(), self._expand_heads(self.freqs.double()).clone())

    def generators(self) -> torch.Tensor:
        c = self.canonical()
        return basis_generators(c.basis, c.freqs)

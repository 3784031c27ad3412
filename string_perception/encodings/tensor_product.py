"""⊗-STRING ([STRING] §3.3, Extension 1): z -> vec(f(r) ⊗ z) with learnable Fourier features.

    f(r) = m^-1/2 [cos(ω_1ᵀr) … cos(ω_mᵀr), sin(ω_1ᵀr) … sin(ω_mᵀr)]  ∈ R^2m,   ω [H (or 1), m, dc] learnable
    vec(f ⊗ z)[Dh·a + b] = f_a z_b            ->  x[B,H,N,Dh] becomes [B,H,N,2m·Dh]
    vec(f(r_i) ⊗ q)ᵀ vec(f(r_j) ⊗ k) = qᵀk · (1/m) Σ_k cos(ω_kᵀ(r_i − r_j))     (eq. 13-14)

Unlike the other encodings this is not a rotation of the head: queries and keys grow by a factor 2m (values do
not), so attention must keep the scale 1/√Dh of the un-expanded head (`model.vit.Attention` does) and the cost of
qᵀk grows by 2m. With f ordered cos-block then sin-block, vec(f ⊗ z) is *exactly* the half-split RoPE-Mixed
rotation of a lifted vector: pair u = k·Dh + b of the 2m·Dh head holds (z_b cos θ_k, z_b sin θ_k)/√m =
Rot(θ_k)(z_b/√m, 0). So `canonical()` returns a lift B [H, 2m·Dh, Dh] (B z = m^-1/2 [z, …, z, 0, …, 0]) and
frequencies [H, m·Dh, dc] (pair k·Dh + b turns with ω_k): folded into W_q / W_k, the exported graph is the same
RoPE-Mixed graph as every other variant, on a wider q/k head.
"""
from __future__ import annotations

import torch
from torch import nn

from .base import CanonicalForm, PositionEncoding
from .rope import mixed_rope_freqs

__all__ = ['TensorProductEncoding', 'fourier_features']


def fourier_features(coords: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """f(r)[B,H,N,2m] = m^-1/2 [cos(ωr), sin(ωr)] for coords [B,N,dc] and omega [H (or 1), m, dc]."""
    theta = coords.unsqueeze(1) @ omega.transpose(-1, -2)  # [B,1,N,dc] @ [H,dc,m] -> [B,H,N,m]
    return torch.cat([theta.cos(), theta.sin()], dim=-1) * omega.shape[-2] ** -0.5


class TensorProductEncoding(PositionEncoding):
    """'tensor_product': forward(x[B,H,N,Dh], coords[B,N,dc]) -> vec(f(r) ⊗ x) [B,H,N,2m·Dh].

    kwargs: num_features m (default 4; the q/k head grows to 2m·Dh), base (ω init: magnitudes base^(-j/n) along
    random directions, as RoPE-Mixed; default 100), generator (torch.Generator for the init).
    """

    name = 'tensor_product'

    def __init__(self, *, num_features: int = 4, base: float = 100.0, generator: torch.Generator | None = None,
                 **kw):
        super().__init__(**kw)
        if not isinstance(num_features, int) or isinstance(num_features, bool) or num_features <= 0:
            raise ValueError(f'num_features must be a positive integer, got {num_features!r}')
        self.num_features = num_features
        self.base = float(base)
        init = mixed_rope_freqs(2 * num_features, self.coord_dim, self.param_heads, self.base, generator)
        self.omega = nn.Parameter(init.float())  # [H or 1, m, dc]

    @property
    def output_dim(self) -> int:
        """Per-head size of the encoded queries / keys: 2m·Dh."""
        return 2 * self.num_features * self.head_dim

    def _encode(self, x, coords):
        f = fourier_features(coords, self.omega.to(x.dtype))  # [B,H,N,2m]
        return (f.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)  # [B,H,N,2m,Dh] -> [B,H,N,2m·Dh]

    def generators(self) -> torch.Tensor:
        raise NotImplementedError('tensor_product (⊗-STRING) is not a rotation of the Dh-dim head, so it has no '
                                  'generators L_k; canonical() gives its RoPE-Mixed form on the 2m·Dh lift')

    def canonical(self) -> CanonicalForm:
        """basis: the lift [H, 2m·Dh, Dh] (not square, not orthogonal: BᵀB = I·(1/m)·m = I, BBᵀ ≠ I);
        freqs [H, m·Dh, dc]. Logits: (B q_i)ᵀ Rot(Λ r_i)ᵀ Rot(Λ r_j) (B k_j) == encoded q_iᵀ k_j."""
        m, dh = self.num_features, self.head_dim
        with torch.no_grad():
            omega = self._expand_heads(self.omega.detach().double())  # [H, m, dc]
            eye = torch.eye(dh, dtype=torch.float64, device=omega.device) * m ** -0.5
            lift = torch.cat([eye.repeat(m, 1), torch.zeros(m * dh, dh, dtype=torch.float64,
                                                             device=omega.device)])  # [2m·Dh, Dh]
            freqs = omega.repeat_interleave(dh, dim=1)  # [H, m·Dh, dc]: pair k·Dh + b -> ω_k
            return CanonicalForm(lift.expand(self.num_heads, -1, -1).clone(), freqs.clone())

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, num_features={self.num_features}'

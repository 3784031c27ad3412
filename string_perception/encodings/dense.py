"""General STRING by matrix exponential ([STRING] eq. 6, Thm 3.2): R(r) = expm(Σ_k r_k L_k). The test oracle.

The learnable variant keeps the generators commuting by construction ([ESPR] Lemma 1, read backwards):
L_k = Qᵀ (Σ_u λ_{k,u} J_u) Q with Q = expm(W − Wᵀ) ∈ SO(Dh) and J_u the half-split pair generators.
O(N·Dh³) per head, computed in float64: use it to check the fast variants, not in a model.
"""
from __future__ import annotations

import torch
from torch import nn

from .base import CanonicalForm, PositionEncoding, check_inputs, compute_dtype, rot_generator
from .rope import mixed_rope_freqs

__all__ = ['apply_string_expm', 'basis_generators', 'DenseStringEncoding']


def apply_string_expm(x: torch.Tensor, coords: torch.Tensor, generators: torch.Tensor) -> torch.Tensor:
    """x'[B,H,N,Dh] = expm(Σ_k r_k L_k) x with generators L [H (or 1), dc, Dh, Dh] (any, commuting or not)."""
    check_inputs(x, coords, num_heads=None, head_dim=generators.shape[-1], coord_dim=generators.shape[1])
    dt = compute_dtype(x, coords, generators)
    a = torch.einsum('bnk,hkij->bhnij', coords.to(dt), generators.to(dt))  # A(r): [B,H,N,Dh,Dh]
    r = torch.linalg.matrix_exp(a.contiguous())  # [B,H,N,Dh,Dh]
    return (r @ x.to(dt).unsqueeze(-1)).squeeze(-1).to(x.dtype)  # [B,H,N,Dh]


def basis_generators(basis: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """L[h, k] = basis[h]ᵀ (Σ_u freqs[h,u,k] J_u) basis[h]; basis [H,Dh,Dh], freqs [H,Dh/2,dc] -> [H,dc,Dh,Dh]."""
    j = rot_generator(basis.shape[-1], dtype=basis.dtype).to(basis.device)  # [Dh/2, Dh, Dh]
    blocks = torch.einsum('huk,uab->hkab', freqs.to(basis.dtype), j)  # [H, dc, Dh, Dh]
    return basis.transpose(-1, -2).unsqueeze(1) @ blocks @ basis.unsqueeze(1)


class DenseStringEncoding(PositionEncoding):
    """'dense': R(r) = expm(Σ_k r_k L_k), L_k = Qᵀ blockdiag(λ_{k,u} J) Q, Q and λ learnable.

    kwargs: base (mixed-frequency init, default 100), init_std (std of W, Q = expm(W − Wᵀ); default 0.3),
    generator (torch.Generator for the init).
    """

    name = 'dense'

    def __init__(self, *, base: float = 100.0, init_std: float = 0.3, generator: torch.Generator | None = None,
                 **kw):
        super().__init__(**kw)
        hp, dh = self.param_heads, self.head_dim
        self.freqs = nn.Parameter(mixed_rope_freqs(dh, self.coord_dim, hp, base, generator).float())  # [Hp,Dh/2,dc]
        w = torch.randn(hp, dh, dh, generator=generator, dtype=torch.float64) * init_std
        self.weight = nn.Parameter(w.float())  # [Hp, Dh, Dh]; only its skew part is used

    def basis(self) -> torch.Tensor:
        """Q [Hp, Dh, Dh] = expm(W − Wᵀ) ∈ SO(Dh), in the parameters' dtype."""
        return torch.linalg.matrix_exp(self.weight - self.weight.transpose(-1, -2))

    def _generators(self, dtype) -> torch.Tensor:
        q = torch.linalg.matrix_exp((self.weight - self.weight.transpose(-1, -2)).to(dtype))
        return basis_generators(q, self.freqs.to(dtype))  # [Hp, dc, Dh, Dh]

    def _encode(self, x, coords):
        # float64 always: float32 matrix_exp of a large A(r) loses ~1e-6·‖A‖, too much for an oracle
        return apply_string_expm(x.double(), coords.double(), self._generators(torch.float64)).to(x.dtype)

    def generators(self) -> torch.Tensor:
        with torch.no_grad():
            return self._expand_heads(self._generators(torch.float64))

    def canonical(self) -> CanonicalForm:
        with torch.no_grad():
            w = self.weight.double()
            q = torch.linalg.matrix_exp(w - w.transpose(-1, -2))
            return CanonicalForm(self._expand_heads(q).clone(), self._expand_heads(self.freqs.double()).clone())

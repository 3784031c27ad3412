"""Circulant-STRING ([STRING] §3.2 eq. 9): L_k = blockdiag_β(C_{k,β} − C_{k,β}ᵀ), C circulant, applied by FFT.

Conventions (checked against the dense expm in test_encodings_variants.py). A circulant C with first row c has
C[i, j] = c[(j − i) mod b]. A = C − Cᵀ is circulant with first row a[m] = c[m] − c[(−m) mod b] (c minus c
"reversed" about index 0), an antisymmetric sequence. Its eigenvectors are v_f[j] = e^{2πi jf/b} with
eigenvalues μ_f = Σ_m a[m] e^{2πi mf/b} = i·ω_f,  ω_f = Σ_m a[m] sin(2π mf/b) = −Im(FFT(a)[f])
(torch.fft sign convention e^{−2πi}). With X = FFT(x), FFT(A x) = μ ⊙ X, hence

    R(r) x = IFFT( exp(i Σ_k r_k ω_{k}) ⊙ FFT(x) )        per block, O(b log b)

done with rfft/irfft since ω_{b−f} = −ω_f. ω_0 = ω_{b/2} = 0: the constant and alternating vectors are the two
null dims of each block. In the real DFT basis the plane (sin_f, cos_f) rotates by ω_f·r (canonical()).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .base import CanonicalForm, PositionEncoding
from .rope import mixed_rope_freqs

__all__ = ['circulant_freqs', 'circulant_generators', 'apply_circulant_fft', 'circulant_canonical',
           'default_block_size', 'CirculantStringEncoding']


def default_block_size(head_dim: int) -> int:
    """16 when it divides head_dim (paper: 16 or 32 work best), else the whole head."""
    return 16 if head_dim % 16 == 0 else head_dim


def circulant_freqs(c: torch.Tensor) -> torch.Tensor:
    """ω[..., b//2 + 1] = −Im(rfft(c − c[(−m) mod b])) for first rows c[..., b]."""
    a = c - torch.roll(torch.flip(c, dims=[-1]), 1, dims=-1)  # a[m] = c[m] − c[−m mod b]
    return -torch.fft.rfft(a, dim=-1).imag


def circulant_generators(c: torch.Tensor, num_heads: int | None = None) -> torch.Tensor:
    """Dense generators [H, dc, Dh, Dh] from first rows c [H, dc, nb, b]: blockdiag over nb of C − Cᵀ."""
    h, dc, nb, b = c.shape
    ar = torch.arange(b, device=c.device)
    idx = (ar[None, :] - ar[:, None]) % b  # (j − i) mod b: [b, b]
    circ = c[..., idx]  # C[..., i, j] = c[(j − i) mod b]: [H, dc, nb, b, b]
    skew = circ - circ.transpose(-1, -2)
    out = c.new_zeros(h, dc, nb * b, nb * b)
    for beta in range(nb):
        out[:, :, beta * b:(beta + 1) * b, beta * b:(beta + 1) * b] = skew[:, :, beta]
    return out if num_heads is None else out.expand(num_heads, *out.shape[1:])


def apply_circulant_fft(x: torch.Tensor, coords: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """x'[B,H,N,Dh] = expm(Σ_k r_k L_k) x by FFT; c [H (or 1), dc, nb, b] first rows, nb·b = Dh; real dtypes."""
    hp, dc, nb, b = c.shape
    omega = circulant_freqs(c).to(x.dtype)  # [Hp, dc, nb, b//2+1]
    theta = coords.unsqueeze(1) @ omega.reshape(hp, dc, -1)  # [B,1,N,dc] @ [Hp,dc,nb*(b//2+1)] -> [B,H,N,nb*(b//2+1)]
    theta = theta.reshape(*theta.shape[:-1], nb, b // 2 + 1)  # [B,H,N,nb,b//2+1]
    xf = torch.fft.rfft(x.reshape(*x.shape[:-1], nb, b), dim=-1)  # [B,H,N,nb,b//2+1] complex
    xf = xf * torch.polar(torch.ones_like(theta), theta)
    return torch.fft.irfft(xf, n=b, dim=-1).reshape(x.shape)


def circulant_canonical(c: torch.Tensor) -> CanonicalForm:
    """Real DFT basis per block and Λ = ω: R(r) = basisᵀ Rot(Λr) basis (half-split pairs).

    c [H, dc, nb, b] (b even). Block β gives pairs u = β·b/2 + (f − 1), f = 1..b/2−1, with rows
    (first, second) = (√(2/b) sin(2πjf/b), √(2/b) cos(2πjf/b)) and frequency ω_f; its last pair
    u = β·b/2 + b/2 − 1 holds the null dims (1/√b, (−1)^j/√b) with frequency 0.
    """
    h, dc, nb, b = c.shape
    dh, half = nb * b, nb * b // 2
    dt, dev = torch.float64, c.device
    omega = circulant_freqs(c.to(dt))  # [H, dc, nb, b//2+1]
    j = torch.arange(b, dtype=dt, device=dev)
    f = torch.arange(1, b // 2, dtype=dt, device=dev)
    ang = 2 * math.pi * f[:, None] * j[None, :] / b  # [b/2−1, b]
    const = torch.full((1, b), 1 / math.sqrt(b), dtype=dt, device=dev)
    first = torch.cat([math.sqrt(2 / b) * torch.sin(ang), const])  # [b/2, b]
    second = torch.cat([math.sqrt(2 / b) * torch.cos(ang), ((-1.0) ** j)[None] / math.sqrt(b)])  # [b/2, b]
    basis = torch.zeros(dh, dh, dtype=dt, device=dev)
    freqs = torch.zeros(h, half, dc, dtype=dt, device=dev)
    for beta in range(nb):
        rows = slice(beta * b // 2, (beta + 1) * b // 2)
        cols = slice(beta * b, (beta + 1) * b)
        basis[rows, cols] = first
        basis[half + beta * b // 2: half + (beta + 1) * b // 2, cols] = second
        freqs[:, beta * b // 2: beta * b // 2 + b // 2 - 1, :] = omega[:, :, beta, 1:b // 2].transpose(1, 2)
    return CanonicalForm(basis.expand(h, dh, dh).clone(), freqs)


class CirculantStringEncoding(PositionEncoding):
    """'circulant': block-circulant STRING, FFT-applied. Parameters c [H (or 1), dc, Dh/b, b].

    kwargs: block_size (even, divides head_dim; default 16 when it divides head_dim, else head_dim),
    init ('mixed': the block spectra are a RoPE-Mixed init with max wavelength `base`, default; 'normal':
    c ~ N(0, init_std²)), base (default 100), init_std (default 0.1), generator (torch.Generator).
    """

    name = 'circulant'

    def __init__(self, *, block_size: int | None = None, init: str = 'mixed', base: float = 100.0,
                 init_std: float = 0.1, generator: torch.Generator | None = None, **kw):
        super().__init__(**kw)
        b = default_block_size(self.head_dim) if block_size is None else block_size
        if not isinstance(b, int) or b < 2 or b % 2 or self.head_dim % b:
            raise ValueError(f'block_size must be an even integer >= 2 dividing head_dim={self.head_dim}, got {b!r}')
        self.block_size = b
        nb, hp, dc = self.head_dim // b, self.param_heads, self.coord_dim
        if init == 'normal':
            c = torch.randn(hp, dc, nb, b, generator=generator, dtype=torch.float64) * init_std
        elif init == 'mixed':
            c = self._mixed_init(hp, dc, nb, b, base, generator)
        else:
            raise ValueError(f"init must be 'mixed' or 'normal', got {init!r}")
        self.weight = nn.Parameter(c.float())  # [Hp, dc, nb, b] first rows of C_k per block

    @staticmethod
    def _mixed_init(hp, dc, nb, b, base, generator) -> torch.Tensor:
        """First rows whose spectra ω equal a RoPE-Mixed init over the nb·(b/2 − 1) active planes.

        For antisymmetric a, a[m] = (2/b) Σ_{f=1}^{b/2−1} ω_f sin(2π mf/b) inverts ω_f = Σ_m a[m] sin(2π mf/b);
        c = a/2 then gives c − c[−m] = a.
        """
        if b == 2:  # a 2-block is null: C − Cᵀ = 0
            return torch.zeros(hp, dc, nb, b, dtype=torch.float64)
        act = nb * (b // 2 - 1)
        w = mixed_rope_freqs(2 * act, dc, hp, base, generator)  # [Hp, act, dc]
        w = w.reshape(hp, nb, b // 2 - 1, dc).permute(0, 3, 1, 2)  # [Hp, dc, nb, b/2−1]
        f = torch.arange(1, b // 2, dtype=torch.float64)
        m = torch.arange(b, dtype=torch.float64)
        sin = torch.sin(2 * math.pi * f[:, None] * m[None, :] / b)  # [b/2−1, b]
        return (2 / b) * (w @ sin) / 2

    def _encode(self, x, coords):
        return apply_circulant_fft(x, coords, self.weight.to(x.dtype))

    def generators(self) -> torch.Tensor:
        return circulant_generators(self.weight.detach().double(), self.num_heads)

    def canonical(self) -> CanonicalForm:
        with torch.no_grad():
            cf = circulant_canonical(self.weight.double())
        return CanonicalForm(cf.basis.expand(self.num_heads, -1, -1).clone(), self._expand_heads(cf.freqs).clone())

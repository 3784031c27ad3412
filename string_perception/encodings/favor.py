"""Positive orthogonal random features (FAVOR+, Choromanski et al. 2021; [ESPR] §3) so STRING works with
linear attention: encode q and k with R(r) first, then map them with φ; relative positions survive because
E[φ(R(rᵢ)q)ᵀ φ(R(rⱼ)k)] = exp(qᵀ R(rⱼ − rᵢ) k).

    φ(x) = exp(W x − ‖x‖²/2) / √m,   W [m, d] rows w_i ~ N(0, I_d), orthogonal within blocks of d
    E[φ(x)ᵀ φ(y)] = exp(xᵀ y)  (the softmax kernel SM(x, y))

Seed 001 writes φ(x) = exp(+‖x‖²/2) exp(wᵀx); with that sign E[φ(x)ᵀφ(y)] = exp(xᵀy + ‖x‖² + ‖y‖²), biased.
We use the standard −‖x‖²/2 (test_encodings_favor.py checks both).
"""
from __future__ import annotations

import math

import torch

__all__ = ['orthogonal_gaussian_features', 'positive_random_features', 'favor_attention', 'softmax_attention']


def orthogonal_gaussian_features(num_features: int, dim: int, *, generator: torch.Generator | None = None,
                                 dtype=torch.float32) -> torch.Tensor:
    """W [m, d]: stacked blocks of d mutually orthogonal rows, each row's norm drawn as that of a N(0, I_d) vector,
    so every row is marginally N(0, I_d) (orthogonal random features, lower variance than i.i.d.)."""
    if num_features <= 0 or dim <= 0:
        raise ValueError(f'num_features and dim must be positive, got {num_features}, {dim}')
    blocks = []
    for _ in range(math.ceil(num_features / dim)):
        q, r = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # Haar
        blocks.append(q.T)  # rows orthonormal: [d, d]
    w = torch.cat(blocks)[:num_features]  # [m, d]
    norms = torch.randn(num_features, dim, generator=generator, dtype=torch.float64).norm(dim=1, keepdim=True)
    return (w * norms).to(dtype)


def _log_features(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """log(√m φ(x)) = xWᵀ − ‖x‖²/2: [..., m], in float32 (float64 for float64 x)."""
    dt = torch.float64 if x.dtype == torch.float64 else torch.float32
    x = x.to(dt)
    return x @ w.to(dt).T - 0.5 * (x * x).sum(-1, keepdim=True)


def positive_random_features(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """φ(x)[..., m] = exp(xWᵀ − ‖x‖²/2) / √m for x [..., d], W [m, d]."""
    return torch.exp(_log_features(x, w)) / math.sqrt(w.shape[0])


def favor_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Linear-time estimate of softmax(q kᵀ/√d) v; q, k [B,H,N,d] (already STRING-encoded), v [B,H,N,dv].

    Stabilised: each query's features are divided by their max and all keys' by one per-head max; both
    constants cancel between numerator and denominator."""
    d = q.shape[-1]
    lq = _log_features(q * d ** -0.25, w)  # exp(qᵀk/√d) = SM(q/d^¼, k/d^¼): [B,H,N,m]
    lk = _log_features(k * d ** -0.25, w)
    phi_q = torch.exp(lq - lq.amax(-1, keepdim=True))  # per-query constant
    phi_k = torch.exp(lk - lk.amax(dim=(-2, -1), keepdim=True))  # per-head constant
    kv = phi_k.transpose(-1, -2) @ v.to(phi_k.dtype)  # [B,H,m,dv]
    num = phi_q @ kv  # [B,H,N,dv]
    den = phi_q @ phi_k.sum(-2).unsqueeze(-1)  # [B,H,N,1]
    return (num / den).to(v.dtype)


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Exact reference: softmax(q kᵀ/√d) v."""
    return (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1) @ v

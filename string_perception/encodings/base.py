"""Shared pieces of every STRING position encoding: the Rot operator, argument checks, the base module.

Rot pairing convention (used everywhere in this package, and by the exported ONNX graph): **half-split**.
Pair u (0 <= u < Dh/2) is the plane spanned by coordinates (u, u + Dh/2). With θ_u = Σ_k freqs[u, k]·r_k,

    x'[u]        = cos θ_u · x[u] − sin θ_u · x[u + Dh/2]
    x'[u + Dh/2] = sin θ_u · x[u] + cos θ_u · x[u + Dh/2]

i.e. Rot(θ) = expm(Σ_u θ_u J_u) with J_u = e_{u+Dh/2} e_uᵀ − e_u e_{u+Dh/2}ᵀ ([STRING] eq. 3, RoPE as
2×2 blocks, up to a fixed permutation of coordinates). In ONNX this is two Slice, four Mul, one Add, one Sub
and one Concat: no reshape to pairs, no complex numbers.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    'CanonicalForm', 'PositionEncoding', 'apply_rope_mixed', 'rot_generator', 'compute_dtype',
    'check_head_dim', 'check_inputs', 'autocast_off',
]


@dataclass(frozen=True)
class CanonicalForm:
    """R(r) = basisᵀ · Rot(freqs · r) · basis ([ESPR] Lemma 1; [STRING] Thm 3.4).

    basis: [H, Dh, Dh] orthogonal, rows = the new coordinates; freqs: [H, Dh/2, dc], zero rows on null planes.
    Both always carry the full head dimension H (heads are materialised even when shared_across_heads), are
    float64, detached, and on the encoding's device (CPU for 'none', which has no tensors).
    ⊗-STRING ('tensor_product') is the one exception: basis is a lift [H, 2m·Dh, Dh] (BᵀB = I, not square) and
    freqs [H, m·Dh, dc]; the logits identity (B q)ᵀ Rot(Λ(r_j − r_i)) (B k) still holds, so it folds the same way.
    """

    basis: torch.Tensor
    freqs: torch.Tensor


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32 (rotations are never computed in half precision)."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def check_head_dim(head_dim: int) -> None:
    if not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f'head_dim must be a positive even integer (pairs of dims are rotated), got {head_dim!r}')


def check_inputs(x: torch.Tensor, coords: torch.Tensor, *, num_heads: int | None, head_dim: int | None,
                 coord_dim: int | None) -> None:
    """Validate x[B,H,N,Dh] and coords[B,N,dc] against each other and the module's configuration."""
    if x.dim() != 4:
        raise ValueError(f'x must have shape [B, H, N, Dh] (rank 4), got rank {x.dim()} shape {tuple(x.shape)}')
    if coords.dim() != 3:
        raise ValueError(f'coords must have shape [B, N, dc] (rank 3), got shape {tuple(coords.shape)}')
    b, h, n, dh = x.shape
    if coords.shape[0] not in (b, 1) or coords.shape[1] != n:
        raise ValueError(f'coords shape {tuple(coords.shape)} does not match x shape {tuple(x.shape)}: '
                         f'expected [B={b} (or 1), N={n}, dc]')
    if coord_dim is not None and coords.shape[2] != coord_dim:
        raise ValueError(f'coordinate dim mismatch: encoding built with coord_dim={coord_dim}, '
                         f'coords have dc={coords.shape[2]}')
    if head_dim is not None and dh != head_dim:
        raise ValueError(f'head dim mismatch: encoding built with head_dim={head_dim}, x has Dh={dh}')
    if num_heads is not None and h != num_heads:
        raise ValueError(f'head count mismatch: encoding built with num_heads={num_heads}, x has H={h}')
    if not x.is_floating_point() or not coords.is_floating_point():
        raise ValueError(f'x and coords must be floating point, got {x.dtype} and {coords.dtype}')


def autocast_off(device_type: str):
    """Disable autocast around rotation maths (a bf16 angle matmul would lose ~1e-2 rad at |θ| ~ 4);
    a no-op context when autocast is off, so traced/exported graphs are unchanged."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def _angles(coords: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """θ[B,H,N,Dh/2] = coords[B,N,dc] · freqs[H,Dh/2,dc]ᵀ, as one batched matmul (ONNX MatMul)."""
    return coords.unsqueeze(1) @ freqs.transpose(-1, -2)  # [B,1,N,dc] @ [H,dc,Dh/2] -> [B,H,N,Dh/2]


def rotate_half_split(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rot(θ)·x in the half-split convention; cos/sin: [..., Dh/2] broadcastable to x[..., :Dh/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def apply_rope_mixed(x: torch.Tensor, coords: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """RoPE-Mixed: x'[B,H,N,Dh] = Rot(freqs · r) x  ([STRING] eq. 5 with learnable mixed frequencies).

    x: [B,H,N,Dh]; coords: [B,N,dc]; freqs: [H,Dh/2,dc] or [1,Dh/2,dc] (shared across heads).
    The angles and cos/sin are computed in float32 (float64 if any input is float64), the result is cast
    back to x.dtype. Only MatMul, Cos, Sin, Slice, Mul, Add/Sub and Concat: this is the exported graph's op.
    """
    if not (torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()):  # checked eagerly; no trace warnings
        check_inputs(x, coords, num_heads=None, head_dim=None, coord_dim=freqs.shape[-1])
        if freqs.dim() != 3 or freqs.shape[1] * 2 != x.shape[-1] or freqs.shape[0] not in (1, x.shape[1]):
            raise ValueError(f'freqs must have shape [H or 1, Dh/2, dc] = [{x.shape[1]}, {x.shape[-1] // 2}, '
                             f'{coords.shape[-1]}], got {tuple(freqs.shape)}')
    dt = compute_dtype(x, coords, freqs)
    with autocast_off(x.device.type):
        theta = _angles(coords.to(dt), freqs.to(dt))  # [B,H,N,Dh/2]
        return rotate_half_split(x.to(dt), theta.cos(), theta.sin()).to(x.dtype)


def rot_generator(head_dim: int, dtype=torch.float64) -> torch.Tensor:
    """J[Dh/2, Dh, Dh]: J[u] is the skew generator of pair u, so Rot(θ) = expm(Σ_u θ_u J[u])."""
    half = head_dim // 2
    j = torch.zeros(half, head_dim, head_dim, dtype=dtype)
    u = torch.arange(half)
    j[u, u + half, u] = 1.0
    j[u, u, u + half] = -1.0
    return j


class PositionEncoding(nn.Module):
    """Base class: forward(x[B,H,N,Dh], coords[B,N,dc]) -> R(r) x, and canonical() -> CanonicalForm.

    Subclasses implement `_encode(x, coords)` (inputs already checked, in compute dtype) and `canonical()`.
    Parameters carry a leading head axis of size num_heads, or 1 when shared_across_heads (broadcast).
    """

    name: str = 'base'

    def __init__(self, *, head_dim: int, num_heads: int, coord_dim: int, shared_across_heads: bool = False):
        super().__init__()
        check_head_dim(head_dim)
        if not isinstance(num_heads, int) or num_heads <= 0:
            raise ValueError(f'num_heads must be a positive integer, got {num_heads!r}')
        if not isinstance(coord_dim, int) or coord_dim <= 0:
            raise ValueError(f'coord_dim must be a positive integer, got {coord_dim!r}')
        self.head_dim = head_dim
        self.num_heads = num_heads
        self.coord_dim = coord_dim
        self.shared_across_heads = bool(shared_across_heads)
        self.param_heads = 1 if shared_across_heads else num_heads  # leading dim of every parameter

    def forward(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        check_inputs(x, coords, num_heads=self.num_heads, head_dim=self.head_dim, coord_dim=self.coord_dim)
        dt = compute_dtype(x, coords)
        with autocast_off(x.device.type):
            return self._encode(x.to(dt), coords.to(dt)).to(x.dtype)

    def _encode(self, x: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def canonical(self) -> CanonicalForm:
        raise NotImplementedError

    def _expand_heads(self, t: torch.Tensor) -> torch.Tensor:
        """[1 or H, ...] -> [H, ...] (a broadcast view when shared)."""
        return t.expand(self.num_heads, *t.shape[1:])

    def extra_repr(self) -> str:
        return (f'head_dim={self.head_dim}, num_heads={self.num_heads}, coord_dim={self.coord_dim}, '
                f'shared_across_heads={self.shared_across_heads}')

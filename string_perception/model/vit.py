"""Transformer encoder whose attention takes the position encoding as an argument (timm style).

    attn(x, coords, pe):  q = pe(W_q x, coords), k = pe(W_k x, coords), v = W_v x, sdpa(q, k, v, scale=Dh^-1/2)

q, k and v are separate `nn.Linear` layers (`q_proj`, `k_proj`, `v_proj`; output features ordered head-major,
[H*Dh] = H blocks of Dh) so the exporter can fold a per-head orthogonal basis P into W_q / W_k
(`encodings.fold_basis_into_projection(attn.q_proj.weight, attn.q_proj.bias, basis)`) and swap each
`Block.pe` for a RoPE-Mixed module with canonical frequencies; see `Block.pe` and `Encoder.position_encodings`.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch.nn.functional as F
from torch import Tensor, nn

PositionEncodingFn = Callable[[Tensor, Tensor], Tensor]   # pe(x[B,H,N,Dh], coords[B,N,dc]) -> [B,H,N,Dh]


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'dim={dim} not divisible by num_heads={num_heads}')
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim, bias=qkv_bias)
        self.k_proj = nn.Linear(dim, dim, bias=qkv_bias)
        self.v_proj = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def _heads(self, t: Tensor) -> Tensor:
        B, N, _ = t.shape
        return t.reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)   # [B,H,N,Dh]

    def forward(self, x: Tensor, coords: Optional[Tensor] = None,
                pe: Optional[PositionEncodingFn] = None) -> Tensor:
        """x: [B,N,D]; coords: [B,N,dc]; pe applied to q and k after projection. Returns [B,N,D]."""
        B, N, D = x.shape
        q = self._heads(self.q_proj(x))                                   # [B,H,N,Dh]
        k = self._heads(self.k_proj(x))                                   # [B,H,N,Dh]
        v = self._heads(self.v_proj(x))                                   # [B,H,N,Dh]
        if pe is not None:
            q = pe(q, coords)                                             # [B,H,N,Dh] (or [B,H,N,E], E > Dh)
            k = pe(k, coords)
        # An expanding encoding (⊗-STRING: E = 2m·Dh, logits qᵀk·(1/m)Σcos) keeps the scale of the Dh head;
        # rotations keep SDPA's own default (the same value), so their numbers are bit for bit unchanged.
        scale = None if q.shape[-1] == self.head_dim else 1.0 / math.sqrt(self.head_dim)
        out = F.scaled_dot_product_attention(q, k, v, scale=scale)        # [B,H,N,Dh]
        out = out.transpose(1, 2).reshape(B, N, D)                        # [B,N,D]
        return self.proj(out)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block. `self.pe` is this layer's position encoding (its own parameters); replace it
    (any module / callable with the same signature, or None) to change the encoding without touching weights."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, pe: Optional[nn.Module] = None):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(round(dim * mlp_ratio)))
        self.pe = pe

    def forward(self, x: Tensor, coords: Optional[Tensor] = None) -> Tensor:
        x = x + self.attn(self.norm1(x), coords, self.pe)
        x = x + self.mlp(self.norm2(x))
        return x


class Encoder(nn.Module):
    """Stack of blocks + final LayerNorm. `make_pe(layer_index)` builds each layer's position encoding."""

    def __init__(self, dim: int, depth: int, num_heads: int, mlp_ratio: float = 4.0,
                 make_pe: Optional[Callable[[int], Optional[nn.Module]]] = None):
        super().__init__()
        self.blocks = nn.ModuleList(
            Block(dim, num_heads, mlp_ratio, make_pe(i) if make_pe is not None else None) for i in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    @property
    def position_encodings(self) -> list[Optional[nn.Module]]:
        return [b.pe for b in self.blocks]

    def forward(self, x: Tensor, coords: Optional[Tensor] | list = None) -> Tensor:
        """x: [B,N,D] token embeddings; coords: [B,N,dc], or a list with one entry per block, handed to that block
        (and its attention) as its `coords` (the exporter's precomputed rotation tables). Returns [B,N,D]."""
        per_block = coords if isinstance(coords, list) else [coords] * len(self.blocks)
        for blk, c in zip(self.blocks, per_block, strict=True):
            x = blk(x, c)
        return self.norm(x)


def init_weights(module: nn.Module) -> None:
    """timm ViT init: trunc-normal(0.02) Linear weights, zero biases, LayerNorm (1, 0)."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)

"""A trained ViTD compiled for deployment (DESIGN §2, "the deployment identity").

    deploy = DeployableViTD(model)                       # or DeployableViTD(model, precision='fp16')
    boxes, logits, embedding = deploy(image_uint8[B,H,W,3], depth_m[B,H,W], intrinsics[B,3,3])

Every layer's position encoding (none / rope / rope_mixed / cayley / circulant / dense) is replaced by its canonical
form R(r) = basisᵀ · Rot(freqs · r) · basis: the basis is folded into that layer's query and key projections
(W ← P W, b ← P b per head) and the layer applies `apply_rope_mixed(·, coords, freqs)` only: no FFT, no linear
solve, no matrix exponential, no complex numbers in the graph. Layers whose canonical frequencies are all zero
('none') get no rotation at all. Logits qᵀk are unchanged because Pᵀ cancels (fold.py), v is untouched, so the
outputs equal the original model's up to float rounding.

Attention is written out (MatMul, Softmax, MatMul) instead of `scaled_dot_product_attention` so the softmax can run
in float32 whatever the activation dtype. precision='fp16' runs the encoder's Linear and LayerNorm layers in
float16; everything else stays float32: image normalisation and the patch embedding, depth pooling, hole filling,
back-projection and token coordinates (the tokenizer), the RoPE angles, cos/sin and rotation (`apply_rope_mixed`
computes in float32 and casts back), the attention softmax, and the heads (metric boxes, logits, embedding).
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from string_perception.encodings import apply_rope_mixed, fold_basis_into_projection
from string_perception.model.vit import Attention
from string_perception.model.vitd import ViTD

__all__ = ['DeployableViTD', 'CompiledRoPEMixed', 'Float32SoftmaxAttention', 'compile_position_encodings',
           'PRECISIONS', 'OUTPUT_NAMES']

PRECISIONS = ('fp32', 'fp16')
OUTPUT_NAMES = ('boxes', 'logits', 'embedding')


class CompiledRoPEMixed(nn.Module):
    """The only position-encoding op of the exported graph: x[B,H,N,Dh] -> Rot(freqs · r) x (float32 angles)."""

    def __init__(self, freqs: Tensor):
        super().__init__()
        self.register_buffer('freqs', freqs.detach().float().contiguous())   # [H, Dh/2, dc]

    def forward(self, x: Tensor, coords: Tensor) -> Tensor:
        return apply_rope_mixed(x, coords, self.freqs)


class Float32SoftmaxAttention(Attention):
    """`Attention` with the same weights, attention written out and the softmax always in float32."""

    @classmethod
    def from_attention(cls, attn: Attention) -> 'Float32SoftmaxAttention':
        dim = attn.q_proj.in_features
        new = cls(dim, attn.num_heads, qkv_bias=attn.q_proj.bias is not None)
        new.load_state_dict(attn.state_dict())
        return new.to(attn.q_proj.weight.device)

    def forward(self, x: Tensor, coords: Tensor | None = None, pe=None) -> Tensor:
        B, N, D = x.shape
        q = self._heads(self.q_proj(x))                                   # [B,H,N,Dh]
        k = self._heads(self.k_proj(x))                                   # [B,H,N,Dh]
        v = self._heads(self.v_proj(x))                                   # [B,H,N,Dh]
        if pe is not None:
            q = pe(q, coords)
            k = pe(k, coords)
        q = q * (self.head_dim ** -0.5)                                   # scale first: fp16 scores stay small
        scores = q @ k.transpose(-1, -2)                                  # [B,H,N,N]
        weights = F.softmax(scores.float(), dim=-1).to(v.dtype)           # [B,H,N,N], softmax in float32
        out = (weights @ v).transpose(1, 2).reshape(B, N, D)              # [B,N,D]
        return self.proj(out)


def compile_position_encodings(model: ViTD) -> None:
    """In place: fold each block's canonical basis into q/k and swap its encoding for `CompiledRoPEMixed`
    (or None when all its frequencies are zero), attention for `Float32SoftmaxAttention`."""
    with torch.no_grad():
        for blk in model.encoder.blocks:
            attn = blk.attn
            if blk.pe is not None:
                form = blk.pe.canonical()                                 # basis [H,Dh,Dh], freqs [H,Dh/2,dc]
                for proj in (attn.q_proj, attn.k_proj):
                    w, b = fold_basis_into_projection(proj.weight, proj.bias, form.basis)
                    proj.weight.copy_(w)
                    if b is not None:
                        proj.bias.copy_(b)
                blk.pe = CompiledRoPEMixed(form.freqs) if bool(form.freqs.abs().max() > 0) else None
            blk.attn = Float32SoftmaxAttention.from_attention(attn)


class DeployableViTD(nn.Module):
    """forward(image uint8[B,H,W,3], depth float32[B,H,W] m, intrinsics float32[B,3,3])
    -> (boxes [B,N,12], logits [B,N,C], embedding [B,E]), all float32. See the module docstring."""

    def __init__(self, model: ViTD, precision: str = 'fp32'):
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f'precision must be one of {PRECISIONS}, got {precision!r}')
        self.config = model.config
        self.precision = precision
        self.model = copy.deepcopy(model).float().eval()
        compile_position_encodings(self.model)
        self.encoder_dtype = torch.float16 if precision == 'fp16' else torch.float32
        for m in self.model.encoder.modules():                            # freqs buffers stay float32
            if isinstance(m, (nn.Linear, nn.LayerNorm)):
                m.to(self.encoder_dtype)

    def forward(self, image: Tensor, depth: Tensor, intrinsics: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        t = self.model.tokenize(image, depth, intrinsics)                 # float32: x[B,N,D], coords, prior
        tokens = self.model.encoder(t['x'].to(self.encoder_dtype), t['coords']).float()   # [B,N,D]
        out = self.model.heads(tokens, t['prior'])
        return out['boxes'], out['logits'], out['embedding']

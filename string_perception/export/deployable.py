"""A trained ViTD compiled for deployment (docs/DESIGN.md §2, "the deployment identity").

    deploy = DeployableViTD(model)                       # or DeployableViTD(model, precision='fp16')
    boxes, logits, embedding = deploy(image_uint8[B,H,W,3], depth_m[B,H,W], intrinsics[B,3,3])
    deploy = DeployableViTD(model, tokens=True)          # + tokens [B,N,D], the encoder tokens after fusion

Every layer's position encoding (none / rope / rope_mixed / cayley / circulant / dense) is replaced by its canonical
form R(r) = basisᵀ · Rot(freqs · r) · basis (`PositionEncoding.canonical()`; for ⊗-STRING, 'tensor_product', the
basis is a lift [H, 2m·Dh, Dh], so the folded q/k heads are 2m·Dh wide while v keeps Dh): the basis is folded into
that layer's query and key projections (W ← P W, b ← P b per head, `encodings.fold_basis_into_projection`) and the layer only
applies the RoPE-Mixed rotation Rot(freqs · r) (the half-split convention of `encodings.apply_rope_mixed`): no FFT,
no linear solve, no matrix exponential, no complex numbers in the graph. Layers whose canonical frequencies are all
zero ('none') get no rotation at all. Logits qᵀk are unchanged because Pᵀ cancels (fold.py) and v is untouched,
so the outputs equal the original model's up to float rounding (test_export.py, every variant).

`FoldedAttention` is written for the exported graph: q, k, v come from one fused projection whose rows are ordered
so that the rotation acts on two contiguous slices, the attention scale is folded into W_q, and every reshape uses
static N, H, Dh (only the batch is dynamic), so a compiled layer costs one MatMul, Cos, Sin and a few elementwise
ops more than an unrotated one; `DeployableViTD.encode` computes the angles of all layers with one MatMul, Cos and
Sin and hands each layer its slice (`RotationTables`). The softmax runs in float32 whatever the activation dtype.

precision='fp16' runs the encoder's Linear and LayerNorm layers in float16; everything else stays float32: image
normalisation and the patch embedding, depth pooling, hole filling, back-projection and token coordinates (the
tokenizer), the RoPE angles, cos/sin and rotation, the attention softmax, and the heads (metric boxes, logits,
embedding).
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from string_perception.encodings import fold_basis_into_projection
from string_perception.model.vit import Attention
from string_perception.model.vitd import ViTD
from string_perception.runtime.onnx_runner import OUTPUT_NAMES, TOKENS_OUTPUT   # the contract's output names

__all__ = ['DeployableViTD', 'FoldedAttention', 'RotationTables', 'compile_position_encodings', 'PRECISIONS', 'OUTPUT_NAMES',
           'TOKENS_OUTPUT', 'output_names']

PRECISIONS = ('fp32', 'fp16')


def output_names(tokens: bool) -> tuple[str, ...]:
    """The exported graph's outputs, in order."""
    return OUTPUT_NAMES + ((TOKENS_OUTPUT,) if tokens else ())


class RotationTables(NamedTuple):
    """cos and sin of one layer's RoPE-Mixed angles θ = coords @ freqs, each [B,N,1,H*Dqk/2] float32."""
    cos: Tensor
    sin: Tensor


class FoldedAttention(nn.Module):
    """One compiled attention layer: a single fused projection, RoPE-Mixed on q and k, softmax in float32.

    Built from a trained `Attention` and its layer's canonical form (basis P [H,Dh,Dh], freqs Λ [H,Dh/2,dc]):
    W_q ← s·P W_q, W_k ← P W_k (s = Dh^-1/2, the attention scale), and the output features of `qkv` [3D] are
    ordered [q1 | k1 | q2 | k2 | v], q1 = the first halves (dims u < Dh/2) of every head, q2 the second halves.
    The half-split rotation x1' = x1·cos θ − x2·sin θ, x2' = x1·sin θ + x2·cos θ then acts on two contiguous
    slices viewed as [B,N,2 (q,k),H·Dh/2], with θ = r · F [B,N,1,H·Dh/2] (F [dc, H·Dh/2] = Λ of every head)
    broadcast over q and k: one MatMul, Cos, Sin (once for q and k), four Mul, Add, Sub per layer (the angles,
    cos/sin and rotation in float32 whatever the weights' dtype), and no shape arithmetic (N, H, Dh are static;
    only the batch is dynamic). Within a head the rotated q and k are laid out [x1', x2'], the unrotated ones
    [x1, x2]: the same order for q and k, so qᵀk is unchanged.
    """

    def __init__(self, attn: Attention, basis: Tensor | None, freqs: Tensor | None, num_tokens: int):
        super().__init__()
        H, Dh = attn.num_heads, attn.head_dim
        Dqk = Dh if basis is None else basis.shape[-2]   # q/k head size after folding: Dh, or 2m·Dh (⊗-STRING lift)
        D, Dq, half = H * Dh, H * Dqk, Dqk // 2
        self.num_heads, self.head_dim, self.qk_head_dim, self.num_tokens = H, Dh, Dqk, num_tokens
        self.rotates = freqs is not None and bool(freqs.abs().max() > 0)
        with torch.no_grad():
            wq, bq = _weight_bias(attn.q_proj)
            wk, bk = _weight_bias(attn.k_proj)
            wv, bv = _weight_bias(attn.v_proj)
            if basis is not None:
                wq, bq = fold_basis_into_projection(wq, bq, basis)
                wk, bk = fold_basis_into_projection(wk, bk, basis)
            scale = Dh ** -0.5
            wq, bq = wq * scale, bq * scale
            if self.rotates:
                def halves(t: Tensor) -> tuple[Tensor, Tensor]:   # [D, ...] -> first / second halves per head
                    t = t.reshape(H, 2, half, *t.shape[1:])
                    return t[:, 0].reshape(H * half, *t.shape[3:]), t[:, 1].reshape(H * half, *t.shape[3:])
                (wq1, wq2), (wk1, wk2), (bq1, bq2), (bk1, bk2) = halves(wq), halves(wk), halves(bq), halves(bk)
                weight = torch.cat([wq1, wk1, wq2, wk2, wv])                      # [2Dq + D, D_in]
                bias = torch.cat([bq1, bk1, bq2, bk2, bv])                        # [2Dq + D]
                lam = freqs.to(torch.float64).reshape(H * half, -1).T             # [dc, H*Dh/2]
                self.register_buffer('freqs', lam.float().contiguous())           # [dc, H*Dh/2]
            else:
                weight, bias = torch.cat([wq, wk, wv]), torch.cat([bq, bk, bv])
        self.qkv = nn.Linear(weight.shape[1], 2 * Dq + D).to(weight.device)
        with torch.no_grad():
            self.qkv.weight.copy_(weight)
            self.qkv.bias.copy_(bias)
        self.proj = copy.deepcopy(attn.proj)

    def forward(self, x: Tensor, coords: Tensor | RotationTables | None = None, pe=None) -> Tensor:
        """x: [B,N,D] (float32 or float16); coords: [B,N,dc] float32, or this layer's precomputed
        `RotationTables` (cos, sin of coords @ freqs, `DeployableViTD.encode`). `pe` is ignored (compiled in)."""
        N, H, Dh, Dqk = self.num_tokens, self.num_heads, self.head_dim, self.qk_head_dim
        D, Dq = H * Dh, H * Dqk
        dt = x.dtype
        qkv = self.qkv(x)                                                 # [B,N,2Dq + D]
        if self.rotates:
            if isinstance(coords, RotationTables):
                cos, sin = coords                                         # [B,N,1,H*Dqk/2] float32 each
            else:
                theta = (coords @ self.freqs).unsqueeze(2)                # [B,N,1,H*Dqk/2] float32
                cos, sin = theta.cos(), theta.sin()
            x1 = qkv[..., :Dq].reshape(-1, N, 2, Dq // 2)                 # [B,N,2 (q,k),H*Dqk/2] first halves
            x2 = qkv[..., Dq:2 * Dq].reshape(-1, N, 2, Dq // 2)           # second halves
            if dt != torch.float32:
                x1, x2 = x1.float(), x2.float()
            r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos             # [B,N,2,H*Dh/2] each
            if dt != torch.float32:
                r1, r2 = r1.to(dt), r2.to(dt)
            qk = torch.cat([r1.reshape(-1, N, 2, H, Dqk // 2), r2.reshape(-1, N, 2, H, Dqk // 2)], dim=-1)
        else:
            qk = qkv[..., :2 * Dq].reshape(-1, N, 2, H, Dqk)
        qk = qk.permute(2, 0, 3, 1, 4)                                    # [2,B,H,N,Dqk]
        q, k = qk[0], qk[1]                                               # [B,H,N,Dqk], q pre-scaled
        v = qkv[..., 2 * Dq:].reshape(-1, N, H, Dh).transpose(1, 2)       # [B,H,N,Dh]
        scores = q @ k.transpose(-1, -2)                                  # [B,H,N,N]
        if dt != torch.float32:
            scores = scores.float()
        weights = F.softmax(scores, dim=-1)                               # float32 softmax
        if dt != torch.float32:
            weights = weights.to(dt)
        out = (weights @ v).transpose(1, 2).reshape(-1, N, D)             # [B,N,D]
        return self.proj(out)


def _weight_bias(linear: nn.Linear) -> tuple[Tensor, Tensor]:
    w = linear.weight.detach()
    b = linear.bias.detach() if linear.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype, device=w.device)
    return w, b


def compile_position_encodings(model: ViTD) -> None:
    """In place: replace each block's attention by a `FoldedAttention` built from its canonical form and drop the
    block's position encoding (it lives in the attention's weights and `freqs` now)."""
    for blk in model.encoder.blocks:
        form = blk.pe.canonical() if blk.pe is not None else None
        blk.attn = FoldedAttention(blk.attn, None if form is None else form.basis,
                                   None if form is None else form.freqs, model.config.encoder_tokens)
        blk.pe = None


class DeployableViTD(nn.Module):
    """forward(image uint8[B,H,W,3], depth float32[B,H,W] m, intrinsics float32[B,3,3])
    -> (boxes [B,N,12], logits [B,N,C], embedding [B,E]) (+ tokens [B,N,D] when ``tokens``), all float32.
    ``tokens``: also return the encoder tokens after the normal-map fusion, i.e. ``ViTD.forward``'s 'tokens'
    (what the heads read). See the module docstring."""

    def __init__(self, model: ViTD, precision: str = 'fp32', tokens: bool = False):
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f'precision must be one of {PRECISIONS}, got {precision!r}')
        self.config = model.config
        self.precision = precision
        self.output_names = output_names(tokens)
        self.model = copy.deepcopy(model).float().eval()
        compile_position_encodings(self.model)
        self.encoder_dtype = torch.float16 if precision == 'fp16' else torch.float32
        for m in self.model.encoder.modules():                            # `freqs` buffers stay float32
            if isinstance(m, (nn.Linear, nn.LayerNorm)):
                m.to(self.encoder_dtype)
        # Every rotating layer's frequencies side by side: one MatMul, Cos and Sin for all layers (`encode`).
        rotating = [b.attn.freqs for b in self.model.encoder.blocks if b.attn.rotates]
        self.rotation_widths = [int(f.shape[1]) for f in rotating]        # H*Dqk/2 per rotating layer
        self.register_buffer('all_freqs', torch.cat(rotating, dim=1) if rotating else None)   # [dc, sum widths]

    def encode(self, x: Tensor, coords: Tensor) -> Tensor:
        """The encoder (``Encoder.forward``: blocks, final LayerNorm) on x [B,N,D] in the encoder dtype, with the
        angles of all rotating layers as one MatMul coords[B,N,dc] @ all_freqs, one Cos and one Sin (float32),
        split per layer; the same numbers as each layer's own coords @ freqs. Returns [B,N,D]."""
        tables: list[RotationTables] = []
        if self.all_freqs is not None:
            theta = (coords @ self.all_freqs).unsqueeze(2)                # [B,N,1,sum widths] float32
            tables = [RotationTables(c, s) for c, s in zip(theta.cos().split(self.rotation_widths, dim=-1),
                                                            theta.sin().split(self.rotation_widths, dim=-1))]
        it = iter(tables)
        per_block = [next(it) if blk.attn.rotates else coords for blk in self.model.encoder.blocks]
        return self.model.encoder(x, per_block)                           # node names /encoder/blocks.i/... as before

    def forward(self, image: Tensor, depth: Tensor, intrinsics: Tensor) -> tuple[Tensor, ...]:
        t = self.model.tokenize(image, depth, intrinsics)                 # float32: x[B,N,D], coords, prior
        encoded = self.encode(t['x'].to(self.encoder_dtype), t['coords']).float()  # [B,N or 2N,D]
        tokens = self.model.fuse_tokens(encoded)                          # [B,N,D]
        out = self.model.heads(tokens, t['prior'])
        out[TOKENS_OUTPUT] = tokens
        return tuple(out[name] for name in self.output_names)

"""OWL-ViT-style per-token heads (paper App. F, docs/DESIGN.md §4): 3D box, class, policy embedding."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# 6D rotation (first two columns of R) of the identity: column x = (1,0,0), column y = (0,1,0).
IDENTITY_ROT6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
MIN_SIZE = 1e-4   # metres; floor added after softplus so sizes stay strictly positive in float32


def inverse_softplus(y: float) -> float:
    return y + math.log(-math.expm1(-y))


class BoxHead(nn.Module):
    """3-layer MLP (GELU after the first two) -> [t(3), rot6d(6), size(3)] per token.

    The last layer is zero-initialised, so at init every token predicts: translation = its prior point (the
    patch's back-projected 3D point in 'patch_offset' mode, a constant in 'absolute' mode), rotation = identity,
    size = size_prior on every axis.
    """

    def __init__(self, dim: int, size_prior: float = 0.1):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)
        self.fc3 = nn.Linear(dim, 12)
        self.act = nn.GELU()
        self.register_buffer('rot_bias', torch.tensor(IDENTITY_ROT6D), persistent=False)          # [6]
        self.register_buffer('size_bias', torch.full((3,), inverse_softplus(size_prior - MIN_SIZE)),
                             persistent=False)                                                     # [3]
        self.reset_last_layer()

    def reset_last_layer(self) -> None:
        nn.init.zeros_(self.fc3.weight)
        nn.init.zeros_(self.fc3.bias)

    def forward(self, tokens: Tensor, prior: Tensor) -> Tensor:
        """tokens: [B,N,D]; prior: [B,N,3] (or broadcastable) translation prior in metres. Returns [B,N,12]."""
        o = self.fc3(self.act(self.fc2(self.act(self.fc1(tokens)))))     # [B,N,12]
        t = prior + o[..., 0:3]                                          # [B,N,3]
        rot = o[..., 3:9] + self.rot_bias                                # [B,N,6]
        size = F.softplus(o[..., 9:12] + self.size_bias) + MIN_SIZE      # [B,N,3] > 0
        return torch.cat([t, rot, size], dim=-1)                         # [B,N,12]


def unit_rows(x: Tensor, eps: float = 1e-6) -> Tensor:
    """``F.normalize(x, dim=-1, eps=eps)``, the same division, broadcast instead of ``expand_as`` (which the ONNX
    exporter writes as a Shape -> Expand of the dynamic batch)."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(eps)


class ClassHead(nn.Module):
    """OWL-ViT class head against learned class embeddings.

    logits[b,n,c] = (cos(W_e x_n, e_c) + shift(x_n)) * scale(x_n), scale = elu(.) + 1 > 0. Scores are
    sigmoid(logits). The shift bias starts at logit(prior_prob) so the initial scores are ~prior_prob.
    """

    def __init__(self, dim: int, embed_dim: int, num_classes: int, prior_prob: float = 0.01):
        super().__init__()
        self.proj = nn.Linear(dim, embed_dim)
        self.class_embeddings = nn.Parameter(torch.randn(num_classes, embed_dim) / math.sqrt(embed_dim))  # [C,E]
        self.logit_shift = nn.Linear(dim, 1)
        self.logit_scale = nn.Linear(dim, 1)
        self.prior_logit = math.log(prior_prob / (1.0 - prior_prob))
        self.reset_bias()

    def reset_bias(self) -> None:
        nn.init.constant_(self.logit_shift.bias, self.prior_logit)

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens: [B,N,D] -> logits [B,N,C]."""
        img = unit_rows(self.proj(tokens))                                # [B,N,E]
        cls = unit_rows(self.class_embeddings)                            # [C,E]
        sim = torch.matmul(img, cls.t())                                  # [B,N,C]
        shift = self.logit_shift(tokens)                                  # [B,N,1]
        scale = F.elu(self.logit_scale(tokens)) + 1.0                     # [B,N,1]
        return (sim + shift) * scale


class PolicyHead(nn.Module):
    """Pool tokens (attention with one learned query, or mean) -> LayerNorm -> Linear -> [B,E]."""

    def __init__(self, dim: int, embed_dim: int, pool: str = 'attention'):
        super().__init__()
        if pool not in ('attention', 'mean'):
            raise ValueError(f"pool must be 'attention' or 'mean', got {pool!r}")
        self.pool = pool
        if pool == 'attention':
            self.query = nn.Parameter(torch.empty(dim).normal_(std=0.02))   # [D]; not 0, so `key` gets grads
            self.key = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.out = nn.Linear(dim, embed_dim)
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, tokens: Tensor) -> Tensor:
        if self.pool == 'attention':
            scores = (self.key(tokens) @ self.query) * self.scale                   # [B,N]
            w = torch.softmax(scores, dim=-1)                                        # [B,N]
            pooled = (w.unsqueeze(1) @ tokens).squeeze(1)                            # [B,1,N]@[B,N,D] -> [B,D]
        else:
            pooled = tokens.mean(dim=1)                                              # [B,D]
        return self.out(self.norm(pooled))                                           # [B,E]

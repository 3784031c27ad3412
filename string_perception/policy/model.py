"""The chunking policy: ChunkHead ([embedding, qpos] -> K actions) and BCPolicy (ViTD encoder -> its PolicyHead ->
ChunkHead). Joint states and actions are normalised inside ChunkHead with the training demos' statistics (buffers,
so they travel with the weights into the checkpoint and the ONNX file)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..model.vitd import ViTD


class ChunkHead(nn.Module):
    """MLP on [embedding E, normalised qpos J] -> [B,K,J]; forward returns absolute joint targets (qpos units),
    forward_normalized the normalised ones the L1 loss is taken on."""

    def __init__(self, embed_dim: int, joint_dim: int, chunk_size: int, hidden: int = 512, layers: int = 3,
                 dropout: float = 0.1):
        super().__init__()
        self.embed_dim, self.joint_dim, self.chunk_size = embed_dim, joint_dim, chunk_size
        dims = [embed_dim + joint_dim] + [hidden] * (layers - 1)
        blocks: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            blocks += [nn.Linear(a, b), nn.LayerNorm(b), nn.GELU(), nn.Dropout(dropout)]
        blocks.append(nn.Linear(dims[-1], chunk_size * joint_dim))
        self.mlp = nn.Sequential(*blocks)
        for name in ('qpos_mean', 'action_mean'):
            self.register_buffer(name, torch.zeros(joint_dim))                        # [J]
        for name in ('qpos_std', 'action_std'):
            self.register_buffer(name, torch.ones(joint_dim))                         # [J]

    def set_statistics(self, qpos_mean, qpos_std, action_mean, action_std) -> None:
        for name, v in zip(('qpos_mean', 'qpos_std', 'action_mean', 'action_std'),
                           (qpos_mean, qpos_std, action_mean, action_std)):
            getattr(self, name).copy_(torch.as_tensor(v, dtype=torch.float32))

    def forward_normalized(self, embedding: Tensor, qpos: Tensor) -> Tensor:
        """embedding [B,E], qpos [B,J] (raw) -> normalised actions [B,K,J]."""
        q = (qpos - self.qpos_mean) / self.qpos_std                                   # [B,J]
        out = self.mlp(torch.cat([embedding, q], dim=-1))                              # [B,K*J]
        return out.view(-1, self.chunk_size, self.joint_dim)                           # [B,K,J]

    def forward(self, embedding: Tensor, qpos: Tensor) -> Tensor:
        return self.forward_normalized(embedding, qpos) * self.action_std + self.action_mean   # [B,K,J]


class BCPolicy(nn.Module):
    """ViTD encoder + its PolicyHead (the embedding the perception node publishes) + ChunkHead."""

    def __init__(self, vitd: ViTD, chunk_head: ChunkHead, pool_points: bool = False):
        super().__init__()
        want = vitd.config.embed_dim + (3 if pool_points else 0)
        if chunk_head.embed_dim != want:
            raise ValueError(f'chunk head takes {chunk_head.embed_dim}-D inputs, the ViTD gives {want}')
        if pool_points and vitd.config.policy_pool != 'attention':
            raise ValueError('pool_points needs the attention-pooling PolicyHead')
        self.vitd, self.chunk_head, self.pool_points = vitd, chunk_head, pool_points

    def freeze_encoder(self) -> None:
        """Everything of the ViTD but its PolicyHead stops training (the box / class heads are unused here)."""
        for name, p in self.vitd.named_parameters():
            p.requires_grad_(name.startswith('policy_head.'))

    def tokens(self, image: Tensor, depth: Tensor, K: Tensor) -> Tensor:
        """uint8 [B,H,W,3], metres [B,H,W], [B,3,3] -> encoder tokens [B,N,D] (ViTD.forward's 'tokens')."""
        t = self.vitd.tokenize(image, depth, K)
        return self.vitd.fuse_tokens(self.vitd.encoder(t['x'], t['coords']))          # [B,N,D]

    def points(self, image: Tensor, depth: Tensor, K: Tensor) -> Tensor:
        """The tokens' back-projected patch points [B,N,3] (camera frame, metres): tokenizer only, no encoder."""
        return self.vitd.tokenize(image, depth, K)['points']

    def embedding_from_tokens(self, tokens: Tensor, points: Tensor | None = None) -> Tensor:
        """[B,E] policy embedding; with pool_points also the 3D point the PolicyHead's attention pools: [B,E+3].

        STRING / RoPE tokens carry no absolute position (attention only sees coordinate differences), so a pooled
        embedding cannot say WHERE the attended patch is; pool_points adds that as the attention-weighted patch
        point (experimental: not in the exported perception model)."""
        e = self.vitd.policy_head(tokens)                                              # [B,E]
        if not self.pool_points:
            return e
        ph = self.vitd.policy_head
        w = torch.softmax((ph.key(tokens) @ ph.query) * ph.scale, dim=-1)             # [B,N]
        return torch.cat([e, (w.unsqueeze(1) @ points).squeeze(1)], dim=-1)           # [B,E+3]

    def forward_from_tokens(self, tokens: Tensor, qpos: Tensor, normalized: bool = False,
                            points: Tensor | None = None) -> Tensor:
        return self._act(self.embedding_from_tokens(tokens, points), qpos, normalized)

    def _act(self, e: Tensor, qpos: Tensor, normalized: bool) -> Tensor:
        """Embedding [B,E(+3)] + qpos [B,J] -> actions [B,K,J] (normalised targets with ``normalized``)."""
        return self.chunk_head.forward_normalized(e, qpos) if normalized else self.chunk_head(e, qpos)

    def embedding(self, image: Tensor, depth: Tensor, K: Tensor) -> Tensor:
        """A frame batch -> the chunk head's input [B,E(+3)] (embedding_from_tokens of the frames)."""
        points = self.points(image, depth, K) if self.pool_points else None
        return self.embedding_from_tokens(self.tokens(image, depth, K), points)

    def forward(self, image: Tensor, depth: Tensor, K: Tensor, qpos: Tensor, normalized: bool = False) -> Tensor:
        """A frame batch + joint states -> actions [B,K,J]."""
        return self._act(self.embedding(image, depth, K), qpos, normalized)

"""A two-stage vision policy: the ViTD's policy embedding localises the task's objects (the cube; the peg and the
socket), the privileged chunk head acts on their positions.

The BC loss alone never taught the policy embedding where the cube is (docs/results/aloha_policy.md): only the
first frames of a demonstration need the image, and 45 demonstrations are 45 cube positions. Localisation has its
own, cheap supervision: the cube's position at the start of an episode, on as many reset frames as wanted (one
render each, no demonstration). A *localiser* is the ViTD (frozen encoder) whose PolicyHead was trained, with a
linear map ``aux`` from the embedding to the cube's scaled position (data.privileged_state), on such frames
(``string-perception-train-localiser``). :class:`EstimatedStateHead` composes ``aux`` with the privileged chunk head
(trained on the true position, train_bc ``--observation privileged``), so the deployed pair keeps the runtime
contract: the perception ONNX publishes the embedding, the policy ONNX maps embedding [B,E] + qpos [B,J] to
actions [B,K,J] (export.export_two_stage).

Checkpoint (``torch.save``, loads with ``weights_only=True``): ``{'format': LOCALISER_FORMAT, 'vitd_config',
'vitd', 'aux', 'pool_points', 'encoder_frozen', 'task', 'row'}`` (``row``: the probe's training size and errors;
``encoder_frozen`` False when the encoder itself was trained to localise, benchmarks/aloha_finetune_study.py;
absent = True; ``task`` absent = transfer_cube; ``aux`` maps to 3 numbers per object of the task).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..aloha_tasks import DEFAULT_ALOHA_TASK
from ..model.vitd import build_model
from .model import BCPolicy, ChunkHead

__all__ = ['LOCALISER_FORMAT', 'EstimatedStateHead', 'save_localiser', 'load_localiser']

LOCALISER_FORMAT = 'cube_probe'               # the name of the first (cube-only) format; files stay readable
POINT_DIM = 3                                  # the pooled patch point of pool_points probes


def save_localiser(path, policy: BCPolicy, aux: nn.Linear, row: dict[str, Any] | None = None, *,
                   encoder_frozen: bool = True, task: str = DEFAULT_ALOHA_TASK) -> None:
    ck = {'format': LOCALISER_FORMAT, 'vitd_config': policy.vitd.config.to_dict(),
          'vitd': {k: v.detach().clone() for k, v in policy.vitd.state_dict().items()},
          'aux': aux.state_dict(), 'pool_points': bool(policy.pool_points), 'encoder_frozen': bool(encoder_frozen),
          'task': str(task), 'row': dict(row or {})}
    torch.save(ck, path)


def load_localiser(path) -> tuple[BCPolicy, nn.Linear, dict[str, Any]]:
    """-> (BCPolicy with the trained PolicyHead; its chunk head is a placeholder), the linear map, the raw dict."""
    ck = torch.load(path, map_location='cpu', weights_only=True)
    if not isinstance(ck, dict) or ck.get('format') != LOCALISER_FORMAT:
        raise ValueError(f'{path}: not a {LOCALISER_FORMAT} checkpoint (string-perception-train-localiser)')
    vitd = build_model(ck['vitd_config'])
    vitd.load_state_dict(ck['vitd'])
    embed_dim = vitd.config.embed_dim + POINT_DIM * bool(ck['pool_points'])
    policy = BCPolicy(vitd, ChunkHead(embed_dim, 14, 1), pool_points=bool(ck['pool_points'])).eval()
    aux = nn.Linear(embed_dim, ck['aux']['weight'].shape[0])                          # E -> 3 per object
    aux.load_state_dict(ck['aux'])
    return policy, aux.eval(), ck


class EstimatedStateHead(nn.Module):
    """embedding [B,E] -> aux -> estimated object state [B,D] -> the privileged chunk head (with qpos [B,J]) ->
    actions [B,K,J]; exposes the attributes of a ChunkHead that export.export_policy_head uses."""

    def __init__(self, aux: nn.Linear, chunk_head: ChunkHead):
        super().__init__()
        if chunk_head.embed_dim != aux.out_features:
            raise ValueError(f'the chunk head takes {chunk_head.embed_dim}-D states, aux gives {aux.out_features}')
        self.aux, self.chunk_head = aux, chunk_head
        self.embed_dim, self.joint_dim, self.chunk_size = aux.in_features, chunk_head.joint_dim, chunk_head.chunk_size
        self.qpos_mean, self.qpos_std = chunk_head.qpos_mean, chunk_head.qpos_std

    def forward(self, embedding: Tensor, qpos: Tensor) -> Tensor:
        return self.chunk_head(self.aux(embedding), qpos)                              # [B,K,J]

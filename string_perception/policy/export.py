"""BC checkpoint -> the two deployable ONNX files and their parity checks against PyTorch.

    python -m string_perception.policy.export runs/aloha_policy/bc/best.pt --out runs/aloha_policy/bc/onnx

- ``perception.onnx``: the ViTD with the BC-trained PolicyHead (its frozen or fine-tuned encoder), through the
  package's exporter (export/export_onnx.py: compiled STRING, metadata, parity), plus metadata ``embedding_source``
  = ``bc_policy`` (the ``embedding`` output is the policy embedding the chunk head was trained on) and
  ``policy_task``; runtime/model_metadata.py keeps both in ``extra``.
- ``policy.onnx``: the chunk head (normalisation included) per runtime/policy_model.py: ``embedding`` [B,E] +
  ``qpos`` [B,14] -> ``actions`` [B,K,14], PolicyMetadata with ``perception_model_sha256`` = the perception file's
  weights_sha256.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from ..export.export_onnx import export_checkpoint
from ..export.to_onnx import constants_to_initializers
from ..model.vitd import save_checkpoint
from ..runtime.checksum import weights_sha256
from ..runtime.model_metadata import ModelMetadata
from ..runtime.policy_model import POLICY_METADATA_KEY, PolicyMetadata, PolicyModel
from ..sim.demos.rollout import JOINT_NAMES
from ..sim.demos.transfer_cube import CONTROL_DT
from .train_bc import load_policy

TASK = 'aloha_transfer_cube'
EMBEDDING_SOURCE = 'bc_policy'
POLICY_OPSET = 17


class _HeadGraph(nn.Module):
    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, embedding, qpos):
        return self.head(embedding, qpos)                                            # [B,K,J]


def export_policy_head(head, path, metadata: PolicyMetadata) -> str:
    """The chunk head as the policy ONNX at `path` with `metadata`; returns its weights_sha256."""
    buf = io.BytesIO()
    example = (torch.zeros(2, head.embed_dim), torch.zeros(2, head.joint_dim))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(_HeadGraph(head).eval(), example, buf, input_names=['embedding', 'qpos'],
                          output_names=['actions'], dynamic_axes={'embedding': {0: 'B'}, 'qpos': {0: 'B'},
                                                                  'actions': {0: 'B'}},
                          opset_version=POLICY_OPSET, do_constant_folding=True, dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    dims = model.graph.output[0].type.tensor_type.shape.dim                          # the view lost K, J
    for d, size in zip(dims[1:], (head.chunk_size, head.joint_dim)):
        d.dim_value = size
    constants_to_initializers(model)
    sha = weights_sha256(model)
    onnx.helper.set_model_props(model, {POLICY_METADATA_KEY: metadata.to_json(), 'weights_sha256': sha})
    model.producer_name = 'string_perception.policy.export'
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return sha


def _stamp_embedding_source(path: Path, cfg) -> ModelMetadata:
    model = onnx.load(str(path))
    meta = ModelMetadata.from_model(model)
    meta = replace(meta, extra={**meta.extra, 'embedding_source': EMBEDDING_SOURCE, 'policy_task': TASK,
                                'policy_encoder_frozen': str(not cfg.finetune).lower()})
    meta.write_to(model)                             # metadata only: the weights (and their checksum) are unchanged
    onnx.save(model, str(path))
    return meta


def policy_parity(head, policy_onnx, seed: int = 0, batch: int = 4) -> float:
    """max |torch - ONNX| of the chunk head on random embeddings and demo-like joint states."""
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(batch, head.embed_dim, generator=g)                               # [B,E]
    q = head.qpos_mean + head.qpos_std * torch.randn(batch, head.joint_dim, generator=g)   # [B,J]
    with torch.no_grad():
        ref = head(e, q).numpy()
    got = PolicyModel(policy_onnx).predict(e.numpy(), q.numpy())
    return float(np.abs(ref - got).max())


def export_policy(checkpoint, out_dir, *, verify_frames: int = 2, log=print) -> dict:
    """Write perception.onnx + policy.onnx (and perception.pt, the ViTD checkpoint they came from) to out_dir."""
    policy, head, cfg, ck = load_policy(checkpoint)
    if policy is None:
        raise ValueError(f'{checkpoint}: a privileged policy (cube position input) has no perception model')
    if cfg.pool_points:
        raise ValueError(f'{checkpoint}: pool_points policies are experimental (the perception ONNX has no pooled '
                         'point output yet)')
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vitd_ckpt = out / 'perception.pt'
    save_checkpoint(vitd_ckpt, policy.vitd, extra={'step': int(ck['step']), 'provenance': ck.get('provenance', {}),
                                                   'bc_policy_config': cfg.to_dict()})
    perception_path = out / 'perception.onnx'
    record = export_checkpoint(vitd_ckpt, perception_path, verify_frames=verify_frames, log=log)
    pmeta = _stamp_embedding_source(perception_path, cfg)
    meta = PolicyMetadata(chunk_size=cfg.chunk_size, embed_dim=head.embed_dim, joint_names=JOINT_NAMES,
                          control_rate_hz=1.0 / CONTROL_DT, temporal_ensemble_m=cfg.temporal_ensemble_m,
                          query_every=cfg.query_every, task=TASK, perception_model_sha256=pmeta.weights_sha256,
                          extra={'observation': cfg.observation, 'encoding': policy.vitd.config.encoding,
                                 'train_step': int(ck['step']), 'encoder_frozen': not cfg.finetune})
    policy_path = out / 'policy.onnx'
    export_policy_head(head, policy_path, meta)
    diff = policy_parity(head, policy_path)
    result = {'perception_onnx': str(perception_path), 'policy_onnx': str(policy_path),
              'perception_ok': bool(record['ok']), 'perception_weights_sha256': pmeta.weights_sha256,
              'policy_parity_max_abs_diff': diff}
    log(json.dumps(result))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('checkpoint')
    ap.add_argument('--out', required=True)
    args = ap.parse_args(argv)
    r = export_policy(args.checkpoint, args.out)
    return 0 if r['perception_ok'] and r['policy_parity_max_abs_diff'] < 1e-4 else 1


if __name__ == '__main__':
    sys.exit(main())

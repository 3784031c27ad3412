"""BC checkpoint -> the two deployable ONNX files and their parity checks against PyTorch.

    python -m string_perception.policy.export runs/aloha_policy/bc/best.pt --out runs/aloha_policy/bc/onnx
    python -m string_perception.policy.export runs/aloha_policy/privileged/best.pt \
        --localiser runs/aloha_policy/probe_emb/probe.pt --out runs/aloha_policy/two_stage/onnx

- ``perception.onnx``: the ViTD with the BC-trained PolicyHead (its frozen or fine-tuned encoder), through the
  package's exporter (export/pipeline.py: compiled STRING, metadata, parity), plus metadata ``embedding_source``
  = ``bc_policy`` (the ``embedding`` output is the policy embedding the chunk head was trained on) and
  ``policy_task``; runtime/model_metadata.py keeps both in ``extra``.
- ``policy.onnx``: the chunk head (normalisation included) per runtime/policy_model.py: ``embedding`` [B,E] +
  ``qpos`` [B,14] -> ``actions`` [B,K,14], PolicyMetadata with ``perception_model_sha256`` = the perception file's
  weights_sha256.

With ``--localiser`` (:func:`export_two_stage`, policy/localiser.py): the perception model is the localiser's ViTD
and the policy file is its linear map composed with the privileged chunk head; same contract, same runtime.
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

from ..aloha_tasks import LEGACY_TASK
from ..export.pipeline import export_checkpoint
from ..export.to_onnx import constants_to_initializers
from ..model.vitd import save_checkpoint
from ..runtime.checksum import weights_sha256
from ..runtime.model_metadata import ModelMetadata
from ..runtime.policy_model import POLICY_METADATA_KEY, PolicyMetadata, PolicyModel
from ..sim.demos.rollout import JOINT_NAMES
from ..sim.demos.aloha_scene import CONTROL_DT
from ..sim.demos.tasks import file_task
from .train_bc import load_policy

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


def _export_perception(vitd, out: Path, ckpt_extra: dict, source: str, frozen: bool, verify_frames: int,
                       log, task: str = 'transfer_cube') -> tuple[Path, dict, ModelMetadata]:
    """``out/perception.pt`` + ``out/perception.onnx`` (the package's exporter and its parity check), metadata
    ``embedding_source`` = ``source``: (path, exporter record, metadata)."""
    vitd_ckpt = out / 'perception.pt'
    save_checkpoint(vitd_ckpt, vitd, extra=ckpt_extra)
    path = out / 'perception.onnx'
    record = export_checkpoint(vitd_ckpt, path, verify_frames=verify_frames, log=log)
    model = onnx.load(str(path))
    meta = ModelMetadata.from_model(model)
    meta = replace(meta, extra={**meta.extra, 'embedding_source': source, 'policy_task': file_task(task),
                                'policy_encoder_frozen': str(frozen).lower()})
    meta.write_to(model)                             # metadata only: the weights (and their checksum) are unchanged
    onnx.save(model, str(path))
    return path, record, meta


def _export_policy_file(head, cfg, out: Path, perception: tuple[Path, dict, ModelMetadata], extra: dict,
                        log, embedding_latch: str = 'none') -> dict:
    """``out/policy.onnx`` of ``head`` (embedding + qpos -> actions) tied to the perception file; its parity."""
    perception_path, record, pmeta = perception
    meta = PolicyMetadata(chunk_size=cfg.chunk_size, embed_dim=head.embed_dim, joint_names=JOINT_NAMES,
                          control_rate_hz=1.0 / CONTROL_DT, temporal_ensemble_m=cfg.temporal_ensemble_m,
                          query_every=cfg.query_every, task=file_task(cfg.task),
                          perception_model_sha256=pmeta.weights_sha256,
                          embedding_latch=embedding_latch, extra=extra)
    policy_path = out / 'policy.onnx'
    export_policy_head(head, policy_path, meta)
    result = {'perception_onnx': str(perception_path), 'policy_onnx': str(policy_path),
              'perception_ok': bool(record['ok']), 'perception_weights_sha256': pmeta.weights_sha256,
              'policy_parity_max_abs_diff': policy_parity(head, policy_path)}
    log(json.dumps(result))
    return result


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
        raise ValueError(f'{checkpoint}: a privileged policy (object position input) has no perception model')
    if cfg.pool_points:
        raise ValueError(f'{checkpoint}: pool_points policies are experimental (the perception ONNX has no pooled '
                         'point output yet)')
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    perception = _export_perception(policy.vitd, out, {'step': int(ck['step']), 'provenance': ck.get('provenance', {}),
                                                       'bc_policy_config': cfg.to_dict()},
                                    EMBEDDING_SOURCE, not cfg.finetune, verify_frames, log, cfg.task)
    return _export_policy_file(head, cfg, out, perception,
                               {'observation': cfg.observation, 'encoding': policy.vitd.config.encoding,
                                'train_step': int(ck['step']), 'encoder_frozen': not cfg.finetune}, log)


def export_two_stage(privileged_checkpoint, localiser_checkpoint, out_dir, *, verify_frames: int = 2,
                     log=print) -> dict:
    """The two-stage vision policy (localiser.py) as the same two files: ``perception.onnx`` = the localiser's
    ViTD (its PolicyHead trained to localise the task's objects; ``embedding_source`` = ``cube_localiser`` for
    the cube, ``object_localiser`` otherwise), ``policy.onnx`` = aux linear map + the privileged chunk head, on the
    embedding, with ``embedding_latch`` 'episode_start' (the privileged head acts on where the objects started;
    later frames show the arms over them)."""
    from .localiser import EstimatedStateHead, load_localiser
    localiser, aux, lck = load_localiser(localiser_checkpoint)
    if localiser.pool_points:
        raise ValueError(f'{localiser_checkpoint}: its linear map reads the pooled patch point, which the '
                         'perception ONNX does not publish; train the probe with --pool-points false')
    policy, head, cfg, ck = load_policy(privileged_checkpoint)
    if policy is not None or cfg.observation != 'privileged':
        raise ValueError(f'{privileged_checkpoint}: not a privileged (object position) policy')
    localiser_task = str(lck.get('task', LEGACY_TASK))
    if localiser_task != cfg.task:
        raise ValueError(f'{localiser_checkpoint} localises for {localiser_task}, {privileged_checkpoint} acts '
                         f'on {cfg.task}')
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frozen = bool(lck.get('encoder_frozen', True))     # False: the encoder was trained to localise too
    source = 'cube_localiser' if cfg.task == 'transfer_cube' else 'object_localiser'
    perception = _export_perception(localiser.vitd, out, {'localiser': dict(lck.get('row', {}))}, source,
                                    frozen, verify_frames, log, cfg.task)
    return _export_policy_file(EstimatedStateHead(aux, head).eval(), cfg, out, perception,
                               {'observation': 'vision_two_stage', 'encoding': localiser.vitd.config.encoding,
                                'train_step': int(ck['step']), 'encoder_frozen': frozen}, log,
                               embedding_latch='episode_start')   # the head was trained on the cube's start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('checkpoint', help='a BC checkpoint; with --localiser, the privileged one')
    ap.add_argument('--localiser', help='a localiser (string-perception-train-localiser): export the two-stage policy')
    ap.add_argument('--out', required=True)
    args = ap.parse_args(argv)
    r = (export_two_stage(args.checkpoint, args.localiser, args.out) if args.localiser
         else export_policy(args.checkpoint, args.out))
    return 0 if r['perception_ok'] and r['policy_parity_max_abs_diff'] < 1e-4 else 1


if __name__ == '__main__':
    sys.exit(main())

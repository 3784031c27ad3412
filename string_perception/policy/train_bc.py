"""``string-perception-train-policy``: behaviour cloning of scripted gym-aloha demonstrations (transfer-cube,
insertion: ``--task``).

    string-perception-train-policy --demos runs/aloha_policy/demos --out runs/aloha_policy/bc \
        --encoder-checkpoint models/vitd_tiny_cayley.pt --steps 3000
    string-perception-train-policy ... --observation privileged       # object positions instead of the camera
    string-perception-train-policy ... --resume runs/aloha_policy/bc/last.pt

The ViTD encoder is frozen by default: its tokens are computed once per frame and cached (fp16, next to the demos),
and the L1 loss on normalised action chunks (masked past the episode end) trains the ViTD's PolicyHead (attention
pooling -> embedding) together with the chunk head, so the embedding the perception node publishes is the policy
embedding. ``--finetune true`` trains end to end instead (every step runs the encoder: slow on a CPU). Writes
log.csv, last.pt and best.pt (lowest validation L1 on the held-out demos) under --out; resumable (the data order
is a function of seed and step, the dropout RNG state is saved).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from ..model.vitd import load_checkpoint
from ..sim.demos.rollout import JOINT_NAMES
from ..sim.demos.tasks import get_task
from ..training.checkpoint import provenance, rng_state, set_rng_state
from ..training.engine import CsvLog, param_groups
from ..training.schedule import lr_factor
from .config import PolicyConfig
from .data import (build_samples, cached_tokens, demo_task, encode_points, load_demos, masked_l1, model_frames,
                   statistics)
from .model import BCPolicy, ChunkHead

CHECKPOINT_FORMAT = 'string_perception.bc_policy'


def build_policy(cfg: PolicyConfig) -> tuple[BCPolicy | None, ChunkHead]:
    """(BCPolicy on the configured ViTD checkpoint, its chunk head) or, privileged, (None, chunk head on the task's
    object state: 3 numbers per object)."""
    vitd = load_checkpoint(cfg.encoder_checkpoint)[0] if cfg.observation == 'vision' else None
    embed_dim = vitd.config.embed_dim + 3 * cfg.pool_points if vitd is not None else get_task(cfg.task).state_dim
    head = ChunkHead(embed_dim, len(JOINT_NAMES), cfg.chunk_size, cfg.hidden, cfg.layers, cfg.dropout)
    return (BCPolicy(vitd, head, cfg.pool_points) if vitd is not None else None), head


def load_policy(path, map_location='cpu') -> tuple[BCPolicy | None, ChunkHead, PolicyConfig, dict]:
    """A BC checkpoint -> (policy or None, chunk head, config, raw dict), in eval mode."""
    ck = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(ck, dict) or ck.get('format') != CHECKPOINT_FORMAT:
        raise ValueError(f'{path}: not a {CHECKPOINT_FORMAT} checkpoint')
    cfg = PolicyConfig.from_dict(ck['policy_config'])
    from ..model.vitd import build_model
    head = ChunkHead(**ck['chunk_head_args'])
    head.load_state_dict(ck['chunk_head'])
    policy = None
    if ck.get('vitd') is not None:
        vitd = build_model(ck['vitd_config'])
        vitd.load_state_dict(ck['vitd'])
        policy = BCPolicy(vitd, head, cfg.pool_points).eval()
    return policy, head.eval(), cfg, ck


def _save(path: Path, cfg, policy, head, optimizer, step, best, metrics, aux=None) -> None:
    ck: dict[str, Any] = {
        'format': CHECKPOINT_FORMAT, 'policy_config': cfg.to_dict(),
        'chunk_head_args': dict(embed_dim=head.embed_dim, joint_dim=head.joint_dim, chunk_size=head.chunk_size,
                                hidden=cfg.hidden, layers=cfg.layers, dropout=cfg.dropout),
        'chunk_head': head.state_dict(), 'joint_names': list(JOINT_NAMES),
        'vitd_config': policy.vitd.config.to_dict() if policy is not None else None,
        'vitd': policy.vitd.state_dict() if policy is not None else None,
        'aux': aux.state_dict() if aux is not None else None,
        'optimizer': optimizer.state_dict(), 'step': int(step), 'best': best, 'rng': rng_state(),
        'metrics': dict(metrics), 'provenance': provenance()}
    tmp = path.with_name(path.name + '.tmp')
    torch.save(ck, tmp)
    tmp.replace(path)


class _Predictor:
    """Normalised action chunks [B,K,J] for a batch, from cached tokens, frames (finetune) or the cube state."""

    def __init__(self, cfg: PolicyConfig, policy, head, tokens, frames, points=None):
        self.cfg, self.policy, self.head, self.tokens, self.frames = cfg, policy, head, tokens, frames
        self.points = points                                                        # [F,N,3] with pool_points

    def __call__(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.with_embedding(b)[0]

    def with_embedding(self, b: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(normalised chunks [B,K,J], the chunk head's input [B,E'])."""
        if self.policy is None:
            e = b['state']                                                             # [B,D]
        elif self.cfg.finetune:
            f = b['frame'].numpy()
            img, dep, K = (torch.as_tensor(self.frames[k][f]) for k in ('image', 'depth', 'intrinsics'))
            pts = self.policy.points(img, dep, K) if self.policy.pool_points else None
            e = self.policy.embedding_from_tokens(self.policy.tokens(img, dep, K), pts)
        else:
            pts = self.points[b['frame']] if self.points is not None else None
            e = self.policy.embedding_from_tokens(self.tokens[b['frame']].float(), pts)
        return self.head.forward_normalized(e, b['qpos']), e


def _normalized_target(head: ChunkHead, target: torch.Tensor) -> torch.Tensor:
    return (target - head.action_mean) / head.action_std                         # [B,K,J]


@torch.no_grad()
def validation_l1(predict, head, samples, batch_size: int) -> float:
    total, n = 0.0, 0
    for i in range(0, len(samples), batch_size):
        b = samples.batch(np.arange(i, min(i + batch_size, len(samples))))
        total += float(masked_l1(predict(b), _normalized_target(head, b['target']), b['mask'])) * len(b['frame'])
        n += len(b['frame'])
    return total / max(n, 1)


def train(cfg: PolicyConfig, resume: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Train (or resume) per cfg; returns {'step', 'best', 'last_val_l1', 'cpu_s'}."""
    torch.set_num_threads(cfg.threads)
    if resume:
        cfg = PolicyConfig.from_dict({**torch.load(resume, weights_only=True)['policy_config'],
                                      'steps': cfg.steps, 'out': cfg.out})
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    demos = load_demos(cfg.demos)
    if demo_task(demos[0]) != cfg.task:
        raise ValueError(f'{cfg.demos} holds {demo_task(demos[0])} demos, the config trains {cfg.task}')
    if cfg.episodes:
        if cfg.episodes > len(demos):
            raise ValueError(f'episodes {cfg.episodes}: only {len(demos)} demos in {cfg.demos}')
        demos = demos[:cfg.episodes]
    if not 0 <= cfg.val_episodes < len(demos):
        raise ValueError(f'val_episodes {cfg.val_episodes} leaves no training demos of {len(demos)}')
    train_demos, val_demos = demos[:len(demos) - cfg.val_episodes], demos[len(demos) - cfg.val_episodes:]
    policy, head = build_policy(cfg)
    head.set_statistics(**statistics(train_demos))
    train_s = build_samples(train_demos, cfg.chunk_size, sample_every=cfg.sample_every)
    val_s = build_samples(val_demos, cfg.chunk_size, frame_offset=len(train_s), sample_every=cfg.sample_every)
    tokens = frames = points = None
    c0 = time.process_time()
    if policy is not None:
        if cfg.finetune:
            frames = model_frames(demos, policy.vitd.config.image_size)
        else:
            policy.freeze_encoder()
            tokens = cached_tokens(policy, demos, cfg.encoder_checkpoint, cfg.demos, cfg.encode_batch, progress)
            if cfg.pool_points:
                points = encode_points(policy, model_frames(demos, policy.vitd.config.image_size))
    encode_cpu_s = time.process_time() - c0
    state_dim = get_task(cfg.task).state_dim
    aux = torch.nn.Linear(head.embed_dim, state_dim) if cfg.aux_cube_weight > 0 else None   # embedding -> state
    modules = torch.nn.ModuleDict({'head': head, **({'vitd': policy.vitd} if policy is not None else {}),
                                   **({'aux': aux} if aux is not None else {})})
    groups = param_groups(head, cfg.weight_decay) + (param_groups(aux, cfg.weight_decay) if aux else [])
    if policy is not None:
        enc_lr = cfg.encoder_lr if cfg.finetune else cfg.lr
        head_params = {id(p) for p in policy.vitd.policy_head.parameters()}
        for g in param_groups(policy.vitd, cfg.weight_decay):
            for ph in (True, False):
                ps = [p for p in g['params'] if (id(p) in head_params) == ph]
                if ps:
                    groups.append({'params': ps, 'weight_decay': g['weight_decay'],
                                   'base_lr': cfg.lr if ph else enc_lr})
    for g in groups:
        g.setdefault('base_lr', cfg.lr)
        g['lr'] = g['base_lr']
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr)
    step, best = 0, math.inf
    if resume:
        ck = torch.load(resume, weights_only=True)
        head.load_state_dict(ck['chunk_head'])
        if policy is not None:
            policy.vitd.load_state_dict(ck['vitd'])
        if aux is not None:
            aux.load_state_dict(ck['aux'])
        optimizer.load_state_dict(ck['optimizer'])
        set_rng_state(ck['rng'])
        step, best = int(ck['step']), float(ck['best'])
    predict = _Predictor(cfg, policy, head, tokens, frames, points)
    log = CsvLog(out / 'log.csv')
    val_l1 = math.nan
    t_start, c_start = time.perf_counter(), time.process_time()
    bar = tqdm(total=cfg.steps, initial=step, desc='bc', disable=not progress)
    while step < cfg.steps:
        modules.train()
        if policy is not None and not cfg.finetune:
            policy.vitd.eval()
            policy.vitd.policy_head.train()
        factor = lr_factor(step, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)
        for g in optimizer.param_groups:
            g['lr'] = g['base_lr'] * factor
        idx = np.random.default_rng([cfg.seed, step]).integers(0, len(train_s), cfg.batch_size)   # [B]
        b = train_s.batch(idx)
        pred, emb = predict.with_embedding(b)
        loss = masked_l1(pred, _normalized_target(head, b['target']), b['mask'])
        bc_l1, aux_l1 = loss.detach().item(), float("nan")
        if aux is not None:
            early = (b['step'] < cfg.aux_until_step).to(loss.dtype)                    # [B]
            aux_l1 = ((aux(emb) - b['state']).abs().mean(-1) * early).sum() / early.sum().clamp_min(1.0)
            loss = loss + cfg.aux_cube_weight * aux_l1
            aux_l1 = aux_l1.detach().item()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], cfg.grad_clip)
        optimizer.step()
        loss = loss.detach()
        step += 1
        bar.update(1)
        row = None
        if step % cfg.val_every == 0 or step == cfg.steps:
            modules.eval()
            val_l1 = validation_l1(predict, head, val_s, 256) if len(val_s) else float(loss)
            metrics = {'val_l1': val_l1, 'train_l1': bc_l1}
            if val_l1 < best:
                best = val_l1
                _save(out / 'best.pt', cfg, policy, head, optimizer, step, best, metrics, aux)
            _save(out / 'last.pt', cfg, policy, head, optimizer, step, best, metrics, aux)
            row = {'step': step, 'train_l1': bc_l1, 'val_l1': val_l1}
        elif step % cfg.log_every == 0:
            row = {'step': step, 'train_l1': bc_l1, 'val_l1': ''}
        if row is not None:
            row.update(aux_l1=aux_l1, lr=cfg.lr * factor, wall_s=round(time.perf_counter() - t_start, 2),
                       cpu_s=round(time.process_time() - c_start, 2), encode_cpu_s=round(encode_cpu_s, 2))
            log.write(row)
            bar.set_postfix(l1=f'{bc_l1:.4f}', val=f'{val_l1:.4f}')
    bar.close()
    return {'step': step, 'best': best, 'last_val_l1': val_l1, 'encode_cpu_s': encode_cpu_s,
            'train_cpu_s': time.process_time() - c_start}


def _parse_bool(text: str) -> bool:
    if text.lower() in ('1', 'true', 'yes'):
        return True
    if text.lower() in ('0', 'false', 'no'):
        return False
    raise argparse.ArgumentTypeError(f'expected true/false, got {text!r}')


def build_parser() -> argparse.ArgumentParser:
    """One --flag per PolicyConfig field (underscores as dashes), plus --resume."""
    ap = argparse.ArgumentParser(prog='string-perception-train-policy', description=__doc__.splitlines()[0])
    for f in dataclasses.fields(PolicyConfig):
        kind = _parse_bool if f.type in ('bool', bool) else type(f.default)
        ap.add_argument('--' + f.name.replace('_', '-'), type=kind, default=f.default)
    ap.add_argument('--resume', help='last.pt of a run to continue (its config; --steps and --out from here)')
    ap.add_argument('--no-progress', action='store_true')
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = PolicyConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(PolicyConfig)})
    result = train(cfg, resume=args.resume, progress=not args.no_progress)
    print(result)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

"""Train a ViT / ViTD 3D box detector on generated RGB-D scenes (``string-perception-train``).

One process::

    string-perception-train --preset tiny --steps 3000 --batch-size 32 --lr 2e-3 --out runs/tiny

Several (DDP; gloo on CPU, nccl on GPU; every rank trains on its own shard of the training seeds)::

    torchrun --nproc_per_node 2 -m string_perception.training.train --preset tiny --out runs/ddp

Simulated workcells or a mix as the frame source (``training/sources.py``; primitive-only frames here)::

    string-perception-train --preset tiny --scenes aloha --sim mesh_object_fraction=0 --out runs/aloha

Resume (model, optimiser, scheduler, step, RNG; the data order continues where it stopped)::

    string-perception-train --resume runs/tiny/last.pt          # or --resume auto --out runs/tiny

Writes to ``--out``: ``train_config.json``, ``log.csv`` (train rows) and ``val.csv`` (validation rows),
TensorBoard events when ``torch.utils.tensorboard`` imports, ``last.pt`` and ``best.pt`` (best validation
``--best-metric``). Checkpoints are nanoGPT style: ``model/`` ``save_checkpoint`` with the ``ViTDConfig`` dict plus
the ``TrainConfig`` dict, the optimiser / scheduler / RNG state and ``train_seconds`` (the training loop's wall time,
summed over resumed parts), all loadable with ``weights_only=True``.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from string_perception.training.data import make_loader, shard_indices
from string_perception.training.sources import (SCENE_SOURCES, check_scenes, class_names_for, make_dataset,
                                                sim_config, sim_has_objects, uses_sim)


# ----------------------------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------------------------

ASSIGNMENTS = ('hungarian', 'dense')


@dataclass
class TrainConfig:
    """Everything a run depends on besides the model config (saved in every checkpoint as a plain dict)."""
    preset: str = 'tiny'
    model_overrides: dict[str, Any] = field(default_factory=dict)   # ViTDConfig fields over the preset
    scene_overrides: dict[str, Any] = field(default_factory=dict)   # SceneConfig fields (image size follows model)
    scenes: str = 'procedural'      # frame source (training/sources.py): procedural | aloha | kuka | mix
    sim_overrides: dict[str, Any] = field(default_factory=dict)     # SimConfig fields of simulated frames
    loss_overrides: dict[str, Any] = field(default_factory=dict)    # SetCriterion keyword arguments (e.g. weights)
    matcher_overrides: dict[str, Any] = field(default_factory=dict) # HungarianMatcher costs (default: = weights)
    assignment: str = 'hungarian'   # 'hungarian' (one-to-one, SetCriterion) | 'dense' (one-to-many, DenseCriterion)
    # optimisation
    steps: int = 2000
    batch_size: int = 32            # per rank
    lr: float = 1e-3
    min_lr_ratio: float = 0.02      # cosine decays to lr * min_lr_ratio
    warmup_steps: int = 100
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0          # max global grad norm; 0 disables
    seed: int = 0                   # init + data order
    init_from: str = ''             # fine-tune: start from this checkpoint's weights (init.load_matching_weights)
    render_scale: int = 1           # render frames at this multiple of the input size, then downscale them as the
                                    # node prepares a camera frame (data.downscale_frame); 1 = render at input size
    # data
    num_train_frames: int = 10_000  # training seeds [0, num_train_frames)
    cache: bool = True              # generate this rank's frames once and keep them in memory
    cache_file: str = ''            # also keep that cache on disk (.npz; per rank) and reuse it across runs
    num_workers: int = 1            # DataLoader workers (uncached frames are generated there)
    canonical_targets: bool = True  # train on canonical box rotations (data.canonical_box); val/test never
    # validation / logging / checkpoints
    val_frames: int = 64            # validation seeds [1e9, 1e9 + val_frames)
    val_every: int = 250            # steps; also writes last.pt (and best.pt when the best metric improves)
    keep_every: int = 0             # also keep ckpt_<step>.pt every this many steps (0: only last + best)
    best_metric: str = 'avg_best_iou'
    score_threshold: float = 0.05   # validation decoding (runtime.postprocess): low, for AP
    operating_threshold: float = 0.3  # also report the numbers of boxes scoring at least this (the node's default)
    nms_iou: float = 0.3
    max_detections: int = 50
    log_every: int = 10
    out: str = 'runs/train'
    device: str = 'auto'            # auto | cpu | cuda | cuda:N
    threads: int = 0                # torch intra-op threads per rank on CPU; 0 leaves torch's default

    def __post_init__(self):
        self.betas = tuple(float(b) for b in self.betas)
        if self.assignment not in ASSIGNMENTS:
            raise ValueError(f'assignment must be one of {ASSIGNMENTS}, got {self.assignment!r}')
        check_scenes(self.scenes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d['betas'] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> 'TrainConfig':
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def build_model_config(cfg: TrainConfig):
    """The ``ViTDConfig`` of a run: preset + overrides, class names from the scene source
    (``sources.class_names_for``: the five primitives, plus ``object`` for simulated frames with mesh objects)."""
    from string_perception.model import ViTDConfig
    overrides = {'class_names': class_names_for(cfg.scenes, cfg.sim_overrides), **cfg.model_overrides}
    return ViTDConfig.preset(cfg.preset, **overrides)


def build_scene_config(cfg: TrainConfig, model_cfg):
    """``SceneConfig`` rendering at the model's input size (so no resize is needed)."""
    from string_perception.scenes import SceneConfig
    fields = {f.name for f in dataclasses.fields(SceneConfig)}
    size = {}
    h, w = (v * cfg.render_scale for v in model_cfg.image_size)
    if 'image_size' in fields:
        size['image_size'] = (h, w)
    else:
        size.update({k: v for k, v in (('height', h), ('width', w)) if k in fields})
    if cfg.render_scale > 1:      # the same labels as at the input size: visible pixels counted at render size
        size['min_visible_pixels'] = SceneConfig.min_visible_pixels * cfg.render_scale ** 2
    return SceneConfig(**{**size, **cfg.scene_overrides})


def build_sim_config(cfg: TrainConfig, model_cfg):
    """``SimConfig`` of the run's simulated frames at the model's input size (None for procedural scenes)."""
    if not uses_sim(cfg.scenes):
        return None
    overrides = dict(cfg.sim_overrides)
    if cfg.render_scale > 1:
        from string_perception.sim import SimConfig
        overrides.setdefault('min_visible_pixels', SimConfig.min_visible_pixels * cfg.render_scale ** 2)
    return sim_config([v * cfg.render_scale for v in model_cfg.image_size], overrides)


def frame_out_hw(cfg: TrainConfig, model_cfg) -> tuple[int, int] | None:
    """The model's input size when frames are rendered larger (``render_scale`` > 1), else None."""
    return tuple(model_cfg.image_size) if cfg.render_scale > 1 else None


def check_source_classes(cfg: TrainConfig, model_cfg) -> None:
    """Simulated frames with mesh objects label class ``object``: the model must have it."""
    if uses_sim(cfg.scenes) and sim_has_objects(cfg.sim_overrides) and 'object' not in model_cfg.class_names:
        raise ValueError(f'--scenes {cfg.scenes} frames hold mesh objects (class "object") but the model classes are '
                         f'{list(model_cfg.class_names)}; train with --sim mesh_object_fraction=0 for primitives only')


def lr_factor(step: int, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """Linear warm-up from lr/warmup to lr over ``warmup_steps``, then cosine down to ``lr * min_ratio``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups (nanoGPT style): decay weight matrices; no decay on biases, norms, scalars, the position
    encodings' own parameters (STRING bases / frequencies, under ``.pe.``), position tables, class embeddings."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        parts = name.split('.')
        skip = p.ndim < 2 or 'pe' in parts or 'pos_embed' in parts or 'class_embeddings' in parts
        (no_decay if skip else decay).append(p)
    return [{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay, 'weight_decay': 0.0}]


# ----------------------------------------------------------------------------------------------------------------
# Distributed helpers
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device('cpu')

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == 'auto':
        name = 'cuda' if torch.cuda.is_available() else 'cpu'
    if name == 'cuda':
        name = f'cuda:{local_rank}'
    return torch.device(name)


def setup_distributed(device: str) -> DistInfo:
    """Join the process group when started by torchrun (``WORLD_SIZE > 1``); gloo on CPU, nccl on CUDA."""
    world = int(os.environ.get('WORLD_SIZE', '1'))
    rank = int(os.environ.get('RANK', '0'))
    local_rank = int(os.environ.get('LOCAL_RANK', '0'))
    dev = resolve_device(device, local_rank)
    if world > 1 and not dist.is_initialized():
        if dev.type == 'cuda':
            torch.cuda.set_device(dev)
        dist.init_process_group('nccl' if dev.type == 'cuda' else 'gloo', rank=rank, world_size=world)
    return DistInfo(rank, world, local_rank, dev)


def cleanup_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_mean(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    if not info.enabled or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    if info.device.type == 'cuda':
        t = t.to(info.device)
    dist.all_reduce(t)
    return {k: float(v) / info.world_size for k, v in zip(keys, t.tolist())}


def max_rank_divergence(model: torch.nn.Module, info: DistInfo) -> float:
    """Largest |weight - rank 0's weight| over all ranks (0.0 when DDP keeps the replicas in sync)."""
    if not info.enabled:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1) for p in unwrap(model).parameters()])   # [P]
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    diff = (flat - ref).abs().max().reshape(1)                                        # [1]
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if isinstance(model, DistributedDataParallel) else model


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------------------------

def rng_state() -> dict[str, Any]:
    state = {'torch': torch.get_rng_state()}
    if torch.cuda.is_available():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state['torch'])
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state['cuda'])


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, str]:
    """Where the weights came from: package version, git commit (+ '-dirty'), scene generator source hash."""
    import subprocess

    import string_perception
    from string_perception.training.data import _scenes_source_hash
    commit = 'unknown'
    try:
        root = Path(string_perception.__file__).resolve().parent.parent
        commit = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip() or 'unknown'
        dirty = subprocess.run(['git', 'status', '--porcelain', '--', 'string_perception'], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit += '-dirty' if dirty else ''
    except (OSError, subprocess.SubprocessError):
        pass
    return {'package_version': string_perception.__version__, 'git_commit': commit,
            'scenes_source_sha256': _scenes_source_hash(), 'torch': str(torch.__version__)}


def save_training_checkpoint(path: Path, model, model_cfg, cfg: TrainConfig, optimizer, scheduler, step: int,
                             best: float | None, metrics: dict | None = None, train_seconds: float = 0.0) -> None:
    """Write a checkpoint (``step`` = optimiser steps done; ``train_seconds``: wall time of the training loop that
    reached it, summed over resumed parts) via ``model.save_checkpoint``."""
    from string_perception.model import save_checkpoint
    extra = {
        'train_config': cfg.to_dict(),
        'optimizer': optimizer.state_dict(),
        'scheduler': scheduler.state_dict(),
        'step': int(step),
        'best': best,
        'train_seconds': float(train_seconds),
        'rng': rng_state(),
        'metrics': dict(metrics or {}),
        'provenance': provenance(),
    }
    save_checkpoint(path, unwrap(model), model_cfg, extra)   # atomic (temp file + rename)


def release_checkpoint(src: str | Path, dst: str | Path) -> dict:
    """Ship a training checkpoint: weights, ViTDConfig, TrainConfig, step, validation metrics and provenance, without
    the optimiser / scheduler / RNG state (a third of the size; still ``model.load_checkpoint``-able, not
    resumable). Returns the written dict."""
    ck = load_training_checkpoint(src)
    keep = {k: ck[k] for k in ('train_config', 'step', 'best', 'train_seconds', 'metrics', 'provenance') if k in ck}
    from string_perception.model import ViTDConfig, build_model, save_checkpoint
    cfg = ViTDConfig.from_dict(ck['config'])
    model = build_model(cfg)
    model.load_state_dict(ck['model'])
    save_checkpoint(dst, model, cfg, keep)
    return load_training_checkpoint(dst)


def load_training_checkpoint(path: str | Path, map_location='cpu') -> dict:
    return torch.load(path, map_location=map_location, weights_only=True)


# ----------------------------------------------------------------------------------------------------------------
# Logging
# ----------------------------------------------------------------------------------------------------------------

class CsvLog:
    """Append rows to a CSV, the header from the first row's keys (new keys later are dropped)."""

    def __init__(self, path: Path):
        self.path = path
        self.fields: list[str] | None = None
        if path.exists() and path.stat().st_size:
            with path.open() as f:
                self.fields = next(csv.reader(f), None)

    def write(self, row: dict[str, Any]) -> None:
        new = self.fields is None
        if new:
            self.fields = list(row)
        with self.path.open('a', newline='') as f:
            w = csv.DictWriter(f, fieldnames=self.fields, extrasaction='ignore')
            if new:
                w.writeheader()
            w.writerow(row)


def make_tensorboard(out: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # tensorboard not installed
        return None
    return SummaryWriter(str(out / 'tb'))


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------

def _to(batch: dict, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[dict]]:
    image = batch['image'].to(device, non_blocking=True)   # [B,H,W,3] uint8
    depth = batch['depth'].to(device, non_blocking=True)   # [B,H,W] metres
    K = batch['K'].to(device, non_blocking=True)           # [B,3,3]
    targets = [{k: v.to(device) for k, v in t.items()} for t in batch['targets']]
    return image, depth, K, targets


def build_criterion(model_cfg, cfg: TrainConfig):
    """``assignment='hungarian'``: ``SetCriterion`` with ``loss_overrides``; a ``HungarianMatcher`` with
    ``matcher_overrides`` when given (else the criterion's own, whose costs equal the loss weights).
    ``assignment='dense'``: ``DenseCriterion`` (instance-mask assignment) with ``loss_overrides``."""
    if cfg.assignment == 'dense':
        from string_perception.training.dense_criterion import DenseCriterion
        kw = dict(cfg.loss_overrides)
        if kw.get('symmetric'):
            kw.setdefault('class_names', tuple(model_cfg.class_names))
        return DenseCriterion(num_classes=model_cfg.num_classes, patch_size=model_cfg.patch_size, **kw)
    from string_perception.matcher import HungarianMatcher
    from string_perception.training.losses import SetCriterion
    matcher = HungarianMatcher(**cfg.matcher_overrides) if cfg.matcher_overrides else None
    return SetCriterion(num_classes=model_cfg.num_classes, matcher=matcher, **cfg.loss_overrides)


def train(cfg: TrainConfig, resume: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Run (or continue) training; returns the final summary (rank 0's view)."""
    from string_perception.model import ViTD
    from string_perception.evaluation.evaluate import run_validation

    info = setup_distributed(cfg.device)
    try:
        if info.device.type == 'cpu' and cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        out = Path(cfg.out)
        ckpt = None
        if resume:
            ckpt = load_training_checkpoint(resume)
        model_cfg = build_model_config(cfg)
        if ckpt is not None:
            from string_perception.model import ViTDConfig
            model_cfg = ViTDConfig.from_dict(ckpt['config'])
        scene_cfg = build_scene_config(cfg, model_cfg)
        sim_cfg = build_sim_config(cfg, model_cfg)
        check_source_classes(cfg, model_cfg)
        if sim_cfg is not None and not cfg.cache:
            raise ValueError('simulated scenes are rendered into the frame cache by spawned processes; drop --no-cache')

        torch.manual_seed(cfg.seed)                      # same initial weights on every rank
        model = ViTD(model_cfg).to(info.device)
        criterion = build_criterion(model_cfg, cfg)
        optimizer = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas,
                                      fused=info.device.type == 'cuda')
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: lr_factor(s, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio))
        start_step, best, spent = 0, None, 0.0        # spent: training-loop seconds of the parts before this one
        if cfg.render_scale < 1:
            raise ValueError(f'render_scale must be >= 1, got {cfg.render_scale}')
        if ckpt is None and cfg.init_from:
            from string_perception.training.init import load_matching_weights
            report = load_matching_weights(model, cfg.init_from)
            if info.is_main:
                print(f'init from {cfg.init_from}: {report}', flush=True)
        if ckpt is not None:
            model.load_state_dict(ckpt['model'])
            optimizer.load_state_dict(ckpt['optimizer'])
            scheduler.load_state_dict(ckpt['scheduler'])
            start_step, best = int(ckpt['step']), ckpt.get('best')
            spent = float(ckpt.get('train_seconds', 0.0))   # 0 for checkpoints written before it was recorded
            set_rng_state(ckpt['rng'])
            del ckpt
        if info.enabled:
            model = DistributedDataParallel(model, device_ids=[info.device.index] if info.device.type == 'cuda'
                                            else None, find_unused_parameters=True)  # policy head: no loss

        # Data: this rank's shard of the training seeds, in an order fixed by (seed, position).
        train_set = make_dataset('train', cfg.num_train_frames, cfg.scenes, scene_cfg, sim_cfg,
                                 canonical_targets=cfg.canonical_targets, out_hw=frame_out_hw(cfg, model_cfg))
        if cfg.cache:
            t0 = time.perf_counter()
            cache_path = None
            if cfg.cache_file:
                cache_path = Path(cfg.cache_file)
                if info.enabled:
                    cache_path = cache_path.with_name(f'{cache_path.stem}.rank{info.rank}of{info.world_size}.npz')
            train_set.build_cache(shard_indices(len(train_set), info.rank, info.world_size),
                                  processes=max(1, cfg.num_workers), progress=progress and info.is_main,
                                  path=cache_path)
            if info.is_main:
                mb = train_set.cache.nbytes() / 2 ** 20
                print(f'cached {len(train_set.cache)} frames/rank ({mb:.0f} MB) in {time.perf_counter() - t0:.1f} s',
                      flush=True)
        loader = make_loader(train_set, cfg.batch_size, rank=info.rank, world_size=info.world_size, seed=cfg.seed,
                             start=start_step * cfg.batch_size, num_workers=0 if cfg.cache else cfg.num_workers)
        # Every rank validates on the same frames (the loss normaliser all-reduces), rank 0 writes the results.
        val_set = None
        if cfg.val_frames > 0:
            val_set = make_dataset('val', cfg.val_frames, cfg.scenes, scene_cfg, sim_cfg,
                                   canonical_targets=cfg.canonical_targets, out_hw=frame_out_hw(cfg, model_cfg))
            val_set.build_cache(processes=max(1, cfg.num_workers))

        logs = tb = None
        if info.is_main:
            out.mkdir(parents=True, exist_ok=True)
            (out / 'train_config.json').write_text(json.dumps(cfg.to_dict(), indent=2) + '\n')
            (out / 'model_config.json').write_text(json.dumps(model_cfg.to_dict(), indent=2) + '\n')
            logs = {'train': CsvLog(out / 'log.csv'), 'val': CsvLog(out / 'val.csv')}
            tb = make_tensorboard(out)

        bar = None
        if progress and info.is_main:
            from tqdm import tqdm
            bar = tqdm(total=cfg.steps, initial=start_step, desc='train', unit='step', dynamic_ncols=True)

        model.train()
        step = start_step
        data_iter = iter(loader)
        t_last, acc, n_acc = time.perf_counter(), {}, 0
        t_part = t_last                                  # this part's start

        def train_seconds() -> float:                   # the loop's wall time over all parts (a no-op part adds 0)
            return spent + (time.perf_counter() - t_part if step > start_step else 0.0)

        val_metrics: dict[str, float] = {}
        while step < cfg.steps:
            batch = next(data_iter)
            image, depth, K, targets = _to(batch, info.device)
            outputs = model(image, depth, K)
            losses = criterion(outputs, targets)           # dict of scalar tensors, 'loss' = weighted total
            loss = losses['loss']
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                       cfg.grad_clip if cfg.grad_clip > 0 else float('inf'))
            lr_used = optimizer.param_groups[0]['lr']
            optimizer.step()
            scheduler.step()
            step += 1

            for k, v in losses.items():
                acc[k] = acc.get(k, 0.0) + float(v.detach())
            acc['grad_norm'] = acc.get('grad_norm', 0.0) + float(grad_norm)
            n_acc += 1
            if bar is not None:
                bar.update(1)
            if step % cfg.log_every == 0 or step == cfg.steps:
                row = all_reduce_mean({k: v / n_acc for k, v in acc.items()}, info)
                now = time.perf_counter()
                if info.is_main:
                    frames_s = n_acc * cfg.batch_size * info.world_size / max(now - t_last, 1e-9)
                    row = {'step': step, 'lr': lr_used, **row, 'frames_per_s': frames_s,
                           'time': time.time()}
                    logs['train'].write(row)
                    if tb is not None:
                        for k, v in row.items():
                            if k not in ('step', 'time'):
                                tb.add_scalar(f'train/{k}', v, step)
                    if bar is not None:
                        bar.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{row['lr']:.2e}", refresh=False)
                t_last, acc, n_acc = now, {}, 0

            if step % cfg.val_every == 0 or step == cfg.steps:
                if val_set is not None:
                    val_metrics = run_validation(unwrap(model), criterion, val_set, cfg, info.device)
                    model.train()
                score = val_metrics.get(cfg.best_metric)
                improved = score is not None and (best is None or score > best)
                if improved:
                    best = float(score)
                if info.is_main:
                    if val_set is not None:
                        logs['val'].write({'step': step, **val_metrics, 'time': time.time()})
                        if tb is not None:
                            for k, v in val_metrics.items():
                                tb.add_scalar(f'val/{k}', v, step)
                        msg = ' '.join(f'{k}={v:.4f}' for k, v in val_metrics.items())
                        if bar is not None:
                            bar.write(f'[val step {step}] {msg}')
                        else:
                            print(f'[val step {step}] {msg}', flush=True)
                    save = functools.partial(save_training_checkpoint, model=model, model_cfg=model_cfg, cfg=cfg,
                                             optimizer=optimizer, scheduler=scheduler, step=step, best=best,
                                             metrics=val_metrics, train_seconds=train_seconds())
                    save(out / 'last.pt')
                    if improved:
                        save(out / 'best.pt')
                    if cfg.keep_every > 0 and step % cfg.keep_every == 0:
                        save(out / f'ckpt_{step:06d}.pt')
                if info.enabled:
                    dist.barrier()
        if bar is not None:
            bar.close()
        if tb is not None:
            tb.close()
        summary = {'step': step, 'best': best, 'best_metric': cfg.best_metric, 'val': val_metrics,
                   'train_seconds': train_seconds(),
                   'world_size': info.world_size, 'rank_weight_max_abs_diff': max_rank_divergence(model, info)}
        if info.is_main:
            (out / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
        if info.enabled:
            dist.barrier()      # tear the gloo group down together: a rank leaving early aborted at exit once
        return summary
    finally:
        cleanup_distributed()


# ----------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------

def _kv(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON when it parses (numbers, lists, true/false), else a string."""
    if '=' not in text:
        raise argparse.ArgumentTypeError(f'expected KEY=VALUE, got {text!r}')
    k, v = text.split('=', 1)
    try:
        return k, json.loads(v)
    except json.JSONDecodeError:
        return k, v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-train', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    S = argparse.SUPPRESS  # options left out keep the TrainConfig default (or the resumed run's value)
    p.add_argument('--preset', default=S, help='ViTDConfig preset (tiny | base)')
    m = p.add_argument_group('model overrides (ViTDConfig fields)')
    m.add_argument('--encoding', default=S, help='position encoding: none rope rope_mixed cayley circulant dense')
    m.add_argument('--coord-mode', default=S, help='grid_depth | camera_xyz')
    m.add_argument('--no-depth', action='store_true', default=S, help='RGB-only ViT (2D grid coordinates)')
    m.add_argument('--translation-mode', default=S, help='patch_offset | absolute')
    m.add_argument('--image-size', type=int, default=S, help='square input size')
    m.add_argument('--patch-size', type=int, default=S)
    m.add_argument('--width', type=int, default=S)
    m.add_argument('--layers', type=int, default=S, help='transformer depth')
    m.add_argument('--heads', type=int, default=S)
    m.add_argument('--model', type=_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='any other ViTDConfig field (JSON value)')
    o = p.add_argument_group('optimisation')
    o.add_argument('--steps', type=int, default=S)
    o.add_argument('--epochs', type=float, default=S, help='sets --steps from passes over --num-train-frames')
    o.add_argument('--batch-size', type=int, default=S, help='per rank')
    o.add_argument('--lr', type=float, default=S)
    o.add_argument('--min-lr-ratio', type=float, default=S)
    o.add_argument('--weight-decay', type=float, default=S)
    o.add_argument('--warmup-steps', type=int, default=S)
    o.add_argument('--grad-clip', type=float, default=S)
    o.add_argument('--seed', type=int, default=S)
    o.add_argument('--init-from', default=S, help='fine-tune: initialise from this checkpoint (matching weights; '
                   'class embeddings by class name)')
    o.add_argument('--loss', type=_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='SetCriterion keyword argument (JSON value), e.g. weights=\'{"corners": 10}\'')
    o.add_argument('--assignment', default=S, help='hungarian (one-to-one) | dense (one-to-many from masks)')
    o.add_argument('--matcher', type=_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='HungarianMatcher keyword argument (JSON value), e.g. cost_corners=10')
    d = p.add_argument_group('data')
    d.add_argument('--num-train-frames', type=int, default=S)
    d.add_argument('--render-scale', type=int, default=S, help='render frames at this multiple of the input size and '
                   'downscale them as the node does (runtime.preprocess)')
    d.add_argument('--no-cache', action='store_true', default=S, help='generate frames on the fly in workers')
    d.add_argument('--cache-file', default=S, help='keep the training-frame cache in this .npz and reuse it')
    d.add_argument('--num-workers', type=int, default=S)
    d.add_argument('--scene', type=_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='SceneConfig field of procedural frames (JSON value)')
    d.add_argument('--scenes', choices=SCENE_SOURCES, default=S,
                   help='frame source: procedural ray caster, simulated aloha / kuka cell, or mix (an even split of '
                        'the three by seed %% 3); validation uses held-out seeds of the same source')
    d.add_argument('--sim', type=_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='SimConfig field of simulated frames (JSON value); mesh_object_fraction=0 gives '
                        "primitive-only frames and the five-class model, else the classes add 'object'")
    r = p.add_argument_group('run')
    r.add_argument('--val-every', type=int, default=S)
    r.add_argument('--val-frames', type=int, default=S)
    r.add_argument('--keep-every', type=int, default=S, help='also keep ckpt_<step>.pt every N steps')
    r.add_argument('--best-metric', default=S)
    r.add_argument('--log-every', type=int, default=S)
    r.add_argument('--out', default=S, help='output directory')
    r.add_argument('--device', default=S, help='auto | cpu | cuda | cuda:N')
    r.add_argument('--threads', type=int, default=S, help='torch CPU threads per rank (0: default)')
    r.add_argument('--resume', default=None, help="checkpoint to continue, or 'auto' for OUT/last.pt if present")
    r.add_argument('--no-progress', action='store_true', help='no tqdm bar')
    return p


def config_from_args(args: argparse.Namespace, base: TrainConfig | None = None) -> TrainConfig:
    """Apply the options given on the command line over ``base`` (default: ``TrainConfig()``)."""
    given = vars(args)
    cfg = base if base is not None else TrainConfig()
    changes: dict[str, Any] = {}
    model = dict(cfg.model_overrides)
    for opt, key in (('encoding', 'encoding'), ('coord_mode', 'coord_mode'), ('translation_mode',
                     'translation_mode'), ('patch_size', 'patch_size'), ('width', 'width'), ('layers', 'depth'),
                     ('heads', 'num_heads')):
        if opt in given:
            model[key] = given[opt]
    if 'image_size' in given:
        model['image_size'] = [given['image_size'], given['image_size']]
    if given.get('no_depth'):
        model['use_depth'] = False
    model.update(dict(given.get('model', [])))
    changes['model_overrides'] = model
    changes['scene_overrides'] = {**cfg.scene_overrides, **dict(given.get('scene', []))}
    changes['sim_overrides'] = {**cfg.sim_overrides, **dict(given.get('sim', []))}
    changes['loss_overrides'] = {**cfg.loss_overrides, **dict(given.get('loss', []))}
    changes['matcher_overrides'] = {**cfg.matcher_overrides, **dict(given.get('matcher', []))}
    for name in ('preset', 'assignment', 'scenes', 'steps', 'batch_size', 'lr', 'min_lr_ratio', 'weight_decay',
                 'warmup_steps', 'grad_clip', 'seed', 'init_from', 'render_scale', 'num_train_frames', 'cache_file', 'num_workers', 'val_every',
                 'keep_every', 'val_frames', 'best_metric', 'log_every', 'out', 'device', 'threads'):
        if name in given:
            changes[name] = given[name]
    if given.get('no_cache'):
        changes['cache'] = False
    cfg = dataclasses.replace(cfg, **changes)
    if 'epochs' in given:
        world = int(os.environ.get('WORLD_SIZE', '1'))
        cfg.steps = max(1, math.ceil(given['epochs'] * cfg.num_train_frames / (cfg.batch_size * world)))
    return cfg


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    resume = args.resume
    base = None
    if resume == 'auto':
        out = Path(getattr(args, 'out', TrainConfig.out))
        resume = str(out / 'last.pt') if (out / 'last.pt').exists() else None
    if resume:
        base = TrainConfig.from_dict(load_training_checkpoint(resume)['train_config'])
    cfg = config_from_args(args, base)
    summary = train(cfg, resume=resume, progress=not args.no_progress)
    if int(os.environ.get('RANK', '0')) == 0:
        print(json.dumps({k: v for k, v in summary.items()}, default=float))
    return 0


if __name__ == '__main__':
    sys.exit(main())

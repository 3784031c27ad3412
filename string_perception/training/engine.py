"""The training loop and its validation (DETR's ``engine.py``): one run from a :class:`~.config.TrainConfig`.

:func:`train` builds the model (``config.build_model_config``), the criterion (:func:`build_criterion`), AdamW with
:func:`param_groups` and the one learning-rate schedule (``schedule.lr_factor`` through ``LambdaLR``), this rank's
data (``sources.make_dataset``, cached per rank), then steps: log every ``log_every`` steps (``log.csv``, TensorBoard
when it imports), validate every ``val_every`` steps (:func:`run_validation` -> ``val.csv``) and write ``last.pt`` /
``best.pt`` / ``ckpt_<step>.pt`` (``checkpoint.save_training_checkpoint``). Resume restores model, optimiser,
scheduler, step and RNG and the data order continues where it stopped. Under torchrun every rank runs this, rank 0
writes (``distributed.py``).
"""
from __future__ import annotations

import csv
import functools
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from string_perception.training.inference import evaluate_predictions, headline, predict
from string_perception.matcher import HungarianMatcher
from string_perception.model import ViTD, ViTDConfig
from string_perception.training.checkpoint import load_training_checkpoint, save_training_checkpoint, set_rng_state
from string_perception.training.config import (TrainConfig, build_model_config, build_scene_config, build_sim_config,
                                               check_source_classes, frame_out_hw)
from string_perception.training.data import make_loader, shard_indices
from string_perception.training.dense_criterion import DenseCriterion
from string_perception.training.distributed import (all_reduce_mean, cleanup_distributed, max_rank_divergence,
                                                    setup_distributed, unwrap)
from string_perception.training.init import load_matching_weights
from string_perception.training.losses import SetCriterion
from string_perception.training.sources import make_dataset
from string_perception.training.schedule import lr_factor


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
    """A TensorBoard ``SummaryWriter`` under ``out/tb``, or None when tensorboard is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # tensorboard not installed
        return None
    return SummaryWriter(str(out / 'tb'))


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------

def to_device(batch: dict, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[dict]]:
    """A collated batch (``data.collate``) on ``device`` -> ``(image, depth, K, targets)``."""
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
        kw = dict(cfg.loss_overrides)
        if kw.get('symmetric') or kw.get('class_weights'):
            kw.setdefault('class_names', tuple(model_cfg.class_names))
        return DenseCriterion(num_classes=model_cfg.num_classes, patch_size=model_cfg.patch_size, **kw)
    matcher = HungarianMatcher(**cfg.matcher_overrides) if cfg.matcher_overrides else None
    return SetCriterion(num_classes=model_cfg.num_classes, matcher=matcher, **cfg.loss_overrides)


def run_validation(model: torch.nn.Module, criterion, dataset, cfg: TrainConfig, device) -> dict[str, float]:
    """Validation numbers for the training loop: mean losses + headline metrics on ``dataset`` (strict and
    symmetry-aware: ``avg_best_iou_sym``, ``ap3d_25_sym``, ``ap3d_50_sym``, ...), decoded with ``cfg``'s
    ``score_threshold`` / ``nms_iou`` / ``max_detections``, plus ``op_*`` at ``cfg.operating_threshold``."""
    res = predict(model, dataset, device=device, batch_size=cfg.batch_size, criterion=criterion,
                  decode={'score_threshold': cfg.score_threshold, 'nms_iou': cfg.nms_iou,
                          'max_detections': cfg.max_detections})
    summary = evaluate_predictions(res['preds'], res['gts'], model.config.class_names,
                                   operating_threshold=cfg.operating_threshold, breakdown=False)
    return {**{f'loss_{k}' if k != 'loss' else 'loss': v for k, v in res['losses'].items()}, **headline(summary)}


def train(cfg: TrainConfig, resume: str | None = None, progress: bool = True, data_only: bool = False
          ) -> dict[str, Any]:
    """Run (or continue) training; returns the final summary (rank 0's view). ``data_only``: build the run's
    training frame cache (``cache_file``, so a later run loads it) and return ``{'cached_frames': n}`` without
    loading ``init_from``, training or validating: the frames of a stage can render before its start exists."""
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
        if data_only and not (cfg.cache and cfg.cache_file):
            raise ValueError('data_only needs cache and a cache_file to keep the frames in')
        if ckpt is None and cfg.init_from and not data_only:
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
                                 offset=cfg.train_offset, canonical_targets=cfg.canonical_targets,
                                 out_hw=frame_out_hw(cfg, model_cfg))
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
        if data_only:
            return {'cached_frames': len(train_set.cache)}        # cache and cache_file: checked above
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
            image, depth, K, targets = to_device(batch, info.device)
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


__all__ = ['param_groups', 'CsvLog', 'make_tensorboard', 'build_criterion', 'run_validation', 'train']

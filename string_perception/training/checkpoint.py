"""Training checkpoints (nanoGPT style): write, read, resume state, and release a shippable copy.

A training checkpoint is ``model.save_checkpoint``'s file (weights + ``ViTDConfig`` dict) plus ``train_config`` (the
:class:`~.config.TrainConfig` dict), ``optimizer`` / ``scheduler`` state, ``step`` (optimiser steps done), ``best``
(best validation metric so far), ``train_seconds`` (the training loop's wall time, summed over resumed parts),
``rng`` (torch / CUDA generator states), ``metrics`` (the last validation) and ``provenance`` (package version, git
commit, scene generator source hash, torch version); every entry loads with ``torch.load(weights_only=True)``.
:func:`release_checkpoint` drops the optimiser / scheduler / RNG state: what ``models/*.pt`` ship.
"""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import torch

import string_perception
from string_perception.model import ViTDConfig, build_model, save_checkpoint
from string_perception.training.config import TrainConfig
from string_perception.training.data import scenes_source_hash
from string_perception.training.distributed import unwrap


def rng_state() -> dict[str, Any]:
    """The torch (and, when present, every CUDA device's) random generator state, to resume a run exactly."""
    state = {'torch': torch.get_rng_state()}
    if torch.cuda.is_available():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a :func:`rng_state` (the CUDA part only where CUDA is available)."""
    torch.set_rng_state(state['torch'])
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state['cuda'])


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, str]:
    """Where the weights came from: package version, git commit (+ '-dirty'), scene generator source hash."""
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
            'scenes_source_sha256': scenes_source_hash(), 'torch': str(torch.__version__)}


def save_training_checkpoint(path: Path, model, model_cfg, cfg: TrainConfig, optimizer, scheduler, step: int,
                             best: float | None, metrics: dict | None = None, train_seconds: float = 0.0) -> None:
    """Write a checkpoint (``step`` = optimiser steps done; ``train_seconds``: wall time of the training loop that
    reached it, summed over resumed parts) via ``model.save_checkpoint``."""
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
    cfg = ViTDConfig.from_dict(ck['config'])
    model = build_model(cfg)
    model.load_state_dict(ck['model'])
    save_checkpoint(dst, model, cfg, keep)
    return load_training_checkpoint(dst)


def load_training_checkpoint(path: str | Path, map_location='cpu') -> dict:
    """A checkpoint's dict, loaded with ``weights_only=True`` (no pickled code runs)."""
    return torch.load(path, map_location=map_location, weights_only=True)


__all__ = ['rng_state', 'set_rng_state', 'provenance', 'save_training_checkpoint', 'release_checkpoint',
           'load_training_checkpoint']

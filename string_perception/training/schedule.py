"""The one learning-rate schedule of every trainer: linear warm-up, then cosine decay to a floor.

``lr_factor(step, warmup_steps, total_steps, min_ratio)`` is the multiplier of the peak learning rate at optimiser
step ``step`` (0-based): the detector (``training/engine.py``, through ``torch.optim.lr_scheduler.LambdaLR``), the
policy (``policy/train_bc.py``) and the benchmark fine-tunes all call it, so one formula decides every run's curve.
Pure Python (``math``), no torch: the same float for the same arguments on every machine.
"""
from __future__ import annotations

import math


def lr_factor(step: int, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """Multiplier of the peak lr at ``step``: ``(step + 1) / warmup_steps`` while ``step < warmup_steps`` (linear
    warm-up from lr/warmup to lr), then ``min_ratio + (1 - min_ratio) * (1 + cos(pi * progress)) / 2`` with
    ``progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)`` clamped to 1 (cosine from 1 down to
    ``min_ratio`` at ``total_steps``, flat after it). ``min_ratio=0`` decays to 0; ``warmup_steps=0`` starts at 1."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


__all__ = ['lr_factor']

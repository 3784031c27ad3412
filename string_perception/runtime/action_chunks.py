"""Action chunks -> one joint command per control step: ACT's temporal ensembling (Zhao et al. 2023, §3.3).

A chunking policy predicts the next ``K`` actions at every query. Several chunks then cover the same future step;
ACT executes their weighted mean with weights ``exp(-m * i)``, ``i = 0`` for the OLDEST prediction of that step
(older predictions weigh more, so the executed trajectory is smooth; ``m`` small = more averaging). Querying every
``q`` steps instead of every step (``q = K`` is plain open-loop chunking) needs no change here: a step is covered
by the chunks whose span contains it.

Pure numpy: the offline rollout and the ROS policy node use this same class, so both execute the same actions.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

__all__ = ['TemporalEnsemble']


class TemporalEnsemble:
    """Chunks added at control steps; :meth:`action` is the ensembled command for a step.

    ``add(step, chunk)`` with chunk [K, J] predicted at ``step`` (chunk[0] is the action for ``step``);
    ``action(step)`` -> [J] float64, or ``None`` when no stored chunk covers ``step``. Steps must not go back in
    time; chunks that end before the requested step are dropped.
    """

    def __init__(self, chunk_size: int, action_dim: int, m: float = 0.01):
        if int(chunk_size) != chunk_size or chunk_size < 1:
            raise ValueError(f'chunk_size must be an integer >= 1, got {chunk_size!r}')
        if int(action_dim) != action_dim or action_dim < 1:
            raise ValueError(f'action_dim must be an integer >= 1, got {action_dim!r}')
        if not math.isfinite(m) or m < 0:
            raise ValueError(f'm must be finite and >= 0, got {m!r}')
        self.chunk_size, self.action_dim, self.m = int(chunk_size), int(action_dim), float(m)
        self._chunks: deque[tuple[int, np.ndarray]] = deque()   # (step it was predicted at, [K,J]), oldest first
        self._last_step: int | None = None

    def reset(self) -> None:
        self._chunks.clear()
        self._last_step = None

    def __len__(self) -> int:
        return len(self._chunks)

    def add(self, step: int, chunk: np.ndarray) -> None:
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.shape != (self.chunk_size, self.action_dim):
            raise ValueError(f'chunk must be [{self.chunk_size}, {self.action_dim}], got {chunk.shape}')
        if not np.isfinite(chunk).all():
            raise ValueError('chunk has non-finite actions')
        if self._chunks and step < self._chunks[-1][0]:
            raise ValueError(f'chunk for step {step} added after one for step {self._chunks[-1][0]}')
        self._chunks.append((int(step), chunk))

    def action(self, step: int) -> np.ndarray | None:
        if self._last_step is not None and step < self._last_step:
            raise ValueError(f'step {step} requested after step {self._last_step}')
        self._last_step = step
        while self._chunks and self._chunks[0][0] + self.chunk_size <= step:     # ended before this step
            self._chunks.popleft()
        preds = [c[step - s] for s, c in self._chunks if s <= step]             # oldest first, each [J]
        if not preds:
            return None
        w = np.exp(-self.m * np.arange(len(preds)))                             # [n], oldest weighs most
        return (w[:, None] * np.stack(preds)).sum(0) / w.sum()                  # [J]

"""One control step of a chunking policy from stamped inputs (no ROS, no torch): the policy node's core.

:class:`PolicyStepper` turns ``(stamp, embedding [E], qpos [J])`` into the joint targets [J] to execute at that
stamp. The control step index is the stamp's offset from the episode's first stamp in control periods
(``round((stamp - start) * control_rate_hz)``), so a missed input still advances time and the ensemble picks the
right entry of every stored chunk. The policy is queried at steps ``0, q, 2q, ...`` (``q = query_every``) and,
additionally, at any step no stored chunk covers (after misses); :class:`TemporalEnsemble` gives the command. A
stamp before the previous one, or more than ``episode_gap_s`` after it, starts a new episode (the ensemble is
cleared), as when a simulator resets or a bag loops. A policy whose metadata says ``embedding_latch:
'episode_start'`` is given, at every query, the embedding of its episode's first step (kept until the next
episode) instead of the current one.

Bad inputs raise :class:`InputError` (``bad_shape``, ``non_finite``, ``out_of_order`` for a repeated stamp)
before any state changes, so the stepper goes on with the next good input.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .action_chunks import TemporalEnsemble
from .errors import InputError

__all__ = ['PolicyStepper', 'StepResult']


@dataclass(frozen=True)
class StepResult:
    action: np.ndarray       # float64 [J] joint targets for this stamp
    step: int                # control step index within the episode
    queried: bool            # the policy ran for this step
    new_episode: bool        # this stamp started an episode


class PolicyStepper:
    """``model``: anything with ``metadata`` (PolicyMetadata) and ``predict(embedding, qpos) -> [B,K,J]``."""

    def __init__(self, model, *, query_every: int | None = None, temporal_ensemble_m: float | None = None,
                 episode_gap_s: float = 0.5):
        meta = model.metadata
        q = meta.query_every if query_every in (None, 0) else int(query_every)
        if not 1 <= q <= meta.chunk_size:
            raise ValueError(f'query_every must be in [1, chunk_size={meta.chunk_size}], got {q}')
        m = meta.temporal_ensemble_m if temporal_ensemble_m is None or temporal_ensemble_m < 0 \
            else float(temporal_ensemble_m)
        if episode_gap_s <= 0:
            raise ValueError(f'episode_gap_s must be > 0, got {episode_gap_s}')
        self.model, self.query_every, self.m = model, q, float(m)
        self.period_ns = 1e9 / float(meta.control_rate_hz)
        self.gap_ns = int(episode_gap_s * 1e9)
        self.ensemble = TemporalEnsemble(meta.chunk_size, meta.action_dim, self.m)
        self._start_ns: int | None = None
        self._last_ns: int | None = None
        self._last_query: int | None = None       # step of the newest chunk
        self._latch = meta.embedding_latch == 'episode_start'
        self._first_embedding: np.ndarray | None = None   # [E], with the latch
        self.queries = 0

    def reset(self) -> None:
        self.ensemble.reset()
        self._start_ns = self._last_ns = self._last_query = None
        self._first_embedding = None

    def _check(self, embedding: np.ndarray, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        meta = self.model.metadata
        e = np.asarray(embedding, np.float32).reshape(-1)          # [E] (a 1 x E image row)
        q = np.asarray(qpos, np.float32).reshape(-1)               # [J]
        if e.shape != (meta.embed_dim,) or q.shape != (meta.action_dim,):
            raise InputError('bad_shape', f'the policy takes an embedding of {meta.embed_dim} and {meta.action_dim} '
                                          f'joint positions, got {e.size} and {q.size}')
        if not (np.isfinite(e).all() and np.isfinite(q).all()):
            raise InputError('non_finite', 'embedding or joint positions contain NaN or inf')
        return e, q

    def __call__(self, stamp_ns: int, embedding: np.ndarray, qpos: np.ndarray) -> StepResult:
        e, q = self._check(embedding, qpos)
        stamp_ns = int(stamp_ns)
        if self._last_ns is not None and stamp_ns == self._last_ns:
            raise InputError('out_of_order', f'stamp {stamp_ns} ns was answered already')
        new = self._last_ns is None or stamp_ns < self._last_ns or stamp_ns - self._last_ns > self.gap_ns
        if new:
            self.ensemble.reset()
            self._start_ns, self._last_query = stamp_ns, None
            self._first_embedding = e if self._latch else None
        if self._first_embedding is not None:
            e = self._first_embedding
        step = int(round((stamp_ns - self._start_ns) / self.period_ns))
        queried = step % self.query_every == 0 or not self._covered(step)
        if queried:
            chunk = self.model.predict(e[None], q[None])[0]          # [K,J]
            self.ensemble.add(step, chunk)
            self._last_query = step
            self.queries += 1
        self._last_ns = stamp_ns
        return StepResult(self.ensemble.action(step), step, queried, new)

    def _covered(self, step: int) -> bool:
        """The newest chunk covers ``step`` (chunks are added in step order, so older ones end no later)."""
        return self._last_query is not None and self._last_query <= step < self._last_query + self.ensemble.chunk_size

"""Unblocks an approximate-time synchroniser that stopped matching while every input keeps arriving (ROS-free).

The message_filters synchroniser (the real one and ``message_filters_fallback``) keeps ``queue_size`` stamps per input and, when
a queue overflows, drops its OLDEST stamp. Eleven messages on one input stamped ahead of the others (a driver
whose clock disagrees, a bag replayed beside a live camera) fill that queue with future stamps: every good message
that follows is then the oldest, dropped at once, never matched, until the clock catches up (1 h ahead: an hour).

:class:`SyncWatchdog` sees it from outside, through the contract both synchronisers share (``sync.queues``: one
``{stamp_ns: msg}`` dict per input, in input order, mutated in place under ``sync.lock``):

- ``arrived(name, now_ns)`` for every input message (before the synchroniser takes it), ``synced(now_ns)`` for
  every output; ``now_ns`` monotonic;
- ``stuck(now_ns)``: for at least ``timeout_s`` EVERY input has been arriving (its first message since the last
  progress is ``timeout_s`` old, its latest younger than ``timeout_s``) and nothing was synchronised. A silent
  input is not this (the node's ``missing_<input>``), nor is a pause in the callbacks (a long inline frame): the
  inputs must have arrived all along;
- ``recover(sync, ...)`` drops what blocks the queues and returns a :class:`Recovery` (causes, one-line reason).
  The reference time is the median of the inputs' newest queued stamps (and the node clock, given
  ``clock_ns`` and ``future_ns``): entries more than ``slop`` after it are dropped (``ahead_<input>``); an input
  whose newest stamp lags it by more than ``slop`` loses its older entries (``behind_<input>``: stale or stuck
  stamps); when neither explains it, or the previous recovery was not followed by any output (the majority was
  wrong: two inputs ahead and no node clock), every queue is cleared (``unmatched``).
  The good messages still queued stay, so the next good frame is answered at once.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ['SyncWatchdog', 'Recovery']

S_TO_NS = 1_000_000_000


@dataclass
class Recovery:
    """What :meth:`SyncWatchdog.recover` did: ``causes`` (``ahead_<input>``, ``behind_<input>``, ``unmatched``),
    ``dropped`` queued messages per input, ``reason`` (one log line)."""
    causes: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    reason: str = ''


def _median_newest(queues) -> int | None:
    """The (upper) median of the non-empty queues' newest stamps: the majority's idea of now."""
    newest = sorted(max(q) for q in queues if q)
    return newest[len(newest) // 2] if newest else None


class SyncWatchdog:
    """See the module docstring. ``inputs``: the synchroniser's input names in its input order."""

    def __init__(self, inputs: Sequence[str], timeout_s: float):
        self.inputs = tuple(inputs)
        self.timeout_s = float(timeout_s)
        self._first: dict[str, int | None] = dict.fromkeys(self.inputs)   # first arrival since the last progress
        self._last: dict[str, int | None] = dict.fromkeys(self.inputs)
        self.recoveries = 0
        self._unanswered = False     # a recovery not yet followed by an output

    def arrived(self, name: str, now_ns: int) -> None:
        if self._first[name] is None:
            self._first[name] = int(now_ns)
        self._last[name] = int(now_ns)

    def synced(self, now_ns: int | None = None) -> None:
        """Progress: the arrival windows start again."""
        self._first = dict.fromkeys(self.inputs)
        self._unanswered = False

    def stuck(self, now_ns: int) -> bool:
        limit = self.timeout_s * S_TO_NS
        return all(first is not None and now_ns - first >= limit and now_ns - self._last[n] < limit
                   for n, first in self._first.items())

    def recover(self, sync, slop_ns: int, clock_ns: int | None = None, future_ns: int = 0) -> Recovery:
        """Drop what blocks ``sync.queues`` (see the module docstring); ``slop_ns``: the synchroniser's slop;
        ``clock_ns``/``future_ns``: stamps more than ``future_ns`` (> 0) after the node clock are ahead too."""
        rec = Recovery()
        lock = getattr(sync, 'lock', None)
        with lock if lock is not None else contextlib.nullcontext():
            queues = list(sync.queues)
            ref = None if self._unanswered else _median_newest(queues)
            if ref is not None and clock_ns is not None and future_ns > 0:
                ref = min(ref, clock_ns + max(future_ns, slop_ns))
            notes = []
            for name, q in zip(self.inputs, queues):          # ahead of the others (or of the node clock)
                ahead = [s for s in q if s > ref + slop_ns] if ref is not None else []
                if ahead:
                    lead = (max(ahead) - ref) / S_TO_NS
                    self._drop(q, ahead, name, rec, f'ahead_{name}')
                    notes.append(f'{len(ahead)} {name} stamp(s) up to {lead:.3f} s ahead of the other inputs')
            ref = None if self._unanswered else _median_newest(queues)
            for name, q in zip(self.inputs, queues):          # behind the others: stale or stuck stamps
                if q and ref is not None and max(q) < ref - slop_ns:
                    lag = (ref - max(q)) / S_TO_NS
                    self._drop(q, list(q), name, rec, f'behind_{name}')
                    notes.append(f'{name} stamps {lag:.3f} s behind the other inputs (stale or stuck clock?)')
            if not rec.causes:
                why = 'the previous recovery did not help' if self._unanswered else 'no stamps within sync_slop'
                spans = ', '.join(f'{n} {len(q)}' for n, q in zip(self.inputs, queues))
                for name, q in zip(self.inputs, queues):
                    self._drop(q, list(q), name, rec, None)
                rec.causes.append('unmatched')
                notes.append(f'{why} (queued: {spans}); queues cleared')
        self.recoveries += 1
        self.synced()
        self._unanswered = True
        rec.reason = (f'nothing synchronised for {self.timeout_s:g} s while every input arrives: '
                      + '; '.join(notes) + ' — dropped, the next matching frame is processed')
        return rec

    @staticmethod
    def _drop(q: dict, stamps, name: str, rec: Recovery, cause: str | None) -> None:
        for s in stamps:
            del q[s]
        if stamps:
            rec.dropped[name] = rec.dropped.get(name, 0) + len(stamps)
        if cause is not None:
            rec.causes.append(cause)

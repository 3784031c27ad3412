"""Merge rules of tiled inference: which window candidates enter the merged list, and with what score.

The windows of :mod:`.tiling` see the frame zoomed in, and they fire on things the whole-frame pass does not call
objects (arm links, tray walls, table texture): with every window candidate in the merge, precision collapses
(docs/results/tiling_precision.md). The rules here act on the candidates of every pass BEFORE the runtime's
decoding (threshold, top-k, NMS), in pure numpy, and only on window candidates (passes ``1..P-1``); the full-frame
pass (pass 0) is never changed.

- **Confirmation** (``confirm = c > 0``): a window candidate is confirmed when a *source* candidate scoring
  ``>= c`` has its centre within ``radius`` x the window box's half diagonal (its circumscribed sphere, scaled) of
  the window box's centre. Sources: the full frame's in-frame candidates, and with ``cross`` the candidates of the
  OTHER windows too (those the border rule kept). A confirmed candidate keeps its own (better-localised) geometry;
  an unconfirmed one is dropped (``unconfirmed = 0``) or its score multiplied by ``unconfirmed``.
- **Window score scale** (``window_scale = f``): every window candidate's score is multiplied by ``f`` (before
  the confirmation rule's own changes), so it ranks under a full-frame candidate of equal score.
- **Replacement** (``replace``, with confirmation): a full-frame candidate that confirms a window candidate leaves
  the merge: the window's box of that object, better placed, stands for it, and the two do not both survive the
  NMS as a duplicate when they disagree on size or class.

Scores are sigmoid probabilities of the best class logit (:mod:`.postprocess`). A score change is a shift of all
of the token's class logits by one amount (the best class, the class order and argmax stay), so that the decoder's
``sigmoid(max logit)`` is the new score; rows whose score does not change are passed on unchanged, and with every
rule off (:attr:`MergeRule.active` False) the pipeline merges with :func:`.tiling.merge_candidates` as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.special import expit

__all__ = ['MergeRule', 'candidate_scores', 'near_sources', 'confirmed_by', 'shift_to_score', 'merge_tiled']


@dataclass(frozen=True)
class MergeRule:
    """The window-candidate rules (module docstring); the defaults change nothing (the tiled mode's own default is
    :data:`.tiling.DEFAULT_MERGE`). ``radius``, ``cross``, ``unconfirmed`` and ``replace`` act only with
    ``confirm > 0``."""

    confirm: float = 0.0          # 0 = off; else a confirming source candidate scores >= this, in (0, 1]
    radius: float = 1.0           # centre distance <= radius x the window box's half diagonal, > 0
    cross: bool = False           # another window's candidate confirms too (not only the full frame's)
    unconfirmed: float = 0.0      # unconfirmed window candidates: 0 = dropped, else score x this, in [0, 1]
    window_scale: float = 1.0     # every window candidate's score x this, in (0, 1]
    replace: bool = False         # a full-frame candidate that confirms a window candidate leaves the merge

    def __post_init__(self):
        if not (0.0 <= self.confirm <= 1.0):
            raise ValueError(f'confirm must be in [0, 1] (0 = off), got {self.confirm}')
        if not (self.radius > 0.0 and np.isfinite(self.radius)):
            raise ValueError(f'radius must be > 0, got {self.radius}')
        if not (0.0 <= self.unconfirmed <= 1.0):
            raise ValueError(f'unconfirmed must be in [0, 1] (0 = drop), got {self.unconfirmed}')
        if not (0.0 < self.window_scale <= 1.0):
            raise ValueError(f'window_scale must be in (0, 1], got {self.window_scale}')

    @property
    def active(self) -> bool:
        """Whether any rule changes the merged list."""
        return self.confirm > 0.0 or self.window_scale != 1.0


def candidate_scores(logits: np.ndarray) -> np.ndarray:
    """``logits[N,C]`` -> ``[N]`` the decoder's score, sigmoid of the best logit (NaN where a logit is not finite)."""
    lg = np.asarray(logits, np.float64)
    with np.errstate(invalid='ignore'):
        s = expit(lg.max(axis=1)) if lg.shape[1] else np.zeros(len(lg))       # [N]
    s[~np.isfinite(lg).all(axis=1)] = np.nan
    return s


def _usable(boxes: np.ndarray) -> np.ndarray:
    """bool ``[N]``: box rows with finite numbers and positive sizes (a geometry a confirmation can use)."""
    b = np.asarray(boxes, np.float64)
    with np.errstate(invalid='ignore'):
        return np.isfinite(b).all(axis=1) & (b[:, 9:12] > 0).all(axis=1)


def near_sources(boxes: np.ndarray, sources: np.ndarray, radius: float) -> np.ndarray:
    """bool ``[n,m]``: which of ``sources[m,12]`` lie near each of ``boxes[n,12]``: the source's centre within
    ``radius`` x the box's half diagonal of the box's centre. Rows that are not finite or have a non-positive size
    are near nothing."""
    b = np.asarray(boxes, np.float64)
    s = np.asarray(sources, np.float64)
    near = np.zeros((len(b), len(s)), bool)
    ok_b, ok_s = _usable(b), _usable(s)
    if not ok_b.any() or not ok_s.any():
        return near
    bi, si = np.flatnonzero(ok_b), np.flatnonzero(ok_s)
    d = np.linalg.norm(b[bi, None, 0:3] - s[None, si, 0:3], axis=-1)            # [n',m'] centre distances
    reach = radius * 0.5 * np.linalg.norm(b[bi, 9:12], axis=1)                  # [n'] scaled half diagonals
    near[np.ix_(bi, si)] = d <= reach[:, None]
    return near


def confirmed_by(boxes: np.ndarray, sources: np.ndarray, source_scores: np.ndarray,
                 radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``boxes[n,12]`` a source confirms: ``sources[m,12]`` with ``source_scores[m]`` (already the ones
    scoring >= the threshold) -> ``(confirmed bool [n], best confirming score [n], NaN where none)``; a source
    confirms a box it is near (:func:`near_sources`)."""
    near = near_sources(boxes, sources, radius)                                 # [n,m]
    sc = np.where(near, np.asarray(source_scores, np.float64)[None, :], -np.inf)   # [n,m]
    top = sc.max(axis=1) if sc.shape[1] else np.full(len(sc), -np.inf)         # [n]
    best = np.where(np.isfinite(top), top, np.nan)
    return ~np.isnan(best), best


def shift_to_score(logits: np.ndarray, target_logit: np.ndarray) -> np.ndarray:
    """``logits[n,C]`` shifted row by row so that each row's best logit equals ``target_logit[n]`` (the score
    becomes ``sigmoid(target)``; class order kept). Rows whose target equals their best logit come back as they
    were, bit for bit."""
    lg = np.asarray(logits, np.float64)
    t = np.asarray(target_logit, np.float64)
    top = lg.max(axis=1)                                                        # [n]
    same = t == top
    out = lg + (t - top)[:, None]                                               # [n,C]
    out[same] = lg[same]
    return out


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log(sigmoid(x)), stable for large |x|."""
    return -np.logaddexp(0.0, -x)


def _logit_of_scaled(top_logit: np.ndarray, factor: float | np.ndarray) -> np.ndarray:
    """logit(factor x sigmoid(top_logit)) for ``factor`` in (0, 1], stable; exactly ``top_logit`` where factor is 1."""
    f = np.broadcast_to(np.asarray(factor, np.float64), top_logit.shape)
    with np.errstate(divide='ignore'):
        log_q = np.log(f) + _log_sigmoid(top_logit)                            # log(f p)
        out = log_q - np.log(-np.expm1(log_q))                                 # log(q) - log(1 - q)
    return np.where(f == 1.0, top_logit, out)


def merge_tiled(boxes: np.ndarray, logits: np.ndarray, keeps: Sequence[np.ndarray | None],
                full_tokens: np.ndarray | None, rule: MergeRule
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One candidate list from ``P`` passes, pass 0 the full frame: ``boxes[P,N,12]``, ``logits[P,N,C]``,
    ``keeps[p]`` (token indices of pass ``p`` entering the merge, None = all; the full frame's may be empty when
    its boxes stay out), ``full_tokens`` (the full frame's in-frame token indices, None = all: the confirmation
    sources even when its boxes stay out) -> ``(boxes [M,12], logits [M,C], index [M])``, ``index`` numbering the
    tokens of all passes in order (pass ``p``'s token ``j`` is ``p * N + j``), as
    :func:`.tiling.merge_candidates`, with ``rule`` applied to the window candidates (module docstring). With no
    rule active the candidates are those of ``merge_candidates`` (logits as float64): callers use that then. A
    window row with a non-finite number is never confirmed: down-weighted it stays non-finite (the decoder drops
    and counts it), dropped (``unconfirmed = 0``) it is not counted."""
    P, N = len(boxes), (len(boxes[0]) if len(boxes) else 0)
    idx = [np.arange(N) if k is None else np.asarray(k, np.int64) for k in keeps]            # [n_p] per pass
    scores = [candidate_scores(logits[p]) for p in range(P)]                                   # [N] per pass
    with np.errstate(invalid='ignore'):
        full_src = np.arange(N) if full_tokens is None else np.asarray(full_tokens, np.int64)
        full_src = full_src[scores[0][full_src] >= rule.confirm] if rule.confirm > 0 else full_src[:0]
        win_src = [i[scores[p][i] >= rule.confirm] if rule.confirm > 0 else i[:0] for p, i in enumerate(idx)]
    out_idx, out_lg = [idx[0]], [np.asarray(logits[0], np.float64)[idx[0]]]
    replaced = np.zeros(len(full_src), bool)                                    # full-frame sources that confirm
    for p in range(1, P):
        i = idx[p]
        lg = np.asarray(logits[p], np.float64)[i]                              # [n,C]
        top = lg.max(axis=1) if lg.shape[1] else np.zeros(len(i))              # [n] best logits
        target = _logit_of_scaled(top, rule.window_scale)                      # [n]
        keep = np.ones(len(i), bool)
        if rule.confirm > 0:
            src_b = [np.asarray(boxes[0])[full_src]]
            src_s = [scores[0][full_src]]
            if rule.cross:
                for q in range(1, P):
                    if q != p:
                        src_b.append(np.asarray(boxes[q])[win_src[q]])
                        src_s.append(scores[q][win_src[q]])
            ok, _ = confirmed_by(np.asarray(boxes[p])[i], np.concatenate(src_b), np.concatenate(src_s),
                                 rule.radius)
            if rule.replace:
                replaced |= near_sources(np.asarray(boxes[p])[i[ok]], src_b[0], rule.radius).any(axis=0)
            if rule.unconfirmed == 0.0:
                keep = ok
            else:
                target = np.where(ok, target, _logit_of_scaled(target, rule.unconfirmed))
        out_idx.append(i[keep])
        out_lg.append(shift_to_score(lg[keep], target[keep]))
    if replaced.any():
        stay = ~np.isin(idx[0], full_src[replaced])                            # [n_0]
        out_idx[0], out_lg[0] = idx[0][stay], out_lg[0][stay]
    b = np.concatenate([np.asarray(boxes[p])[out_idx[p]] for p in range(P)])                 # [M,12]
    index = np.concatenate([out_idx[p] + p * N for p in range(P)]).astype(np.int64)           # [M]
    return b, np.concatenate(out_lg), index

"""Evaluation figures written to PNG: IoU histogram, PR curves, latency histogram.

Uses ``matplotlib.figure.Figure`` with the Agg canvas directly (no ``pyplot``): no display, no global backend
switch, no figure leaks, safe in worker threads. Every function returns the path it wrote.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def _save(fig: Figure, path: str | Path, dpi: int) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=dpi)
    return path


def plot_iou_histogram(ious: Sequence[float], path: str | Path, bins: int = 20,
                       thresholds: Sequence[float] = (0.25, 0.5), title: str = 'Best 3D IoU per ground-truth box',
                       dpi: int = 100) -> Path:
    """Histogram of per-object IoUs in ``[0, 1]`` (e.g. ``metrics.best_iou_per_gt``) with the mean and the AP
    thresholds marked."""
    ious = np.asarray(ious, dtype=np.float64).reshape(-1)
    fig = Figure(figsize=(6, 4), layout='constrained')
    ax = fig.add_subplot()
    ax.hist(ious, bins=bins, range=(0.0, 1.0), color='tab:blue', edgecolor='white')
    for t in thresholds:
        ax.axvline(t, color='gray', ls=':', lw=1)
    if len(ious):
        ax.axvline(ious.mean(), color='tab:red', lw=2, label=f'mean {ious.mean():.3f} (n={len(ious)})')
        ax.legend(loc='upper left')
    ax.set(xlim=(0, 1), xlabel='3D IoU', ylabel='objects', title=title)
    return _save(fig, path, dpi)


def _curve(c: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(c, Mapping):
        return np.asarray(c['precision'], float), np.asarray(c['recall'], float)
    precision, recall = c
    return np.asarray(precision, float), np.asarray(recall, float)


def plot_pr_curves(curves: Mapping[str, Any], path: str | Path, title: str = 'Precision-recall',
                   ap: Mapping[str, float | None] | None = None, dpi: int = 100) -> Path:
    """One precision-recall curve per entry: ``{name: {'precision': [...], 'recall': [...]}}`` (the shape of
    ``metrics.summarize(..., include_curves=True)['pr_curves']['0.5']``) or ``{name: (precision, recall)}``.
    ``ap`` (``{name: AP}``) adds the AP to the legend. Curves are drawn as their interpolated envelope."""
    fig = Figure(figsize=(6, 5), layout='constrained')
    ax = fig.add_subplot()
    for name, c in curves.items():
        precision, recall = _curve(c)
        if len(precision) == 0:
            continue
        envelope = np.maximum.accumulate(precision[::-1])[::-1]
        label = name if not ap or ap.get(name) is None else f'{name} (AP {ap[name]:.3f})'
        ax.step(np.concatenate([[0.0], recall]), np.concatenate([[envelope[0]], envelope]), where='pre',
                label=label)
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel='recall', ylabel='precision', title=title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc='lower left', fontsize='small')
    return _save(fig, path, dpi)


def plot_latency_histogram(latencies_ms: Sequence[float], path: str | Path, bins: int = 50,
                           title: str = 'Latency', budget_ms: float | None = None, dpi: int = 100) -> Path:
    """Histogram of per-frame latencies (milliseconds) with p50 / p90 / p99 (and an optional budget) marked."""
    lat = np.asarray(latencies_ms, dtype=np.float64).reshape(-1)
    lat = lat[np.isfinite(lat)]
    fig = Figure(figsize=(6, 4), layout='constrained')
    ax = fig.add_subplot()
    if len(lat):
        ax.hist(lat, bins=bins, color='tab:green', edgecolor='white')
        for q, style in ((50, '-'), (90, '--'), (99, ':')):
            v = np.percentile(lat, q)
            ax.axvline(v, color='black', ls=style, lw=1, label=f'p{q} {v:.2f} ms')
    if budget_ms is not None:
        ax.axvline(budget_ms, color='tab:red', lw=2, label=f'budget {budget_ms:g} ms')
    ax.set(xlabel='latency [ms]', ylabel='frames', title=f'{title} (n={len(lat)})')
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc='upper right')
    return _save(fig, path, dpi)


def plot_learning_curves(panels: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]], path: str | Path,
                         ylabel: str = 'validation avg best 3D IoU', title: str = 'Learning curves',
                         colors: Mapping[str, str] | None = None, dpi: int = 100) -> Path:
    """One panel per entry of ``panels`` (e.g. per encoder), one line per curve in it:
    ``{panel: {label: {'step': [...], 'mean': [...], 'std': [...]}}}``; ``std`` (optional) is drawn as a band.
    ``colors`` ({label: matplotlib colour}) keeps a label's colour the same in every panel."""
    n = max(1, len(panels))
    fig = Figure(figsize=(5 * n, 4), layout='constrained')
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    for ax, (name, curves) in zip(axes, panels.items()):
        for label, c in curves.items():
            step, mean = np.asarray(c['step'], float), np.asarray(c['mean'], float)
            line, = ax.plot(step, mean, marker='.', label=label, color=(colors or {}).get(label))
            if c.get('std') is not None and len(c['std']) == len(mean):
                std = np.asarray(c['std'], float)
                ax.fill_between(step, mean - std, mean + std, color=line.get_color(), alpha=0.15, lw=0)
        ax.set(xlabel='training step', title=name)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc='lower right', fontsize='small')
    axes[0].set_ylabel(ylabel)
    fig.suptitle(title)
    return _save(fig, path, dpi)

"""Scores of the live sim demo (ROS-free): per frame, the best symmetry-aware 3D IoU of every labelled object
(class-aware and class-agnostic), and per cell x rig run and per cell the scores of the workcell evaluator
(``evaluation/workcell.group_scores``: class-aware over the primitives, class-agnostic, hit@0.25, AP3D@0.25) with
its markdown table (``workcell.format_table``).

A frame is a :class:`LiveFrame`: what arrived over DDS for one colour stamp (image, depth, K, the simulator's
ground truth, the node's detections). ``labels`` index ``class_names`` (the node's classes, the primitives first).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import metrics
from ..evaluation.workcell import format_table, group_scores
from ..scenes import CLASS_NAMES

__all__ = ['LiveFrame', 'first_arrival', 'frame_ious', 'frame_line', 'summarize']


@dataclass
class LiveFrame:
    cell: str
    rig: str
    index: int                       # frame index within its run (ground-truth order)
    stamp_ns: int
    gt: dict                         # {'params': [M,12], 'labels': [M]}
    pred: dict                       # {'params': [K,12], 'labels': [K], 'scores': [K], 'class_names': [K]}
    latency_ms: float
    rgb: np.ndarray | None = None    # uint8 [H,W,3] (None when the colour image did not arrive)
    depth_mm: np.ndarray | None = None   # uint16 [H,W]
    K: np.ndarray | None = None      # float64 [3,3]
    best_aware: np.ndarray = field(default_factory=lambda: np.zeros(0))     # [M]
    best_agnostic: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [M]


def first_arrival(msgs: dict[str, dict[int, tuple]], stamp: int) -> float:
    """When the first message of frame ``stamp`` reached the listener (``time.monotonic``). The ground truth alone
    is not the start: it can reach this process after the node's detections of the same frame (seen: -18 ms)."""
    return min(by_stamp[stamp][1] for by_stamp in msgs.values() if stamp in by_stamp)


def frame_ious(pred: dict, gt: dict, class_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Best symmetry-aware 3D IoU of each true box of one frame -> (class-aware [M], class-agnostic [M]), the
    evaluator's IoU (``metrics.frame_ious_sym``, the group being the true box's class)."""
    ious = metrics.frame_ious_sym([pred], [gt], list(class_names))
    return (metrics.best_iou_per_gt([pred], [gt], True, ious), metrics.best_iou_per_gt([pred], [gt], False, ious))


def frame_line(f: LiveFrame, class_names: Sequence[str]) -> str:
    """``<cell>/<rig> frame <i> stamp <s>: <K> boxes [class score, ...] | <M> true: class aware/agnostic, ... |
    mean a/g | <latency> ms`` (IoUs of ``f.best_aware`` / ``f.best_agnostic``)."""
    boxes = ', '.join(f'{n} {s:.2f}' for n, s in zip(f.pred['class_names'], f.pred['scores'])) or '-'
    names = [class_names[k] if 0 <= k < len(class_names) else str(k) for k in np.asarray(f.gt['labels'])]
    objects = ', '.join(f'{n} {a:.2f}/{g:.2f}' for n, a, g in zip(names, f.best_aware, f.best_agnostic)) or '-'
    mean = (f' | mean {f.best_aware.mean():.3f}/{f.best_agnostic.mean():.3f}' if len(f.best_aware) else '')
    return (f'{f.cell}/{f.rig} frame {f.index:3d} stamp {f.stamp_ns / 1e9:.3f}: {len(f.pred["scores"])} boxes '
            f'[{boxes}] | {len(names)} true (best IoU class-aware/agnostic): {objects}{mean} | {f.latency_ms:.0f} ms')


def summarize(frames: Sequence[LiveFrame], class_names: Sequence[str], model: str, resize_mode: str,
              operating_threshold: float) -> dict[str, Any]:
    """Per cell and per ``cell/rig``: ``workcell.group_scores`` of the answered frames -> ``{'model', 'labels',
    'resize_mode', 'min_gt_side_px': 0, 'cells': {cell: scores}, 'rigs': {'cell/rig': scores}, 'table': markdown}``
    (the shape ``workcell.format_table`` prints)."""
    def scores(sel: list[LiveFrame]) -> dict[str, Any]:
        return group_scores([f.pred for f in sel], [f.gt for f in sel], None, list(class_names), operating_threshold,
                            len(CLASS_NAMES), False)
    out: dict[str, Any] = {'model': model, 'labels': list(class_names), 'resize_mode': resize_mode,
                           'min_gt_side_px': 0.0, 'cells': {}, 'rigs': {}}
    for cell in dict.fromkeys(f.cell for f in frames):
        in_cell = [f for f in frames if f.cell == cell]
        out['cells'][cell] = scores(in_cell)
        for rig in dict.fromkeys(f.rig for f in in_cell):
            out['rigs'][f'{cell}/{rig}'] = scores([f for f in in_cell if f.rig == rig])
    out['table'] = format_table([out])
    return out

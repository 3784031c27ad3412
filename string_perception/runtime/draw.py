"""Draw oriented 3D boxes projected onto an RGB image (OpenCV lines + labels), e.g. predicted vs true boxes.

Images are RGB ``uint8[H,W,3]`` (colours are RGB tuples); the input is never modified. Edges follow
``box_ops.BOX_EDGES``; each edge is clipped to ``z >= near`` in the camera frame before projection, so boxes partly
behind the camera are drawn correctly and boxes fully behind it are skipped. A short line from the box centre to
the centre of its +x face shows the orientation.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from ..box_ops import BOX_EDGES, BoxesLike, as_boxes, box_corners, project_points

GT_COLOR = (0, 220, 0)        # RGB
PRED_COLOR = (255, 40, 40)
_LIMIT = 1e6                  # pixel coordinates are clamped to +-this before the int conversion cv2 needs


def _clip_segment(p0: np.ndarray, p1: np.ndarray, near: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Clip the camera-frame segment to ``z >= near``; None if it lies entirely in front of that plane."""
    z0, z1 = p0[2], p1[2]
    if z0 < near and z1 < near:
        return None
    if z0 < near:
        p0 = p0 + (near - z0) / (z1 - z0) * (p1 - p0)
    elif z1 < near:
        p1 = p1 + (near - z1) / (z0 - z1) * (p0 - p1)
    return p0, p1


def _pixel(uv: np.ndarray) -> tuple[int, int]:
    u, v = np.clip(np.round(uv), -_LIMIT, _LIMIT).astype(int)
    return int(u), int(v)


def draw_boxes(image: np.ndarray, K: np.ndarray, boxes: BoxesLike, labels: Sequence[int] | None = None,
               scores: Sequence[float] | None = None, class_names: Sequence[str] | None = None,
               color: tuple[int, int, int] = PRED_COLOR, thickness: int = 2, near: float = 0.05,
               font_scale: float = 0.45, label_at: str = 'top') -> np.ndarray:
    """Draw boxes (``[N,12]`` params, a batched ``Box3D`` or a list of boxes; camera frame) on a copy of
    ``image`` with intrinsics ``K[3,3]``; text ``"<class> <score>"`` above (``label_at='top'``) or below
    (``'bottom'``) the box when labels/scores are given."""
    out = np.ascontiguousarray(image, dtype=np.uint8).copy()
    b = as_boxes(boxes)
    corners = box_corners(*b)                                                     # [N,8,3]
    K = np.asarray(K, dtype=np.float64)
    for n in range(len(corners)):
        c = corners[n]
        drawn = []
        for i, j in BOX_EDGES:
            seg = _clip_segment(c[i], c[j], near)
            if seg is None:
                continue
            uv = project_points(np.stack(seg), K)                                 # [2,2]
            p, q = _pixel(uv[0]), _pixel(uv[1])
            cv2.line(out, p, q, color, thickness, cv2.LINE_AA)
            drawn += [p, q]
        if not drawn:
            continue
        centre, face = b.t[n], b.t[n] + 0.5 * b.size[n, 0] * b.R[n, :, 0]
        seg = _clip_segment(centre, face, near)
        if seg is not None:
            uv = project_points(np.stack(seg), K)
            cv2.line(out, _pixel(uv[0]), _pixel(uv[1]), color, max(1, thickness - 1), cv2.LINE_AA)
        text = _label_text(n, labels, scores, class_names)
        if text:
            if label_at == 'top':
                u, v = min(drawn, key=lambda pt: pt[1])                           # top-most drawn point
                v = max(v - 4, 10)
            else:
                u, v = max(drawn, key=lambda pt: pt[1])
                v = min(v + 14, out.shape[0] - 2)
            cv2.putText(out, text, (u, v), cv2.FONT_HERSHEY_SIMPLEX, font_scale, color, 1, cv2.LINE_AA)
    return out


def _label_text(n: int, labels, scores, class_names) -> str:
    parts = []
    if labels is not None:
        lab = int(labels[n])
        parts.append(class_names[lab] if class_names is not None and 0 <= lab < len(class_names) else str(lab))
    if scores is not None:
        parts.append(f'{float(scores[n]):.2f}')
    return ' '.join(parts)


def draw_predictions(image: np.ndarray, K: np.ndarray, pred: Mapping[str, Any] | None = None,
                     gt: Mapping[str, Any] | None = None, class_names: Sequence[str] | None = None,
                     score_threshold: float = 0.0, thickness: int = 2) -> np.ndarray:
    """Ground truth (green, labels below) and predictions (red, ``scores >= score_threshold``, labels above) on a
    copy of ``image``.

    ``pred = {'params': [K,12], 'labels': [K], 'scores': [K]}``, ``gt = {'params': [M,12], 'labels': [M]}``, the
    per-frame dicts of ``metrics`` (``'boxes'`` works in place of ``'params'``)."""
    out = np.asarray(image, dtype=np.uint8)
    if gt is not None:
        out = draw_boxes(out, K, _params(gt), gt.get('labels'), None, class_names, GT_COLOR, thickness,
                         label_at='bottom')
    if pred is not None:
        params = _params(pred)
        keep = np.ones(len(params), bool)
        scores = pred.get('scores')
        if scores is not None:
            scores = np.asarray(scores, np.float64).reshape(-1)
            keep = scores >= score_threshold
            scores = scores[keep]
        labels = pred.get('labels')
        labels = None if labels is None else np.asarray(labels).reshape(-1)[keep]
        out = draw_boxes(out, K, params[keep], labels, scores, class_names, PRED_COLOR, thickness)
    return out.copy() if out is image else out


def _params(frame: Mapping[str, Any]) -> np.ndarray:
    p = frame['params'] if 'params' in frame else frame['boxes']
    return np.asarray(p, dtype=np.float64).reshape(-1, 12)

"""The live sim demo's picture (ROS-free): one annotated frame per cell x rig run in a grid (a row per cell, a
column per rig), each tile the colour image at ``tile_width`` with the simulator's true boxes (green) and the node's
boxes scoring >= ``draw_threshold`` (red) drawn by ``runtime/draw.draw_predictions`` at the tile's size, and a
caption (cell/rig, frame, mean best IoU class-aware / agnostic). Saved as a 64-colour PNG so that it stays small.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from ..runtime.draw import draw_predictions
from .demo_scores import LiveFrame

__all__ = ['pick_frame', 'tile', 'composite', 'save_png']

CAPTION_H = 18                       # pixels of caption strip above each tile


def pick_frame(frames: Sequence[LiveFrame], index: int | None = None) -> LiveFrame | None:
    """The run's frame to draw: frame ``index`` if it arrived with its image, else the one with the most labelled
    objects, then the most predicted boxes (earliest on ties); None when no frame has its image."""
    drawable = [f for f in frames if f.rgb is not None and f.K is not None]
    chosen = [f for f in drawable if f.index == index] if index is not None else []
    if chosen:
        return chosen[0]
    if not drawable:
        return None
    return max(drawable, key=lambda f: (len(f.gt['labels']), len(f.pred['scores']), -f.index))


def tile(f: LiveFrame, class_names: Sequence[str], tile_width: int, draw_threshold: float) -> np.ndarray:
    """``f`` drawn at ``tile_width`` pixels wide (K rescaled), caption strip on top -> uint8 [CAPTION_H + h, w, 3]."""
    h0, w0 = f.rgb.shape[:2]
    s = tile_width / w0
    h = int(round(h0 * s))
    rgb = cv2.resize(f.rgb, (tile_width, h), interpolation=cv2.INTER_AREA)              # [h,w,3]
    K = np.diag([s, s, 1.0]) @ np.asarray(f.K, np.float64)
    drawn = draw_predictions(rgb, K, f.pred, f.gt, class_names, draw_threshold, thickness=1)
    strip = np.full((CAPTION_H, tile_width, 3), 255, np.uint8)
    mean = (f'IoU {f.best_aware.mean():.2f}/{f.best_agnostic.mean():.2f}' if len(f.best_aware) else 'no objects')
    cv2.putText(strip, f'{f.cell}/{f.rig} #{f.index}: {mean}', (3, CAPTION_H - 5), cv2.FONT_HERSHEY_SIMPLEX, 0.42,
                (0, 0, 0), 1, cv2.LINE_AA)
    return np.concatenate([strip, drawn], axis=0)


def composite(rows: Sequence[Sequence[LiveFrame | None]], class_names: Sequence[str], tile_width: int = 320,
              draw_threshold: float = 0.3) -> np.ndarray:
    """Grid of :func:`tile` (rows = cells, columns = rigs; None or a short row leaves a grey tile) -> uint8 RGB."""
    tiles = [[tile(f, class_names, tile_width, draw_threshold) if f is not None else None for f in row]
             for row in rows]
    shapes = [t.shape for row in tiles for t in row if t is not None]
    if not shapes:
        raise ValueError('no frame to draw')
    th = max(s[0] for s in shapes)
    cols = max(len(row) for row in rows)
    blank = np.full((th, tile_width, 3), 128, np.uint8)
    out_rows = []
    for row in tiles:
        padded = [blank.copy() if t is None else np.pad(t, ((0, th - t.shape[0]), (0, 0), (0, 0)),
                                                        constant_values=128) for t in row]
        padded += [blank.copy()] * (cols - len(padded))
        out_rows.append(np.concatenate(padded, axis=1))
    return np.concatenate(out_rows, axis=0)


def save_png(image: np.ndarray, path: str | Path, colours: int = 64) -> Path:
    """``image`` (uint8 RGB) reduced to ``colours`` colours and written as a PNG at ``path`` (folders made): k-means
    (cv2.kmeans, fixed seed) on a pixel sample picks the palette, every pixel takes its nearest palette colour, so the
    composite stays small enough to commit (a few hundred KB) without a palette-PNG library."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = image.reshape(-1, 3).astype(np.float32)                               # [H*W, 3]
    sample = pixels[np.random.default_rng(0).choice(len(pixels), min(len(pixels), 20000), replace=False)]
    cv2.setRNGSeed(0)
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 1.0)
    _, _, palette = cv2.kmeans(sample, min(colours, len(sample)), None, criteria, 1, cv2.KMEANS_PP_CENTERS)
    nearest = np.concatenate([np.argmin(((chunk[:, None, :] - palette[None]) ** 2).sum(-1), axis=1)
                              for chunk in np.array_split(pixels, max(1, len(pixels) // 65536))])   # [H*W]
    reduced = np.clip(np.rint(palette[nearest]), 0, 255).astype(np.uint8).reshape(image.shape)
    cv2.imwrite(str(path), cv2.cvtColor(reduced, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    return path

"""Side-by-side preview image of a frame: RGB with projected 3D boxes | colour-mapped depth (0 = black)."""
from __future__ import annotations

import cv2
import numpy as np

from ..box_ops import BOX_EDGES, CORNER_SIGNS
from .frame import Frame
from .primitives import CLASS_NAMES


def preview_image(frame: Frame, scale: int = 1, boxes: bool = True) -> np.ndarray:
    """uint8 [H*scale, 2*W*scale, 3] BGR (for cv2.imwrite)."""
    h, w = frame.depth_mm.shape
    rgb = cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2BGR)
    rgb = cv2.resize(rgb, (w * scale, h * scale), interpolation=cv2.INTER_NEAREST)
    if boxes:
        K = frame.K
        for lab, t, R, s in zip(frame.labels, frame.translations, frame.rotations, frame.sizes):
            corners = t + (CORNER_SIGNS * s / 2.0) @ R.T                      # [8,3]
            uv = corners @ K.T
            uv = (uv[:, :2] / uv[:, 2:3] + 0.5) * scale - 0.5                # [8,2] in the scaled image
            colour = tuple(int(c) for c in np.array(cv2.applyColorMap(
                np.uint8([[40 + 50 * lab]]), cv2.COLORMAP_HSV))[0, 0])
            for i, j in BOX_EDGES:
                cv2.line(rgb, tuple(np.round(uv[i]).astype(int)), tuple(np.round(uv[j]).astype(int)), colour, 1,
                         cv2.LINE_AA)
            cv2.putText(rgb, CLASS_NAMES[lab][:3], tuple(np.round(uv[6]).astype(int)), cv2.FONT_HERSHEY_PLAIN,
                        0.6 * scale ** 0.5, colour, 1)
    d = frame.depth_mm.astype(np.float32)
    valid = d > 0
    lo, hi = (np.percentile(d[valid], [1, 99]) if valid.any() else (0.0, 1.0))
    d8 = np.clip((d - lo) / max(hi - lo, 1.0) * 255.0, 0, 255).astype(np.uint8)
    dc = cv2.applyColorMap(255 - d8, cv2.COLORMAP_TURBO)
    dc[~valid] = 0
    dc = cv2.resize(dc, (w * scale, h * scale), interpolation=cv2.INTER_NEAREST)
    return np.concatenate([rgb, dc], axis=1)

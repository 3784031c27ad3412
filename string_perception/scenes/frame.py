"""Frame: one generated RGB-D image with its 3D box labels (the `scenes/` contract in docs/ARCHITECTURE.md)."""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .primitives import CLASS_NAMES


@dataclass
class Frame:
    """One RGB-D frame and its labels. Boxes are in the camera optical frame (x right, y down, z forward, m).

    rgb            uint8[H,W,3]   RGB order
    depth_mm       uint16[H,W]    z-depth in millimetres (16UC1), 0 = invalid
    K              float64[3,3]   [[fx,0,cx],[0,fy,cy],[0,0,1]]; pixel (u=col, v=row) centre is at (u, v)
    labels         int64[M]       index into CLASS_NAMES
    translations   float64[M,3]   box centre
    rotations      float64[M,3,3] columns = the object's axes in the camera frame (det +1)
    sizes          float64[M,3]   full extents along those axes (> 0)
    visibility     float64[M]     visible pixels / pixels the object would cover alone (also off-image)
    instance_mask  int16[H,W]     -1 = background, support or an unlabelled object; else index into the M labels
    seed           int
    """

    rgb: np.ndarray
    depth_mm: np.ndarray
    K: np.ndarray
    labels: np.ndarray
    translations: np.ndarray
    rotations: np.ndarray
    sizes: np.ndarray
    visibility: np.ndarray
    instance_mask: np.ndarray
    seed: int

    @property
    def height(self) -> int:
        return self.rgb.shape[0]

    @property
    def width(self) -> int:
        return self.rgb.shape[1]

    @property
    def num_objects(self) -> int:
        return int(self.labels.shape[0])

    @property
    def class_names(self) -> list[str]:
        return [CLASS_NAMES[i] for i in self.labels]

    @property
    def depth_m(self) -> np.ndarray:
        """float32[H,W] metres, NaN where invalid (32FC1 convention)."""
        d = self.depth_mm.astype(np.float32) * np.float32(1e-3)
        d[self.depth_mm == 0] = np.nan
        return d

    def equals(self, other: 'Frame') -> bool:
        """Bit-identical comparison of every field."""
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

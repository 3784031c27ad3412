"""Random pinhole intrinsics and a workcell-like camera pose (looking down at the scene)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .config import SceneConfig
from .geometry import look_at


@dataclass
class Camera:
    K: np.ndarray       # [3,3]
    R_wc: np.ndarray    # [3,3] camera axes (optical frame) in the world frame
    p_wc: np.ndarray    # [3] camera centre in the world frame
    height: int
    width: int

    def to_camera(self, p_w: np.ndarray) -> np.ndarray:
        """World points [...,3] -> camera optical frame [...,3]."""
        return (p_w - self.p_wc) @ self.R_wc

    def project(self, p_c: np.ndarray) -> np.ndarray:
        """Camera-frame points [...,3] (z > 0) -> pixel coordinates [...,2] (u, v)."""
        uvw = p_c @ self.K.T
        return uvw[..., :2] / uvw[..., 2:3]


def sample_intrinsics(rng: np.random.Generator, cfg: SceneConfig) -> np.ndarray:
    """K [3,3] with a random horizontal field of view, slight aspect and principal-point jitter."""
    w, h = cfg.width, cfg.height
    u = rng.random(4).tolist()
    lo, hi = cfg.hfov_deg_range
    fx = 0.5 * w / math.tan(0.5 * math.radians(lo + (hi - lo) * u[0]))
    fy = fx * (1.0 + cfg.aspect_jitter * (2.0 * u[1] - 1.0))
    j = cfg.principal_point_jitter
    cx = 0.5 * (w - 1) + j * (2.0 * u[2] - 1.0) * w
    cy = 0.5 * (h - 1) + j * (2.0 * u[3] - 1.0) * h
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def sample_pose(rng: np.random.Generator, cfg: SceneConfig, target: np.ndarray, distance: float):
    """(R_wc, p_wc): camera at `distance` from `target`, random azimuth, pitched down, slight roll."""
    u = rng.random(3).tolist()
    az = 2.0 * math.pi * u[0]
    lo, hi = cfg.camera_elevation_deg_range
    el = math.radians(lo + (hi - lo) * u[1])
    eye = target + distance * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    roll = math.radians(cfg.camera_roll_deg * (2.0 * u[2] - 1.0))
    return look_at(eye, target, roll), eye

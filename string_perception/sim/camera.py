"""The frame's camera: one of the cell's rigs with position / angle jitter and D435-like intrinsics.

MuJoCo renders square pixels with the principal point at the image centre. The principal-point offset of a real
camera is made by rendering a slightly larger image (same focal length) and cropping a shifted window, so K is
exact: pixel (u, v) of the crop images the ray K^-1 [u, v, 1].
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from string_perception.scenes.geometry import rot_x, rot_y, rot_z

from .cells import CameraRig

_OPTICAL_TO_MJ = np.diag([1.0, -1.0, -1.0])   # MuJoCo cameras look along -z with y up


@dataclass
class CameraDraw:
    rig: str
    R_wc: np.ndarray        # [3,3] optical axes (x right, y down, z forward) in the world
    p_wc: np.ndarray        # [3]
    f: float                # focal length in pixels (fx = fy)
    pad: int                # the render is (H + 2 pad) x (W + 2 pad) ...
    crop: tuple             # ... cropped at (row0, col0)
    height: int
    width: int

    @property
    def K(self) -> np.ndarray:
        cx = 0.5 * (self.width + 2 * self.pad - 1) - self.crop[1]
        cy = 0.5 * (self.height + 2 * self.pad - 1) - self.crop[0]
        return np.array([[self.f, 0.0, cx], [0.0, self.f, cy], [0.0, 0.0, 1.0]])

    @property
    def fovy_deg(self) -> float:
        return math.degrees(2.0 * math.atan(0.5 * (self.height + 2 * self.pad) / self.f))


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """R_wc of an optical frame at `eye` looking at `target`, image x horizontal; a vertical view takes world
    +x as image x (the scenes helper needs a non-vertical view)."""
    z = target - eye
    z = z / np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    if np.linalg.norm(x) < 1e-6:
        x = np.array([1.0, 0.0, 0.0])
    x = x / np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


def rig_pose(rig: CameraRig, model, data) -> tuple[np.ndarray, np.ndarray]:
    """(eye, target) in the world; wrist rigs follow their body's current pose."""
    eye, target = np.asarray(rig.eye, float), np.asarray(rig.target, float)
    if rig.body is None:
        return eye, target
    b = model.body(rig.body).id
    R, p = data.xmat[b].reshape(3, 3), data.xpos[b]
    return p + R @ eye, p + R @ target


def sample_camera(rng, rig: CameraRig, model, data, cfg) -> CameraDraw:
    u = rng.random(8)
    lo, hi = cfg.hfov_deg_range
    f = 0.5 * cfg.width / math.tan(0.5 * math.radians(lo + (hi - lo) * u[0]))
    pad = int(math.ceil(cfg.principal_point_jitter * max(cfg.height, cfg.width)))
    crop = (int(u[1] * (2 * pad + 1)), int(u[2] * (2 * pad + 1)))
    eye, target = rig_pose(rig, model, data)
    eye = eye + cfg.camera_position_jitter_m * (2.0 * rng.random(3) - 1.0)
    a = np.radians(cfg.camera_angle_jitter_deg) * (2.0 * u[3:6] - 1.0)
    R_wc = look_at(eye, target) @ rot_x(a[0]) @ rot_y(a[1]) @ rot_z(a[2])   # jitter about the camera's own axes
    return CameraDraw(rig.name, R_wc, eye, f, pad, crop, cfg.height, cfg.width)


def set_model_camera(model: mujoco.MjModel, cam_id: int, cam: CameraDraw) -> None:
    """Point the model's (world-fixed) camera `cam_id` at the draw."""
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, (cam.R_wc @ _OPTICAL_TO_MJ).ravel())
    model.cam_pos[cam_id] = cam.p_wc
    model.cam_quat[cam_id] = quat
    model.cam_fovy[cam_id] = cam.fovy_deg

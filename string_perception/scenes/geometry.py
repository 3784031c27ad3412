"""Small rotation / camera-pose helpers (numpy, float64; scalar maths in `math`, it is much cheaper)."""
from __future__ import annotations

import math

import numpy as np


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def horizontal_tilt(azimuth: float, angle: float) -> np.ndarray:
    """Rotation by `angle` about the horizontal axis (cos azimuth, sin azimuth, 0) (Rodrigues)."""
    x, y = math.cos(azimuth), math.sin(azimuth)
    c, s = math.cos(angle), math.sin(angle)
    C = 1.0 - c
    return np.array([[c + x * x * C, x * y * C, y * s],
                     [x * y * C, c + y * y * C, -x * s],
                     [-y * s, x * s, c]])


def uniform_rotation(u1: float, u2: float, u3: float) -> np.ndarray:
    """Uniform on SO(3) from three uniforms in [0, 1) (Shoemake's quaternion)."""
    a, b = math.sqrt(1.0 - u1), math.sqrt(u1)
    x, y = a * math.sin(2 * math.pi * u2), a * math.cos(2 * math.pi * u2)
    z, w = b * math.sin(2 * math.pi * u3), b * math.cos(2 * math.pi * u3)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def look_at(eye: np.ndarray, target: np.ndarray, roll: float = 0.0) -> np.ndarray:
    """R_wc [3,3] of an optical frame (x right, y down, z forward) at `eye` looking at `target`; world z is up.

    Columns are the camera axes in the world frame; `roll` turns x/y about the optical axis.
    """
    zx, zy, zz = (target - eye).tolist()
    n = math.sqrt(zx * zx + zy * zy + zz * zz)
    zx, zy, zz = zx / n, zy / n, zz / n
    m = math.hypot(zx, zy)                     # x = z cross up, normalised (the view must not be vertical)
    xx, xy, xz = zy / m, -zx / m, 0.0
    yx, yy, yz = zy * xz - zz * xy, zz * xx - zx * xz, zx * xy - zy * xx  # y = z cross x
    c, s = math.cos(roll), math.sin(roll)
    return np.array([[c * xx + s * yx, c * yx - s * xx, zx],
                     [c * xy + s * yy, c * yy - s * xy, zy],
                     [c * xz + s * yz, c * yz - s * xz, zz]])  # [3,3] columns x, y, z

"""Object classes: shape conventions, per-class size ranges, size sampling and resting poses.

Every object lives in its own frame whose origin is the centre of its tight oriented bounding box (OBB) and whose
axes are the OBB axes; the OBB is the 3D box label. Shapes in that frame (``size = (sx, sy, sz)`` full extents):

    box       |x| <= sx/2, |y| <= sy/2, |z| <= sz/2                          (three independent edges)
    cylinder  x^2 + y^2 <= r^2, |z| <= sz/2, r = sx/2 = sy/2                 symmetry axis = box z (column 2)
    sphere    |p| <= r, r = sx/2 = sy/2 = sz/2                               (rotation: the texture's, random)
    cone      base disc of radius r at z = -sz/2, apex at z = +sz/2          symmetry axis = box z, apex at +z
    capsule   segment |z| <= sz/2 - r on the z axis, swept by radius r       symmetry axis = box z

Sizes are drawn uniformly from :data:`SIZE_RANGES` (low, high per box axis, metres).
"""
from __future__ import annotations

import numpy as np

from .geometry import random_rotation, rot_x, rot_y

CLASS_NAMES: tuple[str, ...] = ('box', 'cylinder', 'sphere', 'cone', 'capsule')
BOX, CYLINDER, SPHERE, CONE, CAPSULE = range(len(CLASS_NAMES))

# class -> (low[3], high[3]) full extents along the box axes, metres.
SIZE_RANGES: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    'box': ((0.05, 0.05, 0.05), (0.30, 0.30, 0.30)),
    'cylinder': ((0.04, 0.04, 0.08), (0.14, 0.14, 0.30)),
    'sphere': ((0.04, 0.04, 0.04), (0.16, 0.16, 0.16)),
    'cone': ((0.06, 0.06, 0.08), (0.18, 0.18, 0.25)),
    'capsule': ((0.03, 0.03, 0.10), (0.08, 0.08, 0.30)),
}
# class -> index of the box axis that is the symmetry axis (None: no single symmetry axis).
SYMMETRY_AXIS: dict[str, int | None] = {'box': None, 'cylinder': 2, 'sphere': None, 'cone': 2, 'capsule': 2}

_LO = np.array([SIZE_RANGES[n][0] for n in CLASS_NAMES])  # [C,3]
_HI = np.array([SIZE_RANGES[n][1] for n in CLASS_NAMES])  # [C,3]


def sample_size(label: int, rng: np.random.Generator) -> np.ndarray:
    """size [3] (full extents) of a new object of class `label`."""
    lo, hi = _LO[label], _HI[label]
    if label == BOX:
        return rng.uniform(lo, hi)
    d = rng.uniform(lo[0], hi[0])
    if label == SPHERE:
        return np.array([d, d, d])
    if label == CAPSULE:  # keep a visible cylindrical part: length >= 1.5 diameters
        return np.array([d, d, rng.uniform(max(lo[2], 1.5 * d), hi[2])])
    return np.array([d, d, rng.uniform(lo[2], hi[2])])


def support_distance(label: int, size: np.ndarray, u: np.ndarray) -> np.ndarray:
    """max over the shape of p . u for unit directions u [...,3] in the object frame -> [...]."""
    hx, hy, hz = size / 2.0
    ux, uy, uz = u[..., 0], u[..., 1], u[..., 2]
    if label == BOX:
        return hx * np.abs(ux) + hy * np.abs(uy) + hz * np.abs(uz)
    if label == SPHERE:
        return np.full(u.shape[:-1], hx)
    radial = np.sqrt(np.maximum(ux * ux + uy * uy, 0.0))
    if label == CYLINDER:
        return hz * np.abs(uz) + hx * radial
    if label == CAPSULE:
        return (hz - hx) * np.abs(uz) + hx
    if label == CONE:
        return np.maximum(hz * uz, -hz * uz + hx * radial)
    raise ValueError(f'unknown class {label}')


def resting_rotation(label: int, size: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """R [3,3] object -> world (before yaw and tilt) of a stable resting pose on a horizontal surface (z up)."""
    if label == BOX:  # any face down
        return (np.eye(3), rot_x(np.pi / 2), rot_y(np.pi / 2), rot_x(np.pi))[rng.integers(4)]
    if label == SPHERE:
        return random_rotation(rng)
    if label == CYLINDER:  # upright or lying on its side
        return np.eye(3) if rng.random() < 0.6 else rot_x(np.pi / 2)
    if label == CAPSULE:
        return np.eye(3) if rng.random() < 0.3 else rot_x(np.pi / 2)
    if label == CONE:  # upright, or on its side with a generator line on the surface (apex end lower)
        if rng.random() < 0.7:
            return np.eye(3)
        half_angle = np.arctan2(size[0] / 2.0, size[2])
        return rot_y(np.pi / 2 + half_angle)
    raise ValueError(f'unknown class {label}')

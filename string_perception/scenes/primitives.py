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

import math

import numpy as np

from .geometry import rot_x, rot_y, uniform_rotation

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


def sample_size(label: int, u) -> np.ndarray:
    """size [3] (full extents) of a new object of class `label` from 3 uniforms u in [0, 1)."""
    lo, hi = _LO[label], _HI[label]
    if label == BOX:
        return lo + (hi - lo) * np.asarray(u[:3])
    d = lo[0] + (hi[0] - lo[0]) * u[0]
    if label == SPHERE:
        return np.array([d, d, d])
    z_lo = max(lo[2], 1.5 * d) if label == CAPSULE else lo[2]  # capsule: keep a visible cylindrical part
    return np.array([d, d, z_lo + (hi[2] - z_lo) * u[1]])


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


def rest_extent(label: int, size: np.ndarray, R: np.ndarray) -> tuple[float, float]:
    """(lift, radius) of an object with axes R [3,3] (world, z up): `lift` = height of its centre above a
    horizontal surface it rests on (exact, = support_distance(-z)); `radius` = a disc around the centre holding its
    footprint (exact: the largest horizontal distance of a point of the shape from its centre)."""
    hx, hy, hz = (0.5 * size).tolist()
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = R.tolist()
    if label == BOX:
        lift = hx * abs(r20) + hy * abs(r21) + hz * abs(r22)
        radius = max(math.hypot(hx * r00 + sy * hy * r01 + sz * hz * r02, hx * r10 + sy * hy * r11 + sz * hz * r12)
                     for sy in (-1.0, 1.0) for sz in (-1.0, 1.0))               # 4 corner pairs
        return lift, radius
    if label == SPHERE:
        return hx, hx
    axy = math.sqrt(max(1.0 - r22 * r22, 0.0))                                   # |horizontal part of axis z|
    if label == CYLINDER:
        return hz * abs(r22) + hx * axy, _rim_reach(hz * axy, hx, r22)
    if label == CAPSULE:
        return (hz - hx) * abs(r22) + hx, (hz - hx) * axy + hx
    if label == CONE:  # the apex (hz * axy away) never reaches farther than the base rim
        return max(-hz * r22, hz * r22 + hx * axy), _rim_reach(hz * axy, hx, r22)
    raise ValueError(f'unknown class {label}')


def _rim_reach(a: float, r: float, az: float) -> float:
    """Largest horizontal distance from the object centre of a circle of radius r centred a horizontal distance
    `a` away, in the plane normal to the symmetry axis whose vertical component is az. With s = sin(angle on the
    circle): d^2 = a^2 + r^2 + 2 a b s - (r^2 - b^2) s^2, b = r |az|; maximised over s in [-1, 1]."""
    b = r * abs(az)
    k = r * r - b * b
    s = 1.0 if k <= a * b else a * b / k
    return math.sqrt(max(a * a + r * r + 2.0 * a * b * s - k * s * s, 0.0))


def resting_rotation(label: int, size: np.ndarray, u) -> np.ndarray:
    """R [3,3] object -> world (before yaw and tilt) of a stable resting pose on a horizontal surface (z up),
    from 4 uniforms u in [0, 1)."""
    if label == BOX:  # any face down
        return _BOX_FACES[int(u[0] * 4)]
    if label == SPHERE:
        return uniform_rotation(u[1], u[2], u[3])
    if label == CYLINDER:  # upright or lying on its side
        return _EYE if u[0] < 0.6 else _ON_SIDE
    if label == CAPSULE:
        return _EYE if u[0] < 0.3 else _ON_SIDE
    if label == CONE:  # upright, or on its side with a generator line on the surface (apex end lower)
        if u[0] < 0.7:
            return _EYE
        return rot_y(math.pi / 2 + math.atan2(size[0] / 2.0, size[2]))
    raise ValueError(f'unknown class {label}')


_EYE = np.eye(3)
_ON_SIDE = rot_x(math.pi / 2)
_BOX_FACES = (_EYE, _ON_SIDE, rot_y(math.pi / 2), rot_x(math.pi))

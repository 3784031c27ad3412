"""Scene layout in a world frame (z up): supports (floor, optional table and wall), resting objects, camera.

Objects rest on the support surface (lowest point on it, via the shape's support function), yaw free, some tilted;
footprints are discs that must not overlap (rejection sampling), so objects do not interpenetrate.
"""
from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np

from .camera import Camera, sample_intrinsics, sample_pose
from .config import SceneConfig
from .geometry import horizontal_tilt, rot_z
from .primitives import BOX, CLASS_NAMES, rest_extent, resting_rotation, sample_size
from .texture import Texture, random_texture

_UP = np.array([0.0, 0.0, 1.0])


@dataclass
class Solid:
    """A closed primitive (object, table top or leg) posed in the world frame."""
    label: int              # index into CLASS_NAMES
    size: np.ndarray        # [3] full extents
    R_w: np.ndarray         # [3,3] object axes in the world frame
    p_w: np.ndarray         # [3] box centre in the world frame
    texture: Texture
    is_object: bool         # False for supports (table parts)
    R_c: np.ndarray | None = None   # [3,3] object axes in the camera optical frame (set with the camera)
    t_c: np.ndarray | None = None   # [3] box centre in the camera optical frame


@dataclass
class Plane:
    """An infinite plane n . p = offset (world frame), n pointing towards the camera side."""
    n_w: np.ndarray
    offset: float
    texture: Texture


@dataclass
class Layout:
    objects: list[Solid]
    supports: list[Solid]
    planes: list[Plane]
    camera: Camera


def _support_texture(rng, scale_range):
    return random_texture(rng, saturated=False, scale_range=scale_range, cum_p=(0.3, 0.6, 0.8))


def _table(rng, cfg, height):
    """Table top and four legs as support boxes; returns (solids, half extents of the top)."""
    ext = rng.uniform(*cfg.table_extent_range, size=2)                 # [2] top edge lengths
    thick = rng.uniform(0.02, 0.05)
    tex = _support_texture(rng, (0.05, 0.3))
    top = Solid(BOX, np.array([ext[0], ext[1], thick]), np.eye(3), np.array([0.0, 0.0, height - thick / 2]),
                tex, False)
    leg_w = rng.uniform(0.03, 0.07)
    leg_h = height - thick
    inset = ext / 2 - leg_w / 2 - rng.uniform(0.0, 0.08)
    leg_tex = _support_texture(rng, (0.05, 0.3))
    legs = [Solid(BOX, np.array([leg_w, leg_w, leg_h]), np.eye(3),
                  np.array([sx * inset[0], sy * inset[1], leg_h / 2]), leg_tex, False)
            for sx in (-1, 1) for sy in (-1, 1)]
    return [top] + legs, ext / 2


def _pose_object(cfg, label, u):
    """(size[3], R_w[3,3], lift, footprint radius) from 11 uniforms u: a resting pose with yaw (and maybe a tilt);
    the centre sits `lift` above the support surface."""
    size = sample_size(label, u[0:3])
    R = resting_rotation(label, size, u[3:7])
    if u[7] < cfg.tilt_probability:
        R = horizontal_tilt(2.0 * math.pi * u[8], math.radians(5.0 + (cfg.max_tilt_deg - 5.0) * u[9])) @ R
    R = rot_z(2.0 * math.pi * u[10]) @ R
    lift, radius = rest_extent(label, size, R)                           # lowest point touches the surface
    return size, R, lift, radius


def _place_objects(rng, cfg, lo, hi, surface_z, inside):
    """Objects in the rectangle [lo, hi] (xy) on the plane z = surface_z; `inside`: whole footprint in it."""
    n = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    centres = np.zeros((0, 2))                                          # [P,2] placed footprints
    radii = np.zeros(0)                                                 # [P]
    objects = []
    n_cls = len(CLASS_NAMES)
    for _ in range(n):
        u = rng.random(12).tolist()
        label = min(int(u[0] * n_cls), n_cls - 1)
        size, R, lift, radius = _pose_object(cfg, label, u[1:])
        cand = rng.random((cfg.placement_attempts, 2))                  # [A,2] uniforms
        texture = random_texture(rng, saturated=True)
        margin = radius if inside else 0.0
        a, b = lo + margin, hi - margin
        if a[0] > b[0] or a[1] > b[1]:
            continue
        cand = a + cand * (b - a)
        diff = cand[:, None, :] - centres[None]                         # [A,P,2]
        ok = ((diff * diff).sum(axis=2) >= (radii + radius) ** 2).all(axis=1)  # [A] clear of every footprint
        if not ok.any():
            continue
        xy = cand[int(ok.argmax())]
        centres = np.vstack([centres, xy[None]])
        radii = np.append(radii, radius)
        objects.append(Solid(label, size, R, np.array([xy[0], xy[1], surface_z + lift]), texture, True))
    return objects


def sample_layout(rng: np.random.Generator, cfg: SceneConfig) -> Layout:
    K = sample_intrinsics(rng, cfg)
    distance = rng.uniform(*cfg.camera_distance_range)
    view = cfg.view_fill * distance * 0.5 * cfg.width / K[0, 0]        # half width of the view at the target
    planes = [Plane(_UP.copy(), 0.0, _support_texture(rng, (0.1, 0.6)))]  # floor
    if rng.random() < cfg.table_probability:
        height = rng.uniform(*cfg.table_height_range)
        supports, half = _table(rng, cfg, height)
        centre = rng.uniform(-0.5, 0.5, size=2) * half                  # [2] look near the table centre
        lo, hi = np.maximum(-half, centre - view), np.minimum(half, centre + view)
        objects = _place_objects(rng, cfg, lo, hi, height, inside=True)
        extent = float(np.hypot(*half))
    else:
        height = 0.0
        supports = []
        centre = np.zeros(2)
        objects = _place_objects(rng, cfg, centre - view, centre + view, 0.0, inside=False)
        extent = view * np.sqrt(2.0)
    target = np.array([centre[0], centre[1], height + 0.05])
    R_wc, p_wc = sample_pose(rng, cfg, target, distance)
    if rng.random() < cfg.wall_probability:  # vertical wall behind the scene, facing the camera
        n = p_wc - target
        n[2] = 0.0
        n /= np.linalg.norm(n)
        planes.append(Plane(n, float(n @ target) - extent - rng.uniform(0.1, 1.0),
                            _support_texture(rng, (0.1, 0.6))))
    cam = Camera(K, R_wc, p_wc, cfg.height, cfg.width)
    for s in supports + objects:  # camera-frame poses
        s.R_c = R_wc.T @ s.R_w
        s.t_c = cam.to_camera(s.p_w)
    # an object must lie wholly beyond min_range (nearest box corner: t_z - sum_i |R_c[2,i]| size_i / 2)
    objects = [o for o in objects if o.t_c[2] - np.abs(o.R_c[2]) @ o.size * 0.5 >= cfg.min_range_m]
    return Layout(objects, supports, planes, cam)

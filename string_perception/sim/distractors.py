"""Workcell clutter that is never labelled (domain randomisation): flat items and cables lying on the cell's surfaces.

Real cells are cluttered with things a pick detector must NOT box: sheets of paper or cardboard, cloth and tape
patches lying flat, cables and hoses across the table. ``sample_distractors`` draws them, ``add_distractors`` adds
them to a cell's MjSpec before it is compiled:

- ``sheet``: a thin box, 1-4 mm tall above what it lies on, sides 3-25 cm, random yaw and colour (paper, cardboard,
  cloth, tape: the cells have no texture mechanism, so a random flat colour; a texture would also have to be
  uploaded to the shared render context of ``render.SceneRenderer``, which is reused while the mesh count matches);
- ``cable``: a chain of 3-11 capsules (``fromto`` from vertex to vertex of a smoothly bending polyline, so the
  segments join), radius 2-6 mm, 10-40 cm long, lying on the surface; half of them dark (black cables), the rest
  any colour.

They are STATIC geoms of the world body, not simulated bodies: they lie flat by construction (no settling, no extra
simulation time, no risk of a thin body tunnelling through the table or of a cable chain exploding), objects
dropped onto them land and rest on them (they collide like the table), and they render, occlude and fill the
geom-id image like any other static surface, so ``generator.label_view`` counts an object's pixels they cover as
hidden (its visibility drops) while the 'alone' silhouettes, which draw only object geoms, ignore them. They are
never labelled: labels come from the object geoms alone (``physics.Indexing.geom_obj`` is -1 for them).

Placement: each cell lists its clutter regions (``cells.ClutterRegion``: the ALOHA table around the drop region,
the KUKA tray floor and the table strips beside and in front of the tray, away from the arms' bases); a region is
drawn by weight, an item too large for it is scaled down to fit, and its centre is uniform where it fits. Items
stack: a coarse height map (4 mm cells) of each region lifts a sheet onto whatever it overlaps and each cable
vertex onto what lies under it, sheets first, then cables. A sheet's box extends 1 cm down into its support (the
table / tray base hides that part): a falling object then meets a solid slab, never a 1 mm plate it could be
pushed through.

Everything is drawn from the generator given (the caller passes one derived from the seed, never the scene's own
stream), so frames without distractors are unchanged and frames with them draw objects, arms and camera alike.
"""
from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass

import mujoco
import numpy as np

from .cells import ClutterRegion

__all__ = ['DISTRACTOR_PREFIX', 'DISTRACTOR_STREAM', 'Distractor', 'sample_distractors',
           'add_distractors', 'distractor_geom_ids']

DISTRACTOR_PREFIX = 'distractor'   # geom names: distractor<i>/<k>
DISTRACTOR_STREAM = 0x44495354     # 'DIST': the distractors' generator is default_rng([seed, this, attempt])
SHEET_PROBABILITY = 0.6
SHEET_THICKNESS_M = (0.001, 0.004)
SHEET_SIDE_M = (0.03, 0.25)
CABLE_RADIUS_M = (0.002, 0.006)
CABLE_LENGTH_M = (0.10, 0.40)
_SEGMENT_M = 0.035                 # cable polyline step (at most 12 segments)
_SINK_M = 0.01                     # a sheet's box reaches this far below what it lies on
_GRID_M = 0.004                    # height-map cell


@dataclass(frozen=True)
class Distractor:
    """One clutter item in the world frame. Sheets: ``centre`` of the visible slab's top face xy and z, ``half``
    (x, y) extents, ``yaw``, ``thickness`` (the visible slab), ``bottom_z`` (what it lies on). Cables: ``path``
    [K+1,3] capsule axis vertices (z = what lies under + radius), ``radius``."""
    kind: str                        # 'sheet' | 'cable'
    rgba: tuple
    centre: tuple = ()               # sheet: (x, y, top z)
    half: tuple = ()                 # sheet: (hx, hy)
    yaw: float = 0.0
    thickness: float = 0.0
    bottom_z: float = 0.0
    path: tuple = ()                 # cable: ((x, y, z), ...) K+1 vertices
    radius: float = 0.0

    @property
    def top_z(self) -> float:
        """Highest point of the item (world z)."""
        if self.kind == 'sheet':
            return float(self.centre[2])
        return float(max(p[2] for p in self.path) + self.radius)


class _HeightMap:
    """Top z of what lies on one region, on a grid of ``_GRID_M`` cells (starts at the region's surface)."""

    def __init__(self, region: ClutterRegion):
        nx = max(1, int(math.ceil(2 * region.half[0] / _GRID_M)))
        ny = max(1, int(math.ceil(2 * region.half[1] / _GRID_M)))
        xs = region.center[0] - region.half[0] + (np.arange(nx) + 0.5) * (2 * region.half[0] / nx)   # [nx]
        ys = region.center[1] - region.half[1] + (np.arange(ny) + 0.5) * (2 * region.half[1] / ny)   # [ny]
        self.xy = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)                                # [ny*nx,2]
        self.z = np.full(len(self.xy), float(region.z))                                                # [ny*nx]
        self.base = float(region.z)

    def top(self, mask: np.ndarray) -> float:
        return float(self.z[mask].max()) if mask.any() else self.base

    def raise_to(self, mask: np.ndarray, z: float) -> None:
        self.z[mask] = np.maximum(self.z[mask], z)


def _rect_mask(xy: np.ndarray, centre, half, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    d = xy - np.asarray(centre[:2])                                                 # [N,2]
    lx, ly = d[:, 0] * c + d[:, 1] * s, -d[:, 0] * s + d[:, 1] * c
    return (np.abs(lx) <= half[0]) & (np.abs(ly) <= half[1])


def _segment_distance(xy: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(((xy - a) @ ab) / max(float(ab @ ab), 1e-12), 0.0, 1.0)            # [N]
    return np.linalg.norm(xy - (a + t[:, None] * ab), axis=1)                       # [N]


def _colour(rng: np.random.Generator, dark: bool) -> tuple:
    h, s = rng.random(), 0.9 * rng.random()
    v = 0.05 + 0.2 * rng.random() if dark else 0.15 + 0.8 * rng.random()
    return (*colorsys.hsv_to_rgb(h, s, v), 1.0)


def _fit(region: ClutterRegion, extent: np.ndarray) -> float:
    """Scale <= 1 at which an item of half extents ``extent`` [2] (x, y) fits the region."""
    return min(1.0, *(region.half[k] / max(float(extent[k]), 1e-9) for k in range(2)))


def _centre(region: ClutterRegion, extent: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Centre xy [2] of an item of half extents ``extent`` [2] that fits, at ``u`` [2] in [-1, 1] of the room."""
    room = np.maximum(np.asarray(region.half, float) - extent, 0.0)                  # [2]
    return np.asarray(region.center, float) + u * room


def _cable_shape(rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """(polyline [K+1,2] centred on its bounding box, radius): a random heading that bends smoothly."""
    length = rng.uniform(*CABLE_LENGTH_M)
    radius = rng.uniform(*CABLE_RADIUS_M)
    k = int(min(12, max(1, round(length / _SEGMENT_M))))
    bend = rng.uniform(0.0, 0.5)                                                     # rad per segment, std
    heading = 2 * math.pi * rng.random() + np.cumsum(rng.normal(0.0, bend, k))      # [K]
    step = np.stack([np.cos(heading), np.sin(heading)], axis=1) * (length / k)      # [K,2]
    pts = np.concatenate([np.zeros((1, 2)), np.cumsum(step, axis=0)])               # [K+1,2]
    return pts - 0.5 * (pts.min(0) + pts.max(0)), radius


def sample_distractors(rng: np.random.Generator, count_range, regions) -> list[Distractor]:
    """``count_range`` = (min, max) items, each a sheet (probability ``SHEET_PROBABILITY``) or a cable, on
    ``regions`` (cells.ClutterRegion, drawn by weight); the module docstring says how they lie. [] when max is 0
    (nothing is drawn)."""
    lo, hi = int(count_range[0]), int(count_range[1])
    if hi <= 0 or not regions:
        return []
    n = int(rng.integers(lo, hi + 1))
    weights = np.array([r.weight for r in regions], float)
    drawn = []                                           # (kind, region index, draws) in drawing order
    for _ in range(n):
        ri = int(rng.choice(len(regions), p=weights / weights.sum()))
        if rng.random() < SHEET_PROBABILITY:
            drawn.append(('sheet', ri, dict(thickness=rng.uniform(*SHEET_THICKNESS_M),
                                            half=0.5 * rng.uniform(*SHEET_SIDE_M, 2), yaw=math.pi * rng.random(),
                                            rgba=_colour(rng, False), u=rng.random(2))))
        else:
            pts, radius = _cable_shape(rng)
            drawn.append(('cable', ri, dict(pts=pts, radius=radius, rgba=_colour(rng, rng.random() < 0.5),
                                            u=rng.random(2))))
    maps = [_HeightMap(r) for r in regions]
    out = []
    for kind in ('sheet', 'cable'):                      # sheets lie under cables
        for k, ri, d in drawn:
            if k != kind:
                continue
            region, hmap = regions[ri], maps[ri]
            u = 2.0 * d['u'] - 1.0                                                   # [2] in [-1, 1]
            if kind == 'sheet':
                c, s = abs(math.cos(d['yaw'])), abs(math.sin(d['yaw']))
                hx, hy = d['half']
                extent = np.array([c * hx + s * hy, s * hx + c * hy])                   # [2] rotated footprint
                scale = _fit(region, extent)
                centre = _centre(region, scale * extent, u)
                half = (scale * hx, scale * hy)
                mask = _rect_mask(hmap.xy, centre, half, d['yaw'])
                bottom = hmap.top(mask)
                top = bottom + d['thickness']
                hmap.raise_to(mask, top)
                out.append(Distractor('sheet', d['rgba'], (float(centre[0]), float(centre[1]), float(top)),
                                      (float(half[0]), float(half[1])), float(d['yaw']), float(d['thickness']),
                                      float(bottom)))
            else:
                pts, r = d['pts'], d['radius']
                extent = 0.5 * (pts.max(0) - pts.min(0)) + r                             # [2]
                scale = _fit(region, extent)
                xy = _centre(region, scale * extent, u) + scale * pts                    # [K+1,2]
                reach = max(r, _GRID_M)                          # at least one grid cell under a thin cable
                z = np.array([hmap.top(np.linalg.norm(hmap.xy - p, axis=1) <= reach) + r for p in xy])  # [K+1]
                for a in range(len(xy) - 1):
                    hmap.raise_to(_segment_distance(hmap.xy, xy[a], xy[a + 1]) <= reach, max(z[a], z[a + 1]) + r)
                out.append(Distractor('cable', d['rgba'], path=tuple((float(p[0]), float(p[1]), float(q))
                                                                    for p, q in zip(xy, z)), radius=float(r)))
    return out


def add_distractors(spec: mujoco.MjSpec, distractors) -> None:
    """Static geoms ``distractor<i>/<k>`` of the world body for ``distractors`` (sheets: one box from ``_SINK_M``
    below what it lies on up to its top; cables: one capsule per polyline segment)."""
    for i, d in enumerate(distractors):
        name = f'{DISTRACTOR_PREFIX}{i}'
        if d.kind == 'sheet':
            low = d.bottom_z - _SINK_M
            half_z = 0.5 * (d.centre[2] - low)
            spec.worldbody.add_geom(name=f'{name}/0', type=mujoco.mjtGeom.mjGEOM_BOX,
                                    size=[d.half[0], d.half[1], half_z],
                                    pos=[d.centre[0], d.centre[1], low + half_z],
                                    quat=[math.cos(0.5 * d.yaw), 0.0, 0.0, math.sin(0.5 * d.yaw)],
                                    rgba=list(d.rgba))
        else:
            for k in range(len(d.path) - 1):
                spec.worldbody.add_geom(name=f'{name}/{k}', type=mujoco.mjtGeom.mjGEOM_CAPSULE,
                                        size=[d.radius, 0.0, 0.0], fromto=[*d.path[k], *d.path[k + 1]],
                                        rgba=list(d.rgba))


def distractor_geom_ids(model: mujoco.MjModel) -> np.ndarray:
    """int [G] ids of the compiled model's distractor geoms (named ``distractor<i>/<k>``), ascending."""
    return np.array([g for g in range(model.ngeom)
                     if (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or '').startswith(DISTRACTOR_PREFIX)],
                    np.int64).reshape(-1)

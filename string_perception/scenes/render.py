"""Cast camera rays at every surface of a layout and resolve visibility with a z-buffer.

A closed solid is cast only over the pixel rectangle its projected OBB covers (exact: the shape lies inside its
box), extended past the image borders by up to one image size so that the pixels an object would cover alone
are also counted where the border cuts it off. Planes are cast over the whole image (separable ray grid).
Ray grids are component-first: ``d[3, nv, nu]``, d_z = 1 in the camera frame so t is the z-depth.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..box_ops import CORNER_SIGNS
from .camera import Camera
from .layout import Layout, Plane, Solid
from .raycast import intersect_unchecked


@dataclass
class Render:
    depth: np.ndarray       # [H,W] exact z-depth of the nearest surface, inf where nothing is hit
    owner: np.ndarray       # [H,W] int16 index into `surfaces`, -1 = nothing
    surfaces: list          # planes, then supports, then objects
    rects: list             # per surface: (u0, u1, v0, v1) in-image pixel rectangle holding all its pixels
    total: np.ndarray       # [S] int64 pixels each object covers alone, off-image ones included (0: not object)


def pixel_grid(cam: Camera, u0: int, u1: int, v0: int, v1: int):
    """Normalised image coordinates x [nu], y [nv] of the pixel centres of the rectangle [u0,u1) x [v0,v1)."""
    K = cam.K
    return (np.arange(u0, u1) - K[0, 2]) / K[0, 0], (np.arange(v0, v1) - K[1, 2]) / K[1, 1]


def rays_in(R: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Directions [3, nv, nu] of the pixel grid (x [nu], y [nv]) in a frame whose axes, in the camera frame,
    are the columns of R (d_frame = R^T (x, y, 1))."""
    c = R.T[:, :, None, None]                                   # [3,3,1,1]
    return c[:, 0] * x[None, None, :] + c[:, 1] * y[None, :, None] + c[:, 2]


def _rect(cam: Camera, corners: np.ndarray, margin: int):
    """Half-open pixel rectangle (u0, u1, v0, v1) holding the projection of corners [8,3] (all z > 0),
    clipped to the image grown by `margin` pixels on every side."""
    uv = cam.project(corners)                                   # [8,2]
    (u_lo, v_lo), (u_hi, v_hi) = uv.min(axis=0).tolist(), uv.max(axis=0).tolist()
    w, h = cam.width, cam.height
    return (max(math.ceil(u_lo - 1e-6), -margin), min(math.floor(u_hi + 1e-6) + 1, w + margin),  # pixel centres
            max(math.ceil(v_lo - 1e-6), -margin), min(math.floor(v_hi + 1e-6) + 1, h + margin))  # inside


def cast_solid(cam: Camera, solid: Solid, depth: np.ndarray | None = None):
    """(t [nv,nu], rect (u0,u1,v0,v1)) over the (possibly off-image) rectangle the solid can cover; (None, rect)
    when that is empty or when `depth` [H,W] (the z-buffer so far) already hides all of it."""
    R_c, t_c = solid.R_c, solid.t_c
    corners = t_c + (CORNER_SIGNS * (solid.size / 2.0)) @ R_c.T  # [8,3]
    z_near = corners[:, 2].min()
    if z_near > 1e-3:
        rect = _rect(cam, corners, max(cam.width, cam.height) if solid.is_object else 0)
    else:  # a support reaching behind the camera: cast every pixel
        rect = (0, cam.width, 0, cam.height)
    u0, u1, v0, v1 = rect
    if u1 <= u0 or v1 <= v0:
        return None, rect
    if depth is not None and 0 <= u0 and u1 <= cam.width and 0 <= v0 and v1 <= cam.height \
            and depth[v0:v1, u0:u1].max() < z_near:
        return None, rect
    x, y = pixel_grid(cam, u0, u1, v0, v1)
    t = intersect_unchecked(solid.label, solid.size, -(t_c @ R_c), rays_in(R_c, x, y))  # origin [3] in the object frame
    return t, rect


def cast_plane(cam: Camera, plane: Plane):
    """(t [H,W], full-image rect) of n . p = offset (world)."""
    n_c = cam.R_wc.T @ plane.n_w                                 # [3] plane normal in the camera frame
    offset = plane.offset - plane.n_w @ cam.p_wc
    x, y = pixel_grid(cam, 0, cam.width, 0, cam.height)
    t = offset / (n_c[0] * x[None, :] + n_c[1] * y[:, None] + n_c[2])  # [H,W]
    return np.where(t > 0.0, t, np.inf), (0, cam.width, 0, cam.height)


def render_layout(layout: Layout) -> Render:
    cam = layout.camera
    h, w = cam.height, cam.width
    surfaces = [*layout.planes, *layout.supports, *layout.objects]
    depth = np.full((h, w), np.inf)                              # [H,W]
    owner = np.full((h, w), -1, dtype=np.int16)                  # [H,W]
    rects, total = [], np.zeros(len(surfaces), dtype=np.int64)
    with np.errstate(all='ignore'):  # rays parallel to faces, misses: inf / NaN, all rejected by the tests
        for i, s in enumerate(surfaces):
            _draw(cam, i, s, depth, owner, rects, total)
    return Render(depth, owner, surfaces, rects, total)


def _draw(cam, i, s, depth, owner, rects, total):
    """Cast surface i and merge it into the z-buffer (depth, owner) [H,W] in place."""
    h, w = depth.shape
    if isinstance(s, Plane):
        t, (u0, u1, v0, v1) = cast_plane(cam, s)
    else:
        # supports (table legs) hidden behind what is already drawn are culled; objects never are, so
        # that the pixels they would cover alone are always counted
        t, (u0, u1, v0, v1) = cast_solid(cam, s, depth=None if s.is_object else depth)
    if t is None:
        rects.append((0, 0, 0, 0))
        return
    if isinstance(s, Solid) and s.is_object:
        total[i] = np.count_nonzero(t < np.inf)
    if i == 0 and isinstance(s, Plane):  # the first plane fills an empty z-buffer: nothing to compare
        depth[...] = t
        owner[t < np.inf] = 0
        rects.append((0, w, 0, h))
        return
    a, b, c, d = max(u0, 0), min(u1, w), max(v0, 0), min(v1, h)  # in-image part
    rects.append((a, b, c, d))
    if b <= a or d <= c:
        return
    t_in = t[c - v0:d - v0, a - u0:b - u0]                    # [nv',nu'] view
    z = depth[c:d, a:b]                                      # [nv',nu'] view
    o = owner[c:d, a:b]                                      # [nv',nu'] view
    o[...] = np.where(t_in < z, np.int16(i), o)             # (np.copyto with where= is slower)
    np.minimum(z, t_in, out=z)

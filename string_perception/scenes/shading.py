"""Lambertian shading: one random directional light + ambient, procedural albedo, additive sensor noise.

Pixels are grouped by the surface that owns them (one stable radix sort of the owner map), every surface is
shaded on its own contiguous slice in planar [3, n] layout (numpy is slow on a trailing axis of 3), and one
scatter per channel puts the colours back; cv2.merge interleaves the final uint8 image.
"""
from __future__ import annotations

import colorsys
import math

import cv2
import numpy as np

from .config import SceneConfig
from .layout import Layout, Plane
from .noise_bank import gaussian
from .raycast import lambert
from .render import Render
from .texture import PLAIN


def _lerp(lo_hi, u):
    return lo_hi[0] + (lo_hi[1] - lo_hi[0]) * u


def shade(render: Render, layout: Layout, rng: np.random.Generator, cfg: SceneConfig) -> np.ndarray:
    """uint8 [H,W,3] RGB image of the rendered layout."""
    cam = layout.camera
    h, w = cam.height, cam.width
    u = rng.random(10).tolist()
    az = 2.0 * math.pi * u[0]
    el = math.radians(_lerp(cfg.light_elevation_deg_range, u[1]))
    l_c = cam.R_wc.T @ np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])  # [3]
    ambient = _lerp(cfg.ambient_range, u[2])
    diffuse = _lerp(cfg.diffuse_range, u[3])
    tint = np.array([[255.0 * (1.0 + 0.16 * (v - 0.5))] for v in u[4:7]], np.float32)  # [3,1] light colour
    background = np.array(colorsys.hsv_to_rgb(u[7], 0.3 * u[8], 0.1 + 0.5 * u[9]), np.float32) * 255.0  # [3]

    owner = render.owner.ravel()                                                    # [H*W]
    order = np.argsort(owner, kind='stable')                                        # [H*W] grouped by owner
    bounds = np.concatenate([[0], np.cumsum(np.bincount(owner + 1, minlength=len(render.surfaces) + 1))])
    K = cam.K
    f32 = np.float32
    xg = ((np.arange(w) - K[0, 2]) / K[0, 0]).astype(f32)                           # [W] normalised coords
    yg = ((np.arange(h) - K[1, 2]) / K[1, 1]).astype(f32)                           # [H]
    x = np.tile(xg, h)[order]                                                       # [H*W] in `order`
    y = np.repeat(yg, w)[order]
    t = render.depth.ravel()[order].astype(f32)                                     # [H*W] z-depth
    R_wc = cam.R_wc.astype(f32)
    col = np.empty((3, h * w), dtype=np.float32)                                    # [3,H*W] in `order`
    col[:, :bounds[1]] = background[:, None]
    for i, surf in enumerate(render.surfaces):
        a, b = bounds[i + 1], bounds[i + 2]
        if a == b:
            continue
        xs, ys, ts = x[a:b], y[a:b], t[a:b]
        # hit points in float32 (texture and normals need far less than float64's precision)
        if isinstance(surf, Plane):  # texture in world coordinates; constant normal
            light = f32(ambient + diffuse * max(float(surf.n_w @ cam.R_wc @ l_c), 0.0))
            if surf.texture.kind == PLAIN:
                col[:, a:b] = surf.texture.c1 * light
                continue
            R, o = R_wc, cam.p_wc.astype(f32)
        else:  # texture and normal in the object frame
            R_c, t_c = surf.R_c, surf.t_c
            R, o = R_c.T.astype(f32), (-(t_c @ R_c)).astype(f32)
        p = o[:, None] + ts * (R[:, :1] * xs + R[:, 1:2] * ys + R[:, 2:3])             # [3,n]
        if not isinstance(surf, Plane):
            lam = lambert(surf.label, surf.size, p, R @ l_c.astype(f32))                 # [n]
            light = f32(ambient) + f32(diffuse) * np.maximum(lam, f32(0.0))              # [n]
        col[:, a:b] = surf.texture.albedo(p) * light
    col *= tint
    img = np.empty((3, h * w), dtype=np.float32)                                    # [3,H*W] planar
    for c in range(3):
        img[c, order] = col[c]
    if cfg.rgb_noise_std > 0:
        img += gaussian(rng, img.shape) * np.float32(cfg.rgb_noise_std)
    np.clip(img, 0.0, 255.0, out=img)
    planes = np.rint(img, out=img).astype(np.uint8).reshape(3, h, w)                 # [3,H,W]
    return cv2.merge([planes[0], planes[1], planes[2]])                             # [H,W,3]

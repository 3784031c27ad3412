"""Lambertian shading: one random directional light + ambient, procedural albedo, additive sensor noise.

Pixels are grouped by the surface that owns them (one stable radix sort of the owner map), every surface is
shaded on its own contiguous slice in planar [3, n] layout (numpy is slow on a trailing axis of 3), and one
scatter per channel puts the colours back; cv2.merge interleaves the final uint8 image.
"""
from __future__ import annotations

import cv2
import numpy as np

from .config import SceneConfig
from .layout import Layout, Plane
from .noise_bank import gaussian
from .raycast import surface_normal
from .render import Render, camera_pose
from .texture import hsv_to_rgb


def shade(render: Render, layout: Layout, rng: np.random.Generator, cfg: SceneConfig) -> np.ndarray:
    """uint8 [H,W,3] RGB image of the rendered layout."""
    cam = layout.camera
    h, w = cam.height, cam.width
    az = rng.uniform(-np.pi, np.pi)
    el = np.deg2rad(rng.uniform(*cfg.light_elevation_deg_range))
    l_c = cam.R_wc.T @ np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])  # [3] to light
    ambient = rng.uniform(*cfg.ambient_range)
    diffuse = rng.uniform(*cfg.diffuse_range)
    tint = (255.0 * (1.0 + rng.uniform(-0.08, 0.08, 3))).astype(np.float32)[:, None]  # [3,1] light colour
    background = (hsv_to_rgb(rng.random(), rng.uniform(0, 0.3), rng.uniform(0.1, 0.6)) * 255.0).astype(np.float32)

    owner = render.owner.ravel()                                                    # [H*W]
    order = np.argsort(owner, kind='stable')                                        # [H*W] grouped by owner
    bounds = np.concatenate([[0], np.cumsum(np.bincount(owner + 1, minlength=len(render.surfaces) + 1))])
    K = cam.K
    row = order // w                                                                # [H*W]
    x = ((order - row * w) - K[0, 2]) / K[0, 0]                                     # [H*W] normalised coords
    y = (row - K[1, 2]) / K[1, 1]
    t = render.depth.ravel()[order]                                                 # [H*W] z-depth
    col = np.empty((3, h * w), dtype=np.float32)                                    # [3,H*W] in `order`
    col[:, :bounds[1]] = background[:, None]
    for i, surf in enumerate(render.surfaces):
        a, b = bounds[i + 1], bounds[i + 2]
        if a == b:
            continue
        xs, ys, ts = x[a:b], y[a:b], t[a:b]
        if isinstance(surf, Plane):  # texture in world coordinates
            R = cam.R_wc
            p = cam.p_wc[:, None] + ts * (R[:, :1] * xs + R[:, 1:2] * ys + R[:, 2:3])  # [3,n]
            light = np.float32(ambient + diffuse * max(float(surf.n_w @ R @ l_c), 0.0))
        else:  # texture and normal in the object frame
            R_c, t_c = camera_pose(cam, surf)
            R = R_c.T
            p = -(t_c @ R_c)[:, None] + ts * (R[:, :1] * xs + R[:, 1:2] * ys + R[:, 2:3])  # [3,n]
            lam = (R @ l_c) @ surface_normal(surf.label, surf.size, p)                  # [n]
            light = (ambient + diffuse * np.maximum(lam, 0.0)).astype(np.float32)      # [n]
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

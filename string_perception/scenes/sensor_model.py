"""Depth sensor model: exact z-depth -> noisy 16UC1 millimetres with the dropouts of real RGB-D cameras.

1. Noise: z + N(0, sigma(z)), sigma(z) = base + quad * z^2 (stereo / structured-light error grows with z^2).
2. Out of range (z < min_range or z > max_range) and no return -> 0.
3. Depth edges: a pixel farther than a 4-neighbour by more than rel * z + abs (the occluded side of a
   silhouette) -> 0; the near side of the edge too with probability `edge_near_dropout`.
4. Random elliptic holes (Poisson count) and isolated speckle dropouts -> 0.
5. Quantisation: round to whole millimetres, uint16.
"""
from __future__ import annotations

import numpy as np

from .config import SceneConfig
from .noise_bank import gaussian

_FAR = 1e4  # stands in for "no return" when looking for depth steps


def depth_edges(z: np.ndarray, rel: float, abs_m: float):
    """(far, near) bool [H,W]: pixels on the far / near side of a depth step to a 4-neighbour."""
    zf = np.where(np.isfinite(z), z, _FAR)                       # [H,W]
    far = np.zeros(z.shape, dtype=bool)
    near = np.zeros(z.shape, dtype=bool)
    for axis in (0, 1):
        a = zf[1:] if axis == 0 else zf[:, 1:]                   # pixel and its previous neighbour
        b = zf[:-1] if axis == 0 else zf[:, :-1]
        step_ab = a - b > rel * b + abs_m                        # a behind b
        step_ba = b - a > rel * a + abs_m                        # b behind a
        sl_a = (slice(1, None), slice(None)) if axis == 0 else (slice(None), slice(1, None))
        sl_b = (slice(None, -1), slice(None)) if axis == 0 else (slice(None), slice(None, -1))
        far[sl_a] |= step_ab
        far[sl_b] |= step_ba
        near[sl_b] |= step_ab
        near[sl_a] |= step_ba
    return far, near & ~far


def hole_mask(shape, rng: np.random.Generator, cfg: SceneConfig) -> np.ndarray:
    """bool [H,W]: random elliptic blobs plus speckle."""
    h, w = shape
    holes = np.zeros(shape, dtype=bool)
    n = rng.poisson(cfg.hole_blobs_mean) if cfg.hole_blobs_mean > 0 else 0
    for _ in range(n):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(*cfg.hole_radius_frac_range, size=2) * min(h, w) + 0.5
        y0, y1 = max(int(cy - ry), 0), min(int(cy + ry) + 2, h)
        x0, x1 = max(int(cx - rx), 0), min(int(cx + rx) + 2, w)
        yy = ((np.arange(y0, y1) - cy) / ry) ** 2                # [ny]
        xx = ((np.arange(x0, x1) - cx) / rx) ** 2                # [nx]
        holes[y0:y1, x0:x1] |= yy[:, None] + xx[None, :] <= 1.0
    if cfg.speckle_dropout > 0:  # as many isolated pixels as a per-pixel coin would drop, at random places
        n_px = h * w
        holes.ravel()[rng.integers(0, n_px, rng.binomial(n_px, cfg.speckle_dropout))] = True
    return holes


def sensor_depth(z: np.ndarray, rng: np.random.Generator, cfg: SceneConfig) -> np.ndarray:
    """uint16 [H,W] millimetres (0 = invalid) from exact z-depth z [H,W] (metres, inf = no return)."""
    valid = (z >= cfg.min_range_m) & (z <= cfg.max_range_m)      # [H,W], False for inf
    zv = np.where(valid, z, 0.0)
    if cfg.depth_noise_base_m > 0 or cfg.depth_noise_quad_per_m > 0:
        sigma = cfg.depth_noise_base_m + cfg.depth_noise_quad_per_m * zv * zv
        zv = zv + sigma * gaussian(rng, z.shape)
    if np.isfinite(cfg.edge_rel_threshold):
        far, near = depth_edges(z, cfg.edge_rel_threshold, cfg.edge_abs_threshold_m)
        valid &= ~far
        if cfg.edge_near_dropout > 0:
            idx = np.flatnonzero(near)                           # [n] near-side edge pixels
            valid.ravel()[idx[rng.random(idx.size) < cfg.edge_near_dropout]] = False
    valid &= ~hole_mask(z.shape, rng, cfg)
    mm = np.rint(zv * 1000.0)
    np.clip(mm, 1.0, 65535.0, out=mm)                            # a valid return never reads 0
    return np.where(valid, mm, 0.0).astype(np.uint16)

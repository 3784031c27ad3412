"""generate_frame(seed, config): layout -> ray cast -> shading -> depth sensor -> labels. Pure per (seed, config)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import SceneConfig
from .frame import Frame
from .layout import Layout, sample_layout
from .render import Render, render_layout
from .sensor_model import sensor_depth
from .shading import shade

_DEFAULT = SceneConfig()


@dataclass
class SceneTruth:
    """A frame plus what produced it (for tests, debugging and visualisation)."""
    frame: Frame
    depth_exact_m: np.ndarray   # float64 [H,W] exact z-depth, inf where no surface is hit
    layout: Layout              # world-frame scene; objects in render order
    render: Render
    visible_px: np.ndarray      # int64 [O] per placed object: pixels visible in the image
    total_px: np.ndarray        # int64 [O] pixels it covers alone (off-image included)
    label_index: np.ndarray     # int64 [O] its index in the frame's labels, -1 if left out


def render_scene(seed: int, config: SceneConfig = _DEFAULT) -> SceneTruth:
    rng = np.random.default_rng(seed)
    layout = sample_layout(rng, config)
    return render_layout_truth(layout, rng, config, seed)


def render_layout_truth(layout: Layout, rng: np.random.Generator, cfg: SceneConfig, seed: int) -> SceneTruth:
    """Render a given layout (camera-frame poses set) with sensor noise from ``rng`` into a frame and its truth."""
    render = render_layout(layout)
    rgb = shade(render, layout, rng, cfg)
    z = render.depth                                                     # [H,W]
    depth_mm = sensor_depth(z, rng, cfg)

    n_obj = len(layout.objects)
    first = len(render.surfaces) - n_obj                                 # surface index of object 0
    owner = render.owner
    visible = np.bincount(owner[owner >= first] - first, minlength=n_obj).astype(np.int64)  # [O]
    total = render.total[first:]                                         # [O]
    with np.errstate(divide='ignore', invalid='ignore'):
        vis = np.where(total > 0, visible / np.maximum(total, 1), 0.0)   # [O]
    keep = (visible >= cfg.min_visible_pixels) & (vis >= cfg.min_visibility) & (visible > 0)
    label_index = np.where(keep, np.cumsum(keep) - 1, -1).astype(np.int64)
    lut = np.full(len(render.surfaces) + 1, -1, dtype=np.int16)          # owner + 1 -> instance id
    lut[first + 1:] = label_index
    instance_mask = lut[owner + 1]                                       # [H,W]

    kept = [o for o, k in zip(layout.objects, keep) if k]
    m = len(kept)
    frame = Frame(
        rgb=rgb,
        depth_mm=depth_mm,
        K=layout.camera.K.copy(),
        labels=np.array([o.label for o in kept], dtype=np.int64),
        translations=np.array([o.t_c for o in kept], dtype=np.float64).reshape(m, 3),
        rotations=np.array([o.R_c for o in kept], dtype=np.float64).reshape(m, 3, 3),
        sizes=np.array([o.size for o in kept], dtype=np.float64).reshape(m, 3),
        visibility=vis[keep].astype(np.float64),
        instance_mask=instance_mask,
        seed=int(seed),
    )
    return SceneTruth(frame, z, layout, render, visible, total, label_index)


def generate_frame(seed: int, config: SceneConfig = _DEFAULT) -> Frame:
    """One RGB-D frame with 3D box labels, deterministic per (seed, config) (np.random.default_rng(seed))."""
    return render_scene(seed, config).frame

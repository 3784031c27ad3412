"""Sequences of frames with moving objects, for tracking tests and benchmarks: one sampled scene, its objects
sliding on their support surface at constant velocity (static camera), rendered frame by frame.

    seq = generate_sequence(seed=2_000_000_000, config=SequenceConfig(frames=30), scene=SceneConfig())
    seq[i].frame            # a scenes.Frame (rgb, depth, K, labels of the visible objects, ...)
    seq[i].object_ids       # int64 [M]: which scene object each label is (stable across frames = track truth)
    seq[i].stamp_s          # seconds since the first frame

Objects may pass through each other (no collisions), which makes occlusions and label dropouts, as a tracker must
survive. Each frame's sensor noise comes from ``np.random.default_rng([seed, i])``; a sequence is a pure
function of ``(seed, config, scene)``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from .config import SceneConfig
from .frame import Frame
from .generator import render_layout_truth
from .layout import sample_layout

__all__ = ['SequenceConfig', 'SequenceFrame', 'generate_sequence']


@dataclass(frozen=True)
class SequenceConfig:
    frames: int = 30
    rate_hz: float = 30.0
    max_speed_m_s: float = 0.3         # each moving object's speed is uniform in [0.3, 1] x this
    moving_fraction: float = 0.7       # share of the objects that move (the others stay put)

    def __post_init__(self):
        if self.frames < 1 or not self.rate_hz > 0 or self.max_speed_m_s < 0 or not 0 <= self.moving_fraction <= 1:
            raise ValueError('need frames >= 1, rate_hz > 0, max_speed_m_s >= 0, moving_fraction in [0, 1]')


@dataclass
class SequenceFrame:
    frame: Frame
    object_ids: np.ndarray     # int64 [M] scene object index of each label
    stamp_s: float
    velocities: np.ndarray     # float64 [M,3] true velocity of each label, camera frame, m/s


def generate_sequence(seed: int, config: SequenceConfig = SequenceConfig(),
                      scene: SceneConfig = SceneConfig()) -> list[SequenceFrame]:
    rng = np.random.default_rng(seed)
    layout = sample_layout(rng, scene)
    n = len(layout.objects)
    heading = rng.uniform(0.0, 2.0 * np.pi, n)                             # [O]
    speed = rng.uniform(0.3, 1.0, n) * config.max_speed_m_s * (rng.random(n) < config.moving_fraction)
    v_w = np.stack([np.cos(heading), np.sin(heading), np.zeros(n)], axis=1) * speed[:, None]   # [O,3] world
    cam = layout.camera
    start = [o.p_w.copy() for o in layout.objects]
    out = []
    for i in range(config.frames):
        t = i / config.rate_hz
        moved = copy.copy(layout)
        moved.objects = [copy.copy(o) for o in layout.objects]
        for o, p0, v in zip(moved.objects, start, v_w):
            o.p_w = p0 + v * t
            o.t_c = cam.to_camera(o.p_w)
        truth = render_layout_truth(moved, np.random.default_rng([seed, i]), scene, seed)
        ids = np.flatnonzero(truth.label_index >= 0).astype(np.int64)      # label order = object order
        out.append(SequenceFrame(truth.frame, ids, t, (v_w[ids] @ cam.R_wc).reshape(-1, 3)))
    return out

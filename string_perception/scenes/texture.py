"""Procedural solid textures (evaluated at 3D points, so they stick to the object) and their random draw."""
from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass

import numpy as np

PLAIN, CHECKER, STRIPES, NOISE = range(4)


@dataclass
class Texture:
    kind: int
    c1: np.ndarray      # [3,1] float32 albedo in [0,1]
    c2: np.ndarray      # [3,1] float32
    scale: float        # cell / stripe period, metres
    axis: np.ndarray    # [3] stripe direction (unit)
    freqs: np.ndarray   # [3,3] float32 noise: rows = spatial frequencies (rad/m) of 3 summed sinusoids
    phase: np.ndarray   # [3] float32

    def albedo(self, p: np.ndarray) -> np.ndarray:
        """Albedo [3,N] (float32) at points p[3,N] in the texture's frame."""
        if self.kind == PLAIN:
            return np.broadcast_to(self.c1, (3, p.shape[1]))
        # float modulo and float64 sin are slow in numpy: parity through int32, sinusoids in float32
        if self.kind == CHECKER:
            q = np.floor(p * (1.0 / self.scale)).astype(np.int32)               # [3,N] cell indices
            m = ((q[0] + q[1] + q[2]) & 1).astype(np.float32)                   # [N] 0/1
        elif self.kind == STRIPES:
            a = self.axis * (1.0 / self.scale)
            m = (np.floor(a[0] * p[0] + a[1] * p[1] + a[2] * p[2]).astype(np.int32) & 1).astype(np.float32)  # [N]
        else:
            q = p.astype(np.float32)                                            # [3,N]
            f, ph = self.freqs, self.phase
            m = np.float32(0.5)
            for k in range(3):
                m = m + np.sin(f[k, 0] * q[0] + f[k, 1] * q[1] + f[k, 2] * q[2] + ph[k]) * np.float32(1.0 / 6.0)
        return self.c1 + (self.c2 - self.c1) * m                               # [3,N]


def random_texture(rng: np.random.Generator, *, saturated: bool, scale_range=(0.01, 0.05),
                   cum_p=(0.4, 0.6, 0.8)) -> Texture:
    """Objects: saturated colours, small patterns; supports: muted colours, larger patterns.
    cum_p: cumulative probabilities of PLAIN, CHECKER, STRIPES (NOISE takes the rest)."""
    u = rng.random(8).tolist()                                                  # [8] uniforms
    g = rng.standard_normal(15)                                                 # [15] normals
    kind = sum(u[0] >= c for c in cum_p)
    if saturated:
        c1 = colorsys.hsv_to_rgb(u[1], 0.4 + 0.6 * u[2], 0.35 + 0.65 * u[3])
    else:
        c1 = colorsys.hsv_to_rgb(u[1], 0.35 * u[2], 0.3 + 0.6 * u[3])
    c2 = colorsys.hsv_to_rgb((u[1] + 0.6 * u[4] - 0.3) % 1.0, u[5], 0.1 + 0.9 * u[6])
    scale = scale_range[0] + (scale_range[1] - scale_range[0]) * u[7]
    cols = np.array([c1, c2], np.float32)[:, :, None]                           # [2,3,1]
    axis = g[:3] * (1.0 / math.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]))
    noise = g[3:].astype(np.float32)                                            # [12] frequencies, phases
    return Texture(kind, cols[0], cols[1], scale, axis, noise[:9].reshape(3, 3) * np.float32(2.0 * np.pi / scale),
                   noise[9:] * np.float32(np.pi))

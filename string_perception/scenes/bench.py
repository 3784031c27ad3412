"""Measure generator throughput on one core: ``python -m string_perception.scenes.bench [--size 128x128]``.

Reports frames per second of CPU time (process time, the fastest of a few runs of every frame), so other work
sharing the machine inflates the number less than wall-clock timing would. Not a test: nothing asserts on time.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from .config import SceneConfig
from .generator import generate_frame


def measure_fps(height: int = 128, width: int = 128, frames: int = 100, repeats: int = 5, seed: int = 0,
                config: SceneConfig | None = None) -> float:
    """Frames/s on one core over seeds [seed, seed + frames): each frame is generated `repeats` times and its
    fastest CPU time counts, which filters out the slowdowns of a machine shared with other jobs."""
    cfg = (config or SceneConfig()).replace(height=height, width=width)
    generate_frame(seed, cfg)  # warm-up: imports, noise bank
    best = np.full(frames, np.inf)                          # [frames] seconds
    clock = time.process_time
    for _ in range(repeats):
        for i in range(frames):
            t0 = clock()
            generate_frame(seed + i, cfg)
            best[i] = min(best[i], clock() - t0)
    return frames / float(best.sum())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--size', default='128x128', help='HxW')
    ap.add_argument('--frames', type=int, default=100)
    ap.add_argument('--repeats', type=int, default=5)
    a = ap.parse_args(argv)
    h, w = (int(v) for v in a.size.lower().split('x'))
    fps = measure_fps(h, w, a.frames, a.repeats)
    print(f'{h}x{w}: {fps:.1f} frames/s (one core, CPU time, best of {a.repeats} per frame)')


if __name__ == '__main__':
    main()

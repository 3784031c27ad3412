"""Simulated frames into the training FrameCache: RawSample per seed, generated across processes.

`frame_to_raw_sim` is training.data.frame_to_raw for SIM_CLASS_NAMES: the 'object' class (meshes with no symmetry
axis) is canonicalised like a box. Worker processes are spawned, not forked: a GL context does not survive fork.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
from pathlib import Path
from typing import Sequence

import numpy as np

from string_perception import box_ops
from string_perception.scenes.primitives import BOX
from string_perception.training.data import FrameCache, RawSample, canonical_box

from .classes import OBJECT
from .config import SimConfig
from .generator import generate_sim_frame


def frame_to_raw_sim(frame) -> RawSample:
    labels = np.asarray(frame.labels, np.int64).reshape(-1)                     # [M]
    t = np.asarray(frame.translations, np.float64).reshape(-1, 3)               # [M,3]
    R = np.asarray(frame.rotations, np.float64).reshape(-1, 3, 3)               # [M,3,3]
    size = np.asarray(frame.sizes, np.float64).reshape(-1, 3)                   # [M,3]
    canon = [canonical_box(BOX if c == OBJECT else c, r, s) for c, r, s in zip(labels, R, size)]
    Rc = np.stack([c[0] for c in canon]) if canon else np.zeros((0, 3, 3))      # [M,3,3]
    sc = np.stack([c[1] for c in canon]) if canon else np.zeros((0, 3))         # [M,3]
    return RawSample(rgb=np.ascontiguousarray(frame.rgb, np.uint8),
                     depth_mm=np.ascontiguousarray(frame.depth_mm, np.uint16),
                     K=np.asarray(frame.K, np.float32).reshape(3, 3), labels=labels,
                     boxes=box_ops.encode_box_params(t, R, size).astype(np.float32).reshape(-1, 12),
                     boxes_canonical=box_ops.encode_box_params(t, Rc, sc).astype(np.float32).reshape(-1, 12),
                     seed=int(frame.seed))


def _generate_raw(job) -> RawSample:
    seed, config = job
    return frame_to_raw_sim(generate_sim_frame(int(seed), config))


def build_sim_cache(seeds: Sequence[int], config: SimConfig, processes: int = 1, progress: bool = False
                    ) -> FrameCache:
    """A FrameCache of the simulated frames of `seeds` (spawned worker processes when processes > 1)."""
    jobs = [(int(s), config) for s in seeds]
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(jobs), desc=f'{config.cell} frames', unit='frame', dynamic_ncols=True)
    out: dict[int, RawSample] = {}
    if processes > 1 and len(jobs) > 1:
        with mp.get_context('spawn').Pool(processes) as pool:
            for raw in pool.imap_unordered(_generate_raw, jobs, chunksize=4):
                out[raw.seed] = raw
                if bar is not None:
                    bar.update(1)
    else:
        for job in jobs:
            raw = _generate_raw(job)
            out[raw.seed] = raw
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return FrameCache(out)


def sim_source_hash() -> str:
    """sha256 of the sim package's source (a disk cache of another simulator version is never reused)."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.glob('*.py')):
        h.update(f.name.encode() + b'\0' + f.read_bytes())
    return h.hexdigest()


def sim_fingerprint(config: SimConfig, seeds: Sequence[int]) -> str:
    """FrameCache.save / load fingerprint of the simulated frames of `seeds`."""
    seeds = list(seeds)
    return json.dumps({'sim_config': config.to_dict(), 'seeds': [seeds[0], seeds[-1], len(seeds)] if seeds else [],
                       'simulator': sim_source_hash(), 'format': 1}, sort_keys=True, default=str)

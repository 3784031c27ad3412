"""Simulated frames into the training FrameCache: RawSample per seed, generated across processes.

Training owns the frame cache (``training/data.py``: ``FrameCache``, ``RawSample``); this module feeds it from the
simulator, which knows nothing of training. `frame_to_raw_sim` is training.data.frame_to_raw for SIM_CLASS_NAMES:
the 'object' class (meshes with no symmetry axis) is canonicalised like a box. Worker processes are spawned, not
forked: a GL context does not survive fork. Needs the simulator (mujoco): ``training/sources.py`` imports this module
only when simulated frames are asked for.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import string_perception.sim as sim
from string_perception.scenes.primitives import BOX
from string_perception.sim import SimConfig, generate_sim_frame
from string_perception.sim.classes import OBJECT
from string_perception.training.data import FrameCache, RawSample, frame_to_raw


def frame_to_raw_sim(frame) -> RawSample:
    """training.data.frame_to_raw for SIM_CLASS_NAMES: 'object' takes a box's canonical rotation."""
    return frame_to_raw(frame, canonical_as={OBJECT: BOX})


def generate_raw_sim(job) -> RawSample:
    """``FrameCache.build`` worker: the :class:`RawSample` of the simulated frame of ``(seed, sim_config)``."""
    seed, config = job
    return frame_to_raw_sim(generate_sim_frame(int(seed), config))


def build_sim_cache(seeds: Sequence[int], config: SimConfig, processes: int = 1, progress: bool = False
                    ) -> FrameCache:
    """A FrameCache of the simulated frames of `seeds` (spawned worker processes when processes > 1)."""
    return FrameCache.build([int(s) for s in seeds], config, processes, progress, desc=f'{config.cell} frames',
                            generate=generate_raw_sim, start_method='spawn')


def sim_source_hash() -> str:
    """sha256 of the sim package's source (a disk cache of another simulator version is never reused)."""
    h = hashlib.sha256()
    for f in sorted(Path(sim.__file__).parent.glob('*.py')):
        h.update(f.name.encode() + b'\0' + f.read_bytes())
    return h.hexdigest()


def sim_fingerprint(config: SimConfig, seeds: Sequence[int]) -> str:
    """FrameCache.save / load fingerprint of the simulated frames of `seeds` (``SimConfig.key_dict``: a field added
    later, e.g. ``distractors``, counts only when it is on, so the keys of caches made before it stay the same)."""
    seeds = list(seeds)
    return json.dumps({'sim_config': config.key_dict(), 'seeds': [seeds[0], seeds[-1], len(seeds)] if seeds else [],
                       'simulator': sim_source_hash(), 'format': 1}, sort_keys=True, default=str)


__all__ = ['frame_to_raw_sim', 'generate_raw_sim', 'build_sim_cache', 'sim_source_hash', 'sim_fingerprint']

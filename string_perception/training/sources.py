"""Scene sources for training and evaluation: the procedural ray caster, the simulated ALOHA / KUKA cells, a mix.

``scenes`` names where a split's frames come from (``--scenes`` in train / evaluate / the paper table):

- ``procedural``: ``scenes.generate_frame`` (the default; exactly :class:`~.data.SceneDataset`, caches included);
- ``aloha`` / ``kuka``: ``sim.generate_sim_frame`` with ``SimConfig(cell=...)``;
- ``mix``: an even split of the three, decided per seed: the frame of seed ``s`` is rendered by
  ``MIX_ORDER[s % 3]`` = procedural, aloha, kuka. Any run of consecutive seeds therefore holds each source to within
  one frame (8 000 training frames: 2 667 procedural, 2 667 aloha, 2 666 kuka), every seed appears once, and a mix
  frame is the very frame that source renders for that seed.

Seeds keep the split ranges of :mod:`.data` for every source (train ``[0, 1e6)``, val ``[1e9, ...)``, test
``[2e9, ...)``), so validation and test frames are held out from training whatever the source.

Class list: procedural frames label the five primitives (``scenes.CLASS_NAMES``). Simulated frames add the
generic mesh class ``object`` (``sim.SIM_CLASS_NAMES``) unless ``mesh_object_fraction=0`` (primitive-only frames,
``--sim mesh_object_fraction=0``); :func:`class_names_for` gives the model's list from that rule.

Simulated frames are always rendered into a ``FrameCache`` by spawned worker processes (a GL context does not
survive fork); the cache fingerprint is ``training.sim_frames.sim_fingerprint`` per simulated part (simulator source
hash, ``SimConfig``, seed range) next to ``data.procedural_fingerprint`` for procedural ones, under the source name, so
a cache of another source, config or simulator version is never reused.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from string_perception.training.data import (FrameCache, RawSample, SceneDataset, downscale_frame, frame_to_raw,
                                             generate_raw, procedural_fingerprint)

SCENE_SOURCES = ('procedural', 'aloha', 'kuka', 'mix')
MIX_ORDER = ('procedural', 'aloha', 'kuka')


def check_scenes(scenes: str) -> str:
    if scenes not in SCENE_SOURCES:
        raise ValueError(f'unknown scene source {scenes!r}; expected one of {SCENE_SOURCES}')
    return scenes


def source_of(scenes: str, seed: int) -> str:
    """The generator of one frame: ``scenes`` itself, or for ``mix`` ``MIX_ORDER[seed % 3]``."""
    return MIX_ORDER[int(seed) % len(MIX_ORDER)] if scenes == 'mix' else scenes


def uses_sim(scenes: str) -> bool:
    return check_scenes(scenes) != 'procedural'


def sim_config(image_hw: Sequence[int], overrides: Mapping[str, Any] | None = None):
    """``SimConfig`` at the model's input size with ``overrides`` (SimConfig fields; the cell comes per frame)."""
    from string_perception.sim import SimConfig
    overrides = dict(overrides or {})
    overrides.pop('cell', None)
    h, w = image_hw
    return SimConfig(height=int(h), width=int(w), **overrides)


def sim_has_objects(overrides: Mapping[str, Any] | None) -> bool:
    """Whether simulated frames with these SimConfig overrides can hold mesh objects (class ``object``)."""
    from string_perception.sim import SimConfig
    return float(dict(overrides or {}).get('mesh_object_fraction', SimConfig.mesh_object_fraction)) > 0


def class_names_for(scenes: str, sim_overrides: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The class list of a model trained on ``scenes``: ``scenes.CLASS_NAMES``, or ``sim.SIM_CLASS_NAMES`` when
    simulated frames may hold mesh objects."""
    from string_perception.scenes import CLASS_NAMES
    if uses_sim(scenes) and sim_has_objects(sim_overrides):
        from string_perception.sim import SIM_CLASS_NAMES
        return tuple(SIM_CLASS_NAMES)
    return tuple(CLASS_NAMES)


def _generate_source(job) -> RawSample:
    """FrameCache.build worker: the frame of ``(seed, (scenes, scene_config, sim_cfg[, out_hw]))`` from its source;
    with ``out_hw`` the frame is rendered at the configs' (larger) size and brought to ``out_hw`` as the node
    prepares a camera frame (``data.downscale_frame``)."""
    seed, (scenes, scene_config, sim_cfg, *rest) = job
    out_hw = rest[0] if rest else None
    source = source_of(scenes, seed)
    if out_hw is None:
        if source == 'procedural':
            return generate_raw((seed, scene_config))
        from string_perception.training.sim_frames import generate_raw_sim   # the simulator: optional
        return generate_raw_sim((seed, sim_cfg.replace(cell=source)))
    if source == 'procedural':
        from string_perception.scenes import generate_frame
        return frame_to_raw(downscale_frame(generate_frame(int(seed), scene_config), out_hw))
    from string_perception.sim import generate_sim_frame
    from string_perception.training.sim_frames import frame_to_raw_sim   # the simulator: optional
    frame = generate_sim_frame(int(seed), sim_cfg.replace(cell=source))
    return frame_to_raw_sim(downscale_frame(frame, out_hw))


class SourceDataset(SceneDataset):
    """:class:`~.data.SceneDataset` over simulated (or mixed) frames: item ``i`` is the frame of seed
    ``split base + offset + i`` rendered by ``source_of(scenes, seed)``. Uncached frames are rendered in this
    process; training and evaluation build the cache first (:meth:`build_cache`, spawned workers)."""

    def __init__(self, split: str, num_frames: int, scenes: str, scene_config=None, sim_cfg=None, offset: int = 0,
                 cache: FrameCache | None = None, canonical_targets: bool = False,
                 out_hw: tuple[int, int] | None = None):
        super().__init__(split, num_frames, scene_config, offset, cache, canonical_targets)
        self.scenes = check_scenes(scenes)
        self.out_hw = None if out_hw is None else (int(out_hw[0]), int(out_hw[1]))   # render larger, then downscale
        self.sim_cfg = sim_cfg if sim_cfg is not None else sim_config((self.scene_config.height,
                                                                      self.scene_config.width))

    def source(self, index: int) -> str:
        return source_of(self.scenes, self.seeds[index])

    def raw(self, index: int) -> RawSample:
        seed = self.seeds[index]
        if self.cache is not None and seed in self.cache:
            return self.cache.samples[seed]
        return _generate_source((seed, self._job()))

    def _job(self) -> tuple:
        base = (self.scenes, self.scene_config, self.sim_cfg)
        return base if self.out_hw is None else (*base, self.out_hw)

    def parts(self, seeds: Sequence[int]) -> dict[str, list[int]]:
        """``seeds`` grouped by the source that renders them (in MIX_ORDER)."""
        out: dict[str, list[int]] = {}
        for s in seeds:
            out.setdefault(source_of(self.scenes, s), []).append(int(s))
        return {k: out[k] for k in MIX_ORDER if k in out}

    def fingerprint(self, seeds: Sequence[int]) -> str:
        from string_perception.training.sim_frames import sim_fingerprint   # the simulator: optional
        parts = {source: procedural_fingerprint(self.scene_config, part) if source == 'procedural'
                 else sim_fingerprint(self.sim_cfg.replace(cell=source), part)
                 for source, part in self.parts(seeds).items()}
        out = {'scenes': self.scenes, 'parts': parts}
        if self.out_hw is not None:
            out['out_hw'] = list(self.out_hw)
        return json.dumps(out, sort_keys=True)

    def build_cache(self, indices: Sequence[int] | None = None, processes: int = 1, progress: bool = False,
                    path: str | Path | None = None) -> FrameCache:
        """Render and keep the frames at ``indices`` (default: all) across ``processes`` spawned workers (one pool
        for every source of a mix). With ``path``, reuse that file when its fingerprint matches, else write it."""
        indices = range(len(self)) if indices is None else indices
        seeds = [self.seeds[i] for i in indices]
        fingerprint = self.fingerprint(seeds)
        if path is not None and Path(path).exists():
            cache = FrameCache.load(path, fingerprint)
            if cache is not None and all(s in cache for s in seeds):
                self.cache = cache
                return cache
        self.cache = FrameCache.build(seeds, self._job(), processes, progress,
                                      desc=f'{self.split} {self.scenes} frames', generate=_generate_source,
                                      start_method='spawn')
        if path is not None:
            self.cache.save(path, fingerprint)
        return self.cache


def make_dataset(split: str, num_frames: int, scenes: str = 'procedural', scene_config=None, sim_cfg=None,
                 offset: int = 0, cache: FrameCache | None = None, canonical_targets: bool = False,
                 out_hw: tuple[int, int] | None = None) -> SceneDataset:
    """The dataset of ``num_frames`` frames of ``split`` from ``scenes``: a plain :class:`~.data.SceneDataset`
    for ``procedural`` (unchanged behaviour and cache files), else a :class:`SourceDataset`. ``out_hw``: frames
    are rendered at the configs' size and downscaled to it as the runtime prepares camera frames."""
    if check_scenes(scenes) == 'procedural' and out_hw is None:
        return SceneDataset(split, num_frames, scene_config, offset, cache, canonical_targets)
    return SourceDataset(split, num_frames, scenes, scene_config, sim_cfg, offset, cache, canonical_targets, out_hw)


__all__ = ['SCENE_SOURCES', 'MIX_ORDER', 'check_scenes', 'source_of', 'uses_sim', 'sim_config',
           'sim_has_objects', 'class_names_for', 'SourceDataset', 'make_dataset']

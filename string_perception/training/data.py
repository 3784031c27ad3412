"""Training / evaluation data: generated RGB-D frames, addressed by seed.

Every sample is ``generate_frame(split_base + index, scene_config)``, so a frame is a pure function of its seed
and a run is reproducible. Seed ranges (docs/ARCHITECTURE.md) never mix:

    train  [0, 1e6)      val  [1e9, 1e9 + 1e4)      test  [2e9, ...)

Pieces:
- :func:`frame_to_sample` turns a scenes ``Frame`` into model inputs (depth mm -> metres) and a target
  ``{'labels': int64[M], 'boxes': float32[M,12]}`` in the model's ``[t(3), rot6d(6), size(3)]`` layout.
- :func:`canonical_box` picks one representative among the rotations that describe a box equally well (training
  targets only; evaluation always scores against the generator's boxes). The loss (``training/losses.py``) is an L1
  on the 6D rotation and the corners, which penalises a box turned by 180 degrees although it is the same box; a
  canonical target removes that ambiguity:
    * ``box``: among the 24 axis relabellings ``R -> R P`` (P a signed permutation, det +1, sizes permuted with it,
      the very same box) the one closest to the camera axes (max trace);
    * ``cylinder`` / ``cone`` / ``capsule``: keep the symmetry axis z (flipped towards ``_AXIS_REF`` for the
      mirror-symmetric cylinder and capsule; a cone keeps its apex), x = camera x projected off z. The turn about
      the axis only shows in the texture, so the generator's angle cannot be predicted anyway;
    * ``sphere``: identity (its box orientation is the random texture's).
- :class:`SceneDataset` is a map-style dataset over ``num_frames`` consecutive seeds of a split; frames are generated
  on the fly (in DataLoader workers) or read from an optional in-memory :class:`FrameCache`.
- :class:`ShardSampler` is the DistributedSampler analogue: a static ``index % world_size == rank`` shard, reshuffled
  every epoch from ``(seed, epoch)``, optionally infinite and able to start at any position (exact resume).
- :func:`collate` stacks a batch into tensors plus a list of per-image targets.
"""
from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from string_perception import box_ops
from string_perception.scenes import CLASS_NAMES, SYMMETRY_AXIS, SceneConfig, generate_frame

SPLIT_SEED_BASE = {'train': 0, 'val': 1_000_000_000, 'test': 2_000_000_000}
SPLIT_SIZE = {'train': 1_000_000, 'val': 10_000, 'test': None}  # None: open-ended


def split_seeds(split: str, num_frames: int, offset: int = 0) -> range:
    """The seeds of ``num_frames`` consecutive frames of ``split`` starting ``offset`` frames in."""
    if split not in SPLIT_SEED_BASE:
        raise ValueError(f'unknown split {split!r}; expected one of {sorted(SPLIT_SEED_BASE)}')
    limit = SPLIT_SIZE[split]
    if offset < 0 or num_frames < 0 or (limit is not None and offset + num_frames > limit):
        raise ValueError(f'{split} split holds {limit} frames; asked for [{offset}, {offset + num_frames})')
    base = SPLIT_SEED_BASE[split] + offset
    return range(base, base + num_frames)


# ----------------------------------------------------------------------------------------------------------------
# Frame -> sample
# ----------------------------------------------------------------------------------------------------------------

_CUBE_GROUP = box_ops.box_symmetries()                   # [24,3,3]
_AXIS_REF = np.array([1.0, -1.0, -1.0]) / np.sqrt(3.0)   # camera-frame direction a mirror-symmetric axis points to


def canonical_box(label: int, R: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical ``(R[3,3], size[3])`` of one labelled box (see the module docstring); ``t`` never changes."""
    name = CLASS_NAMES[int(label)]
    R = np.asarray(R, np.float64)
    size = np.asarray(size, np.float64)
    if name == 'sphere':
        return np.eye(3), size
    axis = SYMMETRY_AXIS.get(name)
    if axis is None:                                                     # a plain box: same box, other axes
        RP = R[None] @ _CUBE_GROUP                                       # [24,3,3]
        k = int(np.argmax(np.trace(RP, axis1=1, axis2=2)))
        return RP[k], np.abs(_CUBE_GROUP[k]).T @ size                    # sizes follow the axes
    z = R[:, axis]
    if name != 'cone' and z @ _AXIS_REF < 0:
        z = -z
    x = np.array([1.0, 0.0, 0.0]) - z[0] * z                             # camera x off the axis
    if np.linalg.norm(x) < 0.1:                                          # axis (nearly) along camera x
        x = np.array([0.0, 1.0, 0.0]) - z[1] * z
    x = x / np.linalg.norm(x)
    Rc = np.stack([x, np.cross(z, x), z], axis=1)                        # columns x, y, z; det +1
    if axis != 2:                                                        # (all our symmetric shapes use z)
        Rc = np.roll(Rc, axis - 2, axis=1)
    return Rc, size


@dataclasses.dataclass
class RawSample:
    """A frame reduced to what training needs, kept compact (uint16 depth) so caches stay small."""
    rgb: np.ndarray              # uint8[H,W,3]
    depth_mm: np.ndarray         # uint16[H,W], 0 = invalid
    K: np.ndarray                # float32[3,3]
    labels: np.ndarray           # int64[M]
    boxes: np.ndarray            # float32[M,12]  [t(3), rot6d(6), size(3)], the generator's boxes
    boxes_canonical: np.ndarray  # float32[M,12]  the same with canonical rotations (training targets)
    seed: int
    instance_mask: np.ndarray | None = None   # int8[H,W] index into labels, -1 = no labelled object (dense targets)


def frame_to_raw(frame, canonical_as: Mapping[int, int] | None = None) -> RawSample:
    """Compact a scenes ``Frame`` into a :class:`RawSample` (the 12-number box encodings happen here).

    ``canonical_as`` maps labels outside :data:`CLASS_NAMES` (e.g. the simulator's generic ``object``) to the class
    whose canonical rotation they take."""
    labels = np.asarray(frame.labels, dtype=np.int64).reshape(-1)           # [M]
    t = np.asarray(frame.translations, np.float64).reshape(-1, 3)           # [M,3]
    R = np.asarray(frame.rotations, np.float64).reshape(-1, 3, 3)           # [M,3,3]
    size = np.asarray(frame.sizes, np.float64).reshape(-1, 3)               # [M,3]
    as_class = dict(canonical_as or {})
    canon = [canonical_box(as_class.get(int(c), c), r, s) for c, r, s in zip(labels, R, size)]
    Rc = np.stack([c[0] for c in canon]) if canon else np.zeros((0, 3, 3))  # [M,3,3]
    sc = np.stack([c[1] for c in canon]) if canon else np.zeros((0, 3))     # [M,3]
    return RawSample(rgb=np.ascontiguousarray(frame.rgb, dtype=np.uint8),
                     depth_mm=np.ascontiguousarray(frame.depth_mm, dtype=np.uint16),
                     K=np.asarray(frame.K, dtype=np.float32).reshape(3, 3),
                     labels=labels,
                     boxes=box_ops.encode_box_params(t, R, size).astype(np.float32).reshape(-1, 12),
                     boxes_canonical=box_ops.encode_box_params(t, Rc, sc).astype(np.float32).reshape(-1, 12),
                     seed=int(frame.seed),
                     instance_mask=compact_instance_mask(frame.instance_mask, len(labels)))


def compact_instance_mask(mask: np.ndarray, num_objects: int) -> np.ndarray:
    """int16 instance mask -> int8[H,W] (-1 = no labelled object); frames hold at most 127 labelled objects."""
    if num_objects > 127:
        raise ValueError(f'{num_objects} labelled objects do not fit an int8 instance mask')
    mask = np.asarray(mask)
    return np.where((mask >= 0) & (mask < num_objects), mask, -1).astype(np.int8)


def raw_to_sample(raw: RawSample, canonical: bool = False) -> dict:
    """Tensors for one image: ``image`` uint8[H,W,3], ``depth`` float32[H,W] metres (0 = invalid), ``K``
    float32[3,3], ``target`` {'labels': int64[M], 'boxes': float32[M,12], 'mask': int8[H,W] when the raw sample
    has an instance mask} (canonical rotations when ``canonical``; what the loss sees), ``gt`` {'labels',
    'params' float64[M,12]} numpy, the generator's boxes (what metrics score), ``seed``."""
    depth_m = raw.depth_mm.astype(np.float32) * np.float32(1e-3)            # [H,W] metres; 0 stays 0
    boxes = raw.boxes_canonical if canonical else raw.boxes
    target = {'labels': torch.from_numpy(raw.labels.copy()), 'boxes': torch.from_numpy(boxes.copy())}
    if raw.instance_mask is not None:
        target['mask'] = torch.from_numpy(raw.instance_mask.copy())          # int8[H,W], for dense assignment
    return {
        'image': torch.from_numpy(raw.rgb),
        'depth': torch.from_numpy(depth_m),
        'K': torch.from_numpy(raw.K.copy()),
        'target': target,
        'gt': {'labels': raw.labels.copy(), 'params': raw.boxes.astype(np.float64)},   # as generated, for metrics
        'seed': raw.seed,
    }


def frame_to_sample(frame, canonical: bool = False) -> dict:
    """A scenes ``Frame`` straight to the tensors of :func:`raw_to_sample`."""
    return raw_to_sample(frame_to_raw(frame), canonical)


def collate(samples: Sequence[dict]) -> dict:
    """Batch: ``image`` uint8[B,H,W,3], ``depth`` float32[B,H,W], ``K`` float32[B,3,3], ``seeds`` int64[B] and
    ``targets``: a list of B dicts (M varies per image), ``gts``: the matching list of numpy ground truth."""
    return {
        'image': torch.stack([s['image'] for s in samples]),   # [B,H,W,3]
        'depth': torch.stack([s['depth'] for s in samples]),   # [B,H,W]
        'K': torch.stack([s['K'] for s in samples]),           # [B,3,3]
        'seeds': torch.tensor([s['seed'] for s in samples], dtype=torch.int64),  # [B]
        'targets': [s['target'] for s in samples],
        'gts': [s['gt'] for s in samples],
    }


# ----------------------------------------------------------------------------------------------------------------
# Cache
# ----------------------------------------------------------------------------------------------------------------

def generate_raw(args) -> RawSample:
    """``FrameCache.build`` worker: the :class:`RawSample` of the procedural frame of ``(seed, scene_config)``."""
    seed, config = args
    return frame_to_raw(generate_frame(int(seed), config))


def downscale_frame(frame, out_hw: tuple[int, int]):
    """A frame rendered at a multiple of the model's input size -> the model's size, exactly as the node prepares a
    camera frame (``runtime.preprocess.prepare_inputs``: colour INTER_AREA, depth and the instance mask sampled
    nearest at the model pixel centres, K rescaled). 3D labels do not change. Training on such frames teaches the
    model what the runtime hands it (a downsampled camera image), not a render made at the small size."""
    from string_perception.runtime.preprocess import centre_samples, prepare_inputs
    H, W = (int(v) for v in out_hw)
    h, w = frame.rgb.shape[:2]
    if (h, w) == (H, W):
        return frame
    inp = prepare_inputs(frame.rgb, frame.depth_mm, frame.K, (H, W), resize_mode='pad')
    if inp.crop_xywh != (0, 0, w, h):
        raise ValueError(f'downscale_frame: {w}x{h} is not the {W}x{H} model size times one factor')
    depth_mm = np.round(inp.depth[0].astype(np.float64) * 1000.0).astype(np.uint16)        # [H,W] exact mm back
    mask = frame.instance_mask
    if mask is not None:
        rows, cols = centre_samples(H, 0, h, h, h), centre_samples(W, 0, w, w, w)     # [H], [W] as the depth
        mask = np.ascontiguousarray(mask[rows[:, None], cols[None, :]])
    return dataclasses.replace(frame, rgb=inp.image[0], depth_mm=depth_mm, K=inp.intrinsics[0].astype(np.float64),
                               instance_mask=mask)


class FrameCache:
    """In-memory frames for a fixed set of seeds, generated once (in parallel when ``processes > 1``).

    About 80 kB a frame at 128x128 (RGB + uint16 depth), so 10k frames ~ 0.8 GB.
    """

    def __init__(self, samples: dict[int, RawSample]):
        self.samples = samples  # seed -> RawSample

    @classmethod
    def build(cls, seeds: Sequence[int], config, processes: int = 1, progress: bool = False,
              desc: str = 'cache', generate: Callable | None = None,
              start_method: str | None = None) -> 'FrameCache':
        """Frames of ``seeds`` made by ``generate((seed, config)) -> RawSample`` (default: the procedural
        generator), across ``processes`` worker processes (``start_method``: default fork where available; a
        renderer with a GL context needs 'spawn')."""
        generate = generate if generate is not None else generate_raw
        seeds = list(seeds)
        jobs = [(s, config) for s in seeds]
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(seeds), desc=desc, unit='frame', dynamic_ncols=True)
        out: dict[int, RawSample] = {}
        if processes > 1 and len(seeds) > 1:
            if start_method is None:
                start_method = 'fork' if 'fork' in mp.get_all_start_methods() else None
            with mp.get_context(start_method).Pool(processes) as pool:
                for raw in pool.imap(generate, jobs, chunksize=4 if start_method == 'spawn' else 16):
                    out[raw.seed] = raw
                    if bar is not None:
                        bar.update(1)
        else:
            for job in jobs:
                raw = generate(job)
                out[raw.seed] = raw
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        return cls(out)

    def save(self, path: str | Path, fingerprint: str = '') -> None:
        """Write the cache as one uncompressed ``.npz`` (stacked images, ragged boxes by offsets)."""
        raws = [self.samples[s] for s in sorted(self.samples)]
        masks = [r.instance_mask for r in raws]
        counts = np.array([len(r.labels) for r in raws], np.int64)                  # [N]
        arrays = {
            'seeds': np.array([r.seed for r in raws], np.int64),                     # [N]
            'rgb': np.stack([r.rgb for r in raws]),                                 # [N,H,W,3]
            'depth_mm': np.stack([r.depth_mm for r in raws]),                       # [N,H,W]
            'K': np.stack([r.K for r in raws]),                                     # [N,3,3]
            'offsets': np.concatenate([[0], np.cumsum(counts)]),                    # [N+1]
            'labels': np.concatenate([r.labels for r in raws]),                     # [T]
            'boxes': np.concatenate([r.boxes for r in raws]).reshape(-1, 12),       # [T,12]
            'boxes_canonical': np.concatenate([r.boxes_canonical for r in raws]).reshape(-1, 12),
            'fingerprint': np.array(fingerprint),
        }
        if raws and all(m is not None for m in masks):
            arrays['instance_mask'] = np.stack(masks)                              # [N,H,W] int8
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f'{path.name}.{os.getpid()}.tmp.npz')   # concurrent writers never share a temp file
        np.savez(tmp, **arrays)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path, fingerprint: str = '') -> 'FrameCache | None':
        """Read a cache written by :meth:`save`; ``None`` when it was made for another fingerprint."""
        with np.load(path) as z:
            if str(z['fingerprint']) != fingerprint:
                return None
            off = z['offsets']
            rgb, depth, K, labels, boxes, canon = (z[k] for k in ('rgb', 'depth_mm', 'K', 'labels', 'boxes',
                                                                  'boxes_canonical'))
            masks = z['instance_mask'] if 'instance_mask' in z.files else None
            samples = {int(seed): RawSample(rgb[i], depth[i], K[i], labels[off[i]:off[i + 1]],
                                            boxes[off[i]:off[i + 1]], canon[off[i]:off[i + 1]], int(seed),
                                            None if masks is None else masks[i])
                       for i, seed in enumerate(z['seeds'])}
        return cls(samples)

    def __contains__(self, seed: int) -> bool:
        return seed in self.samples

    def __len__(self) -> int:
        return len(self.samples)

    def nbytes(self) -> int:
        return sum(r.rgb.nbytes + r.depth_mm.nbytes + 2 * r.boxes.nbytes + r.labels.nbytes + 36
                   + (0 if r.instance_mask is None else r.instance_mask.nbytes)
                   for r in self.samples.values())


# ----------------------------------------------------------------------------------------------------------------
# Dataset and sampler
# ----------------------------------------------------------------------------------------------------------------

def scenes_source_hash() -> str:
    """sha256 of the scene generator's source: a disk cache from another generator version is never reused."""
    import hashlib

    import string_perception.scenes as scenes
    h = hashlib.sha256()
    for f in sorted(Path(scenes.__file__).parent.glob('*.py')):
        h.update(f.name.encode() + b'\0' + f.read_bytes())
    return h.hexdigest()


def procedural_fingerprint(scene_config: SceneConfig, seeds: Sequence[int]) -> str:
    """FrameCache.save / load fingerprint of the procedural frames of ``seeds`` (config, seed range, generator)."""
    seeds = list(seeds)
    return json.dumps({'scene_config': dataclasses.asdict(scene_config), 'seeds': [
        seeds[0], seeds[-1], len(seeds)] if seeds else [], 'generator': scenes_source_hash(), 'format': 2},
        sort_keys=True, default=str)


class SceneDataset(Dataset):
    """``num_frames`` generated frames of ``split``: item ``i`` is the frame of seed ``split base + offset + i``.

    Frames come from ``cache`` when it holds the seed, otherwise they are generated on the spot (in the DataLoader
    worker that asks), so the same index always gives the same sample. ``canonical_targets`` gives training
    targets with canonical rotations (:func:`canonical_box`); leave it off wherever boxes are scored.
    """

    def __init__(self, split: str, num_frames: int, scene_config: SceneConfig | None = None, offset: int = 0,
                 cache: FrameCache | None = None, canonical_targets: bool = False):
        self.split = split
        self.canonical_targets = canonical_targets
        self.seeds = split_seeds(split, num_frames, offset)
        self.scene_config = scene_config if scene_config is not None else SceneConfig()
        self.cache = cache

    def __len__(self) -> int:
        return len(self.seeds)

    def raw(self, index: int) -> RawSample:
        seed = self.seeds[index]
        if self.cache is not None and seed in self.cache:
            return self.cache.samples[seed]
        return generate_raw((seed, self.scene_config))

    def __getitem__(self, index: int) -> dict:
        return raw_to_sample(self.raw(index), self.canonical_targets)

    def build_cache(self, indices: Sequence[int] | None = None, processes: int = 1, progress: bool = False,
                    path: str | Path | None = None):
        """Generate and keep the frames at ``indices`` (default: all). With ``path``, reuse that file when it
        holds exactly these frames of this scene config, else write it. Returns the cache."""
        indices = range(len(self)) if indices is None else indices
        seeds = [self.seeds[i] for i in indices]
        fingerprint = procedural_fingerprint(self.scene_config, seeds)
        if path is not None and Path(path).exists():
            cache = FrameCache.load(path, fingerprint)
            if cache is not None and all(s in cache for s in seeds):
                self.cache = cache
                return cache
        self.cache = FrameCache.build(seeds, self.scene_config, processes, progress, desc=f'{self.split} frames')
        if path is not None:
            self.cache.save(path, fingerprint)
        return self.cache


class ShardSampler(Sampler):
    """DistributedSampler-like indices for one rank.

    The rank owns the static shard ``range(rank, num_items, world_size)`` (so a rank only ever needs to generate or
    cache its own frames); each epoch visits the shard in a fresh permutation drawn from ``seed + epoch``.
    ``infinite=True`` keeps going epoch after epoch; ``start`` skips that many indices (resume: steps * batch size).
    """

    def __init__(self, num_items: int, rank: int = 0, world_size: int = 1, seed: int = 0, shuffle: bool = True,
                 infinite: bool = True, start: int = 0):
        if not 0 <= rank < world_size:
            raise ValueError(f'rank {rank} outside world of {world_size}')
        self.shard = list(range(rank, num_items, world_size))
        if not self.shard:
            raise ValueError(f'{num_items} items leave rank {rank} of {world_size} with none')
        self.seed, self.shuffle, self.infinite, self.start = seed, shuffle, infinite, start

    def __len__(self) -> int:
        if self.infinite:
            raise TypeError('an infinite ShardSampler has no length')
        return max(0, len(self.shard) - self.start)

    def epoch_order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return self.shard
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        perm = torch.randperm(len(self.shard), generator=g).tolist()
        return [self.shard[p] for p in perm]

    def __iter__(self) -> Iterator[int]:
        n = len(self.shard)
        epoch, pos = divmod(self.start, n)
        while True:
            order = self.epoch_order(epoch)
            yield from order[pos:]
            pos, epoch = 0, epoch + 1
            if not self.infinite:
                return


def make_loader(dataset: SceneDataset, batch_size: int, *, rank: int = 0, world_size: int = 1, seed: int = 0,
                shuffle: bool = True, infinite: bool = True, start: int = 0, num_workers: int = 0) -> DataLoader:
    """A DataLoader over this rank's shard (see :class:`ShardSampler`); batches via :func:`collate`.

    Workers generate uncached frames; with a full cache ``num_workers=0`` is cheapest (indexing only).
    """
    sampler = ShardSampler(len(dataset), rank, world_size, seed, shuffle, infinite, start)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collate, num_workers=num_workers,
                      drop_last=infinite, persistent_workers=num_workers > 0,
                      prefetch_factor=4 if num_workers > 0 else None)


def measure_generation(config: SceneConfig | None = None, num: int = 50, first_seed: int = 0) -> float:
    """Frames per second of ``generate_frame`` + conversion on one core (for choosing workers / cache)."""
    config = config if config is not None else SceneConfig()
    t0 = time.perf_counter()
    for s in range(first_seed, first_seed + num):
        frame_to_sample(generate_frame(s, config))
    return num / max(time.perf_counter() - t0, 1e-9)


def shard_indices(num_items: int, rank: int, world_size: int) -> range:
    """The indices :class:`ShardSampler` gives ``rank`` (cache only these)."""
    return range(rank, num_items, world_size)


__all__ = ['SPLIT_SEED_BASE', 'SPLIT_SIZE', 'split_seeds', 'canonical_box', 'RawSample', 'frame_to_raw',
           'compact_instance_mask', 'procedural_fingerprint',
           'raw_to_sample', 'frame_to_sample', 'collate', 'FrameCache', 'SceneDataset', 'ShardSampler', 'make_loader',
           'measure_generation', 'shard_indices', 'scenes_source_hash', 'generate_raw']

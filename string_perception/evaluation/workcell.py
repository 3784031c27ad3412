"""Detection in the simulated workcells, per cell and camera rig, through the deployed path (``string-perception-eval-workcell``).

    string-perception-eval-workcell models/vitd_workcell.onnx models/vitd_tiny_cayley.onnx \\
        --frames-per-rig 20 --heldout-frames 40 --out runs/workcell_eval

Frames: the ALOHA and KUKA cells (``sim``) at a camera's resolution (default 640x480, a D435 / ALOHA camera), every
rig of each cell, held-out test seeds (``2e9 + 1e6 * cell + 1e4 * rig + i``: the test range, never trained on),
the cells as modelled (no appearance randomisation), 25 % mesh objects drawn from the TRAINING meshes; plus, per
cell, frames whose mesh objects (50 %) come only from the HELD-OUT meshes (``sim/mesh_library.py``: random_urdfs
800-999 and the mug, which no training frame contains). Each frame goes through ``runtime.Pipeline`` exactly as the
node runs it (ONNX Runtime on the CPU, the model's whole camera frame with ``resize_mode='pad'`` unless told
otherwise), all boxes scoring >= 0.05, class-wise NMS 0.3. ``MODEL:crop`` scores a model with ``resize_mode='crop'``,
``MODEL:tilesSPEC`` with tiled inference (``runtime/tiling.py`` spec, e.g. ``MODEL:tiles2x2`` or
``MODEL:tiles2x2,margin=0.05``): the whole frame plus overlapping windows, one merged box list.

Scores (symmetry-aware IoU, ``symmetry.py``), per rig and per cell:
- ``class_aware``: average best 3D IoU over the primitive objects (a box counts only with the right class);
- ``agnostic``: average best 3D IoU over every labelled object, any class;
- ``hit_25``: the fraction of objects whose best class-agnostic IoU is >= 0.25;
- ``ap3d_25``: AP3D@0.25 (class-aware, every class of the model);
- ``heldout_agnostic``: average best class-agnostic IoU over the held-out mesh objects (``heldout_num_gt`` of them);
- ``seen_mesh_agnostic``: the same over the rig frames' mesh objects, drawn from the training meshes
  (``seen_mesh_num_gt``): what "never seen" is compared with; with ``--seen-mesh-frames N`` also
  ``control_seen_agnostic``: the held-out frames' first N scenes again (same seeds, cameras, primitives and
  placements' draws), meshes from the training meshes: the paired control;
- for each mesh column (``heldout``, ``control_seen``), ``<column>_breakdown``: the class-agnostic error breakdown of
  its meshes (sizes per side included), and ``<column>_breakdown_by_visibility``: the same per visibility bin;
- the error breakdown of ``training/breakdown.py`` (centre xy / depth, scale, orientation, class accuracy,
  duplicates, precision / recall at ``--operating-threshold``), ``confusion`` (true class -> class of the closest
  box, counts) and misses (best agnostic IoU < 0.25) by the
  object's projected size in pixels and by its visibility.

Frames are rendered once (spawned workers; a GL context does not survive fork) and kept in ``--cache`` so that
several models are scored on the very same frames. ``--sim KEY=VALUE`` (repeatable, JSON values) sets further
``SimConfig`` fields of every test frame, e.g. ``--sim 'distractors=[2,6]'`` renders the same seeds with 2-6
unlabelled clutter items (sim/distractors.py) to measure what clutter costs; without it the frames (and the cache
key of ``--cache``) are the cells as modelled.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from string_perception import metrics
from string_perception.cli import parse_kv
from string_perception.runtime.tiling import parse_tiling

__all__ = ['WorkcellEvalConfig', 'TestFrame', 'frame_sim_config', 'render_test_frames', 'score_model', 'group_scores',
           'format_table', 'parse_model_spec',
           'rig_seed', 'label_min_visible_pixels', 'LABEL_MIN_VISIBLE_PX_640x480', 'main']

HELDOUT = 'heldout'
SEEN_MESHES = 'seen_meshes'   # the held-out frames' scenes with training meshes (WorkcellEvalConfig.seen_mesh_frames)
SIZE_BINS_PX = (0, 16, 32, 64, 128, 1e9)        # sqrt of the projected box's image area, pixels
VISIBILITY_BINS = (0.0, 0.25, 0.5, 0.75, 1.01)
LABEL_MIN_VISIBLE_PX_640x480 = 1024     # label rule A of docs/results/workcell.md: what a 160x120 input sees (>= 64)
# SimConfig fields the evaluator sets itself per frame (a --sim override of them is refused)
OWN_SIM_FIELDS = ('cell', 'height', 'width', 'cameras', 'object_split', 'mesh_object_fraction', 'min_visible_pixels')
# WorkcellEvalConfig fields that change how frames are scored, never a frame (left out of the frames' cache key)
SCORING_FIELDS = ('score_threshold', 'nms_iou', 'nms_class_agnostic', 'operating_threshold', 'resize_mode',
                  'min_gt_side_px', 'flip_tta')
MAX_DETECTIONS = 100            # boxes kept per frame after NMS
PRE_NMS_TOP_K = 200             # candidates into NMS (the runtime's default)


def label_min_visible_pixels(height: int, width: int) -> int:
    """Label rule A at a ``height`` x ``width`` camera: ``LABEL_MIN_VISIBLE_PX_640x480`` visible pixels at 640x480,
    scaled with the image area (at least 1), as ``--min-visible-pixels`` / ``SimConfig.min_visible_pixels``."""
    return max(1, int(round(LABEL_MIN_VISIBLE_PX_640x480 * height * width / (640 * 480))))


def rig_seed(first_seed: int, cell: str, rig: str, i: int = 0) -> int:
    """Held-out test seed ``i`` of ``cell``'s camera ``rig``: ``first_seed + 1e6 * cell index + 1e4 * rig index +
    i`` (cell index in ``sim.CELL_NAMES``, rig index in the cell's ``rigs``; ``i < 10 000``)."""
    from string_perception.sim import CELL_NAMES
    from string_perception.sim.cells import build_cell
    rigs = [r.name for r in build_cell(cell).rigs]
    if rig not in rigs:
        raise ValueError(f'the {cell} cell has no rig {rig!r}; its rigs: {rigs}')
    return first_seed + 1_000_000 * CELL_NAMES.index(cell) + 10_000 * rigs.index(rig) + i


@dataclass(frozen=True)
class WorkcellEvalConfig:
    height: int = 480
    width: int = 640
    frames_per_rig: int = 20
    heldout_frames: int = 40                # per cell, every rig drawn at random
    mesh_object_fraction: float = 0.25
    heldout_mesh_fraction: float = 0.5
    seen_mesh_frames: int = 0               # per cell: the held-out frames' first seeds again, meshes drawn from the
                                            # TRAINING meshes: a paired control for the held-out column
    first_seed: int = 2_000_000_000
    min_visible_pixels: int = 64            # an object is labelled with at least this many visible camera pixels
                                            # (the cells' own rule; 1024 at 640x480 = 64 at a 160x120 model input)
    score_threshold: float = 0.05
    nms_iou: float = 0.3
    nms_class_agnostic: bool = False        # NMS across classes (runtime Pipeline / node parameter of that name)
    operating_threshold: float = 0.3
    resize_mode: str = 'pad'
    min_gt_side_px: float = 0.0             # score only objects whose projected box is at least this many camera
                                            # pixels across (sqrt of its 2D box area); 0 = every labelled object
    sim_overrides: dict = field(default_factory=dict)   # further SimConfig fields of every frame (--sim), e.g.
                                                        # {'distractors': [2, 6]}; none of OWN_SIM_FIELDS
    flip_tta: bool = False                  # flip test-time augmentation (runtime Pipeline / node parameter flip_tta)

    def __post_init__(self):
        own = sorted(set(self.sim_overrides) & set(OWN_SIM_FIELDS))
        if own:
            raise ValueError(f'--sim may not set {own}: the evaluator sets {OWN_SIM_FIELDS} itself')
        from string_perception.runtime.postprocess import check_decode_params
        check_decode_params(self.score_threshold, self.nms_iou, MAX_DETECTIONS, PRE_NMS_TOP_K)   # before any render

    def frames_key(self) -> str:
        """Cache key of the rendered frames: every field that changes a frame (not the ``SCORING_FIELDS``;
        ``sim_overrides`` only when given) and the simulator's source hash, so frames of another simulator version
        (other labels, e.g. the mesh boxes of sim/mesh_box.py) are rendered again, never reused."""
        from string_perception.training.sim_frames import sim_source_hash   # imports the simulator (mujoco)
        d = {k: v for k, v in asdict(self).items() if k not in SCORING_FIELDS}
        if not d['sim_overrides']:
            del d['sim_overrides']
        if not d['seen_mesh_frames']:
            del d['seen_mesh_frames']
        d['simulator'] = sim_source_hash()
        return json.dumps(d, sort_keys=True)


@dataclass
class TestFrame:
    cell: str
    rig: str                   # a rig name, or HELDOUT / SEEN_MESHES
    seed: int
    rgb: np.ndarray            # uint8 [H,W,3]
    depth_mm: np.ndarray       # uint16 [H,W]
    K: np.ndarray              # float64 [3,3]
    params: np.ndarray         # float64 [M,12] ground-truth boxes
    labels: np.ndarray         # int64 [M] (sim.SIM_CLASS_NAMES)
    visibility: np.ndarray     # float64 [M]


def frame_jobs(cfg: WorkcellEvalConfig) -> list[tuple[str, str, int]]:
    """``(cell, rig, seed)`` of every test frame of ``cfg``: each rig's frames, then the held-out and paired frames."""
    from string_perception.sim import CELL_NAMES
    from string_perception.sim.cells import build_cell
    jobs = []
    for ci, cell in enumerate(CELL_NAMES):
        for rig in (r.name for r in build_cell(cell).rigs):
            jobs += [(cell, rig, rig_seed(cfg.first_seed, cell, rig, i)) for i in range(cfg.frames_per_rig)]
        base = cfg.first_seed + 1_000_000 * ci + 900_000
        jobs += [(cell, HELDOUT, base + i) for i in range(cfg.heldout_frames)]
        jobs += [(cell, SEEN_MESHES, base + i) for i in range(cfg.seen_mesh_frames)]
    return jobs


def frame_sim_config(cfg: WorkcellEvalConfig, cell: str, rig: str):
    """The ``SimConfig`` of ``cell``'s test frames of camera ``rig`` (or ``HELDOUT``: every rig, held-out meshes;
    ``SEEN_MESHES``: the same frames with training meshes)."""
    from string_perception.sim import SimConfig
    if rig in (HELDOUT, SEEN_MESHES):
        return SimConfig(cell=cell, height=cfg.height, width=cfg.width,
                         object_split='heldout' if rig == HELDOUT else 'train',
                         mesh_object_fraction=cfg.heldout_mesh_fraction, min_visible_pixels=cfg.min_visible_pixels,
                         **cfg.sim_overrides)
    return SimConfig(cell=cell, height=cfg.height, width=cfg.width, cameras=(rig,), object_split='train',
                     mesh_object_fraction=cfg.mesh_object_fraction, min_visible_pixels=cfg.min_visible_pixels,
                     **cfg.sim_overrides)


def as_test_frame(cell: str, rig: str, seed: int, f) -> TestFrame:
    """The ``TestFrame`` of a simulated frame ``f`` (``sim.SimFrame``) of ``cell``'s camera ``rig``."""
    from string_perception import box_ops
    params = box_ops.encode_box_params(np.asarray(f.translations, float).reshape(-1, 3),
                                       np.asarray(f.rotations, float).reshape(-1, 3, 3),
                                       np.asarray(f.sizes, float).reshape(-1, 3)).reshape(-1, 12)   # [M,12]
    return TestFrame(cell, rig, int(seed), f.rgb, f.depth_mm, np.asarray(f.K, float), params,
                     np.asarray(f.labels, np.int64), np.asarray(f.visibility, float))


def _render(job) -> TestFrame:
    cell, rig, seed, cfg = job
    os.environ.setdefault('MUJOCO_GL', 'osmesa')
    from string_perception.sim import generate_sim_frame
    return as_test_frame(cell, rig, seed, generate_sim_frame(int(seed), frame_sim_config(cfg, cell, rig)))


def render_test_frames(cfg: WorkcellEvalConfig, processes: int = 2, cache: str | Path | None = None,
                       progress: bool = True) -> list[TestFrame]:
    """Every test frame of ``cfg`` (from ``cache`` when it holds this config's frames, else rendered and saved)."""
    key = cfg.frames_key()
    if cache is not None and Path(cache).is_file():
        with np.load(cache, allow_pickle=False) as z:
            if str(z['key']) == key:
                n = int(z['n'])
                return [TestFrame(str(z[f'{i}_cell']), str(z[f'{i}_rig']), int(z[f'{i}_seed']), z[f'{i}_rgb'],
                                  z[f'{i}_depth'], z[f'{i}_K'], z[f'{i}_params'], z[f'{i}_labels'],
                                  z[f'{i}_vis']) for i in range(n)]
    jobs = [(*j, cfg) for j in frame_jobs(cfg)]
    from tqdm import tqdm
    with mp.get_context('spawn').Pool(max(1, processes)) as pool:
        frames = list(tqdm(pool.imap(_render, jobs, chunksize=4), total=len(jobs), desc='workcell test frames',
                           disable=not progress))
    if cache is not None:
        arrays: dict[str, Any] = {'key': np.array(key), 'n': np.array(len(frames))}
        for i, f in enumerate(frames):
            arrays.update({f'{i}_cell': np.array(f.cell), f'{i}_rig': np.array(f.rig), f'{i}_seed': np.array(f.seed),
                           f'{i}_rgb': f.rgb, f'{i}_depth': f.depth_mm, f'{i}_K': f.K, f'{i}_params': f.params,
                           f'{i}_labels': f.labels, f'{i}_vis': f.visibility})
        Path(cache).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(cache, **arrays)
    return frames


def _projected_side_px(params: np.ndarray, K: np.ndarray) -> np.ndarray:
    """sqrt of the image area of each box's projected corner hull (its 2D bounding box), pixels [M]; 0 for a box
    with a corner within 1 mm of the camera plane or behind it."""
    from string_perception import box_ops
    uv = box_ops.project_points(box_ops.box_corners(*box_ops.decode_box_params(params)), K, min_depth=1e-3)  # [M,8,2]
    side = np.sqrt(np.ptp(uv[..., 0], axis=-1) * np.ptp(uv[..., 1], axis=-1))                           # [M]
    return np.nan_to_num(side, nan=0.0).reshape(len(params))


def group_scores(preds: list[dict], gts: list[dict], frames: Sequence[TestFrame] | None, class_names: Sequence[str],
                 operating_threshold: float, primitive_count: int, with_breakdown: bool) -> dict[str, Any]:
    """Scores of one group of frames (a rig, a cell): ``preds`` / ``gts`` the per-frame dicts of ``metrics``
    (labels index ``class_names``; labels ``< primitive_count`` are the primitives), symmetry-aware IoU ->
    ``num_frames``, ``num_gt``, ``num_primitive_gt``, ``class_aware``, ``agnostic``, ``hit_25``, ``ap3d_25`` (None
    where nothing is labelled); with ``with_breakdown`` (needs ``frames`` and ``gts[i]['visibility']``) also
    ``breakdown``, ``confusion``, ``misses_by_size_px`` and ``misses_by_visibility`` (module docstring)."""
    from string_perception.training.breakdown import breakdown as error_breakdown
    ious = metrics.frame_ious(preds, gts)
    ious_sym = metrics.frame_ious_sym(preds, gts, list(class_names), ious)
    prim = [np.asarray(g['labels']) < primitive_count for g in gts]
    best_aware = metrics.best_iou_per_gt(preds, gts, True, ious_sym)                 # [sum M]
    best_agn = metrics.best_iou_per_gt(preds, gts, False, ious_sym)
    prim_all = np.concatenate(prim) if prim else np.zeros(0, bool)
    ap = metrics.ap3d(preds, gts, 0.25, len(class_names), ious_sym)
    out: dict[str, Any] = {
        'num_frames': len(gts), 'num_gt': int(len(best_agn)), 'num_primitive_gt': int(prim_all.sum()),
        'class_aware': float(best_aware[prim_all].mean()) if prim_all.any() else None,
        'agnostic': float(best_agn.mean()) if len(best_agn) else None,
        'hit_25': float((best_agn >= 0.25).mean()) if len(best_agn) else None,
        'ap3d_25': ap['mean'],
    }
    if not with_breakdown or not len(best_agn):
        return out
    full = error_breakdown(preds, gts, list(class_names), score_threshold=operating_threshold, ious_sym=ious_sym)
    out['breakdown'], out['confusion'] = full['overall'], full['confusion']
    side = np.concatenate([_projected_side_px(g['params'], f.K) for g, f in zip(gts, frames)])
    vis = np.concatenate([g['visibility'] for g in gts])
    missed = best_agn < 0.25
    out['misses_by_size_px'] = {f'{lo:g}-{hi:g}': [int(missed[m].sum()), int(m.sum())]
                                for lo, hi in zip(SIZE_BINS_PX[:-1], SIZE_BINS_PX[1:])
                                for m in [(side >= lo) & (side < hi)]}
    out['misses_by_visibility'] = {f'{lo:g}-{min(hi, 1):g}': [int(missed[m].sum()), int(m.sum())]
                                   for lo, hi in zip(VISIBILITY_BINS[:-1], VISIBILITY_BINS[1:])
                                   for m in [(vis >= lo) & (vis < hi)]}
    return out


def build_pipeline(model_path: str | Path, cfg: WorkcellEvalConfig, threads: int = 2, resize_mode: str | None = None,
                   tiling: str | None = None):
    """The ``runtime.Pipeline`` (ONNX Runtime on the CPU) that scores ``model_path`` under ``cfg``'s decoding:
    score threshold, NMS, the per-frame box limits, resize mode (``resize_mode`` overrides it), ``tiling`` and flip
    test-time augmentation."""
    from string_perception.runtime import Pipeline
    return Pipeline(model_path, ('CPUExecutionProvider',), score_threshold=cfg.score_threshold, nms_iou=cfg.nms_iou,
                    nms_class_agnostic=cfg.nms_class_agnostic, max_detections=MAX_DETECTIONS,
                    pre_nms_top_k=PRE_NMS_TOP_K, intra_op_threads=threads,
                    resize_mode=resize_mode or cfg.resize_mode, tiling=parse_tiling(tiling), flip_tta=cfg.flip_tta)


def score_model(model_path: str | Path, frames: Sequence[TestFrame], cfg: WorkcellEvalConfig,
                threads: int = 2, resize_mode: str | None = None, tiling: str | None = None) -> dict[str, Any]:
    """Run ``model_path`` through ``runtime.Pipeline`` on ``frames``; the scores per rig, per cell and for the
    held-out objects (module docstring). ``tiling``: a ``runtime/tiling.py`` spec (``'2x2'``), None = no tiling."""
    from string_perception.training.inference import detections_to_arrays
    from string_perception.scenes import CLASS_NAMES
    from string_perception.sim.classes import OBJECT
    pipe = build_pipeline(model_path, cfg, threads, resize_mode, tiling)
    names = list(pipe.labels)
    preds, gts, latency = [], [], []
    for f in frames:
        r = pipe(f.rgb, f.depth_mm, f.K)
        latency.append(r.timings['inference_ms'])
        preds.append(detections_to_arrays(r.detections))
        big = _projected_side_px(f.params, f.K) >= cfg.min_gt_side_px                  # [M]
        gts.append({'params': f.params[big], 'labels': f.labels[big], 'visibility': f.visibility[big]})
    out: dict[str, Any] = {'model': str(model_path), 'labels': names, 'input_hw': list(pipe.input_hw),
                           'resize_mode': resize_mode or cfg.resize_mode, 'min_gt_side_px': cfg.min_gt_side_px,
                           'sim_overrides': dict(cfg.sim_overrides), 'tiling': tiling or 'none',
                           'flip_tta': cfg.flip_tta,
                           'inference_ms_p50': float(np.median(latency)), 'cells': {}, 'rigs': {}}
    idx = np.arange(len(frames))
    for cell in sorted({f.cell for f in frames}):
        sel = [i for i in idx if frames[i].cell == cell and frames[i].rig not in (HELDOUT, SEEN_MESHES)]
        out['cells'][cell] = group_scores([preds[i] for i in sel], [gts[i] for i in sel],
                                           [frames[i] for i in sel], names, cfg.operating_threshold,
                                           len(CLASS_NAMES), True)
        for rig in sorted({frames[i].rig for i in sel}):
            rs = [i for i in sel if frames[i].rig == rig]
            out['rigs'][f'{cell}/{rig}'] = group_scores([preds[i] for i in rs], [gts[i] for i in rs],
                                                         [frames[i] for i in rs], names, cfg.operating_threshold,
                                                         len(CLASS_NAMES), False)
        held = [i for i in idx if frames[i].cell == cell and frames[i].rig == HELDOUT]
        control = [i for i in idx if frames[i].cell == cell and frames[i].rig == SEEN_MESHES]
        # key: (frames, with breakdown): the held-out meshes; the rig frames' training meshes; the paired control
        for key, (group, with_breakdown) in {'heldout': (held, True), 'seen_mesh': (sel, False),
                                             'control_seen': (control, True)}.items():
            if group:
                out['cells'][cell].update(_mesh_column(key, [preds[i] for i in group], [gts[i] for i in group],
                                                       names, OBJECT, with_breakdown))
    return out


def _mesh_objects(gts: list[dict], mesh_label: int, visibility: tuple[float, float] | None = None) -> list[dict]:
    """``gts`` with only their mesh objects (label ``mesh_label``), and with ``visibility = (lo, hi)`` only those whose
    visible fraction is in [lo, hi) (the frames must carry ``visibility``, which is kept)."""
    out = []
    for g in gts:
        keep = g['labels'] == mesh_label                                              # [M]
        if visibility is not None:
            keep &= (g['visibility'] >= visibility[0]) & (g['visibility'] < visibility[1])
        out.append({k: g[k][keep] for k in ('params', 'labels', 'visibility') if k in g})
    return out


def _mesh_column(key: str, preds: list[dict], gts: list[dict], names: list[str], mesh_label: int,
                 with_breakdown: bool) -> dict[str, Any]:
    """``{key}_agnostic`` / ``{key}_num_gt`` (and ``{key}_breakdown``) of the mesh objects of ``gts``, their
    symmetry-aware IoUs computed once for both."""
    mesh_gts = _mesh_objects(gts, mesh_label)
    ious = metrics.frame_ious_sym(preds, mesh_gts, names)
    best = _mesh_best_ious(preds, mesh_gts, names, mesh_label, ious)
    out = {f'{key}_agnostic': float(best.mean()) if len(best) else None, f'{key}_num_gt': int(len(best))}
    if with_breakdown:
        out[f'{key}_breakdown'] = _mesh_breakdown(preds, mesh_gts, names, mesh_label, ious)
        if all('visibility' in g for g in gts):        # the same, per visibility bin: is a short side an occluded one?
            out[f'{key}_breakdown_by_visibility'] = {
                f'{lo:g}-{min(hi, 1):g}': _mesh_breakdown(preds, _mesh_objects(gts, mesh_label, (lo, hi)), names,
                                                          mesh_label)
                for lo, hi in zip(VISIBILITY_BINS[:-1], VISIBILITY_BINS[1:])}
    return out


def _mesh_breakdown(preds: list[dict], gts: list[dict], names: list[str], mesh_label: int,
                    ious_sym: list[np.ndarray] | None = None) -> dict | None:
    """The error breakdown (training/breakdown.py, overall) of the mesh objects of ``gts``, class-agnostic: every
    prediction counts as a mesh prediction, so what is measured is the box geometry, whatever class it got.
    ``ious_sym``: ``metrics.frame_ious_sym`` of ``preds`` against the mesh objects, if computed (it depends on the
    ground truth's class only, so the relabelling does not change it)."""
    from string_perception.training.breakdown import breakdown as error_breakdown
    mesh_gts = _mesh_objects(gts, mesh_label)
    if not sum(len(g['labels']) for g in mesh_gts):
        return None
    as_mesh = [dict(p, labels=np.full(len(p['labels']), mesh_label)) for p in preds]
    return error_breakdown(as_mesh, mesh_gts, names, score_threshold=None, ious_sym=ious_sym)['overall']


def _mesh_best_ious(preds: list[dict], gts: list[dict], names: list[str], mesh_label: int,
                    ious_sym: list[np.ndarray] | None = None) -> np.ndarray:
    """Best class-agnostic symmetry-aware IoU of every mesh object (label ``mesh_label``) of ``gts``: [M]."""
    mesh_gts = _mesh_objects(gts, mesh_label)
    ious_sym = metrics.frame_ious_sym(preds, mesh_gts, names) if ious_sym is None else ious_sym
    return metrics.best_iou_per_gt(preds, mesh_gts, False, ious_sym)


def _cell(x: float | None, fmt: str = '{:.3f}') -> str:
    """A table cell: ``x`` in ``fmt``, '-' for None or NaN."""
    return '-' if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _passes(result: dict[str, Any]) -> str:
    """' + tiles 2x2', ' + flip', both or '': the passes a result's model ran beyond the whole frame."""
    tiles = '' if result.get('tiling', 'none') == 'none' else f" + tiles {result['tiling']}"
    return tiles + (' + flip' if result.get('flip_tta') else '')


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """Markdown: one row per model and cell, then one per model and rig."""
    def meshes(s, key):                      # a mesh column with its object count: a mean over few is noise
        n = s.get(f'{key}_num_gt')
        return _cell(s.get(f'{key}_agnostic')) + ('' if n is None else f' (n {n})')

    def scores(s):                           # class-aware | agnostic | hit@0.25 | AP3D@0.25
        return ' | '.join(_cell(s[k]) for k in ('class_aware', 'agnostic', 'hit_25', 'ap3d_25'))

    def seen(s):                             # the rig frames' training meshes; the paired control when rendered
        return meshes(s, 'seen_mesh') + (f"; paired {meshes(s, 'control_seen')}" if 'control_seen_num_gt' in s else '')
    lines = ['| model | resize | objects | cell | class-aware | agnostic | hit@0.25 | AP3D@0.25 | held-out objects (agn.) '
             '| seen meshes (agn.) |',
             '| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |']
    for r in results:
        size = f">= {r['min_gt_side_px']:g} px" if r.get('min_gt_side_px') else 'all'
        mode = r['resize_mode'] + _passes(r)
        for cell, s in r['cells'].items():
            lines.append(f"| {Path(r['model']).name} | {mode} | {size} | {cell} | {scores(s)} | "
                         f"{meshes(s, 'heldout')} | {seen(s)} |")
    lines += ['', '| model | rig | frames | objects | class-aware | agnostic | hit@0.25 | AP3D@0.25 |',
              '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |']
    for r in results:
        mode = _passes(r)
        for rig, s in r['rigs'].items():
            lines.append(f"| {Path(r['model']).name}{mode} | {rig} | {s['num_frames']} | {s['num_gt']} | "
                         f"{scores(s)} |")
    return '\n'.join(lines + format_oracle_rows(results)) + '\n'


ORACLE_GROUPS = {'breakdown': 'matched, class-aware', 'heldout_breakdown': 'held-out meshes',
                 'control_seen_breakdown': 'seen meshes, paired'}


def format_oracle_rows(results: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown rows (a blank line and a table) of what one true part of the box buys per model, cell and group
    of matched objects: mean IoU as matched and with the true centre / rotation / size (training/breakdown.py),
    beside the median orientation error and longest / shortest side ratios; [] when no result holds breakdowns."""
    rows = []
    for r in results:
        mode = '' if r.get('tiling', 'none') == 'none' else f" + tiles {r['tiling']}"
        for cell, s in r['cells'].items():
            for key, name in ORACLE_GROUPS.items():
                b = s.get(key)
                if not b or 'iou_true_centre' not in b:
                    continue
                rows.append(f"| {Path(r['model']).name}{mode} | {cell} | {name} | {b['num_matched']} | "
                            + ' | '.join(_cell(b[k]['mean']) for k in ('iou', 'iou_true_centre', 'iou_true_rotation',
                                                                   'iou_true_size'))
                            + f" | {_cell(b['orientation_deg']['median'], '{:.1f}')} | "
                            f"{_cell(b['size_ratio_longest']['median'], '{:.2f}')} / "
                            f"{_cell(b['size_ratio_shortest']['median'], '{:.2f}')} |")
    if not rows:
        return []
    return ['', '| model | cell | group | matched | IoU | true centre | true rotation | true size '
            '| orient. ° (median) | longest / shortest side ratio |',
            '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |', *rows]


def parse_model_spec(spec: str) -> tuple[str, str | None, str | None]:
    """``MODEL``, ``MODEL:crop`` / ``MODEL:pad`` or ``MODEL:tilesSPEC`` -> ``(path, resize_mode or None, tiling spec
    or None)``; the tiling spec is checked here (``ValueError``), before any frame is scored."""
    path, _, mode = spec.partition(':')
    if mode.startswith('tiles'):
        parse_tiling(mode[len('tiles'):])
        return path, None, mode[len('tiles'):]
    return path, mode or None, None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-eval-workcell', description=__doc__.split('\n\n')[0])
    p.add_argument('models', nargs='+', help='ONNX files; MODEL:crop scores that model with resize_mode crop, '
                   'MODEL:tiles2x2 (any runtime/tiling.py spec after "tiles") with tiled inference')
    d = WorkcellEvalConfig()
    p.add_argument('--frames-per-rig', type=int, default=d.frames_per_rig)
    p.add_argument('--heldout-frames', type=int, default=d.heldout_frames)
    p.add_argument('--seen-mesh-frames', type=int, default=d.seen_mesh_frames,
                   help='per cell: the held-out frames\' first seeds again with training meshes (paired control)')
    p.add_argument('--height', type=int, default=d.height)
    p.add_argument('--width', type=int, default=d.width)
    p.add_argument('--min-visible-pixels', type=int, default=d.min_visible_pixels,
                   help='label objects with at least this many visible camera pixels (the cells use 64)')
    p.add_argument('--operating-threshold', type=float, default=d.operating_threshold)
    p.add_argument('--min-gt-side-px', type=float, default=d.min_gt_side_px,
                   help='score only objects at least this many camera pixels across (0: all labelled objects)')
    p.add_argument('--sim', type=parse_kv, action='append', default=[], metavar='KEY=VALUE',
                   help="further SimConfig field of every test frame (JSON value), e.g. --sim 'distractors=[2,6]'; "
                        f"not one of {', '.join(OWN_SIM_FIELDS)}")
    p.add_argument('--nms-iou', type=float, default=d.nms_iou, help='NMS overlap (runtime nms_iou)')
    p.add_argument('--nms-class-agnostic', action='store_true',
                   help='NMS across classes (runtime nms_class_agnostic); default class-wise')
    p.add_argument('--flip-tta', action='store_true',
                   help='flip test-time augmentation (runtime flip_tta): every model also sees each frame mirrored')
    p.add_argument('--processes', type=int, default=2)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--cache', default='', help='keep the rendered frames in this .npz (reused when it matches)')
    p.add_argument('--out', required=True, help='folder for results.json and table.md')
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = WorkcellEvalConfig(height=args.height, width=args.width, frames_per_rig=args.frames_per_rig,
                             heldout_frames=args.heldout_frames, seen_mesh_frames=args.seen_mesh_frames,
                             operating_threshold=args.operating_threshold,
                             min_visible_pixels=args.min_visible_pixels, sim_overrides=dict(args.sim),
                             min_gt_side_px=args.min_gt_side_px, nms_iou=args.nms_iou,
                             nms_class_agnostic=args.nms_class_agnostic, flip_tta=args.flip_tta)
    t0 = time.perf_counter()
    frames = render_test_frames(cfg, args.processes, args.cache or None)    # keyed without the SCORING_FIELDS
    print(f'{len(frames)} test frames in {time.perf_counter() - t0:.0f} s', flush=True)
    results = []
    for spec in args.models:
        path, resize_mode, tiling = parse_model_spec(spec)
        results.append(score_model(path, frames, cfg, args.threads, resize_mode, tiling))
        print(format_table(results[-1:]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'results.json').write_text(json.dumps({'config': asdict(cfg), 'results': results}, indent=1) + '\n')
    (out / 'table.md').write_text(format_table(results))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

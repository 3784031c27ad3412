"""generate_sim_frame(seed, config): cell -> objects (+ unlabelled clutter) -> arms -> drop and settle -> camera ->
render -> labels.

A frame is a pure function of (seed, config) on one machine (MuJoCo's physics and OSMesa are deterministic); the
labels follow the procedural generator's contract (scenes/frame.py) with SIM_CLASS_NAMES as the class list.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import mujoco
import numpy as np

from string_perception.scenes import Frame
from string_perception.scenes.sensor_model import sensor_depth

from .appearance import randomize_appearance
from .camera import CameraDraw, sample_camera, set_model_camera
from .cells import Cell, build_cell
from .classes import SIM_CLASS_NAMES
from .config import SimConfig
from .distractors import DISTRACTOR_STREAM, add_distractors, sample_distractors
from .mesh_library import library_problems, mesh_indices
from .objects import MAX_OBJECTS, add_object, add_object_meshes, body_boxes, sample_objects
from .physics import Indexing, index_model, park_objects, place_objects, sample_arms, settle
from .render import SceneRenderer

_CAMERA = 'sim_camera'
_PHYSICS_ATTEMPTS = 8     # seed 2001900294 (KUKA, training meshes at 50 %) drew a thin or tiny mesh in each of its first
                          # three draws and only settled at the fourth; a seed that settled sooner is unchanged
_ALONE_MAX_SIDE = 256      # 'alone' silhouettes are counted at most at this resolution (scaled back to pixels)


class SimFrame(Frame):
    """A Frame whose labels index SIM_CLASS_NAMES (the primitives plus 'object')."""

    @property
    def class_names(self) -> list[str]:
        return [SIM_CLASS_NAMES[i] for i in self.labels]


@dataclass
class SimTruth:
    """A frame plus what produced it (tests, debugging)."""
    frame: SimFrame
    depth_exact_m: np.ndarray     # float64 [H,W] exact z-depth, inf where nothing is hit
    geom_ids: np.ndarray          # int32 [H,W] MuJoCo geom seen at each pixel, -1 for none
    model: mujoco.MjModel
    data: mujoco.MjData           # the settled state
    index: Indexing
    cell: Cell
    objects: list                 # ObjectSpec per dropped object
    camera: CameraDraw
    visible_px: np.ndarray        # int64 [O]
    total_px: np.ndarray          # float64 [O] pixels the object covers alone (off-image too)
    label_index: np.ndarray       # int64 [O] index in the frame's labels, -1 if left out
    box_t_w: np.ndarray           # [O,3] box centres in the world
    box_R_w: np.ndarray           # [O,3,3]
    box_size: np.ndarray          # [O,3]
    settle_time_s: float
    distractors: list = field(default_factory=list)   # distractors.Distractor: unlabelled clutter


def _compile(cell: Cell, objects, cfg: SimConfig, canvas_hw, distractors=()) -> mujoco.MjModel:
    spec = cell.spec
    spec.compiler.inertiagrouprange = [0, 5]
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    # MuJoCo 3.8's native CCD left a cone lying on its side 4 mm deep in a box (measured); libccd + multi-CCD
    # contacts rest it at 0.04 mm like the primitives
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_NATIVECCD
    add_object_meshes(spec, objects)
    for i, obj in enumerate(objects):
        add_object(spec, i, obj)
    add_distractors(spec, distractors)
    spec.worldbody.add_camera(name=_CAMERA)
    spec.visual.global_.offheight, spec.visual.global_.offwidth = int(canvas_hw[0]), int(canvas_hw[1])
    spec.visual.quality.offsamples = 0
    model = spec.compile()
    model.light_castshadow[:] = 0                  # software shadows cost 5-10x the frame
    model.vis.map.znear = 0.02 / model.stat.extent
    model.vis.map.zfar = 20.0 / model.stat.extent
    return model


def _corners(t: np.ndarray, R: np.ndarray, size: np.ndarray) -> np.ndarray:
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)  # [8,3]
    return t + (signs * (0.5 * size)) @ R.T                                                        # [8,3]


def _alone_pixels(renderer: SceneRenderer, model, data, cam: CameraDraw, cam_id: int, objs, idx: Indexing,
                  t_c, R_c, size, scale: float, margin: int) -> np.ndarray:
    """Pixels each object in `objs` covers with every other geom hidden, on the image plus `margin` pixels each
    side, counted at `scale` x resolution and returned in full-resolution pixels (float [len(objs)])."""
    hc, wc = cam.height + 2 * cam.pad, cam.width + 2 * cam.pad
    ha, wa = int(round((hc + 2 * margin) * scale)), int(round((wc + 2 * margin) * scale))
    fa = cam.f * scale
    fovy = model.cam_fovy[cam_id]
    model.cam_fovy[cam_id] = math.degrees(2.0 * math.atan(0.5 * ha / fa))
    boxes = []                                                         # projected bbox per object on the canvas
    for o in objs:
        c = _corners(t_c[o], R_c[o], size[o])                          # [8,3] camera frame
        if c[:, 2].min() < 0.05:
            boxes.append((-np.inf, -np.inf, np.inf, np.inf))
            continue
        u = fa * c[:, 0] / c[:, 2] + 0.5 * (wa - 1)
        v = fa * c[:, 1] / c[:, 2] + 0.5 * (ha - 1)
        boxes.append((u.min(), v.min(), u.max(), v.max()))
    passes: list[list[int]] = []                                       # greedy: disjoint boxes share a pass
    for k, b in enumerate(boxes):
        for p in passes:
            if all(b[2] < boxes[j][0] or boxes[j][2] < b[0] or b[3] < boxes[j][1] or boxes[j][3] < b[1]
                   for j in p):
                p.append(k)
                break
        else:
            passes.append([k])
    counts = np.zeros(len(objs))
    try:
        for p in passes:
            geoms = idx.obj_geom[[objs[k] for k in p]]
            ids = renderer.geom_ids_only(data, ha, wa, geoms)
            hist = np.bincount(ids[ids >= 0].ravel(), minlength=model.ngeom)
            counts[p] = hist[geoms]
    finally:
        model.cam_fovy[cam_id] = fovy
    return counts / (scale * scale)


def object_depth_dropout(depth_mm: np.ndarray, owner: np.ndarray, rng: np.random.Generator,
                         probability: float) -> np.ndarray:
    """Depth of dark / shiny objects, as stereo and ToF sensors lose it: each visible object is such an object
    with ``probability``; it then loses 30-100 % of its pixels in smooth blobs (a coarse random field, bilinearly
    upsampled, thresholded at that quantile). depth_mm uint16 [H,W] (0 = invalid), owner int [H,W] object or -1."""
    out = depth_mm.copy()
    h, w = owner.shape
    for o in np.unique(owner[owner >= 0]):
        if rng.random() >= probability:
            continue
        lost = 0.3 + 0.7 * rng.random()
        field = cv2.resize(rng.random((max(2, h // 8), max(2, w // 8))).astype(np.float32), (w, h),
                           interpolation=cv2.INTER_LINEAR)                                # [H,W]
        mask = owner == o
        out[mask & (field <= np.quantile(field[mask], lost))] = 0
    return out


@dataclass
class SceneState:
    """A compiled cell with its dropped objects (what a live simulation keeps stepping)."""
    cell: Cell
    objects: list                 # ObjectSpec per object
    model: mujoco.MjModel
    data: mujoco.MjData
    index: Indexing
    q_arm: np.ndarray             # [J] the arms' configuration
    settle_time_s: float
    pad: int                      # render padding for the principal point (camera.CameraDraw.pad)
    margin: int                   # 'alone' canvas margin, full-resolution pixels
    scale: float                  # 'alone' canvas resolution factor
    distractors: list = field(default_factory=list)   # distractors.Distractor: unlabelled clutter (static geoms)


def build_scene(seed: int, cfg: SimConfig) -> tuple[SceneState, np.random.Generator]:
    """The cell with 1-12 objects dropped and settled around random collision-free arms (on and among
    ``cfg.distractors`` clutter items, drawn from their own stream ``[seed, DISTRACTOR_STREAM, attempt]`` so that
    the scene's stream makes the same draws with or without them); returns the state and the random stream to
    continue with (camera, noise)."""
    pad = int(math.ceil(cfg.principal_point_jitter * max(cfg.height, cfg.width)))
    margin = max(cfg.height, cfg.width) // 2
    scale = min(1.0, _ALONE_MAX_SIDE / max(cfg.height, cfg.width))
    hc, wc = cfg.height + 2 * pad, cfg.width + 2 * pad
    canvas = (max(hc, int(round((hc + 2 * margin) * scale))), max(wc, int(round((wc + 2 * margin) * scale))))
    for attempt in range(_PHYSICS_ATTEMPTS):   # a rare unstable drop (MuJoCo resets the state) is drawn again
        rng = np.random.default_rng(seed if attempt == 0 else [seed, attempt])
        cell = build_cell(cfg.cell)
        n = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
        split = None if cfg.object_split == 'all' else mesh_indices(cfg.object_split)
        objects = sample_objects(rng, n, cfg.mesh_object_fraction, cfg.size_scale, split,
                                 frozenset(library_problems()))
        distractors = sample_distractors(np.random.default_rng([seed, DISTRACTOR_STREAM, attempt]),
                                         cfg.distractors, cell.clutter)
        model = _compile(cell, objects, cfg, canvas, distractors)
        data = mujoco.MjData(model)
        idx = index_model(model, cell.arm_roots, cell.arm_joints, n)
        if cfg.appearance_randomization > 0:
            randomize_appearance(model, idx.arm_geom, idx.obj_geom, rng, cfg.appearance_randomization,
                                 idx.distractor_geom)
        park_objects(model, data, idx)
        q_arm = sample_arms(rng, model, data, idx, cell.arm_home, cell.arm_spread)
        place_objects(rng, model, data, idx, cell.drop_center, cell.drop_half, cell.support_z)
        settle_time = settle(model, data, idx, q_arm, cfg.settle_max_time_s, cfg.settle_speed_m_s)
        if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number == 0:
            return SceneState(cell, objects, model, data, idx, q_arm, settle_time, pad, margin, scale,
                              distractors), rng
    raise RuntimeError(f'seed {seed}: the drop was unstable in {_PHYSICS_ATTEMPTS} attempts')


def pick_rig(state: SceneState, cfg: SimConfig, rng: np.random.Generator):
    rigs = [r for r in state.cell.rigs if not cfg.cameras or r.name in cfg.cameras]
    if not rigs:
        raise ValueError(f'no camera of {cfg.cameras} in cell {state.cell.name}: {[r.name for r in state.cell.rigs]}')
    return rigs[int(rng.integers(0, len(rigs)))]


def object_boxes_world(state: SceneState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre [O,3], axes [O,3,3], size [O,3]) of every object's box in the world, at the current state."""
    model, data, idx = state.model, state.data, state.index
    centre_b, axes_b, size = body_boxes(model, idx.obj_geom, state.objects)         # [O,3], [O,3,3], [O,3]
    bodies = model.geom_bodyid[idx.obj_geom]
    R_body = data.xmat[bodies].reshape(-1, 3, 3)                                    # [O,3,3] body in world
    t_w = data.xpos[bodies] + np.einsum('oij,oj->oi', R_body, centre_b)             # [O,3]
    return t_w, R_body @ axes_b, size


def label_view(state: SceneState, cam: CameraDraw, cfg: SimConfig, rng: np.random.Generator):
    """Render the current state through `cam` and label it: (SimFrame, exact z-depth [H,W], geom ids [H,W],
    visible px [O], alone px [O], label index [O], box centres [O,3], axes [O,3,3], sizes [O,3]) in the world."""
    model, data, idx, n = state.model, state.data, state.index, len(state.objects)
    cam_id = model.camera(_CAMERA).id
    set_model_camera(model, cam_id, cam)
    mujoco.mj_camlight(model, data)
    t_w, R_w, size = object_boxes_world(state)
    t_c = (t_w - cam.p_wc) @ cam.R_wc                                               # [O,3]
    R_c = np.einsum('ji,ojk->oik', cam.R_wc, R_w)                                   # [O,3,3] R_wc^T R_w

    hc, wc = cfg.height + 2 * cam.pad, cfg.width + 2 * cam.pad
    renderer = SceneRenderer(model, cam_id, cache_key=cfg.cell,
                             slot_meshes=[model.mesh(f'obj{i}/mesh').id for i in range(MAX_OBJECTS)])
    try:
        rgb_c, z_c = renderer.color_depth(data, hc, wc)
        seg_c = renderer.geom_ids(data, hc, wc)
        r0, c0 = cam.crop
        crop = (slice(r0, r0 + cfg.height), slice(c0, c0 + cfg.width))
        rgb, z, seg = rgb_c[crop], z_c[crop], seg_c[crop]                           # [H,W,3], [H,W], [H,W]
        owner = np.where(seg >= 0, idx.geom_obj[np.maximum(seg, 0)], -1)            # [H,W] object index or -1
        visible = np.bincount(owner[owner >= 0].ravel(), minlength=n).astype(np.int64)  # [O]
        seen = np.flatnonzero(visible > 0)
        total = np.zeros(n)
        if len(seen):
            total[seen] = _alone_pixels(renderer, model, data, cam, cam_id, seen, idx, t_c, R_c, size,
                                        state.scale, state.margin)
    finally:
        renderer.close()

    total = np.maximum(total, visible)                # the scaled count can undershoot by a boundary pixel
    vis = np.where(total > 0, visible / np.maximum(total, 1e-9), 0.0)               # [O]
    keep = (visible >= cfg.min_visible_pixels) & (vis >= cfg.min_visibility) & (visible > 0)
    label_index = np.where(keep, np.cumsum(keep) - 1, -1).astype(np.int64)
    lut = np.concatenate([[-1], label_index]).astype(np.int16)                      # owner + 1 -> instance id
    instance_mask = lut[owner + 1]

    if cfg.rgb_noise_std > 0:
        rgb = np.clip(rgb + rng.normal(0.0, cfg.rgb_noise_std, rgb.shape), 0, 255).round().astype(np.uint8)
    depth_mm = sensor_depth(z, rng, cfg.sensor)
    if cfg.object_depth_dropout > 0:
        depth_mm = object_depth_dropout(depth_mm, owner, rng, cfg.object_depth_dropout)
    m = int(keep.sum())
    frame = SimFrame(rgb=np.ascontiguousarray(rgb), depth_mm=depth_mm, K=cam.K,
                     labels=np.array([o.label for o, k in zip(state.objects, keep) if k], np.int64).reshape(m),
                     translations=t_c[keep].reshape(m, 3), rotations=R_c[keep].reshape(m, 3, 3),
                     sizes=size[keep].reshape(m, 3), visibility=vis[keep].astype(np.float64),
                     instance_mask=instance_mask, seed=-1)
    return frame, z, seg, visible, total, label_index, t_w, R_w, size


def render_sim_scene(seed: int, config: SimConfig | None = None) -> SimTruth:
    cfg = config if config is not None else SimConfig()
    state, rng = build_scene(seed, cfg)
    rig = pick_rig(state, cfg, rng)
    cam = sample_camera(rng, rig, state.model, state.data, cfg)
    frame, z, seg, visible, total, label_index, t_w, R_w, size = label_view(state, cam, cfg, rng)
    frame.seed = int(seed)
    return SimTruth(frame, z, seg, state.model, state.data, state.index, state.cell, state.objects, cam, visible,
                    total, label_index, t_w, R_w, size, state.settle_time_s, state.distractors)


def generate_sim_frame(seed: int, config: SimConfig | None = None) -> SimFrame:
    """One simulated RGB-D frame with 3D box labels, deterministic per (seed, config)."""
    return render_sim_scene(seed, config).frame

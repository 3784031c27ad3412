"""Physics of one frame: a random collision-free arm configuration, objects dropped and settled.

The arms are kinematic during the drop (their joint positions are re-imposed every step, velocities zeroed), so
objects land on them as on any fixed obstacle and the arms stay where they were drawn.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from string_perception.scenes.geometry import uniform_rotation

from .distractors import distractor_geom_ids


@dataclass
class Indexing:
    """Addresses into one compiled model."""
    arm_qpos: np.ndarray        # int [J]
    arm_dof: np.ndarray         # int [J]
    arm_range: np.ndarray       # [J,2]
    arm_geom: np.ndarray        # bool [ngeom]
    obj_geom: np.ndarray        # int [O] geom id of object i
    obj_qpos: np.ndarray        # int [O] first qpos address of object i's free joint
    obj_dof: np.ndarray         # int [O] first dof address
    geom_obj: np.ndarray        # int [ngeom] object index of a geom, -1 for robot / static geoms
    distractor_geom: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # int [G] clutter geoms


def index_model(model: mujoco.MjModel, arm_roots, arm_joints, num_objects: int) -> Indexing:
    jids = [model.joint(n).id for n in arm_joints]
    roots = {model.body(n).id for n in arm_roots}
    arm_body = np.zeros(model.nbody, bool)
    for b in range(1, model.nbody):              # bodies are ordered parents first
        arm_body[b] = b in roots or arm_body[model.body_parentid[b]]
    obj_geom = np.array([model.geom(f'obj{i}/geom').id for i in range(num_objects)], np.int64).reshape(-1)
    obj_jnt = [model.joint(f'obj{i}/free').id for i in range(num_objects)]
    geom_obj = np.full(model.ngeom, -1, np.int64)
    geom_obj[obj_geom] = np.arange(num_objects)
    return Indexing(arm_qpos=model.jnt_qposadr[jids], arm_dof=model.jnt_dofadr[jids],
                    arm_range=model.jnt_range[jids].copy(), arm_geom=arm_body[model.geom_bodyid],
                    obj_geom=obj_geom, obj_qpos=model.jnt_qposadr[obj_jnt].reshape(-1),
                    obj_dof=model.jnt_dofadr[obj_jnt].reshape(-1), geom_obj=geom_obj,
                    distractor_geom=distractor_geom_ids(model))


def _penetrating(data: mujoco.MjData, geoms: np.ndarray, tol: float = 0.0) -> bool:
    """Any contact deeper than `tol` that involves one of the geoms (bool mask [ngeom])."""
    for c in data.contact[:data.ncon]:
        if c.dist < -tol and (geoms[c.geom1] or geoms[c.geom2]):
            return True
    return False


def park_objects(model, data, idx: Indexing) -> None:
    """Every object far below the cell, at rest (out of the way of the arm sampling)."""
    for i, a in enumerate(idx.obj_qpos):
        data.qpos[a:a + 7] = [10.0 + i, 10.0, -10.0, 1, 0, 0, 0]


def sample_arms(rng, model, data, idx: Indexing, home: np.ndarray, spread: np.ndarray, tries: int = 40):
    """A collision-free arm configuration: home + U(-1,1) * spread clipped to the range; home if none of `tries`
    draws is collision-free. Leaves data at that configuration (forward computed)."""
    lo, hi = idx.arm_range[:, 0], idx.arm_range[:, 1]
    for _ in range(tries):
        q = np.clip(home + rng.uniform(-1.0, 1.0, home.shape) * spread, lo, hi)
        data.qpos[idx.arm_qpos] = q
        mujoco.mj_forward(model, data)
        if not _penetrating(data, idx.arm_geom):
            return q
    data.qpos[idx.arm_qpos] = home
    mujoco.mj_forward(model, data)
    return home


def drop_object(rng, model, data, idx: Indexing, i: int, center, half, z0: float, tries: int = 30) -> None:
    """Object i at a random pose over the drop region at height z0 + its bounding radius, lifted until it
    touches nothing (arms, table or other objects); at rest."""
    a, g = idx.obj_qpos[i], idx.obj_geom[i]
    mask = np.zeros(model.ngeom, bool)
    mask[g] = True
    R = uniform_rotation(*rng.random(3))
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, R.ravel())
    z = z0 + model.geom_rbound[g] + float(np.linalg.norm(model.geom_pos[g])) + 0.005
    for k in range(tries):
        xy = center + rng.uniform(-1.0, 1.0, 2) * half
        data.qpos[a:a + 7] = [xy[0], xy[1], z + 0.02 * k + rng.uniform(0, 0.05), *quat]
        mujoco.mj_forward(model, data)
        if not _penetrating(data, mask, tol=-1e-4):             # not even touching
            break
    data.qvel[idx.obj_dof[i]:idx.obj_dof[i] + 6] = 0.0


def place_objects(rng, model, data, idx: Indexing, center, half, support_z: float, tries: int = 30) -> None:
    """Every object in turn dropped just above the support (drop_object)."""
    for i in range(len(idx.obj_qpos)):
        drop_object(rng, model, data, idx, i, center, half, support_z, tries)


def settle(model, data, idx: Indexing, q_arm: np.ndarray, max_time_s: float, speed_m_s: float) -> float:
    """Step until every object moves slower than `speed_m_s` (angular: speed / 0.05 m) or `max_time_s`;
    returns the simulated time. Arms are held at q_arm."""
    steps_per_check = max(1, int(round(0.05 / model.opt.timestep)))
    max_checks = max(1, int(np.ceil(max_time_s / (steps_per_check * model.opt.timestep))))
    dofs = (idx.obj_dof[:, None] + np.arange(6)[None, :]).reshape(-1)                 # [O*6]
    t0 = data.time
    for _ in range(max_checks):
        for _ in range(steps_per_check):
            data.qpos[idx.arm_qpos] = q_arm
            data.qvel[idx.arm_dof] = 0.0
            mujoco.mj_step(model, data)
        v = np.abs(data.qvel[dofs]).reshape(-1, 6)                                      # [O,6]
        if len(v) == 0 or (v[:, :3].max() < speed_m_s and v[:, 3:].max() < speed_m_s / 0.05):
            break
    data.qpos[idx.arm_qpos] = q_arm
    data.qvel[idx.arm_dof] = 0.0
    mujoco.mj_forward(model, data)
    return float(data.time - t0)

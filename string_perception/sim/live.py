"""A workcell that keeps running. Arm motion (`LiveConfig.motion`): 'pick' (default) = scripted pick-and-place,
an arm takes an object it can reach to a free place on the support (sim/pick.py); 'sweep' = arms move between
random collision-free configurations. Arms are kinematic either way (they push the objects in their way). Objects
that leave the support are dropped again and every `respawn_period_s` one more object (never the one being picked)
is re-dropped over the drop region (a conveyor-like feed). ROS-free; the live camera node (sim_ros/sim_camera.py)
publishes what `LiveCell.view()` returns.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from .camera import CameraDraw, look_at, rig_pose, sample_camera
from .config import SimConfig
from .generator import build_scene, label_view, pick_rig
from .physics import drop_object, sample_arms
from .pick import PickConfig, PickMotion

MOTIONS = ('pick', 'sweep')


@dataclass(frozen=True)
class LiveConfig:
    motion: str = 'pick'                  # 'pick' (scripted pick-and-place) | 'sweep' (random configurations)
    arm_speed_rad_s: float = 0.5          # sweep: joint-space speed of the largest joint motion
    respawn_period_s: float = 2.0         # re-drop one object this often (0 = only those that fell off)
    fall_margin_m: float = 0.05           # an object this far below the support has left it
    pick: PickConfig = PickConfig()

    def __post_init__(self):
        if self.motion not in MOTIONS:
            raise ValueError(f'unknown motion {self.motion!r}; expected one of {MOTIONS}')


@dataclass
class View:
    """One camera view of the running cell."""
    frame: object                  # SimFrame (labels in the camera optical frame)
    time_s: float                  # simulated time
    camera: CameraDraw
    joint_names: tuple
    joint_positions: np.ndarray    # [J]
    joint_velocities: np.ndarray   # [J]
    links: list                    # (body name, position [3], quaternion w x y z) of every robot link


class LiveCell:
    def __init__(self, config: SimConfig, seed: int = 0, rig: str | None = None, live: LiveConfig = LiveConfig()):
        self.cfg, self.live = config, live
        self.state, self.rng = build_scene(seed, config)
        st = self.state
        self.rig = pick_rig(st, config.replace(cameras=(rig,) if rig else config.cameras), self.rng)
        self.camera = sample_camera(self.rng, self.rig, st.model, st.data, config)   # jittered once per run
        self.q = st.q_arm.copy()
        self.qdot = np.zeros_like(self.q)
        self.target = self.q.copy()
        self.next_respawn = live.respawn_period_s
        self.respawned = 0
        self.unstable_steps = 0           # physics steps MuJoCo found unstable (undone, see _step_physics)
        m = st.model
        self.static_geom = (m.geom_bodyid == 0) | np.isin(m.geom_bodyid, [m.body(n).id for n in ('table', 'tray')
                                                                            if _has_body(m, n)])
        self.link_bodies = [b for b in range(1, m.nbody) if st.index.arm_geom[m.geom_bodyid == b].any()]
        # the picks draw from their own stream: how often the cell is viewed (noise draws) does not change them
        self.picker = (PickMotion(st, np.random.default_rng(self.rng.integers(2**62)), live.pick)
                       if live.motion == 'pick' else None)

    @property
    def time_s(self) -> float:
        return float(self.state.data.time)

    def _new_target(self) -> None:
        st = self.state
        q_now = st.data.qpos[st.index.arm_qpos].copy()
        self.target = sample_arms(self.rng, st.model, st.data, st.index, st.cell.arm_home, st.cell.arm_spread)
        st.data.qpos[st.index.arm_qpos] = q_now
        mujoco.mj_forward(st.model, st.data)

    def advance(self, dt: float) -> None:
        """Simulate `dt` seconds: arm motion, physics, fallen / periodic re-drops."""
        if self.picker is not None:
            self._advance_pick(dt)
        else:
            self._advance_sweep(dt)
        self._redrop(dt)

    def _advance_pick(self, dt: float) -> None:
        m, d, idx = self.state.model, self.state.data, self.state.index
        h = m.opt.timestep
        for _ in range(max(1, int(round(dt / h)))):
            q_prev = self.q
            self.q = self.picker.step(self.q, h)
            self.qdot = (self.q - q_prev) / h
            d.qpos[idx.arm_qpos] = self.q
            d.qvel[idx.arm_dof] = self.qdot
            mujoco.mj_kinematics(m, d)
            self.picker.impose_attached(h)
            self._step_physics()

    def _step_physics(self) -> None:
        """mj_step; where MuJoCo finds the step unstable (it then resets the whole state) the state before it is
        put back with the objects at rest, and objects deep in something are dropped again."""
        m, d, idx = self.state.model, self.state.data, self.state.index
        warning = d.warning[mujoco.mjtWarning.mjWARN_BADQACC]
        count, qpos, qvel, time_s = warning.number, d.qpos.copy(), d.qvel.copy(), d.time
        mujoco.mj_step(m, d)
        if warning.number == count:
            return
        self.unstable_steps += 1
        d.qpos[:], d.qvel[:], d.time = qpos, qvel, time_s
        for a in idx.obj_dof:
            d.qvel[a:a + 6] = 0.0
        mujoco.mj_forward(m, d)
        carried = self.picker.obj if self.picker is not None and self.picker.attached else -1
        deep = {int(idx.geom_obj[g]) for c in d.contact[:d.ncon] if c.dist < -0.005 for g in (c.geom1, c.geom2)}
        for o in sorted(deep - {-1, carried}):
            drop_object(self.rng, m, d, idx, o, self.state.cell.drop_center, self.state.cell.drop_half,
                        self.state.cell.support_z + 0.1)

    def _advance_sweep(self, dt: float) -> None:
        m, d, idx = self.state.model, self.state.data, self.state.index
        steps = max(1, int(round(dt / m.opt.timestep)))
        for _ in range(steps):
            delta = self.target - self.q
            span = np.abs(delta).max()
            if span < 1e-3:
                self._new_target()
                continue
            step = min(1.0, self.live.arm_speed_rad_s * m.opt.timestep / span)
            q_prev = self.q
            self.q = self.q + step * delta
            self.qdot = (self.q - q_prev) / m.opt.timestep
            d.qpos[idx.arm_qpos] = self.q
            d.qvel[idx.arm_dof] = self.qdot
            self._step_physics()
            arm_vs_static = [c for c in d.contact[:d.ncon] if c.dist < -0.005 and (
                (idx.arm_geom[c.geom1] and self.static_geom[c.geom2]) or
                (idx.arm_geom[c.geom2] and self.static_geom[c.geom1]))]
            if arm_vs_static:                  # the straight joint path runs into the table: turn back
                self.q = q_prev
                self.target = q_prev

    def _redrop(self, dt: float) -> None:
        st, m, d, idx = self.state, self.state.model, self.state.data, self.state.index
        if len(idx.obj_qpos) == 0:
            return
        cell = st.cell
        z = d.qpos[idx.obj_qpos + 2]                                                   # [O] body heights
        fallen = np.flatnonzero(z < cell.support_z - self.live.fall_margin_m)
        periodic = []
        busy = self.picker.obj if self.picker is not None else -1       # the object being picked stays
        fallen = fallen[fallen != busy]
        if self.live.respawn_period_s > 0 and self.time_s >= self.next_respawn:
            self.next_respawn += self.live.respawn_period_s
            if self.respawned % len(idx.obj_qpos) == busy:
                self.respawned += 1
            if self.respawned % len(idx.obj_qpos) != busy:
                periodic = [self.respawned % len(idx.obj_qpos)]
        for i in list(fallen) + periodic:
            drop_object(self.rng, m, d, idx, int(i), cell.drop_center, cell.drop_half, cell.support_z + 0.1)
            self.respawned += 1
        d.qpos[idx.arm_qpos] = self.q
        if self.picker is not None and self.picker.attached:
            mujoco.mj_kinematics(m, d)
            self.picker.impose_attached()
        mujoco.mj_forward(m, d)

    def view(self) -> View:
        """Render and label the current state through the run's camera (wrist cameras follow the gripper)."""
        st = self.state
        cam = self.camera
        if self.rig.body is not None:
            eye, target = rig_pose(self.rig, st.model, st.data)
            cam = CameraDraw(cam.rig, look_at(eye, target), eye, cam.f, cam.pad, cam.crop, cam.height, cam.width)
        frame = label_view(st, cam, self.cfg, self.rng)[0]
        frame.seed = -1
        links = [(st.model.body(b).name, st.data.xpos[b].copy(), st.data.xquat[b].copy()) for b in self.link_bodies]
        return View(frame, self.time_s, cam, tuple(st.cell.arm_joints), self.q.copy(), self.qdot.copy(), links)

    def objects_moved_since(self, positions: np.ndarray) -> np.ndarray:
        """Distance [O] each object's centre moved since `positions` [O,3] (object_positions())."""
        return np.linalg.norm(self.object_positions() - positions, axis=1)

    def object_positions(self) -> np.ndarray:
        st = self.state
        return st.data.xpos[st.model.geom_bodyid[st.index.obj_geom]].copy()


def _has_body(model, name: str) -> bool:
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name) >= 0


__all__ = ['MOTIONS', 'LiveCell', 'LiveConfig', 'View']

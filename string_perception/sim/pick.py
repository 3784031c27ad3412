"""Scripted pick-and-place for the live cell (sim/live.py): an arm picks an object it can reach, carries it to a
free place on the support and lets the physics settle it; then the next pick.

Phases: approach (tool above the object, pointing down, fingers across the object's narrowest horizontal extent)
-> descend -> grasp -> lift -> carry (above the place) -> lower (the object's lowest point 5 mm above the support)
-> release -> retreat (up). The tool follows a straight line to each phase's goal at `tool_speed_m_s` and the arm's
joints follow the tool by resolved-rate IK (sim/ik.py). A phase that does not reach its goal in time abandons the
pick (a carried object is released where it is).

Grasp = kinematic attachment: while carried, the object's free joint is set every physics step to a fixed pose in
the tool body's frame (the pose it had at the grasp), with the matching velocity. This is exact (the object cannot
slip, sag or jitter, so labels follow the gripper exactly) and needs no change to the compiled model; a weld
equality would be soft (the object lags and sags under the constraint solver) and needs a constraint per arm and
object compiled in. It is not a force-closure grasp: the ViperX fingers close on the object for the look only, and
the iiwa, which has no gripper in pybullet_data, takes objects at its flange ("suction").
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from string_perception.scenes.primitives import BOX, CAPSULE, CYLINDER, SPHERE, support_distance

from .cells import Effector
from .ik import Tool, ik_step, rotation_error, tool_pose
from .objects import body_boxes, geom_vertices_in_body

_PHASES = ('idle', 'approach', 'descend', 'lift', 'carry', 'lower', 'retreat')
_DOWN = np.array([0.0, 0.0, -1.0])


@dataclass(frozen=True)
class PickConfig:
    tool_speed_m_s: float = 0.25        # tool speed along each straight segment
    joint_speed_rad_s: float = 2.0      # the IK's joint speed limit
    hover_m: float = 0.15               # carry height of the tool above the grasp / release height
    release_gap_m: float = 0.005        # the object's lowest point this far above the support at release
    min_displacement_m: float = 0.08    # a place at least this far from where the object was
    place_clearance_m: float = 0.01     # free gap between the placed object's footprint and the others'
    phase_timeout_s: float = 4.0        # + the segment's length / speed
    position_tolerance_m: float = 0.004
    angle_tolerance_rad: float = 0.08
    settle_speed_m_s: float = 0.02      # objects moving slower than this may be picked


@dataclass
class PickRecord:
    """One finished or abandoned pick (for tests and logs)."""
    effector: str
    obj: int
    start_xyz: np.ndarray         # [3] object centre at the grasp
    place_xy: np.ndarray          # [2] planned place
    done: bool                    # False: abandoned (phase `failed_in` timed out)
    failed_in: str = ''


def extent_along(model, data, geom: int, label: int, size: np.ndarray, u: np.ndarray) -> float:
    """max over the object's shape of (x - body origin) . u for a world direction u [3] (exact: primitives
    analytically, meshes over their vertices)."""
    body = model.geom_bodyid[geom]
    u_b = data.xmat[body].reshape(3, 3).T @ u                                      # [3] body frame
    if label in (BOX, CYLINDER, SPHERE, CAPSULE):
        return float(support_distance(label, np.asarray(size, np.float64), u_b))
    return float((geom_vertices_in_body(model, geom) @ u_b).max())


class PickMotion:
    """The pick-and-place state machine over a SceneState; `step` is called once per physics step."""

    def __init__(self, state, rng: np.random.Generator, config: PickConfig = PickConfig()):
        self.state, self.rng, self.cfg = state, rng, config
        m = state.model
        arm_joints = list(state.cell.arm_joints)
        self.arms = []
        for eff in state.cell.effectors:
            sel = np.array([arm_joints.index(j) for j in eff.joints])
            approach, closing = np.array(eff.approach_axis, float), np.array(eff.closing_axis, float)
            R_bt = np.stack([np.cross(closing, approach), closing, approach], axis=1)   # tool x, y = closing, z
            fingers = [(arm_joints.index(j), sign) for j, sign in eff.fingers]
            self.arms.append((eff, Tool(m.body(eff.body).id, np.array(eff.point, float), R_bt), sel, fingers))
        self.box_centre, self.box_size = body_boxes(m, state.index.obj_geom, state.objects)   # [O,3], [O,3]
        self.phase = 'idle'
        self.arm = None
        self.obj = -1
        self.attached = False
        self.rel_pos = np.zeros(3)                 # object body origin in the tool body frame
        self.rel_R = np.eye(3)                     # object body axes in the tool body frame
        self.records: list[PickRecord] = []
        self._last_obj = -1
        self._idle_until = 0.0

    # ------------------------------------------------------------------ geometry
    def _label(self, o: int) -> int:
        return self.state.objects[o].label

    def _extent(self, o: int, u: np.ndarray) -> float:
        st = self.state
        return extent_along(st.model, st.data, st.index.obj_geom[o], self._label(o), self.box_size[o], u)

    def _body(self, o: int) -> int:
        return self.state.model.geom_bodyid[self.state.index.obj_geom[o]]

    def lowest_z(self, o: int) -> float:
        """World height of object o's lowest point."""
        return float(self.state.data.xpos[self._body(o)][2] - self._extent(o, _DOWN))

    def _footprint_radius(self, o: int) -> float:
        angles = np.linspace(0.0, 2 * np.pi, 16, endpoint=False)
        return max(self._extent(o, np.array([np.cos(a), np.sin(a), 0.0])) for a in angles) / np.cos(np.pi / 16)

    def _closing_direction(self, o: int) -> tuple[np.ndarray, float]:
        """The horizontal direction [3] (of 12 tried) across which the object is narrowest, and that width."""
        best = (None, np.inf)
        for a in np.linspace(0.0, np.pi, 12, endpoint=False):
            d = np.array([np.cos(a), np.sin(a), 0.0])
            width = self._extent(o, d) + self._extent(o, -d)
            if width < best[1]:
                best = (d, width)
        return best

    # ------------------------------------------------------------------ planning
    def _reaches(self, eff: Effector, xy: np.ndarray) -> bool:
        base = self.state.data.xpos[self.state.model.body(eff.base).id][:2]
        return float(np.linalg.norm(xy - base)) <= eff.reach_m

    def _plan(self):
        """(arm, object, goal axes [3,3], place xy [2], finger opening) for the next pick, or None."""
        st, d = self.state, self.state.data
        cell, idx = st.cell, st.index
        n = len(st.objects)
        if n == 0 or not self.arms:
            return None
        centres = d.xpos[[self._body(o) for o in range(n)]]                        # [O,3]
        speeds = np.abs(d.qvel[(idx.obj_dof[:, None] + np.arange(3)[None, :])]).max(1)   # [O]
        radii = np.array([self._footprint_radius(o) for o in range(n)])            # [O]
        order = self.rng.permutation(n)
        order = np.concatenate([order[order != self._last_obj], order[order == self._last_obj]])
        for o in order:
            if speeds[o] > self.cfg.settle_speed_m_s or abs(self.lowest_z(o) - cell.support_z) > 0.01:
                continue                                                           # moving, or not on the support
            dists = [np.linalg.norm(centres[o, :2] - d.xpos[st.model.body(a[0].base).id][:2]) for a in self.arms]
            arm = self.arms[int(np.argmin(dists))]
            eff = arm[0]
            if not self._reaches(eff, centres[o, :2]):
                continue
            closing, width = self._closing_direction(o)
            if eff.max_grip_m > 0 and width > eff.max_grip_m:
                continue
            lo = cell.drop_center - cell.drop_half + radii[o]
            hi = cell.drop_center + cell.drop_half - radii[o]
            if np.any(lo >= hi):
                continue
            others = np.arange(n) != o
            for _ in range(30):
                xy = self.rng.uniform(lo, hi)
                if (np.linalg.norm(xy - centres[o, :2]) >= self.cfg.min_displacement_m and self._reaches(eff, xy)
                        and np.all(np.linalg.norm(centres[others, :2] - xy, axis=1)
                                   >= radii[others] + radii[o] + self.cfg.place_clearance_m)):
                    break
            else:
                continue
            _, R_now = tool_pose(d, arm[1])
            if closing @ R_now[:, 1] < 0:                                          # the nearer of the two yaws
                closing = -closing
            R_goal = np.stack([np.cross(closing, _DOWN), closing, _DOWN], axis=1)  # tool z down, y = closing
            opening = min(eff.finger_touch + 0.5 * width + 0.004, eff.finger_open) if eff.fingers else 0.0
            return arm, int(o), R_goal, xy, opening
        return None

    # ------------------------------------------------------------------ goals per phase
    def _grasp_point(self, o: int) -> np.ndarray:
        st = self.state
        c = st.data.xpos[self._body(o)]
        eff = self.arm[0]
        if eff.fingers:                          # pads at the box centre height, fingertips >= 6 mm above support
            box_c = c + st.data.xmat[self._body(o)].reshape(3, 3) @ self.box_centre[o]
            z = max(box_c[2], st.cell.support_z + 0.025)
            return np.array([box_c[0], box_c[1], z])
        return np.array([c[0], c[1], c[2] + self._extent(o, -_DOWN) + 0.002])   # flange on the object's top

    def _goal(self) -> np.ndarray:
        st = self.state
        if self.phase in ('approach', 'descend'):
            g = self._grasp_point(self.obj)
            if self.phase == 'approach':
                g[2] += self.cfg.hover_m
            return g
        if self.phase == 'lift':
            return np.array([*self.seg_start[:2], self.grasp_z + self.cfg.hover_m])
        if self.phase == 'carry':
            return np.array([*self.place_xy, self.grasp_z + self.cfg.hover_m])
        if self.phase == 'lower':
            return np.array([*self.place_xy, st.cell.support_z + self.cfg.release_gap_m + self.tool_above_lowest])
        return np.array([*self.seg_start[:2], self.seg_start[2] + self.cfg.hover_m])   # retreat

    def _begin(self, phase: str, p_tool: np.ndarray, t: float) -> None:
        self.phase, self.seg_start, self.seg_t0 = phase, p_tool.copy(), t

    # ------------------------------------------------------------------ stepping
    def step(self, q: np.ndarray, dt: float) -> np.ndarray:
        """The arms' joint positions [J] after one physics step of `dt` from q [J] (data holds the current
        state; its kinematics are recomputed here)."""
        st, m, d = self.state, self.state.model, self.state.data
        t = float(d.time)
        d.qpos[st.index.arm_qpos] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        if self.phase == 'idle':
            if t < self._idle_until:
                return q
            plan = self._plan()
            if plan is None:
                self._idle_until = t + 0.5
                return q
            self.arm, self.obj, self.R_goal, self.place_xy, self.opening = plan
            self._begin('approach', tool_pose(d, self.arm[1])[0], t)
        eff, tool, sel, fingers = self.arm
        q = q.copy()
        p_tool, R_tool = tool_pose(d, tool)
        goal = self._goal()
        span = float(np.linalg.norm(goal - self.seg_start))
        s = 1.0 if span < 1e-9 else min(1.0, (t - self.seg_t0) * self.cfg.tool_speed_m_s / span)
        waypoint = self.seg_start + s * (goal - self.seg_start)
        qpos_adr, dof_adr = st.index.arm_qpos[sel], st.index.arm_dof[sel]
        q[sel] = ik_step(m, d, tool, qpos_adr, dof_adr, st.index.arm_range[sel], waypoint, self.R_goal,
                         self.cfg.joint_speed_rad_s * dt)
        opening = self.opening if self.attached else eff.finger_open
        for j, sign in fingers:                                    # fingers move at 5 cm/s towards their opening
            target = sign * opening
            q[j] += np.clip(target - q[j], -0.05 * dt, 0.05 * dt)
        reached = s >= 1.0 and np.linalg.norm(goal - p_tool) < self.cfg.position_tolerance_m and \
            np.linalg.norm(rotation_error(self.R_goal, R_tool)) < self.cfg.angle_tolerance_rad
        if reached:
            self._advance_phase(p_tool, t)
        elif t - self.seg_t0 > self.cfg.phase_timeout_s + span / self.cfg.tool_speed_m_s:
            self._abandon(p_tool, t)
        return q

    def _advance_phase(self, p_tool: np.ndarray, t: float) -> None:
        nxt = {'approach': 'descend', 'descend': 'lift', 'lift': 'carry', 'carry': 'lower', 'lower': 'retreat'}
        if self.phase == 'descend':
            self._attach()
            self.grasp_z = float(p_tool[2])
            self.start_xyz = self.state.data.xpos[self._body(self.obj)].copy()
            self.tool_above_lowest = float(p_tool[2] - self.lowest_z(self.obj))
        elif self.phase == 'lower':
            self._detach()
            self.records.append(PickRecord(self.arm[0].name, self.obj, self.start_xyz, self.place_xy, True))
        elif self.phase == 'retreat':
            self._finish(t)
            return
        self._begin(nxt[self.phase], p_tool, t)

    def _abandon(self, p_tool: np.ndarray, t: float) -> None:
        failed = self.phase
        if self.phase == 'retreat':
            self._finish(t)
            return
        if self.attached:
            self._detach()
        start = getattr(self, 'start_xyz', np.full(3, np.nan)) if failed in ('lift', 'carry', 'lower') else \
            self.state.data.xpos[self._body(self.obj)].copy()
        self.records.append(PickRecord(self.arm[0].name, self.obj, start, self.place_xy, False, failed))
        self._begin('retreat', p_tool, t)

    def _finish(self, t: float) -> None:
        self._last_obj = self.obj
        self.phase, self.arm, self.obj = 'idle', None, -1
        self._idle_until = t + 0.2

    # ------------------------------------------------------------------ attachment
    def _attach(self) -> None:
        d, tool = self.state.data, self.arm[1]
        b = self._body(self.obj)
        R_t = d.xmat[tool.body].reshape(3, 3)
        self.rel_pos = R_t.T @ (d.xpos[b] - d.xpos[tool.body])
        self.rel_R = R_t.T @ d.xmat[b].reshape(3, 3)
        self.attached = True

    def _detach(self) -> None:
        st = self.state
        self.attached = False
        dof = st.index.obj_dof[self.obj]
        st.data.qvel[dof:dof + 6] = 0.0

    def carried_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(position [3], axes [3,3]) the carried object has at the tool body's current pose (needs kinematics)."""
        d, tool = self.state.data, self.arm[1]
        R_t = d.xmat[tool.body].reshape(3, 3)
        return d.xpos[tool.body] + R_t @ self.rel_pos, R_t @ self.rel_R

    def impose_attached(self, dt: float | None = None) -> None:
        """Put the carried object at its pose in the tool frame (kinematics must be current); with `dt`, give it
        the velocity of moving there from where it is within dt."""
        if not self.attached:
            return
        st, d = self.state, self.state.data
        a, dof = st.index.obj_qpos[self.obj], st.index.obj_dof[self.obj]
        pos, R = self.carried_pose()
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, R.ravel())
        if dt:
            vel = np.zeros(3)
            mujoco.mju_subQuat(vel, quat, d.qpos[a + 3:a + 7])                  # body-frame rotation vector
            d.qvel[dof:dof + 3] = (pos - d.qpos[a:a + 3]) / dt
            d.qvel[dof + 3:dof + 6] = vel / dt
        else:
            d.qvel[dof:dof + 6] = 0.0
        d.qpos[a:a + 3] = pos
        d.qpos[a + 3:a + 7] = quat


__all__ = ['PickConfig', 'PickMotion', 'PickRecord', 'extent_along']

"""Scripted pick-and-place for the live cell (sim/live.py): an arm picks an object it can reach, carries it to a
free place on the support and lets the physics settle it; then the next pick.

Planning: an object at rest on the support, nearest arm, within its reach and (fingers) grip width; the tool
points down with the fingers across the object's narrowest horizontal extent; a free place on the support
`min_displacement_m` away; IK solutions (damped least squares on mj_jac, sim/ik.py, joint limits held) for the
tool hover_m above the grasp and above the release, and for both end points, or the object is not tried.
Phases: approach (joint-space move to the hover solution) -> descend (straight tool line) -> grasp -> lift (line)
-> carry (joint-space move to the hover solution over the place) -> lower (line; the object's lowest point
`release_gap_m` above the support) -> release -> retreat (line up). Lines run at `tool_speed_m_s`, the joints
following by resolved-rate IK. A phase that does not reach its goal in time abandons the pick (a carried object
is released where it is).

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
from .ik import Tool, ik_step, rotation_error, solve_ik, tool_pose
from .objects import body_boxes, geom_vertices_in_body

_JOINT_MOVES = ('approach', 'carry')       # joint-space moves between IK solutions; the others are tool lines
_DOWN = np.array([0.0, 0.0, -1.0])


@dataclass(frozen=True)
class PickConfig:
    tool_speed_m_s: float = 0.25        # tool speed along each straight segment
    joint_speed_rad_s: float = 1.2      # joint-space moves and the IK's joint speed limit
    hover_m: float = 0.15               # carry height of the tool above the grasp / release height
    release_gap_m: float = 0.005        # the object's lowest point this far above the support at release
    min_displacement_m: float = 0.08    # a place at least this far from where the object was
    place_clearance_m: float = 0.01     # free gap between the placed object's footprint and the others'
    phase_timeout_s: float = 4.0        # + the segment's length / speed
    position_tolerance_m: float = 0.004
    angle_tolerance_rad: float = 0.08
    settle_speed_m_s: float = 0.02      # objects moving slower than this may be picked


@dataclass
class _Plan:
    arm: tuple                    # (Effector, Tool, joint indices [n] into the arms' q, fingers)
    obj: int
    R: np.ndarray                 # [3,3] tool axes for the whole pick (z down, y across the object)
    grasp: np.ndarray             # [3] tool point at the grasp
    lower: np.ndarray             # [3] tool point at the release
    q_hover: np.ndarray           # [n] IK solution hover_m above the grasp
    q_place: np.ndarray           # [n] IK solution hover_m above the release
    opening: float                # finger opening while carrying


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
        self.box_centre, _, self.box_size = body_boxes(m, state.index.obj_geom, state.objects)   # [O,3], [O,3]
        self._scratch = mujoco.MjData(m)          # IK solutions are searched on this copy
        self.phase = 'idle'
        self.plan: _Plan | None = None
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

    def _grasp_point(self, eff: Effector, o: int) -> np.ndarray:
        """Where the tool point goes to take object o: finger pads at its box centre height (fingertips >= 6 mm
        above the support), or the flange on its top."""
        st = self.state
        b = self._body(o)
        c = st.data.xpos[b]
        if eff.fingers:
            box_c = c + st.data.xmat[b].reshape(3, 3) @ self.box_centre[o]
            return np.array([box_c[0], box_c[1], max(box_c[2], st.cell.support_z + 0.025)])
        return np.array([c[0], c[1], c[2] + self._extent(o, -_DOWN) + 0.002])

    def _aimed(self, arm, q_arm: np.ndarray, xy: np.ndarray) -> np.ndarray:
        """q_arm [n] with the first (vertical) joint turned so the arm faces xy."""
        d, eff = self.state.data, arm[0]
        base = self.state.model.body(eff.base).id
        v = d.xmat[base].reshape(3, 3).T @ (np.array([xy[0], xy[1], 0.0]) - d.xpos[base])   # [3] base frame
        q = q_arm.copy()
        q[0] = np.arctan2(v[1], v[0])
        return q

    def _solve(self, arm, p: np.ndarray, R: np.ndarray, seeds) -> np.ndarray | None:
        st = self.state
        sel = arm[2]
        self._scratch.qpos[:] = st.data.qpos
        for seed in seeds:
            q = solve_ik(st.model, self._scratch, arm[1], st.index.arm_qpos[sel], st.index.arm_dof[sel],
                         st.index.arm_range[sel], p, R, seed)
            if q is not None:
                return q
        return None

    def _plan(self, q: np.ndarray):
        """A Plan for the next pick from the arms' configuration q [J], or None: objects at rest on the support,
        that an arm reaches and can grip, a free place, and IK solutions for the four poses."""
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
        home = st.cell.arm_home
        for o in order:
            if speeds[o] > self.cfg.settle_speed_m_s or abs(self.lowest_z(o) - cell.support_z) > 0.01:
                continue                                                           # moving, or not on the support
            dists = [np.linalg.norm(centres[o, :2] - d.xpos[st.model.body(a[0].base).id][:2]) for a in self.arms]
            arm = self.arms[int(np.argmin(dists))]
            eff, tool, sel = arm[0], arm[1], arm[2]
            if not self._reaches(eff, centres[o, :2]):
                continue
            closing, width = self._closing_direction(o)
            if eff.max_grip_m > 0 and width > eff.max_grip_m:
                continue
            _, R_now = tool_pose(d, tool)
            if closing @ R_now[:, 1] < 0:                                          # the nearer of the two yaws
                closing = -closing
            R = np.stack([np.cross(closing, _DOWN), closing, _DOWN], axis=1)       # tool z down, y = closing
            grasp = self._grasp_point(eff, o)
            up = np.array([0.0, 0.0, self.cfg.hover_m])
            q_hover = self._solve(arm, grasp + up, R, [self._aimed(arm, q[sel], grasp), self._aimed(arm, home[sel],
                                                                                                    grasp)])
            q_grasp = None if q_hover is None else self._solve(arm, grasp, R, [q_hover])
            if q_grasp is None:
                continue
            lo = cell.drop_center - cell.drop_half + radii[o]
            hi = cell.drop_center + cell.drop_half - radii[o]
            if np.any(lo >= hi):
                continue
            others = np.arange(n) != o
            lower_z = cell.support_z + self.cfg.release_gap_m + grasp[2] - self.lowest_z(o)
            tried = 0
            for _ in range(40):
                xy = self.rng.uniform(lo, hi)
                if not (np.linalg.norm(xy - centres[o, :2]) >= self.cfg.min_displacement_m and self._reaches(eff, xy)
                        and np.all(np.linalg.norm(centres[others, :2] - xy, axis=1)
                                   >= radii[others] + radii[o] + self.cfg.place_clearance_m)):
                    continue
                lower = np.array([xy[0], xy[1], lower_z])
                q_place = self._solve(arm, lower + up, R, [self._aimed(arm, q_hover, xy)])
                if q_place is not None and self._solve(arm, lower, R, [q_place]) is not None:
                    opening = min(eff.finger_touch + 0.5 * width + 0.004, eff.finger_open) if eff.fingers else 0.0
                    return _Plan(arm, int(o), R, grasp, lower, q_hover, q_place, opening)
                tried += 1
                if tried == 4:
                    break
        return None

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
            self.plan = self._plan(q)
            if self.plan is None:
                self._idle_until = t + 0.5
                return q
            self.arm, self.obj = self.plan.arm, self.plan.obj
            self._begin('approach', q, t)
        plan = self.plan
        eff, tool, sel, fingers = plan.arm
        q = q.copy()
        p_tool, R_tool = tool_pose(d, tool)
        if self.phase in _JOINT_MOVES:                                       # joint-space move to a solution
            q_goal = plan.q_hover if self.phase == 'approach' else plan.q_place
            span = float(np.abs(q_goal - self.seg_q).max())
            s = 1.0 if span < 1e-9 else min(1.0, (t - self.seg_t0) * self.cfg.joint_speed_rad_s / span)
            q[sel] = self.seg_q + s * (q_goal - self.seg_q)
            reached = s >= 1.0
        else:                                                                # straight vertical tool segment
            goal = self._goal()
            span = float(np.linalg.norm(goal - self.seg_p))
            s = 1.0 if span < 1e-9 else min(1.0, (t - self.seg_t0) * self.cfg.tool_speed_m_s / span)
            waypoint = self.seg_p + s * (goal - self.seg_p)
            q[sel] = ik_step(m, d, tool, st.index.arm_qpos[sel], st.index.arm_dof[sel], st.index.arm_range[sel],
                             waypoint, plan.R, self.cfg.joint_speed_rad_s * dt)
            reached = s >= 1.0 and np.linalg.norm(goal - p_tool) < self.cfg.position_tolerance_m and \
                np.linalg.norm(rotation_error(plan.R, R_tool)) < self.cfg.angle_tolerance_rad
            span /= self.cfg.tool_speed_m_s / self.cfg.joint_speed_rad_s     # -> the timeout's time scale
        opening = plan.opening if self.attached else eff.finger_open
        for j, sign in fingers:                                    # fingers move at 5 cm/s towards their opening
            q[j] += np.clip(sign * opening - q[j], -0.05 * dt, 0.05 * dt)
        if reached:
            self._advance_phase(q, p_tool, t)
        elif t - self.seg_t0 > self.cfg.phase_timeout_s + span / self.cfg.joint_speed_rad_s:
            self._abandon(q, p_tool, t)
        return q

    def _goal(self) -> np.ndarray:
        plan, up = self.plan, np.array([0.0, 0.0, self.cfg.hover_m])
        return {'descend': plan.grasp, 'lift': plan.grasp + up, 'lower': plan.lower,
                'retreat': self.seg_p + up}[self.phase]

    def _begin(self, phase: str, q: np.ndarray, t: float) -> None:
        self.phase, self.seg_t0 = phase, t
        self.seg_q = q[self.plan.arm[2]].copy()
        self.seg_p = tool_pose(self.state.data, self.plan.arm[1])[0].copy()

    def _advance_phase(self, q: np.ndarray, p_tool: np.ndarray, t: float) -> None:
        nxt = {'approach': 'descend', 'descend': 'lift', 'lift': 'carry', 'carry': 'lower', 'lower': 'retreat'}
        if self.phase == 'descend':
            self.start_xyz = self.state.data.xpos[self._body(self.obj)].copy()
            self._attach()
        elif self.phase == 'lower':
            self._detach()
            self.records.append(PickRecord(self.arm[0].name, self.obj, self.start_xyz, self.plan.lower[:2], True))
        elif self.phase == 'retreat':
            self._finish(t)
            return
        self._begin(nxt[self.phase], q, t)

    def _abandon(self, q: np.ndarray, p_tool: np.ndarray, t: float) -> None:
        failed = self.phase
        if self.phase == 'retreat':
            self._finish(t)
            return
        start = self.start_xyz if self.attached else self.state.data.xpos[self._body(self.obj)].copy()
        if self.attached:
            self._detach()
        self.records.append(PickRecord(self.arm[0].name, self.obj, start, self.plan.lower[:2], False, failed))
        self._begin('retreat', q, t)

    def _finish(self, t: float) -> None:
        self._last_obj = self.obj
        self.phase, self.arm, self.obj, self.plan = 'idle', None, -1, None
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

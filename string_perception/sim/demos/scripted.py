"""Scripted demonstrator for the transfer-cube task (transfer_cube.py) in end-effector space, as the ACT authors
scripted theirs: tool waypoints per arm (time step, pad-centre position, tool axes, gripper 0 closed .. 1 open),
interpolated every control step (positions linearly, axes by slerp), turned into joint targets by damped
least-squares IK (sim/ik.py, warm-started from the previous step's targets) and executed by the cell's position
actuators; the fingers close by their actuators, so the cube is held by friction only.

Script (50 Hz steps): the right arm goes above the cube (tool tilted `pick_tilt_deg` below horizontal, fingers
across world y), descends, closes, lifts it to the meeting point; the left arm comes in horizontally from the left
with its fingers closing vertically, grasps the cube from the left side, the right arm opens and backs off, the
left arm pulls the cube away. Where the left grasps is planned from the cube's measured position once the right
arm holds it at the meeting point (the ACT script planned every waypoint from the initial cube pose).

Wrist branch (issue 39): the vx300s wrist is roll-pitch-roll (forearm_roll, wrist_angle, wrist_rotate), and
(a, b, c) and (a -/+ pi, -b, c +/- pi) give the same tool pose. With ``t_pitch = 0`` (the script before issue 39)
the right tool turns to the pick orientation while the waist swings towards the cube; that needs a wrist yaw near
wrist_angle = 0 (the singularity), so the IK ends on one of three branches depending on the cube position
(forearm_roll ~ -pi, ~ +pi or ~ 0; 20 / 12 / 8 of seeds 0-39): the joint-space demos are discontinuous in the cube
position and a behaviour-cloning policy averages the branches. ``t_pitch > 0`` (default 45) first pitches the
wrist to the pick orientation in place (no yaw needed), then travels: every seed stays on the forearm_roll ~ 0
branch.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from ..ik import Tool, ik_step, rotation_error, tool_pose
from .aloha_scene import SIDES
from .transfer_cube import TransferCubeScene

PAD_CENTRE = np.array([0.135, 0.0, 0.0])    # between the finger pads in gripper_link's frame (sim/cells.py)


@dataclass(frozen=True)
class TransferScript:
    meet: tuple = (0.0, 0.5, 0.25)          # where the cube is handed over (world, m)
    pick_tilt_deg: float = 60.0             # right tool axis below horizontal while picking and handing over
    hover_m: float = 0.08                   # pre-grasp height above the grasp
    grasp_dz_m: float = 0.005               # pad centre above the cube centre at the grasp
    left_grasp_dx_m: float = -0.005         # left pad centre relative to the cube centre along x at the hand-over
    left_standoff_m: float = 0.1            # left pre-grasp distance (along -x) from its grasp point
    # time steps (50 Hz) of the waypoints
    t_pitch: int = 45                       # > 0: the right tool first turns to the pick orientation in place
                                            # (a pure wrist pitch), then travels; 0: both at once (see below)
    t_hover: int = 90
    t_grasp: int = 130
    t_closed: int = 170
    t_lift: int = 200
    t_meet: int = 220
    t_left_ready: int = 100
    t_left_grasp: int = 260
    t_left_closed: int = 310
    t_right_open: int = 360
    t_away: int = 380
    t_end: int = 400
    ik_iterations: int = 30


def _axes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[3,3] tool axes (columns x, y, z = x cross y)."""
    x = x / np.linalg.norm(x)
    y = y - x * (x @ y)
    y = y / np.linalg.norm(y)
    return np.stack([x, y, np.cross(x, y)], axis=1)


class _Track:
    """Piecewise tool trajectory: waypoints (t, position [3], axes [3,3], gripper) interpolated at a time step."""

    def __init__(self):
        self.t, self.p, self.R, self.g = [], [], [], []

    def add(self, t: int, p, R, g: float) -> None:
        self.t.append(t)
        self.p.append(np.asarray(p, float))
        self.R.append(np.asarray(R, float))
        self.g.append(float(g))

    def at(self, t: int) -> tuple[np.ndarray, np.ndarray, float]:
        k = int(np.searchsorted(self.t, t, side='right'))
        if k == 0:
            return self.p[0], self.R[0], self.g[0]
        if k >= len(self.t):
            return self.p[-1], self.R[-1], self.g[-1]
        t0, t1 = self.t[k - 1], self.t[k]
        u = (t - t0) / (t1 - t0)
        slerp = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([self.R[k - 1], self.R[k]])))
        return ((1 - u) * self.p[k - 1] + u * self.p[k], slerp([u]).as_matrix()[0],
                (1 - u) * self.g[k - 1] + u * self.g[k])


class TransferCubeDemonstrator:
    """policy(step) -> 14-D action for a scene just reset (the cube resting where reset put it)."""

    def __init__(self, scene: TransferCubeScene, script: TransferScript = TransferScript()):
        self.scene, self.s = scene, script
        m, d = scene.model, scene.data
        self.tools = {side: Tool(m.body(f'vx300s_{side}/gripper_link').id, PAD_CENTRE, np.eye(3)) for side in SIDES}
        self.scratch = mujoco.MjData(m)
        self.scratch.qpos[:] = d.qpos
        mujoco.mj_kinematics(m, self.scratch)
        self.q = {side: d.qpos[scene.arm_qpos[side]].copy() for side in SIDES}
        start = {side: tool_pose(self.scratch, self.tools[side]) for side in SIDES}
        a = np.radians(script.pick_tilt_deg)
        self.R_pick = _axes(np.array([-np.cos(a), 0.0, -np.sin(a)]), np.array([0.0, -1.0, 0.0]))
        self.R_left = _axes(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))
        meet = np.asarray(script.meet, float)
        box = scene.box_position()
        box[2] = scene.model.geom_size[scene.box_geom][2]                 # resting on the table (z = half size)
        grasp = box + [0.0, 0.0, script.grasp_dz_m]
        s = script
        right = _Track()
        right.add(0, *start['right'], 1.0)
        if s.t_pitch > 0:
            right.add(s.t_pitch, start['right'][0], self.R_pick, 1.0)
        right.add(s.t_hover, grasp + [0.0, 0.0, s.hover_m], self.R_pick, 1.0)
        right.add(s.t_grasp, grasp, self.R_pick, 1.0)
        right.add(s.t_closed, grasp, self.R_pick, 0.0)
        right.add(s.t_lift, meet + [0.05, 0.0, 0.0], self.R_pick, 0.0)
        right.add(s.t_meet, meet, self.R_pick, 0.0)
        right.add(s.t_left_closed, meet, self.R_pick, 0.0)
        right.add(s.t_right_open, meet, self.R_pick, 1.0)
        right.add(s.t_away, meet + [0.1, 0.0, 0.0], self.R_pick, 1.0)
        right.add(s.t_end, meet + [0.1, 0.0, 0.0], self.R_pick, 1.0)
        self.right = right
        self.left_start = start['left']
        self.left_planned = False                                     # grasp planned at t_meet from the cube
        self.left = self._plan_left()

    def _ready(self) -> np.ndarray:
        s = self.s
        return np.asarray(s.meet, float) + [s.left_grasp_dx_m - s.left_standoff_m, 0.0, 0.0]

    def _plan_left(self) -> _Track:
        """Left waypoints: to a stand-off left of the meeting point, then (planned at t_meet from the cube's
        measured position) in to the grasp, close, hold while the right opens, pull away along -x."""
        s = self.s
        left = _Track()
        left.add(0, *self.left_start, 1.0)
        left.add(s.t_left_ready, self._ready(), self.R_left, 1.0)
        if self.left_planned:
            grasp = self.scene.box_position() + [s.left_grasp_dx_m, 0.0, 0.0]
            left.add(s.t_meet, self._ready(), self.R_left, 1.0)
            left.add(s.t_left_grasp, grasp, self.R_left, 1.0)
            left.add(s.t_left_closed, grasp, self.R_left, 0.0)
            left.add(s.t_right_open, grasp, self.R_left, 0.0)
            left.add(s.t_end, grasp - [s.left_standoff_m, 0.0, 0.0], self.R_left, 0.0)
        return left

    def _ik(self, side: str, p: np.ndarray, R: np.ndarray) -> np.ndarray:
        sc, m = self.scene, self.scene.model
        self.scratch.qpos[sc.arm_qpos[side]] = self.q[side]
        for _ in range(self.s.ik_iterations):
            mujoco.mj_kinematics(m, self.scratch)
            p_now, R_now = tool_pose(self.scratch, self.tools[side])
            if np.linalg.norm(p - p_now) < 5e-4 and np.linalg.norm(rotation_error(R, R_now)) < 5e-3:
                break
            mujoco.mj_comPos(m, self.scratch)
            self.scratch.qpos[sc.arm_qpos[side]] = ik_step(m, self.scratch, self.tools[side], sc.arm_qpos[side],
                                                           sc.arm_dof[side], sc.arm_range[side], p, R, 0.2,
                                                           damping=0.01)
        self.q[side] = self.scratch.qpos[sc.arm_qpos[side]].copy()
        return self.q[side]

    def __call__(self, step: int) -> np.ndarray:
        if not self.left_planned and step >= self.s.t_meet:
            self.left_planned = True
            self.left = self._plan_left()
        out = []
        for side, track in (('left', self.left), ('right', self.right)):
            p, R, g = track.at(step)
            out.extend([*self._ik(side, p, R), g])
        return np.array(out)                                          # [14] gym-aloha action layout

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

import numpy as np

from .transfer_cube import TransferCubeScene
from .waypoints import ArmIK, Track, pick_axes, tool_axes


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


class TransferCubeDemonstrator:
    """policy(step) -> 14-D action for a scene just reset (the cube resting where reset put it)."""

    def __init__(self, scene: TransferCubeScene, script: TransferScript = TransferScript()):
        self.scene, self.s = scene, script
        self.arms = ArmIK(scene, script.ik_iterations)
        start = self.arms.start
        self.R_pick = pick_axes(script.pick_tilt_deg, 'right')
        self.R_left = tool_axes(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))
        meet = np.asarray(script.meet, float)
        box = scene.box_position()
        box[2] = scene.model.geom_size[scene.box_geom][2]                 # resting on the table (z = half size)
        grasp = box + [0.0, 0.0, script.grasp_dz_m]
        s = script
        right = Track()
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

    def _plan_left(self) -> Track:
        """Left waypoints: to a stand-off left of the meeting point, then (planned at t_meet from the cube's
        measured position) in to the grasp, close, hold while the right opens, pull away along -x."""
        s = self.s
        left = Track()
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

    def __call__(self, step: int) -> np.ndarray:
        if not self.left_planned and step >= self.s.t_meet:
            self.left_planned = True
            self.left = self._plan_left()
        return self.arms.action({'left': self.left, 'right': self.right}, step)   # [14] gym-aloha layout

"""Scripted demonstrator for gym-aloha's insertion task (insertion.py), after ACT's scripted InsertionPolicy: the
left arm grasps the socket and the right arm the peg, both from above with the tool tilted `pick_tilt_deg` below
horizontal towards its own side and the fingers closing across world y (the objects' long axes stay along world
x); both lift to stand-offs either side of the meeting point, and the peg is pushed along -x into the socket until
it touches the pin. End-effector waypoints, slerp and IK are waypoints.py's.

Both wrists first turn to the pick orientation in place (a pure wrist pitch, `t_pitch`), then travel: the
transfer-cube demonstrator's single-IK-branch recipe (scripted.py). The insertion line is planned at `t_meet` from
the peg's and the socket's measured positions (where each ended up in its gripper), so the peg's axis meets the
socket's centre however the grasps slipped.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .insertion import EPISODE_STEPS, InsertionScene
from .waypoints import ArmIK, Track, pick_axes


@dataclass(frozen=True)
class InsertionScript:
    meet: tuple = (0.0, 0.5, 0.2)           # socket-peg meeting point (world, m)
    pick_tilt_deg: float = 60.0             # tool axis below horizontal while picking and inserting
    hover_m: float = 0.08                   # pre-grasp height above the grasp
    peg_grasp_dx_m: float = 0.02            # right pad centre from the peg centre along x (its far end)
    socket_grasp_dx_m: float = -0.02        # left pad centre from the socket centre along x (its far end)
    grasp_dz_m: float = 0.0                 # pad centre above the object centre at the grasp
    standoff_m: float = 0.14                # peg centre -> socket centre along x before the push (> 0.12: outside)
    inserted_m: float = 0.09                # ... at the end of the push (< 0.10: the peg reaches the pin)
    # time steps (50 Hz) of the waypoints
    t_pitch: int = 45
    t_hover: int = 100
    t_grasp: int = 140
    t_closed: int = 180
    t_lift: int = 220
    t_meet: int = 250
    plan_steps: tuple = (265, 310)          # (re-)plan the line-up from the measured objects at these steps
    t_aligned: int = 300
    t_inserted: int = 370
    t_end: int = 400
    ik_iterations: int = 30


class InsertionDemonstrator:
    """policy(step) -> 14-D action for an InsertionScene just reset (peg and socket where reset put them)."""

    def __init__(self, scene: InsertionScene, script: InsertionScript = InsertionScript()):
        self.scene, self.s = scene, script
        self.arms = ArmIK(scene, script.ik_iterations)
        self.R = {side: pick_axes(script.pick_tilt_deg, side) for side in ('right', 'left')}
        m = scene.model
        peg, socket = scene.peg_position(), scene.socket_position()
        peg[2] = m.geom_size[scene.peg_geom][2]                               # resting on the table
        socket[2] = -m.geom_pos[m.geom('socket-1').id][2] + m.geom_size[m.geom('socket-1').id][2]
        grasp = {'right': peg + [script.peg_grasp_dx_m, 0.0, script.grasp_dz_m],
                 'left': socket + [script.socket_grasp_dx_m, 0.0, script.grasp_dz_m]}
        self.grasp = grasp
        self.tracks = {side: self._pick(side, grasp[side]) for side in grasp}

    def _pick(self, side: str, grasp: np.ndarray) -> Track:
        """Pitch in place, hover, descend, close, lift to the side's stand-off at the meeting point."""
        s, R = self.s, self.R[side]
        start = self.arms.start[side]
        sign = 1.0 if side == 'right' else -1.0
        tr = Track()
        tr.add(0, *start, 1.0)
        if s.t_pitch > 0:
            tr.add(s.t_pitch, start[0], R, 1.0)
        tr.add(s.t_hover, grasp + [0.0, 0.0, s.hover_m], R, 1.0)
        tr.add(s.t_grasp, grasp, R, 1.0)
        tr.add(s.t_closed, grasp, R, 0.0)
        tr.add(s.t_lift, grasp + [0.0, 0.0, s.hover_m], R, 0.0)
        tr.add(s.t_meet, np.asarray(s.meet) + [sign * (s.standoff_m / 2 + 0.04), 0.0, 0.0], R, 0.0)
        return tr

    def _plan_insertion(self, step: int) -> None:
        """From the measured peg / socket positions at `step`: line the peg up with the socket's axis (y, z) at
        the stand-off, then push it in along -x; the socket holds still. Offsets are commanded tool position -
        object position, so a steady lag of the arm behind its targets cancels."""
        s, sc = self.s, self.scene
        for tr in self.tracks.values():
            tr.cut(step)
        tool = {side: self.tracks[side].at(step)[0] for side in self.tracks}
        peg, socket = sc.peg_position(), sc.socket_position()
        off_r, off_l = tool['right'] - peg, tool['left'] - socket              # tool - object, world (m)
        socket_goal = np.asarray(s.meet) - [s.standoff_m / 2, 0.0, 0.0]
        left = self.tracks['left']
        aligned = max(s.t_aligned, step + 1)
        left.add(aligned, socket_goal + off_l, self.R['left'], 0.0)
        left.add(s.t_end, socket_goal + off_l, self.R['left'], 0.0)
        right = self.tracks['right']
        if step < s.t_aligned:
            right.add(s.t_aligned, socket_goal + [s.standoff_m, 0.0, 0.0] + off_r, self.R['right'], 0.0)
        right.add(s.t_inserted, socket_goal + [s.inserted_m, 0.0, 0.0] + off_r, self.R['right'], 0.0)
        right.add(s.t_end, socket_goal + [s.inserted_m, 0.0, 0.0] + off_r, self.R['right'], 0.0)

    def __call__(self, step: int) -> np.ndarray:
        if step in self.s.plan_steps:
            self._plan_insertion(step)
        return self.arms.action(self.tracks, step)                            # [14] gym-aloha layout


def run_demonstration(seed: int, script: InsertionScript = InsertionScript(), steps: int = EPISODE_STEPS) -> np.ndarray:
    """int8 [steps] gym-aloha rewards of the scripted demonstrator on ``seed`` (physics only, nothing rendered)."""
    scene = InsertionScene()
    scene.reset(seed)
    policy = InsertionDemonstrator(scene, script)
    rewards = np.zeros(steps, np.int8)
    for t in range(steps):
        scene.step(policy(t))
        rewards[t] = scene.reward()
    return rewards

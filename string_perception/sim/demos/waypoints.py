"""End-effector-space scripting for the ALOHA tasks, as the ACT authors scripted theirs: tool waypoints per arm
(time step, pad-centre position, tool axes, gripper 0 closed .. 1 open) interpolated every control step
(`Track`: positions and gripper linearly, axes by slerp) and turned into joint targets by damped least-squares IK
(`ArmIK`: sim/ik.py, warm-started from the previous step's targets). Used by scripted.py (transfer cube) and
insertion_script.py (insertion)."""
from __future__ import annotations

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from ..ik import Tool, ik_step, rotation_error, tool_pose
from .aloha_scene import SIDES, AlohaScene

PAD_CENTRE = np.array([0.135, 0.0, 0.0])    # between the finger pads in gripper_link's frame (sim/cells.py)


def tool_axes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[3,3] tool axes (columns x, y, z = x cross y) from an approach direction x and a finger axis y (made
    orthonormal, x kept)."""
    x = x / np.linalg.norm(x)
    y = y - x * (x @ y)
    y = y / np.linalg.norm(y)
    return np.stack([x, y, np.cross(x, y)], axis=1)


def pick_axes(tilt_deg: float, side: str) -> np.ndarray:
    """[3,3] tool axes of a pick from above by the ``side`` arm: the tool axis tilted ``tilt_deg`` below horizontal
    towards the arm's own side (the right arm, at +x, points along -x), the fingers closing across world y."""
    sign = -1.0 if side == 'right' else 1.0
    a = np.radians(tilt_deg)
    return tool_axes(np.array([sign * np.cos(a), 0.0, -np.sin(a)]), np.array([0.0, sign, 0.0]))


class Track:
    """Piecewise tool trajectory: waypoints (t, position [3], axes [3,3], gripper) interpolated at a time step;
    held at the first waypoint before it and the last after it."""

    def __init__(self):
        self.t, self.p, self.R, self.g = [], [], [], []

    def add(self, t: int, p, R, g: float) -> None:
        self.t.append(t)
        self.p.append(np.asarray(p, float))
        self.R.append(np.asarray(R, float))
        self.g.append(float(g))

    def cut(self, t: int) -> None:
        """Drop the waypoints after `t` and end the track where it is at `t` (to re-plan from there)."""
        p, R, g = self.at(t)
        keep = int(np.searchsorted(self.t, t, side='left'))
        for seq in (self.t, self.p, self.R, self.g):
            del seq[keep:]
        self.add(t, p, R, g)

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


class ArmIK:
    """Joint targets for both arms' tools (pad centres) of a scene just reset, each solve warm-started from the
    side's previous targets (starting at the reset pose)."""

    def __init__(self, scene: AlohaScene, iterations: int = 30):
        self.scene, self.iterations = scene, iterations
        m, d = scene.model, scene.data
        self.tools = {side: Tool(m.body(f'vx300s_{side}/gripper_link').id, PAD_CENTRE, np.eye(3)) for side in SIDES}
        self.scratch = mujoco.MjData(m)
        self.scratch.qpos[:] = d.qpos
        mujoco.mj_kinematics(m, self.scratch)
        self.q = {side: d.qpos[scene.arm_qpos[side]].copy() for side in SIDES}
        self.start = {side: tool_pose(self.scratch, self.tools[side]) for side in SIDES}   # (p [3], R [3,3])

    def solve(self, side: str, p: np.ndarray, R: np.ndarray) -> np.ndarray:
        """[6] arm joint targets putting `side`'s tool at (p, R) (within 0.5 mm / 5 mrad or after `iterations`)."""
        sc, m = self.scene, self.scene.model
        self.scratch.qpos[sc.arm_qpos[side]] = self.q[side]
        for _ in range(self.iterations):
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

    def action(self, tracks: dict, step: int) -> np.ndarray:
        """[14] gym-aloha action at `step` from {'left': Track, 'right': Track}."""
        out = []
        for side in SIDES:
            p, R, g = tracks[side].at(step)
            out.extend([*self.solve(side, p, R), g])
        return np.array(out)

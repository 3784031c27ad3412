"""Inverse kinematics from MuJoCo's Jacobians (`mj_jac`) over a subset of an arm's joints, joint limits respected:
one damped-least-squares joint step towards a tool goal pose (resolved rate, `ik_step`) and a solution found by
iterating it on a scratch MjData (`solve_ik`)."""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class Tool:
    """A frame fixed to a body: `point` [3] and axes `R_body_tool` [3,3] (columns) in the body frame."""
    body: int
    point: np.ndarray
    R_body_tool: np.ndarray


def tool_pose(data: mujoco.MjData, tool: Tool) -> tuple[np.ndarray, np.ndarray]:
    """(position [3], axes [3,3]) of the tool in the world (needs mj_kinematics)."""
    R_b = data.xmat[tool.body].reshape(3, 3)
    return data.xpos[tool.body] + R_b @ tool.point, R_b @ tool.R_body_tool


def rotation_error(R_goal: np.ndarray, R: np.ndarray) -> np.ndarray:
    """World-frame rotation vector [3] that turns R into R_goal."""
    quat, vel = np.zeros(4), np.zeros(3)
    mujoco.mju_mat2Quat(quat, (R_goal @ R.T).ravel())
    mujoco.mju_quat2Vel(vel, quat, 1.0)
    return vel


def ik_step(model: mujoco.MjModel, data: mujoco.MjData, tool: Tool, qpos_adr: np.ndarray, dof_adr: np.ndarray,
            q_range: np.ndarray, p_goal: np.ndarray, R_goal: np.ndarray, max_step: float,
            damping: float = 0.03, rot_weight: float = 0.3) -> np.ndarray:
    """New joint positions [n] at `qpos_adr` moving the tool towards (p_goal, R_goal): dq = J^T (J J^T +
    damping^2 I)^-1 e with e = [position error; rot_weight * rotation error], scaled to |dq|_inf <= max_step;
    joints the step would push past their range [n,2] are held at the limit and the rest solved again.
    Needs mj_kinematics and mj_comPos at the current state."""
    p, R = tool_pose(data, tool)
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    mujoco.mj_jac(model, data, jacp, jacr, p, tool.body)
    J = np.vstack([jacp[:, dof_adr], rot_weight * jacr[:, dof_adr]])              # [6,n]
    err = np.concatenate([p_goal - p, rot_weight * rotation_error(R_goal, R)])    # [6]
    q = data.qpos[qpos_adr].copy()
    free = np.ones(len(q), bool)
    dq = np.zeros(len(q))
    for _ in range(3):
        Jf = J[:, free]                                                            # [6,f]
        dq[:] = 0.0
        dq[free] = Jf.T @ np.linalg.solve(Jf @ Jf.T + damping ** 2 * np.eye(6), err)
        peak = np.abs(dq).max()
        if peak > max_step:
            dq *= max_step / peak
        q_new = q + dq
        over = free & ((q_new < q_range[:, 0]) | (q_new > q_range[:, 1]))
        if not over.any():
            break
        free &= ~over
        if not free.any():
            break
    return np.clip(q + dq, q_range[:, 0], q_range[:, 1])


def solve_ik(model: mujoco.MjModel, scratch: mujoco.MjData, tool: Tool, qpos_adr: np.ndarray, dof_adr: np.ndarray,
             q_range: np.ndarray, p_goal: np.ndarray, R_goal: np.ndarray, q_seed: np.ndarray, iterations: int = 150,
             tolerance_m: float = 0.002, tolerance_rad: float = 0.02) -> np.ndarray | None:
    """Joint positions [n] putting the tool at (p_goal, R_goal), iterating ik_step from q_seed [n] on `scratch`
    (an MjData holding the cell's current state elsewhere), or None when it does not converge."""
    scratch.qpos[qpos_adr] = q_seed
    for _ in range(iterations):
        mujoco.mj_kinematics(model, scratch)
        p, R = tool_pose(scratch, tool)
        if np.linalg.norm(p_goal - p) < tolerance_m and np.linalg.norm(rotation_error(R_goal, R)) < tolerance_rad:
            return scratch.qpos[qpos_adr].copy()
        mujoco.mj_comPos(model, scratch)
        scratch.qpos[qpos_adr] = ik_step(model, scratch, tool, qpos_adr, dof_adr, q_range, p_goal, R_goal, 0.2,
                                         damping=0.01)
    return None


__all__ = ['Tool', 'ik_step', 'rotation_error', 'solve_ik', 'tool_pose']

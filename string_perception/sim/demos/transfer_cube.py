"""gym-aloha's transfer-cube task without gym-aloha or dm_control: the unmodified
``bimanual_viperx_transfer_cube.xml`` (both ViperX arms, the tabletop mesh, the 4 cm red cube, MuJoCo's default
2 ms step), its reset (START_ARM_POSE, cube at ``sample_box_pose(seed)``: x U(0, 0.2), y U(0.4, 0.6), z 0.05 from
``np.random.RandomState(seed)``, so seed s gives gym-aloha's cube), its 50 Hz control (10 physics steps per action),
its 14-D qpos / action layout (per arm 6 joints + the gripper normalised 0 = closed, 1 = open) and its reward:

    1 right finger touches the cube, 2 ... and the cube is off the table, 3 left finger touches the cube,
    4 left finger touches and the cube is off the table (the transfer succeeded).

Touches are gym-aloha's geom pairs (``red_box`` with ``vx300s_left/10_left_gripper_finger`` /
``vx300s_right/10_right_gripper_finger`` / ``table``), looked up in either order.
"""
from __future__ import annotations

import mujoco
import numpy as np

from ..assets import aloha_assets_dir

XML = 'bimanual_viperx_transfer_cube.xml'
CONTROL_DT = 0.02                      # gym_aloha.constants.DT: 50 Hz
EPISODE_STEPS = 400                    # gym-aloha's transfer-cube episode length (8 s)
MAX_REWARD = 4
START_ARM_POSE = np.array([0, -0.96, 1.16, 0, -0.3, 0, 0.02239, -0.02239] * 2)        # [16] both arms' qpos
BOX_RANGE = np.array([[0.0, 0.2], [0.4, 0.6], [0.05, 0.05]])                         # x, y, z (gym_aloha.utils)
GRIPPER_OPEN, GRIPPER_CLOSE = 0.05800, 0.01844                                       # puppet finger positions (m)
SIDES = ('left', 'right')
ARM_JOINTS = ('waist', 'shoulder', 'elbow', 'forearm_roll', 'wrist_angle', 'wrist_rotate')


def sample_box_pose(seed: int) -> np.ndarray:
    """[7] cube pose (xyz, quat wxyz) of gym_aloha.utils.sample_box_pose(seed)."""
    rng = np.random.RandomState(seed)
    return np.concatenate([rng.uniform(BOX_RANGE[:, 0], BOX_RANGE[:, 1]), [1.0, 0.0, 0.0, 0.0]])


def normalize_gripper(finger_q):
    """Finger slide position (m) -> 0 (closed) .. 1 (open), gym-aloha's normalize_puppet_gripper_position."""
    return (finger_q - GRIPPER_CLOSE) / (GRIPPER_OPEN - GRIPPER_CLOSE)


def unnormalize_gripper(g):
    return GRIPPER_CLOSE + g * (GRIPPER_OPEN - GRIPPER_CLOSE)


class TransferCubeScene:
    """The compiled task: model, data, indices of the arms, fingers and cube, reset / step / reward / qpos."""

    def __init__(self):
        self.model = mujoco.MjModel.from_xml_path(str(aloha_assets_dir() / XML))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.substeps = int(round(CONTROL_DT / m.opt.timestep))                       # 10
        self.arm_qpos = {s: np.array([m.jnt_qposadr[m.joint(f'vx300s_{s}/{j}').id] for j in ARM_JOINTS])
                         for s in SIDES}
        self.arm_dof = {s: np.array([m.jnt_dofadr[m.joint(f'vx300s_{s}/{j}').id] for j in ARM_JOINTS])
                        for s in SIDES}
        self.arm_range = {s: np.array([m.jnt_range[m.joint(f'vx300s_{s}/{j}').id] for j in ARM_JOINTS])
                          for s in SIDES}
        self.finger_qpos = {s: m.jnt_qposadr[m.joint(f'vx300s_{s}/left_finger').id] for s in SIDES}
        self.box_qpos = m.jnt_qposadr[m.joint('red_box_joint').id]
        self.box_body = m.body('box').id
        geom = lambda name: m.geom(name).id                                            # noqa: E731
        self.box_geom = geom('red_box')
        self._touch = {'left': geom('vx300s_left/10_left_gripper_finger'),
                       'right': geom('vx300s_right/10_right_gripper_finger'), 'table': geom('table')}

    def reset(self, seed: int) -> np.ndarray:
        """gym-aloha's reset for `seed`; returns the cube pose [7]."""
        box = sample_box_pose(seed)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:16] = START_ARM_POSE
        self.data.ctrl[:] = START_ARM_POSE
        self.data.qpos[self.box_qpos:self.box_qpos + 7] = box
        mujoco.mj_forward(self.model, self.data)
        return box

    def step(self, action: np.ndarray) -> None:
        """Apply a 14-D action (gym-aloha layout) for one control period; derived quantities (contacts, poses)
        are then recomputed for the new state, as dm_control's step leaves them."""
        self.data.ctrl[:] = action_to_ctrl(action)
        for _ in range(self.substeps):
            mujoco.mj_step(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)

    def qpos14(self) -> np.ndarray:
        """[14] float64: per arm 6 joint positions + normalised gripper (gym-aloha's get_qpos)."""
        q = self.data.qpos
        return np.concatenate([np.r_[q[self.arm_qpos[s]], normalize_gripper(q[self.finger_qpos[s]])]
                               for s in SIDES])

    def box_position(self) -> np.ndarray:
        return self.data.xpos[self.box_body].copy()

    def touches(self) -> dict:
        """Which of gym-aloha's contact pairs with the cube exist now: {'left', 'right', 'table'} -> bool."""
        other = set()
        for c in self.data.contact[:self.data.ncon]:
            if c.geom1 == self.box_geom:
                other.add(int(c.geom2))
            elif c.geom2 == self.box_geom:
                other.add(int(c.geom1))
        return {k: g in other for k, g in self._touch.items()}

    def reward(self) -> int:
        """gym-aloha's TransferCubeTask.get_reward (0..4)."""
        t = self.touches()
        r = 0
        if t['right']:
            r = 2 if not t['table'] else 1
        if t['left']:
            r = 4 if not t['table'] else 3
        return r


def action_to_ctrl(action: np.ndarray) -> np.ndarray:
    """14-D action [L arm 6, L grip, R arm 6, R grip] -> the 16 position-actuator targets (fingers mirrored)."""
    a = np.asarray(action, float)
    out = []
    for k in (0, 7):
        g = unnormalize_gripper(a[k + 6])
        out.extend([*a[k:k + 6], g, -g])
    return np.array(out)

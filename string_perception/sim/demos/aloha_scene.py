"""What gym-aloha's bimanual ViperX tasks (transfer-cube, insertion) share, without gym-aloha or dm_control: the
arm constants (START_ARM_POSE, the puppet finger range), the 14-D qpos / action layout (per arm 6 joints + the
gripper normalised 0 = closed, 1 = open), 50 Hz control (10 MuJoCo steps of 2 ms per action) and the contact
look-up the rewards are built from. A task is a subclass (transfer_cube.TransferCubeScene,
insertion.InsertionScene) that loads its unmodified gym-aloha XML, places its objects at reset and scores them.

Contacts: gym-aloha tests ordered geom-name pairs (object, other); MuJoCo reports a box-mesh contact with the box
first and a box-box contact with the lower geom id first, and the task objects come after the arms and the table
in both XMLs, so the unordered look-up here gives the same answers.
"""
from __future__ import annotations

import mujoco
import numpy as np

from ..assets import aloha_assets_dir

CONTROL_DT = 0.02                      # gym_aloha.constants.DT: 50 Hz
START_ARM_POSE = np.array([0, -0.96, 1.16, 0, -0.3, 0, 0.02239, -0.02239] * 2)        # [16] both arms' qpos
GRIPPER_OPEN, GRIPPER_CLOSE = 0.05800, 0.01844                                       # puppet finger positions (m)
SIDES = ('left', 'right')
ARM_JOINTS = ('waist', 'shoulder', 'elbow', 'forearm_roll', 'wrist_angle', 'wrist_rotate')
FINGER_GEOMS = {s: f'vx300s_{s}/10_{s}_gripper_finger' for s in SIDES}               # the fingers gym-aloha checks


def normalize_gripper(finger_q):
    """Finger slide position (m) -> 0 (closed) .. 1 (open), gym-aloha's normalize_puppet_gripper_position."""
    return (finger_q - GRIPPER_CLOSE) / (GRIPPER_OPEN - GRIPPER_CLOSE)


def unnormalize_gripper(g):
    return GRIPPER_CLOSE + g * (GRIPPER_OPEN - GRIPPER_CLOSE)


def action_to_ctrl(action: np.ndarray) -> np.ndarray:
    """14-D action [L arm 6, L grip, R arm 6, R grip] -> the 16 position-actuator targets (fingers mirrored)."""
    a = np.asarray(action, float)
    out = []
    for k in (0, 7):
        g = unnormalize_gripper(a[k + 6])
        out.extend([*a[k:k + 6], g, -g])
    return np.array(out)


class AlohaScene:
    """A compiled gym-aloha XML: model, data, the arms' joint indices, 50 Hz step, qpos14 and contacts."""

    def __init__(self, xml: str):
        self.model = mujoco.MjModel.from_xml_path(str(aloha_assets_dir() / xml))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.substeps = int(round(CONTROL_DT / m.opt.timestep))                       # 10
        joint = lambda s, j: m.joint(f'vx300s_{s}/{j}').id                              # noqa: E731
        self.arm_qpos = {s: np.array([m.jnt_qposadr[joint(s, j)] for j in ARM_JOINTS]) for s in SIDES}
        self.arm_dof = {s: np.array([m.jnt_dofadr[joint(s, j)] for j in ARM_JOINTS]) for s in SIDES}
        self.arm_range = {s: np.array([m.jnt_range[joint(s, j)] for j in ARM_JOINTS]) for s in SIDES}
        self.finger_qpos = {s: m.jnt_qposadr[joint(s, 'left_finger')] for s in SIDES}

    def reset_arms(self) -> None:
        """Zero state, both arms at START_ARM_POSE (qpos and actuator targets); the subclass then places objects
        and calls mj_forward."""
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:16] = START_ARM_POSE
        self.data.ctrl[:] = START_ARM_POSE

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

    def contacts_of(self, geoms) -> set[int]:
        """Ids of the geoms in contact now with any of the geom ids `geoms` (either side of the pair)."""
        geoms, other = set(int(g) for g in geoms), set()
        for c in self.data.contact[:self.data.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            if g1 in geoms:
                other.add(g2)
            if g2 in geoms:
                other.add(g1)
        return other

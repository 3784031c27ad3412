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

from .aloha_scene import FINGER_GEOMS, AlohaScene

XML = 'bimanual_viperx_transfer_cube.xml'
EPISODE_STEPS = 400                    # ACT's transfer-cube episode length (8 s)
MAX_REWARD = 4
BOX_RANGE = np.array([[0.0, 0.2], [0.4, 0.6], [0.05, 0.05]])                         # x, y, z (gym_aloha.utils)


def sample_box_pose(seed: int) -> np.ndarray:
    """[7] cube pose (xyz, quat wxyz) of gym_aloha.utils.sample_box_pose(seed)."""
    rng = np.random.RandomState(seed)
    return np.concatenate([rng.uniform(BOX_RANGE[:, 0], BOX_RANGE[:, 1]), [1.0, 0.0, 0.0, 0.0]])


class TransferCubeScene(AlohaScene):
    """The compiled task: model, data, indices of the arms, fingers and cube, reset / step / reward / qpos."""

    def __init__(self):
        super().__init__(XML)
        m = self.model
        self.box_qpos = m.jnt_qposadr[m.joint('red_box_joint').id]
        self.box_body = m.body('box').id
        geom = lambda name: m.geom(name).id                                            # noqa: E731
        self.box_geom = geom('red_box')
        self._touch = {'left': geom(FINGER_GEOMS['left']), 'right': geom(FINGER_GEOMS['right']),
                       'table': geom('table')}

    def reset(self, seed: int) -> np.ndarray:
        """gym-aloha's reset for `seed`; returns the cube pose [7]."""
        box = sample_box_pose(seed)
        self.reset_arms()
        self.data.qpos[self.box_qpos:self.box_qpos + 7] = box
        mujoco.mj_forward(self.model, self.data)
        return box

    def box_position(self) -> np.ndarray:
        return self.data.xpos[self.box_body].copy()

    def object_positions(self) -> np.ndarray:
        """[3] the task objects' centres (tasks.AlohaTask.object_xyz): the cube."""
        return self.box_position()

    def touches(self) -> dict:
        """Which of gym-aloha's contact pairs with the cube exist now: {'left', 'right', 'table'} -> bool."""
        other = self.contacts_of([self.box_geom])
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


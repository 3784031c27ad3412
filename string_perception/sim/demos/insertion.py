"""gym-aloha's insertion task without gym-aloha or dm_control: the unmodified ``bimanual_viperx_insertion.xml``
(both ViperX arms, the tabletop, a red 12 x 2 x 2 cm peg and a blue socket: four 12 cm plates around a square
hole with a red 8 cm pin inside), its reset (START_ARM_POSE; peg and socket at ``sample_insertion_pose(seed)``,
both drawn from one ``np.random.RandomState(seed)``, the peg first: peg x U(0.1, 0.2), y U(0.4, 0.6), socket
x U(-0.2, -0.1), y U(0.4, 0.6), both z 0.05, identity orientation), 50 Hz control and the 14-D layout
(aloha_scene.py), and its reward (InsertionTask.get_reward):

    1 the left finger touches the socket and the right finger touches the peg, 2 ... and neither peg nor socket
    touches the table, 3 the peg touches the socket and neither touches the table, 4 the peg touches the pin
    (inserted; regardless of the other contacts).

The episode is ACT's 400 steps (gym-aloha registers 300).
"""
from __future__ import annotations

import mujoco
import numpy as np

from .aloha_scene import FINGER_GEOMS, AlohaScene

XML = 'bimanual_viperx_insertion.xml'
EPISODE_STEPS = 400
MAX_REWARD = 4
PEG_RANGE = np.array([[0.1, 0.2], [0.4, 0.6], [0.05, 0.05]])                         # x, y, z (gym_aloha.utils)
SOCKET_RANGE = np.array([[-0.2, -0.1], [0.4, 0.6], [0.05, 0.05]])
SOCKET_GEOMS = ('socket-1', 'socket-2', 'socket-3', 'socket-4')
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def sample_insertion_pose(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """([7], [7]) peg and socket poses (xyz, quat wxyz) of gym_aloha.utils.sample_insertion_pose(seed)."""
    rng = np.random.RandomState(seed)
    peg = rng.uniform(PEG_RANGE[:, 0], PEG_RANGE[:, 1])
    socket = rng.uniform(SOCKET_RANGE[:, 0], SOCKET_RANGE[:, 1])
    return np.concatenate([peg, IDENTITY]), np.concatenate([socket, IDENTITY])


class InsertionScene(AlohaScene):
    """The compiled task: model, data, arm / object indices, reset / step / reward / qpos, object positions."""

    def __init__(self):
        super().__init__(XML)
        m = self.model
        self.peg_qpos = m.jnt_qposadr[m.joint('red_peg_joint').id]
        self.socket_qpos = m.jnt_qposadr[m.joint('blue_socket_joint').id]
        self.peg_body, self.socket_body = m.body('peg').id, m.body('socket').id
        self.peg_geom, self.pin_geom = m.geom('red_peg').id, m.geom('pin').id
        self.socket_geoms = {m.geom(n).id for n in SOCKET_GEOMS}
        self.finger_geom = {s: m.geom(FINGER_GEOMS[s]).id for s in FINGER_GEOMS}
        self.table_geom = m.geom('table').id

    def reset(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """gym-aloha's reset for `seed`; returns the peg and socket poses ([7], [7])."""
        peg, socket = sample_insertion_pose(seed)
        self.reset_arms()
        self.data.qpos[self.peg_qpos:self.peg_qpos + 7] = peg
        self.data.qpos[self.socket_qpos:self.socket_qpos + 7] = socket
        mujoco.mj_forward(self.model, self.data)
        return peg, socket

    def peg_position(self) -> np.ndarray:
        return self.data.xpos[self.peg_body].copy()

    def socket_position(self) -> np.ndarray:
        return self.data.xpos[self.socket_body].copy()

    def object_positions(self) -> np.ndarray:
        """[6] the task objects' centres (tasks.AlohaTask.object_xyz): the peg, then the socket."""
        return np.concatenate([self.peg_position(), self.socket_position()])

    def touches(self) -> dict:
        """gym-aloha's contact tests now: {'left' (finger-socket), 'right' (finger-peg), 'peg_table',
        'socket_table', 'peg_socket' (a socket plate), 'pin' (peg-pin)} -> bool."""
        peg = self.contacts_of([self.peg_geom])
        socket = self.contacts_of(self.socket_geoms)
        return {'left': self.finger_geom['left'] in socket, 'right': self.finger_geom['right'] in peg,
                'peg_table': self.table_geom in peg, 'socket_table': self.table_geom in socket,
                'peg_socket': bool(peg & self.socket_geoms), 'pin': self.pin_geom in peg}

    def reward(self) -> int:
        """gym-aloha's InsertionTask.get_reward (0..4)."""
        t = self.touches()
        aloft = not t['peg_table'] and not t['socket_table']
        r = 0
        if t['left'] and t['right']:
            r = 2 if aloft else 1
        if t['peg_socket'] and aloft:
            r = 3
        if t['pin']:
            r = 4
        return r

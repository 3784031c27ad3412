"""Simulated workcells in MuJoCo: the ALOHA bimanual cell and a KUKA iiwa cell as a scene source beside the
procedural generator (same Frame contract, class list SIM_CLASS_NAMES = the five primitives + 'object').

    from string_perception.sim import SimConfig, generate_sim_frame
    frame = generate_sim_frame(seed=0, config=SimConfig(cell='kuka', height=128, width=128))

Needs `requirements/sim.txt` (mujoco, pybullet for pybullet_data, gym-aloha installed with --no-deps) and, without
a GPU, Debian's libosmesa6 with MUJOCO_GL=osmesa (set on import when unset).
"""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

from .classes import OBJECT, OBJECT_CLASS, SIM_CLASS_NAMES  # noqa: E402
from .config import CELL_NAMES, SimConfig  # noqa: E402
from .generator import SimFrame, SimTruth, generate_sim_frame, render_sim_scene  # noqa: E402

__all__ = ['CELL_NAMES', 'OBJECT', 'OBJECT_CLASS', 'SIM_CLASS_NAMES', 'SimConfig', 'SimFrame', 'SimTruth',
           'generate_sim_frame', 'render_sim_scene']

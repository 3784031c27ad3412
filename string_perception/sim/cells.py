"""The two workcells as MuJoCo specs: arms, supports, drop region and the cell's real camera positions.

ALOHA: gym-aloha's ``bimanual_viperx_transfer_cube.xml`` (both ViperX 300s arms, the tabletop mesh, top surface at
z = 0) without its red cube and keyframe, plus a floor 0.75 m below (the table height). Cameras: the XML's ``top``,
``angle``, ``left_pillar``, ``right_pillar``, ``front_close`` (all aimed at the table) and the two wrist cameras
(gripper-frame poses of the XML).
KUKA: pybullet_data's ``kuka_iiwa/model.urdf`` imported by MuJoCo's URDF compiler (collision meshes rendered), on
pybullet_data's table (``table/table.urdf`` dimensions: 1.5 x 1 m top at 0.625 m) with ``tray/traybox.urdf``'s tray
(0.6 m base, four walls tilted 33 deg) in front of it. Cameras: over-the-shoulder, two sides, front, overhead.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import mujoco
import numpy as np

from .assets import aloha_assets_dir, pybullet_data_dir


@dataclass(frozen=True)
class CameraRig:
    """A camera position of the cell: `eye` and `target` in the world, or in the frame of `body` (wrist)."""
    name: str
    eye: tuple
    target: tuple
    body: str | None = None


@dataclass(frozen=True)
class Effector:
    """An arm's tool for scripted picks (sim/pick.py): a point and two axes on `body`, the joints the IK moves."""
    name: str
    body: str                       # the body the tool is fixed to (the carried object is attached to it)
    point: tuple                    # tool point in the body frame (between the finger pads / the flange face)
    approach_axis: tuple            # body-frame unit axis pointing out of the tool (down during a pick)
    closing_axis: tuple             # body-frame unit axis the fingers close along (suction: any axis _|_ approach)
    joints: tuple                   # arm joint names the IK moves (a subset of Cell.arm_joints)
    base: str                       # body at the arm's base (reach is measured from it, horizontally)
    reach_m: float                  # objects and places farther than this from the base are not tried
    fingers: tuple = ()             # (joint name, sign): slide joints, q = sign * opening per finger
    finger_open: float = 0.0        # finger opening while approaching
    finger_touch: float = 0.0       # finger opening at which the pads touch (pad gap = 2 (q - finger_touch))
    max_grip_m: float = 0.0         # widest object the fingers take (0: suction, any width)


@dataclass(frozen=True)
class ClutterRegion:
    """A flat rectangle of the cell where unlabelled clutter may lie (sim/distractors.py): axis-aligned, centred at
    `center` (x, y) with `half` extents, surface at height `z`; regions are drawn in proportion to `weight`."""
    center: tuple
    half: tuple
    z: float
    weight: float = 1.0


@dataclass
class Cell:
    name: str
    spec: mujoco.MjSpec             # fresh per frame (objects and the camera are added to it)
    arm_roots: tuple                # body names whose subtrees are robot links (never labelled)
    arm_joints: tuple               # hinge / slide joint names of the arms
    arm_home: np.ndarray            # [J] a collision-free configuration
    arm_spread: np.ndarray          # [J] random configurations: home + U(-1, 1) * spread, clipped to the range
    drop_center: np.ndarray         # [2] xy centre of the region objects are dropped over
    drop_half: np.ndarray           # [2] its half extents
    support_z: float                # height of the support surface under the drop region
    rigs: tuple                     # CameraRig
    effectors: tuple = ()           # Effector per arm
    clutter: tuple = ()             # ClutterRegion: where distractors lie (away from the arms' bases)


def _floor(spec: mujoco.MjSpec, z: float, rgba) -> None:
    spec.worldbody.add_geom(name='floor', type=mujoco.mjtGeom.mjGEOM_PLANE, size=[4, 4, 0.05], pos=[0, 0, z],
                            rgba=rgba)


def aloha_cell() -> Cell:
    spec = mujoco.MjSpec.from_file(str(aloha_assets_dir() / 'bimanual_viperx_transfer_cube.xml'))
    spec.delete(spec.body('box'))
    for key in list(spec.keys):
        spec.delete(key)
    _floor(spec, -0.75, [0.45, 0.42, 0.4, 1])
    # the tabletop mesh is a 1.219 x 0.762 x 0.03 m slab: it stays the visual, a box of the same extent collides
    # (mesh-primitive contacts left capsules and cones 3-5 mm deep in the mesh)
    table = spec.geom('table')
    table.contype, table.conaffinity = 0, 0
    spec.body('table').add_geom(name='table_box', type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.6096, 0.381, 0.015],
                                pos=[0, 0, -0.015], group=3, rgba=[0.2, 0.2, 0.2, 1])
    sides = ('left', 'right')
    joints = tuple(f'vx300s_{s}/{j}' for s in sides for j in ('waist', 'shoulder', 'elbow', 'forearm_roll',
                                                              'wrist_angle', 'wrist_rotate', 'left_finger',
                                                              'right_finger'))
    home = np.array([0, -0.96, 1.16, 0, -0.3, 0, 0.024, -0.024] * 2)
    spread = np.array([1.2, 0.8, 0.8, 1.5, 1.0, 1.5, 0.018, 0.018] * 2)
    table = (0.0, 0.6, 0.0)
    rigs = (CameraRig('top', (0.0, 0.6, 0.8), table), CameraRig('angle', (0.0, 0.0, 0.6), table),
            CameraRig('left_pillar', (-0.5, 0.2, 0.6), table), CameraRig('right_pillar', (0.5, 0.2, 0.6), table),
            CameraRig('front_close', (0.0, 0.2, 0.4), table),
            CameraRig('left_wrist', (-0.1, 0.0, 0.16), (0.15, 0.0, 0.01), 'vx300s_left/gripper_link'),
            CameraRig('right_wrist', (-0.1, 0.0, 0.16), (0.15, 0.0, 0.01), 'vx300s_right/gripper_link'))
    # ViperX gripper_link: +x points out of the gripper, the fingers slide along y; pads span x 0.12-0.154 m and
    # touch at finger q = 0.0224 (measured from the finger meshes), so q = 0.057 leaves a 6.9 cm gap
    effectors = tuple(Effector(s, f'vx300s_{s}/gripper_link', (0.135, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0),
                               tuple(f'vx300s_{s}/{j}' for j in ('waist', 'shoulder', 'elbow', 'forearm_roll',
                                                                 'wrist_angle', 'wrist_rotate')),
                               f'vx300s_{s}', 0.6, ((f'vx300s_{s}/left_finger', 1.0),
                                                    (f'vx300s_{s}/right_finger', -1.0)), 0.057, 0.0224, 0.06)
                      for s in sides)
    # the table top (x +-0.61, y 0.22-0.98) between the arm bases at x = +-0.469
    clutter = (ClutterRegion((0.0, 0.6), (0.36, 0.35), 0.0),)
    return Cell('aloha', spec, ('vx300s_left', 'vx300s_right'), joints, home, spread,
                np.array([0.0, 0.6]), np.array([0.3, 0.25]), 0.0, rigs, effectors, clutter)


_TABLE_TOP = 0.625   # table.urdf: 0.05 m thick top centred at 0.6 m
_TRAY_XY = (0.15, 0.0)


def _iiwa_spec() -> mujoco.MjSpec:
    urdf = pybullet_data_dir() / 'kuka_iiwa' / 'model.urdf'
    compiler = f'<mujoco><compiler meshdir="{urdf.parent}" discardvisual="true" fusestatic="false"/></mujoco>'
    text = re.sub(r'(<robot[^>]*>)', lambda m: m.group(1) + compiler, urdf.read_text(), count=1)
    return mujoco.MjSpec.from_string(text)


def kuka_cell() -> Cell:
    spec = mujoco.MjSpec()
    spec.compiler.inertiagrouprange = [0, 5]
    spec.visual.headlight.ambient = [0.3, 0.3, 0.3]
    spec.visual.headlight.diffuse = [0.25, 0.25, 0.25]
    wb = spec.worldbody
    for direction, level in (([0.5, 0.5, -1], 0.3), ([-0.5, 0.2, -1], 0.2)):
        wb.add_light(type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, dir=direction, diffuse=[level] * 3,
                     specular=[0.1] * 3, castshadow=False)
    _floor(spec, 0.0, [0.5, 0.5, 0.52, 1])
    box = mujoco.mjtGeom.mjGEOM_BOX
    wb.add_geom(name='table', type=box, size=[0.75, 0.5, 0.025], pos=[0, 0, _TABLE_TOP - 0.025],
                rgba=[0.72, 0.66, 0.55, 1])
    for sx in (-1, 1):
        for sy in (-1, 1):
            wb.add_geom(name=f'table_leg_{sx}{sy}', type=box, size=[0.05, 0.05, 0.29],
                        pos=[0.65 * sx, 0.4 * sy, 0.29], rgba=[0.3, 0.3, 0.3, 1])
    tray = wb.add_body(name='tray', pos=[_TRAY_XY[0], _TRAY_XY[1], _TABLE_TOP])
    grey = [0.65, 0.66, 0.7, 1]
    tray.add_geom(name='tray_base', type=box, size=[0.3, 0.3, 0.01], pos=[0, 0, 0.005], rgba=grey)
    tilt = 0.575469961                       # traybox.urdf's wall angle
    for name, pos, euler, size in (('tray_wall_px', [0.25, 0, 0.059], [0, tilt, 0], [0.01, 0.3, 0.075]),
                                   ('tray_wall_nx', [-0.25, 0, 0.059], [0, -tilt, 0], [0.01, 0.3, 0.075]),
                                   ('tray_wall_ny', [0, -0.25, 0.059], [tilt, 0, 0], [0.3, 0.01, 0.075]),
                                   ('tray_wall_py', [0, 0.25, 0.059], [-tilt, 0, 0], [0.3, 0.01, 0.075])):
        tray.add_geom(name=name, type=box, size=size, pos=pos, euler=euler, rgba=grey)
    frame = wb.add_frame(pos=[-0.55, 0.0, _TABLE_TOP])
    spec.attach(_iiwa_spec(), prefix='iiwa/', frame=frame)
    orange, dark = [0.95, 0.45, 0.1, 1], [0.25, 0.25, 0.27, 1]
    for link in range(8):
        for g in spec.body(f'iiwa/lbr_iiwa_link_{link}').geoms:
            g.rgba = orange if link in (2, 4, 6) else dark
            if link == 0:
                g.contype, g.conaffinity = 0, 0          # the base sits on the table
    joints = tuple(f'iiwa/lbr_iiwa_joint_{i}' for i in range(1, 8))
    home = np.array([0.0, 0.5, 0.0, -1.3, 0.0, 1.0, 0.0])
    spread = np.array([1.3, 0.6, 1.2, 0.6, 1.5, 0.8, 1.5])
    tray_c = (_TRAY_XY[0], _TRAY_XY[1], _TABLE_TOP)
    rigs = (CameraRig('over_shoulder', (-0.8, 0.45, 1.55), tray_c), CameraRig('left', (0.15, 0.85, 1.3), tray_c),
            CameraRig('right', (0.15, -0.85, 1.3), tray_c), CameraRig('front', (0.95, 0.0, 1.3), tray_c),
            CameraRig('overhead', (0.15, 0.0, 1.55), tray_c))
    # pybullet_data's iiwa has no gripper: link 7's flange face (z = 0.045 m in its frame) takes objects by
    # "suction" (attached at the flange)
    effectors = (Effector('iiwa', 'iiwa/lbr_iiwa_link_7', (0.0, 0.0, 0.045), (0.0, 0.0, 1.0), (0.0, 1.0, 0.0),
                          joints, 'iiwa/lbr_iiwa_link_0', 0.85),)
    # the tray floor inside the walls' feet (+-0.2 m), the table beside the tray (its walls reach +-0.3 m) and in
    # front of it, clear of the iiwa's base (x = -0.55)
    tx, ty = _TRAY_XY
    clutter = (ClutterRegion((tx, ty), (0.19, 0.19), _TABLE_TOP + 0.015, 0.55),
               ClutterRegion((0.17, 0.40), (0.55, 0.08), _TABLE_TOP, 0.15),
               ClutterRegion((0.17, -0.40), (0.55, 0.08), _TABLE_TOP, 0.15),
               ClutterRegion((0.60, 0.0), (0.13, 0.31), _TABLE_TOP, 0.15))
    return Cell('kuka', spec, ('iiwa/lbr_iiwa_link_0',), joints, home, spread, np.array(_TRAY_XY),
                np.array([0.2, 0.2]), _TABLE_TOP + 0.015, rigs, effectors, clutter)


CELLS = {'aloha': aloha_cell, 'kuka': kuka_cell}


def build_cell(name: str) -> Cell:
    return CELLS[name]()

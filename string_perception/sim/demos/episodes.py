"""Recorded transfer-cube episodes (transfer_cube.py): per control step the cameras' colour and depth, the 14-D
qpos, the 14-D action and gym-aloha's reward, one compressed npz per episode.

Arrays of an episode with T steps (observation t is taken before action t is applied, as ACT records):

    images/<cam>   uint8   [T,H,W,3]   colour, row 0 = image top
    depth/<cam>    uint16  [T,H,W]     z-depth in mm, 0 = no return (beyond 65.535 m)
    K/<cam>        float64 [3,3]       pinhole intrinsics (square pixels, centred principal point)
    T_wc/<cam>     float32 [T,4,4]     optical frame (x right, y down, z forward) in the world
    qpos           float32 [T,14]      per arm 6 joints + gripper (0 closed .. 1 open), left then right
    action         float32 [T,14]      the joint targets in the same layout
    reward         int8    [T]         0..4 after the step (4: the left gripper holds the cube off the table)
    box_pose       float64 [7]         the cube's initial pose (xyz, wxyz)
    seed, success  int64, bool         success = reward 4 at the last step
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..render import SceneRenderer
from .scripted import TransferCubeDemonstrator, TransferScript
from .aloha_scene import START_ARM_POSE, normalize_gripper
from .transfer_cube import EPISODE_STEPS, MAX_REWARD, TransferCubeScene

_MJ_TO_OPTICAL = np.diag([1.0, -1.0, -1.0])   # MuJoCo cameras look along -z with y up


@dataclass(frozen=True)
class EpisodeConfig:
    cameras: tuple = ('top',)             # camera names of the XML (top, angle, left_pillar, right_pillar,
    height: int = 120                     # front_close, left_wrist, right_wrist)
    width: int = 160
    steps: int = EPISODE_STEPS
    shadow_size: int = 1024               # the XML asks 4096 and 4x multisampling: 0.10 s a 160x120 frame through
    msaa_samples: int = 0                 # OSMesa; 1024 / none: 0.023 s, no visible change at this size
    policy: str = 'scripted'              # 'scripted' (TransferCubeDemonstrator) or 'hold' (START_ARM_POSE kept)
    script: TransferScript = TransferScript()


@dataclass
class Episode:
    seed: int
    box_pose: np.ndarray
    qpos: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    images: dict = field(default_factory=dict)
    depth: dict = field(default_factory=dict)
    K: dict = field(default_factory=dict)
    T_wc: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return bool(len(self.reward) and self.reward[-1] == MAX_REWARD)


def _hold_action() -> np.ndarray:
    """[14] START_ARM_POSE as an action (grippers at their start opening)."""
    q = START_ARM_POSE
    return np.r_[q[:6], normalize_gripper(q[6]), q[8:14], normalize_gripper(q[14])]


def _intrinsics(fovy_deg: float, height: int, width: int) -> np.ndarray:
    f = 0.5 * height / math.tan(0.5 * math.radians(fovy_deg))
    return np.array([[f, 0.0, 0.5 * (width - 1)], [0.0, f, 0.5 * (height - 1)], [0.0, 0.0, 1.0]])


def record_episode(seed: int, config: EpisodeConfig = EpisodeConfig()) -> Episode:
    """Reset the task for `seed`, run the policy for config.steps control steps, record every step."""
    scene = TransferCubeScene()
    m, d = scene.model, scene.data
    box = scene.reset(seed)
    policy = TransferCubeDemonstrator(scene, config.script) if config.policy == 'scripted' else None
    if config.policy not in ('scripted', 'hold'):
        raise ValueError(f'policy {config.policy!r}: expected scripted or hold')
    m.vis.quality.shadowsize, m.vis.quality.offsamples = config.shadow_size, config.msaa_samples
    cams = {name: m.camera(name).id for name in config.cameras}
    key = f'aloha_transfer_{config.shadow_size}_{config.msaa_samples}'
    renderers = {name: SceneRenderer(m, cid, cache_key=key) for name, cid in cams.items()}
    T, H, W = config.steps, config.height, config.width
    ep = Episode(seed, box, np.zeros((T, 14), np.float32), np.zeros((T, 14), np.float32), np.zeros(T, np.int8))
    for name, cid in cams.items():
        ep.images[name] = np.zeros((T, H, W, 3), np.uint8)
        ep.depth[name] = np.zeros((T, H, W), np.uint16)
        ep.K[name] = _intrinsics(float(m.cam_fovy[cid]), H, W)
        ep.T_wc[name] = np.tile(np.eye(4, dtype=np.float32), (T, 1, 1))
    hold = _hold_action()
    for t in range(T):
        ep.qpos[t] = scene.qpos14()
        for name, cid in cams.items():
            rgb, z = renderers[name].color_depth(d, H, W)
            ep.images[name][t] = rgb
            ep.depth[name][t] = np.where(np.isfinite(z), np.clip(np.round(z * 1000.0), 0, 65535), 0)
            ep.T_wc[name][t, :3, :3] = d.cam_xmat[cid].reshape(3, 3) @ _MJ_TO_OPTICAL
            ep.T_wc[name][t, :3, 3] = d.cam_xpos[cid]
        action = policy(t) if policy is not None else hold
        ep.action[t] = action
        scene.step(action)
        ep.reward[t] = scene.reward()
    for r in renderers.values():
        r.close()
    return ep


def save_episode(path, ep: Episode) -> Path:
    """One compressed npz (keys as in the module docstring)."""
    arrays = {'seed': np.int64(ep.seed), 'box_pose': ep.box_pose, 'qpos': ep.qpos, 'action': ep.action,
              'reward': ep.reward, 'success': np.bool_(ep.success)}
    for kind in ('images', 'depth', 'K', 'T_wc'):
        for cam, a in getattr(ep, kind).items():
            arrays[f'{kind}/{cam}'] = a
    path = Path(path)
    np.savez_compressed(path, **arrays)
    return path


def load_episode(path) -> Episode:
    with np.load(path) as z:
        ep = Episode(int(z['seed']), z['box_pose'], z['qpos'], z['action'], z['reward'])
        for key in z.files:
            kind, _, cam = key.partition('/')
            if cam:
                getattr(ep, kind)[cam] = z[key]
    return ep


def load_episodes(directory) -> list[Episode]:
    """Every episode_*.npz of a directory, in seed order."""
    return sorted((load_episode(p) for p in Path(directory).glob('episode_*.npz')), key=lambda e: e.seed)


def episode_filename(seed: int) -> str:
    return f'episode_{seed:06d}.npz'

"""Closed-loop episodes of a gym-aloha task (tasks.py: transfer-cube or insertion) driven by an action-chunking
policy (no torch).

    result = run_episode(seed, act, RolloutConfig(chunk_size=50, query_every=10))
    result.success, result.max_reward, result.rewards.shape                     # bool, 0..4, (400,)

``act(obs) -> chunk [K,14]`` is called at query steps (every ``query_every`` control steps, starting at 0) with an
:class:`Observation` (the ``camera``'s colour + depth, its intrinsics, the 14-D qpos, the step); the chunks are
executed through :class:`~string_perception.runtime.action_chunks.TemporalEnsemble`, the class the ROS policy
node uses. Only query steps are rendered (a 120x160 colour + depth frame costs ~23 ms of CPU).

:class:`OnnxActor` is the act function of the deployed files: the perception ONNX (runtime.prepare_inputs +
runtime.OnnxModel -> ``embedding``) and the policy ONNX (runtime.PolicyModel), so the offline loop and the ROS loop
run the same files. :func:`record_demonstration` runs the scripted demonstrator and observes every n-th step (the
frames a behaviour-cloning data set needs, without rendering all 400 steps).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...aloha_tasks import DEFAULT_ALOHA_TASK
from ...runtime.action_chunks import TemporalEnsemble
from ..render import SceneRenderer
from .aloha_scene import ARM_JOINTS, SIDES, AlohaScene
from .tasks import TASK_NAMES, get_task, task_of_file
from .transfer_cube import EPISODE_STEPS

__all__ = ['JOINT_NAMES', 'Observation', 'EpisodeResult', 'RolloutConfig', 'CellCamera', 'StateCamera',
           'make_camera', 'run_episode',
           'record_demonstration', 'OnnxActor', 'replay_actor']

JOINT_NAMES = tuple(f'{side}_{j}' for side in SIDES for j in (*ARM_JOINTS, 'gripper'))   # the qpos14 / action order


@dataclass(frozen=True)
class RolloutConfig:
    task: str = DEFAULT_ALOHA_TASK        # tasks.TASKS: transfer_cube | insertion
    chunk_size: int = 50                  # K actions per query (1 s at 50 Hz)
    query_every: int = 10                 # control steps between queries (1: every step; K: open-loop chunks)
    temporal_ensemble_m: float = 0.01     # ACT's exp(-m i) weights
    steps: int = EPISODE_STEPS
    camera: str = 'top'
    height: int = 120
    width: int = 160
    shadow_size: int = 1024               # as EpisodeConfig: no visible change at this size, 4x cheaper
    msaa_samples: int = 0
    render: bool = True                   # False: physics only, observations carry no frame (color [0,0,3],
                                          # depth [0,0]): for actors that read only qpos / object_xyz (privileged)

    def validate(self) -> None:
        if self.task not in TASK_NAMES:
            raise ValueError(f'task must be one of {TASK_NAMES}, got {self.task!r}')
        if not 1 <= self.query_every <= self.chunk_size:
            raise ValueError(f'query_every must be in 1..chunk_size ({self.chunk_size}), got {self.query_every}')


@dataclass(frozen=True)
class Observation:
    step: int
    color: np.ndarray       # uint8 [H,W,3] RGB, row 0 = image top
    depth: np.ndarray       # float32 [H,W] z-depth metres, 0 = no return
    K: np.ndarray           # float64 [3,3] intrinsics of the H x W frame
    qpos: np.ndarray        # float64 [14] JOINT_NAMES order
    object_xyz: np.ndarray  # float64 [3 * objects] the task objects' positions now (the cube; the peg then the
                            # socket): privileged state, for baselines only (the ROS
                            # loop has none)


@dataclass
class EpisodeResult:
    seed: int
    success: bool                  # reward 4 at the last step (outcomes.success_last_step; gym-aloha's rule,
                                   # reward 4 at any step, is max_reward == 4)
    max_reward: int                # highest stage reached: 1 right touches .. 4 transferred
    rewards: np.ndarray            # int8 [T]
    cpu_s: float                   # process CPU seconds of the whole episode
    render_cpu_s: float = 0.0      # ... of which rendering
    act_cpu_s: float = 0.0         # ... of which act() (model inference)
    queries: int = 0
    object_xyz: np.ndarray = field(default_factory=lambda: np.zeros(3))   # the objects' initial positions


def _intrinsics(fovy_deg: float, height: int, width: int) -> np.ndarray:
    f = 0.5 * height / math.tan(0.5 * math.radians(fovy_deg))
    return np.array([[f, 0.0, 0.5 * (width - 1)], [0.0, f, 0.5 * (height - 1)], [0.0, 0.0, 1.0]])


class CellCamera:
    """One camera of a task's scene: observe(step) -> Observation of the current state."""

    def __init__(self, scene: AlohaScene, config: RolloutConfig):
        m = scene.model
        m.vis.quality.shadowsize, m.vis.quality.offsamples = config.shadow_size, config.msaa_samples
        cam = m.camera(config.camera).id
        self.scene, self.h, self.w = scene, config.height, config.width
        self.renderer = SceneRenderer(m, cam, cache_key=f'aloha_{config.task}_{config.shadow_size}_{config.msaa_samples}')
        self.K = _intrinsics(float(m.cam_fovy[cam]), self.h, self.w)
        self.render_cpu_s = 0.0

    def observe(self, step: int) -> Observation:
        c0 = time.process_time()
        rgb, z = self.renderer.color_depth(self.scene.data, self.h, self.w)
        self.render_cpu_s += time.process_time() - c0
        depth = np.where(np.isfinite(z), z, 0.0).astype(np.float32)                  # [H,W] metres, 0 = none
        return Observation(step, rgb, depth, self.K, self.scene.qpos14(), self.scene.object_positions())

    def close(self) -> None:
        self.renderer.close()


class StateCamera:
    """CellCamera's interface without rendering: observe(step) -> Observation with an empty frame (color
    uint8 [0,0,3], depth float32 [0,0]) and the camera's intrinsics, for actors that need only the state."""

    def __init__(self, scene: AlohaScene, config: RolloutConfig):
        cam = scene.model.camera(config.camera).id
        self.scene = scene
        self.K = _intrinsics(float(scene.model.cam_fovy[cam]), config.height, config.width)
        self.render_cpu_s = 0.0

    def observe(self, step: int) -> Observation:
        return Observation(step, np.zeros((0, 0, 3), np.uint8), np.zeros((0, 0), np.float32), self.K,
                           self.scene.qpos14(), self.scene.object_positions())

    def close(self) -> None:
        pass


def make_camera(scene: AlohaScene, config: RolloutConfig) -> CellCamera | StateCamera:
    """CellCamera, or StateCamera with ``config.render`` False."""
    return CellCamera(scene, config) if config.render else StateCamera(scene, config)


def run_episode(seed: int, act: Callable[[Observation], np.ndarray], config: RolloutConfig = RolloutConfig()
                ) -> EpisodeResult:
    """Reset the task for `seed` and run config.steps control steps with act's chunks, temporally ensembled."""
    config.validate()
    c0 = time.process_time()
    task = get_task(config.task)
    scene = task.make_scene()
    scene.reset(seed)
    objects = task.object_xyz(scene)
    camera = make_camera(scene, config)
    ensemble = TemporalEnsemble(config.chunk_size, len(JOINT_NAMES), config.temporal_ensemble_m)
    rewards = np.zeros(config.steps, np.int8)
    act_s, queries = 0.0, 0
    try:
        for t in range(config.steps):
            if t % config.query_every == 0:
                obs = camera.observe(t)
                a0 = time.process_time()
                ensemble.add(t, np.asarray(act(obs), np.float64))                      # [K,14]
                act_s += time.process_time() - a0
                queries += 1
            scene.step(ensemble.action(t))
            rewards[t] = scene.reward()
    finally:
        camera.close()
    return EpisodeResult(seed, bool(rewards[-1] == task.max_reward), int(rewards.max()), rewards,
                         time.process_time() - c0, camera.render_cpu_s, act_s, queries, objects)


def record_demonstration(seed: int, frame_every: int = 4, config: RolloutConfig = RolloutConfig(),
                         script=None, action_noise_std: float = 0.0
                         ) -> dict[str, np.ndarray]:
    """The scripted demonstrator's episode with the camera observed at steps 0, n, 2n, ...

    ``action_noise_std`` > 0 (DART, Laskey et al. 2017): the scene executes the demonstrator's action plus Gaussian
    noise of this std (radians, the 12 arm joints, not the grippers; seeded by ``seed``) while ``action`` records
    the demonstrator's own, so the demo visits states off its nominal path and labels them with the way back (the
    demonstrator tracks its own IK solution, not the perturbed state; its left grasp is planned from the cube's
    measured position, so it follows where the noisy right arm carried the cube).

    With ``config.render`` False nothing is rendered (color [F,0,0,3], depth [F,0,0]): a demo for the privileged
    policy, which needs only qpos, actions and the objects (physics is unchanged: rendering only reads the state).

    ``config.task`` picks the task and its demonstrator; ``script`` None is the task's default script
    (TransferScript / InsertionScript).

    Returns qpos float32 [T,14], action float32 [T,14], reward int8 [T], frame_steps int64 [F], color uint8
    [F,H,W,3], depth uint16 [F,H,W] (mm, 0 = none, as sim.demos.episodes), K float64 [3,3], object_xyz float64
    [3 * objects] (the objects' initial positions, tasks.AlohaTask.object_xyz), task (its name), seed, success
    (reward 4 at the last step), action_noise_std.
    """
    task = get_task(config.task)
    scene = task.make_scene()
    scene.reset(seed)
    objects = task.object_xyz(scene)
    policy = task.make_demonstrator(scene, script)
    camera = make_camera(scene, config)
    T = config.steps
    qpos, action, reward = np.zeros((T, 14), np.float32), np.zeros((T, 14), np.float32), np.zeros(T, np.int8)
    steps = np.arange(0, T, frame_every)
    noise = np.zeros((T, 14))
    if action_noise_std > 0:
        arm = np.r_[0:6, 7:13]                                                        # not the grippers (6, 13)
        noise[:, arm] = np.random.default_rng([seed, 1]).normal(0.0, action_noise_std, (T, 12))
    h, w = (config.height, config.width) if config.render else (0, 0)
    color = np.zeros((len(steps), h, w, 3), np.uint8)
    depth = np.zeros((len(steps), h, w), np.uint16)
    try:
        for t in range(T):
            qpos[t] = scene.qpos14()
            if t % frame_every == 0:
                obs = camera.observe(t)
                color[t // frame_every] = obs.color
                depth[t // frame_every] = np.clip(np.round(obs.depth * 1000.0), 0, 65535)
            action[t] = policy(t)
            scene.step(action[t] + noise[t])
            reward[t] = scene.reward()
    finally:
        camera.close()
    return dict(qpos=qpos, action=action, reward=reward, frame_steps=steps, color=color, depth=depth,
                K=camera.K, object_xyz=objects, task=np.str_(task.name), seed=np.int64(seed),
                success=np.bool_(reward[-1] == task.max_reward),
                action_noise_std=np.float64(action_noise_std))


def replay_actor(actions: np.ndarray, chunk_size: int) -> Callable[[Observation], np.ndarray]:
    """act() that returns recorded actions [T,14] from the query step on as a chunk (the last one repeated past
    the end): with the demonstrator's actions it reproduces the demonstration (the rollout plumbing's check)."""
    actions = np.asarray(actions, np.float64)

    def act(obs: Observation) -> np.ndarray:
        idx = np.minimum(np.arange(obs.step, obs.step + chunk_size), len(actions) - 1)
        return actions[idx]                                                           # [K,14]
    return act


class OnnxActor:
    """act() of the deployed files: perception ONNX -> embedding, policy ONNX (embedding, qpos) -> chunk [K,14]."""

    def __init__(self, perception_onnx, policy_onnx, intra_op_threads: int = 1):
        from ...runtime.onnx_runner import OnnxModel
        from ...runtime.policy_model import PolicyModel
        self.perception = OnnxModel(perception_onnx, ('CPUExecutionProvider',), intra_op_threads=intra_op_threads,
                                    inter_op_threads=1, intra_op_spinning=False, warmup=False)
        self.policy = PolicyModel(policy_onnx, intra_op_threads=intra_op_threads)
        meta = self.policy.metadata
        if meta.embed_dim != self.perception.metadata.embedding_dim:
            raise ValueError(f'policy expects embeddings of {meta.embed_dim}, the perception model gives '
                             f'{self.perception.metadata.embedding_dim}')
        if tuple(meta.joint_names) != JOINT_NAMES:
            raise ValueError(f'policy joints {meta.joint_names} are not the cell\'s {JOINT_NAMES}')
        self._first: np.ndarray | None = None          # [1,E]: the episode's first embedding, with the latch

    def embedding(self, obs: Observation) -> np.ndarray:
        from ...runtime.preprocess import prepare_inputs
        inputs = prepare_inputs(obs.color, obs.depth, obs.K, self.perception.input_hw, resize_mode='crop')
        return self.perception.run(**inputs.feed())['embedding']                      # [1,E]

    def __call__(self, obs: Observation) -> np.ndarray:
        """A chunk [K,14]; with the policy's ``embedding_latch`` 'episode_start' the embedding is the one of the
        episode's first step (as runtime.PolicyStepper, which the ROS policy node runs)."""
        if self.policy.metadata.embedding_latch == 'episode_start':
            if obs.step == 0 or self._first is None:
                self._first = self.embedding(obs)
            return self.policy.predict(self._first, obs.qpos)[0]                      # [K,14]
        return self.policy.predict(self.embedding(obs), obs.qpos)[0]                  # [K,14]

    def rollout_config(self, **overrides) -> RolloutConfig:
        """RolloutConfig with the policy file's chunk size, query interval and ensembling weight."""
        m = self.policy.metadata
        base = dict(task=task_of_file(m.task), chunk_size=m.chunk_size, query_every=m.query_every,
                    temporal_ensemble_m=m.temporal_ensemble_m)
        return RolloutConfig(**{**base, **overrides})

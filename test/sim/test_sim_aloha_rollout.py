"""Closed-loop rollout of the transfer-cube task (sim/demos/rollout.py): the scripted demonstrator's recorded
actions, fed back as action chunks through the temporal ensemble (query every 10 steps, chunks of 50), reproduce
its hand-over (reward 4 at the last step) on seed 0; a policy that holds the start pose never touches the cube;
record_demonstration observes exactly the requested steps; bad query intervals are refused."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip('mujoco')  # optional: requirements/sim.txt
from string_perception.sim.demos.episodes import _hold_action  # noqa: E402
from string_perception.sim.demos.rollout import (JOINT_NAMES, RolloutConfig, record_demonstration,  # noqa: E402
                                                 replay_actor, run_episode)
from string_perception.sim.demos.scripted import TransferCubeDemonstrator, TransferScript  # noqa: E402
from string_perception.sim.demos.transfer_cube import MAX_REWARD, TransferCubeScene  # noqa: E402

pytestmark = pytest.mark.slow                  # ~6 s CPU: one demonstration, two rollouts

SMALL = RolloutConfig(chunk_size=50, query_every=10, height=24, width=32)


@pytest.fixture(scope='module')
def demo():
    return record_demonstration(0, frame_every=100, config=SMALL)


def test_demonstration_arrays(demo):
    assert demo['success'] and demo['reward'][-1] == MAX_REWARD
    np.testing.assert_array_equal(demo['frame_steps'], [0, 100, 200, 300])
    assert demo['color'].shape == (4, 24, 32, 3) and demo['color'].dtype == np.uint8
    assert demo['depth'].shape == (4, 24, 32) and demo['depth'].dtype == np.uint16 and demo['depth'].max() > 0
    assert demo['qpos'].shape == demo['action'].shape == (400, 14) and len(JOINT_NAMES) == 14


def test_replayed_chunks_reach_success(demo):
    seen = []

    def act(obs):
        seen.append(obs.step)
        assert obs.color.shape == (24, 32, 3) and obs.depth.dtype == np.float32 and obs.qpos.shape == (14,)
        return replay_actor(demo['action'], SMALL.chunk_size)(obs)

    r = run_episode(0, act, SMALL)
    assert seen == list(range(0, 400, 10)) and r.queries == 40
    assert r.success and r.max_reward == MAX_REWARD
    np.testing.assert_array_equal(r.rewards, demo['reward'])     # same actions executed -> same rewards


def test_holding_the_start_pose_never_touches():
    hold = np.tile(_hold_action(), (50, 1))                     # [K,14]
    r = run_episode(3, lambda obs: hold, RolloutConfig(chunk_size=50, query_every=50, height=24, width=32))
    assert not r.success and r.max_reward == 0 and r.queries == 8


def test_query_interval_must_fit_the_chunk():
    with pytest.raises(ValueError, match='query_every'):
        run_episode(0, lambda obs: None, RolloutConfig(chunk_size=10, query_every=11))


def test_physics_only_demo_and_rollout_match_the_rendered_ones(demo):
    """render=False: no frames (empty arrays), the same physics: same qpos, actions and rewards as the rendered demo,
    and a replay without rendering reaches the same rewards."""
    bare = RolloutConfig(chunk_size=50, query_every=10, height=24, width=32, render=False)
    plain = record_demonstration(0, frame_every=100, config=bare)
    assert plain['color'].shape == (4, 0, 0, 3) and plain['depth'].shape == (4, 0, 0)
    for k in ('qpos', 'action', 'reward', 'frame_steps', 'K', 'object_xyz', 'task'):
        np.testing.assert_array_equal(plain[k], demo[k])
    seen = []

    def act(obs):
        seen.append(obs.color.shape)
        return replay_actor(plain['action'], bare.chunk_size)(obs)

    r = run_episode(0, act, bare)
    assert set(seen) == {(0, 0, 3)} and r.render_cpu_s == 0.0
    np.testing.assert_array_equal(r.rewards, demo['reward'])


def test_dart_noise_perturbs_the_states_not_the_labels(demo):
    """action_noise_std: the executed actions are noisy, the recorded ones are the demonstrator's: until the left
    grasp is planned from the cube (t_meet) they equal the clean demo's, while the visited joint states differ."""
    bare = RolloutConfig(height=24, width=32, render=False)
    noisy = record_demonstration(0, frame_every=100, config=bare, action_noise_std=0.02)
    t_meet = 220
    np.testing.assert_allclose(noisy['action'][:t_meet], demo['action'][:t_meet], atol=0)
    assert np.abs(noisy['qpos'][1:t_meet] - demo['qpos'][1:t_meet]).max() > 1e-3
    assert float(noisy['action_noise_std']) == 0.02 and float(demo['action_noise_std']) == 0.0


def _right_wrist_at(seed: int, script: TransferScript, step: int = 130) -> np.ndarray:
    """The demonstrator's right (forearm_roll, wrist_angle, wrist_rotate) targets at `step` (IK only, no physics:
    its targets do not depend on the executed state before the left grasp is planned)."""
    scene = TransferCubeScene()
    scene.reset(seed)
    demonstrator = TransferCubeDemonstrator(scene, script)
    for t in range(step + 1):
        action = demonstrator(t)
    return action[10:13]


def test_t_pitch_keeps_the_right_wrist_on_one_branch():
    """t_pitch = 0: the right wrist ends near forearm_roll = -pi on seed 0, ~ +pi on seed 2, ~ 0 on seed 4 (three
    IK branches of the same tool pose); t_pitch = 45: forearm_roll ~ 0 and wrist_angle > 0 on all of them."""
    free = np.array([_right_wrist_at(s, TransferScript(t_pitch=0))[0] for s in (0, 2, 4)])
    assert free[0] < -1.5 and free[1] > 1.5 and abs(free[2]) < 1.0
    for s in (0, 2, 4):
        roll, angle, _ = _right_wrist_at(s, TransferScript(t_pitch=45))
        assert abs(roll) < 1.0 and angle > 0.0

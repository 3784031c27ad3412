"""Transfer-cube demonstrations (sim/demos/: transfer_cube.py, scripted.py, episodes.py): gym-aloha's
cube pose per seed, the scripted demonstrator hands the cube over on a fixed seed (right grasp and lift before the
left's) and its recorded actions replay it in joint space, a policy that never grasps gets reward 0, a left arm
that misses never succeeds, episodes are deterministic per seed, recorded arrays have the
documented shapes and dtypes and survive save / load."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip('mujoco')  # optional: requirements/sim.txt
from string_perception.sim.demos.episodes import (EpisodeConfig, load_episode, record_episode,  # noqa: E402
                                                  save_episode)
from string_perception.sim.demos.scripted import TransferScript  # noqa: E402
from string_perception.sim.demos.transfer_cube import MAX_REWARD, TransferCubeScene, sample_box_pose  # noqa: E402

pytestmark = pytest.mark.slow                               # ~23 s CPU (74 s wall at load 5): 2 full episodes, 3 short

SMALL = EpisodeConfig(height=24, width=32)


@pytest.fixture(scope='module')
def scripted():
    return record_episode(0, SMALL)


def test_box_pose_is_gym_alohas():
    # gym_aloha.utils.sample_box_pose(0): RandomState(0).uniform -> 0.5488135, 0.71518937, ... over the ranges
    np.testing.assert_allclose(sample_box_pose(0), [0.1097627, 0.5430379, 0.05, 1, 0, 0, 0], atol=1e-6)


def test_scripted_demonstrator_hands_over_on_seed_0(scripted):
    r = scripted.reward
    assert scripted.success and r[-1] == MAX_REWARD
    lifted_right = int(np.argmax(r == 2))                    # right holds it off the table ...
    transferred = int(np.argmax(r == MAX_REWARD))            # ... before the left holds it
    assert r[lifted_right] == 2 and 0 < lifted_right < transferred
    assert (r[:lifted_right] <= 2).all()
    # at the end the left gripper is held open by the 4 cm cube (~0.5 of its range; 1 = open), the right is open
    assert scripted.qpos[-1, 6] < 0.7 and scripted.qpos[-1, 13] > 0.9


def test_recorded_actions_replay_the_demonstration(scripted):
    # the float32 joint targets alone, replayed open loop in a fresh scene, hand the cube over again
    scene = TransferCubeScene()
    scene.reset(0)
    for t, a in enumerate(scripted.action):
        scene.step(a)
        if t + 1 < len(scripted.qpos):
            np.testing.assert_allclose(scene.qpos14(), scripted.qpos[t + 1], atol=2e-3)
    assert scene.reward() == MAX_REWARD


def test_no_grasp_is_no_success():
    ep = record_episode(3, EpisodeConfig(height=24, width=32, steps=60, policy='hold'))
    assert not ep.success and (ep.reward == 0).all()
    np.testing.assert_allclose(ep.box_pose, sample_box_pose(3))
    scene = TransferCubeScene()                                # the cube still rests there: on the table
    scene.reset(3)
    for a in ep.action:
        scene.step(a)
    assert scene.touches() == {'left': False, 'right': False, 'table': True}
    np.testing.assert_allclose(scene.box_position()[:2], ep.box_pose[:2], atol=1e-3)


def test_left_arm_missing_the_cube_is_no_success():
    # the left pad centre stops 20 cm short of the cube: the right lifts it (reward 2), never a left touch, and the
    # cube falls when the right opens
    ep = record_episode(0, EpisodeConfig(cameras=(), script=TransferScript(left_grasp_dx_m=-0.2)))
    assert ep.reward.max() == 2 and not ep.success and ep.images == {}


def test_recorded_arrays(scripted, tmp_path):
    T = SMALL.steps
    assert scripted.qpos.shape == scripted.action.shape == (T, 14)
    assert scripted.qpos.dtype == scripted.action.dtype == np.float32
    assert scripted.reward.shape == (T,) and scripted.reward.dtype == np.int8
    assert scripted.images['top'].shape == (T, 24, 32, 3) and scripted.images['top'].dtype == np.uint8
    assert scripted.depth['top'].shape == (T, 24, 32) and scripted.depth['top'].dtype == np.uint16
    assert scripted.T_wc['top'].shape == (T, 4, 4) and scripted.K['top'].shape == (3, 3)
    # start: gym-aloha's START_ARM_POSE, gripper 0.02239 m normalised over [0.01844, 0.058]
    np.testing.assert_allclose(scripted.qpos[0], [0, -0.96, 1.16, 0, -0.3, 0, 0.09985] * 2, atol=1e-4)
    # the top camera 0.8 m above the table top looks straight down at the table centre: 800 mm at the centre
    d = scripted.depth['top'][0]
    assert abs(int(d[11:13, 15:17].mean()) - 800) <= 2
    np.testing.assert_allclose(scripted.T_wc['top'][0, :3, 3], [0, 0.6, 0.8], atol=1e-6)
    ep = load_episode(save_episode(tmp_path / 'e.npz', scripted))
    assert ep.seed == 0 and ep.success
    for name in ('qpos', 'action', 'reward', 'box_pose'):
        np.testing.assert_array_equal(getattr(ep, name), getattr(scripted, name))
    for kind in ('images', 'depth', 'K', 'T_wc'):
        np.testing.assert_array_equal(getattr(ep, kind)['top'], getattr(scripted, kind)['top'])


def test_deterministic_per_seed(scripted):
    short = EpisodeConfig(height=24, width=32, steps=180)
    a = record_episode(0, short)
    np.testing.assert_array_equal(a.qpos, scripted.qpos[:180])
    np.testing.assert_array_equal(a.action, scripted.action[:180])
    np.testing.assert_array_equal(a.images['top'], scripted.images['top'][:180])
    # the first TransferScript.t_pitch steps turn the wrist in place (the same for every cube), then they differ
    b = record_episode(1, EpisodeConfig(height=24, width=32, steps=60))
    assert not np.array_equal(a.box_pose, b.box_pose) and not np.array_equal(a.action[:60], b.action)

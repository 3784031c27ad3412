"""gym-aloha's insertion task (sim/demos/insertion.py): peg and socket poses per seed as
gym_aloha.utils.sample_insertion_pose draws them, deterministic resets, reward 0 at reset, and the reward stages
2 / 3 / 4 from constructed states (objects placed at the fingers, on each other, on the pin)."""
import numpy as np
import pytest

pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import mujoco  # noqa: E402

from string_perception.sim.demos.insertion import (EPISODE_STEPS, MAX_REWARD, InsertionScene,  # noqa: E402
                                                   sample_insertion_pose)


@pytest.fixture(scope='module')
def scene():
    return InsertionScene()


def test_poses_are_gym_alohas():
    # RandomState(0).uniform draws 0.5488135, 0.71518937, 0.60276338 (peg x, y, z), 0.54488318, 0.4236548,
    # 0.64589411 (socket x, y, z) mapped onto peg x [0.1, 0.2], y [0.4, 0.6]; socket x [-0.2, -0.1], y [0.4, 0.6]
    peg, socket = sample_insertion_pose(0)
    np.testing.assert_allclose(peg, [0.15488135, 0.54303787, 0.05, 1, 0, 0, 0], atol=1e-7)
    np.testing.assert_allclose(socket, [-0.14551168, 0.48473096, 0.05, 1, 0, 0, 0], atol=1e-7)


def test_poses_stay_in_gym_alohas_ranges():
    poses = np.array([np.concatenate(sample_insertion_pose(s)) for s in range(200)])       # [200, 14]
    peg, socket = poses[:, :3], poses[:, 7:10]
    assert (peg[:, 0] >= 0.1).all() and (peg[:, 0] <= 0.2).all()
    assert (socket[:, 0] >= -0.2).all() and (socket[:, 0] <= -0.1).all()
    assert (poses[:, [1, 8]] >= 0.4).all() and (poses[:, [1, 8]] <= 0.6).all()
    assert (poses[:, [2, 9]] == 0.05).all()
    np.testing.assert_array_equal(poses[:, 3:7], np.tile([1.0, 0, 0, 0], (200, 1)))
    assert len(np.unique(poses[:, 0])) == 200                                             # the seed matters


def test_reset_is_deterministic_and_places_the_objects(scene):
    peg, socket = scene.reset(7)
    q0 = scene.data.qpos.copy()
    np.testing.assert_allclose(scene.peg_position(), peg[:3])
    np.testing.assert_allclose(scene.socket_position(), socket[:3])
    for _ in range(5):
        scene.step(scene.qpos14())
    scene.reset(7)
    np.testing.assert_array_equal(scene.data.qpos, q0)
    assert scene.reward() == 0 and EPISODE_STEPS == 400


def test_objects_settle_on_the_table_with_reward_0(scene):
    scene.reset(3)
    hold = scene.qpos14()
    for _ in range(25):
        scene.step(hold)
    t = scene.touches()
    assert t['peg_table'] and t['socket_table'] and scene.reward() == 0


def _place(scene, peg_xyz, socket_xyz):
    d = scene.data
    d.qpos[scene.peg_qpos:scene.peg_qpos + 3] = peg_xyz
    d.qpos[scene.socket_qpos:scene.socket_qpos + 3] = socket_xyz
    mujoco.mj_forward(scene.model, d)


def _finger_centre(scene, side):
    """[3] world centre of the finger mesh's bounding box (the mesh frame is off its centre)."""
    g, d = scene.finger_geom[side], scene.data
    return d.geom_xpos[g] + d.geom_xmat[g].reshape(3, 3) @ scene.model.geom_aabb[g, :3]


def test_both_fingers_holding_aloft_is_2(scene):
    scene.reset(0)
    _place(scene, _finger_centre(scene, 'right'), _finger_centre(scene, 'left'))
    t = scene.touches()
    assert t['left'] and t['right'] and not t['peg_table'] and not t['socket_table']
    assert scene.reward() == 2


def test_peg_on_a_socket_plate_aloft_is_3_and_on_the_table_is_not(scene):
    scene.reset(0)
    socket = np.array([0.0, 0.5, 0.3])
    _place(scene, socket + [0.0, 0.0, 0.02 + 0.002 + 0.0095], socket)        # peg resting 0.5 mm into the top plate
    t = scene.touches()
    assert t['peg_socket'] and not t['pin'] and scene.reward() == 3
    _place(scene, [0.0, 0.5, 0.0215 + 0.022 + 0.0095], [0.0, 0.5, 0.0215])  # the same stack on the table
    assert scene.touches()['socket_table'] and scene.reward() == 0


def test_peg_touching_the_pin_is_4_even_on_the_table(scene):
    scene.reset(0)
    socket = np.array([-0.1, 0.5, 0.022 - 0.0005])                          # bottom plate 0.5 mm into the table
    _place(scene, socket + [0.0995, 0.0, 0.0], socket)                      # peg end 0.5 mm into the pin's end
    t = scene.touches()
    assert t['pin'] and t['socket_table'] and scene.reward() == MAX_REWARD

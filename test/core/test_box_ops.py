"""box_ops: 6D rotations, quaternions, corners, 12-number encoding, projection."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.spatial.transform import Rotation

from string_perception import box_ops as bo


def random_rotations(n, seed=0):
    return Rotation.random(n, random_state=seed).as_matrix()


def assert_so3(R, atol=1e-12):
    eye = np.broadcast_to(np.eye(3), R.shape)
    np.testing.assert_allclose(np.swapaxes(R, -1, -2) @ R, eye, atol=atol)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=atol)


def test_6d_round_trip_uses_columns():
    R = random_rotations(50)
    x6 = bo.rotation_to_6d(R)
    np.testing.assert_array_equal(x6[:, 0:3], R[:, :, 0])
    np.testing.assert_array_equal(x6[:, 3:6], R[:, :, 1])
    np.testing.assert_allclose(bo.rotation_from_6d(x6), R, atol=1e-12)


def test_6d_gram_schmidt_of_arbitrary_input_is_rotation_keeping_first_direction():
    x6 = np.random.default_rng(1).normal(size=(4, 7, 6)) * 3.0
    R = bo.rotation_from_6d(x6)
    assert R.shape == (4, 7, 3, 3)
    assert_so3(R)
    a1 = x6[..., :3] / np.linalg.norm(x6[..., :3], axis=-1, keepdims=True)
    np.testing.assert_allclose(R[..., :, 0], a1, atol=1e-12)
    # The second column lies in the plane spanned by the two inputs, on the side of a2.
    assert np.all(np.einsum('...i,...i', R[..., :, 1], x6[..., 3:]) > 0)


@pytest.mark.parametrize('x6', [np.zeros(6), [1, 0, 0, 2, 0, 0], [0, 0, 0, 0, 1, 0], [1e-20, 0, 0, 0, 1, 0]])
def test_6d_degenerate_inputs_give_valid_rotations(x6):
    R = bo.rotation_from_6d(np.asarray(x6, dtype=float))
    assert np.all(np.isfinite(R))
    assert_so3(R)


def test_quaternion_matches_scipy_and_is_canonical():
    R = random_rotations(200, seed=2)
    q = bo.rotation_to_quaternion(R)
    q_ref = Rotation.from_matrix(R).as_quat()          # scipy is (x, y, z, w) too
    q_ref = np.where(q_ref[:, 3:] < 0, -q_ref, q_ref)
    np.testing.assert_allclose(q, q_ref, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-14)
    assert np.all(q[:, 3] >= 0)
    np.testing.assert_allclose(bo.quaternion_to_rotation(q), R, atol=1e-12)


def test_quaternion_known_values_and_ros_order():
    np.testing.assert_allclose(bo.rotation_to_quaternion(np.eye(3)), [0, 0, 0, 1])
    Rz90 = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])
    np.testing.assert_allclose(bo.rotation_to_quaternion(Rz90), [0, 0, np.sqrt(0.5), np.sqrt(0.5)], atol=1e-15)
    # 180 degrees about each axis (trace = -1, the case a naive trace-only formula divides by zero on).
    for axis in range(3):
        R = np.diag([-1.0, -1.0, -1.0])
        R[axis, axis] = 1.0
        expected = np.zeros(4)
        expected[axis] = 1.0
        np.testing.assert_allclose(bo.rotation_to_quaternion(R), expected, atol=1e-15)


@settings(max_examples=200, deadline=None)
@given(angle=st.floats(np.pi - 1e-6, np.pi), axis=st.lists(st.floats(-1, 1), min_size=3, max_size=3))
def test_quaternion_near_180_degrees_round_trip(angle, axis):
    axis = np.asarray(axis)
    if np.linalg.norm(axis) < 1e-3:
        axis = np.array([0.3, -0.5, 0.8])
    R = Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle).as_matrix()
    q = bo.rotation_to_quaternion(R)
    assert abs(np.linalg.norm(q) - 1) < 1e-14 and q[3] >= 0
    np.testing.assert_allclose(bo.quaternion_to_rotation(q), R, atol=1e-12)


def test_quaternion_to_rotation_normalises_input():
    q = np.array([0.1, -0.2, 0.3, 0.9]) * 7.0
    assert_so3(bo.quaternion_to_rotation(q))


def test_corner_order_is_the_documented_one():
    t = np.array([1.0, 2.0, 3.0])
    size = np.array([2.0, 4.0, 6.0])
    c = bo.box_corners(t, np.eye(3), size)
    assert c.shape == (8, 3)
    np.testing.assert_array_equal(c[0], t - size / 2)
    np.testing.assert_array_equal(c[6], t + size / 2)
    np.testing.assert_array_equal(c[1], t + [1, -2, -3])
    np.testing.assert_array_equal(c[3], t + [-1, 2, -3])
    np.testing.assert_array_equal(c[4:] - c[:4], np.broadcast_to([0, 0, 6.0], (4, 3)))
    # Every edge is parallel to one box axis and has that axis' length.
    d = c[bo.BOX_EDGES[:, 1]] - c[bo.BOX_EDGES[:, 0]]
    assert sorted(np.abs(d).max(axis=1).tolist()) == [2.0] * 4 + [4.0] * 4 + [6.0] * 4
    assert np.all((np.abs(d) > 0).sum(axis=1) == 1)


def test_corners_rotate_with_the_box_columns():
    R = random_rotations(1, seed=3)[0]
    t, size = np.array([0.5, -1.0, 4.0]), np.array([0.2, 0.3, 0.4])
    c = bo.box_corners(t, R, size)
    local = (c - t) @ R                          # back into the box frame: R^T (c - t)
    np.testing.assert_allclose(local, bo.CORNER_SIGNS * size / 2, atol=1e-15)


def test_batched_shapes_and_encode_decode_round_trip():
    rng = np.random.default_rng(4)
    t = rng.normal(size=(2, 5, 3))
    R = random_rotations(10, seed=5).reshape(2, 5, 3, 3)
    size = rng.uniform(0.1, 2, size=(2, 5, 3))
    params = bo.encode_box_params(t, R, size)
    assert params.shape == (2, 5, 12)
    t2, R2, s2 = bo.decode_box_params(params)
    np.testing.assert_allclose(t2, t)
    np.testing.assert_allclose(R2, R, atol=1e-12)
    np.testing.assert_allclose(s2, size)
    assert bo.box_corners(t, R, size).shape == (2, 5, 8, 3)
    box = bo.Box3D.from_params(params)
    np.testing.assert_allclose(box.corners(), bo.box_corners(t, R, size), atol=1e-12)
    np.testing.assert_allclose(box.volume, size.prod(-1))
    np.testing.assert_allclose(box.to_params(), params, atol=1e-12)
    with pytest.raises(ValueError):
        bo.decode_box_params(np.zeros((3, 11)))


def test_project_points():
    K = np.array([[500.0, 0, 320], [0, 400.0, 240], [0, 0, 1]])
    pts = np.array([[0, 0, 2.0], [1, -1, 2.0], [0, 0, -1.0], [0, 0, 0.0]])
    uv = bo.project_points(pts, K)
    np.testing.assert_allclose(uv[:2], [[320, 240], [570, 40]])
    assert np.all(np.isnan(uv[2:]))
    assert bo.project_points(np.ones((4, 8, 3)), K).shape == (4, 8, 2)

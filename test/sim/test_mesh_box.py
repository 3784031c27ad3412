"""sim/mesh_box.py: the tightest box of a vertex set (the label of a library mesh), exact on boxes, never looser
than the body-frame box, every vertex inside, nearest the body frame among its 24 descriptions."""
import numpy as np
import pytest

pytest.importorskip('mujoco')   # string_perception.sim imports it
pytest.importorskip('scipy')
from scipy.spatial.transform import Rotation  # noqa: E402

from string_perception.sim.mesh_box import body_frame_box, mesh_label_box, minimum_volume_box  # noqa: E402

SIZE = np.array([0.2, 0.06, 0.1])


def box_cloud(R, t, n=300, seed=0):
    """The 8 corners of a SIZE box plus n points inside it, posed by (R, t): [8+n, 3]."""
    rng = np.random.default_rng(seed)
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    local = np.concatenate([signs, rng.uniform(-1, 1, (n, 3))]) * SIZE / 2
    return local @ R.T + t


@pytest.mark.parametrize('seed', range(5))
def test_a_rotated_box_is_recovered_exactly(seed):
    R, t = Rotation.random(random_state=seed).as_matrix(), np.array([0.3, -0.2, 0.1])
    c, A, s = minimum_volume_box(box_cloud(R, t, seed=seed))
    np.testing.assert_allclose(c, t, atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(A), 1.0, atol=1e-9)
    P = np.abs(A.T @ R)                                          # a permutation: the same three axes
    np.testing.assert_allclose(P, np.round(P), atol=1e-6)
    np.testing.assert_allclose(s, P @ SIZE, atol=1e-9)           # each size along its own axis


def test_an_axis_aligned_box_keeps_the_body_frame():
    pts = box_cloud(np.eye(3), np.array([0.01, 0.02, -0.03]))
    c, A, s = minimum_volume_box(pts)
    np.testing.assert_allclose(A, np.eye(3), atol=1e-9)          # of the 24 descriptions, the body frame's
    for got, want in zip((c, A, s), body_frame_box(pts)):
        np.testing.assert_allclose(got, want, atol=1e-9)


@pytest.mark.parametrize('seed', range(5))
def test_a_blob_is_inside_its_box_which_is_never_looser_than_the_body_box(seed):
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(400, 3)) * [0.08, 0.03, 0.02]
    pts = pts @ Rotation.random(random_state=seed).as_matrix().T       # an elongated blob, tilted
    c, A, s = minimum_volume_box(pts)
    local = (pts - c) @ A                                              # [V,3] in the box frame
    assert np.all(np.abs(local) <= s / 2 + 1e-12)
    assert np.prod(s) < 0.9 * np.prod(body_frame_box(pts)[2])          # the tilt no longer inflates it


def test_flat_or_too_few_points_keep_the_body_frame_box():
    flat = np.random.default_rng(0).uniform(-1, 1, (50, 3)) * [0.1, 0.05, 0.0]
    for pts in (flat, flat[:3]):
        for got, want in zip(minimum_volume_box(pts), body_frame_box(pts)):
            np.testing.assert_array_equal(got, want)


def test_mesh_label_box_is_memoised_and_returns_copies():
    pts = box_cloud(Rotation.random(random_state=7).as_matrix(), np.zeros(3))
    first = mesh_label_box(pts)
    first[2][:] = -1.0                                                  # the caller may scribble on its copy
    again = mesh_label_box(pts.copy())
    np.testing.assert_allclose(np.sort(again[2]), np.sort(SIZE), atol=1e-9)

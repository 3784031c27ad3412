"""iou3d: exact oriented 3D IoU against analytic cases, an independent half-space reference and Monte Carlo."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import linprog
from scipy.spatial import ConvexHull, HalfspaceIntersection
from scipy.spatial.transform import Rotation

from string_perception.box_ops import Box3D, encode_box_params
from string_perception.iou3d import (as_boxes, box3d_intersection_volume, box3d_iou, monte_carlo_box3d_iou,
                                     paired_box3d_iou, pairwise_box3d_iou)

METHODS = ['faces', 'qhull']
I3 = np.eye(3)
ONE = np.ones(3)


def cube(t=(0, 0, 0), R=I3, size=ONE):
    return Box3D(np.asarray(t, float), np.asarray(R, float), np.asarray(size, float))


def rz(deg):
    return Rotation.from_euler('z', deg, degrees=True).as_matrix()


def halfspace_volume(a: Box3D, b: Box3D) -> float:
    """Independent reference: scipy HalfspaceIntersection of the 12 half-spaces + Chebyshev centre (linprog)."""
    c = 0.5 * (a.t + b.t)
    rows = []
    for t, R, s in (a, b):
        for k in range(3):
            for sign in (1, -1):
                n = sign * R[:, k]
                rows.append(np.append(n, -(n @ (t - c)) - s[k] / 2))   # n·x + off <= 0
    hs = np.array(rows)
    A, off = hs[:, :3], hs[:, 3]
    norm = np.linalg.norm(A, axis=1)
    res = linprog([0, 0, 0, -1], A_ub=np.column_stack([A, norm]), b_ub=-off, bounds=[(None, None)] * 3 + [(0, None)])
    if not res.success or res.x[3] < 1e-9:
        return 0.0
    return ConvexHull(HalfspaceIntersection(hs, res.x[:3]).intersections).volume


def random_overlapping_pairs(n, seed):
    rng = np.random.default_rng(seed)
    R = Rotation.random(2 * n, random_state=seed).as_matrix()
    a = Box3D(rng.normal(scale=0.2, size=(n, 3)), R[:n], rng.uniform(0.3, 1.5, size=(n, 3)))
    b = Box3D(rng.normal(scale=0.2, size=(n, 3)), R[n:], rng.uniform(0.3, 1.5, size=(n, 3)))
    return a, b


@pytest.mark.parametrize('method', METHODS)
def test_analytic_cases(method):
    assert box3d_iou(cube(), cube(), method) == pytest.approx(1.0, abs=1e-12)
    assert box3d_iou(cube(), cube(t=(0.5, 0, 0)), method) == pytest.approx(1 / 3, abs=1e-12)
    assert box3d_iou(cube(), cube(R=rz(45)), method) == pytest.approx(1 / np.sqrt(2), abs=1e-9)
    assert box3d_iou(cube(), cube(t=(3, 0, 0)), method) == 0.0                       # disjoint
    assert box3d_iou(cube(), cube(t=(1, 0, 0)), method) == pytest.approx(0.0, abs=1e-9)  # touching face
    assert box3d_iou(cube(), cube(t=(1, 1, 1)), method) == pytest.approx(0.0, abs=1e-9)  # touching corner
    inner = cube(t=(0.1, -0.2, 0.05), R=Rotation.from_euler('xyz', [10, 20, 30], degrees=True).as_matrix(),
                 size=(0.3, 0.2, 0.4))
    big = cube(size=(2, 2, 2))
    assert box3d_iou(big, inner, method) == pytest.approx(0.3 * 0.2 * 0.4 / 8, abs=1e-12)  # nested
    assert box3d_iou(inner, big, method) == pytest.approx(0.3 * 0.2 * 0.4 / 8, abs=1e-12)


@pytest.mark.parametrize('method', METHODS)
def test_shared_faces_and_axis_permutations(method):
    # A 90 degree turn about z permutes the axes: all faces coincide with the other box's faces.
    assert box3d_iou(cube(), cube(R=rz(90)), method) == pytest.approx(1.0, abs=1e-12)
    assert box3d_iou(cube(size=(1, 2, 3)), cube(R=rz(90), size=(2, 1, 3)), method) == pytest.approx(1.0, abs=1e-12)
    # Same orientation, flush on three faces: a 0.5 x 1 x 1 box in the corner of a unit cube is half of it.
    assert box3d_iou(cube(), cube(t=(0.25, 0, 0), size=(0.5, 1, 1)), method) == pytest.approx(0.5, abs=1e-12)
    # Sheared by a hair: stays continuous.
    assert box3d_iou(cube(), cube(R=rz(1e-9)), method) == pytest.approx(1.0, abs=1e-8)
    # 45 degrees with a z shift: octagon prism of height 0.5.
    oct_area = 2 * np.sqrt(2) - 2
    v = 0.5 * oct_area
    assert box3d_iou(cube(), cube(t=(0, 0, 0.5), R=rz(45)), method) == pytest.approx(v / (2 - v), abs=1e-12)


@pytest.mark.parametrize('method', METHODS)
def test_far_from_origin_is_still_exact(method):
    far = np.array([40_000.0, -25_000.0, 40_000.0])
    assert box3d_iou(cube(t=far), cube(t=far, R=rz(45)), method) == pytest.approx(1 / np.sqrt(2), abs=1e-9)
    assert box3d_iou(cube(t=far), cube(t=far + [0.5, 0, 0]), method) == pytest.approx(1 / 3, abs=1e-9)
    a, b = random_overlapping_pairs(20, seed=7)
    near = paired_box3d_iou(a, b, method)
    moved = paired_box3d_iou(a._replace(t=a.t + far), b._replace(t=b.t + far), method)
    np.testing.assert_allclose(moved, near, atol=1e-9)


def test_faces_matches_qhull_and_independent_halfspace_reference():
    a, b = random_overlapping_pairs(300, seed=1)
    faces = paired_box3d_iou(a, b, 'faces')
    qhull = paired_box3d_iou(a, b, 'qhull')
    assert (faces > 0.05).sum() > 150                      # most pairs really overlap
    np.testing.assert_allclose(faces, qhull, atol=1e-12)
    for i in range(25):                                   # the half-space route is slow: a subset
        A, B = Box3D(a.t[i], a.R[i], a.size[i]), Box3D(b.t[i], b.R[i], b.size[i])
        assert box3d_intersection_volume(A, B) == pytest.approx(halfspace_volume(A, B), abs=1e-12)


def test_agrees_with_paper_monte_carlo_estimate():
    a, b = random_overlapping_pairs(40, seed=2)
    exact = paired_box3d_iou(a, b)
    idx = np.nonzero(exact > 0.1)[0][:8]
    assert len(idx) >= 6
    rng = np.random.default_rng(123)
    for i in idx:
        A, B = Box3D(a.t[i], a.R[i], a.size[i]), Box3D(b.t[i], b.R[i], b.size[i])
        assert abs(monte_carlo_box3d_iou(A, B, n=100_000, rng=rng) - exact[i]) <= 0.01
    assert monte_carlo_box3d_iou(cube(), cube(t=(5, 0, 0)), rng=0) == 0.0
    assert monte_carlo_box3d_iou(cube(), cube(), rng=0) == 1.0


def test_symmetric_and_bounded():
    a, b = random_overlapping_pairs(200, seed=3)
    ab, ba = paired_box3d_iou(a, b), paired_box3d_iou(b, a)
    np.testing.assert_allclose(ab, ba, atol=1e-12)
    assert np.all((ab >= 0) & (ab <= 1))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), scale=st.sampled_from([1e-3, 1.0, 1e3]),
       snap=st.booleans())
def test_property_bounded_symmetric_consistent(seed, scale, snap):
    """Random boxes, optionally snapped to axis-aligned/shared coordinates to provoke coincident faces."""
    rng = np.random.default_rng(seed)
    R = Rotation.random(2, random_state=seed).as_matrix()
    t = rng.normal(scale=0.3, size=(2, 3))
    s = rng.uniform(0.2, 1.5, size=(2, 3))
    if snap:
        R = np.stack([np.eye(3), rz(90 * rng.integers(0, 4))])
        t, s = np.round(t * 4) / 4, np.round(s * 4) / 4 + 0.25
    a, b = Box3D(t[0] * scale, R[0], s[0] * scale), Box3D(t[1] * scale, R[1], s[1] * scale)
    v = box3d_iou(a, b)
    assert 0.0 <= v <= 1.0
    assert v == pytest.approx(box3d_iou(b, a), abs=1e-12)
    assert v == pytest.approx(box3d_iou(a, b, 'qhull'), abs=1e-9)


def test_degenerate_boxes_do_not_raise():
    flat = cube(size=(1, 1, 0))
    assert box3d_iou(flat, cube()) == 0.0
    assert box3d_iou(flat, flat) == 0.0
    assert box3d_iou(cube(size=(0, 0, 0)), cube(size=(0, 0, 0))) == 0.0


def test_pairwise_shapes_inputs_and_sphere_rejection():
    a, b = random_overlapping_pairs(6, seed=4)
    M = pairwise_box3d_iou(a, b)
    assert M.shape == (6, 6)
    np.testing.assert_allclose(np.diag(M), paired_box3d_iou(a, b), atol=1e-15)
    params = encode_box_params(*a)                                         # [N,12] input
    np.testing.assert_allclose(pairwise_box3d_iou(params, b), M, atol=1e-12)
    singles = [Box3D(a.t[i], a.R[i], a.size[i]) for i in range(6)]         # list of single boxes
    np.testing.assert_allclose(pairwise_box3d_iou(singles, b), M, atol=1e-12)
    assert pairwise_box3d_iou(np.zeros((0, 12)), b).shape == (0, 6)
    assert pairwise_box3d_iou(a, []).shape == (6, 0)
    far = Box3D(a.t + 100.0, a.R, a.size)
    assert np.all(pairwise_box3d_iou(a, far) == 0)
    assert as_boxes(params[0]).t.shape == (1, 3)
    with pytest.raises(ValueError):
        paired_box3d_iou(a, Box3D(b.t[:2], b.R[:2], b.size[:2]))


# ----------------------------------------------------------------------------------------------------------------
# Nearly coincident boxes: tiny turns and shifts, axis relabellings, float32 round trips (issue 19)
# ----------------------------------------------------------------------------------------------------------------

def _random_boxes(n, seed):
    rng = np.random.default_rng(seed)
    return Box3D(rng.normal(scale=2.0, size=(n, 3)), Rotation.random(n, random_state=seed).as_matrix(),
                 rng.uniform(0.05, 0.5, size=(n, 3)))


def _deficit_bound(box: Box3D, moved_by: np.ndarray) -> np.ndarray:
    """Upper bound on ``1 - IoU`` of a box and a copy whose surface points moved at most ``moved_by`` [N]: each
    difference region lies in a shell of that thickness, so ``1 - IoU <= 2 · area · moved_by / volume`` (+1%)."""
    a, b, c = box.size.T
    return 1.01 * 2 * 2 * (a * b + b * c + c * a) * moved_by / (a * b * c)


def _signed_permutations():
    """The 24 rotations that permute a box's axes (signed permutation matrices with det +1)."""
    out = []
    for perm in ((0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1), (2, 1, 0), (1, 0, 2)):
        for signs in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3):
            P = np.zeros((3, 3))
            P[list(perm), range(3)] = signs
            if np.linalg.det(P) > 0:
                out.append(P)
    return np.array(out)


@pytest.mark.parametrize('angle', [1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4])
def test_box_against_a_copy_turned_by_a_hair_scores_about_one(angle):
    """Used to score 1/3 (every box at 1e-7 rad) or 0.71 (1e-5 rad); the true IoU is 1 - O(angle)."""
    a = _random_boxes(200, seed=11)
    rng = np.random.default_rng(12)
    axis = rng.normal(size=(200, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    b = a._replace(R=a.R @ Rotation.from_rotvec(angle * axis).as_matrix())
    iou = paired_box3d_iou(a, b)
    radius = 0.5 * np.linalg.norm(a.size, axis=1)                 # a surface point moves at most angle · radius
    assert np.all(iou <= 1.0)
    assert np.all(1.0 - iou <= _deficit_bound(a, angle * radius))
    if angle >= 1e-6:                                             # qhull (generic reference) agrees where it can
        np.testing.assert_allclose(iou, paired_box3d_iou(a, b, 'qhull'), atol=1e-9)


@pytest.mark.parametrize('shift', [1e-12, 1e-9, 1e-7])
def test_box_against_a_copy_shifted_by_a_hair_scores_about_one(shift):
    a = _random_boxes(200, seed=13)
    d = np.random.default_rng(14).normal(size=(200, 3))
    b = a._replace(t=a.t + shift * d / np.linalg.norm(d, axis=1, keepdims=True))
    iou = paired_box3d_iou(a, b)
    assert np.all(iou <= 1.0) and np.all(1.0 - iou <= _deficit_bound(a, np.full(200, shift)) + 1e-12)


def test_box_against_its_own_axis_relabelling_scores_one_also_through_float32():
    """``R -> R P`` with sizes permuted is the same box: exactly 1 in float64 (used to be 0 or 1/3 after a float32
    round trip); after rounding to float32 the deficit is bounded by how far the rounding moved the surface."""
    a = _random_boxes(200, seed=15)
    P = _signed_permutations()[np.random.default_rng(16).integers(0, 24, 200)]     # [200,3,3]
    relabelled = Box3D(a.t, a.R @ P, np.abs(np.einsum('nij,ni->nj', P, a.size)))   # size_j = size_perm(j)
    np.testing.assert_allclose(paired_box3d_iou(a, relabelled), 1.0, atol=1e-12)
    np.testing.assert_allclose(paired_box3d_iou(relabelled, a), 1.0, atol=1e-12)
    for box in (relabelled, a):
        f32 = Box3D(*(x.astype(np.float32).astype(np.float64) for x in box))
        moved = (np.linalg.norm(f32.t - box.t, axis=1) + np.linalg.norm(f32.R - box.R, ord=2, axis=(1, 2))
                 * 0.5 * np.linalg.norm(box.size, axis=1) + 0.5 * np.abs(f32.size - box.size).max(1))
        iou = paired_box3d_iou(a, f32)
        assert np.all(iou <= 1.0) and np.all(1.0 - iou <= _deficit_bound(a, 2 * moved))


def test_all_24_relabellings_of_one_box_and_coplanar_turned_boxes():
    box = cube(t=(0.3, -0.2, 2.0), R=Rotation.from_euler('xyz', [10, 20, 30], degrees=True).as_matrix(),
               size=(0.1, 0.2, 0.35))
    for P in _signed_permutations():
        other = Box3D(box.t, box.R @ P, np.abs(P.T @ box.size))
        assert box3d_iou(box, other) == pytest.approx(1.0, abs=1e-12)
    # Two boxes on the same table (bottom faces coplanar), turned about the table normal: exact against qhull,
    # and within float32 rounding of it after a float32 round trip of one of them.
    rng = np.random.default_rng(17)
    for angle in rng.uniform(0, 2 * np.pi, 20):
        low = cube(t=(0.05, 0.02, 0.1), R=box.R @ Rotation.from_euler('z', angle).as_matrix(), size=(0.3, 0.1, 0.2))
        low = low._replace(t=box.t + box.R @ np.array([0.02, -0.01, -(0.35 - 0.2) / 2]))
        exact = box3d_iou(box, low, 'qhull')
        assert exact > 0.05 and box3d_iou(box, low) == pytest.approx(exact, abs=1e-12)
        f32 = Box3D(*(x.astype(np.float32).astype(np.float64) for x in low))
        assert box3d_iou(box, f32) == pytest.approx(exact, abs=1e-5)

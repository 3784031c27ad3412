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

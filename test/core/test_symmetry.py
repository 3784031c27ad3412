"""symmetry: symmetry-aware IoU and orientation error on cases with known answers."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from string_perception.box_ops import Box3D
from string_perception.iou3d import paired_box3d_iou
from string_perception.symmetry import (CUBE_GROUP, nearest_relabelling, orientation_error_deg,
                                        paired_symmetric_iou, pairwise_symmetric_iou, symmetry_kind)

N = 40


def _objects(seed, square=True):
    """N random ground-truth boxes shaped like the generator's: square cross-section (``square``) about z."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.04, 0.16, N)
    other = d if square else d * rng.uniform(0.5, 0.9, N)
    return Box3D(rng.normal(size=(N, 3)), Rotation.random(N, random_state=seed).as_matrix(),
                 np.c_[d, other, rng.uniform(0.08, 0.3, N)])


def _turn_z(box: Box3D, angle) -> Box3D:
    angle = np.broadcast_to(angle, (len(box.t),))
    return box._replace(R=box.R @ Rotation.from_rotvec(np.c_[0 * angle, 0 * angle, angle]).as_matrix())


def _noisy(box: Box3D, seed) -> Box3D:
    rng = np.random.default_rng(seed)
    return Box3D(box.t + rng.normal(scale=0.02, size=box.t.shape), Rotation.random(N, random_state=seed).as_matrix(),
                 box.size * rng.uniform(0.7, 1.3, box.size.shape))


def test_kinds_follow_the_scene_classes():
    assert [symmetry_kind(n) for n in ('box', 'cylinder', 'sphere', 'cone', 'capsule', 'mug')] == \
        ['box', 'axial', 'sphere', 'axial', 'axial', 'box']
    assert CUBE_GROUP.shape == (24, 3, 3) and len({P.tobytes() for P in CUBE_GROUP}) == 24
    np.testing.assert_allclose(np.linalg.det(CUBE_GROUP), 1.0)


@pytest.mark.parametrize('name', ['cylinder', 'cone', 'capsule'])
def test_axial_object_turned_by_any_angle_about_its_axis_scores_one(name):
    gt = _objects(1)
    angle = np.random.default_rng(2).uniform(-np.pi, np.pi, N)
    strict = paired_box3d_iou(_turn_z(gt, angle), gt)
    assert strict.min() < 0.8                                              # the strict IoU punishes the turn
    np.testing.assert_allclose(paired_symmetric_iou(_turn_z(gt, angle), gt, [name] * N), 1.0, atol=1e-9)
    # a non-square cross-section has a 180 degree period: turned by pi it is the same box, by pi/2 it is not
    flat = _objects(3, square=False)
    np.testing.assert_allclose(paired_symmetric_iou(_turn_z(flat, np.pi + angle), flat, [name] * N), 1.0, atol=1e-9)


def test_sphere_cube_in_any_rotation_scores_one_against_an_axis_aligned_cube():
    rng = np.random.default_rng(4)
    d = rng.uniform(0.04, 0.16, N)
    t = rng.normal(size=(N, 3))
    cube = Box3D(t, Rotation.random(N, random_state=5).as_matrix(), np.c_[d, d, d])
    aligned = Box3D(t, np.broadcast_to(np.eye(3), (N, 3, 3)), cube.size)
    assert paired_box3d_iou(aligned, cube).min() < 0.8
    np.testing.assert_allclose(paired_symmetric_iou(aligned, cube, ['sphere'] * N), 1.0, atol=1e-9)
    np.testing.assert_allclose(paired_symmetric_iou(cube, aligned, ['sphere'] * N), 1.0, atol=1e-9)


def test_box_is_its_24_relabellings_so_symmetric_equals_strict():
    gt = _objects(6, square=False)
    pred = _noisy(gt, 7)
    strict = paired_box3d_iou(pred, gt)
    assert (strict > 0.1).sum() > N // 2
    for P in CUBE_GROUP:                                                   # same physical box: same IoU
        relabelled = Box3D(gt.t, gt.R @ P, np.abs(np.einsum('ij,ni->nj', P, gt.size)))
        np.testing.assert_allclose(paired_box3d_iou(pred, relabelled), strict, atol=1e-12)
    np.testing.assert_allclose(paired_symmetric_iou(pred, gt, ['box'] * N), strict, atol=0)


@pytest.mark.parametrize('name', ['cylinder', 'sphere'])
def test_symmetric_is_the_best_over_the_group(name):
    """Never below the strict IoU, and close to a brute-force search over the group (a cylinder's turn to 1e-3; a
    sphere's cube, searched from samples, to 0.02)."""
    n = 16 if name == 'cylinder' else 8
    gt, pred = _objects(8), _noisy(_objects(8), 9)
    gt, pred = (Box3D(*(x[:n] for x in b)) for b in (gt, pred))
    if name == 'sphere':
        gt = gt._replace(size=np.repeat(gt.size[:, :1], 3, axis=1))
    sym = paired_symmetric_iou(pred, gt, [name] * n)
    assert np.all(sym >= paired_box3d_iou(pred, gt)) and np.all(sym <= 1.0)
    if name == 'cylinder':
        members = [_turn_z(gt, a) for a in np.linspace(0, np.pi / 2, 181)]            # 0.5 degree steps
    else:
        members = [gt._replace(R=np.broadcast_to(R, gt.R.shape)) for R in Rotation.random(1000, random_state=10)
                   .as_matrix()]
    brute = np.max([paired_box3d_iou(pred, m) for m in members], axis=0)
    assert np.all(sym >= brute - (1e-3 if name == 'cylinder' else 0.02))
    assert (sym > 0.2).sum() > n // 3                                          # the check covers real overlaps


def test_pairwise_matches_paired_and_far_pairs_are_zero():
    gt = _objects(11)
    pred = _noisy(gt, 12)
    names = ['cylinder', 'sphere', 'box', 'cone'] * (N // 4)
    M = pairwise_symmetric_iou(Box3D(pred.t[:5], pred.R[:5], pred.size[:5]), gt, names)
    assert M.shape == (5, N)
    for i in range(5):
        np.testing.assert_allclose(M[i], paired_symmetric_iou(Box3D(*(np.repeat(x[i:i + 1], N, 0) for x in pred)),
                                                              gt, names), atol=1e-12)
    assert np.all(M[np.linalg.norm(pred.t[:5, None] - gt.t[None], axis=-1) > 1.0] == 0)
    assert pairwise_symmetric_iou(np.zeros((0, 12)), gt, names).shape == (0, N)
    with pytest.raises(ValueError):
        paired_symmetric_iou(pred, gt, names[:3])


def _rot(axis, deg):
    return Rotation.from_euler(axis, deg, degrees=True).as_matrix()


def test_orientation_error_known_angles():
    R = Rotation.random(1, random_state=13).as_matrix()[0]
    flip = R @ _rot('x', 180)                                   # symmetry axis (z) reversed
    tilt = R @ _rot('x', 30)                                    # axis tilted by 30 degrees
    cases = [('cylinder', flip, 0.0), ('capsule', flip, 0.0), ('cone', flip, 180.0), ('cylinder', tilt, 30.0),
             ('cylinder', R @ _rot('z', 77), 0.0), ('sphere', tilt, 0.0), ('box', R @ CUBE_GROUP[7], 0.0),
             ('box', R @ _rot('z', 10), 10.0), ('box', R @ _rot('z', 60), 30.0), ('box', R @ _rot('z', 45), 45.0)]
    names = [c[0] for c in cases]
    got = orientation_error_deg(np.stack([c[1] for c in cases]), np.repeat(R[None], len(cases), 0), names)
    np.testing.assert_allclose(got, [c[2] for c in cases], atol=1e-5)
    # nearest relabelling: R_pred P recovers R_gt when R_pred is a relabelling of it
    R_pred = np.stack([R @ P.T for P in CUBE_GROUP])
    P = nearest_relabelling(R_pred, np.repeat(R[None], 24, 0))
    np.testing.assert_allclose(R_pred @ P, np.repeat(R[None], 24, 0), atol=1e-12)

"""pairwise_box3d_iou near its early rejection: boxes whose bounding spheres barely overlap still get their exact IoU.

The rejection skips pairs whose centres are further apart than the sum of half diagonals; these boxes overlap in
a small corner or end region with centres just inside that distance, so a smaller rejection radius gives 0.
"""
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from string_perception import iou3d
from string_perception.box_ops import Box3D, encode_box_params, quaternion_to_rotation
from string_perception.iou3d import paired_box3d_iou, pairwise_box3d_iou


def box(t, size, R=np.eye(3)):
    return encode_box_params(np.asarray(t, dtype=np.float64), R, np.asarray(size, dtype=np.float64))


def test_cubes_overlapping_in_a_corner():
    # unit cubes, the second moved by 0.95 along each axis: overlap 0.05^3; centre distance 1.645 vs radii 2 x 0.866
    a = box([0.0, 0.0, 3.0], [1.0, 1.0, 1.0])
    b = box([0.95, 0.95, 3.95], [1.0, 1.0, 1.0])
    inter = 0.05 ** 3
    assert pairwise_box3d_iou(a[None], b[None])[0, 0] == pytest.approx(inter / (2.0 - inter), rel=1e-6)


def test_long_thin_boxes_overlapping_at_their_ends():
    # 10 m x 0.1 x 0.1 rods on one line, centres 9.9 m apart: the last 0.1 m overlap; radius ~5.001 each
    a = box([0.0, 0.0, 3.0], [10.0, 0.1, 0.1])
    b = box([9.9, 0.0, 3.0], [10.0, 0.1, 0.1])
    inter = 0.1 * 0.1 * 0.1
    assert pairwise_box3d_iou(a[None], b[None])[0, 0] == pytest.approx(inter / (0.2 - inter), rel=1e-6)


def test_pairwise_equals_paired_for_every_pair_near_the_rejection_distance():
    # random boxes placed at 0.8-1.0 x the sum of their half diagonals: pairwise (with rejection) must equal the
    # paired IoU (no rejection) for every pair, and some of these pairs must overlap
    rng = np.random.default_rng(7)
    n = 40
    size_a, size_b = rng.uniform(0.1, 1.0, (n, 3)), rng.uniform(0.1, 1.0, (n, 3))
    reach = 0.5 * (np.linalg.norm(size_a, axis=1) + np.linalg.norm(size_b, axis=1))
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    Ra, Rb = quaternion_to_rotation(q), quaternion_to_rotation(np.roll(q, 1, axis=1))
    ta = np.tile([0.0, 0.0, 3.0], (n, 1))
    tb = ta + direction * reach[:, None] * rng.uniform(0.8, 1.0, (n, 1))
    A = np.stack([box(ta[i], size_a[i], Ra[i]) for i in range(n)])
    B = np.stack([box(tb[i], size_b[i], Rb[i]) for i in range(n)])
    paired = paired_box3d_iou(A, B)
    pairwise = np.array([pairwise_box3d_iou(A[i:i + 1], B[i:i + 1])[0, 0] for i in range(n)])
    np.testing.assert_array_equal(pairwise, paired)
    assert np.count_nonzero(paired > 0) >= 3
    # the batched call too (every pair of A x B, compared on the diagonal)
    np.testing.assert_array_equal(np.diag(pairwise_box3d_iou(A, B)), paired)


def test_parallel_edges_and_faces_raise_no_numpy_warnings():
    # edges parallel to the other box's faces divide by zero inside the clipping: the result is exact and silent
    a = box([0.0, 0.0, 3.0], [1.0, 1.0, 1.0])
    turned = quaternion_to_rotation(np.array([0.0, 0.0, np.sin(np.pi / 8), np.cos(np.pi / 8)]))   # 45 deg about z
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        iou = pairwise_box3d_iou(np.stack([a]), np.stack([box([0.5, 0.0, 3.0], [1.0, 1.0, 1.0]),
                                                          box([0.0, 0.0, 3.0], [1.0, 1.0, 1.0], turned)]))
    assert iou[0, 0] == pytest.approx(1 / 3, abs=1e-12)
    assert iou[0, 1] == pytest.approx(1 / np.sqrt(2), abs=1e-9)       # octagon 2(sqrt2 - 1) over 2 - that


# ----------------------------------------------------------------------------------------------------------------
# Exact contact cases, nesting, axis snapping, the method switch and the Monte-Carlo estimate (mutation testing,
# docs/results/mutation_testing.md section 3). Every expected value is computed by hand in the comment beside it.
# ----------------------------------------------------------------------------------------------------------------

METHODS = ('faces', 'qhull')


def boxes(*pairs):
    """Box3D batch from (t, size, R) triples."""
    t, s, R = zip(*pairs)
    return Box3D(np.array(t, float), np.array(R, float), np.array(s, float))


def cube_box(t=(0.0, 0.0, 0.0), size=(1.0, 1.0, 1.0), R=np.eye(3)):
    return Box3D(np.asarray(t, float), np.asarray(R, float), np.asarray(size, float))


def rot(axis, deg):
    return Rotation.from_euler(axis, deg, degrees=True).as_matrix()


def octagon_area(deg):
    """Overlap of two concentric unit squares turned by ``deg``: the four cut-off corner triangles have legs
    h·cos, h·sin with h(1 + sin + cos) = 1, so the area is 1 - 2 h² sin cos (45 deg: 2(sqrt 2 - 1))."""
    s, c = np.sin(np.radians(deg)), np.cos(np.radians(deg))
    h = 1.0 / (1.0 + s + c)
    return 1.0 - 2.0 * h * h * s * c


@pytest.mark.parametrize('method', METHODS)
def test_the_method_argument_picks_the_algorithm_at_every_entry_point(method, monkeypatch):
    # a generic overlap (neither nested), so face clipping or one qhull hull is really needed
    calls = {'faces': 0, 'qhull': 0}
    clip, hull = iou3d._clip_volumes, iou3d._hull_volume

    def counting_clip(*args):
        calls['faces'] += 1
        return clip(*args)

    def counting_hull(*args):
        calls['qhull'] += 1
        return hull(*args)

    monkeypatch.setattr(iou3d, '_clip_volumes', counting_clip)
    monkeypatch.setattr(iou3d, '_hull_volume', counting_hull)
    a, b = cube_box(), cube_box(t=(0.5, 0.0, 0.0))                  # overlap 0.5 x 1 x 1: IoU 1/3
    assert iou3d.box3d_iou(a, b, method) == pytest.approx(1 / 3, abs=1e-12)
    assert iou3d.pairwise_box3d_iou(a, b, method)[0, 0] == pytest.approx(1 / 3, abs=1e-12)
    assert iou3d.paired_box3d_iou(a, b, method)[0] == pytest.approx(1 / 3, abs=1e-12)
    assert iou3d.box3d_intersection_volume(a, b, method) == pytest.approx(0.5, abs=1e-12)
    other = 'qhull' if method == 'faces' else 'faces'
    assert calls[method] == 4 and calls[other] == 0


def test_bad_method_and_unequal_counts_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match=r"method must be 'faces' or 'qhull', got 'hull'"):
        iou3d.box3d_iou(cube_box(), cube_box(), 'hull')
    with pytest.raises(ValueError, match='paired IoU needs equal counts, got 2 and 1'):
        iou3d.paired_box3d_iou(boxes(((0, 0, 0), (1, 1, 1), np.eye(3)), ((0, 0, 0), (1, 1, 1), np.eye(3))),
                               cube_box())


@pytest.mark.parametrize('method', METHODS)
def test_large_nested_boxes_in_either_order(method):
    # a 3 m cube turned by 10 deg (reach 1.5 (cos 10 + sin 10) = 1.74 m) inside a 4 m cube moved by 0.1 m:
    # intersection 27, IoU 27/64, whichever box comes first
    small, big = cube_box(size=(3, 3, 3), R=rot('z', 10)), cube_box(t=(0.1, 0.1, 0.0), size=(4, 4, 4))
    assert iou3d.box3d_intersection_volume(small, big, method) == 27.0
    assert iou3d.box3d_intersection_volume(big, small, method) == 27.0
    assert iou3d.box3d_iou(small, big, method) == pytest.approx(27 / 64, abs=1e-12)
    assert iou3d.box3d_iou(big, small, method) == pytest.approx(27 / 64, abs=1e-12)


@pytest.mark.parametrize('method', METHODS)
def test_a_batch_of_nested_and_overlapping_pairs_scores_each_pair_alone(method):
    big = ((0, 0, 0), (2, 2, 2), np.eye(3))
    a = boxes(big, big, ((0, 0, 0), (0.5, 1, 1), rot('y', 20)), ((0.5, 0, 0), (1, 1, 1), np.eye(3)))
    b = boxes(((0.1, 0, 0), (1, 1, 0.5), rot('x', 10)),          # inside A: 0.5 / 8
              ((-0.2, 0.3, 0), (0.5, 1, 1), rot('z', 40)),       # inside A: 0.5 / 8
              big,                                                # A inside B: 0.5 / 8
              ((0, 0, 0), (1, 1, 1), np.eye(3)))                  # overlap 0.5: 1/3
    np.testing.assert_allclose(iou3d.paired_box3d_iou(a, b, method), [1 / 16, 1 / 16, 1 / 16, 1 / 3], atol=1e-12)
    np.testing.assert_array_equal(iou3d._intersection_volumes(a, b, method)[:3], [0.5, 0.5, 0.5])


@pytest.mark.parametrize('method', METHODS)
def test_a_nested_box_keeps_exactly_its_own_volume(method):
    # turned boxes inside a 2 m cube, free or resting on its floor (a face in the floor plane): the intersection
    # is the inner box's volume bit for bit (no clipping, no hull, hence no rounding), in a batch and alone. With
    # the outer box first, a face on the floor counts as sticking out (B's side of a shared plane is open), so
    # those are clipped and exact only to rounding
    sizes = np.array([[0.3, 0.2, 0.4], [0.7, 0.1, 0.3], [0.45, 0.35, 0.25], [0.9, 0.6, 0.15]])
    inner, outer = [], []
    for i, deg in enumerate(range(5, 165, 10)):
        s = sizes[i % 4]
        z = -1.0 + s[2] / 2 if i % 2 else 0.1                     # odd: on the floor z = -1
        inner.append(((0.1, -0.2, z), s, rot('z', deg) if i % 2 else rot('xyz', [deg, 2 * deg, 3 * deg])))
        outer.append(((0, 0, 0), (2, 2, 2), np.eye(3)))
    inner.append(((1.0, 0, 0), (1, 1, 1), np.eye(3)))              # and a pair that really overlaps: 1/2
    outer.append(((0, 0, 0), (2, 2, 2), np.eye(3)))
    a, b = boxes(*inner), boxes(*outer)
    expected = np.prod(a.size, axis=1)
    expected[-1] = 0.5
    np.testing.assert_array_equal(iou3d._intersection_volumes(a, b, method), expected)
    reverse = iou3d._intersection_volumes(b, a, method)
    np.testing.assert_array_equal(reverse[:-1:2], expected[:-1:2])
    np.testing.assert_allclose(reverse[1::2], expected[1::2], rtol=0, atol=1e-15)
    expected = expected[:-1]
    outer_box = cube_box(size=(2, 2, 2))
    for i in range(len(expected)):
        one = Box3D(a.t[i], a.R[i], a.size[i])
        assert iou3d.box3d_intersection_volume(one, outer_box, method) == expected[i]
        if i % 2 == 0:
            assert iou3d.box3d_intersection_volume(outer_box, one, method) == expected[i]


@pytest.mark.parametrize('method', METHODS)
def test_boxes_touching_face_to_face_give_exactly_zero(method):
    # A's -x face lies in B's +x face plane (x = 0.5), A turned about x by 10..170 deg; also an edge of a 45 deg
    # box lying on B's face: intersection exactly 0 with the turned box first (separated by one of its planes).
    # With the axis-aligned box first the face clipping can leave a sliver of rounding size (7.7e-17 at 70 deg)
    pairs_a, pairs_b = [], []
    for deg in range(10, 180, 20):
        pairs_a.append(((1.0, 0.1, -0.05), (1, 1, 1), rot('x', deg)))
        pairs_b.append(((0, 0, 0), (1, 1, 1), np.eye(3)))
    pairs_a.append(((0.5 + np.sqrt(0.5), 0.0, 0.0), (1, 1, 1), rot('z', 45)))   # edge on B's +x face
    pairs_b.append(((0, 0, 0), (1, 1, 1), np.eye(3)))
    a, b = boxes(*pairs_a), boxes(*pairs_b)
    assert np.all(iou3d._intersection_volumes(a, b, method)[:-1] == 0.0)
    np.testing.assert_allclose(iou3d._intersection_volumes(b, a, method)[:-1], 0.0, rtol=0, atol=1e-15)
    assert iou3d.paired_box3d_iou(a, b, method)[-1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize('method', METHODS)
def test_a_box_with_one_corner_cut_off(method):
    # a 10 m box whose face is the plane x + y + z = -1.2 cuts corner 0 (-0.5, -0.5, -0.5) off a unit cube: a
    # tetrahedron with legs 0.3, volume 0.3^3 / 6; the other seven corners are inside. Both argument orders.
    n = np.ones(3) / np.sqrt(3)
    R = np.linalg.qr(np.column_stack([n, [1, -1, 0], [1, 1, -2]]))[0]
    R = R * np.sign(np.diag(R.T @ np.column_stack([n, [1, -1, 0], [1, 1, -2]])))   # first column = +n
    R[:, 2] = np.cross(R[:, 0], R[:, 1])
    big = Box3D(n * (-1.2 / np.sqrt(3) + 5.0), R, np.full(3, 10.0))       # its -x face: n·x = -1.2
    cut = 1.0 - 0.3 ** 3 / 6
    assert iou3d.box3d_intersection_volume(cube_box(), big, method) == pytest.approx(cut, abs=1e-12)
    assert iou3d.box3d_intersection_volume(big, cube_box(), method) == pytest.approx(cut, abs=1e-12)


@pytest.mark.parametrize('method', METHODS)
def test_shared_faces_and_degenerate_boxes_raise_no_numpy_warnings(method):
    # edges parallel to (and lying in) the other box's planes divide by zero and 0/0; zero-size boxes give 0/0 in
    # the IoU itself: all of it silent, with exact results
    flat = cube_box(size=(1, 1, 0))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert iou3d.box3d_iou(cube_box(), cube_box(t=(0.5, 0, 0)), method) == pytest.approx(1 / 3, abs=1e-12)
        assert iou3d.box3d_iou(flat, flat, method) == 0.0
        assert iou3d.box3d_iou(cube_box(size=(0, 0, 0)), cube_box(size=(0, 0, 0)), method) == 0.0
        assert iou3d.paired_box3d_iou(flat, flat, method)[0] == 0.0


def test_two_axes_within_the_snap_angle_make_the_box_exactly_parallel():
    # turned by 0.8e-7 rad about x and about y: two axes are 0.8e-7 off a B axis, the third 1.13e-7. Two near
    # axes snap all three (a signed permutation): the same box exactly, IoU 1
    turned = Rotation.from_rotvec([0.8e-7, 0.8e-7, 0.0]).as_matrix()
    a, b = cube_box(size=(0.4, 0.6, 0.8)), cube_box(size=(0.4, 0.6, 0.8), R=turned)
    assert iou3d.box3d_iou(a, b) == 1.0
    assert iou3d.box3d_iou(b, a) == 1.0


def test_one_axis_within_the_snap_angle_is_made_parallel_in_a_batch():
    # boxes turned by 30 and 20 deg about z and tilted 5e-8 rad: the z axis snaps (the z faces become coplanar)
    # and the other two axes stay unit length in the z = 0 plane, pair by pair: IoU = octagon / (2 - octagon)
    degs = (30.0, 20.0)
    a = boxes(*[((0, 0, 0), (1, 1, 1), rot('z', d) @ rot('x', np.degrees(5e-8))) for d in degs])
    b = boxes(*[((0, 0, 0), (1, 1, 1), np.eye(3))] * 2)
    expected = [octagon_area(d) / (2 - octagon_area(d)) for d in degs]
    np.testing.assert_allclose(iou3d.paired_box3d_iou(a, b), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(iou3d.paired_box3d_iou(b, a), expected, rtol=0, atol=1e-12)


def alone(a, b, method='faces'):
    """Each pair of a batch, scored in a call of its own."""
    return np.array([iou3d.box3d_iou(Box3D(a.t[i], a.R[i], a.size[i]), Box3D(b.t[i], b.R[i], b.size[i]), method)
                     for i in range(len(a.t))])


def test_a_batch_where_only_some_pairs_are_clipped_by_a_plane():
    # pair 0 (a thin 1.9 m plank turned 45 deg about z, above B's middle) is not clipped by B's -x plane, nor B
    # by its -x plane; pair 1 pokes a corner out of B's -x face, so its faces grow to 5 vertices while pair 0
    # waits (the batch's polygons are widened): each pair must score as alone, and as qhull does
    for t1 in ([-0.5, 0.1, 0.0], [-0.7, 0.2, 0.1]):
        a = boxes(((0.3, 0, 0.8), (1.9, 0.3, 1), rot('z', 45)), (t1, (1, 1, 1), rot('xyz', [20, 30, 40])))
        b = boxes(*[((0, 0, 0), (1, 1, 1), np.eye(3))] * 2)
        iou = iou3d.paired_box3d_iou(a, b)
        np.testing.assert_array_equal(iou, alone(a, b))
        np.testing.assert_allclose(iou, alone(a, b, 'qhull'), rtol=0, atol=1e-12)
        assert np.all(iou > 0.03)


def test_many_sided_polygons_keep_their_vertex_order_in_a_batch():
    # pair 0 clips a face to 9 or more vertices before the last plane, so the whole batch's polygons are 9+ slots
    # wide when pair 1's are compacted: the kept vertices must stay in order (a stable sort), or pair 1's faces
    # are scrambled (0.08 instead of 0.296 without it)
    a = boxes(((-0.018, -0.167, 0.089), (0.909, 0.517, 1.331), rot('xyz', [-3.0, 49.4, 13.9])),
              ((-0.006, 0.148, -0.107), (1.221, 0.403, 0.975), rot('xyz', [-104.9, -2.1, -123.0])))
    b = boxes(((-0.114, 0.159, -0.001), (1.314, 0.877, 0.67), rot('xyz', [124.8, 13.4, -170.7])),
              ((-0.008, 0.003, -0.01), (0.696, 0.933, 0.727), rot('xyz', [93.2, 27.4, -71.7])))
    iou = iou3d.paired_box3d_iou(a, b)
    np.testing.assert_allclose(iou, alone(a, b), rtol=0, atol=1e-12)
    np.testing.assert_allclose(iou, alone(a, b, 'qhull'), rtol=0, atol=1e-12)
    assert iou[1] > 0.25


def test_monte_carlo_edge_cases():
    # zero-size boxes: both volumes 0 -> 0 (no division by zero); tiny disjoint boxes 3 um apart: no point is
    # inside (the inside tolerance is relative to the box, 1e-10 x its half size); the default is 100 000 points
    # and a seed gives the same estimate twice
    dot = cube_box(t=(0, 0, 3), size=(0, 0, 0))
    assert iou3d.monte_carlo_box3d_iou(dot, dot, n=100, rng=0) == 0.0
    flat = cube_box(t=(0, 0, 3), size=(1, 1, 0))
    assert iou3d.monte_carlo_box3d_iou(flat, flat, n=100, rng=0) == 0.0
    tiny = cube_box(t=(0, 0, 3), size=(1e-6, 1e-6, 1e-6))
    assert iou3d.monte_carlo_box3d_iou(tiny, tiny._replace(t=np.array([3e-6, 0, 3])), n=1000, rng=0) == 0.0
    a, b = cube_box(), cube_box(t=(0.3, 0.2, 0.1), R=rot('z', 25))
    first = iou3d.monte_carlo_box3d_iou(a, b, rng=5)
    assert first == iou3d.monte_carlo_box3d_iou(a, b, n=100_000, rng=5)
    assert first == iou3d.monte_carlo_box3d_iou(a, b, rng=np.random.default_rng(5))

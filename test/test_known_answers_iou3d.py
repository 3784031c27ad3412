"""pairwise_box3d_iou near its early rejection: boxes whose bounding spheres barely overlap still get their exact IoU.

The rejection skips pairs whose centres are further apart than the sum of half diagonals; these boxes overlap in
a small corner or end region with centres just inside that distance, so a smaller rejection radius gives 0.
"""
import warnings

import numpy as np
import pytest

from string_perception.box_ops import encode_box_params, quaternion_to_rotation
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

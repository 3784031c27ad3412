"""runtime/nms.py and iou3d_bounds.py (issue 37): the bounds bracket the exact IoU, the edge formula equals it, and
the NMS keeps exactly the boxes the former decoder kept (benchmarks/common/postprocess_reference.py), on synthetic
clusters and on 1,000 frames of the shipped model."""
import hashlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from benchmarks import postprocess_latency as bench
from benchmarks.common import postprocess_reference as ref
from benchmarks.common.postprocess_reference import decode_detections_reference, greedy_nms_reference, same_detections
from string_perception.box_ops import Box3D, box_symmetries, cross3, rotation_from_6d
from string_perception.iou3d import paired_box3d_iou
from string_perception.iou3d_bounds import edge_intersection_volume, edge_iou, iou_bounds, relative_pose
from string_perception.runtime import nms
from string_perception.runtime.postprocess import decode_detections



def _pairs(seed, n, spread=0.3, near_aligned=0.0, angle=0.1):
    """n random box pairs around the origin; a fraction ``near_aligned`` of B's rotations is A's turned by at most
    ``angle`` rad."""
    rng = np.random.default_rng(seed)
    ta = rng.normal(size=(n, 3)) * spread
    tb = ta + rng.normal(size=(n, 3)) * spread
    Ra = Rotation.random(n, random_state=seed).as_matrix()
    Rb = Rotation.random(n, random_state=seed + 1).as_matrix()
    m = int(n * near_aligned)
    Rb[:m] = Ra[:m] @ Rotation.from_rotvec(rng.normal(size=(m, 3)) * angle).as_matrix()
    return ta, Ra, rng.uniform(0.05, 1.0, (n, 3)), tb, Rb, rng.uniform(0.05, 1.0, (n, 3))


def _check_against_exact(ta, Ra, sa, tb, Rb, sb):
    exact = paired_box3d_iou(Box3D(ta, Ra, sa), Box3D(tb, Rb, sb))
    t, R = relative_pose(ta, Ra, tb, Rb)
    lower, upper = iou_bounds(t, R, sa, sb)
    assert np.all(lower <= exact + 1e-12) and np.all(exact <= upper + 1e-12)
    iou, reliable = edge_iou(t, R, sa, sb, lower, upper)
    np.testing.assert_allclose(iou[reliable], exact[reliable], rtol=0, atol=1e-9)
    return exact, lower, upper, reliable


def test_cross3_is_np_cross_bit_for_bit():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 50, 4, 3)) * 10.0 ** rng.integers(-8, 8, size=(2, 50, 4, 1))
    assert np.array_equal(cross3(a, b), np.cross(a, b))


def test_rotation_functions_are_bit_identical_to_the_former_ones():
    """box_ops.rotation_from_6d / rotation_to_quaternion were made faster for issue 37 with the same float ops."""
    from string_perception.box_ops import rotation_to_quaternion
    rng = np.random.default_rng(0)
    x6 = np.concatenate([rng.normal(size=(500, 6)), np.zeros((2, 6)), np.tile([1.0, 0, 0, 2, 0, 0], (2, 1)),
                         rng.normal(size=(20, 6)).astype(np.float32)])
    x6[-3:, 3:] = 3.0 * x6[-3:, :3]                                 # parallel columns: the fallback
    assert np.array_equal(rotation_from_6d(x6), ref.rotation_from_6d(x6))
    R = np.concatenate([Rotation.random(500, random_state=1).as_matrix(), box_symmetries(), -np.eye(3)[None]])
    for Rs in (R, R[0], R[:24].reshape(2, 3, 4, 3, 3)):
        assert np.array_equal(rotation_to_quaternion(Rs), ref.rotation_to_quaternion(Rs))


@pytest.mark.parametrize('near_aligned, angle', [(0.0, 0.0), (0.5, 0.1), (0.5, 1e-3), (0.5, 1e-6), (1.0, 1e-9)])
def test_bounds_bracket_and_edge_formula_equals_the_exact_iou(near_aligned, angle):
    exact, lower, upper, reliable = _check_against_exact(*_pairs(1, 3000, near_aligned=near_aligned, angle=angle))
    assert np.mean((exact > 0.05) & (exact < 0.95)) > 0.2          # the pairs overlap partly, not trivially
    if angle >= 0.1:
        assert reliable.mean() > 0.99                              # the edge formula answers nearly all
    if near_aligned == 1.0:
        assert not reliable.any()                                  # nearly parallel axes: the exact IoU decides


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), spread=st.sampled_from([0.01, 0.1, 0.5]),
       scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_property_bounds_never_exclude_the_exact_iou(seed, spread, scale):
    ta, Ra, sa, tb, Rb, sb = _pairs(seed, 20, spread=spread, near_aligned=0.5, angle=0.05)
    _check_against_exact(ta * scale + 1e3 * scale, Ra, sa * scale, tb * scale + 1e3 * scale, Rb, sb * scale)


def test_known_answers():
    I = np.eye(3)[None]
    one = np.ones((1, 3))
    # unit cubes shifted by 0.5 along x: IoU 0.5 / 1.5
    exact, lower, upper, _ = _check_against_exact(np.zeros((1, 3)), I, one, np.array([[0.5, 0, 0]]), I, one)
    assert exact[0] == pytest.approx(1 / 3) and lower[0] == pytest.approx(1 / 3, abs=1e-5)
    assert upper[0] == pytest.approx(1 / 3, abs=1e-5)
    # a cube and the same cube turned 45 degrees about z: a regular octagon prism, IoU sqrt(2)/2; the z axes are
    # parallel, so the edge formula leaves it to the exact IoU
    Rz = Rotation.from_euler('z', 45, degrees=True).as_matrix()[None]
    exact, lower, upper, reliable = _check_against_exact(np.zeros((1, 3)), Rz, one, np.zeros((1, 3)), I, one)
    assert exact[0] == pytest.approx(np.sqrt(2) / 2, abs=1e-12) and not reliable[0]
    # the same turned 0.01 rad about x as well: no axis parallel, the edge formula answers, equal to the exact IoU
    Rzx = Rz @ Rotation.from_euler('x', 0.01).as_matrix()[None]
    t, R = relative_pose(np.zeros((1, 3)), Rzx, np.zeros((1, 3)), I)
    vol, reliable = edge_intersection_volume(t, R, one, one)
    exact = paired_box3d_iou(Box3D(np.zeros((1, 3)), Rzx, one), Box3D(np.zeros((1, 3)), I, one))
    assert reliable[0] and edge_iou(t, R, one, one)[0][0] == pytest.approx(exact[0], abs=1e-12)
    assert vol[0] == pytest.approx(2 * (np.sqrt(2) - 1), abs=0.02)
    # touching faces, a gap, nesting, the same box relabelled by a symmetry
    for tb, sb, want in (([1.0, 0, 0], one, 0.0), ([1.5, 0, 0], one, 0.0), ([0.1, 0, 0], 0.5 * one, 0.125)):
        exact, lower, upper, _ = _check_against_exact(np.zeros((1, 3)), I, one, np.array([tb]), I, sb)
        assert exact[0] == pytest.approx(want) and upper[0] == pytest.approx(want, abs=1e-5)
    P = box_symmetries()[5]
    sizes = np.array([[0.2, 0.3, 0.4]])
    exact, lower, upper, _ = _check_against_exact(np.zeros((1, 3)), I, sizes, np.zeros((1, 3)), P[None],
                                                  sizes @ np.abs(P))
    assert exact[0] == 1.0 and lower[0] > 1 - 1e-4 and upper[0] == 1.0


def _clusters(seed, k, centres, jitter, angle):
    """k candidate boxes jittered around a few centres (the duplicates NMS is for), sorted as scores would be."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(-0.5, 0.5, (centres, 3))
    which = rng.integers(0, centres, k)
    t = c[which] + rng.normal(size=(k, 3)) * jitter
    base = Rotation.random(centres, random_state=seed).as_matrix()
    R = base[which] @ Rotation.from_rotvec(rng.normal(size=(k, 3)) * angle).as_matrix()
    R = rotation_from_6d(np.concatenate([R[:, :, 0], R[:, :, 1]], axis=1).astype(np.float32))   # as decoded
    size = rng.uniform(0.1, 0.4, (centres, 3))[which] * rng.uniform(0.8, 1.25, (k, 3))
    return t, R, size


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 60), centres=st.integers(1, 4),
       jitter=st.sampled_from([0.0, 0.01, 0.05, 0.15]), angle=st.sampled_from([0.0, 1e-8, 1e-3, 0.2, 1.0]),
       nms_iou=st.sampled_from([0.01, 0.1, 0.3, 0.5, 0.9, 1.0]), groups=st.integers(1, 3),
       max_det=st.integers(1, 60))   # decode_detections returns early for 0
def test_property_greedy_nms_keeps_what_the_former_nms_kept(seed, k, centres, jitter, angle, nms_iou, groups,
                                                             max_det):
    t, R, size = _clusters(seed, k, centres, jitter, angle)
    cls = np.random.default_rng(seed).integers(0, groups, k)
    assert nms.greedy_nms(t, R, size, cls, nms_iou, max_det) == greedy_nms_reference(t, R, size, cls, nms_iou,
                                                                                        max_det)


def test_every_way_of_settling_a_pair_agrees_with_the_exact_iou(monkeypatch):
    """Bounds, edge formula and exact IoU each settle some of these pairs; all answers are the exact IoU's."""
    t, R, size = _clusters(3, 120, 3, 0.05, 0.2)
    i, j = nms.candidate_pairs(t, size, np.zeros(len(t), np.int64), 0.3)
    exact = paired_box3d_iou(Box3D(t[i], R[i], size[i]), Box3D(t[j], R[j], size[j]))
    tr, Rr = relative_pose(t[i], R[i], t[j], R[j])
    lower, upper = iou_bounds(tr, Rr, size[i], size[j])
    by_bounds = (lower - 1e-9 > 0.3) | (upper + 1e-9 < 0.3)
    assert 0.1 < by_bounds.mean() < 0.95                           # both ways are exercised
    for thr in (0.1, 0.3, 0.6):
        np.testing.assert_array_equal(nms._suppresses(t, R, size, i, j, thr), exact > thr)
    calls = []
    real = nms.paired_box3d_iou
    monkeypatch.setattr(nms, 'paired_box3d_iou', lambda a, b: calls.append(len(a.t)) or real(a, b))
    monkeypatch.setattr(nms, '_EDGE_MARGIN', 2.0)                  # nothing certain from the edge formula
    np.testing.assert_array_equal(nms._suppresses(t, R, size, i, j, 0.3), exact > 0.3)
    assert calls == [np.count_nonzero(~by_bounds)]                 # only the pairs the bounds left open


# ------------------------------------------------------------------------------------------------------------------
# The shipped model: 1,000 generated frames of the test split, decoded by the former and the present decoder
# ------------------------------------------------------------------------------------------------------------------

NUM_FRAMES = 1000


@pytest.fixture(scope='module')
def shipped_outputs(model_path, request):
    """The shipped model's outputs on frames 2e9 .. 2e9+999 (128x128), cached in pytest's cache folder by the
    model's sha256 (the comparison needs realistic outputs, old and new decoders see the same ones)."""
    key = hashlib.sha256(Path(model_path).read_bytes()).hexdigest()[:16] + f'_{NUM_FRAMES}'
    cache = getattr(request.config, 'cache', None)
    path = cache.mkdir('shipped_model_outputs') / f'{key}.npz' if cache is not None else None
    if path is not None and path.exists():
        with np.load(path, allow_pickle=False) as z:
            return z['boxes'], z['logits'], tuple(str(s) for s in z['labels']), float(z['threshold'])
    boxes, logits, labels, threshold = bench.shipped_model_outputs(model_path, NUM_FRAMES, frame_hw=(128, 128))
    if path is not None:
        np.savez(path, boxes=boxes, logits=logits, labels=np.array(labels), threshold=threshold)
    return boxes, logits, labels, threshold


@pytest.mark.slow
@pytest.mark.parametrize('threshold, agnostic, multi_label, max_det', [
    ('model', False, False, 50), ('model', True, False, 50), (0.05, False, False, 50), (0.05, True, False, 50),
    (0.05, False, True, 50), (0.05, False, False, 3)])
def test_shipped_model_frames_keep_exactly_the_former_boxes(shipped_outputs, threshold, agnostic, multi_label,
                                                            max_det):
    boxes, logits, labels, recommended = shipped_outputs
    assert boxes.shape[:2] == (NUM_FRAMES, 256) and recommended == pytest.approx(0.47)
    thr = recommended if threshold == 'model' else threshold
    kw = dict(score_threshold=thr, nms_iou=0.3, class_agnostic=agnostic, multi_label=multi_label,
              max_detections=max_det)
    kept = suppressed = 0
    for f, (b, lg) in enumerate(zip(boxes, logits)):
        new = decode_detections(b, lg, labels, **kw)
        ref = decode_detections_reference(b, lg, labels, **kw)
        assert same_detections(new, ref), f'frame {f}: tokens {new.token_indices} vs {ref.token_indices}'
        kept += len(new)
        without_nms = decode_detections(b, lg, labels, **{**kw, 'nms_iou': 1.0, 'max_detections': 200})
        suppressed += len(without_nms) - len(new)                   # (with max_det 3: or past the cap)
    assert kept > NUM_FRAMES and suppressed > 5 * NUM_FRAMES        # NMS had real work on these frames


def test_benchmark_prints_old_and_new_side_by_side(capsys):
    """benchmarks/postprocess_latency.py runs end to end on 2 frames: a row per threshold, no frame differing."""
    assert bench.main(['--frames', '2', '--frame-size', '128', '128', '--thresholds', '0.47', '0.05']) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:4] in ('0.47', '0.05')]
    assert [r[0] for r in rows] == ['0.47', '0.05'] and all(r[-3] == '0' for r in rows)   # frames differing

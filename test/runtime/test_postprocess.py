"""runtime/postprocess.py: score threshold, top-k, class-wise oriented 3D NMS, quaternions, bad outputs."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from string_perception.box_ops import encode_box_params, quaternion_to_rotation, rotation_from_6d
from string_perception.runtime.errors import OutputError
from string_perception.runtime.postprocess import Detections, decode_detections

LABELS = ('cube', 'cylinder', 'sphere')


def _rot_z(deg):
    a = np.deg2rad(deg)
    return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1.0]])


def _rows(boxes):
    """[(t, R, size), ...] -> [N,12] float32 model rows."""
    return np.stack([encode_box_params(np.asarray(t, float), R, np.asarray(s, float))
                     for t, R, s in boxes]).astype(np.float32)


def _logits(classes, scores, C=3):
    """Per-token best class and score -> [N,C] logits (other classes far below)."""
    lg = np.full((len(classes), C), -10.0, np.float32)
    for i, (c, s) in enumerate(zip(classes, scores)):
        lg[i, c] = np.log(s / (1 - s))
    return lg


def _separated(n):
    """n boxes 1 m apart (never overlapping)."""
    return [([i * 1.0, 0.0, 2.0], _rot_z(10 * i), [0.2, 0.3, 0.4]) for i in range(n)]


def test_threshold_and_sorting():
    b = _rows(_separated(4))
    d = decode_detections(b, _logits([0, 1, 2, 0], [0.2, 0.9, 0.5, 0.3]), LABELS, score_threshold=0.3)
    np.testing.assert_allclose(d.scores, [0.9, 0.5, 0.3], rtol=1e-5)
    assert d.class_names == ['cylinder', 'sphere', 'cube'] and d.class_ids.tolist() == [1, 2, 0]
    assert d.token_indices.tolist() == [1, 2, 3]
    np.testing.assert_allclose(d.translations, [[1, 0, 2], [2, 0, 2], [3, 0, 2]], atol=1e-6)
    np.testing.assert_allclose(d.sizes, [[0.2, 0.3, 0.4]] * 3, rtol=1e-6)
    assert len(decode_detections(b, _logits([0] * 4, [0.1] * 4), LABELS)) == 0


def test_best_class_per_token_and_sigmoid():
    lg = np.array([[0.0, 2.0, -1.0], [3.0, 1.0, 2.9]], np.float32)
    d = decode_detections(_rows(_separated(2)), lg, LABELS, score_threshold=0.0)
    assert d.class_ids.tolist() == [0, 1]
    np.testing.assert_allclose(d.scores, 1 / (1 + np.exp(-np.array([3.0, 2.0]))), rtol=1e-6)


def test_top_k_and_max_detections():
    b = _rows(_separated(6))
    lg = _logits([0] * 6, [0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    d = decode_detections(b, lg, LABELS, pre_nms_top_k=2)
    assert d.token_indices.tolist() == [5, 4]
    d = decode_detections(b, lg, LABELS, max_detections=3)
    assert d.token_indices.tolist() == [5, 4, 3]
    assert len(decode_detections(b, lg, LABELS, max_detections=0)) == 0


def test_nms_suppresses_duplicates_of_the_same_class_only():
    R = _rot_z(30)
    a = ([0.0, 0.0, 2.0], R, [0.3, 0.3, 0.3])
    a_dup = ([0.01, 0.0, 2.0], _rot_z(32), [0.3, 0.31, 0.3])          # IoU ~0.9 with a
    far = ([1.0, 0.0, 2.0], R, [0.3, 0.3, 0.3])
    b = _rows([a, a_dup, far, a_dup])
    lg = _logits([0, 0, 0, 1], [0.8, 0.9, 0.7, 0.6])                  # token 3: same box, other class
    d = decode_detections(b, lg, LABELS, nms_iou=0.3)
    assert d.token_indices.tolist() == [1, 2, 3]                      # 0 suppressed by the better duplicate 1
    assert d.class_names == ['cube', 'cube', 'cylinder']
    # NMS off
    assert decode_detections(b, lg, LABELS, nms_iou=1.0).token_indices.tolist() == [1, 0, 2, 3]
    # a shifted copy with IoU 1/3 survives at threshold 0.5 but not at 0.3
    half = ([0.15 * R[0, 0], 0.15 * R[1, 0], 2.0], R, [0.3, 0.3, 0.3])  # half an edge along the box's x axis
    b2, lg2 = _rows([a, half]), _logits([0, 0], [0.9, 0.8])
    assert len(decode_detections(b2, lg2, LABELS, nms_iou=0.5)) == 2
    assert len(decode_detections(b2, lg2, LABELS, nms_iou=0.3)) == 1


def test_class_agnostic_nms_also_suppresses_other_classes():
    R = _rot_z(30)
    a = ([0.0, 0.0, 2.0], R, [0.3, 0.3, 0.3])
    a_dup = ([0.01, 0.0, 2.0], _rot_z(32), [0.3, 0.31, 0.3])          # IoU ~0.9 with a
    far = ([1.0, 0.0, 2.0], R, [0.3, 0.3, 0.3])
    b = _rows([a, a_dup, far])
    lg = _logits([0, 1, 2], [0.8, 0.9, 0.7])                          # three classes
    assert decode_detections(b, lg, LABELS, nms_iou=0.3).token_indices.tolist() == [1, 0, 2]
    d = decode_detections(b, lg, LABELS, nms_iou=0.3, class_agnostic=True)
    assert d.token_indices.tolist() == [1, 2]                         # the cube under the cylinder goes
    assert d.class_names == ['cylinder', 'sphere']                     # each kept box keeps its own class


def test_multi_label_gives_one_candidate_per_passing_class():
    """Token 0 names cube 0.8 and cylinder 0.6; token 1 (far away) names sphere 0.7 and cube 0.2 (below 0.3)."""
    b = _rows(_separated(2))
    lg = np.full((2, 3), -10.0, np.float32)
    lg[0, 0], lg[0, 1] = np.log(0.8 / 0.2), np.log(0.6 / 0.4)
    lg[1, 2], lg[1, 0] = np.log(0.7 / 0.3), np.log(0.2 / 0.8)
    single = decode_detections(b, lg, LABELS, score_threshold=0.3)
    assert single.class_names == ['cube', 'sphere'] and single.token_indices.tolist() == [0, 1]
    d = decode_detections(b, lg, LABELS, score_threshold=0.3, multi_label=True)
    assert d.class_names == ['cube', 'sphere', 'cylinder']            # by score: 0.8, 0.7, 0.6
    assert d.token_indices.tolist() == [0, 1, 0]
    np.testing.assert_allclose(d.scores, [0.8, 0.7, 0.6], rtol=1e-6)
    np.testing.assert_array_equal(d.translations[2], d.translations[0])   # same geometry, another class
    np.testing.assert_array_equal(d.sizes[2], d.sizes[0])
    # the two classes of one token never suppress each other class-wise; class-agnostic NMS keeps the best only
    assert decode_detections(b, lg, LABELS, score_threshold=0.3, multi_label=True,
                             class_agnostic=True).class_names == ['cube', 'sphere']
    # equal scores: token index first, then class
    tie = np.full((2, 3), -10.0, np.float32)
    tie[1, 0] = tie[1, 2] = tie[0, 1] = 1.0
    assert [(int(t), c) for t, c in zip(decode_detections(b, tie, LABELS, multi_label=True).token_indices,
                                        decode_detections(b, tie, LABELS, multi_label=True).class_ids)] == \
        [(0, 1), (1, 0), (1, 2)]
    # pre_nms_top_k and max_detections count (token, class) candidates
    assert len(decode_detections(b, lg, LABELS, score_threshold=0.3, multi_label=True, pre_nms_top_k=2)) == 2
    assert len(decode_detections(b, lg, LABELS, score_threshold=0.3, multi_label=True, max_detections=1)) == 1
    # a non-finite token gives no candidate of any class
    b_nan = b.copy()
    b_nan[0, 0] = np.nan
    d = decode_detections(b_nan, lg, LABELS, score_threshold=0.3, multi_label=True)
    assert d.class_names == ['sphere'] and d.num_non_finite == 1


def test_nms_many_duplicates_is_fast_enough():
    rng = np.random.default_rng(0)
    n = 200
    boxes = [([0.0, 0.0, 2.0] + rng.normal(0, 0.005, 3), _rot_z(rng.normal(0, 2)), [0.3, 0.2, 0.4])
             for _ in range(n)]
    d = decode_detections(_rows(boxes), _logits([0] * n, rng.uniform(0.5, 0.99, n)), LABELS)
    assert len(d) == 1


def test_quaternions_are_unit_and_match_rotations():
    rng = np.random.default_rng(2)
    x6 = rng.normal(size=(20, 6)).astype(np.float32)                  # raw, unnormalised 6D
    b = np.concatenate([rng.uniform(-1, 1, (20, 3)) * [5, 5, 1] + [0, 0, 3], x6,
                        rng.uniform(0.05, 0.2, (20, 3))], axis=1).astype(np.float32)
    d = decode_detections(b, np.full((20, 3), 3.0, np.float32), LABELS, nms_iou=1.0)
    assert len(d) == 20
    np.testing.assert_allclose(np.linalg.norm(d.quaternions_xyzw, axis=1), 1.0, atol=1e-12)
    assert np.all(d.quaternions_xyzw[:, 3] >= 0)
    np.testing.assert_allclose(quaternion_to_rotation(d.quaternions_xyzw), d.rotations, atol=1e-9)
    np.testing.assert_allclose(d.rotations, rotation_from_6d(x6[d.token_indices]), atol=1e-6)
    np.testing.assert_allclose(np.linalg.det(d.rotations), 1.0, atol=1e-9)
    # columns: the first column is the normalised first 6D vector (Gram-Schmidt on COLUMNS)
    a1 = x6[d.token_indices, :3]
    np.testing.assert_allclose(d.rotations[:, :, 0], a1 / np.linalg.norm(a1, axis=1, keepdims=True), atol=1e-6)


def test_non_finite_and_invalid_outputs_are_dropped_and_counted():
    b = _rows(_separated(7))
    lg = _logits([0] * 7, [0.9] * 7)
    b[0, 2] = np.nan                  # NaN translation
    lg[1, 1] = np.inf                 # inf logit
    b[2, 5] = -np.inf                 # inf rotation
    b[3, 10] = -0.1                   # negative size
    b[4, 3:9] = 0.0                   # degenerate 6D (zero)
    b[5, 6:9] = 2 * b[5, 3:6]         # degenerate 6D (parallel columns)
    d = decode_detections(b, lg, LABELS)
    assert d.token_indices.tolist() == [6]
    assert d.num_non_finite == 3 and d.num_invalid == 3
    all_nan = decode_detections(np.full((5, 12), np.nan, np.float32), np.full((5, 3), np.nan, np.float32), LABELS)
    assert len(all_nan) == 0 and all_nan.num_non_finite == 5


def test_batch_of_one_and_shape_errors():
    b, lg = _rows(_separated(3)), _logits([0, 1, 2], [0.9, 0.8, 0.7])
    d1 = decode_detections(b[None], lg[None], LABELS)
    d2 = decode_detections(b, lg, LABELS)
    np.testing.assert_array_equal(d1.translations, d2.translations)
    for boxes, logits, labels in [(b[:, :11], lg, LABELS), (b, lg[:2], LABELS), (b, lg, LABELS[:2]),
                                  (np.stack([b, b]), np.stack([lg, lg]), LABELS), (b.astype(str), lg, LABELS),
                                  (b[0], lg, LABELS), ([[1, 2]], lg, LABELS)]:
        with pytest.raises(OutputError) as e:
            decode_detections(boxes, logits, labels)
        assert e.value.kind == 'bad_output'
    empty = decode_detections(np.zeros((0, 12), np.float32), np.zeros((0, 3), np.float32), LABELS)
    assert len(empty) == 0 and empty.translations.shape == (0, 3) and empty.quaternions_xyzw.shape == (0, 4)


@pytest.mark.parametrize('kwargs', [{'score_threshold': 1.5}, {'score_threshold': -0.1}, {'nms_iou': 0.0},
                                    {'nms_iou': 1.2}, {'max_detections': -1}, {'max_detections': 2.5},
                                    {'pre_nms_top_k': 0}])
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        decode_detections(_rows(_separated(1)), _logits([0], [0.9]), LABELS, **kwargs)


def test_empty_detections_shapes():
    d = Detections.empty()
    assert len(d) == 0 and d.rotations.shape == (0, 3, 3) and d.class_names == []


_values = st.one_of(st.floats(-1e3, 1e3, allow_nan=False, width=32),
                    st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 3.4e38, -3.4e38, 1e-30]))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 12), data=st.data(), threshold=st.floats(0, 1), nms=st.floats(0.01, 1.0),
       top_k=st.integers(1, 15), max_det=st.integers(0, 15))
def test_property_decode_never_raises_on_any_model_output(n, data, threshold, nms, top_k, max_det):
    boxes = data.draw(hnp.arrays(np.float32, (n, 12), elements=_values))
    logits = data.draw(hnp.arrays(np.float32, (n, 3), elements=_values))
    d = decode_detections(boxes, logits, LABELS, score_threshold=threshold, nms_iou=nms, max_detections=max_det,
                          pre_nms_top_k=top_k)
    m = len(d)
    assert m <= min(max_det, top_k, n)
    assert d.translations.shape == (m, 3) and d.rotations.shape == (m, 3, 3) and d.sizes.shape == (m, 3)
    assert d.quaternions_xyzw.shape == (m, 4) and d.class_ids.shape == (m,) and len(d.class_names) == m
    for arr in (d.translations, d.rotations, d.quaternions_xyzw, d.sizes, d.scores):
        assert np.all(np.isfinite(arr))
    assert np.all((d.scores >= threshold) & (d.scores <= 1.0)) and np.all(np.diff(d.scores) <= 0)
    assert np.all(d.sizes > 0)
    np.testing.assert_allclose(np.linalg.norm(d.quaternions_xyzw, axis=1), 1.0, atol=1e-9)
    assert d.num_non_finite + d.num_invalid <= n

"""decode_detections at its boundaries: IoU exactly at the NMS threshold, nested near-duplicates of unequal size
(IoU = volume ratio, right at the volume-ratio shortcut), ties in score, and the absurd-size / absurd-centre rules.
"""
import warnings

import numpy as np
import pytest

from string_perception.box_ops import encode_box_params
from string_perception.iou3d import pairwise_box3d_iou
from string_perception.runtime.errors import OutputError
from string_perception.runtime.postprocess import Detections, decode_detections

LABELS = ('box', 'cylinder')


def row(x=0.0, z=2.0, size=(1.0, 1.0, 1.0)):
    """One axis-aligned box as a float32 model row (every number here is exact in float32)."""
    return encode_box_params(np.array([x, 0.0, z]), np.eye(3), np.array(size, dtype=np.float64)).astype(np.float32)


def logits(scores, classes=None):
    """[N,2] logits with the given sigmoid scores for class 0 (or `classes`), the other class far below."""
    classes = classes or [0] * len(scores)
    lg = np.full((len(scores), 2), -20.0, np.float32)
    for i, (c, s) in enumerate(zip(classes, scores)):
        lg[i, c] = np.log(s / (1 - s))
    return lg


def test_iou_exactly_at_the_nms_threshold_does_not_suppress():
    # unit cubes half an edge apart: IoU 0.5 / 1.5 = 1/3 exactly; volume ratio 1, so the shortcut lets them through
    boxes = np.stack([row(0.0), row(0.5)])
    iou = pairwise_box3d_iou(boxes[:1].astype(np.float64), boxes[1:].astype(np.float64))[0, 0]
    assert iou == 1 / 3
    lg = logits([0.9, 0.8])
    assert decode_detections(boxes, lg, LABELS, nms_iou=iou).token_indices.tolist() == [0, 1]     # not > 1/3
    assert decode_detections(boxes, lg, LABELS, nms_iou=np.nextafter(iou, 0.0)).token_indices.tolist() == [0]


@pytest.mark.parametrize('big_first', [True, False])
def test_nested_near_duplicates_of_unequal_size_are_suppressed(big_first):
    # a box of 3/4 the height nested in another: IoU = volume ratio = 0.75 exactly. At nms_iou 0.74 the lower-scored
    # one must go, whichever is larger; the volume-ratio shortcut (IoU <= min/max volume) may not skip this pair.
    big, small = row(), row(size=(1.0, 1.0, 0.75))
    boxes = np.stack([big, small] if big_first else [small, big])
    assert pairwise_box3d_iou(boxes[:1].astype(np.float64), boxes[1:].astype(np.float64))[0, 0] == 0.75
    lg = logits([0.9, 0.8])
    assert decode_detections(boxes, lg, LABELS, nms_iou=0.74).token_indices.tolist() == [0]
    assert decode_detections(boxes, lg, LABELS, nms_iou=0.75).token_indices.tolist() == [0, 1]      # IoU not > 0.75
    # far below the ratio: still suppressed; a different class: never
    assert decode_detections(boxes, lg, LABELS, nms_iou=0.3).token_indices.tolist() == [0]
    assert decode_detections(boxes, logits([0.9, 0.8], [0, 1]), LABELS, nms_iou=0.3).token_indices.tolist() == [0, 1]


def test_small_box_inside_a_large_one_survives_when_the_ratio_is_below_the_threshold():
    # volume ratio 0.25 bounds the IoU: with nms_iou 0.3 both are kept, with 0.2 the inner one goes
    boxes = np.stack([row(), row(size=(0.5, 1.0, 0.5))])
    lg = logits([0.9, 0.8])
    assert decode_detections(boxes, lg, LABELS, nms_iou=0.3).token_indices.tolist() == [0, 1]
    assert decode_detections(boxes, lg, LABELS, nms_iou=0.2).token_indices.tolist() == [0]


def test_equal_scores_keep_token_order():
    # five separated boxes with one score: output in token order; with top-k 2 the first two tokens
    boxes = np.stack([row(3.0 * i) for i in range(5)])
    lg = logits([0.7] * 5)
    assert decode_detections(boxes, lg, LABELS).token_indices.tolist() == [0, 1, 2, 3, 4]
    assert decode_detections(boxes, lg, LABELS, pre_nms_top_k=2).token_indices.tolist() == [0, 1]
    assert decode_detections(boxes, lg, LABELS, max_detections=3).token_indices.tolist() == [0, 1, 2]
    # two duplicates with equal scores: the lower token index wins NMS
    dup = np.stack([row(5.0), row(0.0), row(0.0)])
    assert decode_detections(dup, logits([0.7] * 3), LABELS).token_indices.tolist() == [0, 1]
    # ties after a higher score: the higher score first, then the tie in token order
    assert decode_detections(boxes, logits([0.6, 0.6, 0.9, 0.6, 0.6]), LABELS).token_indices.tolist() == \
        [2, 0, 1, 3, 4]


def test_absurd_size_and_centre_limits():
    # sizes up to 1000 m and centres up to 1000 km (each coordinate) are kept; beyond either, the token is invalid
    boxes = np.stack([row(0.0, 2.0, (1000.0, 1.0, 1.0)), row(0.0, 2.0, (1.0, 1001.0, 1.0)),
                      row(1e6, 2.0), row(-1e6 - 1.0, 2.0), row(0.0, 1e6 + 1.0), row(5.0, 2.0)])
    d = decode_detections(boxes, logits([0.9] * 6), LABELS, nms_iou=1.0)
    assert d.token_indices.tolist() == [0, 2, 5]
    assert d.num_invalid == 3 and d.num_non_finite == 0
    np.testing.assert_array_equal(d.sizes[0], [1000.0, 1.0, 1.0])
    np.testing.assert_array_equal(d.translations[1], [1e6, 0.0, 2.0])


# ------------------------------------------------------------------ mutation-testing survivors (issue 24 item 3)
def test_empty_detections_have_every_field_empty_and_typed():
    for d, counts in [(Detections.empty(), (0, 0)), (Detections.empty(2, 3), (2, 3)),
                      (Detections.empty(num_invalid=4), (0, 4))]:
        assert (d.num_non_finite, d.num_invalid) == counts
        for arr, shape, dtype in [(d.translations, (0, 3), np.float64), (d.rotations, (0, 3, 3), np.float64),
                                  (d.quaternions_xyzw, (0, 4), np.float64), (d.sizes, (0, 3), np.float64),
                                  (d.class_ids, (0,), np.int64), (d.scores, (0,), np.float64),
                                  (d.token_indices, (0,), np.int64)]:
            assert arr.shape == shape and arr.dtype == dtype
        assert d.class_names == [] and len(d) == 0


def test_empty_results_keep_the_dropped_token_counts():
    boxes = np.stack([row(0.0), row(3.0), row(6.0)])
    boxes[0, 0] = np.nan                                  # non-finite
    boxes[1, 9] = 0.0                                     # size 0: invalid (sizes must be > 0)
    lg = logits([0.9, 0.9, 0.9])
    for kwargs in [{'max_detections': 0}, {'score_threshold': 0.95}]:
        d = decode_detections(boxes, lg, LABELS, **kwargs)
        assert len(d) == 0 and (d.num_non_finite, d.num_invalid) == (1, 1)
    d = decode_detections(boxes, lg, LABELS)
    assert d.token_indices.tolist() == [2] and (d.num_non_finite, d.num_invalid) == (1, 1)


def test_from_boxes_fills_every_field():
    rz90 = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    d = Detections.from_boxes([[1, 2, 3], [4, 5, 6]], [[1, 2, 3], [4, 4, 4]],
                              rotations=np.stack([np.eye(3), rz90]).astype(np.float32),
                              class_ids=np.array([1, 2], np.int32), scores=np.array([0.25, 0.5], np.float32),
                              labels=('a', 'b'))
    np.testing.assert_array_equal(d.translations, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(d.sizes, [[1, 2, 3], [4, 4, 4]])
    np.testing.assert_array_equal(d.rotations, [np.eye(3), rz90])
    np.testing.assert_allclose(d.quaternions_xyzw, [[0, 0, 0, 1], [0, 0, np.sqrt(0.5), np.sqrt(0.5)]], atol=1e-15)
    np.testing.assert_array_equal(d.scores, [0.25, 0.5])
    assert d.class_ids.tolist() == [1, 2] and d.class_names == ['b', '2']      # id 2 has no label: its number
    assert d.token_indices.tolist() == [0, 1] and (d.num_non_finite, d.num_invalid) == (0, 0)
    for arr in (d.translations, d.sizes, d.rotations, d.quaternions_xyzw, d.scores):
        assert arr.dtype == np.float64
    assert d.class_ids.dtype == np.int64 and d.token_indices.dtype == np.int64
    # defaults: identity rotation, class 0 named by its number, score 1; a flat triple is one box
    d = Detections.from_boxes([0, 0, 1], [1, 1, 1])
    np.testing.assert_array_equal(d.rotations, [np.eye(3)])
    np.testing.assert_array_equal(d.quaternions_xyzw, [[0, 0, 0, 1]])
    assert d.class_ids.tolist() == [0] and d.class_ids.dtype == np.int64 and d.class_names == ['0']
    assert d.scores.tolist() == [1.0] and d.token_indices.tolist() == [0] and len(d) == 1
    assert Detections.from_boxes([0, 0, 1], [1, 1, 1], labels=['box']).class_names == ['box']
    # one class id and one score per box, no more, no fewer
    for kwargs in [{'class_ids': [0, 1, 2]}, {'scores': [0.5]}]:
        with pytest.raises(ValueError):
            Detections.from_boxes([[0, 0, 1], [0, 0, 2]], [[1, 1, 1]] * 2, **kwargs)


def test_result_dtypes_and_integer_model_outputs():
    # integer arrays are real-valued outputs too: one unit cube at z = 2, identity 6D, logit 0 (score 0.5)
    boxes = np.array([[0, 0, 2, 1, 0, 0, 0, 1, 0, 1, 1, 1]], np.int64)
    d = decode_detections(boxes, np.zeros((1, 2), np.int32), LABELS, score_threshold=0.5)   # score == threshold
    assert d.token_indices.tolist() == [0] and d.scores.tolist() == [0.5] and d.class_names == ['box']
    assert d.class_ids.dtype == np.int64 and d.token_indices.dtype == np.int64
    np.testing.assert_array_equal(d.translations, [[0, 0, 2]])
    np.testing.assert_array_equal(d.rotations, [np.eye(3)])
    # multi-label: each class scoring exactly the threshold is a candidate (the same box, one per class)
    d = decode_detections(boxes, np.zeros((1, 2)), LABELS, score_threshold=0.5, multi_label=True)
    assert d.token_indices.tolist() == [0, 0] and d.class_names == ['box', 'cylinder']


def test_score_threshold_one_keeps_only_a_score_of_exactly_one():
    boxes = np.stack([row(0.0), row(3.0)])
    lg = np.array([[40.0, -40.0], [30.0, -40.0]])       # sigmoid: exactly 1.0, and 1 - 9.4e-14
    d = decode_detections(boxes, lg, LABELS, score_threshold=1.0)
    assert d.token_indices.tolist() == [0] and d.scores.tolist() == [1.0]


def test_top_k_of_one_keeps_the_best_candidate():
    boxes = np.stack([row(3.0 * i) for i in range(3)])
    d = decode_detections(boxes, logits([0.6, 0.9, 0.7]), LABELS, pre_nms_top_k=1)
    assert d.token_indices.tolist() == [1]


def test_the_defaults_are_50_detections_and_200_candidates():
    far = np.stack([row(3.0 * i) for i in range(60)])
    assert len(decode_detections(far, logits([0.9] * 60), LABELS)) == 50
    # 200 copies of one box, then a separate box with the lowest score: it is candidate 201, so it is cut
    boxes = np.stack([row(0.0)] * 200 + [row(5.0)])
    lg = logits([0.9] * 200 + [0.8])
    assert decode_detections(boxes, lg, LABELS).token_indices.tolist() == [0]
    assert decode_detections(boxes, lg, LABELS, pre_nms_top_k=201).token_indices.tolist() == [0, 200]


def test_six_d_columns_are_scale_free():
    # orthogonal 6D columns of any length give the identity: 1e-5 (the degeneracy test is relative, per token,
    # also next to a token with long columns) and 1e7 (6D numbers are not centres: no 1000 km rule for them)
    small = [0, 0, 2, 1e-5, 0, 0, 0, 1e-5, 0, 1, 1, 1]
    large = [5, 0, 2, 1e7, 0, 0, 0, 1e7, 0, 1, 1, 1]
    for boxes in ([small], [large], [small, large]):
        d = decode_detections(np.array(boxes), np.zeros((len(boxes), 2)), LABELS, score_threshold=0.0)
        assert d.token_indices.tolist() == list(range(len(boxes))) and d.num_invalid == 0
        np.testing.assert_allclose(d.rotations, [np.eye(3)] * len(boxes), atol=1e-12)


def test_degenerate_six_d_boundaries():
    # degenerate: |a1| <= 1e-9, or |a1 x a2| <= 1e-9 |a1| |a2| (every number below is exact in float64)
    rows = [[0, 0, 2, 1e-9, 0, 0, 0, 1, 0, 1, 1, 1],          # |a1| = 1e-9 exactly
            [3, 0, 2, 1, 0, 0, 1, 1e-9, 0, 1, 1, 1],          # |a1 x a2| = 1e-9, |a1| |a2| = 1 exactly
            [6, 0, 2, 2e-9, 0, 0, 0, 1, 0, 1, 1, 1],          # twice the limit: valid
            [9, 0, 2, 1, 0, 0, 1, 2e-9, 0, 1, 1, 1]]
    d = decode_detections(np.array(rows), np.zeros((4, 2)), LABELS, score_threshold=0.0)
    assert d.token_indices.tolist() == [2, 3] and d.num_invalid == 2


def test_every_size_axis_has_the_limits():
    # size 0 or above 1000 m on any one axis makes the token invalid
    sizes = [(0.0, 1, 1), (1, 0.0, 1), (1, 1, 0.0), (1001.0, 1, 1), (1, 1001.0, 1), (1, 1, 1001.0), (1, 1, 1)]
    boxes = np.stack([row(3.0 * i, 2.0, s) for i, s in enumerate(sizes)])
    d = decode_detections(boxes, logits([0.9] * 7), LABELS)
    assert d.token_indices.tolist() == [6] and d.num_invalid == 6


def test_non_finite_and_huge_outputs_raise_no_numpy_warnings():
    boxes = np.stack([row(0.0), row(3.0), row(6.0)]).astype(np.float64)
    boxes[0, 3] = np.inf                 # inf 6D: inf - inf in the cross product
    boxes[1, 3:9] = 1e300                # |a1|^2 overflows
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        d = decode_detections(boxes, logits([0.9] * 3), LABELS)
    assert d.token_indices.tolist() == [2] and d.num_non_finite == 1 and d.num_invalid == 1


@pytest.mark.parametrize('boxes,lg,labels,message', [
    ([[1.0, 2.0], [3.0]], np.zeros((2, 2)), LABELS, 'boxes is not an array'),
    (np.zeros((3, 11)), np.zeros((3, 2)), LABELS, 'boxes must be [N,12] (or [1,N,..]), got shape (3, 11)'),
    (np.zeros((3, 12)), np.zeros(3), LABELS, 'logits must be [N,C] (or [1,N,..]), got shape (3,)'),
    (np.zeros((3, 12)), [[1.0], [2.0, 3.0]], LABELS, 'logits is not an array'),
    (np.zeros((1, 12), str), np.zeros((1, 2)), LABELS, 'boxes must be a real-valued array, got dtype <U1'),
    (np.zeros((1, 12)), np.zeros((1, 2), bool), LABELS, 'logits must be a real-valued array, got dtype bool'),
    (np.zeros((3, 12)), np.zeros((2, 3)), LABELS, 'boxes has 3 tokens but logits has 2'),
    (np.zeros((3, 12)), np.zeros((3, 2)), ('box',), 'logits has 2 classes but there are 1 labels'),
])
def test_bad_output_messages(boxes, lg, labels, message):
    with pytest.raises(OutputError) as e:
        decode_detections(boxes, lg, labels)
    assert e.value.kind == 'bad_output'
    assert e.value.message == message or (message.endswith('not an array') and
                                          e.value.message.startswith(message + ': '))   # + numpy's reason


@pytest.mark.parametrize('kwargs,message', [
    ({'score_threshold': 1.5}, 'score_threshold must be in [0, 1], got 1.5'),
    ({'nms_iou': 0.0}, 'nms_iou must be in (0, 1] (1 disables NMS), got 0.0'),
    ({'max_detections': 2.5}, 'max_detections must be an integer >= 0, got 2.5'),
    ({'pre_nms_top_k': 0}, 'pre_nms_top_k must be an integer >= 1, got 0'),
])
def test_bad_parameter_messages(kwargs, message):
    with pytest.raises(ValueError) as e:
        decode_detections(np.stack([row()]), logits([0.9]), LABELS, **kwargs)
    assert str(e.value) == message

"""decode_detections at its boundaries: IoU exactly at the NMS threshold, nested near-duplicates of unequal size
(IoU = volume ratio, right at the volume-ratio shortcut), ties in score, and the absurd-size / absurd-centre rules.
"""
import numpy as np
import pytest

from string_perception.box_ops import encode_box_params
from string_perception.iou3d import pairwise_box3d_iou
from string_perception.runtime.postprocess import decode_detections

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

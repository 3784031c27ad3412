"""AP3D on cases whose answer hinges on one rule: the precision envelope, best-unmatched matching, IoU >= threshold.

IoUs used here are exact in float64 (checked first): unit cubes shifted by d along x have IoU (1 - d) / (1 + d);
a box nested in another has IoU = volume ratio.
"""
import numpy as np
import pytest

from string_perception import metrics
from string_perception.box_ops import encode_box_params
from string_perception.iou3d import pairwise_box3d_iou


def box(x=0.0, z=3.0, size=(1.0, 1.0, 1.0)):
    return encode_box_params(np.array([x, 0.0, z]), np.eye(3), np.array(size, dtype=np.float64))


def frame(boxes, labels, scores=None):
    f = {'params': np.array(boxes).reshape(-1, 12), 'labels': np.array(labels, dtype=np.int64)}
    if scores is not None:
        f['scores'] = np.array(scores, dtype=np.float64)
    return f


FAR = box(0.0, 30.0)


def test_fp_tp_tp_against_two_ground_truths_is_two_thirds():
    # ranked FP, TP, TP: precision 0, 1/2, 2/3 at recall 0, 1/2, 1. The envelope lifts the dip at recall 1/2 to 2/3:
    # AP = 1/2 * 2/3 + 1/2 * 2/3 = 2/3 (without the envelope it would be 1/2 * 1/2 + 1/2 * 2/3 = 7/12).
    gts = [frame([box(0.0), box(3.0)], [0, 0])]
    preds = [frame([FAR, box(0.0), box(3.0)], [0, 0, 0], [0.9, 0.8, 0.7])]
    curve = metrics.pr_curve(preds, gts, 0, 0.5)
    assert curve['tp'].tolist() == [False, True, True]
    np.testing.assert_allclose(curve['precision'], [0.0, 0.5, 2 / 3])
    np.testing.assert_allclose(curve['recall'], [0.0, 0.5, 1.0])
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == pytest.approx(2 / 3, abs=1e-12)
    assert metrics.average_precision(curve['precision'], curve['recall']) == pytest.approx(2 / 3, abs=1e-12)


def test_precision_envelope_takes_the_best_precision_to_the_right():
    # TP, FP, FP, TP, TP against 4 ground truths (one never found): precision 1, 1/2, 1/3, 1/2, 3/5 at recall
    # 1/4, 1/4, 1/4, 1/2, 3/4. Envelope: 1 up to recall 1/4, then 3/5 up to 3/4, 0 after: AP = 1/4 + 1/2 * 3/5.
    precision = np.array([1.0, 0.5, 1 / 3, 0.5, 0.6])
    recall = np.array([0.25, 0.25, 0.25, 0.5, 0.75])
    assert metrics.average_precision(precision, recall) == pytest.approx(0.25 + 0.5 * 0.6, abs=1e-12)


def test_a_prediction_overlapping_two_ground_truths_takes_the_best_one():
    # ground truths at x = 0 and x = 0.4. P1 (best score) at x = 0.3 overlaps both above 0.5: IoU 0.7/1.3 = 0.538
    # with the first, 0.9/1.1 = 0.818 with the second; it must take the second (best IoU). P2 sits on the first
    # (IoU 1) and overlaps the second by only 0.6/1.4 = 0.43. Best matching: TP, TP -> AP 1. Taking the first
    # ground truth above the threshold would leave P2 only the second (0.43 < 0.5): TP, FP -> AP 0.5.
    gts = [frame([box(0.0), box(0.4)], [0, 0])]
    preds = [frame([box(0.3), box(0.0)], [0, 0], [0.9, 0.8])]
    iou = pairwise_box3d_iou(preds[0]['params'], gts[0]['params'])
    np.testing.assert_allclose(iou, [[0.7 / 1.3, 0.9 / 1.1], [1.0, 0.6 / 1.4]], rtol=1e-12)
    curve = metrics.pr_curve(preds, gts, 0, 0.5)
    assert curve['tp'].tolist() == [True, True]
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == pytest.approx(1.0)
    # and when the best ground truth is already taken, the next best still above the threshold is used
    preds2 = [frame([box(0.4), box(0.3)], [0, 0], [0.9, 0.8])]
    assert metrics.pr_curve(preds2, gts, 0, 0.5)['tp'].tolist() == [True, True]


def test_iou_exactly_at_the_threshold_is_a_true_positive():
    # a box of half the height nested in the ground truth: IoU = 0.5 exactly
    gts = [frame([box()], [0])]
    preds = [frame([box(size=(1.0, 1.0, 0.5))], [0], [0.9])]
    assert pairwise_box3d_iou(preds[0]['params'], gts[0]['params'])[0, 0] == 0.5
    assert metrics.pr_curve(preds, gts, 0, 0.5)['tp'].tolist() == [True]
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == 1.0
    assert metrics.ap3d(preds, gts, np.nextafter(0.5, 1.0))['mean'] == 0.0           # just above: a miss
    # the same at 0.25 with a quarter-volume box (IoU 0.25 exactly)
    quarter = [frame([box(size=(0.5, 1.0, 0.5))], [0], [0.9])]
    assert metrics.ap3d(quarter, gts, 0.25)['mean'] == 1.0
    f1 = metrics.f1_threshold(preds, gts, 0.5, num_classes=1)
    assert f1['f1'] == 1.0 and f1['threshold'] == 0.9


def test_ap_over_two_frames_with_a_shared_rank_order():
    # frame 0: GT a, prediction on it (0.6) and a far FP (0.95); frame 1: GT b, prediction on it (0.8).
    # Ranked: FP 0.95, TP 0.8, TP 0.6 -> the same 2/3 as a single frame: matching is per frame, ranking global.
    gts = [frame([box(0.0)], [1]), frame([box(3.0)], [1])]
    preds = [frame([box(0.0), FAR], [1, 1], [0.6, 0.95]), frame([box(3.0)], [1], [0.8])]
    assert metrics.ap3d(preds, gts, 0.5, num_classes=2)['per_class'][1] == pytest.approx(2 / 3, abs=1e-12)

"""metrics: average best IoU and AP3D on hand-made frames with known answers."""
import json
import math
import warnings

import numpy as np
import pytest

from scipy.spatial.transform import Rotation

from string_perception import metrics
from string_perception.box_ops import encode_box_params


def box(x=0.0, y=0.0, z=3.0, size=(1.0, 1.0, 1.0)):
    return encode_box_params(np.array([x, y, z]), np.eye(3), np.array(size))


def frame(boxes, labels, scores=None):
    f = {'params': np.array(boxes).reshape(-1, 12), 'labels': np.array(labels, dtype=np.int64)}
    if scores is not None:
        f['scores'] = np.array(scores, dtype=np.float64)
    return f


A, B, FAR = box(0.0), box(3.0), box(0.0, 0.0, 20.0)
HALF = box(0.5)                 # unit cube shifted by half an edge: IoU 1/3 with A


def test_perfect_predictions():
    gts = [frame([A, B], [0, 1]), frame([A], [1])]
    preds = [frame([A, B], [0, 1], [0.9, 0.8]), frame([A], [1], [0.7])]
    s = metrics.summarize(preds, gts, class_names=['mug', 'box'])
    assert s['avg_best_iou'] == pytest.approx(1.0) and s['avg_best_iou_agnostic'] == pytest.approx(1.0)
    assert s['ap3d_25'] == pytest.approx(1.0) and s['ap3d_50'] == pytest.approx(1.0)
    assert s['ap3d']['0.5']['per_class'] == {'mug': pytest.approx(1.0), 'box': pytest.approx(1.0)}
    assert s['num_gt'] == 3 and s['num_pred'] == 3 and s['num_frames'] == 2
    json.dumps(s, allow_nan=False)


def test_false_positive_with_higher_score_halves_ap_but_not_best_iou():
    gts = [frame([A], [0])]
    preds = [frame([FAR, A], [0, 0], [0.9, 0.8])]
    curve = metrics.pr_curve(preds, gts, 0, 0.5)
    np.testing.assert_allclose(curve['precision'], [0.0, 0.5])
    np.testing.assert_allclose(curve['recall'], [0.0, 1.0])
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == pytest.approx(0.5)
    assert metrics.average_best_iou(preds, gts) == pytest.approx(1.0)


def test_missed_object():
    gts = [frame([A, B], [0, 0])]
    preds = [frame([A], [0], [0.9])]
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == pytest.approx(0.5)
    assert metrics.average_best_iou(preds, gts) == pytest.approx(0.5)
    np.testing.assert_allclose(metrics.best_iou_per_gt(preds, gts), [1.0, 0.0])
    as_boxes_key = [{'boxes': f['params'], 'labels': f['labels']} for f in gts]       # 'boxes' works too
    assert metrics.average_best_iou(preds, as_boxes_key) == pytest.approx(0.5)


def test_two_classes_and_wrong_label():
    gts = [frame([A, B], [0, 1])]
    preds = [frame([A, B], [0, 0], [0.9, 0.8])]          # B found but called class 0
    res = metrics.ap3d(preds, gts, 0.5, num_classes=3)
    assert res['per_class'][0] == pytest.approx(1.0)     # TP then FP: the envelope stays at 1
    assert res['per_class'][1] == 0.0                    # ground truth, no prediction
    assert math.isnan(res['per_class'][2])               # no ground truth: no AP, not in the mean
    assert res['mean'] == pytest.approx(0.5)
    assert metrics.average_best_iou(preds, gts, class_aware=True) == pytest.approx(0.5)
    assert metrics.average_best_iou(preds, gts, class_aware=False) == pytest.approx(1.0)
    s = metrics.summarize(preds, gts, class_names=['a', 'b', 'c'])
    assert s['ap3d']['0.5']['per_class']['c'] is None
    assert s['avg_best_iou_per_class'] == {'a': pytest.approx(1.0), 'b': 0.0, 'c': None}


def test_threshold_matters_and_duplicates_are_false_positives():
    gts = [frame([A], [0])]
    preds = [frame([HALF, HALF], [0, 0], [0.9, 0.8])]
    assert metrics.average_best_iou(preds, gts) == pytest.approx(1 / 3)
    assert metrics.ap3d(preds, gts, 0.25)['mean'] == pytest.approx(1.0)   # second copy is an FP after recall 1
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == 0.0
    tp = metrics.pr_curve(preds, gts, 0, 0.25)['tp']
    assert tp.tolist() == [True, False]


def test_score_order_across_frames_and_all_point_interpolation():
    # Sorted by score over both frames: TP (0.9, frame 1), FP (0.8, frame 0), TP (0.7, frame 0); 2 ground truths.
    gts = [frame([A], [0]), frame([B], [0])]
    preds = [frame([FAR, A], [0, 0], [0.8, 0.7]), frame([B], [0], [0.9])]
    c = metrics.pr_curve(preds, gts, 0, 0.5)
    np.testing.assert_allclose(c['scores'], [0.9, 0.8, 0.7])
    np.testing.assert_allclose(c['precision'], [1.0, 0.5, 2 / 3])
    np.testing.assert_allclose(c['recall'], [0.5, 0.5, 1.0])
    assert metrics.average_precision(c['precision'], c['recall']) == pytest.approx(0.5 * 1.0 + 0.5 * 2 / 3)


def test_empty_frames_and_no_predictions():
    empty_pred = frame(np.zeros((0, 12)), [], [])
    gts = [frame([A], [0]), frame(np.zeros((0, 12)), [])]
    preds = [empty_pred, frame([A], [0], [0.5])]         # frame 1: a prediction with no ground truth
    assert metrics.average_best_iou(preds, gts) == 0.0
    assert metrics.ap3d(preds, gts, 0.5)['mean'] == 0.0
    assert math.isnan(metrics.average_best_iou([empty_pred], [frame(np.zeros((0, 12)), [])]))
    s = metrics.summarize([empty_pred], [frame(np.zeros((0, 12)), [])])
    json.dumps(s, allow_nan=False)
    assert s['avg_best_iou'] is None and s['ap3d_50'] is None
    with pytest.raises(ValueError):
        metrics.summarize([empty_pred], [])


def test_curves_and_headline():
    gts = [frame([A, B], [0, 1])]
    preds = [frame([A, FAR], [0, 1], [0.9, 0.8])]
    s = metrics.summarize(preds, gts, iou_thresholds=(0.25, 0.5, 0.7), include_curves=True)
    json.dumps(s, allow_nan=False)
    assert set(s['pr_curves']) == {'0.25', '0.5', '0.7'}
    assert s['pr_curves']['0.5']['0'] == {'precision': [1.0], 'recall': [1.0]}
    h = metrics.headline(s)
    strict = {'avg_best_iou', 'avg_best_iou_agnostic', 'ap3d_25', 'ap3d_50', 'ap3d_70'}
    assert set(h) == strict | {k + '_sym' for k in strict}
    assert {k: h[k + '_sym'] for k in strict} == {k: h[k] for k in strict}     # no class names: plain boxes
    assert h['ap3d_50'] == pytest.approx(0.5) and all(isinstance(v, float) for v in h.values())


def test_f1_threshold_cuts_where_false_positives_start():
    # two frames, 3 true boxes; true positives score 0.9, 0.8, 0.5; false positives (far boxes) 0.7 and 0.3
    gts = [frame([A, B], [0, 0]), frame([A], [1])]
    preds = [frame([A, FAR, B, FAR], [0, 0, 0, 0], [0.9, 0.7, 0.5, 0.3]), frame([A], [1], [0.8])]
    best = metrics.f1_threshold(preds, gts, 0.25, num_classes=2)
    # cut at 0.8: 2 TP / (2 + 3) -> 0.8; at 0.5: 3 TP, 4 kept -> 6/7 = 0.857 (best); at 0.3: 6/8
    assert best['threshold'] == pytest.approx(0.5)
    assert best['f1'] == pytest.approx(6 / 7)
    assert best['precision'] == pytest.approx(3 / 4) and best['recall'] == pytest.approx(1.0)
    # keeping every box scoring >= the threshold reproduces that F1 through the matcher's own counts
    kept = [{k: np.asarray(v)[np.asarray(p['scores']) >= best['threshold']] for k, v in p.items()} for p in preds]
    tp = sum(metrics.pr_curve(kept, gts, c, 0.25)['tp'].sum() for c in (0, 1))
    n_pred = sum(len(p['labels']) for p in kept)
    assert 2 * tp / (n_pred + 3) == pytest.approx(best['f1'])


def test_f1_threshold_keeps_tied_scores_together_and_handles_empty():
    gts = [frame([A], [0])]
    preds = [frame([FAR, A], [0, 0], [0.6, 0.6])]      # a tie: both or neither
    best = metrics.f1_threshold(preds, gts, 0.25, num_classes=1)
    assert best['threshold'] == pytest.approx(0.6) and best['f1'] == pytest.approx(2 / 3)
    none = metrics.f1_threshold([frame([], [], [])], gts, 0.25, num_classes=1)
    assert math.isnan(none['threshold']) and none['f1'] == 0.0


def test_precision_threshold_is_the_lowest_cut_meeting_the_floor():
    # sorted scores 0.9 TP, 0.8 TP, 0.7 FP, 0.5 TP, 0.3 FP: precision 1, 1, 2/3, 3/4, 3/5 at the five cuts
    gts = [frame([A, B], [0, 0]), frame([A], [1])]
    preds = [frame([A, FAR, B, FAR], [0, 0, 0, 0], [0.9, 0.7, 0.5, 0.3]), frame([A], [1], [0.8])]
    p80 = metrics.precision_threshold(preds, gts, 0.8, 0.25, num_classes=2)
    assert p80 == pytest.approx({'threshold': 0.8, 'precision': 1.0, 'recall': 2 / 3, 'f1': 0.8})
    p75 = metrics.precision_threshold(preds, gts, 0.75, 0.25, num_classes=2)    # exactly 3/4 meets a 0.75 floor
    assert p75 == pytest.approx({'threshold': 0.5, 'precision': 0.75, 'recall': 1.0, 'f1': 6 / 7})
    assert metrics.precision_threshold(preds, gts, 0.6, 0.25, num_classes=2)['threshold'] == pytest.approx(0.3)
    never = metrics.precision_threshold([frame([FAR], [0], [0.9])], [frame([A], [0])], 0.5, 0.25, num_classes=1)
    assert math.isnan(never['threshold']) and never['recall'] == 0.0
    tie = metrics.precision_threshold([frame([FAR, A], [0, 0], [0.6, 0.6])], [frame([A], [0])], 0.5, 0.25,
                                      num_classes=1)                             # a tie: both or neither
    assert tie['threshold'] == pytest.approx(0.6) and tie['precision'] == pytest.approx(0.5)


# ----------------------------------------------------------------------------------------------------------------
# Symmetry-aware variants
# ----------------------------------------------------------------------------------------------------------------

SCENE_NAMES = ['box', 'cylinder', 'sphere', 'cone', 'capsule']


def turned(deg, axis='z', x=0.0, size=(1.0, 1.0, 1.0)):
    R = Rotation.from_euler(axis, deg, degrees=True).as_matrix()
    return encode_box_params(np.array([x, 0.0, 3.0]), R, np.array(size))


def test_symmetric_metrics_forgive_turns_within_the_ground_truths_group():
    # A square prism turned 45 degrees about its long axis: strict IoU 1/sqrt(2) (the octagon); it is the same
    # cylinder / cone / capsule, so symmetry-aware IoU 1. The same turn of a box class stays 1/sqrt(2).
    prism = dict(size=(1.0, 1.0, 2.0))
    gts = [frame([box(size=(1.0, 1.0, 2.0)), box(x=5.0, size=(1.0, 1.0, 2.0))], [1, 0]),
           frame([box(size=(1.0, 1.0, 2.0))], [4]), frame([box(size=(1.0, 1.0, 2.0))], [3])]
    preds = [frame([turned(45, **prism), turned(45, x=5.0, **prism)], [1, 0], [0.9, 0.8]),
             frame([turned(45, **prism)], [4], [0.7]), frame([turned(45, **prism)], [3], [0.6])]
    s = metrics.summarize(preds, gts, class_names=SCENE_NAMES, iou_thresholds=(0.5, 0.75))
    r = 1 / np.sqrt(2)
    assert s['avg_best_iou'] == pytest.approx(r, abs=1e-9) and s['ap3d_75'] == 0.0 and s['ap3d_50'] == 1.0
    assert s['avg_best_iou_per_class_sym'] == {'box': pytest.approx(r, abs=1e-9), 'cylinder': pytest.approx(1.0),
                                               'sphere': None, 'cone': pytest.approx(1.0),
                                               'capsule': pytest.approx(1.0)}
    assert s['avg_best_iou_sym'] == pytest.approx((3 + r) / 4, abs=1e-6)
    assert s['ap3d_sym']['0.75']['per_class'] == {'box': 0.0, 'cylinder': 1.0, 'sphere': None, 'cone': 1.0,
                                                  'capsule': 1.0}
    assert s['ap3d_75_sym'] == pytest.approx(0.75)
    h = metrics.headline(s)
    assert h['ap3d_75'] == 0.0 and h['ap3d_75_sym'] == pytest.approx(0.75)


def test_sphere_cube_in_any_rotation_and_turns_about_the_wrong_axis():
    rot = Rotation.from_euler('xyz', [20, 35, 50], degrees=True).as_matrix()
    cube_turned = encode_box_params(np.array([0.0, 0.0, 3.0]), rot, np.ones(3))
    gts = [frame([A], [2])]
    preds = [frame([cube_turned], [2], [0.9])]
    s = metrics.summarize(preds, gts, class_names=SCENE_NAMES)
    assert s['avg_best_iou'] < 0.8 and s['avg_best_iou_sym'] == pytest.approx(1.0, abs=1e-9)
    # A cylinder turned 45 degrees about x (not its axis z) is a different object: no better than strict.
    gts = [frame([box(size=(1.0, 1.0, 2.0))], [1])]
    preds = [frame([turned(45, axis='x', size=(1.0, 1.0, 2.0))], [1], [0.9])]
    ious = metrics.frame_ious(preds, gts)
    sym = metrics.frame_ious_sym(preds, gts, SCENE_NAMES)
    assert 0 < ious[0][0, 0] < 0.7 and sym[0][0, 0] >= ious[0][0, 0] and sym[0][0, 0] < 0.75
    # class-agnostic: the GT's class chooses the group, whatever the prediction's class
    preds = [frame([turned(30, size=(1.0, 1.0, 2.0))], [0], [0.9])]
    s = metrics.summarize(preds, gts, class_names=SCENE_NAMES)
    assert s['avg_best_iou_sym'] == 0.0 and s['avg_best_iou_agnostic_sym'] == pytest.approx(1.0, abs=1e-9)
    assert s['avg_best_iou_agnostic'] < 0.9


# ----------------------------------------------------------------------------------------------------------------
# mutation-testing survivors (issue 24 item 3)
# ----------------------------------------------------------------------------------------------------------------

def test_pr_curve_without_frames_or_ground_truth():
    empty = metrics.pr_curve([], [], 0, 0.5)
    assert [len(empty[k]) for k in ('precision', 'recall', 'scores', 'tp')] == [0, 0, 0, 0] and empty['num_gt'] == 0
    with warnings.catch_warnings():
        warnings.simplefilter('error')                               # no 0/0 for the recall of a class without GT
        curve = metrics.pr_curve([frame([A, B], [0, 0], [0.9, 0.8])], [frame([A], [1])], 0, 0.5)
    np.testing.assert_array_equal(curve['recall'], [0.0, 0.0])
    np.testing.assert_array_equal(curve['precision'], [0.0, 0.0])
    assert curve['tp'].dtype == bool and curve['num_gt'] == 0
    assert metrics.pr_curve([frame([A], [0], [0.9])], [frame([A], [0])], 0, 0.5)['tp'].tolist() == [True]


def test_equal_scores_keep_their_frame_order_in_many_predictions():
    # 20 frames, scores 0.5 / 0.9 alternating; the 0.9 ones hit, of the 0.5 ones the first five miss: in a stable
    # sort the ten hits at 0.9 come first, then the 0.5 ones in frame order (five misses, five hits)
    preds = [frame([A if i % 2 or i >= 10 else FAR], [0], [0.9 if i % 2 else 0.5]) for i in range(20)]
    curve = metrics.pr_curve(preds, [frame([A], [0]) for _ in range(20)], 0, 0.5)
    assert curve['tp'].tolist() == [True] * 10 + [False] * 5 + [True] * 5
    assert metrics.f1_threshold(preds, [frame([A], [0]) for _ in range(20)], 0.5)['threshold'] == 0.5


def test_f1_threshold_cuts_only_between_different_scores_and_counts_every_box():
    # 3 ground truths; hit 0.9, then 7 misses, then two hits; the best F1 is the first cut: 2·1 / (1 + 3) = 0.5
    # (keeping all 10 gives 2·3 / (10 + 3) = 6/13); a denominator one too large would prefer all 10
    gts = [frame([A, B, box(6.0)], [0, 0, 0])]
    scores = [0.9] + [0.8 - 0.01 * i for i in range(7)] + [0.6, 0.5]
    preds = [frame([A] + [box(0.0, 0.0, 20.0 + 3 * i) for i in range(7)] + [B, box(6.0)], [0] * 10, scores)]
    assert metrics.f1_threshold(preds, gts, 0.5) == pytest.approx(
        {'threshold': 0.9, 'f1': 0.5, 'precision': 1.0, 'recall': 1 / 3})
    # a tie below the top score: the cut takes both tied boxes (a hit and a miss), never one of them
    preds = [frame([A, B, FAR], [0, 0, 0], [0.9, 0.5, 0.5])]
    assert metrics.f1_threshold(preds, [frame([A, B], [0, 0])], 0.5) == pytest.approx(
        {'threshold': 0.5, 'f1': 0.8, 'precision': 2 / 3, 'recall': 1.0})


def test_best_iou_defaults_are_class_aware_and_frames_without_ground_truth_are_skipped():
    preds = [frame([A], [1], [0.9]), frame([A], [0], [0.9])]
    gts = [frame(np.zeros((0, 12)), []), frame([A], [1])]             # no GT in frame 0; wrong class in frame 1
    assert metrics.best_iou_per_gt(preds, gts).tolist() == [0.0]
    assert metrics.average_best_iou(preds, gts) == 0.0
    assert metrics.best_iou_per_gt(preds, gts, class_aware=False).tolist() == [pytest.approx(1.0)]
    with warnings.catch_warnings():
        warnings.simplefilter('error')                               # no mean of an empty array
        assert math.isnan(metrics.average_best_iou([frame([A], [0], [0.9])], [frame(np.zeros((0, 12)), [])]))


def test_operating_points_of_nothing_defaults_and_classes_outside_num_classes():
    nothing = {'threshold': None, 'f1': 0.0, 'precision': 0.0, 'recall': 0.0}
    for f in (metrics.f1_threshold, metrics.precision_threshold):
        assert metrics._json(f([], [])) == nothing
    # defaults: IoU 0.25 (a half-edge shift, IoU 1/3, is a hit) and a precision floor of 0.8
    half = ([frame([HALF], [0], [0.9])], [frame([A], [0])])
    assert metrics.f1_threshold(*half) == pytest.approx({'threshold': 0.9, 'f1': 1.0, 'precision': 1.0, 'recall': 1.0})
    assert metrics.precision_threshold(*half)['threshold'] == 0.9
    # class 1 lies outside num_classes=1: its higher-scored miss is not counted
    preds, gts = [frame([A, FAR], [0, 1], [0.9, 0.95])], [frame([A], [0])]
    assert metrics.f1_threshold(preds, gts, 0.5, num_classes=1)['f1'] == 1.0
    assert metrics.precision_threshold(preds, gts, 0.8, 0.5, num_classes=1)['threshold'] == 0.9


def test_ap3d_of_nothing():
    res = metrics.ap3d([], [], 0.5)
    assert res['per_class'] == {} and math.isnan(res['mean'])


def test_frame_count_message():
    with pytest.raises(ValueError) as e:
        metrics.ap3d([frame([A], [0], [0.9])], [], 0.5)
    assert str(e.value) == '1 prediction frames but 0 ground-truth frames'


def test_symmetric_iou_for_class_zero_the_last_class_and_after_a_plain_frame():
    prism = dict(size=(1.0, 1.0, 2.0))
    gt = box(size=(1.0, 1.0, 2.0))
    # class 0 named 'cylinder'; a frame with only a plain box first; a label past the names is a plain box
    preds = [frame([A], [1], [0.9]), frame([turned(45, **prism)], [0], [0.9]), frame([turned(45, **prism)], [2], [0.9])]
    gts = [frame([A], [1]), frame([gt], [0]), frame([gt], [2])]
    ious = metrics.frame_ious_sym(preds, gts, ['cylinder', 'box'])
    assert ious[0][0, 0] == pytest.approx(1.0) and ious[1][0, 0] == pytest.approx(1.0)
    assert ious[2][0, 0] == pytest.approx(1 / np.sqrt(2), abs=1e-9)                    # label 2: no name, strict


def test_summary_entries_per_class_curves_and_empty_input():
    s = metrics.summarize([frame([A], [0], [0.9])], [frame([A], [0])], class_names=['mug'], iou_thresholds=(0.5,))
    assert s['avg_best_iou_per_class'] == {'mug': pytest.approx(1.0)}
    assert s['ap3d']['0.5'] == {'mean': 1.0, 'per_class': {'mug': 1.0}}
    assert 'pr_curves' not in s and 'pr_curves_sym' not in s                          # curves only when asked
    s = metrics.summarize([frame([A], [0], [0.9])], [frame([A], [0])], class_names=['mug'], iou_thresholds=(0.5,),
                          include_curves=True)
    assert s['pr_curves']['0.5'] == {'mug': {'precision': [1.0], 'recall': [1.0]}} == s['pr_curves_sym']['0.5']
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        s = metrics.summarize([], [], class_names=['mug'], iou_thresholds=(0.5,))
    assert s['avg_best_iou'] is None and s['avg_best_iou_per_class'] == {'mug': None} and s['ap3d_50'] is None
    assert s['num_gt'] == 0 and s['num_pred'] == 0 and s['num_frames'] == 0


def test_headline_without_thresholds_and_with_none():
    assert metrics.headline({'avg_best_iou': 0.5}) == {'avg_best_iou': 0.5}
    h = metrics.headline({'avg_best_iou': None, 'iou_thresholds': [0.25], 'ap3d_25': 0.75})
    assert math.isnan(h['avg_best_iou']) and h['ap3d_25'] == 0.75 and set(h) == {'avg_best_iou', 'ap3d_25'}


def test_json_conversion_keeps_python_types():
    out = metrics._json({'i': np.int64(3), 'b': True, 'a': np.array([True, False]), 'f': np.float32(0.5),
                         'n': float('nan'), 2: (1, np.int32(2))})
    assert out == {'i': 3, 'b': True, 'a': [True, False], 'f': 0.5, 'n': None, '2': [1, 2]}
    assert type(out['i']) is int and type(out['b']) is bool and [type(v) for v in out['a']] == [bool, bool]
    assert type(out['2'][1]) is int

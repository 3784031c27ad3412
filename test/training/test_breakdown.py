"""training.breakdown: nuScenes-style error breakdown on hand-made frames where every number is worked out."""
import json

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from string_perception.box_ops import encode_box_params
from string_perception.box_ops import decode_box_params
from string_perception.training.breakdown import aligned_scale_iou, aligned_size_ratios, breakdown, oracle_ious

NAMES = ['box', 'cylinder', 'sphere', 'cone', 'capsule']


def rz(deg):
    return Rotation.from_euler('z', deg, degrees=True).as_matrix()


def box(t, size, R=np.eye(3)):
    return encode_box_params(np.asarray(t, float), np.asarray(R, float), np.asarray(size, float))


def frame(boxes, labels, scores=None):
    f = {'params': np.array(boxes, float).reshape(-1, 12), 'labels': np.array(labels, np.int64)}
    if scores is not None:
        f['scores'] = np.array(scores, float)
    return f


# Frame 0: a 0.2 m box (GT0) and a 0.1 x 0.1 x 0.3 m cylinder (GT1). Frame 1: a 0.1 m sphere (GT2) and a capsule
# (GT3) that only a cone prediction covers.
GTS = [frame([box((0, 0, 3), (0.2, 0.2, 0.2)), box((1, 0, 3), (0.1, 0.1, 0.3))], [0, 1]),
       frame([box((0, 0.5, 2), (0.1, 0.1, 0.1)), box((0.5, 0.5, 2), (0.05, 0.05, 0.2))], [2, 4])]
PREDS = [frame([box((0.02, 0, 3.01), (0.2, 0.2, 0.2), rz(90)),      # P0 box: shifted 2 cm x, 1 cm z; relabelled
                box((1, 0, 3), (0.1, 0.1, 0.15), rz(30)),          # P1 cylinder: half as tall, turned about its axis
                box((0, 0, 3), (0.2, 0.2, 0.2)),                    # P2 'sphere' exactly on the box: wrong class
                box((5, 0, 3), (0.2, 0.2, 0.2))],                   # P3 box far away, below the threshold
               [0, 1, 2, 0], [0.9, 0.8, 0.7, 0.3]),
         frame([box((0, 0.5, 2.05), (0.1, 0.1, 0.1)),               # P4 sphere: 5 cm too deep
                box((0.5, 0.5, 2), (0.05, 0.05, 0.2))],             # P5 'cone' exactly on the capsule
               [2, 3], [0.6, 0.55])]
IOU_P0 = (0.18 * 0.2 * 0.19) / (2 * 0.008 - 0.18 * 0.2 * 0.19)     # boxes overlap 0.18 x 0.2 x 0.19
IOU_P1, IOU_P4 = 0.5, 1 / 3                                         # P1 inside GT1 (half); P4 overlaps half of a cube


def test_breakdown_on_hand_made_frames():
    b = breakdown(PREDS, GTS, NAMES, score_threshold=0.5)
    json.dumps(b, allow_nan=False)
    o = b['overall']
    assert o['num_gt'] == 4 and o['num_matched'] == 3                 # GT3 (capsule) has no capsule prediction
    assert o['iou']['mean'] == pytest.approx((IOU_P0 + IOU_P1 + IOU_P4) / 3, abs=1e-9)
    assert o['iou']['median'] == pytest.approx(IOU_P1, abs=1e-9)
    assert o['centre_xy_m']['mean'] == pytest.approx(0.02 / 3) and o['centre_xy_m']['median'] == pytest.approx(0)
    assert o['centre_z_m']['mean'] == pytest.approx((0.01 + 0.05) / 3)
    assert o['centre_z_m']['median'] == pytest.approx(0.01)
    assert o['centre_3d_m']['mean'] == pytest.approx((np.hypot(0.02, 0.01) + 0.05) / 3)
    assert o['scale_error'] == {'mean': pytest.approx(0.5 / 3), 'median': pytest.approx(0.0)}
    assert o['orientation_deg']['mean'] == pytest.approx(0.0, abs=1e-6)   # box relabelled, cylinder turned
    assert o['volume_ratio'] == {'mean': pytest.approx(2.5 / 3), 'median': pytest.approx(1.0)}
    # only P1 is off in size: half as tall along the cylinder's longest (0.3 m) side
    assert o['size_ratio_longest'] == {'mean': pytest.approx(2.5 / 3), 'median': pytest.approx(1.0)}
    assert o['size_ratio_middle'] == {'mean': pytest.approx(1.0), 'median': pytest.approx(1.0)}
    assert o['size_ratio_shortest'] == {'mean': pytest.approx(1.0), 'median': pytest.approx(1.0)}
    # closest box of any class: GT0 -> P2 (sphere, IoU 1 > P0's), GT1 -> P1, GT2 -> P4, GT3 -> P5 (cone)
    assert o['class_accuracy'] == pytest.approx(0.5)
    assert b['confusion'] == {'box': {'sphere': 1}, 'cylinder': {'cylinder': 1}, 'sphere': {'sphere': 1},
                              'capsule': {'cone': 1}}
    # GT0 is overlapped by P0 and P2 (both kept, IoU >= 0.25): one duplicate over four objects
    assert o['duplicates_per_object'] == pytest.approx(0.25)
    # kept at 0.5: P0 TP, P1 TP, P2 FP (no sphere in frame 0), P4 TP (IoU 1/3 >= 0.25), P5 FP (no cone)
    assert o['num_kept'] == 5 and o['precision'] == pytest.approx(3 / 5) and o['recall'] == pytest.approx(3 / 4)
    c = b['per_class']
    assert c['box']['class_accuracy'] == 0.0 and c['box']['duplicates_per_object'] == 1.0
    assert c['box']['precision'] == 1.0 and c['box']['centre_xy_m']['median'] == pytest.approx(0.02)
    assert c['cylinder']['scale_error']['mean'] == pytest.approx(0.5) and c['cylinder']['volume_ratio']['median'] == 0.5
    assert c['cylinder']['orientation_deg']['mean'] == pytest.approx(0.0, abs=1e-6)
    assert c['sphere']['precision'] == pytest.approx(0.5) and c['sphere']['centre_z_m']['mean'] == pytest.approx(0.05)
    assert c['sphere']['iou']['mean'] == pytest.approx(IOU_P4, abs=1e-9)
    assert c['cone']['num_gt'] == 0 and c['cone']['class_accuracy'] is None and c['cone']['precision'] == 0.0
    assert c['cone']['recall'] is None and c['cone']['iou'] == {'mean': None, 'median': None}
    assert c['capsule']['num_matched'] == 0 and c['capsule']['class_accuracy'] == 0.0
    assert c['capsule']['precision'] is None and c['capsule']['recall'] == 0.0


def test_without_a_threshold_every_prediction_is_kept_and_min_iou_drops_weak_matches():
    b = breakdown(PREDS, GTS, NAMES)
    assert b['score_threshold'] is None and b['overall']['num_kept'] == 6
    assert b['overall']['precision'] == pytest.approx(3 / 6)          # P3 (far) is one more false positive
    strict = breakdown(PREDS, GTS, NAMES, score_threshold=0.5, min_iou=0.4)
    assert strict['overall']['num_matched'] == 2                      # P4's 1/3 no longer counts as a match
    assert strict['overall']['centre_z_m']['mean'] == pytest.approx(0.01 / 2)


def test_aligned_scale_iou_compares_sizes_along_the_nearest_axes():
    # (0.3, 0.1, 0.2) turned 90 degrees about z is the box (0.1, 0.3, 0.2): no scale error
    got = aligned_scale_iou(np.array([[0.3, 0.1, 0.2], [0.1, 0.1, 0.1]]), np.stack([rz(90), rz(20)]),
                            np.array([[0.1, 0.3, 0.2], [0.2, 0.1, 0.1]]), np.stack([np.eye(3), np.eye(3)]))
    np.testing.assert_allclose(got, [1.0, 0.5])


def test_aligned_size_ratios_per_side_longest_first():
    # the turned (0.3, 0.1, 0.2) box is the true (0.1, 0.3, 0.2) one; a 0.1 m cube against (0.1, 0.2, 0.4) is 1/4 of
    # the longest side, 1/2 of the middle one and the whole shortest one
    got = aligned_size_ratios(np.array([[0.3, 0.1, 0.2], [0.1, 0.1, 0.1]]), np.stack([rz(90), rz(20)]),
                              np.array([[0.1, 0.3, 0.2], [0.1, 0.2, 0.4]]), np.stack([np.eye(3), np.eye(3)]))
    np.testing.assert_allclose(got, [[1.0, 1.0, 1.0], [0.25, 0.5, 1.0]])


def test_empty_inputs():
    empty = breakdown([frame(np.zeros((0, 12)), [], [])], [frame(np.zeros((0, 12)), [])], NAMES, score_threshold=0.5)
    assert empty['overall']['num_gt'] == 0 and empty['overall']['class_accuracy'] is None and empty['confusion'] == {}
    assert empty['overall']['duplicates_per_object'] is None and empty['overall']['precision'] is None
    json.dumps(empty, allow_nan=False)


def test_oracle_ious_replace_one_part_by_the_truth():
    """Each oracle IoU is exactly the IoU left when the other two parts are wrong, whatever axis labels the
    prediction used; worked out by hand on a 0.2 m cube (one part of the prediction off at a time, then two)."""
    cube = box((0, 0, 2), (0.2, 0.2, 0.2))
    preds = [box((0.1, 0, 2), (0.2, 0.2, 0.2)),                       # centre 0.1 m off: IoU 1/3
             box((0, 0, 2), (0.2, 0.4, 0.1), rz(90)),                 # sizes off (relabelled: x and y swapped)
             box((0, 0, 2), (0.2, 0.2, 0.2), rz(45)),                 # rotation off by 45 degrees about z
             box((0.1, 0, 2), (0.1, 0.2, 0.2), rz(90))]               # centre off, and 0.1 m along the world y
    gts = [cube] * 4
    o = oracle_ious(decode_box_params(np.stack(preds)), decode_box_params(np.stack(gts)), ['box'] * 4)
    # centre only: true centre repairs it, the other two leave the 1/3
    assert o['iou_true_centre'][0] == pytest.approx(1.0)
    assert o['iou_true_rotation'][0] == pytest.approx(1 / 3) and o['iou_true_size'][0] == pytest.approx(1 / 3)
    # sizes only (pred x = 0.4 along the truth's y, pred z = 0.1): co-centred IoU 0.004 / (0.008 + 0.008 - 0.004)
    assert o['iou_true_size'][1] == pytest.approx(1.0)
    assert o['iou_true_centre'][1] == pytest.approx(1 / 3) and o['iou_true_rotation'][1] == pytest.approx(1 / 3)
    # rotation only: a square turned 45 degrees overlaps its unturned self in an octagon of 2 (sqrt2 - 1) a^2
    turned = 2 * (np.sqrt(2) - 1) / (2 - 2 * (np.sqrt(2) - 1))
    assert o['iou_true_rotation'][2] == pytest.approx(1.0)
    assert o['iou_true_centre'][2] == pytest.approx(turned) and o['iou_true_size'][2] == pytest.approx(turned)
    # centre 0.1 m off in x and the box 0.1 m along the world y (its own x, turned 90 degrees): true centre ->
    # a co-centred half cube, 1/2; true size -> the shifted cube, 1/3; true rotation relabels the same box
    assert o['iou_true_centre'][3] == pytest.approx(0.5)
    assert o['iou_true_size'][3] == pytest.approx(1 / 3)
    overlap = 0.1 * 0.1 * 0.2                                          # x in [0, 0.1], y in [-0.05, 0.05], z whole
    assert o['iou_true_rotation'][3] == pytest.approx(overlap / (0.008 + 0.004 - overlap))


def test_breakdown_reports_the_oracle_ious():
    o = breakdown(PREDS, GTS, NAMES, score_threshold=0.5)['overall']
    # P0 is off only in centre, P1 only in size (its turn is a symmetry), P4 only in centre
    assert o['iou_true_centre']['mean'] == pytest.approx((1 + IOU_P1 + 1) / 3, abs=1e-6)
    assert o['iou_true_size']['mean'] == pytest.approx((IOU_P0 + 1 + IOU_P4) / 3, abs=1e-6)
    assert o['iou_true_rotation']['mean'] == pytest.approx(o['iou']['mean'], abs=1e-6)

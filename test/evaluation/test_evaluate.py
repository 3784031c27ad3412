"""Evaluation: decoding as the node does, metrics on hand-made predictions, the CLI end to end on a fresh checkpoint."""
import json

import numpy as np
import pytest

from string_perception import box_ops
from string_perception.evaluation.evaluate import main as evaluate_main
from string_perception.training.inference import (decode_outputs, evaluate_predictions, filter_predictions,
                                                    headline)
pytest.importorskip('torch')  # optional: requirements/train.txt
from string_perception.training.train import main as train_main  # noqa: E402

NAMES = ('box', 'cylinder', 'sphere')


def _params(t, size):
    t, size = np.asarray(t, float).reshape(-1, 3), np.asarray(size, float).reshape(-1, 3)
    R = np.broadcast_to(np.eye(3), (len(t), 3, 3))
    return box_ops.encode_box_params(t, R, size)                                     # [M,12]


def test_decode_outputs_threshold_and_class_wise_nms():
    boxes = np.concatenate([_params([[0, 0, 2], [0, 0, 2.001], [1, 0, 2]], [[0.2, 0.2, 0.2]] * 3),
                            np.zeros((1, 12))]).astype(np.float32)                  # last token: invalid (size 0)
    logits = np.full((4, 3), -10.0, np.float32)
    logits[0, 0], logits[1, 0], logits[2, 2] = 3.0, 2.0, 0.0                        # scores .95, .88 (dup), .5
    det = decode_outputs(boxes, logits, NAMES, score_threshold=0.3, nms_iou=0.5, max_detections=10)
    assert det['params'].shape == (2, 12) and det['labels'].tolist() == [0, 2]     # duplicate suppressed
    np.testing.assert_allclose(det['scores'], [1 / (1 + np.exp(-3.0)), 0.5], rtol=1e-6)
    np.testing.assert_allclose(det['params'], boxes[[0, 2]], atol=1e-6)
    assert decode_outputs(boxes, logits, NAMES, score_threshold=0.9)['labels'].tolist() == [0]
    # multi-label: token 2 also names class 1 at 0.5; that candidate is another class, so it stays
    logits[2, 1] = 0.0
    assert decode_outputs(boxes, logits, NAMES, score_threshold=0.3, nms_iou=0.5)['labels'].tolist() == [0, 1]
    det = decode_outputs(boxes, logits, NAMES, score_threshold=0.3, nms_iou=0.5, multi_label=True)
    assert det['labels'].tolist() == [0, 1, 2]                                     # ties: token, then class
    np.testing.assert_allclose(det['params'][1], det['params'][2])


def test_evaluate_predictions_on_hand_made_frames():
    gt = [{'params': _params([[0, 0, 2], [0.5, 0, 2]], [[0.2] * 3, [0.1] * 3]), 'labels': np.array([0, 1])},
          {'params': _params([[0, 0, 3]], [[0.3] * 3]), 'labels': np.array([2])}]
    perfect = [{'params': g['params'].copy(), 'labels': g['labels'].copy(), 'scores': np.full(len(g['labels']), .9)}
               for g in gt]
    s = evaluate_predictions(perfect, gt, NAMES)
    assert s['avg_best_iou'] == pytest.approx(1.0) and s['ap3d_25'] == pytest.approx(1.0)
    assert s['ap3d_50'] == pytest.approx(1.0) and s['num_gt'] == 3
    # shift frame 1's box by half an edge along x: IoU 1/3 -> counts at 0.25, not at 0.5
    shifted = [dict(perfect[0]), dict(perfect[1])]
    shifted[1]['params'] = _params([[0.15, 0, 3]], [[0.3] * 3])
    s = evaluate_predictions(shifted, gt, NAMES)
    assert s['avg_best_iou'] == pytest.approx((1 + 1 + 1 / 3) / 3)
    assert s['ap3d']['0.25']['per_class']['sphere'] == pytest.approx(1.0)
    assert s['ap3d']['0.5']['per_class']['sphere'] == pytest.approx(0.0)
    # operating threshold: a low-score box is dropped from the published numbers only
    low = [dict(p) for p in perfect]
    low[1]['scores'] = np.array([0.1])
    s = evaluate_predictions(low, gt, NAMES, operating_threshold=0.3)
    assert s['avg_best_iou'] == pytest.approx(1.0)
    assert s['at_operating_threshold']['avg_best_iou'] == pytest.approx(2 / 3)
    h = headline(s)
    assert h['avg_best_iou'] == pytest.approx(1.0) and h['op_avg_best_iou'] == pytest.approx(2 / 3)
    assert [len(p['labels']) for p in filter_predictions(low, 0.3)] == [2, 0]
    # symmetry-aware numbers next to the strict ones (axis-aligned boxes: the same here), and the breakdown at
    # the operating threshold: the dropped sphere costs recall, not precision
    assert h['avg_best_iou_sym'] == pytest.approx(1.0) and h['op_avg_best_iou_sym'] == pytest.approx(2 / 3)
    assert {'ap3d_25_sym', 'ap3d_50_sym', 'avg_best_iou_agnostic_sym'} <= set(h)
    b = s['breakdown']['overall']
    assert s['breakdown']['score_threshold'] == 0.3 and b['num_gt'] == 3 and b['num_matched'] == 3
    assert b['precision'] == pytest.approx(1.0) and b['recall'] == pytest.approx(2 / 3)
    assert b['centre_3d_m']['mean'] == pytest.approx(0.0) and b['class_accuracy'] == pytest.approx(1.0)
    s = evaluate_predictions(shifted, gt, NAMES)
    assert s['avg_best_iou_sym'] == pytest.approx((1 + 1 + 1 / 3) / 3)     # a shifted cube stays 1/3 in any turn
    assert s['breakdown']['per_class']['sphere']['centre_xy_m']['mean'] == pytest.approx(0.15)
    assert 'breakdown' not in evaluate_predictions(shifted, gt, NAMES, breakdown=False)


def test_evaluate_cli_end_to_end_on_a_fresh_checkpoint(tmp_path):
    run = tmp_path / 'run'
    assert train_main(['--image-size', '64', '--patch-size', '8', '--width', '32', '--layers', '1', '--heads', '2',
                       '--model', 'class_embed_dim=16', '--model', 'embed_dim=16', '--steps', '3',
                       '--batch-size', '2', '--num-train-frames', '6', '--val-frames', '2', '--val-every', '3',
                       '--scene', 'max_objects=3', '--no-progress', '--out', str(run)]) == 0
    assert (run / 'last.pt').exists() and (run / 'val.csv').exists()
    out = tmp_path / 'eval'
    assert evaluate_main([str(run / 'last.pt'), '--num-frames', '3', '--num-draw', '2', '--out', str(out),
                          '--no-progress']) == 0
    report = json.loads((out / 'metrics.json').read_text())
    assert report['split'] == 'test' and report['seeds'] == [2_000_000_000, 2_000_000_003]
    assert report['decode']['multi_label'] is False
    assert set(report['precision80_threshold_25']) == {'threshold', 'precision', 'recall', 'f1'}
    assert report['num_frames'] == 3 and report['train_step'] == 3
    assert {'avg_best_iou', 'ap3d_25', 'ap3d_50'} <= set(report['headline'])
    m = report['metrics']
    assert report['num_objects'] == m['num_gt'] > 0 and m['num_frames'] == 3
    assert report['headline']['avg_best_iou'] == m['avg_best_iou']
    assert report['headline']['ap3d_25'] == m['ap3d']['0.25']['mean']
    assert m['avg_best_iou'] <= m['avg_best_iou_agnostic']       # the best of any class is at least the same class's
    pngs = sorted(p.name for p in out.glob('*.png'))
    assert {'iou_hist.png', 'pr_curve_25.png', 'pr_curve_50.png', 'frame_2000000000.png'} <= set(pngs)
    with pytest.raises(SystemExit):
        evaluate_main([str(run / 'last.pt'), '--split', 'train'])                # never on training seeds
    assert evaluate_main([str(run / 'last.pt'), '--num-frames', '3', '--num-draw', '0', '--out', str(tmp_path / 'ml'),
                          '--multi-label', '--no-progress']) == 0
    assert json.loads((tmp_path / 'ml' / 'metrics.json').read_text())['decode']['multi_label'] is True


def test_release_checkpoint_drops_the_optimiser_and_still_evaluates(tmp_path):
    from string_perception.model import load_checkpoint
    from string_perception.training.checkpoint import load_training_checkpoint, release_checkpoint
    run = tmp_path / 'run'
    assert train_main(['--image-size', '64', '--patch-size', '8', '--width', '32', '--layers', '1', '--heads', '2',
                       '--steps', '1', '--batch-size', '1', '--num-train-frames', '2', '--val-frames', '0',
                       '--val-every', '1', '--no-progress', '--out', str(run)]) == 0
    full = load_training_checkpoint(run / 'last.pt')
    shipped = release_checkpoint(run / 'last.pt', tmp_path / 'model.pt')
    assert 'optimizer' not in shipped and 'scheduler' not in shipped and 'rng' not in shipped
    assert shipped['train_config'] == full['train_config'] and shipped['step'] == 1
    assert shipped['train_seconds'] == full['train_seconds'] > 0
    assert 'git_commit' in shipped['provenance']
    assert (tmp_path / 'model.pt').stat().st_size < (run / 'last.pt').stat().st_size
    model, cfg, _ = load_checkpoint(tmp_path / 'model.pt')
    for k, v in full['model'].items():
        assert (model.state_dict()[k] == v).all()

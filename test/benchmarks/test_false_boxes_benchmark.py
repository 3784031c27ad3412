"""benchmarks/false_boxes.py: the tally of false boxes by role, and one rendered run end to end."""
import json

import numpy as np
import pytest

from benchmarks import false_boxes as bench
from string_perception import box_ops, metrics
from string_perception.evaluation import false_boxes as fb
from test.support.tiny_model import save_tiny_model


def test_tally_counts_only_false_boxes_by_role_per_group():
    rows = [{'group': 'kuka/front', 'false': True, 'role': fb.ROBOT, 'score': 0.4},
            {'group': 'kuka/front', 'false': True, 'role': fb.ROBOT, 'score': 0.6},
            {'group': 'kuka/front', 'false': False, 'role': fb.LABELLED, 'score': 0.9},
            {'group': 'kuka/left', 'false': True, 'role': fb.EMPTY, 'score': 0.3}]
    t = bench.tally(rows)
    assert list(t) == ['all', 'kuka/front', 'kuka/left']
    assert (t['all']['kept'], t['all']['false']) == (4, 3)
    assert t['kuka/front']['by_role'] == {'labelled': 0, 'unlabelled': 0, 'distractor': 0, 'robot': 2,
                                          'structure': 0, 'empty': 0}
    assert t['kuka/front']['score_by_role']['robot'] == pytest.approx(0.5)
    assert t['kuka/front']['score_by_role']['labelled'] is None            # true boxes never enter the roles
    row = '| kuka/left | 1 | 1 | 0 (0 %) | 0 (0 %) | 0 (0 %) | 0 (0 %) | 0 (0 %) | 1 (100 %) |'
    assert row in bench.format_tally(t)


def test_unlabelled_reasons_bin_by_occlusion_then_visible_pixels():
    rows = [{'object_visible_px': 2000, 'object_visibility': 0.05},   # too occluded, however large
            {'object_visible_px': 100, 'object_visibility': 0.5},     # under a quarter of the 1024 px rule
            {'object_visible_px': 256, 'object_visibility': 0.5},     # a quarter of it: the accurate variant's rule
            {'object_visible_px': 1023, 'object_visibility': 0.9},
            {'false': True}]                                          # a box on no unlabelled object: not counted
    assert list(bench.unlabelled_reasons(rows, 1024).values()) == [1, 1, 2, 0]


def test_dontcare_ap_leaves_out_only_the_marked_boxes():
    """One labelled box found at score 0.9, beaten by a false box at 0.95: AP 0.5 as scored (the first hit comes at
    precision 1/2); marking the false box DontCare leaves a perfect ranking, AP 1."""
    gt_box = box_ops.encode_box_params(np.array([0.0, 0.0, 1.0]), np.eye(3), np.full(3, 0.1))
    far = box_ops.encode_box_params(np.array([0.5, 0.0, 1.0]), np.eye(3), np.full(3, 0.1))
    pred = {'params': np.stack([far, gt_box]), 'scores': np.array([0.95, 0.9]), 'labels': np.array([0, 0])}
    gt = {'params': gt_box[None], 'labels': np.array([0])}
    ious = metrics.frame_ious_sym([pred], [gt], ['box'])[0]                    # [2,1]
    ap = bench.dontcare_ap([(pred, gt, ious, np.array([True, False]))], 1, 0.25)
    assert ap == {'scored': pytest.approx(0.5), 'dontcare': pytest.approx(1.0)}
    assert bench.dontcare_ap([(pred, gt, ious, np.array([False, False]))], 1, 0.25)['dontcare'] == pytest.approx(0.5)


@pytest.mark.slow
def test_benchmark_renders_scores_and_writes_its_tables(tmp_path):
    """One KUKA frame per rig at 96x128 through a tiny always-confident model: every kept box gets a role and a
    verdict, and the per-cell tally adds up."""
    model = save_tiny_model(tmp_path / 'tiny.onnx', logit_bias=3.0)
    assert bench.main([str(model), '--frames-per-rig', '1', '--cells', 'kuka', '--height', '96', '--width', '128',
                       '--min-visible-pixels', '64', '--processes', '1', '--threads', '1',
                       '--out', str(tmp_path / 'out')]) == 0
    res = json.loads((tmp_path / 'out' / 'results.json').read_text())
    boxes, cell = res['boxes'], res['by_cell']['kuka']
    assert boxes and {b['group'].split('/')[0] for b in boxes} == {'kuka'}
    assert cell['kept'] == len(boxes) and cell['false'] == sum(b['false'] for b in boxes)
    assert sum(cell['by_role'].values()) == cell['false']
    assert all(b['false'] == (b['best_iou'] < 0.25) and 0 <= b['role'] < len(fb.ROLES) for b in boxes)
    assert (tmp_path / 'out' / 'table.md').read_text().startswith('| group | kept | false |')
    ap = res['ap3d_25']['kuka']
    assert 0 <= ap['scored'] <= ap['dontcare'] <= 1          # leaving out false boxes never lowers AP

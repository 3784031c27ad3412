"""``python -m string_perception.sim_ros.sim_demo`` end to end over loopback DDS on a reserved ROS_DOMAIN_ID: two
cells (ALOHA ``top``, KUKA ``front``) x one rig, a couple of small frames each, the node with its default (workcell)
model: per-frame lines, metrics.json's runs and per-cell / per-rig summary, IoUs in [0, 1] that the offline
``runtime.Pipeline`` reproduces on the very frames that arrived over DDS, and the annotated grid."""
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from test.support.ros_helpers import REPO, reserved_domain_id, ros_skip_reason

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs', 'tf2_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs', 'tf2_msgs')))]

FRAMES, W, H = 2, 320, 240
RUNS = [('aloha', 'top'), ('kuka', 'front')]


def _offline_ious(frames_npz, model, labels):
    """Per saved frame: (cell, rig, index) -> best class-aware / agnostic IoU of the offline Pipeline's boxes."""
    from string_perception.training.inference import detections_to_arrays
    from string_perception.evaluation.workcell import WorkcellEvalConfig
    from string_perception.runtime import Pipeline
    from string_perception.runtime.model_variant import node_model_choice
    from string_perception.sim_ros.demo_scores import frame_ious
    wc = WorkcellEvalConfig()
    pipe = Pipeline(node_model_choice(model).path, ('CPUExecutionProvider',), score_threshold=wc.score_threshold, nms_iou=wc.nms_iou,
                    max_detections=100, resize_mode=wc.resize_mode)
    out = {}
    with np.load(frames_npz) as z:
        for i in range(int(z['n'])):
            pred = detections_to_arrays(pipe(z[f'{i}_rgb'], z[f'{i}_depth'], z[f'{i}_K']).detections)
            gt = {'params': z[f'{i}_gt_params'], 'labels': z[f'{i}_gt_labels']}
            np.testing.assert_allclose(np.sort(pred['scores']), np.sort(z[f'{i}_pred_scores']), atol=1e-4)
            out[(str(z[f'{i}_cell']), str(z[f'{i}_rig']), int(z[f'{i}_index']))] = frame_ious(pred, gt, labels)
    return out


def test_sim_demo_two_cells_over_dds(tmp_path):
    out = tmp_path / 'sim_demo'
    image = tmp_path / 'docs' / 'grid.png'
    env = dict(os.environ, PYTHONUNBUFFERED='1', PYTHONPATH=str(REPO), MUJOCO_GL='osmesa')
    with reserved_domain_id() as domain:
        p = subprocess.run([sys.executable, '-m', 'string_perception.sim_ros.sim_demo', '--cells', 'aloha', 'kuka',
                            '--rigs', 'top', 'front', '--frames', str(FRAMES), '--rate', '1', '--width', str(W),
                            '--height', str(H), '--providers', 'CPUExecutionProvider', '--domain-id', str(domain),
                            '--out', str(out), '--image', str(image), '--save-frames'],
                           cwd=str(REPO), env=env, capture_output=True, text=True, timeout=540)
    print(p.stdout[-4000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f'ROS_DOMAIN_ID {domain} (loopback only)' in p.stdout and 'arms pick' in p.stdout
    from string_perception.sim_ros.sim_demo import RUN_TIME_SPACING_S
    for i, (cell, rig) in enumerate(RUNS):                             # one line per ground-truth frame and run
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith(f'{cell}/{rig} frame ')]
        assert len(lines) == FRAMES
        stamps = [float(ln.split(' stamp ')[1].split(':')[0]) for ln in lines]
        assert all(i * RUN_TIME_SPACING_S < s < (i + 0.5) * RUN_TIME_SPACING_S for s in stamps), stamps  # own range
    report = json.loads((out / 'metrics.json').read_text())
    assert set(report) >= {'model', 'labels', 'runs', 'summary', 'image', 'min_visible_pixels'}
    assert report['model'].endswith('vitd_workcell.onnx')              # the node's default model
    assert report['min_visible_pixels'] == 1024 * W * H // (640 * 480)  # the workcell evaluator's label rule
    assert [(r['cell'], r['rig']) for r in report['runs']] == RUNS
    summary = report['summary']
    assert set(summary['cells']) == {'aloha', 'kuka'} and set(summary['rigs']) == {'aloha/top', 'kuka/front'}
    for s in [*summary['cells'].values(), *summary['rigs'].values()]:
        assert set(s) >= {'num_frames', 'num_gt', 'class_aware', 'agnostic', 'hit_25', 'ap3d_25'}
        for k in ('agnostic', 'hit_25'):
            assert s[k] is not None and 0.0 <= s[k] <= 1.0
    assert '| aloha/top |' in p.stdout and '| kuka/front |' in p.stdout    # the printed table
    live = {}
    for run in report['runs']:
        assert run['frames'] == FRAMES and 1 <= run['answered'] == len(run['per_frame'])
        assert sum(f['true_boxes'] for f in run['per_frame']) > 0          # the cell's objects are labelled
        for f in run['per_frame']:
            aware, agn = np.array(f['best_iou']), np.array(f['best_iou_agnostic'])
            assert len(aware) == len(agn) == f['true_boxes'] == len(f['true_classes'])
            assert np.all((0 <= aware) & (aware <= agn + 1e-12) & (agn <= 1))   # any class matches at least as well
            live[(run['cell'], run['rig'], f['index'])] = (aware, agn)
    offline = _offline_ious(out / 'frames.npz', report['model'], report['labels'])
    assert set(offline) == set(live)
    for key, (aware, agn) in live.items():
        np.testing.assert_allclose(aware, offline[key][0], atol=1e-3, err_msg=str(key))
        np.testing.assert_allclose(agn, offline[key][1], atol=1e-3, err_msg=str(key))
    grid = cv2.imread(str(out / report['image']))
    assert grid is not None and grid.shape[0] > 2 * (H // 2) and grid.shape[1] == 320   # 2 cells x 1 rig
    assert image.read_bytes() == (out / report['image']).read_bytes()
    assert 'node stopped (exit status 0)' in p.stdout


def test_a_run_longer_than_its_stamp_range_is_refused():
    from string_perception.sim_ros.sim_demo import RUN_TIME_SPACING_S, build_parser, plan_runs
    args = build_parser().parse_args(['--suite', 'workcell', '--rate', '1', '--frames', str(int(RUN_TIME_SPACING_S))])
    with pytest.raises(ValueError, match='simulated seconds per run'):
        plan_runs(args)
    args = build_parser().parse_args(['--suite', 'workcell', '--rate', '2', '--frames', '8'])
    assert len(plan_runs(args)) == 6


def test_the_demo_waits_for_the_nodes_class_names_before_any_frame():
    """Without the node's LabelInfo the demos could only guess class names (a live run once scored the workcell
    classes as the procedural ones); both wait for the detections match AND the LabelInfo, and say which is missing."""
    from types import SimpleNamespace
    from string_perception.demo import wait_for_node
    publishers = SimpleNamespace(n=0)
    listener = SimpleNamespace(subscription=SimpleNamespace(get_publisher_count=lambda: publishers.n), id_names=None)
    assert 'detections topic' in wait_for_node(listener, 0.05, poll_s=0.01)
    publishers.n = 1
    assert 'label_info' in wait_for_node(listener, 0.05, poll_s=0.01)
    listener.id_names = {0: 'box', 5: 'object'}
    assert wait_for_node(listener, 0.05, poll_s=0.01) is None

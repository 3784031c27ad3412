"""``python -m string_perception.sim_ros.sim_demo`` end to end: the simulated ALOHA camera (picking) -> the node ->
the listener over loopback DDS on a reserved ROS_DOMAIN_ID, a few small frames: per-frame lines, the node's
detections for the frames, metrics.json with its keys and the annotated frame."""
import json
import os
import subprocess
import sys

import cv2
import pytest

from test.support.ros_helpers import REPO, reserved_domain_id, ros_skip_reason

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs', 'tf2_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs', 'tf2_msgs')))]

FRAMES, W, H = 4, 96, 72


def test_sim_demo_end_to_end(tmp_path, model_path):
    out = tmp_path / 'sim_demo'
    env = dict(os.environ, PYTHONUNBUFFERED='1', PYTHONPATH=str(REPO), MUJOCO_GL='osmesa')
    with reserved_domain_id() as domain:
        p = subprocess.run([sys.executable, '-m', 'string_perception.sim_ros.sim_demo', '--cell', 'aloha', '--rig', 'top',
                            '--frames', str(FRAMES), '--rate', '0.5', '--width', str(W), '--height', str(H),
                            '--model', model_path, '--providers', 'CPUExecutionProvider', '--domain-id', str(domain),
                            '--out', str(out)], cwd=str(REPO), env=env, capture_output=True, text=True, timeout=540)
    print(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f'ROS_DOMAIN_ID {domain} (loopback only)' in p.stdout and 'arms pick' in p.stdout
    frame_lines = [ln for ln in p.stdout.splitlines() if ln.startswith('frame ')]
    assert len(frame_lines) == FRAMES                               # one line per ground-truth frame
    report = json.loads((out / 'metrics.json').read_text())
    assert set(report) >= {'cell', 'motion', 'frames', 'answered', 'labels', 'headline', 'metrics', 'per_frame',
                           'image'}
    assert report['cell'] == 'aloha' and report['motion'] == 'pick' and report['frames'] == FRAMES
    assert 1 <= report['answered'] == len(report['per_frame']) <= FRAMES
    assert report['answered'] >= FRAMES - 1               # one frame per 2 s: only the first may miss discovery
    assert set(report['headline']) >= {'avg_best_iou', 'ap3d_25', 'ap3d_50'}
    assert all(f['true_boxes'] > 0 for f in report['per_frame'])   # the cell's objects are labelled
    image = cv2.imread(str(out / report['image']))
    assert image is not None and image.shape == (H, W, 3)
    assert 'node stopped (exit status 0)' in p.stdout

"""``make demo`` end to end: the node in a subprocess on its own loopback domain, the bundled recording played
into it, per-frame lines, metrics against the ground truth, an annotated frame and metrics.json; the node is
stopped afterwards. And a clear message when the model is missing."""
import json
import os
import subprocess
import sys

import pytest

from test.support.ros_helpers import REPO, reserved_domain_id, ros_skip_reason


def _run(args, timeout):
    env = dict(os.environ, PYTHONUNBUFFERED='1', PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, '-m', 'string_perception.demo', *args], cwd=str(REPO), env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_missing_model_is_a_clear_error(tmp_path):
    p = _run(['--model', str(tmp_path / 'none.onnx'), '--out', str(tmp_path / 'out')], 60)
    assert p.returncode == 2
    assert 'none.onnx not found' in p.stderr and '--model' in p.stderr


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None, reason=str(ros_skip_reason('vision_msgs')))
def test_demo_end_to_end(tmp_path, model_path):
    out = tmp_path / 'demo'
    with reserved_domain_id() as domain:
        p = _run(['--model', model_path, '--out', str(out), '--rate', '0.5', '--domain-id', str(domain),
                  '--providers', 'CPUExecutionProvider'], 120)
    print(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f'ROS_DOMAIN_ID {domain} (loopback only)' in p.stdout
    frame_lines = [ln for ln in p.stdout.splitlines() if ln.startswith('frame ')]
    assert len(frame_lines) == 24                                  # one line per frame of the recording
    answered = [ln for ln in frame_lines if 'boxes' in ln]
    assert len(answered) >= 12 and all('true objects, mean best 3D IoU' in ln for ln in answered)
    assert 'AP3D@0.25' in p.stdout and 'node stopped (exit status 0)' in p.stdout
    report = json.loads((out / 'metrics.json').read_text())
    assert report['frames_played'] == 24 and report['frames_evaluated'] == len(answered)
    assert report['num_objects'] > 0 and set(report['headline']) >= {'avg_best_iou', 'ap3d_25', 'ap3d_50'}
    assert len(list(out.glob('frame_*.png'))) == 1
    assert 'node ready' in (out / 'node.log').read_text()

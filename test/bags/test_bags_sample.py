"""The bundled recording data/sample_recording: regenerated bit for bit from its seed (message bytes, with the BLAS
kernel it was written with; within rounding on any CPU), within the size budget, laid out as an RGB-D driver
publishes (topics, types, 30 Hz stamps), test-split seeds only, and the vision_msgs definitions in our typestore
hash like the built ROS interfaces."""
import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from string_perception.bags.reader import BagFrameReader, open_bag
from string_perception.bags.sample import (compare_with_recording, config_of, default_sample_path,
                                           message_differences, sample_messages)
from string_perception.bags.typestore import make_typestore

REPO = Path(__file__).resolve().parents[2]
REGENERATED_FRAMES = 3          # enough to cover every topic and the timing RNG; the script's --check does all


@pytest.fixture(scope='module')
def sample():
    return default_sample_path()


def test_regeneration_is_bit_for_bit_identical(sample):
    """Every message of the recording, regenerated with the OpenBLAS kernel it was written with (the script pins
    it: AVX-512 kernels round 1 ulp differently, which moves a pixel in 3 of the 24 frames)."""
    env = {k: v for k, v in os.environ.items() if k != 'OPENBLAS_CORETYPE'}
    run = subprocess.run([sys.executable, str(REPO / 'scripts' / 'make_sample_recording.py'), '--check',
                          '--out', str(sample)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f'identical: {4 * config_of(sample).frames} messages, byte for byte' in run.stdout


def test_regeneration_on_this_cpu_differs_at_most_by_rounding(sample):
    """With whatever BLAS kernel this CPU picks: stamps, depth, CameraInfo, labels exact, ground-truth floats to
    1e-12; a colour frame may differ (a pixel one grey level off changes the JPEG bytes)."""
    cmp = compare_with_recording(sample, frames=REGENERATED_FRAMES)
    assert cmp.messages == 4 * REGENERATED_FRAMES and cmp.worst_float_diff <= 1e-12, cmp.summary()
    assert all('/camera/color/image_raw/compressed.data' in p for p in cmp.problems), cmp.summary()


def test_the_comparison_catches_other_scenes_and_float_drift(sample):
    other = dataclasses.replace(config_of(sample), seed=config_of(sample).seed + 100)
    cmp = compare_with_recording(sample, cfg=other, frames=1)
    assert not cmp.ok and any('contents differ' in p or '!=' in p for p in cmp.problems), cmp.summary()
    # one ground-truth message against itself, then with one coordinate moved by 1 ulp (BLAS rounding) and by 1 nm
    topic, msg, _ = next(m for m in sample_messages(config_of(sample), frames=1) if m[0] == '/ground_truth/detections')
    assert message_differences(msg, msg) == ([], 0.0)
    moved = copy.deepcopy(msg)
    x = moved.detections[0].bbox.center.position.x
    for moved_x, ok in ((float(np.nextafter(x, np.inf)), True), (x + 1e-9, False)):
        moved.detections[0].bbox.center.position.x = moved_x
        diffs, d = message_differences(msg, moved)
        assert not diffs and d == pytest.approx(abs(moved_x - x)) and d > 0
        assert (d <= 1e-12) == ok
    label = msg.detections[0].results[0].hypothesis.class_id
    moved.detections[0].results[0].hypothesis.class_id = 'not-a-class'
    diffs, _ = message_differences(msg, moved, 'gt')
    assert diffs == [f"gt.detections[0].results[0].hypothesis.class_id: {label!r} != 'not-a-class'"]


def test_size_topics_types_and_30hz_stamps(sample):
    size = sum(p.stat().st_size for p in Path(sample).iterdir())
    assert size <= 5_000_000, f'{size / 1e6:.2f} MB'
    cfg = config_of(sample)
    assert cfg.seed >= 2_000_000_000 and cfg.seed + cfg.frames < 2_000_000_000 + 10**9
    reader = open_bag(sample)
    try:
        types = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    finally:
        reader.close()
    n = cfg.frames
    assert types == {'/camera/color/image_raw/compressed': ('sensor_msgs/msg/CompressedImage', n),
                     '/camera/depth/image_raw': ('sensor_msgs/msg/Image', n),
                     '/camera/color/camera_info': ('sensor_msgs/msg/CameraInfo', n),
                     '/ground_truth/detections': ('vision_msgs/msg/Detection3DArray', n)}
    with BagFrameReader(sample) as bag:
        got = list(bag)
        assert not bag.report.skipped
    stamps = np.array([f.stamp_ns for f in got])
    period = np.diff(stamps) / 1e6                                              # ms
    assert len(got) == n and np.all(np.abs(period - 1000 / 30) < 1.0), period
    assert {f.depth_encoding for f in got} == {'16UC1'} and got[0].rgb.shape == (cfg.height, cfg.width, 3)
    assert all(f.log_time_ns > f.stamp_ns for f in got)                         # received after capture
    assert sum(len(f.ground_truth['labels']) for f in got) >= n                 # objects to score


def test_vision_msgs_hashes_match_the_built_interfaces():
    share = Path(sys.prefix) / 'share' / 'vision_msgs' / 'msg'
    if not (share / 'Detection3DArray.json').is_file():
        pytest.skip('vision_msgs interfaces not built into this environment (scripts/build_interfaces.sh)')
    store = make_typestore()
    for name in ('Detection3DArray', 'Detection3D', 'LabelInfo'):
        desc = json.loads((share / f'{name}.json').read_text())
        want = next(h['hash_string'] for h in desc['type_hashes'] if h['type_name'] == f'vision_msgs/msg/{name}')
        assert store.hash_rihs01(f'vision_msgs/msg/{name}') == want, name

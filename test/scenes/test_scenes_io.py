"""Frames to PNG + JSON and back, and the string-perception-generate CLI."""
import json

import cv2
import numpy as np
import pytest

from string_perception.scenes import CLASS_NAMES, SceneConfig, generate_frame
from string_perception.scenes.cli import main
from string_perception.scenes.io import load_frame, save_frame


@pytest.mark.parametrize('seed', [0, 5])
def test_save_load_round_trip(tmp_path, seed):
    f = generate_frame(seed, SceneConfig(height=64, width=96))
    paths = save_frame(f, tmp_path / 'out', 'x')
    assert all(p.exists() for p in paths.values())
    g = load_frame(tmp_path / 'out', 'x')
    assert g.equals(f)
    # the files are ordinary images: BGR colour, 16-bit millimetre depth
    bgr = cv2.imread(str(paths['rgb']), cv2.IMREAD_UNCHANGED)
    assert bgr.dtype == np.uint8 and np.array_equal(bgr[..., ::-1], f.rgb)
    depth = cv2.imread(str(paths['depth']), cv2.IMREAD_UNCHANGED)
    assert depth.dtype == np.uint16 and np.array_equal(depth, f.depth_mm)
    meta = json.loads(paths['json'].read_text())
    assert len(meta['objects']) == f.num_objects
    assert [o['class_name'] for o in meta['objects']] == [CLASS_NAMES[i] for i in f.labels]


def test_cli_writes_n_frames(tmp_path):
    out = tmp_path / 'frames'
    assert main(['--out', str(out), '--count', '3', '--seed', '40', '--size', '48x64', '--no-progress']) == 0
    stems = sorted(p.name[:-len('.json')] for p in out.glob('frame_*.json'))
    assert len(stems) == 3 and len(list(out.glob('*_rgb.png'))) == 3 and len(list(out.glob('*_depth.png'))) == 3
    cfg = SceneConfig(height=48, width=64)
    for seed, stem in zip(range(40, 43), stems):
        assert load_frame(out, stem).equals(generate_frame(seed, cfg))
    meta = json.loads((out / 'scene_config.json').read_text())
    assert SceneConfig.from_dict(meta['config']) == cfg


def test_cli_preview(tmp_path):
    assert main(['--out', str(tmp_path), '--count', '1', '--seed', '2', '--size', '40x56', '--preview',
                 '--no-progress']) == 0
    img = cv2.imread(str(tmp_path / 'frame_0000000002_preview.png'))
    assert img.shape == (80, 224, 3)


def test_cli_rejects_bad_size(tmp_path):
    with pytest.raises(SystemExit):
        main(['--out', str(tmp_path), '--count', '1', '--size', '12by12'])

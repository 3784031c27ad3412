"""Plausibility checks of decoded frames (runtime/plausibility.py): each nonsense case of issue 36 is refused with
its kind, and valid frames (procedural scenes, the bundled recording, simulated cells, driver-like intrinsics) pass."""
import math

import numpy as np
import pytest

from string_perception.runtime.errors import InputError
from string_perception.runtime.plausibility import (DEFAULT_LIMITS, PLAUSIBILITY_KINDS, PlausibilityLimits,
                                                    check_depth_scale, check_frame_plausible, check_image_sizes,
                                                    check_intrinsics_plausible, field_of_view_deg, median_valid_depth_m)
from string_perception.scenes import SceneConfig, generate_frame

H, W = 480, 640
K640 = np.array([[615.0, 0.0, 319.5], [0.0, 615.0, 239.5], [0.0, 0.0, 1.0]])       # a D435 colour camera


def _kind(fn, *args):
    with pytest.raises(InputError) as e:
        fn(*args)
    return e.value.kind


def _depth_mm(rng=np.random.default_rng(0)):
    return rng.uniform(400, 2500, (H, W)).astype(np.uint16)                         # 0.4-2.5 m


@pytest.mark.parametrize('name, depth', [
    ('32FC1 in millimetres', _depth_mm().astype(np.float32)),
    ('16UC1 in tenths of a millimetre', (_depth_mm() * 10).astype(np.uint16)),
    ('16UC1 all 65535', np.full((H, W), 65535, np.uint16)),
    ('random 16UC1', np.random.default_rng(1).integers(0, 65536, (H, W)).astype(np.uint16)),
    ('16UC1 in metres', (_depth_mm() // 1000).astype(np.uint16)),
])
def test_implausible_depth_is_refused(name, depth):
    assert _kind(check_depth_scale, depth) == 'implausible_depth'


def test_millimetres_as_metres_message_names_the_unit():
    with pytest.raises(InputError, match='millimetres published as 32FC1'):
        check_depth_scale(_depth_mm().astype(np.float32))


@pytest.mark.parametrize('depth', [
    _depth_mm(), _depth_mm().astype(np.float32) / 1000, np.full((H, W), 200, np.uint16),      # 0.2 m close-up
    np.full((H, W), 9.5, np.float32), np.zeros((H, W), np.uint16), np.full((H, W), np.nan, np.float32),
    np.where(np.arange(W) < W // 2, 0, 800).astype(np.uint16)[None].repeat(H, 0),              # half invalid
])
def test_plausible_depth_passes(depth):
    check_depth_scale(depth)


def test_median_samples_a_grid_and_ignores_invalid():
    d = np.full((H, W), 1.5, np.float32)
    d[:, ::2] = np.nan
    d[::3] = -1.0
    assert median_valid_depth_m(d) == pytest.approx(1.5)
    assert median_valid_depth_m(np.zeros((4, 4), np.uint16)) is None
    assert median_valid_depth_m(np.full((H, W, 1), 700, np.uint16)) == 700


@pytest.mark.parametrize('K', [
    np.diag([2.0, 2.0, 1.0]) + [[0, 0, 319.5], [0, 0, 239.5], [0, 0, 0]],              # fx = 2 px: FOV 179.6 deg
    np.diag([1e7, 1e7, 1.0]) + [[0, 0, 319.5], [0, 0, 239.5], [0, 0, 0]],              # fx = 1e7 px: FOV 0.004 deg
    np.array([[307.5, 0, 159.5], [0, 307.5, 119.5], [0, 0, 1]]),                     # K of 320x240 on 640x480
    np.array([[615.0, 0, 319.5], [0, 2.0, 239.5], [0, 0, 1]]),                       # fy absurd only
])
def test_implausible_intrinsics_are_refused(K):
    assert _kind(check_intrinsics_plausible, K, (H, W)) == 'implausible_intrinsics'


def test_sim_and_driver_intrinsics_pass():
    check_intrinsics_plausible(K640, (H, W))
    for hfov in (40.0, 66.0, 72.0, 90.0, 120.0, 150.0):                                # narrow to wide lenses
        f = 0.5 * W / math.tan(math.radians(hfov) / 2)
        check_intrinsics_plausible([[f, 0, 319.5 + 0.015 * W], [0, f, 239.5 - 0.015 * H], [0, 0, 1]], (H, W))
    assert field_of_view_deg(615.0, 640) == pytest.approx(54.98, abs=0.01)


def test_tiny_images_are_refused():
    assert _kind(check_image_sizes, (1, 1), (1, 1)) == 'image_too_small'
    assert _kind(check_image_sizes, (480, 640), (8, 10)) == 'image_too_small'
    check_image_sizes((240, 320), (60, 80))                                            # depth at a quarter


def test_frame_check_order_gives_the_pipeline_kinds_first():
    dep = _depth_mm()
    assert _kind(check_frame_plausible, (H, W), dep, K640, (240, 320)) == 'bad_intrinsics'     # K for another size
    assert _kind(check_frame_plausible, (H, W), dep, np.zeros((3, 3)), None) == 'bad_intrinsics'
    assert _kind(check_frame_plausible, (2, 20000), np.ones((2, 20000), np.uint16), K640, None) == 'image_too_large'
    assert _kind(check_frame_plausible, (1, 1), np.ones((1, 1), np.uint16), np.diag([1.0, 1, 1]), None) == \
        'image_too_small'
    assert _kind(check_frame_plausible, (H, W), dep[:10], K640, None) == 'size_mismatch'              # not 'too small'
    assert _kind(check_frame_plausible, (H, W), dep.astype(np.int32), K640, None) == 'bad_encoding'
    assert _kind(check_frame_plausible, (H, W), dep, K640, None, DEFAULT_LIMITS, '32FC1') == 'bad_encoding'
    check_frame_plausible((0, 0), dep, K640, None)                                 # empty colour: the pipeline's
    assert _kind(check_frame_plausible, (H, W), dep.astype(np.float32), K640, None) == 'implausible_depth'
    check_frame_plausible((H, W), dep, K640, (H, W))
    check_frame_plausible((H, W), dep, K640, None)


def test_limits_are_one_frozen_validated_config():
    assert set(PLAUSIBILITY_KINDS) == {'image_too_small', 'implausible_depth', 'implausible_intrinsics'}
    with pytest.raises(Exception):
        DEFAULT_LIMITS.max_median_depth_m = 1.0                                        # frozen
    with pytest.raises(ValueError):
        PlausibilityLimits(min_fov_deg=100.0, max_fov_deg=90.0)
    loose = PlausibilityLimits(max_median_depth_m=40.0)
    check_depth_scale(np.full((H, W), 30000, np.uint16), loose)                        # 30 m: allowed when configured


@pytest.mark.parametrize('seed', range(2_000_000_000, 2_000_000_008))
def test_procedural_test_split_frames_pass(seed):
    f = generate_frame(seed, SceneConfig())
    check_frame_plausible(f.rgb.shape[:2], f.depth_mm, f.K, f.rgb.shape[:2])
    check_frame_plausible(f.rgb.shape[:2], f.depth_mm.astype(np.float32) / 1000, f.K, None)


def test_bundled_recording_frames_pass():
    from string_perception.bags.reader import BagFrameReader
    from string_perception.paths import share_file
    n = 0
    with BagFrameReader(share_file('data', 'sample_recording')) as bag:
        for frame in bag:
            check_frame_plausible(frame.rgb.shape[:2], frame.depth, frame.K, frame.info_hw)
            n += 1
    assert n == 24


@pytest.mark.parametrize('cell, extremes', [('aloha', False), ('kuka', False), ('aloha', True), ('kuka', True)])
def test_simulated_cell_frames_pass(cell, extremes):
    from string_perception.sim import SimConfig, generate_sim_frame
    cfg = SimConfig(cell=cell, height=96, width=128)
    if extremes:        # the widest intrinsics the sim config admits: principal point jitter 0.2, 30-140 deg
        cfg = SimConfig(cell=cell, height=96, width=128, hfov_deg_range=(30.0, 140.0), principal_point_jitter=0.2)
    for seed in (2_000_000_000, 2_000_000_001, 2_000_000_002):
        f = generate_sim_frame(seed, cfg)                      # a random camera of the cell per seed
        check_frame_plausible(f.rgb.shape[:2], f.depth_mm, f.K, f.rgb.shape[:2])
    if extremes:        # the jitter's corners: the principal point 20 % of the longer side off, both axes
        pad = math.ceil(0.2 * 128)
        for dx in (-pad, pad):
            for dy in (-pad, pad):
                check_intrinsics_plausible([[100.0, 0, 63.5 + dx], [0, 100.0, 47.5 + dy], [0, 0, 1]], (96, 128))


# Each driver preset as its driver publishes it: colour size, depth encoding, distortion model and coefficients.
DRIVER_CAMERAS = {
    'realsense': ((720, 1280), 'plumb_bob', [0.0] * 5, 910.0),
    'zed': ((720, 1280), 'plumb_bob', [0.0] * 5, 528.0),                     # rectified: zeros
    'depthai': ((720, 1280), 'rational_polynomial', [-2.1, 5.3, 0.0, 0.0, -2.9, -2.2, 5.2, -2.9] + [0.0] * 6,
                1030.0),                                                      # 14 coefficients, as depthai-ros
    'orbbec': ((720, 1280), 'plumb_bob', [0.08, -0.11, 0.0, 0.0, 0.05], 690.0),
}


@pytest.mark.parametrize('driver', sorted(DRIVER_CAMERAS))
def test_every_driver_preset_passes_every_check(driver):
    from types import SimpleNamespace

    from string_perception.codec.frame_checks import check_camera_info, check_frame_ids
    from string_perception.ros.launch_setup import DRIVERS
    from string_perception.codec.detection_msgs import camera_info_to_k
    (h, w), model, d, f = DRIVER_CAMERAS[driver]
    preset = DRIVERS[driver]
    info = SimpleNamespace(height=h, width=w, distortion_model=model, d=d, binning_x=0, binning_y=0,
                           roi=SimpleNamespace(x_offset=0, y_offset=0, width=0, height=0, do_rectify=False),
                           k=[f, 0.0, (w - 1) / 2 + 3.2, 0.0, f, (h - 1) / 2 - 1.7, 0.0, 0.0, 1.0])
    assert check_camera_info(info) == ()
    assert check_frame_ids(preset.frame, preset.frame, preset.frame) == ()
    K, hw = camera_info_to_k(info)
    depth = (np.random.default_rng(3).uniform(300, 4000, (h, w)).astype(np.uint16) if preset.depth_encoding != '32FC1'
             else np.random.default_rng(3).uniform(0.3, 4.0, (h, w)).astype(np.float32))
    check_frame_plausible((h, w), depth, K, hw)

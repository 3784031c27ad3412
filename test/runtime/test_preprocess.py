"""runtime/preprocess.py: colour encodings, depth units, centre-crop + resize, intrinsics update, typed errors."""
import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from string_perception.runtime.errors import INPUT_ERROR_KINDS, InputError
from string_perception.runtime.preprocess import (bgr_to_rgb, center_crop_box, crop_resize_intrinsics, depth_to_metres,
                                                  prepare_inputs, stack_inputs, to_rgb, validate_intrinsics)

K640 = np.array([[600.0, 0.0, 319.5], [0.0, 605.0, 239.5], [0.0, 0.0, 1.0]])


def _frame(h=480, w=640, seed=0):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)                  # [h,w,3]
    depth = rng.integers(300, 5000, (h, w)).astype(np.uint16)               # [h,w] mm
    return rgb, depth


def _project(K, P):
    uvw = P @ np.asarray(K, np.float64).T                                   # [n,3]
    return uvw[:, :2] / uvw[:, 2:3]


# ------------------------------------------------------------------------------------------------ intrinsics
@pytest.mark.parametrize('resize_mode', ['pad', 'crop'])
@pytest.mark.parametrize('src_hw,model_hw', [((480, 640), (32, 48)), ((480, 640), (240, 320)),
                                             ((720, 1280), (224, 224)), ((400, 300), (64, 96)),
                                             ((100, 150), (200, 300)), ((720, 1280), (120, 160))])
def test_new_intrinsics_map_source_pixels_exactly(src_hw, model_hw, resize_mode):
    """A 3D point projected with K lands, after pad-or-crop/resize, where K' projects it (pixel-centre
    convention)."""
    h, w = src_hw
    K = np.array([[500.0, 0.0, w / 2 - 3.2], [0.0, 510.0, h / 2 + 1.7], [0.0, 0.0, 1.0]])
    rgb = np.zeros((h, w, 3), np.uint8)
    inp = prepare_inputs(rgb, np.ones((h, w), np.float32), K, model_hw, resize_mode=resize_mode)
    x0, y0, cw, ch = inp.crop_xywh
    sx, sy = inp.scale_xy
    P = np.random.default_rng(1).uniform([-1, -1, 0.5], [1, 1, 4], (50, 3))  # [50,3] camera frame
    uv = _project(K, P)
    expected = np.stack([sx * (uv[:, 0] - x0 + 0.5) - 0.5, sy * (uv[:, 1] - y0 + 0.5) - 0.5], axis=1)
    np.testing.assert_allclose(_project(inp.intrinsics[0], P), expected, atol=2e-4)  # float32 K'
    np.testing.assert_allclose(inp.intrinsics[0], crop_resize_intrinsics(K, inp.crop_xywh, model_hw), rtol=1e-6)


@pytest.mark.parametrize('model_hw,atol', [((60, 80), 1e-6), ((45, 60), 0.05)])
def test_blob_centroid_lands_where_new_intrinsics_project(model_hw, atol):
    """Image-level check: a bright patch at a 3D point's projection ends up (by intensity centroid) at K' P."""
    h, w = 480, 800                        # wider than 4:3 -> columns cropped (x0 = 80, cw = 640)
    K = np.array([[700.0, 0.0, 401.0], [0.0, 700.0, 236.0], [0.0, 0.0, 1.0]])
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[200:216, 300:316] = 255            # centroid (307.5, 207.5)
    depth = np.full((h, w), 3000, np.uint16)
    depth[200:216, 300:316] = 1500
    P = 2.0 * np.linalg.solve(K, [307.5, 207.5, 1.0])                      # back-project at 2 m
    inp = prepare_inputs(rgb, depth, K, model_hw, resize_mode='crop')
    assert inp.crop_xywh == (80, 0, 640, 480)
    img = inp.image[0, :, :, 0].astype(np.float64)                         # [H,W]
    vv, uu = np.mgrid[:img.shape[0], :img.shape[1]]
    centroid = np.array([(img * uu).sum(), (img * vv).sum()]) / img.sum()
    np.testing.assert_allclose(centroid, _project(inp.intrinsics[0], P[None])[0], atol=atol)
    if atol < 1e-3:                        # exact 8x8 blocks: fully bright model pixels see the blob's depth
        full = inp.image[0, :, :, 0] == 255
        assert full.any() and np.all(inp.depth[0][full] == np.float32(1.5))


def test_crop_boxes():
    assert center_crop_box(480, 640, 480, 640) == (0, 0, 640, 480)        # same aspect: no crop
    assert center_crop_box(480, 640, 224, 224) == (80, 0, 480, 480)       # wider: columns
    assert center_crop_box(640, 480, 224, 224) == (0, 80, 480, 480)       # taller: rows
    assert center_crop_box(720, 1280, 32, 48) == (100, 0, 1080, 720)
    x0, y0, cw, ch = center_crop_box(7, 5, 3, 1000)                        # extreme: at least one pixel
    assert cw == 5 and ch >= 1 and 0 <= y0 <= 7 - ch


def test_crop_and_resize_content():
    rgb, depth = _frame(480, 640)
    inp = prepare_inputs(rgb, depth, K640, (240, 240), resize_mode='crop')
    assert inp.image.shape == (1, 240, 240, 3) and inp.image.dtype == np.uint8
    assert inp.depth.shape == (1, 240, 240) and inp.depth.dtype == np.float32
    assert inp.intrinsics.shape == (1, 3, 3) and inp.intrinsics.dtype == np.float32
    assert inp.crop_xywh == (80, 0, 480, 480) and inp.scale_xy == (0.5, 0.5)
    ref = cv2.resize(rgb[:, 80:560], (240, 240), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(inp.image[0], ref)
    np.testing.assert_array_equal(inp.depth[0], depth[:, 80:560][1::2, 1::2].astype(np.float32) / np.float32(1000))
    # identity size: the image is copied unchanged and K is unchanged
    same = prepare_inputs(rgb, depth, K640, (480, 640))
    np.testing.assert_array_equal(same.image[0], rgb)
    np.testing.assert_allclose(same.intrinsics[0], K640, rtol=1e-7)


def test_pad_content_is_the_whole_frame_resized():
    """resize_mode='pad' (the default): a 640x480 frame into a square model is letterboxed, not cropped: the rows
    of the window that image the frame are the frame resized, the padding is PAD_RGB with invalid depth."""
    from string_perception.runtime.preprocess import PAD_RGB
    rgb, depth = _frame(480, 640)
    inp = prepare_inputs(rgb, depth, K640, (240, 240))
    assert inp.crop_xywh == (0, -80, 640, 640) and inp.scale_xy == (0.375, 0.375)
    padded = cv2.copyMakeBorder(rgb, 80, 80, 0, 0, cv2.BORDER_CONSTANT, value=PAD_RGB)        # [640,640,3]
    np.testing.assert_array_equal(inp.image[0], cv2.resize(padded, (240, 240), interpolation=cv2.INTER_AREA))
    assert np.all(inp.image[0, :30] == PAD_RGB) and np.all(inp.image[0, -30:] == PAD_RGB)
    assert np.all(inp.depth[0, :30] == 0) and np.all(inp.depth[0, -30:] == 0)
    assert np.all(inp.depth[0, 30:210] > 0)                   # every frame row keeps its depth
    # a frame with the model's aspect ratio is only resized: pad and crop agree
    a, b = (prepare_inputs(rgb, depth, K640, (120, 160), resize_mode=m) for m in ('pad', 'crop'))
    assert a.crop_xywh == b.crop_xywh == (0, 0, 640, 480)
    np.testing.assert_array_equal(a.image, b.image)
    np.testing.assert_array_equal(a.depth, b.depth)


@pytest.mark.parametrize('src_hw,model_hw,window,rows_in', [
    ((480, 640), (120, 160), (0, 0, 640, 480), 15),           # 4:3 camera, 4:3 model: every token
    ((720, 1280), (120, 160), (0, -120, 1280, 960), 11),      # 16:9: 90 image rows of 120, 11 of 15 token rows
    ((480, 640), (128, 128), (0, -80, 640, 640), 12),         # 4:3 into square: 96 rows of 128
    ((640, 480), (120, 160), (-186, 0, 853, 640), 15)])       # portrait: columns padded
def test_pad_windows_and_tokens_in_frame(src_hw, model_hw, window, rows_in):
    from string_perception.runtime.preprocess import fit_box
    h, w = src_hw
    assert fit_box(h, w, *model_hw) == window
    x0, y0, cw, ch = window
    assert x0 <= 0 and y0 <= 0 and cw >= w and ch >= h and abs(cw * model_hw[0] - ch * model_hw[1]) <= model_hw[1]
    rgb, depth = _frame(h, w)
    inp = prepare_inputs(rgb, depth, np.array([[500.0, 0, w / 2], [0, 500.0, h / 2], [0, 0, 1]]), model_hw)
    grid = inp.token_in_frame(8).reshape(model_hw[0] // 8, model_hw[1] // 8)      # [gh,gw]
    assert grid.any(axis=1).sum() == rows_in
    # a token is in the frame exactly when its patch centre pixel has depth (the frame's depth is all valid)
    centres = inp.depth[0, 4::8, 4::8] > 0                                           # [gh,gw] (centre-ish pixel)
    assert np.array_equal(grid, centres) or (grid != centres).sum() <= grid.shape[1]  # boundary row rounding


@pytest.mark.parametrize('rgb_hw,depth_hw', [((301, 500), (301, 500)), ((300, 500), (300, 500)),
                                             ((300, 500), (150, 250))])
def test_depth_sampling_is_centre_aligned_nearest(rgb_hw, depth_hw):
    """Model pixel (i, j) takes the depth pixel containing its centre, computed exactly (ties at a pixel edge go
    to the later pixel); the same as cv2.INTER_NEAREST_EXACT wherever that is not at a tie."""
    from fractions import Fraction
    rgb = _frame(*rgb_hw, seed=3)[0]
    depth = _frame(*depth_hw, seed=4)[1]
    inp = prepare_inputs(rgb, depth, [[400, 0, 250], [0, 400, 150], [0, 0, 1]], (70, 110), resize_mode='crop')
    x0, y0, cw, ch = inp.crop_xywh
    fy, fx = Fraction(depth_hw[0], rgb_hw[0]), Fraction(depth_hw[1], rgb_hw[1])
    rows = [int((y0 + (i + Fraction(1, 2)) * Fraction(ch, 70)) * fy) for i in range(70)]
    cols = [int((x0 + (j + Fraction(1, 2)) * Fraction(cw, 110)) * fx) for j in range(110)]
    np.testing.assert_array_equal(inp.depth[0], depth[np.ix_(rows, cols)].astype(np.float32) / np.float32(1000))
    if rgb_hw == (301, 500):   # no ties: 301/140 and 473/220 times an odd number are never integers
        ref = cv2.resize(depth[y0:y0 + ch, x0:x0 + cw], (110, 70), interpolation=cv2.INTER_NEAREST_EXACT)
        np.testing.assert_array_equal(inp.depth[0], ref.astype(np.float32) / np.float32(1000))


# ------------------------------------------------------------------------------------------------ depth
def test_uint16_and_float32_depth_give_the_same_metres():
    rgb, depth_mm = _frame()
    a = prepare_inputs(rgb, depth_mm, K640, (60, 80))
    b = prepare_inputs(rgb, depth_mm.astype(np.float32) / 1000.0, K640, (60, 80))
    c = prepare_inputs(rgb, depth_mm.astype(np.float64) / 1000.0, K640, (60, 80))
    np.testing.assert_allclose(a.depth, b.depth, rtol=1e-6)
    np.testing.assert_allclose(a.depth, c.depth, rtol=1e-6)
    assert 0.3 <= a.depth.min() and a.depth.max() < 5.0


@pytest.mark.filterwarnings('ignore:overflow encountered in cast')
def test_invalid_depth_becomes_zero():
    d = np.array([[0.0, np.nan, np.inf, -np.inf], [-1.0, 1.5, 2.0, 1e300]], np.float64)
    np.testing.assert_array_equal(depth_to_metres(d), [[0, 0, 0, 0], [0, 1.5, 2.0, 0]])
    np.testing.assert_array_equal(depth_to_metres(d.astype(np.float32), '32FC1'), [[0, 0, 0, 0], [0, 1.5, 2.0, 0]])
    mm = np.array([[0, 1500, 65535]], np.uint16)
    np.testing.assert_allclose(depth_to_metres(mm, '16UC1'), [[0, 1.5, 65.535]], rtol=1e-6)
    np.testing.assert_allclose(depth_to_metres(mm, max_depth_m=10.0), [[0, 1.5, 0]], rtol=1e-6)
    rgb = np.zeros((2, 4, 3), np.uint8)
    inp = prepare_inputs(rgb, d.astype(np.float32), [[2, 0, 2], [0, 2, 1], [0, 0, 1]], (2, 4))
    np.testing.assert_array_equal(inp.depth[0], [[0, 0, 0, 0], [0, 1.5, 2.0, 0]])
    assert inp.valid_depth_fraction == 0.25 and inp.warnings == ()


@pytest.mark.parametrize('depth', [np.zeros((48, 64), np.uint16), np.full((48, 64), np.nan, np.float32),
                                   np.full((48, 64), -2.0, np.float32)])
def test_no_valid_depth_is_a_warning_not_an_error(depth):
    rgb, _ = _frame(48, 64)
    inp = prepare_inputs(rgb, depth, [[50, 0, 32], [0, 50, 24], [0, 0, 1]], (24, 32))
    assert inp.warnings == ('no_valid_depth',) and inp.valid_depth_fraction == 0.0
    assert np.all(inp.depth == 0) and np.all(np.isfinite(inp.depth))


def test_depth_of_another_size_with_the_same_aspect_is_resized_nearest():
    rgb, depth = _frame(480, 640)
    small = depth[::2, ::2].copy()                                         # [240,320], same aspect
    a = prepare_inputs(rgb, small, K640, (96, 96))
    b = prepare_inputs(rgb, np.repeat(np.repeat(small, 2, 0), 2, 1), K640, (96, 96))   # nearest upsample
    np.testing.assert_array_equal(a.depth, b.depth)
    np.testing.assert_array_equal(a.image, b.image)


def test_depth_size_mismatch_is_a_typed_error():
    rgb, _ = _frame(720, 1280)
    with pytest.raises(InputError) as e:
        prepare_inputs(rgb, np.ones((480, 640), np.uint16), K640 * [[2, 1, 2], [1, 1.5, 1.5], [1, 1, 1]], (32, 48))
    assert e.value.kind == 'size_mismatch' and '640x480' in str(e.value)
    rgb, _ = _frame(480, 640)
    for bad in [(482, 640), (240, 330), (848, 480)]:
        with pytest.raises(InputError, match='not registered'):
            prepare_inputs(rgb, np.ones(bad, np.uint16), K640, (32, 48))
    prepare_inputs(_frame(481, 641)[0], np.ones((240, 320), np.uint16), K640, (32, 48))  # rounding: accepted


@pytest.mark.parametrize('depth,encoding,kind', [
    (np.ones((4, 4), np.int32), None, 'bad_encoding'),
    (np.ones((4, 4), np.uint8), None, 'bad_encoding'),
    (np.ones((4, 4), np.float32), '16UC1', 'bad_encoding'),
    (np.ones((4, 4), np.uint16), '32FC1', 'bad_encoding'),
    (np.ones((4, 4), np.uint16), '8UC3', 'bad_encoding'),
    (np.ones((4, 4, 2), np.uint16), None, 'bad_shape'),
    (np.ones((0, 4), np.uint16), None, 'empty_image'),
])
def test_depth_errors(depth, encoding, kind):
    with pytest.raises(InputError) as e:
        depth_to_metres(depth, encoding)
    assert e.value.kind == kind


# ------------------------------------------------------------------------------------------------ colour
def test_every_colour_encoding_converts_to_rgb():
    rgb, _ = _frame(6, 10)
    alpha = np.full((6, 10, 1), 77, np.uint8)
    assert to_rgb(rgb, 'rgb8') is rgb
    np.testing.assert_array_equal(to_rgb(np.ascontiguousarray(rgb[..., ::-1]), 'bgr8'), rgb)
    np.testing.assert_array_equal(to_rgb(rgb[..., ::-1], 'bgr8'), rgb)                    # non-contiguous view
    np.testing.assert_array_equal(bgr_to_rgb(rgb[..., ::-1]), rgb)
    np.testing.assert_array_equal(to_rgb(np.concatenate([rgb, alpha], -1), 'rgba8'), rgb)
    np.testing.assert_array_equal(to_rgb(np.concatenate([rgb[..., ::-1], alpha], -1), 'bgra8'), rgb)
    grey = rgb[..., 0]
    for mono in (grey, grey[..., None]):
        np.testing.assert_array_equal(to_rgb(mono, 'mono8'), np.stack([grey] * 3, -1))
    np.testing.assert_array_equal(to_rgb(rgb, 'RGB8'), rgb)                                # case-insensitive


@pytest.mark.parametrize('image,encoding,kind', [
    (np.zeros((4, 4, 3), np.uint8), 'yuv422', 'bad_encoding'),
    (np.zeros((4, 4, 3), np.uint16), 'rgb8', 'bad_encoding'),
    (np.zeros((4, 4, 3), np.float32), 'bgr8', 'bad_encoding'),
    (np.zeros((4, 4, 3), np.uint8), 'rgba8', 'bad_shape'),
    (np.zeros((4, 4, 4), np.uint8), 'bgr8', 'bad_shape'),
    (np.zeros((4, 4, 3), np.uint8), 'mono8', 'bad_shape'),
    (np.zeros((4, 4), np.uint8), 'rgb8', 'bad_shape'),
    (np.zeros((0, 4, 3), np.uint8), 'rgb8', 'empty_image'),
    (np.zeros((4, 0), np.uint8), 'mono8', 'empty_image'),
])
def test_colour_errors(image, encoding, kind):
    with pytest.raises(InputError) as e:
        to_rgb(image, encoding)
    assert e.value.kind == kind


# ------------------------------------------------------------------------------------------------ frame errors
@pytest.mark.parametrize('K,kind_hint', [
    (np.zeros((3, 3)), 'all zero'), ([[600, 0, 320], [0, np.nan, 240], [0, 0, 1]], 'NaN'),
    ([[-600, 0, 320], [0, 600, 240], [0, 0, 1]], 'fx'), ([[600, 0, 320], [0, 600, 240]], '3x3'),
    ([[600, 0, 320], [0, 600, 240], [0, 0, 0]], '[0,fy,cy]'), ([[600, 0, 1280], [0, 600, 720], [0, 0, 1]], 'outside'),
    ('abc', 'numeric'),
])
def test_bad_intrinsics(K, kind_hint):
    rgb, depth = _frame(48, 64)
    with pytest.raises(InputError) as e:
        prepare_inputs(rgb, depth, K, (24, 32))
    assert e.value.kind == 'bad_intrinsics' and kind_hint in str(e.value)


def test_intrinsics_as_nine_numbers_and_for_another_size():
    rgb, depth = _frame(480, 640)
    a = prepare_inputs(rgb, depth, K640.ravel().tolist(), (24, 32))       # CameraInfo.k is 9 numbers
    b = prepare_inputs(rgb, depth, K640, (24, 32), intrinsics_hw=(480, 640))
    np.testing.assert_array_equal(a.intrinsics, b.intrinsics)
    with pytest.raises(InputError, match='1280x720') as e:
        prepare_inputs(rgb, depth, K640, (24, 32), intrinsics_hw=(720, 1280))
    assert e.value.kind == 'bad_intrinsics'
    assert validate_intrinsics(K640).shape == (3, 3)


def test_empty_and_huge_images():
    with pytest.raises(InputError) as e:
        prepare_inputs(np.zeros((0, 0, 3), np.uint8), np.zeros((0, 0), np.uint16), K640, (24, 32))
    assert e.value.kind == 'empty_image'
    rgb, depth = _frame(48, 64)
    with pytest.raises(InputError) as e:
        prepare_inputs(rgb, np.zeros((48, 0), np.uint16), K640 / [[10, 1, 10], [1, 10, 10], [1, 1, 1]], (24, 32))
    assert e.value.kind == 'empty_image'
    with pytest.raises(InputError) as e:
        prepare_inputs(rgb, depth, [[50, 0, 32], [0, 50, 24], [0, 0, 1]], (24, 32), max_pixels=1000)
    assert e.value.kind == 'image_too_large'
    # a 1-pixel frame is handled (upscaled), not an error
    one = prepare_inputs(np.full((1, 1, 3), 9, np.uint8), np.full((1, 1), 1000, np.uint16),
                         [[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]], (8, 8))
    assert np.all(one.image == 9) and np.all(one.depth == 1.0)


def test_stack_inputs_batches_frames():
    rgb, depth = _frame(48, 64)
    K = [[50, 0, 32], [0, 50, 24], [0, 0, 1]]
    feeds = stack_inputs([prepare_inputs(rgb, depth, K, (24, 32)) for _ in range(3)])
    assert feeds['image'].shape == (3, 24, 32, 3) and feeds['depth'].shape == (3, 24, 32)
    assert feeds['intrinsics'].shape == (3, 3, 3)


# ------------------------------------------------------------------------------------------------ properties
_dtypes = st.sampled_from([np.uint16, np.float32, np.float64, np.uint8, np.int32])


@st.composite
def _frames(draw):
    h, w = draw(st.integers(0, 24)), draw(st.integers(0, 24))
    hd, wd = draw(st.sampled_from([(h, w), (2 * h, 2 * w), (h // 2, w // 2), (draw(st.integers(0, 24)), w)]))
    dtype = draw(_dtypes)
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if np.issubdtype(dtype, np.floating):
        depth = rng.choice(np.array([0.0, np.nan, np.inf, -np.inf, -1.0, 0.5, 2.0, 1e30, 1e-30]), (hd, wd))
    else:
        depth = rng.integers(0, np.iinfo(dtype).max, (hd, wd), endpoint=True)
    rgb = rng.integers(0, 256, (h, w, draw(st.sampled_from([3, 3, 3, 1, 4]))), dtype=np.uint8)
    finite = st.floats(-1e4, 1e4, allow_nan=False)
    any_f = st.one_of(finite, st.sampled_from([np.nan, np.inf, 0.0]))
    K = [[draw(any_f), draw(st.sampled_from([0.0, draw(finite)])), draw(any_f)],
         [draw(st.sampled_from([0.0, 1.0])), draw(any_f), draw(any_f)],
         [0.0, 0.0, draw(st.sampled_from([1.0, 1.0, 0.0]))]]
    model_hw = (draw(st.integers(1, 16)), draw(st.integers(1, 16)))
    return rgb, depth.astype(dtype), K, model_hw


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames())
def test_property_prepare_inputs_gives_typed_errors_or_finite_outputs(frame):
    rgb, depth, K, model_hw = frame
    try:
        inp = prepare_inputs(rgb, depth, K, model_hw)
    except InputError as e:
        assert e.kind in INPUT_ERROR_KINDS
        return
    H, W = model_hw
    assert inp.image.shape == (1, H, W, 3) and inp.image.dtype == np.uint8
    assert inp.depth.shape == (1, H, W) and inp.depth.dtype == np.float32
    assert np.all(np.isfinite(inp.depth)) and np.all(inp.depth >= 0)
    assert np.all(np.isfinite(inp.intrinsics)) and inp.intrinsics[0, 0, 0] > 0 and inp.intrinsics[0, 1, 1] > 0
    assert 0.0 <= inp.valid_depth_fraction <= 1.0

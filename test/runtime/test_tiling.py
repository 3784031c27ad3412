"""runtime/tiling.py and Pipeline(tiling=...): window layout, per-window inputs, the border rule and the merge."""

import numpy as np
import pytest
from scipy.special import expit

from string_perception.runtime import Pipeline, prepare_inputs
from string_perception.runtime.tile_merge import MergeRule
from string_perception.runtime.tiling import (DEFAULT_MERGE, TilingConfig, inner_borders, merge_candidates,
                                              parse_tiling, window_keep, window_layout)
from test.support.depth_blob_model import K640, DepthBlobModel, blob_scene
from test.support.tiny_model import TINY_TOKENS_DIM, save_tiny_model

CPU_ONLY = ('CPUExecutionProvider',)


# ------------------------------------------------------------------------------------------------ layout
@pytest.mark.parametrize('h, w, input_hw, grid, overlap', [
    (480, 640, (120, 160), (2, 2), 0.15), (480, 640, (120, 160), (2, 2), 0.0), (480, 640, (120, 160), (3, 3), 0.25),
    (720, 1280, (120, 160), (1, 3), 0.15), (720, 1280, (120, 160), (2, 3), 0.1), (480, 640, (224, 224), (2, 2), 0.2),
    (481, 639, (32, 48), (2, 3), 0.3)])
def test_window_layout_covers_the_frame_with_the_overlap(h, w, input_hw, grid, overlap):
    wins = window_layout(h, w, input_hw, grid, overlap)
    rows, cols = grid
    assert len(wins) == rows * cols
    cover = np.zeros((h, w), np.int32)
    for x0, y0, cw, ch in wins:
        assert x0 >= 0 and y0 >= 0 and x0 + cw <= w and y0 + ch <= h                # inside the frame
        if cw < w and ch < h:                                                           # the model's aspect ratio
            assert abs(cw * input_hw[0] / input_hw[1] - ch) <= 1.0
        cover[y0:y0 + ch, x0:x0 + cw] += 1
    assert cover.min() >= 1                                                             # union = the frame
    grid_wins = np.array(wins).reshape(rows, cols, 4)
    for r in range(rows):                                                               # horizontal neighbours
        for c in range(cols - 1):
            a, b = grid_wins[r, c], grid_wins[r, c + 1]
            assert a[0] + a[2] - b[0] >= overlap * a[2] - 1.0
    for r in range(rows - 1):                                                           # vertical neighbours
        for c in range(cols):
            a, b = grid_wins[r, c], grid_wins[r + 1, c]
            assert a[1] + a[3] - b[1] >= overlap * a[3] - 1.0
    assert grid_wins[0, 0, :2].tolist() == [0, 0]
    assert grid_wins[-1, -1, 0] + grid_wins[-1, -1, 2] == w and grid_wins[-1, -1, 1] + grid_wins[-1, -1, 3] == h


def test_inner_borders():
    assert inner_borders((0, 0, 346, 260), 480, 640) == (False, False, True, True)
    assert inner_borders((294, 220, 346, 260), 480, 640) == (True, True, False, False)
    assert inner_borders((0, 0, 640, 480), 480, 640) == (False, False, False, False)


def test_window_keep_drops_centres_near_inner_borders_only():
    K = np.array([[100.0, 0, 79.5], [0, 100.0, 59.5], [0, 0, 1]])                       # a 120x160 model input
    uv = np.array([[80, 60], [2, 60], [157, 60], [80, 2], [80, 117], [-20, 60], [170, 60]], float)   # model px
    z = 2.0
    boxes = np.zeros((len(uv), 12))
    boxes[:, 0] = (uv[:, 0] - K[0, 2]) * z / K[0, 0]
    boxes[:, 1] = (uv[:, 1] - K[1, 2]) * z / K[1, 1]
    boxes[:, 2] = z
    keep = window_keep(boxes, K, (120, 160), (False, False, True, True), 0.1)          # right and bottom inner
    assert keep.tolist() == [True, True, False, True, False, True, False]
    keep = window_keep(boxes, K, (120, 160), (True, True, False, False), 0.1)          # left and top inner
    assert keep.tolist() == [True, False, True, False, True, False, True]
    assert window_keep(boxes, K, (120, 160), (True, True, True, True), 0.0).tolist() == \
        [True, True, True, True, True, False, False]                                    # margin 0: outside only
    boxes[0, 0] = np.nan
    assert window_keep(boxes, K, (120, 160), (True, True, True, True), 0.1)[0]          # left to the decoder


def test_merge_candidates_numbers_tokens_across_passes():
    b = [np.arange(36.0).reshape(3, 12), 100 + np.arange(24.0).reshape(2, 12)]
    lg = [np.zeros((3, 2)), np.ones((2, 2))]
    boxes, logits, index = merge_candidates(b, lg, [np.array([0, 2]), None])
    assert index.tolist() == [0, 2, 3, 4]
    np.testing.assert_array_equal(boxes, np.concatenate([b[0][[0, 2]], b[1]]))
    np.testing.assert_array_equal(logits[:, 0], [0, 0, 1, 1])


def test_parse_tiling():
    assert parse_tiling('none') is None and parse_tiling('') is None and parse_tiling(None) is None
    cfg = parse_tiling('2x3,overlap=0.2,margin=0.05,full=0,batch=0,agnostic=1')
    assert cfg == TilingConfig(grid=(2, 3), overlap=0.2, margin=0.05, full_frame_boxes=False, batch=False,
                               agnostic=True)
    assert parse_tiling(cfg.spec) == cfg and parse_tiling('2x2').spec == '2x2'
    assert parse_tiling('2x2,margin=0.1,overlap=0.2').margin == 0.1                  # options in any order
    for bad in ('2', 'axb', '2x2,foo=1', '2x2,full=2', '0x2', '2x2,overlap=1', '2x2,margin=0.2',
                '2x2,overlap=0.1,margin=0.1', '2x2,margin=-0.1'):
        with pytest.raises(ValueError):
            parse_tiling(bad)


def test_window_inputs_must_lie_in_the_frame():
    rgb, depth = np.zeros((480, 640, 3), np.uint8), np.full((480, 640), 1000, np.uint16)
    x = prepare_inputs(rgb, depth, K640, (120, 160), window_xywh=(294, 220, 346, 260))
    assert x.crop_xywh == (294, 220, 346, 260) and x.token_in_frame(8).all()
    with pytest.raises(ValueError):
        prepare_inputs(rgb, depth, K640, (120, 160), window_xywh=(300, 220, 346, 260))


# ------------------------------------------------------------------------------------------------ pipeline
def _pipe(tiling=None):
    return Pipeline('depth_blob', model=DepthBlobModel(), score_threshold=0.3, nms_iou=0.3, tiling=tiling)


def test_a_window_box_is_the_full_frame_box():
    frame, t, size = blob_scene(90, 150, 70, 130)             # inside window 0 of the 2x2 layout only
    full = _pipe()(*frame).detections
    tiled = _pipe(TilingConfig(full_frame_boxes=False))(*frame).detections
    assert len(full) == 1 and len(tiled) == 1
    np.testing.assert_allclose(full.translations[0], t, atol=0.006)
    np.testing.assert_allclose(tiled.translations[0], full.translations[0], atol=0.006)
    np.testing.assert_allclose(tiled.sizes[0], full.sizes[0], atol=0.008)
    np.testing.assert_allclose(tiled.translations[0], t, atol=0.003)   # the window sees it at ~1.85x resolution
    np.testing.assert_allclose(tiled.sizes[0], size, atol=0.004)


def test_an_object_seen_whole_by_two_windows_gives_one_box():
    frame, t, size = blob_scene(300, 340, 80, 120)            # in the overlap of windows 0 and 1 (columns 294..345)
    for cfg in (TilingConfig(margin=0.0, full_frame_boxes=False), TilingConfig(overlap=0.3, margin=0.1),
                TilingConfig(overlap=0.3, margin=0.1, full_frame_boxes=False)):   # both windows keep it
        dets = _pipe(cfg)(*frame).detections
        assert len(dets) == 1
        np.testing.assert_allclose(dets.translations[0], t, atol=0.006)


def test_a_box_cut_by_an_inner_border_is_dropped():
    frame, t, size = blob_scene(320, 420, 80, 120)            # window 0 (columns 0..345) sees 26 of its 100 px
    plain = MergeRule()                                       # every window box at its own score
    cut = _pipe(TilingConfig(overlap=0.15, margin=0.0, full_frame_boxes=False, merge=plain))(*frame).detections
    assert len(cut) == 2                                      # without the rule: the whole box and the cut one
    assert np.abs(cut.sizes[:, 0] - size[0]).max() > 0.1
    dets = _pipe(TilingConfig(overlap=0.15, margin=0.075, full_frame_boxes=False, merge=plain))(*frame).detections
    assert len(dets) == 1
    np.testing.assert_allclose(dets.translations[0], t, atol=0.006)
    np.testing.assert_allclose(dets.sizes[0], size, atol=0.006)


def test_the_default_merge_rule_down_weights_the_unconfirmed_cut_box():
    frame, t, size = blob_scene(320, 420, 80, 120)            # as above: window 0 sees a cut box the full frame lacks
    cfg = TilingConfig(overlap=0.15, margin=0.0, full_frame_boxes=False)
    assert cfg.merge == DEFAULT_MERGE and DEFAULT_MERGE.unconfirmed == 0.3
    pipe = Pipeline('depth_blob', model=DepthBlobModel(), score_threshold=0.05, nms_iou=0.3, tiling=cfg)
    dets = pipe(*frame).detections
    assert len(dets) == 2
    np.testing.assert_allclose(dets.translations[0], t, atol=0.006)            # the whole box, confirmed, first
    np.testing.assert_allclose(dets.scores, [expit(3.0), 0.3 * expit(3.0)], rtol=1e-6)   # the cut one x 0.3
    assert len(_pipe(cfg)(*frame).detections) == 1                              # under the node's threshold 0.3


@pytest.fixture(scope='module')
def tiny_path(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp('models') / 'tiny.onnx', logit_bias=3.0, tokens=True)


def _random_frame(h=192, w=288, seed=0):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)                   # [h,w,3]
    depth = rng.integers(500, 3000, (h, w)).astype(np.uint16)                # [h,w] mm
    K = np.array([[300.0, 0, (w - 1) / 2], [0, 300.0, (h - 1) / 2], [0, 0, 1]])
    return rgb, depth, K


def test_batched_passes_equal_passes_one_by_one(tiny_path):
    batched = Pipeline(tiny_path, CPU_ONLY, tiling=TilingConfig(margin=0.05), intra_op_threads=1)
    single = Pipeline(tiny_path, CPU_ONLY, tiling=TilingConfig(margin=0.05, batch=False), intra_op_threads=1)
    for seed in range(3):
        frame = _random_frame(seed=seed)
        a, b = batched(*frame), single(*frame)
        assert len(a.detections) > 0 and a.detections.class_names == b.detections.class_names
        np.testing.assert_array_equal(a.detections.token_indices, b.detections.token_indices)
        for k in ('translations', 'rotations', 'sizes', 'scores'):
            np.testing.assert_allclose(getattr(a.detections, k), getattr(b.detections, k), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.embedding, b.embedding, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.tokens, b.tokens, rtol=1e-5, atol=1e-6)


def test_tiled_result_fields_and_run_batch(tiny_path):
    pipe = Pipeline(tiny_path, CPU_ONLY, tiling=parse_tiling('2x2'), intra_op_threads=1)
    plain = Pipeline(tiny_path, CPU_ONLY, intra_op_threads=1)
    frames = [_random_frame(seed=s) for s in range(3)]
    r = pipe(*frames[0])
    n = (32 // 8) * (48 // 8)
    assert r.tokens.shape == (5 * n, TINY_TOKENS_DIM)                    # full frame + 4 windows
    assert (r.detections.token_indices < 5 * n).all()
    assert r.detections.token_indices.max() >= n                          # the windows do contribute
    ref = plain(*frames[0])
    np.testing.assert_allclose(r.embedding, ref.embedding, rtol=1e-5, atol=1e-6)   # the full-frame pass's
    assert r.crop_xywh == ref.crop_xywh
    np.testing.assert_allclose(r.intrinsics, ref.intrinsics)
    for frame, res in zip(frames, pipe.run_batch(frames, batch_size=4)):
        one = pipe(*frame)
        np.testing.assert_array_equal(res.detections.token_indices, one.detections.token_indices)
        np.testing.assert_allclose(res.detections.translations, one.detections.translations, rtol=1e-5, atol=1e-6)


class ZoomNamingModel(DepthBlobModel):
    """:class:`DepthBlobModel` that names what it sees 'cube' in the full frame and 'sphere' in a window (by the
    focal length it is given): the class confusion between passes that leaves duplicates after class-wise NMS."""

    labels = ('cube', 'sphere')

    def run(self, image, depth, intrinsics):
        out = super().run(image, depth, intrinsics)
        zoomed = intrinsics[:, 0, 0] > 200.0                                           # [B] 150 px full, ~255 windows
        logits = np.full(out['logits'].shape[:2] + (2,), -10.0, np.float32)           # [B,N,2]
        logits[..., 0] = np.where(zoomed[:, None], -10.0, out['logits'][..., 0])
        logits[..., 1] = np.where(zoomed[:, None], out['logits'][..., 0], -10.0)
        return {**out, 'logits': logits}


def test_agnostic_merge_leaves_one_box_where_passes_disagree_on_the_class():
    frame, t, size = blob_scene(90, 150, 70, 130)
    pipe = Pipeline('zoom', model=ZoomNamingModel(), score_threshold=0.3, nms_iou=0.3, tiling=TilingConfig())
    assert sorted(pipe(*frame).detections.class_names) == ['cube', 'sphere']
    pipe.set_tiling(TilingConfig(agnostic=True))
    dets = pipe(*frame).detections
    assert len(dets) == 1
    np.testing.assert_allclose(dets.translations[0], t, atol=0.006)


def test_static_batch_model_runs_its_passes_one_at_a_time(tmp_path):
    path = save_tiny_model(tmp_path / 's.onnx', static_batch=1, logit_bias=3.0)
    tiled = Pipeline(path, CPU_ONLY, tiling=TilingConfig(), intra_op_threads=1)
    assert len(tiled(*_random_frame()).detections) > 0

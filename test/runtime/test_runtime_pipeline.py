"""runtime/pipeline.py: the one code path (preprocess -> ONNX Runtime -> postprocess) node, evaluator and demo share."""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from string_perception.runtime import InputError, OnnxModel, Pipeline, decode_detections, prepare_inputs
from string_perception.runtime.errors import INPUT_ERROR_KINDS
from test.support.tiny_model import TINY_LABELS, save_tiny_model

CPU_ONLY = ('CPUExecutionProvider',)


@pytest.fixture(scope='module')
def model_path(tmp_path_factory):
    # logit_bias 3: most tokens score ~0.95, so frames give detections and NMS has work to do
    return save_tiny_model(tmp_path_factory.mktemp('models') / 'tiny.onnx', logit_bias=3.0)


@pytest.fixture(scope='module')
def pipe(model_path):
    return Pipeline(model_path, CPU_ONLY, score_threshold=0.3, nms_iou=0.3, intra_op_threads=1)


def _frame(h=120, w=160, seed=0):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)                   # [h,w,3]
    depth = rng.integers(500, 3000, (h, w)).astype(np.uint16)                # [h,w] mm
    K = np.array([[150.0, 0, (w - 1) / 2], [0, 150.0, (h - 1) / 2], [0, 0, 1]])
    return rgb, depth, K


def _same_detections(a, b):
    assert len(a) == len(b) and a.class_names == b.class_names
    np.testing.assert_array_equal(a.token_indices, b.token_indices)
    for k in ('translations', 'rotations', 'quaternions_xyzw', 'sizes', 'scores'):
        np.testing.assert_allclose(getattr(a, k), getattr(b, k), rtol=1e-5, atol=1e-6)


def test_result_fields(pipe):
    r = pipe(*_frame())
    assert len(r.detections) > 0 and set(r.detections.class_names) <= set(TINY_LABELS)
    assert r.embedding.shape == (8,) and r.embedding.dtype == np.float32 and np.all(np.isfinite(r.embedding))
    assert set(r.timings) == {'preprocess_ms', 'inference_ms', 'postprocess_ms', 'total_ms'}
    assert all(v >= 0 for v in r.timings.values())
    # 160x120 into 48x32 (3:2): letterboxed to 180x120, the 4 padding columns of 48 have no depth
    assert r.input_hw == (32, 48) and r.warnings == () and r.valid_depth_fraction == 0.875
    assert r.intrinsics.shape == (3, 3) and r.crop_xywh == (-10, 0, 180, 120)
    c = Pipeline.from_model(pipe.model, resize_mode='crop')(*_frame())
    assert c.crop_xywh == (0, 6, 160, 107) and c.valid_depth_fraction == 1.0
    assert pipe.provider == 'CPUExecutionProvider' and pipe.labels == TINY_LABELS


def test_pipeline_equals_its_parts(pipe, model_path):
    rgb, depth, K = _frame(seed=1)
    r = pipe(rgb, depth, K)
    model = OnnxModel(model_path, CPU_ONLY)
    inputs = prepare_inputs(rgb, depth, K, model.input_hw)
    out = model.run(**inputs.feed())
    keep = np.flatnonzero(inputs.token_in_frame(model.metadata.patch_size))    # tokens imaging the frame
    ref = decode_detections(out['boxes'][0][keep], out['logits'][0][keep], model.labels, score_threshold=0.3,
                            nms_iou=0.3)
    _same_detections(r.detections, dataclasses.replace(ref, token_indices=keep[ref.token_indices]))
    np.testing.assert_allclose(r.embedding, out['embedding'][0], rtol=1e-6)
    np.testing.assert_array_equal(r.intrinsics, inputs.intrinsics[0])


def test_padding_tokens_never_give_boxes(pipe):
    """A 320x60 strip into the 48x32 model: most token rows image padding; with scores ~0.95 on every token,
    boxes come only from tokens that image the frame, and all of those that survive NMS are kept."""
    rgb, depth, K = _frame(h=60, w=320, seed=2)
    inputs = pipe.preprocess(rgb, depth, K)
    in_frame = inputs.token_in_frame(pipe.model.metadata.patch_size)
    assert 0 < in_frame.sum() <= in_frame.size / 2
    r = pipe(rgb, depth, K)
    assert len(r.detections) > 0 and in_frame[r.detections.token_indices].all()
    crop = Pipeline.from_model(pipe.model, score_threshold=0.3, nms_iou=0.3, resize_mode='crop')(rgb, depth, K)
    assert crop.crop_xywh[0] > 0 and len(crop.detections) > 0       # crop: a centred 90x60 window only


def test_bad_frame_raises_and_the_next_frame_is_fine(pipe):
    good = _frame(seed=2)
    before = pipe(*good)
    rgb, depth, K = good
    for bad, kind in [((rgb, depth[:50], K), 'size_mismatch'), ((rgb, depth, np.zeros((3, 3))), 'bad_intrinsics'),
                      ((rgb[:0], depth, K), 'empty_image'), ((rgb, depth.astype(np.int32), K), 'bad_encoding')]:
        with pytest.raises(InputError) as e:
            pipe(*bad)
        assert e.value.kind == kind
    _same_detections(pipe(*good).detections, before.detections)


def test_no_valid_depth_is_reported_not_raised(pipe):
    rgb, depth, K = _frame()
    r = pipe(rgb, np.zeros_like(depth), K)
    assert r.warnings == ('no_valid_depth',) and r.valid_depth_fraction == 0.0
    assert np.all(np.isfinite(r.embedding))


def test_colour_encodings_give_the_same_result(pipe):
    rgb, depth, K = _frame(seed=3)
    ref = pipe(rgb, depth, K)
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    _same_detections(pipe(bgr, depth, K, encoding='bgr8').detections, ref.detections)
    bgra = np.concatenate([bgr, np.zeros_like(bgr[..., :1])], axis=-1)
    _same_detections(pipe(bgra, depth, K, encoding='bgra8').detections, ref.detections)
    with pytest.raises(InputError) as e:
        pipe(rgb, depth, K, encoding='bayer_rggb8')
    assert e.value.kind == 'bad_encoding'
    _same_detections(pipe(rgb, depth, K, depth_encoding='16UC1').detections, ref.detections)
    with pytest.raises(InputError) as e:
        pipe(rgb, depth, K, depth_encoding='32FC1')                          # uint16 data labelled 32FC1
    assert e.value.kind == 'bad_encoding'
    with pytest.raises(InputError) as e:
        pipe(rgb, depth, K, intrinsics_hw=(480, 640))                        # CameraInfo for another size
    assert e.value.kind == 'bad_intrinsics'


@pytest.mark.parametrize('batch_size', [1, 2, 3])
def test_run_batch_equals_single_frames(pipe, batch_size):
    frames = [_frame(120, 160, seed=s) for s in range(3)] + [_frame(96, 96, seed=9), _frame(64, 200, seed=7)]
    results = pipe.run_batch(frames, batch_size=batch_size)
    assert len(results) == 5
    for frame, r in zip(frames, results):
        single = pipe(*frame)
        _same_detections(r.detections, single.detections)
        np.testing.assert_allclose(r.embedding, single.embedding, rtol=1e-5, atol=1e-6)
        assert r.timings['batch_size'] <= batch_size


def test_run_batch_errors(pipe):
    good, bad = _frame(seed=4), (_frame()[0], np.ones((7, 7), np.uint16), _frame()[2])
    with pytest.raises(InputError):
        pipe.run_batch([good, bad, good])
    results = pipe.run_batch([good, bad, good + ('rgb8',)], batch_size=2, on_error='return')
    assert isinstance(results[1], InputError) and results[1].kind == 'size_mismatch'
    _same_detections(results[0].detections, results[2].detections)
    with pytest.raises(ValueError):
        pipe.run_batch([good], on_error='ignore')
    assert pipe.run_batch([]) == []


def test_set_params(model_path):
    p = Pipeline(model_path, CPU_ONLY, warmup=False, use_io_binding=True)
    frame = _frame(seed=5)
    n_default = len(p(*frame).detections)
    p.set_params(score_threshold=1.0)
    assert len(p(*frame).detections) == 0
    with pytest.raises(ValueError):
        p.set_params(score_threshold=0.5, nms_iou=0.0)                       # rejected as a whole
    assert p.params['score_threshold'] == 1.0 and p.params['nms_iou'] == 0.3
    p.set_params(score_threshold=0.3, max_detections=1)
    assert len(p(*frame).detections) == min(1, n_default)
    p.set_params(max_depth_m=1.0)
    assert p(*frame).valid_depth_fraction < 0.5
    with pytest.raises(ValueError):
        Pipeline(model_path, CPU_ONLY, max_detections=-1)


def test_class_agnostic_nms_and_multi_label_reach_decoding(model_path, monkeypatch):
    import string_perception.runtime.pipeline as pipeline_module
    seen = []
    real = pipeline_module.decode_detections

    def spy(*args, **kwargs):
        seen.append((kwargs['class_agnostic'], kwargs['multi_label']))
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline_module, 'decode_detections', spy)
    p = Pipeline(model_path, CPU_ONLY, warmup=False)
    frame = _frame(seed=5)
    p(*frame)
    p.set_params(nms_class_agnostic=True)
    assert p.params['nms_class_agnostic'] is True and p.params['nms_iou'] == 0.3   # other params unchanged
    p(*frame)
    p.set_params(multi_label=True)
    assert p.params['nms_class_agnostic'] is True and p.params['multi_label'] is True
    p(*frame)
    assert seen == [(False, False), (True, False), (True, True)]
    assert Pipeline(model_path, CPU_ONLY, warmup=False, nms_class_agnostic=True).params['nms_class_agnostic']
    assert Pipeline(model_path, CPU_ONLY, warmup=False, multi_label=True).params['multi_label']


def test_static_batch_model_batches_one_at_a_time(tmp_path):
    p = Pipeline(save_tiny_model(tmp_path / 's.onnx', static_batch=1, logit_bias=3.0), CPU_ONLY)
    results = p.run_batch([_frame(seed=s) for s in range(3)], batch_size=8)
    assert [r.timings['batch_size'] for r in results] == [1.0, 1.0, 1.0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(h=st.integers(0, 40), w=st.integers(0, 40), depth_kind=st.sampled_from(['mm', 'm', 'nan', 'half', 'bad']),
       fx=st.sampled_from([0.0, -5.0, 30.0, float('nan'), 1e12]), seed=st.integers(0, 1000))
def test_property_pipeline_gives_typed_errors_or_finite_results(pipe, h, w, depth_kind, fx, seed):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    depth = {'mm': lambda: rng.integers(0, 4000, (h, w)).astype(np.uint16),
             'm': lambda: rng.uniform(-1, 4, (h, w)).astype(np.float32),
             'nan': lambda: np.full((h, w), np.nan, np.float32),
             'half': lambda: np.ones((h // 2, w // 2), np.uint16),
             'bad': lambda: np.ones((h + 3, w), np.float32)}[depth_kind]()
    K = [[fx, 0, w / 2], [0, 30.0, h / 2], [0, 0, 1]]
    try:
        r = pipe(rgb, depth, K)
    except InputError as e:
        assert e.kind in INPUT_ERROR_KINDS
        return
    d = r.detections
    for arr in (d.translations, d.rotations, d.quaternions_xyzw, d.sizes, d.scores, r.embedding):
        assert np.all(np.isfinite(arr))


# ------------------------------------------------------------------------------------------------ optional tokens
def test_tokens_per_frame_when_the_model_has_them(pipe, tmp_path):
    from test.support.tiny_model import TINY_TOKENS_DIM
    tok_pipe = Pipeline(save_tiny_model(tmp_path / 'tokens.onnx', logit_bias=3.0, tokens=True), CPU_ONLY,
                        score_threshold=0.3, nms_iou=0.3, intra_op_threads=1)
    frames = [_frame(seed=s) for s in range(3)] + [_frame(96, 96, seed=9)]
    assert pipe(*frames[0]).tokens is None                                    # no tokens output: None
    singles = [tok_pipe(*f) for f in frames]
    N = (32 // 8) * (48 // 8)
    for f, r in zip(frames, singles):
        assert r.tokens.shape == (N, TINY_TOKENS_DIM) and r.tokens.dtype == np.float32
        out = tok_pipe.model.run(**prepare_inputs(*f, tok_pipe.input_hw).feed())
        np.testing.assert_array_equal(r.tokens, out['tokens'][0])
        _same_detections(r.detections, pipe(*f).detections)                   # tokens change nothing else
    assert not np.allclose(singles[0].tokens, singles[1].tokens)              # per frame, not a constant
    batched = tok_pipe.run_batch(frames, batch_size=3)
    for r, single in zip(batched, singles):
        np.testing.assert_allclose(r.tokens, single.tokens, rtol=1e-5, atol=1e-6)
    assert all(r.tokens.base is None for r in batched)                      # copies, not views of the batch

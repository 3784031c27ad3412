"""runtime/: checksum, metadata, OnnxModel (file faults, contract, providers + fallback, IO binding), no torch."""
import json
import logging
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from string_perception.runtime import onnx_runner
from string_perception.runtime.checksum import weights_sha256
from string_perception.runtime.errors import (MODEL_LOAD_ERROR_KINDS, InferenceError, MetadataError, ModelLoadError)
from string_perception.runtime.model_metadata import REQUIRED_KEYS, ModelMetadata
from string_perception.runtime.onnx_runner import LOGGER_NAME, OnnxModel
from test.support.tiny_model import TINY_LABELS, make_tiny_model, save_tiny_model

CPU_ONLY = ('CPUExecutionProvider',)


@pytest.fixture(scope='module')
def tiny_path(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp('models') / 'tiny.onnx')


@pytest.fixture(scope='module')
def tiny(tiny_path):
    return OnnxModel(tiny_path, CPU_ONLY, intra_op_threads=1)


def _load_error(path, **kw) -> ModelLoadError:
    with pytest.raises(ModelLoadError) as e:
        OnnxModel(path, CPU_ONLY, **kw)
    assert e.value.kind in MODEL_LOAD_ERROR_KINDS
    return e.value


def _runtime_records(caplog, level):
    return [r for r in caplog.records if r.name.startswith(LOGGER_NAME) and r.levelno == level]


# ------------------------------------------------------------------------------------------------ no torch
def test_runtime_imports_without_torch():
    code = ('import sys, string_perception.runtime, string_perception.runtime.linear_policy; '
            'assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))[:5]')
    subprocess.run([sys.executable, '-c', code], check=True, timeout=120)


# ------------------------------------------------------------------------------------------------ checksum
def test_checksum_is_storage_independent_and_sensitive():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    raw = numpy_helper.from_array(w, 'w')                                         # raw_data
    typed = helper.make_tensor('w', TensorProto.FLOAT, [2, 3], w.ravel().tolist())  # float_data
    assert raw.HasField('raw_data') and not typed.HasField('raw_data')

    def model(*inits):
        g = helper.make_graph([], 'g', [], [], initializer=list(inits))
        return helper.make_model(g)

    h = weights_sha256(model(raw))
    assert h == weights_sha256(model(typed)) and len(h) == 64
    b = numpy_helper.from_array(np.ones(2, np.int64), 'b')
    assert weights_sha256(model(raw, b)) != weights_sha256(model(b, raw))        # graph order matters
    assert weights_sha256(model(numpy_helper.from_array(w, 'v'))) != h           # names matter
    assert weights_sha256(model(numpy_helper.from_array(w.reshape(3, 2), 'w'))) != h   # shapes matter
    w2 = w.copy()
    w2[1, 2] += 1e-6
    assert weights_sha256(model(numpy_helper.from_array(w2, 'w'))) != h          # values matter
    assert weights_sha256(model()) == weights_sha256(model())                    # no weights: still defined


def test_tiny_model_records_its_checksum():
    m = make_tiny_model()
    assert ModelMetadata.from_model(m).weights_sha256 == weights_sha256(m)
    assert weights_sha256(make_tiny_model(tamper_weights=True)) != weights_sha256(m)


# ------------------------------------------------------------------------------------------------ metadata
def test_metadata_round_trip():
    md = ModelMetadata.from_model(make_tiny_model(labels=('a', 'b'), embedding_dim=5))
    assert md.labels == ('a', 'b') and md.input_hw == (32, 48) and md.patch_size == 8 and md.embedding_dim == 5
    assert md.precision == 'fp32' and md.coord_mode == 'camera_xyz' and md.config == {'preset': 'tiny-test'}
    assert ModelMetadata.from_props(md.to_props()) == md
    props = dict(md.to_props(), custom_key='x')
    assert ModelMetadata.from_props(props).extra == {'custom_key': 'x'}
    minimal = {k: v for k, v in md.to_props().items() if k in REQUIRED_KEYS}
    assert ModelMetadata.from_props(minimal).config is None


@pytest.mark.parametrize('key,value,match', [
    ('labels', None, 'lacks required'), ('weights_sha256', None, 'lacks required'),
    ('labels', '["a", ', 'not valid JSON'), ('labels', '"cube"', 'JSON list'), ('labels', '[]', 'JSON list'),
    ('labels', '["a", "a"]', 'duplicates'), ('labels', '["a", ""]', 'non-empty'),
    ('input_height', 'abc', 'positive integer'), ('input_width', '-3', r'\[1, 16384\]'),
    ('patch_size', '7', 'multiple of patch_size'), ('normalization', '{"mean": [0.5]}', 'normalization'),
    ('normalization', '{"mean": [0,0,0], "std": [1,0,1]}', 'positive'), ('weights_sha256', 'abc', '64 hex'),
    ('precision', 'int4', 'precision'), ('embedding_dim', '0', 'embedding_dim'), ('coord_mode', ' ', 'empty'),
    ('output_layout', '[1]', 'JSON object'), ('config_json', 'nope', 'not valid JSON'),
    ('data_seed', 'x1', 'integer'),
])
def test_metadata_errors_name_the_key(key, value, match):
    props = ModelMetadata.from_model(make_tiny_model()).to_props()
    if value is None:
        del props[key]
    else:
        props[key] = value
    with pytest.raises(MetadataError, match=match) as e:
        ModelMetadata.from_props(props)
    assert e.value.kind == 'bad_metadata' and e.value.key == key


def test_duplicated_metadata_key_is_an_error():
    m = make_tiny_model()
    m.metadata_props.add(key='labels', value='["x"]')
    with pytest.raises(MetadataError, match='more than once'):
        ModelMetadata.from_model(m)


# ------------------------------------------------------------------------------------------------ file faults
def test_missing_and_directory_and_empty(tmp_path):
    assert _load_error(tmp_path / 'nope.onnx').kind == 'missing_file'
    assert _load_error(tmp_path).kind == 'missing_file'
    (tmp_path / 'empty.onnx').write_bytes(b'')
    assert _load_error(tmp_path / 'empty.onnx').kind == 'corrupt_file'


@pytest.mark.parametrize('fraction', [0.5, 0.9, 0.999])
def test_truncated_file(tmp_path, tiny_path, fraction):
    data = tiny_path.read_bytes()
    p = tmp_path / 'trunc.onnx'
    p.write_bytes(data[:int(len(data) * fraction)])
    err = _load_error(p)
    assert err.kind in ('corrupt_file', 'not_onnx', 'bad_metadata') and str(p) in str(err)


@pytest.mark.parametrize('payload', [b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 4, b'hello, I am a text file\n' * 20,
                                     json.dumps({'model': 'onnx'}).encode(), bytes(1000)])
def test_non_onnx_file(tmp_path, payload):
    p = tmp_path / 'model.onnx'
    p.write_bytes(payload)
    assert _load_error(p).kind in ('corrupt_file', 'not_onnx')


@pytest.mark.parametrize('kwargs,match', [
    ({'input_names': ('rgb', 'depth', 'intrinsics')}, 'inputs are'),
    ({'image_elem_type': TensorProto.FLOAT}, "input 'image' has type float32"),
    ({'metadata_overrides': {'input_height': '64'}}, 'expected'),
    ({'metadata_overrides': {'labels': '["a", "b"]'}}, "output 'logits' has last dim 3"),
    ({'metadata_overrides': {'embedding_dim': '9'}}, "output 'embedding'"),
])
def test_contract_mismatch(tmp_path, kwargs, match):
    err = _load_error(save_tiny_model(tmp_path / 'm.onnx', **kwargs))
    assert err.kind == 'contract_mismatch' and match in err.message


def test_missing_output_and_extra_input(tmp_path):
    m = make_tiny_model()
    del m.graph.output[2]                                                         # no embedding
    onnx.save(m, str(tmp_path / 'a.onnx'))
    err = _load_error(tmp_path / 'a.onnx')
    assert err.kind == 'contract_mismatch' and "['embedding'] missing" in err.message


def test_bad_metadata_and_checksum(tmp_path):
    err = _load_error(save_tiny_model(tmp_path / 'a.onnx', metadata_overrides={'labels': None}))
    assert isinstance(err, MetadataError) and err.kind == 'bad_metadata' and 'labels' in err.message
    p = save_tiny_model(tmp_path / 'b.onnx', tamper_weights=True)
    err = _load_error(p)
    assert err.kind == 'checksum_mismatch' and 'modified or corrupted' in err.message
    assert OnnxModel(p, CPU_ONLY, verify_checksum=False).providers == CPU_ONLY


def test_unsupported_ir_version(tmp_path):
    assert 'ir_version 99' in _load_error(save_tiny_model(tmp_path / 'ir99.onnx', ir_version=99)).message  # checker
    p = save_tiny_model(tmp_path / 'ir14.onnx', ir_version=14)    # onnx 1.23's default; onnxruntime 1.31 max is 13
    try:
        OnnxModel(p, CPU_ONLY)
    except ModelLoadError as e:
        assert e.kind == 'session_failed' and 'IR version 14' in e.message and 'lower ir_version' in e.message
    else:
        pytest.skip('this onnxruntime supports IR version 14')


def test_warmup_failure_is_a_load_error(tmp_path):
    m = make_tiny_model(metadata_overrides={'embedding_dim': '9'})
    m.graph.output[2].type.tensor_type.shape.dim[1].dim_param = 'E'             # hide the static size
    onnx.save(m, str(tmp_path / 'w.onnx'))
    err = _load_error(tmp_path / 'w.onnx')
    assert err.kind == 'warmup_failed' and 'embedding' in err.message
    OnnxModel(tmp_path / 'w.onnx', CPU_ONLY, warmup=False)                       # loads; runs would fail


# ------------------------------------------------------------------------------------------------ providers
def test_default_providers_fall_back_to_cpu_with_one_warning(tiny_path, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER_NAME)
    model = OnnxModel(tiny_path)                                                   # TensorRT, CUDA, CPU
    if set(model.providers) & {'CUDAExecutionProvider', 'TensorrtExecutionProvider'}:
        pytest.skip('a usable GPU provider is present here')                      # before any CPU assertion
    assert model.provider == 'CPUExecutionProvider'
    warnings = _runtime_records(caplog, logging.WARNING)
    infos = [r.getMessage() for r in _runtime_records(caplog, logging.INFO)]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert 'TensorrtExecutionProvider' in msg and 'CUDAExecutionProvider' in msg
    assert 'running on CPUExecutionProvider' in msg
    assert set(model.provider_problems) == {'TensorrtExecutionProvider', 'CUDAExecutionProvider'}
    assert any('running on CPUExecutionProvider' in m for m in infos)
    assert model.run(**model.dummy_inputs())['boxes'].shape[0] == 1


def test_cpu_only_request_logs_no_warning(tiny_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    model = OnnxModel(tiny_path, ['cpu'])
    assert model.providers == CPU_ONLY and model.provider_problems == {}
    assert OnnxModel(tiny_path, 'CPUExecutionProvider', warmup=False).providers == CPU_ONLY   # a bare string
    assert not _runtime_records(caplog, logging.WARNING)


@pytest.mark.parametrize('requested', [('TensorrtExecutionProvider', 'CUDAExecutionProvider', 'CPUExecutionProvider'),
                                       ('CUDAExecutionProvider', 'CPUExecutionProvider'), ('cuda',)])
def test_fallback_when_onnxruntime_itself_fails_the_gpu_provider(tiny_path, caplog, monkeypatch, requested):
    """Skip our library probe, so ONNX Runtime really tries CUDA/TensorRT (and fails without a GPU or libraries):
    either the session raises or it silently lacks the provider. Both end on the CPU with one warning."""
    monkeypatch.setattr(onnx_runner, '_probe_provider_library', lambda provider: None)
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    model = OnnxModel(tiny_path, requested)
    if model.provider != 'CPUExecutionProvider':
        pytest.skip('a usable GPU provider is present here')
    warnings = _runtime_records(caplog, logging.WARNING)
    assert len(warnings) == 1 and 'CUDAExecutionProvider' in warnings[0].getMessage()
    assert 'CUDAExecutionProvider' in model.provider_problems
    model.run(**model.dummy_inputs())


def test_no_cpu_fallback_and_bad_provider_names(tiny_path, monkeypatch):
    monkeypatch.setattr(onnx_runner, '_probe_provider_library', lambda p: 'libcudart.so: missing (test)')
    with pytest.raises(ModelLoadError) as e:
        OnnxModel(tiny_path, ['CUDAExecutionProvider'], cpu_fallback=False)
    assert e.value.kind == 'provider_unavailable' and 'libcudart' in e.value.message
    monkeypatch.setattr(onnx_runner, '_probe_provider_library', lambda p: None)   # ONNX Runtime decides
    try:
        model = OnnxModel(tiny_path, ['CUDAExecutionProvider'], cpu_fallback=False)
    except ModelLoadError as e2:
        assert e2.kind == 'provider_unavailable'                                    # never silently on the CPU
    else:
        assert model.provider == 'CUDAExecutionProvider'
    for bad in (['OpenGL'], []):
        with pytest.raises(ModelLoadError) as e:
            OnnxModel(tiny_path, bad)
        assert e.value.kind == 'bad_provider'
    assert onnx_runner.normalize_provider_name('TensorRT') == 'TensorrtExecutionProvider'
    assert onnx_runner.normalize_provider_name('cudaexecutionprovider') == 'CUDAExecutionProvider'


def test_provider_library_probe_reports_the_missing_library():
    reason = onnx_runner._probe_provider_library('CUDAExecutionProvider')
    assert onnx_runner._probe_provider_library('CPUExecutionProvider') is None
    if reason is not None:
        assert 'so' in reason or 'dll' in reason or 'not part' in reason


def test_provider_and_session_options(tiny_path, tmp_path):
    cache = tmp_path / 'trt_cache'
    model = OnnxModel(tiny_path, [('CUDAExecutionProvider', {'arena_extend_strategy': 'kSameAsRequested'}), 'cpu'],
                      device_id=1, trt_engine_cache_path=cache, trt_fp16=True, intra_op_threads=2, warmup=False)
    trt = model._provider_opts['TensorrtExecutionProvider']
    assert trt == {'device_id': 1, 'trt_fp16_enable': True, 'trt_engine_cache_enable': True,
                   'trt_engine_cache_path': str(cache)} and cache.is_dir()
    assert model._provider_opts['CUDAExecutionProvider'] == {'device_id': 1,
                                                              'arena_extend_strategy': 'kSameAsRequested'}
    so = model.session.get_session_options()
    assert so.intra_op_num_threads == 2
    assert so.graph_optimization_level == onnx_runner.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    with pytest.raises(ValueError):
        OnnxModel(tiny_path, CPU_ONLY, intra_op_threads=-1)


# ------------------------------------------------------------------------------------------------ running
def test_attributes_and_describe(tiny):
    assert tiny.input_hw == (32, 48) and tiny.labels == TINY_LABELS
    assert tiny.output_names[:3] == ('boxes', 'logits', 'embedding')
    d = tiny.describe()
    assert d['provider'] == 'CPUExecutionProvider' and d['labels'] == list(TINY_LABELS)
    assert d['weights_sha256'] == tiny.metadata.weights_sha256


def _random_inputs(batch, seed=0):
    rng = np.random.default_rng(seed)
    K = np.array([[40, 0, 23.5], [0, 40, 15.5], [0, 0, 1]], np.float32)
    return {'image': rng.integers(0, 256, (batch, 32, 48, 3), dtype=np.uint8),       # [B,H,W,3]
            'depth': rng.uniform(0, 4, (batch, 32, 48)).astype(np.float32),          # [B,H,W]
            'intrinsics': np.stack([K * rng.uniform(0.5, 2) for _ in range(batch)]).astype(np.float32)}


def test_run_shapes_and_batch_consistency(tiny):
    feeds = _random_inputs(3)
    out = tiny.run(**feeds)
    N = (32 // 8) * (48 // 8)
    assert out['boxes'].shape == (3, N, 12) and out['logits'].shape == (3, N, 3) and out['embedding'].shape == (3, 8)
    assert all(v.dtype == np.float32 for v in out.values())
    for i in range(3):
        one = tiny.run(**{k: v[i:i + 1] for k, v in feeds.items()})
        for k in out:
            np.testing.assert_allclose(one[k][0], out[k][i], rtol=1e-5, atol=1e-6)
    changed = dict(feeds, intrinsics=feeds['intrinsics'] * np.float32(1.1))
    assert not np.allclose(tiny.run(**changed)['embedding'], out['embedding'])   # intrinsics are wired in


@pytest.mark.parametrize('batch', [1, 4])
def test_io_binding_equals_plain_run(tiny, tiny_path, batch):
    feeds = _random_inputs(batch, seed=batch)
    plain = tiny.run(**feeds)
    bound = tiny.run(**feeds, io_binding=True)
    assert set(plain) == set(bound)
    for k in plain:
        np.testing.assert_array_equal(plain[k], bound[k])
    model = OnnxModel(tiny_path, CPU_ONLY, use_io_binding=True)                   # warm-up runs the binding path
    for k, v in model.run(**feeds).items():
        np.testing.assert_array_equal(v, plain[k])


@pytest.mark.parametrize('change,match', [
    (lambda f: dict(f, image=f['image'].astype(np.float32)), 'image must be uint8'),
    (lambda f: dict(f, depth=f['depth'].astype(np.float64)), 'depth must be float32'),
    (lambda f: dict(f, depth=f['depth'][:, :16]), 'depth must have shape'),
    (lambda f: dict(f, image=f['image'][0]), 'image must have shape'),
    (lambda f: dict(f, intrinsics=f['intrinsics'][:1]), 'batch sizes differ'),
    (lambda f: dict(f, intrinsics=f['intrinsics'].tolist()), 'numpy array'),
    (lambda f: {k: v[:0] for k, v in f.items()}, 'batch size is 0'),
])
def test_run_rejects_bad_inputs(tiny, change, match):
    with pytest.raises(InferenceError, match=match) as e:
        tiny.run(**change(_random_inputs(2)))
    assert e.value.kind == 'bad_input'


def test_static_batch_model(tmp_path):
    model = OnnxModel(save_tiny_model(tmp_path / 's.onnx', static_batch=1), CPU_ONLY)
    model.run(**_random_inputs(1))
    with pytest.raises(InferenceError, match='fixed batch of 1'):
        model.run(**_random_inputs(2))


# ------------------------------------------------------------------------------------------------ optional tokens
def test_tokens_output_is_returned_and_the_contract_outputs_are_unchanged(tiny, tmp_path):
    from test.support.tiny_model import TINY_TOKENS_DIM
    m = OnnxModel(save_tiny_model(tmp_path / 'tokens.onnx', tokens=True), CPU_ONLY, intra_op_threads=1)
    assert m.has_tokens and not tiny.has_tokens and tiny.tokens_dim is None
    assert m.output_names == ('boxes', 'logits', 'embedding', 'tokens') and m.tokens_dim == TINY_TOKENS_DIM
    assert m.describe()['tokens'] is True and tiny.describe()['tokens'] is False
    feeds = _random_inputs(3, seed=5)
    out, ref = m.run(**feeds), tiny.run(**feeds)
    assert 'tokens' not in ref
    assert out['tokens'].shape == (3, out['boxes'].shape[1], TINY_TOKENS_DIM) and out['tokens'].dtype == np.float32
    for k in ref:                                          # same weights: the extra output changes nothing else
        np.testing.assert_array_equal(out[k], ref[k])
    np.testing.assert_array_equal(m.run(**feeds, io_binding=True)['tokens'], out['tokens'])
    one = m.run(**{k: v[1:2] for k, v in feeds.items()})['tokens']
    np.testing.assert_allclose(one[0], out['tokens'][1], rtol=1e-5, atol=1e-6)


def _retype_tokens_output(model, dims):
    out = next(o for o in model.graph.output if o.name == 'tokens')
    out.CopyFrom(helper.make_tensor_value_info('tokens', TensorProto.FLOAT, dims))
    return model


@pytest.mark.parametrize('build,match', [
    (lambda: make_tiny_model(metadata_overrides={'output_layout': json.dumps({'tokens': {'D': 5}})}),
     "declares 'tokens' but the graph has no such output"),
    (lambda: make_tiny_model(tokens=True, metadata_overrides={'output_layout': json.dumps({'tokens': {'D': 7}})}),
     'output_layout says D = 7'),
    (lambda: _retype_tokens_output(make_tiny_model(tokens=True), ['B', 'N']), "'tokens' has rank 2"),
    (lambda: _retype_tokens_output(make_tiny_model(tokens=True), ['B', 'N', 5, 1]), "'tokens' has rank 4"),
])
def test_tokens_output_contract_mismatch(tmp_path, build, match):
    onnx.save(build(), str(tmp_path / 'm.onnx'))
    err = _load_error(tmp_path / 'm.onnx', verify_checksum=False)
    assert err.kind == 'contract_mismatch' and match in err.message, err.message


def test_tokens_of_the_wrong_shape_at_run_time_are_a_bad_output(tmp_path):
    """A graph whose declared dims are symbolic can still return other shapes: checked per call."""
    m = OnnxModel(save_tiny_model(tmp_path / 't.onnx', tokens=True), CPU_ONLY)
    out = m.session.run(None, m.dummy_inputs(2))
    good = dict(zip(m.output_names, out))
    m._check_outputs(dict(good), 2)
    for bad in (good['tokens'][:, :-1], good['tokens'][..., :-1], good['tokens'][0]):
        with pytest.raises(InferenceError, match='tokens') as e:
            m._check_outputs(dict(good, tokens=bad), 2)
        assert e.value.kind == 'bad_output'

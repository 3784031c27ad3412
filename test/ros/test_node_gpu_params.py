"""GPU parameters of the node (providers, device_id, trt_engine_cache_path, trt_fp16) reach the ONNX Runtime
session options, and the default ``providers: [auto]`` never attempts TensorRT where it cannot run."""
import pytest

from string_perception import node_params as P
from string_perception.runtime import onnx_runner as R

TRT, CUDA, CPU = R.TRT, R.CUDA, R.CPU


def _cfg(**kw):
    return P.validate_all(kw)


def test_model_options_map_every_gpu_parameter(tmp_path):
    cfg = _cfg(providers=[TRT, CPU], device_id=3, trt_fp16=True, trt_engine_cache_path=str(tmp_path / 'engines'))
    assert P.model_options(cfg, lambda: pytest.fail('auto not requested')) == {
        'providers': (TRT, CPU), 'device_id': 3, 'trt_fp16': True, 'trt_engine_cache_path': tmp_path / 'engines'}
    no_trt = P.model_options(_cfg(providers=[CUDA, CPU]), lambda: ())
    assert no_trt['trt_engine_cache_path'] is None and no_trt['providers'] == (CUDA, CPU)   # no cache folder made
    auto = P.model_options(_cfg(), lambda: (CUDA, CPU))
    assert auto['providers'] == (CUDA, CPU) and auto['device_id'] == 0 and auto['trt_fp16'] is False


def test_trt_cache_defaults_to_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
    assert P.trt_cache_dir('') == tmp_path / 'string_perception' / 'tensorrt'
    assert P.model_options(_cfg(providers=[TRT]), lambda: ())['trt_engine_cache_path'] == P.trt_cache_dir('')
    assert P.trt_cache_dir('~/e') == P.Path('~/e').expanduser()


@pytest.mark.parametrize('name, value, needle', [
    ('providers', ['auto', CPU], 'stands alone'), ('device_id', -1, '[0, 64]'), ('device_id', 65, '[0, 64]'),
    ('trt_fp16', 1, 'bool'), ('trt_engine_cache_path', 3, 'string')])
def test_bad_gpu_values_are_rejected(name, value, needle):
    with pytest.raises(ValueError, match=__import__('re').escape(needle)):
        P.validate(name, value)


def test_usable_providers_skips_what_cannot_load(monkeypatch):
    monkeypatch.setattr(R.ort, 'get_available_providers', lambda: [TRT, CUDA, CPU])
    monkeypatch.setattr(R, '_probe_provider_library', lambda p: 'libnvinfer.so.10: cannot open' if p == TRT else None)
    assert R.usable_providers() == (CUDA, CPU)
    monkeypatch.setattr(R.ort, 'get_available_providers', lambda: [CPU])     # the CPU build of onnxruntime
    assert R.usable_providers() == (CPU,)
    assert R.usable_providers(['cpu']) == (CPU,)


def test_usable_providers_here_end_with_cpu_and_load():
    got = R.usable_providers()
    assert got[-1] == CPU and len(set(got)) == len(got)
    assert all(p in R.ort.get_available_providers() and R._probe_provider_library(p) is None for p in got)


def test_parameters_reach_the_onnx_runtime_session(tmp_path, model_path, monkeypatch):
    """The real node: parameters -> Pipeline -> OnnxModel provider options; [auto] brings no provider warning."""
    rclpy = pytest.importorskip('rclpy')
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import SUCCESS, StringPerceptionNode
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        engines = tmp_path / 'engines'
        for args, check in (
            (['-p', f'providers:=["{TRT}", "{CPU}"]', '-p', 'device_id:=2', '-p', 'trt_fp16:=true',
              '-p', f'trt_engine_cache_path:={engines}'], 'explicit'),
            ([], 'auto'),
        ):
            ctx = rclpy.Context()
            rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', f'model_path:={model_path}', *args],
                       context=ctx)
            node = StringPerceptionNode(context=ctx)
            try:
                assert node.trigger_configure() == SUCCESS
                model = node.pipeline.model
                if check == 'explicit':
                    assert model.requested_providers == (TRT, CPU) and model.device_id == 2
                    opts = model._provider_opts[TRT]
                    assert opts['device_id'] == 2 and opts['trt_fp16_enable'] is True
                    assert opts['trt_engine_cache_enable'] is True and opts['trt_engine_cache_path'] == str(engines)
                    assert engines.is_dir() and model._provider_opts[CUDA]['device_id'] == 2
                else:
                    assert model.requested_providers == R.usable_providers()
                    assert model.provider_problems == {}            # nothing attempted that cannot run
            finally:
                node.destroy_node()
                rclpy.shutdown(context=ctx)

"""runtime.model_variant: which file (fp32 or its int8 sibling) a machine runs, from CPU flags and the request;
and the int8 metadata (precision int8 + quantization) round trip of runtime.model_metadata."""
import json

import pytest

from string_perception.runtime.errors import MetadataError
from string_perception.runtime.model_metadata import ModelMetadata
from string_perception.runtime.model_variant import (PRECISION_ENV, choose_model_file, cpu_flags, int8_kernels,
                                                     int8_path, node_model_choice, requested_precision)

X86_VNNI = frozenset({'fpu', 'avx2', 'avx512f', 'avx512_vnni'})
X86_AMX = frozenset({'avx2', 'amx_tile', 'amx_int8'})
X86_AVX2 = frozenset({'fpu', 'sse4_2', 'avx', 'avx2', 'fma'})

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme avx2 avx512f avx512_vnni amx_int8
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 62.50
Features\t: fp asimd evtstrm aes asimddp i8mm
CPU implementer\t: 0x41
"""


def test_cpu_flags_parse_x86_and_arm_cpuinfo():
    assert cpu_flags(X86_CPUINFO) == {'fpu', 'vme', 'avx2', 'avx512f', 'avx512_vnni', 'amx_int8'}
    assert 'asimddp' in cpu_flags(ARM_CPUINFO) and 'i8mm' in cpu_flags(ARM_CPUINFO)
    assert cpu_flags('processor\t: 0\n') == frozenset()


@pytest.mark.parametrize('flags, machine, fast', [
    (X86_VNNI, 'x86_64', True), (X86_AMX, 'x86_64', True), (frozenset({'avx_vnni'}), 'AMD64', True),
    (X86_AVX2, 'x86_64', False), (frozenset(), 'x86_64', False),
    (frozenset({'asimddp', 'i8mm'}), 'aarch64', False),          # ARM: int8 speed not measured -> fp32
])
def test_int8_kernels_need_vnni_or_amx_on_x86(flags, machine, fast):
    ok, why = int8_kernels(flags, machine)
    assert ok is fast and why


@pytest.fixture()
def model_pair(tmp_path):
    fp32 = tmp_path / 'vitd_x.onnx'
    fp32.write_bytes(b'fp32')
    int8 = int8_path(fp32)
    int8.write_bytes(b'int8')
    return fp32, int8


def test_int8_path_is_the_stem_sibling(tmp_path):
    assert int8_path(tmp_path / 'models' / 'vitd_workcell.onnx') == tmp_path / 'models' / 'vitd_workcell_int8.onnx'


def test_auto_runs_int8_only_on_a_cpu_with_int8_kernels(model_pair):
    fp32, int8 = model_pair
    assert choose_model_file(fp32, 'auto', flags=X86_VNNI, machine='x86_64').path == int8
    assert choose_model_file(fp32, 'auto', flags=X86_AMX, machine='x86_64').precision == 'int8'
    laptop = choose_model_file(fp32, 'auto', flags=X86_AVX2, machine='x86_64')
    assert (laptop.path, laptop.precision) == (fp32, 'fp32') and 'lacks' in laptop.reason
    jetson = choose_model_file(fp32, 'auto', flags=frozenset({'asimddp'}), machine='aarch64')
    assert jetson.path == fp32 and 'aarch64' in jetson.reason
    gpu = choose_model_file(fp32, 'auto', on_cpu=False, flags=X86_VNNI, machine='x86_64')
    assert gpu.path == fp32 and 'GPU' in gpu.reason


def test_auto_without_an_int8_file_runs_fp32(tmp_path):
    fp32 = tmp_path / 'vitd_x.onnx'
    fp32.write_bytes(b'fp32')
    choice = choose_model_file(fp32, 'auto', flags=X86_VNNI, machine='x86_64')
    assert choice.path == fp32 and choice.precision == 'fp32' and 'vitd_x_int8.onnx' in choice.reason


def test_explicit_requests_win_over_the_cpu(model_pair, tmp_path):
    fp32, int8 = model_pair
    assert choose_model_file(fp32, 'fp32', flags=X86_VNNI, machine='x86_64').path == fp32
    assert choose_model_file(fp32, 'int8', flags=X86_AVX2, machine='x86_64').path == int8
    assert choose_model_file(int8, 'auto', flags=X86_AVX2, machine='x86_64').path == int8   # given as such
    lone = tmp_path / 'lone.onnx'
    lone.write_bytes(b'x')
    with pytest.raises(FileNotFoundError, match='lone_int8.onnx'):
        choose_model_file(lone, 'int8')
    with pytest.raises(ValueError, match='precision'):
        choose_model_file(fp32, 'bf16')


def test_requested_precision_from_the_environment():
    assert requested_precision({}) == 'auto'
    assert requested_precision({PRECISION_ENV: ' FP32 '}) == 'fp32'
    assert requested_precision({PRECISION_ENV: ''}) == 'auto'
    with pytest.raises(ValueError, match=PRECISION_ENV):
        requested_precision({PRECISION_ENV: 'int4'})


def _props(**over):
    props = {'labels': json.dumps(['box', 'cone']), 'input_height': '16', 'input_width': '16', 'patch_size': '8',
             'normalization': json.dumps({'mean': [0.5] * 3, 'std': [0.2] * 3}), 'coord_mode': 'grid_depth',
             'encoding': 'cayley', 'embedding_dim': '8', 'weights_sha256': 'ab' * 32, 'precision': 'fp32'}
    props.update(over)
    return props


def test_int8_metadata_round_trip():
    quant = {'format': 'QDQ', 'calibration': {'split': 'train', 'seeds': [500000, 500064]}, 'quantized_nodes': 24}
    meta = ModelMetadata.from_props(_props(precision='int8', quantization=json.dumps(quant)))
    assert meta.precision == 'int8' and meta.quantization == quant and 'quantization' not in meta.extra
    again = ModelMetadata.from_props(meta.to_props())
    assert again == meta
    assert 'quantization' not in ModelMetadata.from_props(_props()).to_props()   # fp32 files unchanged


def test_int8_metadata_must_say_how_it_was_quantised():
    with pytest.raises(MetadataError, match='quantised') as e:
        ModelMetadata.from_props(_props(precision='int8'))
    assert e.value.key == 'quantization'
    with pytest.raises(MetadataError, match='JSON object'):
        ModelMetadata.from_props(_props(precision='int8', quantization='[1, 2]'))


def test_node_model_choice_reads_the_precision_from_the_environment(model_pair):
    fp32, int8 = model_pair
    assert node_model_choice(fp32, environ={PRECISION_ENV: 'fp32'}).path == fp32
    assert node_model_choice(fp32, environ={PRECISION_ENV: 'int8'}).path == int8
    auto = node_model_choice(fp32, environ={})
    assert auto == choose_model_file(fp32, 'auto')                   # unset: auto, this CPU decides
    assert node_model_choice(fp32, on_cpu=False, environ={}).path == fp32
    with pytest.raises(ValueError):
        node_model_choice(fp32, environ={PRECISION_ENV: 'bf16'})

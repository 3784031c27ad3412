"""Load a contract-conforming ONNX file and run it with ONNX Runtime (no torch).

``OnnxModel(path, providers=...)`` does, in order, and raises :class:`ModelLoadError` (``kind`` in
``MODEL_LOAD_ERROR_KINDS``) at the first problem:

1. read the file once (``missing_file``), parse it (``corrupt_file``: truncated / corrupt / another format),
   check it is a real ONNX model (``not_onnx``: no graph, ``onnx.checker`` fails);
2. parse ``metadata_props`` into :class:`ModelMetadata` (``bad_metadata``);
3. check inputs/outputs against docs/ARCHITECTURE.md and the metadata (``contract_mismatch``), including the
   optional ``tokens`` output [B,N,D] when the file has it (or its ``output_layout`` declares it);
4. check ``weights_sha256`` against the initializers (``checksum_mismatch``), unless ``verify_checksum=False``;
5. pick execution providers (below) and create the session from the same bytes that were checked
   (``session_failed``, or ``provider_unavailable`` when ``cpu_fallback=False``);
6. run a warm-up inference (``warmup_failed``).

Provider selection, for each requested provider in order (TensorRT, CUDA, CPU by default): it must be listed by
``onnxruntime.get_available_providers()``; for the GPU providers its shared library must load (probed with
``ctypes`` first: onnxruntime-gpu lists CUDA/TensorRT even where the CUDA/cuDNN/TensorRT libraries are missing);
session creation must succeed with it (otherwise retried on the CPU alone); and ``session.get_providers()`` must
contain it afterwards. Every requested provider that fails any step is reported in ONE warning on the
``string_perception.runtime`` logger; the provider actually running is logged at INFO. ``CPUExecutionProvider`` is
always appended as the last resort unless ``cpu_fallback=False``. ONNX Runtime's own silent retry
(``enable_fallback``) is disabled so that no provider switch happens without our log line.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import external_data_helper

from .checksum import weights_sha256
from .errors import InferenceError, MetadataError, ModelLoadError
from .model_metadata import ModelMetadata

__all__ = ['OnnxModel', 'DEFAULT_PROVIDERS', 'usable_providers', 'INPUT_SPEC', 'OUTPUT_NAMES', 'TOKENS_OUTPUT', 'normalize_provider_name',
           'LOGGER_NAME']

LOGGER_NAME = 'string_perception.runtime'
logger = logging.getLogger(LOGGER_NAME)

TRT, CUDA, CPU = 'TensorrtExecutionProvider', 'CUDAExecutionProvider', 'CPUExecutionProvider'
DEFAULT_PROVIDERS = (TRT, CUDA, CPU)
_ALIASES = {'tensorrt': TRT, 'trt': TRT, 'cuda': CUDA, 'gpu': CUDA, 'cpu': CPU}
_GPU_PROVIDERS = (TRT, CUDA)
_PROVIDER_LIBS = {TRT: 'onnxruntime_providers_tensorrt', CUDA: 'onnxruntime_providers_cuda'}

# name -> (onnx elem type, rank); the fixed H, W come from the metadata.
INPUT_SPEC = {'image': (onnx.TensorProto.UINT8, 4), 'depth': (onnx.TensorProto.FLOAT, 3),
              'intrinsics': (onnx.TensorProto.FLOAT, 3)}
_INPUT_NP = {'image': np.uint8, 'depth': np.float32, 'intrinsics': np.float32}
OUTPUT_NAMES = ('boxes', 'logits', 'embedding')   # every file has these
TOKENS_OUTPUT = 'tokens'                          # optional: encoder tokens [B,N,D] (export --tokens)
_OUTPUT_RANK = {'boxes': 3, 'logits': 3, 'embedding': 2}
_FLOAT_TYPES = {onnx.TensorProto.FLOAT: 'float32', onnx.TensorProto.FLOAT16: 'float16'}


def normalize_provider_name(name: str) -> str:
    """'cuda' / 'CUDA' / 'CUDAExecutionProvider' -> 'CUDAExecutionProvider' (also 'tensorrt'/'trt', 'cpu')."""
    s = str(name).strip()
    if s.lower() in _ALIASES:
        return _ALIASES[s.lower()]
    for full in DEFAULT_PROVIDERS:
        if s.lower() == full.lower():
            return full
    if s.endswith('ExecutionProvider'):
        return s  # another ONNX Runtime provider (OpenVINO, ROCm, ...): passed through, checked as available
    raise ModelLoadError('bad_provider', f'unknown execution provider {name!r}; use one of {DEFAULT_PROVIDERS} '
                                         "(or 'tensorrt', 'cuda', 'cpu')")


@functools.lru_cache(maxsize=None)
def _probe_provider_library(provider: str) -> str | None:
    """Why the provider's shared library cannot be loaded (e.g. 'libcublas.so.13: cannot open ...'), or None.

    None also when there is nothing to probe (CPU, unknown layout): the session checks decide then.
    """
    base = _PROVIDER_LIBS.get(provider)
    if base is None:
        return None
    capi = Path(ort.__file__).resolve().parent / 'capi'
    lib = capi / (f'{base}.dll' if sys.platform == 'win32' else f'lib{base}.so')
    if not lib.is_file():
        return f'{lib.name} is not part of this onnxruntime install'
    try:
        ctypes.CDLL(str(lib))
    except OSError as e:
        return str(e).replace(str(lib) + ': ', '').strip()
    return None


def usable_providers(candidates: Sequence[str] = DEFAULT_PROVIDERS) -> tuple[str, ...]:
    """The ``candidates`` this machine can run, best first, CPU always last: a GPU provider only when this
    onnxruntime build lists it and its shared library loads (the cached probe above). The cheap check behind
    the node's ``providers: [auto]``: a CPU-only host never attempts a TensorRT session nor logs a warning."""
    available = set(ort.get_available_providers())
    gpu = [p for p in map(normalize_provider_name, candidates)
           if p != CPU and p in available and _probe_provider_library(p) is None]
    return (*dict.fromkeys(gpu), CPU)


_ORT_NOISE = re.compile(r'\[ONNXRuntimeError\] : \d+ : \w+ : |/onnxruntime_src/\S+:\d+ [^)]*\) ?')


def _ort_message(e: BaseException, limit: int) -> str:
    """An onnxruntime exception as one readable line (source paths and C++ signatures removed)."""
    text = _ORT_NOISE.sub('', ' '.join(str(e).split())).strip()
    return (text or type(e).__name__)[:limit]


def _dims(vi: onnx.ValueInfoProto) -> list[int | str | None]:
    """Static ints, symbolic names, or None for unknown dims of a graph input/output."""
    out: list[int | str | None] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField('dim_value'):
            out.append(int(d.dim_value))
        elif d.HasField('dim_param'):
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


class OnnxModel:
    """A validated model file with an ONNX Runtime session. See the module docstring for the checks.

    Attributes: ``metadata`` (:class:`ModelMetadata`), ``providers`` (what the session really runs, best first),
    ``requested_providers``, ``provider_problems`` (``{provider: reason}`` for the requested ones that could not
    be used), ``input_hw`` ``(H, W)``, ``labels``, ``output_names``, ``has_tokens``, ``tokens_dim`` (D of the
    optional ``tokens`` output when the file fixes it, else None), ``path``, ``use_io_binding``, ``session``.
    """

    def __init__(self, path: str | os.PathLike, providers: Sequence[str | tuple[str, dict]] = DEFAULT_PROVIDERS, *,
                 intra_op_threads: int | None = None, inter_op_threads: int | None = None,
                 verify_checksum: bool = True, warmup: bool = True, device_id: int = 0,
                 trt_engine_cache_path: str | os.PathLike | None = None, trt_fp16: bool = False,
                 trt_options: Mapping[str, Any] | None = None, cuda_options: Mapping[str, Any] | None = None,
                 use_io_binding: bool = False, cpu_fallback: bool = True, ort_log_severity: int = 3,
                 intra_op_spinning: bool | None = None):
        self.path = Path(path)
        self.use_io_binding = bool(use_io_binding)
        self.device_id = int(device_id)
        for name, v in (('intra_op_threads', intra_op_threads), ('inter_op_threads', inter_op_threads)):
            if v is not None and (int(v) != v or v < 0):
                raise ValueError(f'{name} must be None or an integer >= 0 (0 = ONNX Runtime default), got {v}')

        if isinstance(providers, (str, tuple)) and (isinstance(providers, str) or
                                                    (len(providers) == 2 and isinstance(providers[1], dict))):
            providers = [providers]                                   # one provider given on its own
        self.requested_providers = tuple(normalize_provider_name(p[0] if isinstance(p, tuple) else p)
                                         for p in providers)
        if not self.requested_providers:
            raise ModelLoadError('bad_provider', 'providers is empty; request at least CPUExecutionProvider')
        user_opts = {normalize_provider_name(p[0]): dict(p[1]) for p in providers if isinstance(p, tuple)}

        model, model_bytes = self._read(self.path)
        try:
            self.metadata = ModelMetadata.from_model(model)
        except MetadataError as e:
            raise MetadataError(f'{self.path}: {e.message}', key=e.key) from None
        self.output_names = self._check_contract(model)
        if verify_checksum:
            actual = weights_sha256(model)
            if actual != self.metadata.weights_sha256:
                raise ModelLoadError('checksum_mismatch', f'{self.path}: weights checksum {actual[:16]}... does not '
                                     f'match the metadata\'s {self.metadata.weights_sha256[:16]}...: the file was '
                                     'modified or corrupted after export')
        self._ir_version = int(model.ir_version)
        self._opsets = {o.domain or 'ai.onnx': int(o.version) for o in model.opset_import}
        del model

        self._provider_opts = self._provider_options(trt_engine_cache_path, trt_fp16, trt_options, cuda_options,
                                                     user_opts)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if intra_op_threads:
            so.intra_op_num_threads = int(intra_op_threads)
        if inter_op_threads:
            so.inter_op_num_threads = int(inter_op_threads)
        if intra_op_spinning is not None:   # False: idle intra-op threads sleep instead of spinning (shared cores)
            so.add_session_config_entry('session.intra_op.allow_spinning', '1' if intra_op_spinning else '0')
        so.log_severity_level = int(ort_log_severity)
        self.session, self.provider_problems = self._create_session(model_bytes, so, cpu_fallback)
        del model_bytes
        self.providers = tuple(self.session.get_providers())
        on_gpu = self.providers[0] in _GPU_PROVIDERS
        self._io_device = ('cuda', self.device_id) if on_gpu else ('cpu', 0)

        if self.provider_problems:
            reasons = '; '.join(f'{p}: {r}' for p, r in self.provider_problems.items())
            logger.warning('%s: requested execution provider(s) %s unavailable, running on %s instead (%s)',
                           self.path.name, ', '.join(self.provider_problems), self.providers[0], reasons)
        logger.info('%s: ONNX Runtime %s running on %s (intra-op threads: %s, io binding: %s), input %dx%d, '
                    '%d labels, precision %s', self.path.name, ort.__version__, ', '.join(self.providers),
                    intra_op_threads or 'default', self.use_io_binding, self.input_hw[1], self.input_hw[0],
                    len(self.labels), self.metadata.precision)
        if warmup:
            self.warmup()

    # ------------------------------------------------------------------ properties
    @property
    def input_hw(self) -> tuple[int, int]:
        return self.metadata.input_hw

    @property
    def labels(self) -> tuple[str, ...]:
        return self.metadata.labels

    @property
    def has_tokens(self) -> bool:
        """Whether the file has the optional ``tokens`` output (run() then returns it)."""
        return TOKENS_OUTPUT in self.output_names

    @property
    def provider(self) -> str:
        """The provider the session runs first (what diagnostics report)."""
        return self.providers[0]

    def describe(self) -> dict[str, Any]:
        """Summary for logs / diagnostics."""
        m = self.metadata
        return {'path': str(self.path), 'provider': self.provider, 'providers': list(self.providers),
                'provider_problems': dict(self.provider_problems), 'input_hw': list(self.input_hw),
                'labels': list(m.labels), 'precision': m.precision, 'encoding': m.encoding,
                'coord_mode': m.coord_mode, 'package_version': m.package_version,
                'weights_sha256': m.weights_sha256, 'io_binding': self.use_io_binding, 'tokens': self.has_tokens}

    # ------------------------------------------------------------------ loading
    @staticmethod
    def _read(path: Path) -> tuple[onnx.ModelProto, bytes]:
        if not path.is_file():
            raise ModelLoadError('missing_file', f'model file {path} does not exist or is not a file')
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ModelLoadError('missing_file', f'cannot read model file {path}: {e}') from None
        if not data:
            raise ModelLoadError('corrupt_file', f'model file {path} is empty')
        model = onnx.ModelProto()
        try:
            model.ParseFromString(data)
        except Exception as e:  # google.protobuf DecodeError and friends
            raise ModelLoadError('corrupt_file', f'{path} is not a valid ONNX protobuf (truncated, corrupt or '
                                 f'another format): {type(e).__name__}: {e}') from None
        if model.ir_version <= 0 or not model.HasField('graph') or len(model.graph.node) == 0:
            raise ModelLoadError('not_onnx', f'{path} is not an ONNX model (ir_version={model.ir_version}, '
                                 f'{len(model.graph.node)} graph nodes); truncated or another file type?')
        if any(external_data_helper.uses_external_data(t) for t in model.graph.initializer):
            try:
                external_data_helper.load_external_data_for_model(model, str(path.parent))
            except Exception as e:
                raise ModelLoadError('corrupt_file', f'{path}: cannot load external weight data: {e}') from None
            data = model.SerializeToString()
        try:
            onnx.checker.check_model(model)
        except Exception as e:
            raise ModelLoadError('not_onnx', f'{path} fails onnx.checker: {str(e).splitlines()[0][:300]}') from None
        return model, data

    def _check_contract(self, model: onnx.ModelProto) -> tuple[str, ...]:
        """Inputs/outputs vs docs/ARCHITECTURE.md and the metadata; returns all output names (contract first)."""
        g, md, where = model.graph, self.metadata, str(self.path)
        inits = {t.name for t in g.initializer}
        inputs = {vi.name: vi for vi in g.input if vi.name not in inits}
        outputs = {vi.name: vi for vi in g.output}
        problems = []
        if set(inputs) != set(INPUT_SPEC):
            problems.append(f'inputs are {sorted(inputs)}, expected {sorted(INPUT_SPEC)}')
        missing_out = [n for n in OUTPUT_NAMES if n not in outputs]
        if missing_out:
            problems.append(f'outputs {missing_out} missing (have {sorted(outputs)})')
        if problems:
            raise ModelLoadError('contract_mismatch', f'{where}: ' + '; '.join(problems) +
                                 ' (see docs/ARCHITECTURE.md, "The ONNX file")')
        H, W = md.input_hw
        expect_dims = {'image': [None, H, W, 3], 'depth': [None, H, W], 'intrinsics': [None, 3, 3]}
        for name, (elem, rank) in INPUT_SPEC.items():
            tt = inputs[name].type.tensor_type
            dims = _dims(inputs[name])
            if tt.elem_type != elem:
                got = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type) if tt.elem_type else '?'
                problems.append(f'input {name!r} has type {got}, '
                                f'expected {np.dtype(_INPUT_NP[name])}')
            elif len(dims) != rank:
                problems.append(f'input {name!r} has rank {len(dims)} {dims}, expected {rank}')
            else:
                for got, want in zip(dims[1:], expect_dims[name][1:]):
                    if isinstance(got, int) and got != want:
                        problems.append(f'input {name!r} has shape {dims}, expected {expect_dims[name]} '
                                        f'(metadata input size {H}x{W})')
                        break
        out_float = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) if md.precision == 'fp16' \
            else (onnx.TensorProto.FLOAT,)
        expect_last = {'boxes': 12, 'logits': md.num_classes, 'embedding': md.embedding_dim}
        for name in OUTPUT_NAMES:
            tt = outputs[name].type.tensor_type
            dims = _dims(outputs[name])
            if tt.elem_type not in out_float:
                problems.append(f'output {name!r} has elem type {tt.elem_type}, expected '
                                f'{" or ".join(_FLOAT_TYPES[t] for t in out_float)}')
            elif len(dims) != _OUTPUT_RANK[name]:
                problems.append(f'output {name!r} has rank {len(dims)} {dims}, expected {_OUTPUT_RANK[name]}')
            elif isinstance(dims[-1], int) and dims[-1] != expect_last[name]:
                problems.append(f'output {name!r} has last dim {dims[-1]}, expected {expect_last[name]} '
                                '(12 box numbers / len(labels) / embedding_dim from the metadata)')
        problems += self._check_tokens_output(outputs, out_float)
        if problems:
            raise ModelLoadError('contract_mismatch', f'{where}: ' + '; '.join(problems))
        self._static_batch = next((d for d in (_dims(inputs[n])[0] for n in INPUT_SPEC) if isinstance(d, int)), None)
        return OUTPUT_NAMES + tuple(n for n in outputs if n not in OUTPUT_NAMES)

    def _check_tokens_output(self, outputs: Mapping[str, onnx.ValueInfoProto], out_float) -> list[str]:
        """The optional ``tokens`` output: float [B,N,D], N = the boxes' N, D = ``output_layout['tokens']['D']``
        when the metadata gives it. A layout that declares tokens for a file without them is a mismatch. Sets
        ``tokens_dim``."""
        layout = (self.metadata.output_layout or {}).get(TOKENS_OUTPUT)
        declared_d = layout.get('D') if isinstance(layout, dict) else None
        self.tokens_dim = None
        if TOKENS_OUTPUT not in outputs:
            return [f'output_layout declares {TOKENS_OUTPUT!r} but the graph has no such output'] if layout else []
        tt, dims = outputs[TOKENS_OUTPUT].type.tensor_type, _dims(outputs[TOKENS_OUTPUT])
        if tt.elem_type not in out_float:
            return [f'output {TOKENS_OUTPUT!r} has elem type {tt.elem_type}, expected '
                    f'{" or ".join(_FLOAT_TYPES[t] for t in out_float)}']
        if len(dims) != 3:
            return [f'output {TOKENS_OUTPUT!r} has rank {len(dims)} {dims}, expected 3 [B,N,D]']
        boxes_n = _dims(outputs['boxes'])[1]
        if isinstance(dims[1], int) and isinstance(boxes_n, int) and dims[1] != boxes_n:
            return [f'output {TOKENS_OUTPUT!r} has {dims[1]} tokens, boxes have {boxes_n}']
        if isinstance(declared_d, int) and isinstance(dims[2], int) and declared_d != dims[2]:
            return [f'output {TOKENS_OUTPUT!r} has last dim {dims[2]}, output_layout says D = {declared_d}']
        self.tokens_dim = dims[2] if isinstance(dims[2], int) else declared_d if isinstance(declared_d, int) else None
        return []

    def _provider_options(self, trt_cache, trt_fp16, trt_options, cuda_options, user_opts) -> dict[str, dict]:
        trt = {'device_id': self.device_id, 'trt_fp16_enable': bool(trt_fp16)}
        if trt_cache is not None:
            Path(trt_cache).mkdir(parents=True, exist_ok=True)
            trt.update({'trt_engine_cache_enable': True, 'trt_engine_cache_path': str(trt_cache)})
        trt.update(trt_options or {})
        cuda = {'device_id': self.device_id}
        cuda.update(cuda_options or {})
        opts = {TRT: trt, CUDA: cuda}
        for p, o in user_opts.items():
            opts.setdefault(p, {}).update(o)
        return opts

    def _create_session(self, model_bytes: bytes, so: ort.SessionOptions, cpu_fallback: bool):
        available = set(ort.get_available_providers())
        problems: dict[str, str] = {}
        chosen: list[str] = []
        for p in self.requested_providers:
            if p in chosen:
                continue
            if p not in available:
                problems[p] = f'not in this onnxruntime build (available: {", ".join(sorted(available))})'
                continue
            reason = _probe_provider_library(p)
            if reason:
                problems[p] = f'cannot load its library: {reason}'
                continue
            chosen.append(p)
        def unavailable() -> ModelLoadError:
            reasons = '; '.join(f'{k}: {v}' for k, v in problems.items())
            return ModelLoadError('provider_unavailable', f'{self.path}: none of {list(self.requested_providers)} '
                                  f'can run here and cpu_fallback is off ({reasons})')

        if CPU not in chosen:
            if cpu_fallback:
                chosen.append(CPU)
            elif not chosen:
                raise unavailable()

        def make(provs):
            return ort.InferenceSession(model_bytes, sess_options=so, providers=provs,
                                        provider_options=[self._provider_opts.get(p, {}) for p in provs],
                                        enable_fallback=0)

        # A GPU provider that fails to initialise is dropped (TensorRT first, then CUDA) and the rest retried.
        while True:
            try:
                session = make(chosen)
                break
            except Exception as e:
                gpu = [p for p in chosen if p != CPU]
                if not gpu:
                    raise self._session_error(e) from None
                problems[gpu[0]] = f'session creation failed: {_ort_message(e, 300)}'
                chosen.remove(gpu[0])
                if not chosen:
                    raise unavailable() from None
        got = session.get_providers()
        for p in chosen:
            if p not in got and p not in problems:
                problems[p] = 'the session did not register it (no usable GPU/driver?)'
        if not cpu_fallback and not any(p in got for p in self.requested_providers):
            raise unavailable()
        return session, problems

    def _session_error(self, e: Exception) -> ModelLoadError:
        msg = _ort_message(e, 400)
        hint = ''
        if 'Unsupported model IR version' in str(e) or 'model.cc' in str(e):
            hint = (f' (the file has IR version {self._ir_version}, opsets {self._opsets}; onnxruntime '
                    f'{ort.__version__} may not support them: export with a lower ir_version/opset)')
        return ModelLoadError('session_failed', f'{self.path}: onnxruntime could not load the model: {msg}{hint}')

    # ------------------------------------------------------------------ running
    def dummy_inputs(self, batch: int = 1) -> dict[str, np.ndarray]:
        """Valid inputs (grey image, 1 m depth, a plausible K) for warm-up and tests."""
        H, W = self.input_hw
        K = np.array([[W, 0, (W - 1) / 2], [0, W, (H - 1) / 2], [0, 0, 1]], dtype=np.float32)
        return {'image': np.full((batch, H, W, 3), 128, np.uint8),        # [B,H,W,3]
                'depth': np.ones((batch, H, W), np.float32),              # [B,H,W]
                'intrinsics': np.broadcast_to(K, (batch, 3, 3)).copy()}   # [B,3,3]

    def warmup(self, runs: int = 1) -> float:
        """Run the model on dummy inputs (first-run allocations, TensorRT engine build); returns the last ms."""
        ms = 0.0
        try:
            for _ in range(max(1, runs)):
                t0 = time.perf_counter()
                self.run(**self.dummy_inputs())
                ms = (time.perf_counter() - t0) * 1e3
        except InferenceError as e:
            raise ModelLoadError('warmup_failed', f'{self.path}: warm-up inference failed: {e.message}') from None
        logger.debug('%s: warm-up run took %.1f ms on %s', self.path.name, ms, self.provider)
        return ms

    def _check_inputs(self, image, depth, intrinsics) -> dict[str, np.ndarray]:
        H, W = self.input_hw
        feeds = {'image': image, 'depth': depth, 'intrinsics': intrinsics}
        batch = None
        for name, arr in feeds.items():
            if not isinstance(arr, np.ndarray):
                raise InferenceError('bad_input', f'{name} must be a numpy array, got {type(arr).__name__}')
            want = np.dtype(_INPUT_NP[name])
            if arr.dtype != want:
                raise InferenceError('bad_input', f'{name} must be {want}, got {arr.dtype}')
            shape = {'image': (H, W, 3), 'depth': (H, W), 'intrinsics': (3, 3)}[name]
            if arr.ndim != len(shape) + 1 or arr.shape[1:] != shape:
                raise InferenceError('bad_input', f'{name} must have shape [B,{",".join(map(str, shape))}], got '
                                                  f'{list(arr.shape)}')
            batch = arr.shape[0] if batch is None else batch
            if arr.shape[0] != batch:
                raise InferenceError('bad_input', f'batch sizes differ: image/depth/intrinsics have '
                                                  f'{[a.shape[0] for a in feeds.values()]}')
        if batch == 0:
            raise InferenceError('bad_input', 'batch size is 0')
        if self._static_batch is not None and batch != self._static_batch:
            raise InferenceError('bad_input', f'this model has a fixed batch of {self._static_batch}, got {batch}')
        return {k: np.ascontiguousarray(v) for k, v in feeds.items()}

    def run(self, image: np.ndarray, depth: np.ndarray, intrinsics: np.ndarray,
            io_binding: bool | None = None) -> dict[str, np.ndarray]:
        """``image uint8[B,H,W,3]``, ``depth float32[B,H,W]`` (m), ``intrinsics float32[B,3,3]`` -> outputs.

        Returns ``{'boxes' [B,N,12], 'logits' [B,N,C], 'embedding' [B,E], ('tokens' [B,N,D],) ...extra outputs}``
        as float32 numpy.
        ``io_binding`` overrides the instance's ``use_io_binding`` for this call. Raises :class:`InferenceError`.
        """
        feeds = self._check_inputs(image, depth, intrinsics)
        use_binding = self.use_io_binding if io_binding is None else bool(io_binding)
        try:
            if use_binding:
                values = self._run_io_binding(feeds)
            else:
                values = self.session.run(list(self.output_names), feeds)
        except Exception as e:
            raise InferenceError('runtime_failure', f'onnxruntime failed on {self.provider}: '
                                 f'{_ort_message(e, 400)}') from None
        out = dict(zip(self.output_names, values))
        return self._check_outputs(out, feeds['image'].shape[0])

    def _run_io_binding(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Same result as ``session.run`` through ``session.io_binding()``: inputs as OrtValues on the provider's
        device (zero-copy numpy views on the CPU, device copies on CUDA/TensorRT), outputs allocated there and
        copied back to numpy."""
        device, dev_id = self._io_device
        binding = self.session.io_binding()
        values = [ort.OrtValue.ortvalue_from_numpy(arr, device, dev_id) for arr in feeds.values()]  # keep alive
        for name, value in zip(feeds, values):
            binding.bind_ortvalue_input(name, value)
        for name in self.output_names:
            binding.bind_output(name, device, dev_id)
        binding.synchronize_inputs()
        self.session.run_with_iobinding(binding)
        binding.synchronize_outputs()
        return binding.copy_outputs_to_cpu()

    def _check_outputs(self, out: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
        C, E = self.metadata.num_classes, self.metadata.embedding_dim
        b, lg, em = out['boxes'], out['logits'], out['embedding']
        problems = []
        if b.ndim != 3 or b.shape[0] != batch or b.shape[2] != 12:
            problems.append(f'boxes {list(b.shape)} (expected [{batch},N,12])')
        if lg.ndim != 3 or lg.shape[0] != batch or lg.shape[2] != C or (b.ndim == 3 and lg.shape[1] != b.shape[1]):
            problems.append(f'logits {list(lg.shape)} (expected [{batch},N,{C}])')
        if em.ndim != 2 or em.shape != (batch, E):
            problems.append(f'embedding {list(em.shape)} (expected [{batch},{E}])')
        tk = out.get(TOKENS_OUTPUT)
        if tk is not None and (tk.ndim != 3 or tk.shape[0] != batch or (b.ndim == 3 and tk.shape[1] != b.shape[1])
                               or (self.tokens_dim is not None and tk.shape[2] != self.tokens_dim)):
            problems.append(f'tokens {list(tk.shape)} (expected [{batch},N,{self.tokens_dim or "D"}])')
        if problems:
            raise InferenceError('bad_output', 'model outputs have the wrong shape: ' + '; '.join(problems))
        return {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in out.items()}

"""Typed errors of the runtime (preprocess, model loading, inference, postprocess).

Every error carries a short machine-readable ``kind`` string so callers can count failures per kind (the node
publishes those counters in /diagnostics) and a human message that says what was wrong and what was expected.
Catch :class:`PerceptionError` to catch them all; each also derives from the matching built-in (``ValueError``
for bad data, ``RuntimeError`` for bad models/sessions) so generic handlers keep working.
"""
from __future__ import annotations

__all__ = [
    'PerceptionError', 'InputError', 'ModelLoadError', 'MetadataError', 'InferenceError', 'OutputError',
    'INPUT_ERROR_KINDS', 'INPUT_WARNING_KINDS', 'MODEL_LOAD_ERROR_KINDS', 'INFERENCE_ERROR_KINDS',
]

# Raised by preprocess (frame-level problems: the frame is skipped, the next one is processed normally).
INPUT_ERROR_KINDS = (
    'empty_image',      # zero-size colour or depth image
    'bad_shape',        # wrong number of dimensions / channels
    'bad_encoding',     # unknown encoding, or dtype that does not match the encoding (e.g. int32 depth)
    'size_mismatch',    # depth not registered to colour: different aspect ratio, so no same-factor resize
    'bad_intrinsics',   # K not 3x3, non-finite, all zero, fx/fy <= 0, principal point outside the image
    'image_too_large',  # above the configured pixel / side limits
)
# Not raised: reported in ``ModelInputs.warnings`` / ``PipelineResult.warnings`` (the frame is still processed).
INPUT_WARNING_KINDS = (
    'no_valid_depth',   # every depth pixel in the crop is 0 / NaN / inf / negative / beyond max depth
)
MODEL_LOAD_ERROR_KINDS = (
    'missing_file',       # path does not exist or is not a regular file
    'corrupt_file',       # not parseable as an ONNX protobuf (truncated, corrupt, or another format)
    'not_onnx',           # parses but is not a usable ONNX model (no graph, checker fails)
    'contract_mismatch',  # inputs/outputs differ from docs/ARCHITECTURE.md (names, dtypes, ranks, sizes)
    'bad_metadata',       # metadata_props missing or garbled (MetadataError)
    'checksum_mismatch',  # weights_sha256 in metadata != sha256 of the initializers
    'session_failed',     # onnxruntime could not create a session even on the CPU (e.g. unsupported IR/opset)
    'warmup_failed',      # the warm-up inference raised
    'bad_provider',       # unknown execution provider name / empty provider list
    'provider_unavailable',  # no requested provider usable and cpu_fallback=False
)
INFERENCE_ERROR_KINDS = (
    'bad_input',          # OnnxModel.run got wrong dtype/shape/batch
    'runtime_failure',    # onnxruntime raised during the run
    'bad_output',         # model outputs (or decode_detections inputs) of the wrong shape/dtype
)


class PerceptionError(Exception):
    """Base of all runtime errors: ``kind`` (short string, for counters) and ``message`` (for humans)."""

    def __init__(self, kind: str, message: str):
        super().__init__(f'{kind}: {message}')
        self.kind = kind
        self.message = message

    def __reduce__(self):  # keep kind/message through pickling (multiprocessing evaluators)
        return (type(self), (self.kind, self.message))


class InputError(PerceptionError, ValueError):
    """A camera frame the pipeline cannot use (see :data:`INPUT_ERROR_KINDS`)."""


class ModelLoadError(PerceptionError, RuntimeError):
    """The model file cannot be used (see :data:`MODEL_LOAD_ERROR_KINDS`); raised by ``OnnxModel(...)``."""


class MetadataError(ModelLoadError):
    """``metadata_props`` missing or garbled; ``kind`` is always ``'bad_metadata'``, ``key`` names the culprit."""

    def __init__(self, kind_or_message: str, message: str | None = None, *, key: str | None = None):
        # MetadataError('message', key=...) or MetadataError('bad_metadata', 'message') (for pickling).
        if message is None:
            kind_or_message, message = 'bad_metadata', kind_or_message
        super().__init__(kind_or_message, message)
        self.key = key


class InferenceError(PerceptionError, RuntimeError):
    """``OnnxModel.run`` failed (see :data:`INFERENCE_ERROR_KINDS`)."""


class OutputError(PerceptionError, ValueError):
    """Model outputs of the wrong shape/dtype given to postprocess (kind ``'bad_output'``)."""

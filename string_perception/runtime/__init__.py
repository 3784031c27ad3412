"""ROS-free inference pipeline: preprocess -> ONNX Runtime -> postprocess -> tracking. numpy, scipy, filterpy and
onnxruntime only, never torch.

The node, the offline bag evaluator and the demo all call :class:`Pipeline`; see docs/ARCHITECTURE.md (runtime/).
"""
from .checksum import weights_sha256
from .errors import (INFERENCE_ERROR_KINDS, INPUT_ERROR_KINDS, INPUT_WARNING_KINDS, MODEL_LOAD_ERROR_KINDS,
                     InferenceError, InputError, MetadataError, ModelLoadError, OutputError, PerceptionError)
from .model_metadata import ModelMetadata
from .onnx_runner import DEFAULT_PROVIDERS, LOGGER_NAME, OnnxModel
from .pipeline import Pipeline, PipelineResult
from .postprocess import Detections, decode_detections
from .preprocess import ModelInputs, depth_to_metres, prepare_inputs, to_rgb
from .tracking import Tracker, TrackerConfig, Tracks

__all__ = [
    'Pipeline', 'PipelineResult', 'OnnxModel', 'DEFAULT_PROVIDERS', 'LOGGER_NAME', 'ModelMetadata',
    'weights_sha256', 'prepare_inputs', 'ModelInputs', 'to_rgb', 'depth_to_metres', 'decode_detections',
    'Detections', 'PerceptionError', 'InputError', 'ModelLoadError', 'MetadataError', 'InferenceError',
    'OutputError', 'Tracker', 'TrackerConfig', 'Tracks', 'INPUT_ERROR_KINDS', 'INPUT_WARNING_KINDS',
    'MODEL_LOAD_ERROR_KINDS', 'INFERENCE_ERROR_KINDS',
]

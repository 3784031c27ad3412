"""Every parameter of the node, declared once: name, type, default, description, range; and their validation.

The node declares them from :data:`PARAMS` (ROS ``ParameterDescriptor`` with ranges), validates them at
configure time with :func:`validate_all` and on every ``set_parameters`` with :func:`check_updates`;
``config/default.yaml`` mirrors :func:`defaults` (a test keeps them equal; :func:`render_yaml` writes it).
Nothing here imports rclpy at module level, so the rules are testable without ROS. Below ``ros/`` (which declares
them on its node), ``bags/`` and ``evaluation/`` (which replay the node offline with its defaults) alike.

``live`` parameters take effect on the next frame; the others (model, QoS, synchronisation) are read at
``configure`` and apply after a cleanup + configure (the lifecycle way to reload).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ['ParamSpec', 'PARAMS', 'SPECS', 'NODE_NAME', 'defaults', 'validate', 'validate_all', 'check_updates',
           'declare_all', 'read_all', 'render_yaml', 'tf2_available', 'import_tf2', 'TF2_NAMES',
           'effective_score_threshold', 'trt_cache_dir',
           'AUTO_PROVIDERS', 'model_options', 'flip_tta_on', 'FLIP_TTA_CHOICES',
           'DEFAULT_SCORE_THRESHOLD']

NODE_NAME = 'string_perception'
PROVIDER_NAMES = ('TensorrtExecutionProvider', 'CUDAExecutionProvider', 'CPUExecutionProvider')
RELIABILITY = ('best_effort', 'reliable')
INPUTS = ('image', 'depth', 'camera_info')
AUTO_PROVIDERS = 'auto'   # providers: [auto] = what this host can run (runtime.onnx_runner.usable_providers)
DEFAULT_SCORE_THRESHOLD = 0.3   # when score_threshold is -1 and the model's metadata recommends none
FLIP_TTA_CHOICES = ('auto', 'on', 'off')   # flip_tta: auto = on with a GPU provider (flip_tta_on)
TF2_NAMES = ('Buffer', 'TransformListener', 'TransformException')   # what ros/tf_lookup.py needs from tf2_ros


@dataclass(frozen=True)
class ParamSpec:
    """One parameter. ``type``: 'bool' | 'int' | 'double' | 'string' | 'string_array'. ``lo``/``hi``: inclusive
    numeric range; ``choices``: allowed strings (for each element of a string array); ``live``: applies at once."""

    name: str
    type: str
    default: Any
    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] | None = None
    live: bool = False

    def range_text(self) -> str:
        if self.choices:
            return 'one of ' + ', '.join(self.choices)
        if self.lo is not None:
            return f'[{self.lo}, {self.hi}]'
        return ''


def _qos_params(inp: str) -> tuple[ParamSpec, ...]:
    return (ParamSpec(f'{inp}_qos_reliability', 'string', 'best_effort',
                      f'QoS reliability of the {inp} subscription (sensor data: best_effort)', choices=RELIABILITY),
            ParamSpec(f'{inp}_qos_depth', 'int', 1,
                      f'QoS history depth of the {inp} subscription (1: while a frame is processed only the newest '
                      'waits, latest wins)', 1, 100))


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec('autostart', 'bool', True,
              'configure and activate at start-up (false: wait for lifecycle transitions)'),
    ParamSpec('model_path', 'string', '',
              'ONNX model file (docs/ARCHITECTURE.md contract); empty = the shipped workcell model: '
              'models/vitd_workcell.onnx (fast, 120x160) on the CPU, models/vitd_workcell_hr.onnx (accurate, 240x320) '
              'when the first provider is a GPU one; a bare shipped name (vitd_tiny_cayley.onnx, the procedural-scene '
              'model) is found in the package\'s models/'),
    ParamSpec('providers', 'string_array', [AUTO_PROVIDERS],
              "ONNX Runtime execution providers, best first (CPU is always the last resort); [auto] = those this "
              'host can run (TensorRT, CUDA only when onnxruntime lists them and their libraries load), so a '
              'CPU-only host never attempts a TensorRT session', choices=(AUTO_PROVIDERS, *PROVIDER_NAMES)),
    ParamSpec('device_id', 'int', 0, 'GPU index for the CUDA and TensorRT providers', 0, 64),
    ParamSpec('trt_engine_cache_path', 'string', '',
              'folder where TensorRT keeps built engines, so only the first configure builds them; empty = '
              '$XDG_CACHE_HOME/string_perception/tensorrt (~/.cache/...)'),
    ParamSpec('trt_fp16', 'bool', False, 'let TensorRT use FP16 kernels (model inputs/outputs stay as exported)'),
    ParamSpec('intra_op_threads', 'int', 0,
              'ONNX Runtime intra-op threads; 0 = its default (one per core). On a small CPU host shared with DDS, '
              'fewer threads leave a core for transport (benchmarks/node_latency.py)', 0, 256),
    ParamSpec('intra_op_spinning', 'bool', False,
              'let idle ONNX Runtime threads spin-wait for work (lower latency on dedicated cores; burns CPU that DDS '
              'and the executor need on a shared host)'),
    ParamSpec('executor', 'string', 'single_threaded',
              'rclpy executor of the node process: single_threaded, multi_threaded (inputs and timers in separate '
              'callback groups) or events (rclpy.experimental.EventsExecutor)',
              choices=('single_threaded', 'multi_threaded', 'events')),
    ParamSpec('score_threshold', 'double', -1.0,
              "minimum detection score; -1 = the model's recommended threshold (metadata), else 0.3", -1.0, 1.0,
              live=True),
    ParamSpec('nms_iou', 'double', 0.3, 'class-wise 3D NMS IoU threshold (1 disables NMS)', 0.01, 1.0, live=True),
    ParamSpec('nms_class_agnostic', 'bool', False,
              'NMS across classes: a box also suppresses overlapping boxes of other classes', live=True),
    ParamSpec('multi_label', 'bool', False,
              'every (token, class) pair scoring at least score_threshold is a candidate box (RetinaNet-style), '
              'not only the best class of each token', live=True),
    ParamSpec('max_detections', 'int', 50, 'at most this many boxes per frame', 0, 1000, live=True),
    ParamSpec('pre_nms_top_k', 'int', 200, 'candidates kept by score before NMS', 1, 100000, live=True),
    ParamSpec('max_depth_m', 'double', 0.0, 'depth beyond this is invalid (metres); 0 = no limit', 0.0, 1000.0,
              live=True),
    ParamSpec('resize_mode', 'string', 'pad',
              "how a camera frame meets the model's input: pad (the whole frame, letterboxed to the model's aspect "
              'ratio; tokens in the padding give no box) or crop (the largest centred crop: the image sides are not '
              'looked at)', choices=('pad', 'crop'), live=True),
    ParamSpec('tiling', 'string', 'none',
              'tiled inference: none, or the whole frame plus R x C overlapping windows (2x2, 3x3; overlap 0.3), '
              'all boxes merged by one NMS: small objects are seen at up to R x the resolution, for R*C+1 model '
              'runs a frame (2x2: about 5x the inference time; docs/results/workcell.md); a window box the whole '
              'frame does not confirm scores x 0.3 (docs/results/tiling_precision.md)',
              choices=('none', '2x2', '3x3'), live=True),
    ParamSpec('flip_tta', 'string', 'auto',
              'flip test-time augmentation: the model also sees the frame mirrored left-right and each token\'s two '
              'predictions are averaged before NMS (2 model passes a frame; with tiling, the whole-frame pass; '
              'docs/results/workcell.md): on, off, or auto = on where the session runs a GPU provider (where '
              'model_path empty runs the accurate model), off on the CPU', choices=FLIP_TTA_CHOICES, live=True),
    ParamSpec('image_transport', 'string', 'raw',
              'colour input type: raw (sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage)',
              choices=('raw', 'compressed')),
    ParamSpec('depth_transport', 'string', 'raw',
              'depth input type: raw (sensor_msgs/Image on depth) or compressedDepth (image_transport\'s '
              'compressed_depth_image_transport on depth/compressedDepth: 16UC1 PNG or 32FC1 inverse depth)',
              choices=('raw', 'compressedDepth')),
    ParamSpec('sync_queue_size', 'int', 10, 'approximate-time synchroniser queue per input', 1, 1000),
    ParamSpec('sync_slop', 'double', 0.05, 'approximate-time synchroniser slop (seconds)', 0.0001, 10.0),
    *_qos_params('image'), *_qos_params('depth'), *_qos_params('camera_info'),
    ParamSpec('output_qos_reliability', 'string', 'reliable', 'QoS reliability of the output topics',
              choices=RELIABILITY),
    ParamSpec('output_qos_depth', 'int', 5, 'QoS history depth of the output topics', 1, 100),
    ParamSpec('publish_markers', 'bool', True, 'publish ~/markers (visualization_msgs/MarkerArray)', live=True),
    ParamSpec('marker_alpha', 'double', 0.4, 'opacity of the marker cubes', 0.0, 1.0, live=True),
    ParamSpec('marker_lifetime', 'double', 1.0,
              'seconds RViz keeps a marker no newer frame replaced, so boxes vanish when the input stops; '
              '0 = until replaced', 0.0, 3600.0, live=True),
    ParamSpec('publish_embedding', 'bool', True, 'publish ~/embedding (32FC1 Image, 1 x D)', live=True),
    ParamSpec('publish_tokens', 'bool', False,
              'publish ~/tokens (32FC1 Image, N x D) when the model has a tokens output '
              '(string-perception-export --tokens)', live=True),
    ParamSpec('publish_debug_image', 'bool', False, 'publish ~/debug_image (rgb8, boxes projected)', live=True),
    ParamSpec('tracking', 'bool', True,
              'track objects across frames (runtime/tracking.py): Detection3D.id = track id, ~/tracks, '
              '~/track_velocities, markers per track; false = per-frame detections with empty ids'),
    ParamSpec('track_birth_hits', 'int', 3, 'consecutive detections before a track is confirmed and gets an id',
              1, 100),
    ParamSpec('track_death_misses', 'int', 3,
              'a confirmed track is published (coasting on its prediction) until this many consecutive misses',
              1, 1000),
    ParamSpec('track_max_gap', 'int', 15,
              'missed frames a lost track keeps its id: a detection matched within this gap resumes it '
              '(>= track_death_misses)', 1, 10000),
    ParamSpec('track_association', 'string', 'distance',
              'association cost: distance (centre distance, gate track_max_distance) or iou (3D IoU, gate '
              'track_min_iou)', choices=('distance', 'iou')),
    ParamSpec('track_max_distance', 'double', 0.15,
              'metres between a track\'s predicted centre and a detection beyond which they never match', 0.001, 10.0),
    ParamSpec('track_min_iou', 'double', 0.1, '3D IoU below which a track and a detection never match (iou)',
              0.01, 1.0),
    ParamSpec('track_max_tracks', 'int', 100, 'at most this many live tracks (bounds the tracking cost per frame)',
              1, 10000),
    ParamSpec('publish_tf', 'bool', False,
              'broadcast each published track on /tf as frame <tf_prefix><id>, parent = the detections\' frame, at '
              'the image stamp (tf2_ros, else a tf2_msgs/TFMessage publisher)', live=True),
    ParamSpec('tf_prefix', 'string', 'object_',
              'child frame prefix of the object frames (one per node: e.g. cam_left/object_ with several cameras)',
              live=True),
    ParamSpec('target_frame', 'string', '',
              'frame for the output boxes; empty = the colour image frame (other frames need tf2_ros)', live=True),
    ParamSpec('tf_timeout', 'double', 0.0,
              'seconds a frame waits for its transform to target_frame at the image stamp (the input callback waits '
              'with it); 0 = never: a transform not in the buffer yet drops the frame (drops.tf)', 0.0, 10.0,
              live=True),
    ParamSpec('max_stamp_future', 'double', 2.0,
              'frames stamped more than this many seconds ahead of the node clock are dropped (future_stamp); '
              '0 = no check', 0.0, 86400.0, live=True),
    ParamSpec('stamp_reset_jump', 'double', 0.25,
              'a frame stamped more than this many seconds before the last processed one is a clock reset (bag loop, '
              'restarted simulation) and is processed; a smaller step back is dropped (out_of_order_stamp)',
              0.0, 86400.0, live=True),
    ParamSpec('input_timeout', 'double', 1.0,
              'colour images arriving while depth or camera_info has been silent (or stamped 0) this many seconds '
              'are counted as missing_depth / missing_camera_info (zero_stamp_depth / zero_stamp_camera_info); '
              'depth arriving without colour images, as missing_image; nothing synchronised this long while every '
              'input arrives unblocks the synchroniser (sync_recoveries)', 0.05, 3600.0, live=True),
    ParamSpec('zero_copy_input', 'bool', True,
              'decode raw images as numpy views over the message buffers (false: copy them first, as before)'),
    ParamSpec('skip_unsubscribed_outputs', 'bool', True,
              'build no markers, embedding, tokens or debug image while nobody subscribes to them', live=True),
    ParamSpec('raw_image_input', 'bool', True,
              'raw image/depth transport: take the serialized sensor_msgs/Image and read it with codec/image_cdr.py '
              "(numpy views over the received bytes) instead of rclpy's message conversion"),
    ParamSpec('inline_processing', 'bool', True,
              'run the pipeline in the synchroniser callback (executor thread; no thread hand-off) instead of handing '
              'the frame to a worker thread; frames that arrive meanwhile wait in the subscriptions\' QoS queues, so '
              'keep the inputs\' qos_depth at 1 (only the newest waits)'),
    ParamSpec('reuse_output_messages', 'bool', True,
              'build ~/detections and ~/tracks by refilling the previous frame\'s message objects instead of '
              'constructing new ones (codec/detection_msgs.Detection3DArrayBuilder)'),
    ParamSpec('latency_log', 'string', '',
              'append each frame\'s per-stage latencies (ms) as one JSON line to this file; empty = off '
              '(benchmarks/node_latency.py)'),
    ParamSpec('diagnostics_period', 'double', 1.0, 'seconds between /diagnostics messages', 0.1, 60.0),
    ParamSpec('log_throttle', 'double', 5.0, 'seconds between repeated warnings of one kind', 0.0, 3600.0,
              live=True),
)
SPECS: dict[str, ParamSpec] = {p.name: p for p in PARAMS}
assert len(SPECS) == len(PARAMS), 'duplicate parameter name'


def defaults(params: Sequence[ParamSpec] | None = None) -> dict[str, Any]:
    """name -> default value (a fresh copy). ``params``: another node's table (ros/policy_params.py); default
    this node's :data:`PARAMS` (the same for every function below that takes it)."""
    return {p.name: (list(p.default) if isinstance(p.default, list) else p.default)
            for p in (PARAMS if params is None else params)}


def _specs(params: Sequence[ParamSpec] | None) -> Mapping[str, ParamSpec]:
    return SPECS if params is None else {p.name: p for p in params}


def import_tf2():
    """The ``tf2_ros`` module when it has :data:`TF2_NAMES` (what ``ros/tf_lookup.py`` uses); ImportError (saying
    what is missing) otherwise. The one check of tf2_ros: the lookup imports it through this."""
    import tf2_ros    # optional: only a target_frame other than the image frame needs it (not on PyPI set-ups)
    missing = [n for n in TF2_NAMES if not hasattr(tf2_ros, n)]
    if missing:
        raise ImportError(f'tf2_ros lacks {", ".join(missing)}')
    return tf2_ros


def tf2_available() -> bool:
    """True when :func:`import_tf2` succeeds (needed for a target_frame other than the image frame)."""
    try:
        import_tf2()
    except ImportError:
        return False
    return True


def trt_cache_dir(value: str) -> Path:
    """The TensorRT engine cache folder for ``trt_engine_cache_path`` (empty: the per-user cache folder)."""
    if value:
        return Path(value).expanduser()
    base = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return Path(base) / 'string_perception' / 'tensorrt'


def model_options(cfg: Mapping[str, Any], auto_providers: Callable[[], Sequence[str]]) -> dict[str, Any]:
    """``OnnxModel`` keyword arguments from validated parameters: providers (``[auto]`` -> ``auto_providers()``),
    ``device_id``, ``trt_fp16`` and, only when TensorRT is requested, the engine cache folder."""
    providers = tuple(auto_providers()) if list(cfg['providers']) == [AUTO_PROVIDERS] else tuple(cfg['providers'])
    trt = PROVIDER_NAMES[0] in providers
    return {'providers': providers, 'device_id': int(cfg['device_id']), 'trt_fp16': bool(cfg['trt_fp16']),
            'trt_engine_cache_path': trt_cache_dir(cfg['trt_engine_cache_path']) if trt else None}


def effective_score_threshold(value: float, metadata: Any = None) -> float:
    """The threshold the node uses: ``value`` if >= 0, else the model's recommended ``score_threshold``
    (metadata key, when the exporter wrote one), else :data:`DEFAULT_SCORE_THRESHOLD`."""
    if value >= 0:
        return float(value)
    recommended = getattr(metadata, 'score_threshold', None)
    return float(recommended) if recommended is not None else DEFAULT_SCORE_THRESHOLD


def flip_tta_on(value: str, provider: str) -> bool:
    """Whether the node runs flip test-time augmentation: ``flip_tta`` ``on`` / ``off``, or ``auto`` = on when the
    session's first provider (``provider``) is a GPU one: there the two passes run as one batch of 2 and the
    accurate model is the default; on the CPU they double the inference time."""
    if value not in FLIP_TTA_CHOICES:
        raise ValueError(f'flip_tta must be one of {FLIP_TTA_CHOICES}, got {value!r}')
    return value == 'on' or (value == 'auto' and provider != 'CPUExecutionProvider')


def tracker_config(cfg: Mapping[str, Any]):
    """The ``runtime.tracking.TrackerConfig`` of validated parameters, or None with ``tracking`` off
    (``ValueError`` when they disagree, e.g. track_max_gap < track_death_misses)."""
    if not cfg['tracking']:
        return None
    from .runtime.tracking import TrackerConfig    # scipy / filterpy: only when tracking is on
    return TrackerConfig(birth_hits=cfg['track_birth_hits'], death_misses=cfg['track_death_misses'],
                         max_gap=cfg['track_max_gap'], association=cfg['track_association'],
                         max_distance_m=cfg['track_max_distance'], min_iou=cfg['track_min_iou'],
                         max_tracks=cfg['track_max_tracks'])


def validate(name: str, value: Any, *, tf2: bool | None = None,
             specs: Mapping[str, ParamSpec] | None = None) -> Any:
    """The value, checked (ints accepted for doubles and converted); ``ValueError`` says what is wrong.
    ``specs``: another node's table (ros/policy_params.py); default this node's :data:`SPECS`."""
    spec = (SPECS if specs is None else specs).get(name)
    if spec is None:
        raise ValueError(f'unknown parameter {name!r}')
    t = spec.type
    if t == 'bool':
        if not isinstance(value, bool):
            raise ValueError(f'{name} must be a bool, got {value!r}')
    elif t == 'int':
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f'{name} must be an integer, got {value!r}')
    elif t == 'double':
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f'{name} must be a finite number, got {value!r}')
        value = float(value)
    elif t == 'string':
        if not isinstance(value, str):
            raise ValueError(f'{name} must be a string, got {value!r}')
    elif t == 'string_array':
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ValueError(f'{name} must be a list of strings, got {value!r}')
        value = list(value)
    if spec.lo is not None and not (spec.lo <= value <= spec.hi):
        raise ValueError(f'{name} must be in {spec.range_text()}, got {value!r}')
    if spec.choices is not None:
        items = value if t == 'string_array' else [value]
        bad = [v for v in items if v not in spec.choices]
        if bad:
            raise ValueError(f'{name}: {bad[0]!r} is not {spec.range_text()}')
    return _extra_rules(name, value, tf2)


def _extra_rules(name: str, value: Any, tf2: bool | None) -> Any:
    if name == 'score_threshold' and value < 0 and value != -1.0:
        raise ValueError(f'score_threshold must be in [0, 1] or -1 (use the model\'s), got {value}')
    if name == 'providers':
        if not value:
            raise ValueError('providers must name at least one execution provider')
        if len(set(value)) != len(value):
            raise ValueError(f'providers lists a provider twice: {value}')
        if AUTO_PROVIDERS in value and len(value) > 1:
            raise ValueError(f'providers: {AUTO_PROVIDERS!r} stands alone (got {value})')
    if name == 'target_frame' and value:
        if tf2 is None:
            tf2 = tf2_available()
        if not tf2:
            raise ValueError(f'target_frame {value!r} needs tf2_ros, which is not importable here (PyPI set-up); '
                             'leave target_frame empty to publish boxes in the colour image frame')
    return value


def validate_all(values: Mapping[str, Any], *, tf2: bool | None = None,
                 params: Sequence[ParamSpec] | None = None,
                 required: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Check a full set (missing names take defaults); ``ValueError`` lists every problem at once.
    ``required``: name -> what it is, for parameters whose (empty) default must be overridden."""
    specs = _specs(params)
    out, problems = defaults(params), []
    for name, value in values.items():
        try:
            out[name] = validate(name, value, tf2=tf2, specs=specs)
        except ValueError as e:
            problems.append(str(e))
    for name, what in (required or {}).items():
        if not out[name]:
            problems.append(f'{name} is required ({what})')
    if problems:
        raise ValueError('invalid parameters: ' + '; '.join(problems))
    return out


def check_updates(updates: Iterable[tuple[str, Any]], *, tf2: bool | None = None,
                  params: Sequence[ParamSpec] | None = None) -> tuple[bool, str]:
    """For the set-parameters callback: (ok, reason). All updates are accepted or none."""
    specs = _specs(params)
    reasons = []
    for name, value in updates:
        if name not in specs:
            continue        # parameters we do not own (use_sim_time, qos overrides, ...)
        try:
            validate(name, value, tf2=tf2, specs=specs)
        except ValueError as e:
            reasons.append(str(e))
    return (not reasons, '; '.join(reasons))


# ------------------------------------------------------------------------------------------------ rclpy glue
def _descriptor(spec: ParamSpec):
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
    types = {'bool': ParameterType.PARAMETER_BOOL, 'int': ParameterType.PARAMETER_INTEGER,
             'double': ParameterType.PARAMETER_DOUBLE, 'string': ParameterType.PARAMETER_STRING,
             'string_array': ParameterType.PARAMETER_STRING_ARRAY}
    d = ParameterDescriptor(name=spec.name, type=types[spec.type], description=spec.description)
    extra = [spec.range_text()] if spec.choices else []
    if not spec.live:
        extra.append('applies at configure')
    d.additional_constraints = '; '.join(extra)
    if spec.type == 'int' and spec.lo is not None:
        d.integer_range = [IntegerRange(from_value=int(spec.lo), to_value=int(spec.hi), step=0)]
    elif spec.type == 'double' and spec.lo is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.lo), to_value=float(spec.hi), step=0.0)]
    return d


def declare_all(node, params: Sequence[ParamSpec] | None = None) -> None:
    """Declare every parameter on an rclpy node (overrides from --ros-args / YAML are applied by rclpy)."""
    node.declare_parameters('', [(p.name, p.default, _descriptor(p)) for p in (PARAMS if params is None else params)])


def read_all(node, params: Sequence[ParamSpec] | None = None) -> dict[str, Any]:
    """Current values of all our parameters on ``node`` (validate them with :func:`validate_all`)."""
    return {p.name: node.get_parameter(p.name).value for p in (PARAMS if params is None else params)}


PARAMS_FILE_NODE = '/**'   # config/default.yaml applies to any node name / namespace (launch node_name:=...)


def render_yaml(node_name: str = PARAMS_FILE_NODE) -> str:
    """``config/default.yaml``: the defaults in ROS params-file form, each with its description as a comment."""
    import json
    lines = ['# Defaults of the string_perception node (generated from string_perception/node_params.py;',
             '# test/ros/test_node_params.py checks they match). Copy and edit, then pass with --params-file.',
             f'{node_name}:', '  ros__parameters:']
    for p in PARAMS:
        rng = p.range_text()
        lines.append(f'    # {p.description}' + (f' ({rng})' if rng and not p.choices else ''))
        if p.choices and p.type != 'bool':
            lines.append(f'    # {rng}')
        value = json.dumps(p.default) if p.type != 'bool' else ('true' if p.default else 'false')
        lines.append(f'    {p.name}: {value}')
    return '\n'.join(lines) + '\n'

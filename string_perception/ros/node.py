"""The ROS 2 node ``string_perception``: synchronised RGB-D + CameraInfo in; 3D boxes, markers, embedding out.

A thin rclpy lifecycle adapter around :class:`string_perception.runtime.Pipeline` (docs/DESIGN.md §1, §5): declare
the parameters (``params.py``) -> build the pipeline -> wire the inputs -> on each frame: decode -> pipeline ->
outputs. Configure validates every parameter, loads the ONNX model and creates the publishers (``outputs.py``;
``/diagnostics`` every ``diagnostics_period``); activate subscribes ``image``, ``depth``, ``camera_info``
(``inputs.py``) through the approximate-time synchroniser and starts the worker thread; deactivate / cleanup undo
that. Live parameter changes (``live_params.py``) apply at once, the others at the next configure.

By default (``inline_processing``) the synchroniser callback (executor thread) runs the matched triple itself and
frames that arrive meanwhile wait in the input QoS queues (depth 1: the newest wins); with
``inline_processing:=false`` a :class:`LatestWorker` thread runs the newest frame, one replaced while waiting is
dropped and counted (``stale``). A bad frame is counted by kind and logged (throttled per kind) and the node keeps
going: header checks (``input_monitor.py``) run before the hand-off, so a bad frame never displaces a good one;
pixel checks run in the pipeline. Output headers copy the colour image's stamp and frame_id, or name
``target_frame`` (``target_frame.py``, tf2).

Start it as a plain node (configures and activates itself unless ``autostart:=false``)::

    python -m string_perception.ros.node --ros-args -p model_path:=models/vitd_tiny_cayley.onnx \\
        -r image:=/camera/color/image_raw -r depth:=/camera/depth/image_raw -r camera_info:=/camera/color/camera_info

:func:`node_command` builds that command line; the node prints :data:`READY_LINE` once active, and exits with
status 1 (after a clear log line) if configuration fails.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import cv2
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import TransitionCallbackReturn

from .. import node_params as P
from ..codec.frame_decode import decode_image
from ..codec.image_conversion import CONVERSION_ERRORS, make_bridge
from ..codec.detection_msgs import camera_info_to_k, stamp_to_ns
from ..paths import model_file
from ..runtime import Pipeline
from ..runtime.errors import InferenceError, InputError, ModelLoadError
from ..runtime.model_variant import node_model_choice
from ..runtime.onnx_runner import usable_providers
from ..runtime.plausibility import DEFAULT_LIMITS, check_frame_plausible
from .input_monitor import InputMonitor
from .inputs import input_specs, subscribe_inputs
from .latency import OUTPUTS, FrameTiming, LatencyBudget, StageLog, pipeline_stages
from .latest import LatestWorker
from .lifecycle_node import FAILURE, SUCCESS, ManagedNode, make_executor, run_lifecycle_node
from .node_argv import ros_node_argv
from .live_params import on_parameter_updates, pipeline_settings, tiling_setting
from .outputs import NodeOutputs
from .synchronizer import IMPLEMENTATION as SYNC_IMPLEMENTATION, ApproximateTimeSynchronizer
from .target_frame import TargetFrame

__all__ = ['StringPerceptionNode', 'main', 'node_command', 'READY_LINE', 'DEFAULT_MODEL', 'DEFAULT_GPU_MODEL']

READY_LINE = 'string_perception node ready'
DEFAULT_MODEL = 'vitd_workcell.onnx'       # models/MODEL_CARD_workcell.md; vitd_tiny_cayley.onnx by name
DEFAULT_GPU_MODEL = 'vitd_workcell_hr.onnx'   # on GPU providers: the accurate 240x320 variant (~8x the compute)


def default_model_name(on_gpu: bool) -> str:
    """The shipped model an empty ``model_path`` means: the accurate one on a GPU provider, else the 30 Hz one."""
    return DEFAULT_GPU_MODEL if on_gpu else DEFAULT_MODEL


def resolve_model_path(value: str, *, on_gpu: bool = False) -> Path:
    """``model_path`` -> a file: empty = the default shipped model (``DEFAULT_GPU_MODEL`` when ``on_gpu``, the
    session's first provider being a GPU one, else ``DEFAULT_MODEL``); a bare name that is not a file here but a
    shipped model (``vitd_workcell.onnx``) = that file in the package's ``models/``; else the path as given."""
    if not value:
        return model_file(default_model_name(on_gpu))
    path = Path(value).expanduser()
    if path.name == value and not path.exists():
        try:
            return model_file(value)
        except FileNotFoundError:            # not shipped either: the path as given (refused at load, named)
            pass
    return path


def node_command(model_path: str | Path | None = None, *, remaps: Mapping[str, str] | None = None,
                 params: Mapping[str, Any] | None = None, params_file: str | Path | None = None,
                 python: str = sys.executable) -> list[str]:
    """argv to start the node in a subprocess, e.g. ``node_command('m.onnx', remaps={'image': '/cam/rgb'})``
    (pass ``env=string_perception.dds_env.merged_dds_env(domain)`` to ``subprocess``)."""
    return ros_node_argv('string_perception.ros.node', model_path=model_path, params=params,
                         params_file=params_file, remaps=remaps, python=python)


class StringPerceptionNode(ManagedNode):
    """See the module docstring. ``cfg`` holds the validated parameters of the current configuration; ``outputs``
    (:class:`NodeOutputs`), ``inputs`` (:class:`InputMonitor`) and ``target`` (:class:`TargetFrame`) do the work."""

    def __init__(self, node_name: str = P.NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        P.declare_all(self)
        self.add_on_set_parameters_callback(lambda updates: on_parameter_updates(
            updates, None if self.pipeline is None else self.cfg, self._apply_live, self.get_logger()))
        self.pipeline = None
        self.budget = LatencyBudget()              # per-stage latency (latency.py), reset at configure
        self._stage_log: StageLog | None = None    # latency_log
        self._input_group = None                    # input callbacks (made at configure)
        self.bridge = make_bridge()
        self.outputs = NodeOutputs(self, self.bridge)
        self.inputs = InputMonitor(self, self._warn)
        self.target = TargetFrame(self)              # target_frame: tf_lookup.TfLookup (own listener thread)
        self._worker: LatestWorker | None = None

    # ------------------------------------------------------------------ parameters
    def _apply_live(self, cfg: Mapping[str, Any], new: Mapping[str, Any] | None = None) -> None:
        """Push the live parameters of ``cfg`` into the pipeline (ValueError leaves it unchanged), the input checks,
        the target frame and the outputs; a new ``score_threshold`` is latched on ``~/label_info``."""
        self.pipeline.set_params(**pipeline_settings(cfg, self.pipeline.model.metadata, self.pipeline.provider))
        self.pipeline.set_tiling(tiling_setting(cfg))
        self.inputs.set_live(cfg)
        self.target.set_live(cfg)
        self.outputs.set_live(cfg)
        if new and 'score_threshold' in new:      # the effective one (-1: the model's) is in the pipeline now
            self.outputs.publish_label_info(self.pipeline.labels, self.pipeline.params['score_threshold'])

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        log = self.get_logger()
        try:
            cfg = P.validate_all(P.read_all(self))
            options = P.model_options(cfg, usable_providers)
            on_cpu = options['providers'][0] == 'CPUExecutionProvider'
            if not cfg['model_path']:
                log.info(f'model_path empty: the shipped {default_model_name(not on_cpu)} '
                         f'({"fast: 30 Hz on a CPU" if on_cpu else "accurate: 240x320, for GPU providers"})')
            # the int8 sibling only where this CPU runs it faster (runtime/model_variant.py), said in the log
            choice = node_model_choice(resolve_model_path(cfg['model_path'], on_gpu=not on_cpu), on_cpu=on_cpu)
            log.info(f'model file {choice.path} ({choice.precision}: {choice.reason})')
            path = choice.path
            self.pipeline = Pipeline(path, **options,
                                     intra_op_threads=cfg['intra_op_threads'] or None,
                                     intra_op_spinning=cfg['intra_op_spinning'])
            self._apply_live(cfg)
            self.pipeline.set_tracking(P.tracker_config(cfg))
        except (ValueError, FileNotFoundError, ModelLoadError) as e:
            log.error(f'configure failed: {e}')
            self.pipeline = None
            return FAILURE
        self.cfg = cfg
        if cfg['publish_tokens'] and not self.pipeline.model.has_tokens:
            log.warning('publish_tokens is true but the model has no tokens output: ~/tokens stays silent')
        self.budget = LatencyBudget()
        self.outputs.open(cfg, self.budget)
        self.outputs.publish_label_info(self.pipeline.labels, self.pipeline.params['score_threshold'])
        # inputs (synchroniser state) in one group, the diagnostics timer in another: a multi-threaded executor
        # runs them side by side, never two input callbacks at once
        self._input_group = MutuallyExclusiveCallbackGroup()
        self._start_diagnostics(cfg['diagnostics_period'], self._publish_diagnostics, MutuallyExclusiveCallbackGroup())
        log.info(f'configured: model {path} ({len(self.pipeline.labels)} labels, input {self.pipeline.input_hw}), '
                 f'provider {self.pipeline.provider}, score threshold {self.pipeline.params["score_threshold"]:.3f}, '
                 f'flip TTA {"on" if self.pipeline.params["flip_tta"] else "off"} (flip_tta {cfg["flip_tta"]})')
        return SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        cfg = self.cfg
        self.pipeline.reset_tracking()          # every activation starts a new stream
        specs = input_specs(self, cfg)
        self.inputs.start(cfg, self.stats, self.resolve_topic_name(specs[0][2]))
        self._subs, self.inputs.image_input = subscribe_inputs(self, cfg, specs, self.inputs, self._input_group)
        self._sync = ApproximateTimeSynchronizer(self._subs, queue_size=cfg['sync_queue_size'], slop=cfg['sync_slop'])
        self._sync.registerCallback(self._on_synced)
        self.inputs.sync = self._sync
        self._worker = LatestWorker(self._process, on_drop=lambda _f: self.stats.drop('stale'),
                                    on_error=self._on_worker_error)
        self._worker.start()
        self._stage_log = StageLog(cfg['latency_log']) if cfg['latency_log'] else None
        self._active = True
        self.get_logger().info('active: subscribed to ' + ', '.join(self.resolve_topic_name(t) for _, _, t in specs))
        return SUCCESS

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._stop_inputs()
        self.outputs.clear_markers(self.cfg.get('target_frame') or '')
        return SUCCESS

    def _stop_inputs(self) -> None:
        super()._stop_inputs()
        self.inputs.stop()
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._stage_log is not None:
            self._stage_log.close()
            self._stage_log = None

    def _release_outputs(self) -> None:
        super()._release_outputs()
        self.pipeline = None
        self.target.close()
        self.outputs.close()

    # ------------------------------------------------------------------ frames
    def _on_synced(self, image, depth, info) -> None:
        """Executor thread: header checks (a bad frame never replaces a good one waiting), then hand over."""
        timing = self.inputs.synced(image, depth, info, accept=self._active and self._worker is not None)
        if timing is None:
            return
        if self.cfg['inline_processing']:      # no hand-off: this executor thread runs the model
            try:
                self._process((image, depth, info, timing))
            except Exception as e:  # noqa: BLE001 - as the worker: count, log, keep spinning
                self._on_worker_error(e)
            return
        self._worker.submit((image, depth, info, timing))

    def _on_worker_error(self, exc: BaseException) -> None:
        self.stats.error('internal')
        self.get_logger().error(f'frame failed unexpectedly: {type(exc).__name__}: {exc}',
                                throttle_duration_sec=self.cfg.get('log_throttle', 5.0))

    def _decode(self, image, depth, info):
        """Messages -> (colour array, its encoding, depth array, depth encoding, K[3,3], CameraInfo (h, w))."""
        view = self.cfg['zero_copy_input']      # views over the message buffers (read-only use downstream)
        ours = view or self.cfg['raw_image_input']      # image_cdr's RawImage: always our reader
        # image_transport compressed: already decoded to a sensor_msgs/Image (compressed_input), read by ours
        colour_bridge = None if ours or self.cfg['image_transport'] == 'compressed' else self.bridge
        rgb, enc = decode_image(image, 'colour', bridge=colour_bridge, copy=not view)
        dep, dep_enc = decode_image(depth, 'depth', compressed=self.cfg['depth_transport'] == 'compressedDepth',
                                    bridge=None if ours else self.bridge, copy=not view)  # compressedDepth: ours
        K, hw = camera_info_to_k(info)
        return rgb, enc, dep, dep_enc, K, hw

    def _process(self, frame) -> None:
        """Worker thread: one synchronised frame ``(image, depth, info, FrameTiming)`` -> published outputs (or a
        counted, logged failure); a frame handed over without its timing (tests) is timed from now."""
        image, depth, info, *timed = frame
        now_ns = self.inputs.now_ns
        timing = timed[0] if timed else FrameTiming(stamp_to_ns(image.header.stamp), None, now_ns(), now_ns)
        timing.started()
        pipeline, cfg = self.pipeline, dict(self.cfg)
        if pipeline is None or not self._active:
            return
        try:
            with timing.stage('decode'):
                rgb, enc, dep, dep_enc, K, hw = self._decode(image, depth, info)
                check_frame_plausible(rgb.shape[:2], dep, K, hw, DEFAULT_LIMITS, dep_enc)   # well-formed nonsense
            result = pipeline(rgb, dep, K, encoding=enc, depth_encoding=dep_enc, intrinsics_hw=hw,
                              stamp_s=stamp_to_ns(image.header.stamp) * 1e-9)
        except InputError as e:
            self.inputs.refuse(e.kind, e.message)
            return
        except (*CONVERSION_ERRORS, cv2.error) as e:     # cv2.error: a decoder failing in its own way
            self.inputs.refuse('conversion', str(e))
            return
        except InferenceError as e:
            self.stats.error(e.kind)
            self.get_logger().error(f'inference failed ({e.kind}): {e.message}',
                                    throttle_duration_sec=cfg['log_throttle'])
            return
        for w in result.warnings:      # e.g. 'no_valid_depth': processed, but the boxes had no depth to use
            self.stats.warning(w)
            self._warn(f'input warning ({w})', 'frame processed without usable depth (every depth pixel is 0, NaN, '
                       'inf, negative or beyond max_depth_m)' if w == 'no_valid_depth' else 'frame processed')
        for stage, ms in pipeline_stages(result.timings).items():     # preprocess, inference, postprocess, ...
            timing.add(stage, ms)
        debug = self.outputs.debug_image(rgb, enc, K, result.detections, pipeline.labels, cfg, timing)
        moved = self.target.move(cfg['target_frame'], result, image.header, timing)
        if moved is None:      # not in the buffer (yet): the frame is dropped at once, never waited for
            self.stats.drop('tf')
            self._warn('no transform', f'{image.header.frame_id} -> {cfg["target_frame"]} at the image stamp: '
                       f'{self.target.last_error}')
            return
        latency_ms = self.outputs.publish(*moved, cfg, timing, image_header=image.header, debug=debug)
        timing.mark('stamp_to_done')
        self.budget.record(timing.ms)
        if self._stage_log is not None:
            self._stage_log.write(timing.stamp_ns, timing.ms)
        self.stats.frame_done(latency_ms, result.timings['inference_ms'])

    # ------------------------------------------------------------------ diagnostics
    def _publish_diagnostics(self) -> None:
        pub = self._diagnostics_publisher()
        if pub is None or self.pipeline is None:
            return
        snap = self.stats.snapshot()
        snap['stage'] = self.budget.diagnostic_values()          # stage.<name>.p50_ms / .p99_ms / .mean_ms / .count
        snap['outputs_skipped'] = {o: self.budget.skips.get(o, 0) for o in OUTPUTS[1:]}
        pub.publish(self._diagnostics_message(snap, self.pipeline.provider, {
            'synchroniser': SYNC_IMPLEMENTATION, 'bridge': type(self.bridge).__name__,
            'not_received_keyed_by': getattr(self.inputs.image_gaps, 'keyed_by', ''),
            'image_input': self.inputs.image_input, 'score_threshold': self.pipeline.params['score_threshold']}))


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``string_perception_node`` / ``python -m string_perception.ros.node``."""
    return run_lifecycle_node(StringPerceptionNode, 'string_perception', argv,     # ValueError: a bad ``executor``
                              lambda node: make_executor(P.validate('executor', node.get_parameter('executor').value)),
                              lambda node: f'{READY_LINE}: provider {node.pipeline.provider}')


if __name__ == '__main__':
    sys.exit(main())

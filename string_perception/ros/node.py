"""The ROS 2 node ``string_perception``: synchronised RGB-D + CameraInfo in; 3D boxes, markers, embedding out.

A thin rclpy lifecycle adapter around :class:`string_perception.runtime.Pipeline` (docs/DESIGN.md §1, §5):

- configure: validate every parameter (``params.py``), load and check the ONNX model, create publishers;
- activate: subscribe ``image`` (or ``image/compressed``), ``depth`` (or ``depth/compressedDepth``),
  ``camera_info`` through the approximate-time synchroniser and start the worker thread; deactivate/cleanup undo
  that; shutdown all.

By default (``inline_processing``) the synchroniser callback (executor thread) runs the matched triple itself:
no thread hand-off, and frames that arrive meanwhile wait in the input QoS queues (depth 1: the newest wins).
With ``inline_processing:=false`` the callback hands the triple to a :class:`LatestWorker` thread: the newest frame
wins, a frame still waiting when a newer one arrives is dropped and counted (``stale``). Raw images arrive
serialized and are read by ``image_cdr`` into views over the received bytes (``raw_image_input``, default on).
Processing a frame decodes it, runs the pipeline and publishes ``~/detections`` (vision_msgs/Detection3DArray,
refilled from the previous frame's objects with ``reuse_output_messages``), ``~/markers``, ``~/embedding``
(32FC1, 1 x D), optionally ``~/tokens`` and ``~/debug_image``; ``~/label_info`` (transient local) at configure
and on a live ``score_threshold`` change; ``/diagnostics`` (status ``<node name>: pipeline``) every
``diagnostics_period``.
Compressed colour (``image_transport:=compressed``) arrives decoded, from image_transport_py where installed
(``compressed_input``). A synchroniser that matches nothing for ``input_timeout`` while every input arrives (queues
full of future stamps) is unblocked by ``sync_watchdog`` (``sync_recoveries.<cause>``).
A bad frame is counted by kind and logged (throttled per kind); the node keeps going: header checks
(``frame_checks``: encodings, layout, frame ids, stamps) run before the hand-off, so a bad frame never displaces a
good one; pixel checks run in the pipeline. Output headers copy the colour image's stamp and frame_id (or
``target_frame`` via tf2: ``tf_lookup.TfLookup``, whose listener has its own thread, so a lookup never waits for
/tf that only this executor could deliver).

Start it as a plain node (configures and activates itself unless ``autostart:=false``)::

    python -m string_perception.ros.node --ros-args -p model_path:=models/vitd_tiny_cayley.onnx \\
        -r image:=/camera/color/image_raw -r depth:=/camera/depth/image_raw -r camera_info:=/camera/color/camera_info

From another program, :func:`node_command` builds that command line; the node prints :data:`READY_LINE` to stdout
once it is active, and exits with status 1 (after a clear log line) if configuration fails.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from .. import node_params as P
from ..runtime.plausibility import DEFAULT_LIMITS, check_frame_plausible
from .diagnostics import LEVEL_WINDOW_PERIODS, NodeStats, diagnostic_array
from ..codec.frame_checks import (InputWatch, StampGate, check_camera_info, check_frame_ids, check_image_layout,
                                  check_stamp_fields)
from ..codec.frame_decode import decode_image
from ..codec.image_conversion import CONVERSION_ERRORS, make_bridge
from .latency import OUTPUTS, ArrivalBook, FrameTiming, LatencyBudget, StageLog, pipeline_stages
from .latest import LatestWorker
from ..codec.markers import MarkerBuilder
from .sync_watchdog import SyncWatchdog
from ..codec.detection_msgs import (Detection3DArrayBuilder, camera_info_to_k, copy_header, detections_to_msg,
                                    label_info_msg, stamp_to_ns, tensor_to_image, transform_detections)
from .track_messages import (make_transform_broadcaster, track_velocities_image, tracks_to_msg, tracks_to_transforms,
                             transform_tracks)

__all__ = ['StringPerceptionNode', 'main', 'node_command', 'READY_LINE', 'DEFAULT_MODEL']

READY_LINE = 'string_perception node ready'
DEFAULT_MODEL = 'vitd_workcell.onnx'       # models/MODEL_CARD_workcell.md; vitd_tiny_cayley.onnx by name


def resolve_model_path(value: str) -> Path:
    """``model_path`` -> a file: empty = the default shipped model; a bare name that is not a file here but a
    shipped model (``vitd_workcell.onnx``) = that file in the package's ``models/``; else the path as given."""
    from ..paths import model_file
    if not value:
        return model_file(DEFAULT_MODEL)
    path = Path(value).expanduser()
    if path.name == value and not path.exists():
        try:
            return model_file(value)
        except FileNotFoundError:            # not shipped either: the path as given (refused at load, named)
            pass
    return path

import rclpy  # noqa: E402  (after the ROS-free imports above, so a missing rclpy fails here with a clear name)
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.qos import DurabilityPolicy  # noqa: E402

from .lifecycle_node import FAILURE, SUCCESS, ManagedNode, run_lifecycle_node  # noqa: E402
from ..qos import qos_profile  # noqa: E402


def node_command(model_path: str | Path | None = None, *, remaps: Mapping[str, str] | None = None,
                 params: Mapping[str, Any] | None = None, params_file: str | Path | None = None,
                 python: str = sys.executable) -> list[str]:
    """argv to start the node in a subprocess, e.g. ``node_command('m.onnx', remaps={'image': '/cam/rgb'})``
    (pass ``env=string_perception.ros.dds_env.merged_dds_env(domain)`` to ``subprocess``)."""
    cmd = [python, '-m', 'string_perception.ros.node', '--ros-args']
    if params_file is not None:
        cmd += ['--params-file', str(params_file)]
    values = dict(params or {})
    if model_path is not None:
        values['model_path'] = str(model_path)
    for k, v in values.items():
        cmd += ['-p', f'{k}:={json.dumps(v)}']
    for src, dst in (remaps or {}).items():
        cmd += ['-r', f'{src}:={dst}']
    return cmd


class StringPerceptionNode(ManagedNode):
    """See the module docstring. ``cfg`` holds the validated parameters of the current configuration."""

    def __init__(self, node_name: str = P.NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        P.declare_all(self)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.pipeline = None
        self.budget = LatencyBudget()              # per-stage latency (latency.py), reset at configure
        self._arrivals = ArrivalBook()             # colour image stamp -> arrival, for transport vs sync wait
        self._stage_log: StageLog | None = None    # latency_log
        self._input_group = self._timer_group = None
        self.bridge = make_bridge()
        self.markers = MarkerBuilder()
        self._det_msgs, self._track_msgs = Detection3DArrayBuilder(), Detection3DArrayBuilder()  # reused messages
        self._worker: LatestWorker | None = None
        self._tf = None                             # target_frame: tf_lookup.TfLookup (own listener thread)
        self._tf_broadcaster = None                 # publish_tf: tf2_ros' or the tf2_msgs fallback
        self._has_tokens = False
        self._gate: StampGate | None = None        # created at activate
        self._watch: InputWatch | None = None
        self._sync_watch: SyncWatchdog | None = None   # unblocks the synchroniser (sync_watchdog.py)
        self._colour_watch: InputWatch | None = None   # depth arriving without colour images
        self._distortion_warned: set[str] = set()      # distortion models warned about (once each)
        self._image_gaps = None                     # SequenceGaps of the colour input, created at activate
        self._image_input = 'rclpy'                 # what delivers colour images (compressed: compressed_input)

    # ------------------------------------------------------------------ parameters
    def _on_set_parameters(self, updates):
        from rcl_interfaces.msg import SetParametersResult
        ok, reason = P.check_updates([(p.name, p.value) for p in updates])
        if ok and self.pipeline is not None:
            new = {p.name: P.validate(p.name, p.value) for p in updates if p.name in P.SPECS}
            try:
                self._apply_live({**self.cfg, **new})
            except ValueError as e:
                ok, reason = False, str(e)
            else:
                self.cfg.update({k: v for k, v in new.items() if P.SPECS[k].live})
                if 'score_threshold' in new:        # ~/label_info carries the threshold: latch the new one
                    self._publish_label_info(new['score_threshold'])
                later = sorted(k for k in new if not P.SPECS[k].live)
                if later:
                    self.get_logger().info(f'{", ".join(later)} will apply at the next configure')
        if not ok:
            self.get_logger().warning(f'rejected parameter update: {reason}')
        return SetParametersResult(successful=ok, reason=reason)

    def _apply_live(self, cfg: Mapping[str, Any]) -> None:
        """Push the live parameters into the pipeline (ValueError leaves it unchanged)."""
        self.pipeline.set_params(score_threshold=self._score_threshold(cfg['score_threshold']),
                                 nms_iou=cfg['nms_iou'], max_detections=cfg['max_detections'],
                                 pre_nms_top_k=cfg['pre_nms_top_k'], max_depth_m=cfg['max_depth_m'] or None,
                                 nms_class_agnostic=cfg['nms_class_agnostic'], multi_label=cfg['multi_label'],
                                 resize_mode=cfg['resize_mode'])
        self.markers.alpha, self.markers.lifetime_s = cfg['marker_alpha'], cfg['marker_lifetime']
        if self._gate is not None:
            self._gate.max_future_s, self._gate.reset_jump_s = cfg['max_stamp_future'], cfg['stamp_reset_jump']
        for watch in (self._watch, self._colour_watch):
            if watch is not None:
                watch.timeout_s = cfg['input_timeout']
        if self._sync_watch is not None:
            self._sync_watch.timeout_s = cfg['input_timeout']
        if cfg['target_frame'] and self._tf is None:
            from .tf_lookup import TfLookup      # params.validate rejected target_frame already without tf2_ros
            self._tf = TfLookup(self)
        if self._tf is not None:
            self._tf.wait_s = cfg['tf_timeout']
        if cfg['publish_tf'] and self._tf_broadcaster is None:
            try:
                self._tf_broadcaster, impl = make_transform_broadcaster(self)
            except ImportError as e:
                raise ValueError(f'publish_tf needs tf2_ros or tf2_msgs (scripts/build_interfaces.sh): {e}') from None
            self.get_logger().info(f'object frames on /tf via {impl}')

    def _publish_label_info(self, score_threshold: float) -> None:
        """``~/label_info`` (transient local): at configure and whenever ``score_threshold`` changes live."""
        info = label_info_msg(self.pipeline.labels, self._score_threshold(score_threshold))
        if info is None:
            return
        if 'label_info' not in self._pubs:
            latched = qos_profile('reliable', 1, DurabilityPolicy.TRANSIENT_LOCAL)
            self._pubs['label_info'] = self.create_publisher(type(info), '~/label_info', latched)
        info.header.stamp = self.get_clock().now().to_msg()
        self._pubs['label_info'].publish(info)

    def _score_threshold(self, value: float) -> float:
        return P.effective_score_threshold(value, self.pipeline.model.metadata)

    def _model_path(self, value: str) -> Path:
        return resolve_model_path(value)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        from ..runtime import Pipeline
        from ..runtime.errors import ModelLoadError
        from ..runtime.onnx_runner import usable_providers
        log = self.get_logger()
        try:
            cfg = P.validate_all(P.read_all(self))
            path = self._model_path(cfg['model_path'])
            self.pipeline = Pipeline(path, **P.model_options(cfg, usable_providers),
                                     intra_op_threads=cfg['intra_op_threads'] or None,
                                     intra_op_spinning=cfg['intra_op_spinning'])
            self._apply_live(cfg)
            self.pipeline.set_tracking(P.tracker_config(cfg))
        except (ValueError, FileNotFoundError, ModelLoadError) as e:
            log.error(f'configure failed: {e}')
            self.pipeline = None
            return FAILURE
        self.cfg = cfg
        self._has_tokens = self.pipeline.model.has_tokens
        if cfg['publish_tokens'] and not self._has_tokens:
            log.warning('publish_tokens is true but the model has no tokens output: ~/tokens stays silent')
        out_qos = qos_profile(cfg['output_qos_reliability'], cfg['output_qos_depth'])
        from sensor_msgs.msg import Image
        from vision_msgs.msg import Detection3DArray
        from visualization_msgs.msg import MarkerArray
        from diagnostic_msgs.msg import DiagnosticArray
        self._pubs = {
            'detections': self.create_publisher(Detection3DArray, '~/detections', out_qos),
            'markers': self.create_publisher(MarkerArray, '~/markers', out_qos),
            'embedding': self.create_publisher(Image, '~/embedding', out_qos),
            'tokens': self.create_publisher(Image, '~/tokens', out_qos),
            'debug_image': self.create_publisher(Image, '~/debug_image', out_qos),
            'tracks': self.create_publisher(Detection3DArray, '~/tracks', out_qos),
            'track_velocities': self.create_publisher(Image, '~/track_velocities', out_qos),
            'diagnostics': self.create_publisher(DiagnosticArray, '/diagnostics', qos_profile('reliable', 10)),
        }
        self._publish_label_info(cfg['score_threshold'])
        self.stats = NodeStats(level_window_s=LEVEL_WINDOW_PERIODS * cfg['diagnostics_period'])
        self.budget = LatencyBudget()
        from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
        # inputs (synchroniser state) in one group, the diagnostics timer in another: a multi-threaded executor
        # runs them side by side, never two input callbacks at once
        self._input_group, self._timer_group = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        self._diag_timer = self.create_timer(cfg['diagnostics_period'], self._publish_diagnostics,
                                             callback_group=self._timer_group)
        log.info(f'configured: model {path} ({len(self.pipeline.labels)} labels, input {self.pipeline.input_hw}), '
                 f'provider {self.pipeline.provider}, score threshold '
                 f'{self.pipeline.params["score_threshold"]:.3f}')
        return SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        from sensor_msgs.msg import CameraInfo, CompressedImage, Image
        from .sync import ApproximateTimeSynchronizer
        cfg = self.cfg
        self.pipeline.reset_tracking()          # every activation starts a new stream
        compressed = cfg['image_transport'] == 'compressed'
        image_topic = self.resolve_topic_name('image') + '/compressed' if compressed else 'image'
        depth_packed = cfg['depth_transport'] == 'compressedDepth'
        depth_topic = self.resolve_topic_name('depth') + '/compressedDepth' if depth_packed else 'depth'
        specs = [('image', Image, image_topic),         # compressed: decoded by compressed_input (image_transport's contract)
                 ('depth', CompressedImage if depth_packed else Image, depth_topic),
                 ('camera_info', CameraInfo, 'camera_info')]
        self._subs = []
        self._gate = StampGate(cfg['max_stamp_future'], cfg['stamp_reset_jump'], DEFAULT_LIMITS.warn_stamp_ahead_s)
        self._watch = InputWatch('image', ('depth', 'camera_info'), cfg['input_timeout'])
        self._sync_watch = SyncWatchdog([name for name, _, _ in specs], cfg['input_timeout'])
        self._colour_watch = InputWatch('depth', ('image',), cfg['input_timeout'])
        raw_images = cfg['raw_image_input']
        self._image_input = 'image_cdr' if raw_images else 'rclpy'
        from .raw_input import RawImageSubscriber
        from .sequence_gaps import SequenceGaps, SequencedSubscriber
        image_fqn = self.resolve_topic_name(image_topic)       # count_publishers does not remap: resolve here
        self._image_gaps = SequenceGaps(publisher_count=lambda: self.count_publishers(image_fqn))
        for name, msg_type, topic in specs:
            qos = qos_profile(cfg[f'{name}_qos_reliability'], cfg[f'{name}_qos_depth'])
            # colour frames the node never received (overwritten in the QoS queue, lost in transport) are counted
            # from the publisher's sequence numbers as drops.not_received
            on_info = self._on_image_info if name == 'image' else None
            if name == 'image' and compressed:        # image_transport_py when importable, else ours: decoded Images
                from .compressed_input import make_compressed_input
                sub = make_compressed_input(self, self.resolve_topic_name('image'), qos,
                                            cfg[f'{name}_qos_depth'], callback_group=self._input_group,
                                            on_bad=self._on_bad_compressed, on_info=on_info,
                                            on_bad_stamp=self._on_bad_stamp)
                self._image_input = sub.implementation
            elif raw_images and msg_type is Image:      # serialized bytes read by image_cdr (views, no conversion)
                sub = RawImageSubscriber(self, msg_type, topic, qos_profile=qos, callback_group=self._input_group,
                                         on_bad=self._on_bad_cdr, on_info=on_info, on_bad_stamp=self._on_bad_stamp)
            else:
                sub = SequencedSubscriber(self, msg_type, topic, callback_group=self._input_group, qos_profile=qos,
                                          on_info=on_info, on_bad_stamp=self._on_bad_stamp)
            sub.registerCallback(lambda msg, n=name: self._on_input(n, msg))
            self._subs.append(sub)
        self._sync = ApproximateTimeSynchronizer(self._subs, queue_size=cfg['sync_queue_size'], slop=cfg['sync_slop'])
        self._sync.registerCallback(self._on_synced)
        self._worker = LatestWorker(self._process, on_drop=lambda _f: self.stats.drop('stale'),
                                    on_error=self._on_worker_error)
        self._worker.start()
        self._stage_log = StageLog(cfg['latency_log']) if cfg['latency_log'] else None
        self._active = True
        self.get_logger().info('active: subscribed to ' + ', '.join(self.resolve_topic_name(t) for _, _, t in specs))
        return SUCCESS

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._stop_inputs()
        if 'markers' in self._pubs:
            from std_msgs.msg import Header
            header = Header(frame_id=self.cfg.get('target_frame') or '')
            header.stamp = self.get_clock().now().to_msg()
            self._pubs['markers'].publish(self.markers.clear(header))
        return SUCCESS

    def _stop_inputs(self) -> None:
        super()._stop_inputs()
        self._watch = self._sync_watch = self._colour_watch = None
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._stage_log is not None:
            self._stage_log.close()
            self._stage_log = None

    def _release_outputs(self) -> None:
        super()._release_outputs()
        self.pipeline = None
        if self._tf is not None:
            self._tf.close()
            self._tf = None
        if self._tf_broadcaster is not None:     # tf2_ros' and the fallback both keep their publisher as pub_tf
            self.destroy_publisher(self._tf_broadcaster.pub_tf)
            self._tf_broadcaster = None

    # ------------------------------------------------------------------ frames
    def _on_input(self, name: str, msg=None) -> None:
        """Executor thread, every input message, before the synchroniser takes it: count it (a colour image's
        arrival time is kept for the latency budget); a colour image while depth or camera_info is silent (or
        stamped 0) counts as ``missing_<input>`` (``zero_stamp_<input>``), depth while colour is, as
        ``missing_image``: the synchroniser cannot complete a frame without them; nothing synchronised for
        ``input_timeout`` while every input arrives unblocks the synchroniser (``sync_recoveries.<cause>``)."""
        self.stats.count_input(name)
        stamp_ns = None if msg is None else stamp_to_ns(msg.header.stamp)
        if name == 'image' and msg is not None:
            self._arrivals.arrived(stamp_ns, self.get_clock().now().nanoseconds)
        watches = [w for w in (self._watch, self._colour_watch) if w is not None]
        if not watches:
            return
        now = time.monotonic_ns()
        sync_watch = self._sync_watch
        if sync_watch is not None:
            sync_watch.arrived(name, now)
            if sync_watch.stuck(now) and self._sync is not None:
                self._unblock_sync(sync_watch)
        for watch in watches:
            watch.seen(name, now, stamp_ns)
            if name != watch.primary:
                continue
            for kind, gone in watch.problems(now):
                self.stats.bad_input(kind)
                why = 'arrives stamped 0, so it is never paired' if kind.startswith('zero_stamp_') else 'is silent'
                arriving = 'colour images' if watch.primary == 'image' else f'{watch.primary} images'
                self._warn(f'bad input ({kind})', f'{arriving} arrive but {gone} {why} for more than '
                           f'{watch.timeout_s:g} s: is its publisher running, stamping, and on the remapped topic?')

    def _unblock_sync(self, sync_watch: SyncWatchdog) -> None:
        """Drop what blocks the synchroniser's queues (future, stale or stuck stamps), count and log why."""
        future_s = self.cfg['max_stamp_future']
        rec = sync_watch.recover(self._sync, int(self.cfg['sync_slop'] * 1e9),
                                 clock_ns=self.get_clock().now().nanoseconds, future_ns=int(future_s * 1e9))
        for cause in rec.causes:
            self.stats.sync_recovered(cause)
        self._warn('input warning (sync_stuck)', rec.reason)

    def _on_synced(self, image, depth, info) -> None:
        """Executor thread: header checks (a bad frame never replaces a good one waiting for the worker), then
        hand over; never blocks on the model."""
        from ..runtime.errors import InputError
        synced_ns = self.get_clock().now().nanoseconds
        self.stats.count_synced()
        if self._sync_watch is not None:
            self._sync_watch.synced()
        if not self._active or self._worker is None:
            return
        try:
            for what, msg in (('colour', image), ('depth', depth), ('camera_info', info)):
                check_stamp_fields(msg.header.stamp, what)
            check_image_layout(image, 'colour')          # raw, or decoded from compressed (compressed_input)
            if self.cfg['depth_transport'] == 'raw':
                check_image_layout(depth, 'depth')
            notes = check_frame_ids(image.header.frame_id, depth.header.frame_id, info.header.frame_id)
            notes += check_camera_info(info)
            notes += self._gate.check(stamp_to_ns(image.header.stamp), self.get_clock().now().nanoseconds)
        except InputError as e:
            self.stats.bad_input(e.kind)
            self._warn(f'bad input ({e.kind})', e.message)
            return
        for kind in notes:     # processed, but said: stamp_reset, stamp_ahead, empty_frame_id, distortion_ignored, ..
            self.stats.warning(kind)
            self._input_warning(kind, image, info)
        stamp_ns = stamp_to_ns(image.header.stamp)
        timing = FrameTiming(stamp_ns, self._arrivals.take(stamp_ns), synced_ns, self._now_ns)
        if self.cfg['inline_processing']:      # no hand-off: this executor thread runs the model
            try:
                self._process((image, depth, info, timing))
            except Exception as e:  # noqa: BLE001 - as the worker: count, log, keep spinning
                self._on_worker_error(e)
            return
        self._worker.submit((image, depth, info, timing))

    def _input_warning(self, kind: str, image, info) -> None:
        """The throttled log line of a processed-with-a-warning frame (``distortion_ignored``: once per model)."""
        if kind == 'distortion_ignored':
            model = str(info.distortion_model)
            if model in self._distortion_warned:
                return
            self._distortion_warned.add(model)
            self.get_logger().warning(
                f'input warning (distortion_ignored): CameraInfo distortion model {model!r} with non-zero '
                'coefficients: the node never undistorts, the boxes assume a pinhole camera with K (rectify the '
                'images first, e.g. image_proc); said once per model (counted in /diagnostics; node continues)')
            return
        ahead = (stamp_to_ns(image.header.stamp) - self.get_clock().now().nanoseconds) * 1e-9
        text = {
            'stamp_reset': 'stamps jumped back by more than stamp_reset_jump: taken as a clock reset, frames are '
                           'processed again',
            'stamp_ahead': f'colour image stamped {ahead:.3f} s ahead of the node clock (processed; beyond '
                           f'{DEFAULT_LIMITS.warn_stamp_ahead_s:g} s the camera and node clocks disagree: '
                           'synchronise them, e.g. chrony/PTP)',
            'empty_frame_id': 'the colour image has an empty frame_id: processed, but the outputs name no frame '
                              '(set the driver\'s frame id)',
            'camera_info_no_size': 'CameraInfo height/width are 0: K cannot be checked against the image size '
                                   '(only for plausibility); fill them in the driver or calibration file',
        }.get(kind, 'frame processed')
        self._warn(f'input warning ({kind})', text)

    def _on_image_info(self, info) -> None:
        """Executor thread, every colour message's MessageInfo: frames of its publisher that never arrived."""
        missed = self._image_gaps.missed(info)
        if missed:
            self.stats.drop('not_received', missed)
            qos = self.cfg['image_qos_reliability']
            self._warn('dropped (not_received)', f'{missed} colour frame(s) sent by the publisher never reached this '
                       'node: overwritten in the input queue while a frame was processed (the node is slower than '
                       f'the camera), or lost in transport{" (best-effort input QoS)" if qos != "reliable" else ""}: '
                       'DDS drops frames it cannot carry, e.g. a 3840x2160 rgb8 frame (24.9 MB) does not fit Fast '
                       "DDS' default 16 MiB shared-memory segment; use image_qos_reliability:=reliable or a larger "
                       'segment')

    def _on_bad_stamp(self, reason: str) -> None:
        """An input whose header stamp the synchroniser would refuse (rclpy.time.Time.from_msg: negative):
        counted as ``bad_stamp``, logged, not passed on (it would raise in the executor)."""
        self.stats.bad_input('bad_stamp')
        self._warn('bad input (bad_stamp)', f'a header stamp the synchroniser cannot take ({reason})')

    def _on_bad_compressed(self, error: Exception) -> None:
        """A compressed colour image refused from its header (``image_too_large`` / ``corrupt_image``) or that could
        not be decoded (``conversion``), by the compressed_input fallback."""
        kind = getattr(error, 'kind', 'conversion')
        self.stats.bad_input(kind)
        self._warn(f'bad input ({kind})', f'compressed image: {error}')

    def _on_bad_cdr(self, error: Exception) -> None:
        """A raw (serialized) image that ``image_cdr`` could not read: counted as ``bad_cdr``, logged."""
        self.stats.bad_input('bad_cdr')
        self._warn('bad input (bad_cdr)', str(error))

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _wanted(self, output: str, cfg: Mapping[str, Any]) -> bool:
        """Build this optional output? Not while nobody subscribes (``skip_unsubscribed_outputs``)."""
        if not cfg['skip_unsubscribed_outputs'] or self._pubs[output].get_subscription_count() > 0:
            return True
        self.budget.skipped(output)
        return False

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
        from ..runtime.errors import InferenceError, InputError
        image, depth, info, *timed = frame
        timing = timed[0] if timed else FrameTiming(stamp_to_ns(image.header.stamp), None, self._now_ns(),
                                                    self._now_ns)
        timing.started()
        pipeline, cfg, pubs = self.pipeline, dict(self.cfg), self._pubs
        if pipeline is None or not self._active:
            return
        try:
            with timing.stage('decode'):
                rgb, enc, dep, dep_enc, K, hw = self._decode(image, depth, info)
                check_frame_plausible(rgb.shape[:2], dep, K, hw, DEFAULT_LIMITS, dep_enc)   # well-formed nonsense
            result = pipeline(rgb, dep, K, encoding=enc, depth_encoding=dep_enc, intrinsics_hw=hw,
                              stamp_s=stamp_to_ns(image.header.stamp) * 1e-9)
        except InputError as e:
            self.stats.bad_input(e.kind)
            self._warn(f'bad input ({e.kind})', e.message)
            return
        except (*CONVERSION_ERRORS, cv2.error) as e:     # cv2.error: a decoder failing in its own way
            self.stats.bad_input('conversion')
            self._warn('bad input (conversion)', str(e))
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
        dets, header, tracks = result.detections, image.header, result.tracks
        debug = None
        if cfg['publish_debug_image'] and self._wanted('debug_image', cfg):
            with timing.stage('publish_debug_image'):
                debug = self._debug_image(rgb, enc, K, dets)
        target = cfg['target_frame']
        if target and target != header.frame_id:
            with timing.stage('tf'):
                moved = self._tf.lookup(target, header.frame_id, header.stamp)
            if moved is None:      # not in the buffer (yet): the frame is dropped at once, never waited for
                self.stats.drop('tf')
                self._warn('no transform', f'{header.frame_id} -> {target} at the image stamp: {self._tf.last_error}')
                return
            R, t = moved
            dets, header = transform_detections(dets, R, t), copy_header(header, target)
            tracks = None if tracks is None else transform_tracks(tracks, R, t)
        reuse = cfg['reuse_output_messages']
        with timing.stage('publish_detections'):
            ids = None if tracks is None else tracks.detection_ids
            pubs['detections'].publish(self._det_msgs.build(dets, header, ids) if reuse
                                       else detections_to_msg(dets, header, ids))
        latency_ms = timing.mark('stamp_to_detections')
        if cfg['publish_markers'] and self._wanted('markers', cfg):
            with timing.stage('publish_markers'):
                pubs['markers'].publish(self.markers.build(dets if tracks is None else tracks, header,
                                                           image.header.frame_id))
        if tracks is not None:
            with timing.stage('publish_tracks'):
                pubs['tracks'].publish(self._track_msgs.build(tracks, header, tracks.ids) if reuse
                                       else tracks_to_msg(tracks, header))
                pubs['track_velocities'].publish(track_velocities_image(tracks, header))
                if cfg['publish_tf'] and self._tf_broadcaster is not None and len(tracks):
                    self._tf_broadcaster.sendTransform(tracks_to_transforms(tracks, header, cfg['tf_prefix']))
        if cfg['publish_embedding'] and self._wanted('embedding', cfg):
            with timing.stage('publish_embedding'):
                pubs['embedding'].publish(tensor_to_image(result.embedding, header))
        if cfg['publish_tokens'] and result.tokens is not None and self._wanted('tokens', cfg):   # [N,D] -> N x D
            with timing.stage('publish_tokens'):
                pubs['tokens'].publish(tensor_to_image(result.tokens, header))
        if debug is not None:
            with timing.stage('publish_debug_image'):
                pubs['debug_image'].publish(self.bridge.cv2_to_imgmsg(debug, 'rgb8',
                                                                      header=copy_header(image.header)))
        timing.mark('stamp_to_done')
        self.budget.record(timing.ms)
        if self._stage_log is not None:
            self._stage_log.write(timing.stamp_ns, timing.ms)
        self.stats.frame_done(latency_ms, result.timings['inference_ms'])

    def _debug_image(self, rgb: np.ndarray, enc: str, K: np.ndarray, dets) -> np.ndarray:
        from ..box_ops import Box3D
        from ..runtime.draw import draw_boxes
        from ..runtime.preprocess import to_rgb
        return draw_boxes(to_rgb(rgb, enc), K, Box3D(dets.translations, dets.rotations, dets.sizes),
                          dets.class_ids, dets.scores, list(self.pipeline.labels))

    # ------------------------------------------------------------------ diagnostics
    def _publish_diagnostics(self) -> None:
        pub = self._diagnostics_publisher()
        if pub is None or self.pipeline is None:
            return
        snap = self.stats.snapshot()
        snap['stage'] = self.budget.diagnostic_values()          # stage.<name>.p50_ms / .p99_ms / .mean_ms / .count
        snap['outputs_skipped'] = {o: self.budget.skips.get(o, 0) for o in OUTPUTS[1:]}
        from .sync import IMPLEMENTATION
        msg = diagnostic_array(snap, self.get_clock().now().to_msg(), node_name=self.get_name(),
                               hardware_id=self.get_fully_qualified_name(), provider=self.pipeline.provider,
                               active=self._active,
                               extra={'synchroniser': IMPLEMENTATION, 'bridge': type(self.bridge).__name__,
                                      'not_received_keyed_by': getattr(self._image_gaps, 'keyed_by', ''),
                                      'image_input': self._image_input,
                                      'score_threshold': self.pipeline.params['score_threshold']})
        pub.publish(msg)


# ---------------------------------------------------------------------------------------------------- main
def _make_executor(kind: str):
    """The ``executor`` parameter -> an rclpy executor (the worker thread runs the model in every case)."""
    if kind == 'events':
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    if kind == 'multi_threaded':
        from rclpy.executors import MultiThreadedExecutor
        return MultiThreadedExecutor(num_threads=2)
    from rclpy.executors import SingleThreadedExecutor
    return SingleThreadedExecutor()


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``string_perception_node`` / ``python -m string_perception.ros.node``."""
    def make_executor(node):
        kind = P.validate('executor', node.get_parameter('executor').value)     # ValueError: a bad parameter
        executor = _make_executor(kind)
        if kind != 'events':
            return executor, executor.spin

        def spin_events():          # EventsExecutor.spin() holds the GIL here, so the worker thread never ran
            while rclpy.ok():
                executor.spin_once(timeout_sec=0.1)
        return executor, spin_events

    return run_lifecycle_node(StringPerceptionNode, 'string_perception', argv, make_executor,
                              lambda node: f'{READY_LINE}: provider {node.pipeline.provider}')


if __name__ == '__main__':
    sys.exit(main())

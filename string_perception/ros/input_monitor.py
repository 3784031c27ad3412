"""What the perception node checks and counts about its inputs before a frame reaches the pipeline.

:class:`InputMonitor` (one per node; :meth:`InputMonitor.start` at activate, :meth:`InputMonitor.stop` at
deactivate) runs on the executor thread and only counts (``NodeStats``) and logs (the node's per-kind throttled
warning), never blocks:

- :meth:`InputMonitor.arrived`: every input message before the synchroniser takes it: counted per input; a colour
  image's arrival time is kept for the latency budget; a colour image while depth or camera_info is silent (or
  stamped 0) counts as ``missing_<input>`` (``zero_stamp_<input>``), depth while colour is, as ``missing_image``;
  nothing synchronised for ``input_timeout`` while every input arrives unblocks the synchroniser
  (``sync_recoveries.<cause>``, ``sync_watchdog``);
- :meth:`InputMonitor.synced`: a synchronised triple: counted, then the header checks (``frame_checks``: stamps,
  layouts, frame ids, CameraInfo, the stamp gate) run before the hand-off, so a bad frame never displaces a good
  one; returns the frame's :class:`latency.FrameTiming`, or None for a refused frame (counted by kind, logged);
  frames processed with a note are counted as warnings and logged (``distortion_ignored`` once per model);
- :meth:`InputMonitor.refuse`: a bad input counted by kind and logged (also for the pipeline's pixel checks);
- :meth:`InputMonitor.missed`, :meth:`InputMonitor.bad_stamp`, :meth:`InputMonitor.bad_compressed`,
  :meth:`InputMonitor.bad_cdr`: the subscribers' callbacks for colour frames that never arrived
  (``drops.not_received``, from the publication sequence numbers), stamps the synchroniser cannot take
  (``bad_stamp``), refused compressed images and unreadable serialized images (``bad_cdr``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from ..runtime.errors import InputError
from ..runtime.plausibility import DEFAULT_LIMITS
from .diagnostics import NodeStats
from ..codec.frame_checks import (InputWatch, StampGate, check_camera_info, check_frame_ids, check_image_layout,
                           check_stamp_fields)
from .latency import ArrivalBook, FrameTiming
from ..codec.detection_msgs import stamp_to_ns
from .sequence_gaps import SequenceGaps
from .sync_watchdog import SyncWatchdog

__all__ = ['InputMonitor', 'INPUT_NAMES']

INPUT_NAMES = ('image', 'depth', 'camera_info')

INPUT_WARNING_TEXTS = {     # the log line of a frame processed with a note (stamp_ahead is built per frame)
    'stamp_reset': 'stamps jumped back by more than stamp_reset_jump: taken as a clock reset, frames are processed '
                   'again',
    'empty_frame_id': 'the colour image has an empty frame_id: processed, but the outputs name no frame (set the '
                      'driver\'s frame id)',
    'camera_info_no_size': 'CameraInfo height/width are 0: K cannot be checked against the image size (only for '
                           'plausibility); fill them in the driver or calibration file',
}


class InputMonitor:
    """``InputMonitor(node, warn)``: ``node`` gives the clock, logger and publisher counts; ``warn(kind, text)`` is
    its per-kind throttled warning. ``gate``, ``watch``, ``colour_watch``, ``sync_watch`` and ``image_gaps`` exist
    from :meth:`start` on; ``sync`` is the synchroniser the watchdog unblocks and ``image_input`` what delivers colour
    images (``inputs.subscribe_inputs``), both set by the node."""

    def __init__(self, node, warn: Callable[[str, str], None]) -> None:
        self._node = node
        self._warn = warn
        self.cfg: Mapping[str, Any] = {}
        self.stats = NodeStats()
        self.sync = None
        self.image_input = 'rclpy'                    # what delivers colour images (set by the node's wiring)
        self.gate: StampGate | None = None
        self.watch: InputWatch | None = None
        self.sync_watch: SyncWatchdog | None = None   # unblocks the synchroniser (sync_watchdog.py)
        self.colour_watch: InputWatch | None = None   # depth arriving without colour images
        self.image_gaps: SequenceGaps | None = None   # of the colour input
        self._arrivals = ArrivalBook()                # colour image stamp -> arrival, for transport vs sync wait
        self._distortion_warned: set[str] = set()     # distortion models warned about (once each)

    def now_ns(self) -> int:
        """The node clock, ns."""
        return self._node.get_clock().now().nanoseconds

    def start(self, cfg: Mapping[str, Any], stats: NodeStats, image_topic: str) -> None:
        """Activate: ``cfg`` the node's running configuration (live updates seen), ``stats`` its counters,
        ``image_topic`` the resolved colour topic whose publishers number the sequence gaps."""
        self.cfg, self.stats = cfg, stats
        self.gate = StampGate(cfg['max_stamp_future'], cfg['stamp_reset_jump'], DEFAULT_LIMITS.warn_stamp_ahead_s)
        self.watch = InputWatch('image', ('depth', 'camera_info'), cfg['input_timeout'])
        self.sync_watch = SyncWatchdog(list(INPUT_NAMES), cfg['input_timeout'])
        self.colour_watch = InputWatch('depth', ('image',), cfg['input_timeout'])
        # count_publishers does not remap: the topic comes resolved
        self.image_gaps = SequenceGaps(publisher_count=lambda: self._node.count_publishers(image_topic))

    def stop(self) -> None:
        """Deactivate: the watches are gone, so a late input callback only counts its message."""
        self.watch = self.sync_watch = self.colour_watch = None
        self.sync = None

    def set_live(self, cfg: Mapping[str, Any]) -> None:
        """The live input parameters: ``max_stamp_future``, ``stamp_reset_jump``, ``input_timeout``."""
        if self.gate is not None:
            self.gate.max_future_s, self.gate.reset_jump_s = cfg['max_stamp_future'], cfg['stamp_reset_jump']
        for watch in (self.watch, self.colour_watch, self.sync_watch):
            if watch is not None:
                watch.timeout_s = cfg['input_timeout']

    # ------------------------------------------------------------------ every message
    def arrived(self, name: str, msg=None) -> None:
        """Executor thread, every input message (``name`` one of :data:`INPUT_NAMES`); see the module docstring."""
        self.stats.count_input(name)
        stamp_ns = None if msg is None else stamp_to_ns(msg.header.stamp)
        if name == 'image' and msg is not None:
            self._arrivals.arrived(stamp_ns, self.now_ns())
        watches = [w for w in (self.watch, self.colour_watch) if w is not None]
        if not watches:
            return
        now = time.monotonic_ns()
        sync_watch = self.sync_watch
        if sync_watch is not None:
            sync_watch.arrived(name, now)
            if sync_watch.stuck(now) and self.sync is not None:
                self._unblock_sync(sync_watch)
        for watch in watches:
            watch.seen(name, now, stamp_ns)
            if name != watch.primary:
                continue
            for kind, gone in watch.problems(now):
                why = 'arrives stamped 0, so it is never paired' if kind.startswith('zero_stamp_') else 'is silent'
                arriving = 'colour images' if watch.primary == 'image' else f'{watch.primary} images'
                self.refuse(kind, f'{arriving} arrive but {gone} {why} for more than {watch.timeout_s:g} s: is its '
                            'publisher running, stamping, and on the remapped topic?')

    def _unblock_sync(self, sync_watch: SyncWatchdog) -> None:
        """Drop what blocks the synchroniser's queues (future, stale or stuck stamps), count and log why."""
        future_s = self.cfg['max_stamp_future']
        rec = sync_watch.recover(self.sync, int(self.cfg['sync_slop'] * 1e9), clock_ns=self.now_ns(),
                                 future_ns=int(future_s * 1e9))
        for cause in rec.causes:
            self.stats.sync_recovered(cause)
        self._warn('input warning (sync_stuck)', rec.reason)

    # ------------------------------------------------------------------ every synchronised frame
    def synced(self, image, depth, info, *, accept: bool) -> FrameTiming | None:
        """Executor thread, a synchronised triple: counted; when ``accept`` (active, with a worker) the header
        checks; the frame's timing when it may be processed, else None (refused: counted and logged)."""
        synced_ns = self.now_ns()
        self.stats.count_synced()
        if self.sync_watch is not None:
            self.sync_watch.synced()
        if not accept:
            return None
        try:
            for what, msg in (('colour', image), ('depth', depth), ('camera_info', info)):
                check_stamp_fields(msg.header.stamp, what)
            check_image_layout(image, 'colour')          # raw, or decoded from compressed (compressed_input)
            if self.cfg['depth_transport'] == 'raw':
                check_image_layout(depth, 'depth')
            notes = check_frame_ids(image.header.frame_id, depth.header.frame_id, info.header.frame_id)
            notes += check_camera_info(info)
            notes += self.gate.check(stamp_to_ns(image.header.stamp), self.now_ns())
        except InputError as e:
            self.refuse(e.kind, e.message)
            return None
        for kind in notes:     # processed, but said: stamp_reset, stamp_ahead, empty_frame_id, distortion_ignored, ..
            self.stats.warning(kind)
            self._input_warning(kind, image, info)
        stamp_ns = stamp_to_ns(image.header.stamp)
        return FrameTiming(stamp_ns, self._arrivals.take(stamp_ns), synced_ns, self.now_ns)

    def _input_warning(self, kind: str, image, info) -> None:
        """The throttled log line of a processed-with-a-warning frame (``distortion_ignored``: once per model)."""
        if kind == 'distortion_ignored':
            model = str(info.distortion_model)
            if model in self._distortion_warned:
                return
            self._distortion_warned.add(model)
            self._node.get_logger().warning(
                f'input warning (distortion_ignored): CameraInfo distortion model {model!r} with non-zero '
                'coefficients: the node never undistorts, the boxes assume a pinhole camera with K (rectify the '
                'images first, e.g. image_proc); said once per model (counted in /diagnostics; node continues)')
            return
        if kind == 'stamp_ahead':
            ahead = (stamp_to_ns(image.header.stamp) - self.now_ns()) * 1e-9
            text = (f'colour image stamped {ahead:.3f} s ahead of the node clock (processed; beyond '
                    f'{DEFAULT_LIMITS.warn_stamp_ahead_s:g} s the camera and node clocks disagree: synchronise them, '
                    'e.g. chrony/PTP)')
        else:
            text = INPUT_WARNING_TEXTS.get(kind, 'frame processed')
        self._warn(f'input warning ({kind})', text)

    # ------------------------------------------------------------------ bad inputs
    def refuse(self, kind: str, message: str) -> None:
        """A frame refused as bad input of ``kind`` (``runtime.errors.InputError.kind``, ``conversion``, ...):
        counted in ``bad_inputs.<kind>``, logged as ``bad input (<kind>)`` (throttled per kind)."""
        self.stats.bad_input(kind)
        self._warn(f'bad input ({kind})', message)

    def missed(self, info) -> None:
        """Executor thread, every colour message's MessageInfo: frames of its publisher that never arrived."""
        missed = self.image_gaps.missed(info)
        if missed:
            self.stats.drop('not_received', missed)
            qos = self.cfg['image_qos_reliability']
            self._warn('dropped (not_received)', f'{missed} colour frame(s) sent by the publisher never reached this '
                       'node: overwritten in the input queue while a frame was processed (the node is slower than '
                       f'the camera), or lost in transport{" (best-effort input QoS)" if qos != "reliable" else ""}: '
                       'DDS drops frames it cannot carry, e.g. a 3840x2160 rgb8 frame (24.9 MB) does not fit Fast '
                       "DDS' default 16 MiB shared-memory segment; use image_qos_reliability:=reliable or a larger "
                       'segment')

    def bad_stamp(self, reason: str) -> None:
        """An input whose header stamp the synchroniser would refuse (rclpy.time.Time.from_msg: negative):
        counted as ``bad_stamp``, logged, not passed on (it would raise in the executor)."""
        self.refuse('bad_stamp', f'a header stamp the synchroniser cannot take ({reason})')

    def bad_compressed(self, error: Exception) -> None:
        """A compressed colour image refused from its header (``image_too_large`` / ``corrupt_image``) or that could
        not be decoded (``conversion``), by the compressed_input fallback."""
        self.refuse(getattr(error, 'kind', 'conversion'), f'compressed image: {error}')

    def bad_cdr(self, error: Exception) -> None:
        """A raw (serialized) image that ``image_cdr`` could not read: counted as ``bad_cdr``, logged."""
        self.refuse('bad_cdr', str(error))

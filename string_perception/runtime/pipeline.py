"""The one code path shared by the ROS node, the offline bag evaluator and the demo:
camera frame -> :func:`prepare_inputs` -> :class:`OnnxModel` -> :func:`decode_detections` -> :class:`Tracker`.

>>> pipe = Pipeline('models/default.onnx', providers=('CUDAExecutionProvider', 'CPUExecutionProvider'))
>>> result = pipe(rgb, depth, K)                      # rgb uint8 [h,w,3], depth uint16 mm | float32 m, K [3,3]
>>> result.detections.translations, result.embedding, result.timings['inference_ms']
>>> result.tokens                                      # float32 [N,D] when the model has a tokens output, else None
>>> pipe = Pipeline(path, tracking=TrackerConfig())     # tracking on: stateful per stream
>>> pipe(rgb, depth, K, stamp_s=t).tracks              # Tracks (ids, filtered boxes, velocities); reset_tracking()
>>> pipe = Pipeline(path, tiling=parse_tiling('2x2'))  # whole frame + 2x2 overlapping windows, one merged box list
>>> pipe = Pipeline(path, flip_tta=True)                # the frame and its mirror image, averaged per token (.flip_tta)

Errors: a bad frame raises :class:`InputError` (``kind`` for per-kind counters) and leaves the pipeline usable
for the next frame; a frame with no valid depth is processed and reported in ``result.warnings``. Model faults
surface as :class:`ModelLoadError` from the constructor and :class:`InferenceError` from a call.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .errors import InputError
from .flip_tta import flip_inputs, fuse_flip_passes
from .onnx_runner import DEFAULT_PROVIDERS, TOKENS_OUTPUT, OnnxModel
from .postprocess import Detections, check_decode_params, decode_detections
from .preprocess import RESIZE_MODES, ModelInputs, prepare_inputs, stack_inputs, to_rgb
from .tile_merge import merge_tiled
from .tiling import TilingConfig, inner_borders, merge_candidates, window_keep, window_layout
from .tracking import Tracker, TrackerConfig, Tracks

__all__ = ['Pipeline', 'PipelineResult']


@dataclass(frozen=True)
class PipelineResult:
    """What one frame gives."""

    detections: Detections
    embedding: np.ndarray                 # float32 [E] policy embedding
    timings: dict[str, float]             # preprocess_ms, inference_ms, postprocess_ms, total_ms (per frame)
    input_hw: tuple[int, int]             # model input (H, W)
    warnings: tuple[str, ...] = ()        # warning kinds, e.g. 'no_valid_depth'
    intrinsics: np.ndarray | None = None  # float32 [3,3] K of the model input (after crop/resize)
    crop_xywh: tuple[int, int, int, int] = (0, 0, 0, 0)   # crop of the source colour frame
    valid_depth_fraction: float = 1.0
    tokens: np.ndarray | None = None      # float32 [N,D] encoder tokens, when the model has that output (tiled:
                                          # [P*N,D], the passes in order, full frame first; token_indices index it)
    tracks: Tracks | None = None          # confirmed tracks after this frame, when tracking is on


class Pipeline:
    """``Pipeline(model_path, providers, score_threshold=0.3, nms_iou=0.3, max_detections=50, pre_nms_top_k=200,
    max_depth_m=None, tracking=None, nms_class_agnostic=False, multi_label=False, resize_mode='pad',
    tiling=None, flip_tta=False, **OnnxModel kwargs)``; call it on a frame, or :meth:`run_batch` on many.
    ``tracking``: a :class:`TrackerConfig` adds the tracking stage (one stream per pipeline; frames in order).
    ``tiling``: a :class:`~.tiling.TilingConfig` runs the model on the whole frame (``resize_mode``) plus its
    windows and merges the candidates of every pass in one decoding (:mod:`.tiling`); the embedding and
    ``intrinsics`` / ``crop_xywh`` are the full-frame pass's, ``inference_ms`` is all passes together.
    ``resize_mode``: ``'pad'`` looks at the whole camera frame (tokens in the padding never give a detection),
    ``'crop'`` at the largest centred crop with the model's aspect ratio (``preprocess``).
    ``flip_tta``: the frame (with tiling: its full-frame pass) also runs mirrored left-right and each token's two
    predictions are averaged before decoding (:mod:`.flip_tta`); ``inference_ms`` counts both passes."""

    def __init__(self, model_path, providers: Sequence = DEFAULT_PROVIDERS, *, score_threshold: float = 0.3,
                 nms_iou: float = 0.3, max_detections: int = 50, pre_nms_top_k: int = 200,
                 max_depth_m: float | None = None, model: OnnxModel | None = None,
                 tracking: TrackerConfig | None = None, nms_class_agnostic: bool = False, multi_label: bool = False,
                 resize_mode: str = 'pad', tiling: TilingConfig | None = None, flip_tta: bool = False,
                 **model_kwargs):
        self.set_params(score_threshold=score_threshold, nms_iou=nms_iou, max_detections=max_detections,
                        pre_nms_top_k=pre_nms_top_k, max_depth_m=max_depth_m, nms_class_agnostic=nms_class_agnostic,
                        multi_label=multi_label, resize_mode=resize_mode, flip_tta=flip_tta)
        self.set_tracking(tracking)
        self.set_tiling(tiling)
        self.model = model if model is not None else OnnxModel(model_path, providers, **model_kwargs)

    @classmethod
    def from_model(cls, model: OnnxModel, **params) -> 'Pipeline':
        """Wrap an already loaded :class:`OnnxModel` (shares its session)."""
        return cls(model.path, model=model, **params)

    def set_params(self, *, score_threshold: float | None = None, nms_iou: float | None = None,
                   max_detections: int | None = None, pre_nms_top_k: int | None = None,
                   max_depth_m: float | None | str = 'unchanged', nms_class_agnostic: bool | None = None,
                   multi_label: bool | None = None, resize_mode: str | None = None,
                   flip_tta: bool | None = None) -> None:
        """Change postprocess/preprocess parameters (validated together; ``ValueError`` leaves them unchanged)."""
        cur = getattr(self, '_params', {'nms_class_agnostic': False, 'multi_label': False, 'resize_mode': 'pad',
                                        'flip_tta': False})
        new = dict(cur)
        if resize_mode is not None:
            if resize_mode not in RESIZE_MODES:
                raise ValueError(f'resize_mode must be one of {RESIZE_MODES}, got {resize_mode!r}')
            new['resize_mode'] = resize_mode
        for k, v in (('nms_class_agnostic', nms_class_agnostic), ('multi_label', multi_label), ('flip_tta', flip_tta)):
            if v is not None:
                new[k] = bool(v)
        for k, v in (('score_threshold', score_threshold), ('nms_iou', nms_iou),
                     ('max_detections', max_detections), ('pre_nms_top_k', pre_nms_top_k)):
            if v is not None:
                new[k] = v
        check_decode_params(new['score_threshold'], new['nms_iou'], new['max_detections'], new['pre_nms_top_k'])
        if max_depth_m != 'unchanged':
            if max_depth_m is not None and not (float(max_depth_m) > 0):
                raise ValueError(f'max_depth_m must be > 0 or None, got {max_depth_m}')
            new['max_depth_m'] = None if max_depth_m is None else float(max_depth_m)
        self._params = new

    def set_tracking(self, config: TrackerConfig | None) -> None:
        """Turn tracking on with ``config`` (a fresh tracker) or off (None)."""
        self.tracker = Tracker(config) if config is not None else None

    def set_tiling(self, config: TilingConfig | None) -> None:
        """Tiled inference on with ``config`` or off (None)."""
        if config is not None and not isinstance(config, TilingConfig):
            raise TypeError(f'tiling must be a TilingConfig or None, got {type(config).__name__}')
        self.tiling = config

    def reset_tracking(self) -> None:
        """Start a new stream: forget every track (no-op without tracking)."""
        if self.tracker is not None:
            self.tracker.reset()

    def _track(self, dets: Detections, stamp_s: float | None) -> tuple[Tracks | None, float]:
        """(tracks, milliseconds spent) for one frame's detections."""
        if self.tracker is None:
            return None, 0.0
        t0 = time.perf_counter()
        tracks = self.tracker.update(dets, stamp_s)
        return tracks, (time.perf_counter() - t0) * 1e3

    def _timings(self, **stages: float) -> dict[str, float]:
        """Per-stage milliseconds plus ``total_ms`` (``tracking_ms`` only when tracking is on)."""
        if self.tracker is None:
            stages.pop('tracking_ms', None)
        return {**stages, 'total_ms': sum(stages.values())}

    @property
    def params(self) -> dict:
        return dict(self._params)

    @property
    def labels(self) -> tuple[str, ...]:
        return self.model.labels

    @property
    def input_hw(self) -> tuple[int, int]:
        return self.model.input_hw

    @property
    def provider(self) -> str:
        return self.model.provider

    # ------------------------------------------------------------------ one frame
    def preprocess(self, rgb, depth, K, *, encoding: str = 'rgb8', depth_encoding: str | None = None,
                   intrinsics_hw=None) -> ModelInputs:
        """Colour conversion (``encoding``: rgb8 / bgr8 / rgba8 / bgra8 / mono8) + :func:`prepare_inputs`
        (``depth_encoding``: 16UC1 / mono16 / 32FC1, checked against the dtype when given)."""
        return prepare_inputs(to_rgb(rgb, encoding), depth, K, self.input_hw, max_depth_m=self._params['max_depth_m'],
                              intrinsics_hw=intrinsics_hw, depth_encoding=depth_encoding,
                              resize_mode=self._params['resize_mode'])

    def _frame_tokens(self, inputs: ModelInputs, num_tokens: int) -> np.ndarray | None:
        """Indices of the tokens that image the frame (padding dropped), or None for all of them."""
        if inputs.crop_xywh[0] < 0 or inputs.crop_xywh[1] < 0:                    # padded: drop padding tokens
            in_frame = inputs.token_in_frame(self.model.metadata.patch_size)      # [N']
            if in_frame.shape[0] == num_tokens and not in_frame.all():
                return np.flatnonzero(in_frame)
        return None

    def _decode_candidates(self, boxes, logits, keep: np.ndarray | None, top_k_factor: int = 1,
                           agnostic: bool = False) -> Detections:
        """Candidates ``boxes[N,12]``, ``logits[N,C]`` -> detections (``keep``: their token indices, None =
        0..N-1; ``pre_nms_top_k`` is multiplied by ``top_k_factor``, the number of passes; ``agnostic``: class-agnostic
        NMS whatever ``nms_class_agnostic`` says)."""
        p = self._params
        dets = decode_detections(boxes, logits, self.labels,
                                 score_threshold=p['score_threshold'], nms_iou=p['nms_iou'],
                                 max_detections=p['max_detections'], pre_nms_top_k=p['pre_nms_top_k'] * top_k_factor,
                                 class_agnostic=p['nms_class_agnostic'] or agnostic, multi_label=p['multi_label'])
        if keep is not None and len(dets):
            dets = dataclasses.replace(dets, token_indices=keep[dets.token_indices])
        return dets

    def _decode(self, outputs: dict[str, np.ndarray], i: int, inputs: ModelInputs) -> Detections:
        """Frame ``i`` of a batch's outputs -> detections, from the tokens that image the frame only."""
        boxes, logits = outputs['boxes'][i], outputs['logits'][i]                  # [N,12], [N,C]
        keep = self._frame_tokens(inputs, boxes.shape[0])
        if keep is not None:
            boxes, logits = boxes[keep], logits[keep]
        return self._decode_candidates(boxes, logits, keep)

    def _flipped(self, passes: list[ModelInputs]) -> list[ModelInputs]:
        """``passes`` with pass 0 mirrored inserted as pass 1 when ``flip_tta`` is on."""
        return passes[:1] + [flip_inputs(passes[0])] + passes[1:] if self._params['flip_tta'] else passes

    def _fused(self, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs of :meth:`_flipped` passes with passes 0 and 1 fused (no-op without ``flip_tta``)."""
        if not self._params['flip_tta']:
            return outputs
        p = self.model.metadata.patch_size
        return fuse_flip_passes(outputs, (self.input_hw[0] // p, self.input_hw[1] // p))

    # ------------------------------------------------------------------ tiled inference
    def _run_passes(self, passes: Sequence[ModelInputs], batch: bool = True) -> dict[str, np.ndarray]:
        """Every pass through the model: one call when ``batch`` and the model takes that batch, else one call per
        pass; outputs stacked ``[P,...]``."""
        static = self.model._static_batch
        if len(passes) == 1:
            return self.model.run(**passes[0].feed())
        if batch and static in (None, len(passes)):
            return self.model.run(**stack_inputs(passes))
        runs = [self.model.run(**x.feed()) for x in passes]
        return {k: np.concatenate([r[k] for r in runs], axis=0) for k in runs[0]}

    def _tiled(self, rgb, depth, K, full: ModelInputs, depth_encoding: str | None,
               t0: float) -> tuple[Detections, dict[str, np.ndarray], dict[str, float]]:
        """The tiled frame (:mod:`.tiling`): detections of the merged passes, the passes' outputs (full frame at
        0) and the stage timings (``t0``: when preprocessing began)."""
        cfg = self.tiling
        h, w = full.source_hw
        windows = window_layout(h, w, self.input_hw, cfg.grid, cfg.overlap)
        passes = [full] + [prepare_inputs(rgb, depth, K, self.input_hw, max_depth_m=self._params['max_depth_m'],
                                          depth_encoding=depth_encoding, window_xywh=win) for win in windows]
        t1 = time.perf_counter()
        outputs = self._fused(self._run_passes(self._flipped(passes), cfg.batch))  # boxes [P,N,12], logits [P,N,C]
        t2 = time.perf_counter()
        n = outputs['boxes'].shape[1]
        full_tokens = self._frame_tokens(full, n)                                 # [n'] or None = all
        keeps: list[np.ndarray | None] = [full_tokens if cfg.full_frame_boxes else np.zeros(0, int)]
        for j, win in enumerate(windows, start=1):
            keep = window_keep(outputs['boxes'][j], passes[j].intrinsics[0], self.input_hw,
                               inner_borders(win, h, w), cfg.margin)              # [N]
            keeps.append(None if keep.all() else np.flatnonzero(keep))
        if cfg.merge.active:                                                      # [M,12], [M,C], [M]
            boxes, logits, index = merge_tiled(outputs['boxes'], outputs['logits'], keeps, full_tokens, cfg.merge)
        else:
            boxes, logits, index = merge_candidates(outputs['boxes'], outputs['logits'], keeps)
        dets = self._decode_candidates(boxes, logits, index, top_k_factor=len(passes), agnostic=cfg.agnostic)
        t3 = time.perf_counter()
        tokens = outputs.get(TOKENS_OUTPUT)
        if tokens is not None:                                                    # [P,N,D] -> [1,P*N,D]
            outputs = {**outputs, TOKENS_OUTPUT: tokens.reshape(1, -1, tokens.shape[-1])}
        return dets, outputs, {'preprocess_ms': (t1 - t0) * 1e3, 'inference_ms': (t2 - t1) * 1e3,
                               'postprocess_ms': (t3 - t2) * 1e3}

    def __call__(self, rgb, depth, K, *, encoding: str = 'rgb8', depth_encoding: str | None = None,
                 intrinsics_hw=None, stamp_s: float | None = None) -> PipelineResult:
        """One frame: ``rgb`` ([h,w,3] in ``encoding``), ``depth`` (uint16 mm | float32 m), ``K`` [3,3]
        (``intrinsics_hw``: CameraInfo (height, width), checked against the colour size when given; ``stamp_s``:
        the image stamp in seconds, for the tracker's time step)."""
        t0 = time.perf_counter()
        inputs = self.preprocess(rgb, depth, K, encoding=encoding, depth_encoding=depth_encoding,
                                 intrinsics_hw=intrinsics_hw)
        if self.tiling is not None:
            dets, outputs, stages = self._tiled(to_rgb(rgb, encoding), depth, K, inputs, depth_encoding, t0)
            tracks, track_ms = self._track(dets, stamp_s)
            return self._result(inputs, dets, outputs, 0, self._timings(**stages, tracking_ms=track_ms), tracks)
        t1 = time.perf_counter()
        outputs = self._fused(self._run_passes(self._flipped([inputs])))         # boxes [1,N,12], logits [1,N,C]
        t2 = time.perf_counter()
        dets = self._decode(outputs, 0, inputs)
        t3 = time.perf_counter()
        tracks, track_ms = self._track(dets, stamp_s)
        return self._result(inputs, dets, outputs, 0,
                            self._timings(preprocess_ms=(t1 - t0) * 1e3, inference_ms=(t2 - t1) * 1e3,
                                          postprocess_ms=(t3 - t2) * 1e3, tracking_ms=track_ms), tracks)

    def _result(self, inputs: ModelInputs, dets: Detections, outputs: dict[str, np.ndarray], i: int,
                timings, tracks: Tracks | None = None) -> PipelineResult:
        """Frame `i` of a batch's `outputs` (copies, so a result never pins the batch's arrays)."""
        tokens = outputs.get(TOKENS_OUTPUT)
        return PipelineResult(detections=dets, embedding=np.array(outputs['embedding'][i], dtype=np.float32),  # [E]
                              timings=timings, input_hw=self.input_hw, warnings=inputs.warnings,
                              intrinsics=inputs.intrinsics[0].copy(), crop_xywh=inputs.crop_xywh,
                              valid_depth_fraction=inputs.valid_depth_fraction,
                              tokens=None if tokens is None else np.array(tokens[i], dtype=np.float32),  # [N,D]
                              tracks=tracks)

    # ------------------------------------------------------------------ many frames (evaluator)
    def run_batch(self, frames: Iterable[Sequence], batch_size: int = 8, on_error: str = 'raise',
                  stamps: Sequence[float] | None = None) -> list[PipelineResult | InputError]:
        """Frames ``(rgb, depth, K)`` or ``(rgb, depth, K, encoding)`` -> one result per frame, in order.

        Frames are preprocessed one by one and run ``batch_size`` at a time (1 for a fixed-batch model); the
        results equal calling the pipeline on each frame. With tiling or ``flip_tta`` each frame is one call (its
        passes batched). Timings are per frame (inference = batch time / B).
        ``on_error='raise'`` re-raises a frame's :class:`InputError`; ``'return'`` puts it in that frame's slot.
        With tracking, frames are tracked in order (``stamps``: seconds per frame, else ``default_dt_s`` apart).
        """
        if on_error not in ('raise', 'return'):
            raise ValueError(f"on_error must be 'raise' or 'return', got {on_error!r}")
        if int(batch_size) < 1:
            raise ValueError(f'batch_size must be >= 1, got {batch_size}')
        if self.model._static_batch is not None:
            batch_size = self.model._static_batch
        if self.tiling is not None or self._params['flip_tta']:
            return self._run_frames_one_by_one(frames, on_error, stamps)
        results: list[PipelineResult | InputError | None] = []
        pending: list[tuple[int, ModelInputs, float]] = []

        def flush():
            if not pending:
                return
            t1 = time.perf_counter()
            outputs = self.model.run(**stack_inputs([x for _, x, _ in pending]))
            infer_ms = (time.perf_counter() - t1) * 1e3 / len(pending)
            for j, (slot, inputs, pre_ms) in enumerate(pending):
                t2 = time.perf_counter()
                dets = self._decode(outputs, j, inputs)
                post_ms = (time.perf_counter() - t2) * 1e3
                tracks, track_ms = self._track(dets, None if stamps is None else stamps[slot])
                results[slot] = self._result(inputs, dets, outputs, j,
                                             {**self._timings(preprocess_ms=pre_ms, inference_ms=infer_ms,
                                                              postprocess_ms=post_ms, tracking_ms=track_ms),
                                              'batch_size': float(len(pending))}, tracks)
            pending.clear()

        for frame in frames:
            rgb, depth, K = frame[:3]
            encoding = frame[3] if len(frame) > 3 else 'rgb8'
            results.append(None)
            t0 = time.perf_counter()
            try:
                inputs = self.preprocess(rgb, depth, K, encoding=encoding)
            except InputError as e:
                if on_error == 'raise':
                    raise
                results[-1] = e
                continue
            pending.append((len(results) - 1, inputs, (time.perf_counter() - t0) * 1e3))
            if len(pending) >= batch_size:
                flush()
        flush()
        return results  # type: ignore[return-value]

    def _run_frames_one_by_one(self, frames: Iterable[Sequence], on_error: str,
                               stamps: Sequence[float] | None) -> list[PipelineResult | InputError]:
        """:meth:`run_batch` with tiling or flip_tta: one pipeline call per frame, in order."""
        results: list[PipelineResult | InputError] = []
        for i, frame in enumerate(frames):
            try:
                results.append(self(*frame[:3], encoding=frame[3] if len(frame) > 3 else 'rgb8',
                                    stamp_s=None if stamps is None else stamps[i]))
            except InputError as e:
                if on_error == 'raise':
                    raise
                results.append(e)
        return results

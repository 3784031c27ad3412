"""Evaluate a model on a rosbag2 recording offline (``string-perception-eval-bag``): no ROS install needed.

    string-perception-eval-bag data/sample_recording --model models/vitd_tiny_cayley.onnx --out runs/bag_eval
    string-perception-eval-bag my_bag/ --model m.onnx --out runs/x --image-topic /cam/color/image_raw/compressed \\
        --depth-topic /cam/aligned_depth_to_color/image_raw --output-bag

Every synchronised frame of the bag (sqlite3 or mcap; raw or compressed colour; 16UC1 or 32FC1 depth; see
``bags/reader.py``) goes through the node's own pipeline (``runtime.Pipeline``: same preprocessing, ONNX model
and decoding). With ground truth on ``/ground_truth/detections`` the predictions are scored with the held-out
evaluator's functions (``evaluation/``: ``evaluate_predictions``, ``headline``, ``write_figures``), so
both give the same numbers on the same frames. Writes to ``--out``: ``metrics.json`` (average best 3D IoU,
AP3D@0.25/0.5 overall and per class, the same at the node's operating threshold, latency percentiles, what
could not be used), ``iou_hist.png``, ``pr_curve_25.png``, ``pr_curve_50.png``, ``latency_hist.png``, annotated
frames ``frame_<index>.png`` and, with ``--output-bag``, a copy of the bag with the node's ``detections`` and
``markers`` topics added (for RViz; detections carry the track ids the node would give). Frames are tracked as the
node tracks them (``runtime.tracking`` on the detections at the operating threshold, bag stamps as time), and
``metrics.json`` reports the confirmed tracks (``tracking``). Exit status: 0, 1 when no frame could be evaluated, 2 for a bad bag or
arguments.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from ..evaluation import evaluate as E
from ..training.inference import detections_to_arrays, evaluate_predictions, headline
from ..node_params import defaults, effective_score_threshold, tracker_config
from .reader import NODE_SLOP_S, BagError, BagFrameReader
from .topics import DEFAULT_TOPICS, CameraTopics

__all__ = ['BagEvaluation', 'evaluate_bag', 'main', 'build_parser', 'legible_scale']

_EVAL_DEFAULTS = E.build_parser()      # decoding / drawing defaults shared with evaluation/evaluate.py


def _default(name: str):
    return _EVAL_DEFAULTS.get_default(name)


@dataclasses.dataclass
class BagEvaluation:
    """What one run over a bag gives (``preds``/``gts`` in the metrics format, frames with ground truth only)."""

    report: Any                                  # reader.ReadReport
    preds: list[dict] = dataclasses.field(default_factory=list)
    gts: list[dict] = dataclasses.field(default_factory=list)
    indices: list[int] = dataclasses.field(default_factory=list)        # bag frame index of each scored frame
    timings: list[dict] = dataclasses.field(default_factory=list)       # per evaluated frame (all frames)
    drawn: dict[int, Any] = dataclasses.field(default_factory=dict)     # index -> SimpleNamespace(rgb, K, pred, gt)
    outputs: Any = None                                                 # output_bag.NodeOutputs or None
    summary: dict | None = None                                         # evaluate_predictions(...) or None
    operating_threshold: float = 0.0
    labels: tuple[str, ...] = ()
    provider: str = ''
    track_lengths: dict[int, int] = dataclasses.field(default_factory=dict)   # track id -> frames it was matched

    @property
    def frames_evaluated(self) -> int:
        return len(self.timings)


def evaluate_bag(bag: str | Path, pipeline, *, topics: CameraTopics = DEFAULT_TOPICS, slop_s: float = NODE_SLOP_S,
                 intrinsics=None, operating_threshold: float | None = None, num_draw: int = 0,
                 max_frames: int | None = None, output_bag: bool = False, progress: bool = False,
                 tracking: Any = 'default') -> BagEvaluation:
    """Run ``pipeline`` (a ``runtime.Pipeline``, decoding at a low threshold for AP) over the bag's frames.

    ``operating_threshold``: the node's threshold (default: the model's recommended one, as the node picks it);
    reported next to the all-scores metrics and used for the output bag's detections. ``tracking``: a
    ``TrackerConfig`` (``'default'``: the node's defaults; None: off) run on the detections at the operating
    threshold, a fresh tracker per bag. Raises :class:`BagError`.
    """
    from ..runtime.errors import InputError
    from ..runtime.preprocess import to_rgb
    if operating_threshold is None:
        operating_threshold = effective_score_threshold(-1.0, pipeline.model.metadata)
    res = BagEvaluation(report=None, operating_threshold=float(operating_threshold), labels=tuple(pipeline.labels),
                        provider=pipeline.provider)
    if tracking == 'default':
        tracking = tracker_config(defaults())
    pipeline.set_tracking(None if tracking is None else tracking.replace(min_score=res.operating_threshold))
    if output_bag:
        from .output_bag import NodeOutputs
        res.outputs = NodeOutputs()
    with BagFrameReader(bag, topics=topics, slop_s=slop_s, intrinsics=intrinsics, class_names=res.labels) as reader:
        res.report = reader.report
        frames = iter(reader)
        total = len(reader) if max_frames is None else min(len(reader), max_frames)
        if progress:
            from tqdm import tqdm
            frames = tqdm(frames, total=total, desc='eval', unit='frame', dynamic_ncols=True, file=sys.stderr)
        for n, frame in enumerate(frames):
            if n >= total:
                break
            try:
                out = pipeline(frame.rgb, frame.depth, frame.K, encoding=frame.encoding,
                               depth_encoding=frame.depth_encoding, intrinsics_hw=frame.info_hw,
                               stamp_s=frame.stamp_ns * 1e-9)
            except InputError as e:
                reader.report.skip('bad_input', f'frame {frame.index}: {e.kind}: {e.message}')
                continue
            res.timings.append(dict(out.timings))
            pred = detections_to_arrays(out.detections)
            if frame.ground_truth is not None:
                res.preds.append(pred)
                res.gts.append({'params': frame.ground_truth['params'], 'labels': frame.ground_truth['labels']})
                res.indices.append(frame.index)
            if len(res.drawn) < num_draw:
                res.drawn[frame.index] = SimpleNamespace(rgb=to_rgb(frame.rgb, frame.encoding), K=frame.K, pred=pred,
                                                         gt=frame.ground_truth)
            ids = None if out.tracks is None else out.tracks.detection_ids              # [M] track id or -1
            for tid in (() if ids is None else ids[ids >= 0]):
                res.track_lengths[int(tid)] = res.track_lengths.get(int(tid), 0) + 1
            if res.outputs is not None:
                published = _at_threshold(out.detections, res.operating_threshold)
                res.outputs.add(published, frame.stamp_ns, frame.frame_id,
                                frame.log_time_ns + int(out.timings['total_ms'] * 1e6),
                                ids=None if ids is None else ids[:len(published)])
    if res.gts:
        res.summary = evaluate_predictions(res.preds, res.gts, res.labels,
                                           operating_threshold=res.operating_threshold, include_curves=True)
    return res


def _at_threshold(dets, threshold: float):
    """The detections scoring >= ``threshold`` (they are sorted by score): what the node would publish."""
    k = int(np.count_nonzero(np.asarray(dets.scores) >= threshold))
    return dataclasses.replace(dets, **{f: getattr(dets, f)[:k] for f in (
        'translations', 'rotations', 'quaternions_xyzw', 'sizes', 'class_ids', 'scores', 'token_indices')},
        class_names=list(dets.class_names)[:k])


def latency_stats(timings: Sequence[dict]) -> dict[str, dict[str, float]]:
    """Per timing key: mean and p50/p90/p99 in milliseconds."""
    out = {}
    for key in ('total_ms', 'preprocess_ms', 'inference_ms', 'postprocess_ms'):
        v = np.array([t[key] for t in timings if key in t], np.float64)
        if len(v):
            out[key] = {'mean': float(v.mean()), **{f'p{q}': float(np.percentile(v, q)) for q in (50, 90, 99)}}
    return out


def write_outputs(res: BagEvaluation, out: Path, draw_threshold: float | None) -> list[Path]:
    """Figures (the evaluator's IoU histogram and PR curves when there is ground truth, a latency histogram) and
    annotated frames (true boxes green, predicted red); returns the paths written."""
    import cv2

    from ..evaluation import plots
    out.mkdir(parents=True, exist_ok=True)
    thr = res.operating_threshold if draw_threshold is None else draw_threshold
    written = [plots.plot_latency_histogram([t['total_ms'] for t in res.timings], out / 'latency_hist.png',
                                            title=f'Pipeline latency per frame ({res.provider})')]
    if res.summary is not None:
        written += E.write_figures(out, {'preds': res.preds, 'gts': res.gts, 'seeds': res.indices}, res.summary,
                                   None, res.labels, num_draw=0, draw_threshold=thr)
    for index, d in sorted(res.drawn.items()):
        img = E.annotate_frame(d.rgb, d.K, d.pred, d.gt, res.labels, thr, scale=legible_scale(d.rgb))
        path = out / f'frame_{index}.png'
        cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
        written.append(path)
    return written


def legible_scale(rgb: np.ndarray) -> int:
    """Upscaling that makes small frames legible (>= ~480 px tall), as the evaluator does for 128x128."""
    return max(1, int(np.ceil(480 / max(1, rgb.shape[0]))))


def metrics_report(res: BagEvaluation, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    summary = dict(res.summary) if res.summary is not None else None
    if summary is not None:
        summary.pop('pr_curves', None)
    return {
        'bag': str(args.bag), 'model': str(args.model), 'provider': res.provider, 'labels': list(res.labels),
        'decode': {'score_threshold': args.score_threshold, 'nms_iou': args.nms_iou,
                   'max_detections': args.max_detections},
        'operating_threshold': res.operating_threshold,
        'frames_evaluated': res.frames_evaluated, 'frames_scored': len(res.gts),
        'num_objects': int(sum(len(g['labels']) for g in res.gts)),
        'headline': headline(res.summary) if res.summary is not None else None,
        'metrics': summary, 'latency_ms': latency_stats(res.timings), 'read': res.report.to_dict(),
        'tracking': {'confirmed_tracks': len(res.track_lengths),
                     'mean_track_frames': float(np.mean(list(res.track_lengths.values()))) if res.track_lengths
                     else 0.0},
        'seconds': seconds,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-eval-bag', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('bag', help='rosbag2 folder (sqlite3 or mcap), or a .db3 / .mcap file')
    p.add_argument('--model', required=True, help='ONNX model (docs/ARCHITECTURE.md contract)')
    p.add_argument('--out', default='runs/bag_eval', help='output directory')
    p.add_argument('--output-bag', nargs='?', const='', default=None, metavar='PATH',
                   help='also write the bag with the detections and markers topics added (default <out>/bag)')
    p.add_argument('--output-storage', choices=('sqlite3', 'mcap'), default=None,
                   help='storage of the output bag (default: that of the input)')
    for role, flag in (('image', 'image-topic'), ('depth', 'depth-topic'), ('camera_info', 'camera-info-topic'),
                       ('ground_truth', 'gt-topic')):
        p.add_argument(f'--{flag}', dest=role, default=getattr(DEFAULT_TOPICS, role),
                       help=f'{role.replace("_", " ")} topic (auto-detected when absent)')
    p.add_argument('--slop', type=float, default=NODE_SLOP_S, help="stamp matching tolerance (s; the node's)")
    p.add_argument('--intrinsics', type=float, nargs=4, metavar=('FX', 'FY', 'CX', 'CY'),
                   help='colour intrinsics for bags without CameraInfo')
    p.add_argument('--score-threshold', type=float, default=_default('score_threshold'),
                   help='decoding threshold (low, so the PR curve covers the whole range)')
    p.add_argument('--operating-threshold', type=float, default=None,
                   help="the node's threshold: reported separately, used for the output bag (default: the model's)")
    p.add_argument('--nms-iou', type=float, default=_default('nms_iou'))
    p.add_argument('--max-detections', type=int, default=_default('max_detections'))
    p.add_argument('--resize-mode', choices=('pad', 'crop'), default='pad',
                   help="the node's resize_mode: pad (the whole frame) or crop (the largest centred crop)")
    p.add_argument('--num-draw', type=int, default=_default('num_draw'), help='annotated frames to write')
    p.add_argument('--draw-threshold', type=float, default=None,
                   help='score of the boxes drawn (default: the operating threshold)')
    p.add_argument('--max-frames', type=int, default=None, help='evaluate only the first N frames')
    p.add_argument('--providers', nargs='+', default=None,
                   help='ONNX Runtime execution providers, best first (default: the runtime\'s)')
    p.add_argument('--no-progress', action='store_true')
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ..runtime import Pipeline
    from ..runtime.errors import ModelLoadError
    t0 = time.perf_counter()
    out = Path(args.out)
    kw = {} if args.providers is None else {'providers': tuple(args.providers)}
    try:
        pipe = Pipeline(args.model, score_threshold=args.score_threshold, nms_iou=args.nms_iou,
                        max_detections=args.max_detections, resize_mode=args.resize_mode, **kw)
    except (ModelLoadError, FileNotFoundError, ValueError) as e:
        print(f'string-perception-eval-bag: cannot load the model {args.model}: {e}', file=sys.stderr)
        return 2
    topics = CameraTopics(image=args.image, depth=args.depth, camera_info=args.camera_info,
                          ground_truth=args.ground_truth)
    try:
        res = evaluate_bag(args.bag, pipe, topics=topics, slop_s=args.slop, intrinsics=args.intrinsics,
                           operating_threshold=args.operating_threshold, num_draw=args.num_draw,
                           max_frames=args.max_frames, output_bag=args.output_bag is not None,
                           progress=not args.no_progress)
    except (BagError, ImportError) as e:
        print(f'string-perception-eval-bag: {e}', file=sys.stderr)
        return 2
    print('\n'.join(res.report.lines()))
    if not res.frames_evaluated:
        print('string-perception-eval-bag: no frame of the bag could be evaluated (see above)', file=sys.stderr)
        return 1
    written = write_outputs(res, out, args.draw_threshold)
    report = metrics_report(res, args, time.perf_counter() - t0)
    if args.output_bag is not None:
        from .output_bag import write_output_bag
        dst = Path(args.output_bag) if args.output_bag else out / 'bag'
        storage = args.output_storage or res.report.storage
        if dst.exists():
            import shutil
            shutil.rmtree(dst)
        write_output_bag(args.bag, dst, res.outputs.messages, storage)
        report['output_bag'] = str(dst)
    (out / 'metrics.json').write_text(json.dumps(report, indent=2, default=E.json_default) + '\n')
    print(summary_text(report))
    print(f'wrote {out / "metrics.json"}, {len(written)} figures'
          + (f' and the bag {report["output_bag"]}' if 'output_bag' in report else '') + f' to {out}')
    return 0


def summary_text(report: dict[str, Any]) -> str:
    """A few lines for the terminal: frames, latency, headline metrics (or why there are none)."""
    lat = report['latency_ms'].get('total_ms', {})
    nan = float('nan')
    lines = [f'{report["frames_evaluated"]} frames on {report["provider"]}: latency p50 {lat.get("p50", nan):.1f} '
             f'ms, p90 {lat.get("p90", nan):.1f} ms']
    h = report['headline']
    if h is None:
        lines.append('no ground truth in the bag: no metrics (predictions drawn only)')
    else:
        lines.append(f'{report["frames_scored"]} frames, {report["num_objects"]} objects: avg best 3D IoU '
                     f'{h["avg_best_iou"]:.3f} (class-agnostic {h["avg_best_iou_agnostic"]:.3f}), AP3D@0.25 '
                     f'{h["ap3d_25"]:.3f}, AP3D@0.5 {h["ap3d_50"]:.3f}')
        if 'op_avg_best_iou' in h:
            lines.append(f'at the operating threshold {report["operating_threshold"]:.2f}: avg best 3D IoU '
                         f'{h["op_avg_best_iou"]:.3f}, AP3D@0.25 {h["op_ap3d_25"]:.3f}, AP3D@0.5 {h["op_ap3d_50"]:.3f}')
        per_class = (report['metrics'] or {}).get('ap3d', {}).get('0.25', {}).get('per_class', {})
        if per_class:
            lines.append('AP3D@0.25 per class: ' + ', '.join(f'{k} {"-" if v is None else f"{v:.3f}"}'
                                                             for k, v in per_class.items()))
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())

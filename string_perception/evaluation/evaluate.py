"""Evaluate a checkpoint on the held-out test split (``string-perception-eval-checkpoint``).

    string-perception-eval-checkpoint models/vitd_tiny_cayley.pt --num-frames 500 --out runs/eval
    string-perception-eval-checkpoint models/vitd_tiny_cayley.pt --scenes kuka --num-frames 200   # a simulated cell

Test frames are seeds ``[2e9 + offset, 2e9 + offset + num_frames)``, never used in training. ``--scenes`` picks
their source (``training/sources.py``: procedural, aloha, kuka, mix; default: the checkpoint's training source);
every source uses the same split ranges, so test seeds are disjoint from the training ``[0, 1e6)`` and validation
``[1e9, ...)`` seeds of any source. Predictions are decoded
exactly as the ROS node decodes them (``runtime.postprocess.decode_detections``: score threshold, class-wise 3D NMS,
top-k), then scored with ``metrics.summarize`` (average best 3D IoU over all ground-truth boxes as the paper reports
it, AP3D at IoU 0.25 and 0.5, per class; strict, and symmetry-aware as ``_sym``) and broken down into error kinds
by ``training.breakdown`` (centre / scale / orientation errors of matched objects, class accuracy, duplicates,
precision at the node's score threshold; printed as a table). Writes ``metrics.json``, ``iou_hist.png``,
``pr_curve_<25|50>[_sym].png`` and a few annotated frames ``frame_<seed>.png`` (predicted vs true boxes) to
``--out``.

The inference-to-metrics pieces live in ``training/inference.py`` (the bag evaluator and the training loop reuse
them); the checkpoint's scenes are rebuilt with ``training/config.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from string_perception.cli import parse_kv
from string_perception.training.inference import evaluate_predictions, headline, predict

if TYPE_CHECKING:  # torch only where a checkpoint is run: the bag evaluator reuses the rest without torch
    import torch


# ----------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------

def load_model(path: str | Path, device: torch.device | str = 'cpu'):
    """Checkpoint (``torch.load(weights_only=True)``) -> (model in eval mode, ViTDConfig, raw checkpoint dict)."""
    from string_perception.model import load_checkpoint
    return load_checkpoint(path, map_location=device)


def scene_config_for(model_cfg, ckpt: dict):
    """The SceneConfig the checkpoint was trained with (same overrides), rendered at the model's input size."""
    from string_perception.training.config import TrainConfig, build_scene_config   # torch: not at import time
    tc = TrainConfig.from_dict(ckpt['train_config']) if isinstance(ckpt.get('train_config'), dict) else TrainConfig()
    tc.render_scale = 1              # scored on frames rendered at the input size, whatever the training rendered
    return build_scene_config(tc, model_cfg)


def source_dataset_for(model_cfg, ckpt: dict, split: str, num_frames: int, scenes: str | None = None,
                       sim_overrides: dict | None = None, offset: int = 0):
    """The ``split`` frames of ``scenes`` (None: the checkpoint's training source) for this model ->
    ``(dataset, scenes, sim overrides used, note)``. SimConfig = the checkpoint's ``sim_overrides`` + ``sim_overrides``
    at the model's input size; a model without the ``object`` class is scored on primitive-only simulated frames
    (``mesh_object_fraction=0``, said in ``note``)."""
    from string_perception.training import sources
    from string_perception.training.config import TrainConfig
    tc = TrainConfig.from_dict(ckpt['train_config']) if isinstance(ckpt.get('train_config'), dict) else TrainConfig()
    scenes = sources.check_scenes(scenes if scenes is not None else tc.scenes)
    overrides = {**tc.sim_overrides, **dict(sim_overrides or {})}
    note = ''
    if sources.uses_sim(scenes) and sources.sim_has_objects(overrides) and 'object' not in model_cfg.class_names:
        overrides['mesh_object_fraction'] = 0.0
        note = "the model has no 'object' class: primitive-only simulated frames (mesh_object_fraction=0)"
    sim_cfg = sources.sim_config(model_cfg.image_size, overrides) if sources.uses_sim(scenes) else None
    dataset = sources.make_dataset(split, num_frames, scenes, scene_config_for(model_cfg, ckpt), sim_cfg,
                                   offset=offset)
    return dataset, scenes, overrides, note


def node_threshold(checkpoint: str | Path) -> tuple[float, str]:
    """The score threshold the node would use with this model -> ``(threshold, where it came from)``: the
    ``score_threshold`` in the metadata of the exported ``<stem>.onnx`` next to the checkpoint, else the node's
    default (``node_params.effective_score_threshold``)."""
    from string_perception.node_params import effective_score_threshold
    onnx_path = Path(checkpoint).with_suffix('.onnx')
    metadata = None
    if onnx_path.exists():
        import onnx

        from string_perception.runtime.model_metadata import ModelMetadata
        try:
            metadata = ModelMetadata.from_model(onnx.load(str(onnx_path), load_external_data=False))
        except Exception as e:  # an unreadable export is reported, the evaluation goes on with the default
            print(f'warning: cannot read the metadata of {onnx_path} ({e}); using the node default threshold',
                  file=sys.stderr)
    threshold = effective_score_threshold(-1.0, metadata)
    found = metadata is not None and metadata.score_threshold is not None
    return threshold, f'{onnx_path} metadata' if found else 'node default'


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-eval-checkpoint', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('checkpoint', help='ViTD checkpoint (.pt)')
    p.add_argument('--num-frames', type=int, default=200, help='test frames: seeds [2e9 + offset, ... + num)')
    p.add_argument('--offset', type=int, default=0, help='first test frame')
    p.add_argument('--split', default='test', choices=('test', 'val'), help='never evaluate on train seeds')
    p.add_argument('--scenes', default=None, choices=('procedural', 'aloha', 'kuka', 'mix'),
                   help="frame source (default: the checkpoint's training source); simulated frames are rendered "
                        'by --num-workers spawned processes before inference')
    p.add_argument('--sim', type=parse_kv, action='append', default=[], metavar='KEY=VALUE',
                   help="SimConfig field of simulated frames (JSON value) over the checkpoint's")
    p.add_argument('--batch-size', type=int, default=16)
    p.add_argument('--score-threshold', type=float, default=0.05,
                   help='decoding threshold (low, so the PR curve covers the whole range)')
    p.add_argument('--operating-threshold', type=float, default=None,
                   help="also report the headline numbers and the error breakdown of the boxes scoring at least "
                        "this (default: the node's: the model's recommended score_threshold from the metadata of "
                        "<checkpoint stem>.onnx next to the checkpoint, else 0.3)")
    p.add_argument('--nms-iou', type=float, default=0.3)
    p.add_argument('--max-detections', type=int, default=50)
    p.add_argument('--multi-label', action='store_true',
                   help='a candidate box for every (token, class) pair over the threshold (RetinaNet-style decoding)')
    p.add_argument('--flip-tta', action='store_true',
                   help='flip test-time augmentation (the runtime / node parameter flip_tta): each frame also runs '
                        'mirrored left-right, the two passes fused per token before decoding')
    p.add_argument('--num-draw', type=int, default=4, help='annotated frames to write')
    p.add_argument('--draw-threshold', type=float, default=0.3, help='score of the boxes drawn on the frames')
    p.add_argument('--out', default='runs/eval', help='output directory')
    p.add_argument('--device', default='cpu')
    p.add_argument('--threads', type=int, default=0, help='torch CPU threads (0: default)')
    p.add_argument('--num-workers', type=int, default=0, help='DataLoader workers generating the test frames')
    p.add_argument('--no-progress', action='store_true')
    return p


def main(argv: list[str] | None = None) -> int:
    import torch

    from string_perception import metrics
    from string_perception.training.sources import uses_sim
    args = build_parser().parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model, model_cfg, ckpt = load_model(args.checkpoint, args.device)
    dataset, scenes, sim_used, note = source_dataset_for(model_cfg, ckpt, args.split, args.num_frames, args.scenes,
                                                         dict(args.sim), args.offset)
    if note:
        print(f'note: {note}', file=sys.stderr)
    num_workers = args.num_workers
    if uses_sim(scenes):       # rendered up front in spawned workers (a GL context does not survive fork)
        dataset.build_cache(processes=max(1, num_workers), progress=not args.no_progress)
        num_workers = 0
    decode = {'score_threshold': args.score_threshold, 'nms_iou': args.nms_iou,
              'max_detections': args.max_detections, 'multi_label': args.multi_label}
    res = predict(model, dataset, device=args.device, batch_size=args.batch_size, decode=decode,
                  num_workers=num_workers, progress=not args.no_progress, flip_tta=args.flip_tta)
    if args.operating_threshold is None:
        operating, operating_source = node_threshold(args.checkpoint)
    else:
        operating, operating_source = args.operating_threshold, '--operating-threshold'
    t_metrics = time.perf_counter()
    summary = evaluate_predictions(res['preds'], res['gts'], model_cfg.class_names,
                                   operating_threshold=operating, include_curves=True)
    t_metrics = time.perf_counter() - t_metrics
    seeds = list(dataset.seeds)
    report = {
        'checkpoint': str(args.checkpoint),
        'split': args.split,
        'scenes': scenes,
        'sim_overrides': sim_used if uses_sim(scenes) else None,
        'seeds': [seeds[0], seeds[-1] + 1] if seeds else [],
        'num_frames': len(seeds),
        'num_objects': int(sum(len(g['labels']) for g in res['gts'])),
        'decode': decode,
        'flip_tta': args.flip_tta,
        'operating_threshold': {'value': operating, 'source': operating_source},
        'train_step': ckpt.get('step'),
        'headline': headline(summary),
        # operating thresholds at IoU 0.25: pick one on --split val and pass it to the exporter. The node's goal
        # is precision >= 0.8 at its threshold; the best-F1 one is shown beside it
        'f1_threshold_25': metrics.f1_threshold(res['preds'], res['gts'], 0.25, len(model_cfg.class_names)),
        'precision80_threshold_25': metrics.precision_threshold(res['preds'], res['gts'], 0.8, 0.25,
                                                                len(model_cfg.class_names)),
        'metrics': summary,
        'seconds': time.perf_counter() - t0,
        'metrics_seconds': t_metrics,
    }
    curves = {k: report['metrics'].pop(k, {}) for k in ('pr_curves', 'pr_curves_sym')}
    (out / 'metrics.json').write_text(json.dumps(report, indent=2, default=json_default) + '\n')
    summary.update(curves)
    written = write_figures(out, res, summary, dataset, model_cfg.class_names, args.num_draw, args.draw_threshold)
    print(json.dumps({'headline': report['headline'], 'f1_threshold_25': report['f1_threshold_25'],
                      'precision80_threshold_25': report['precision80_threshold_25'],
                      'num_frames': report['num_frames'],
                      'num_objects': report['num_objects']}, default=json_default))
    print(format_breakdown(summary['breakdown']))
    print(f'wrote {out / "metrics.json"} and {len(written)} figures to {out}')
    return 0


def format_breakdown(b: dict[str, Any]) -> str:
    """The error breakdown as a table: one row per class and overall (medians; cm, degrees)."""
    def cell(v, scale=1.0, fmt='{:.2f}'):
        return '-' if v is None else fmt.format(v * scale)

    thr = b['score_threshold']
    head = (f"error breakdown ({b['matching']}; duplicates and precision: kept at score >= "
            f"{'all' if thr is None else f'{thr:g}'}, IoU >= {b['dup_iou']:g}); medians:")
    cols = ('class', 'gt', 'match', 'IoU', 'xy cm', 'z cm', '3d cm', 'scale', 'orient', 'vol', 'cls acc', 'dup/obj',
            'prec', 'recall')
    lines = [head, ''.join(f'{c:>9}' for c in cols)]
    for name, r in [*b['per_class'].items(), ('overall', b['overall'])]:
        vals = (name, r['num_gt'], r['num_matched'], cell(r['iou']['median']),
                cell(r['centre_xy_m']['median'], 100, '{:.1f}'), cell(r['centre_z_m']['median'], 100, '{:.1f}'),
                cell(r['centre_3d_m']['median'], 100, '{:.1f}'), cell(r['scale_error']['median']),
                cell(r['orientation_deg']['median'], 1, '{:.1f}'), cell(r['volume_ratio']['median']),
                cell(r['class_accuracy']), cell(r['duplicates_per_object']), cell(r['precision']),
                cell(r['recall']))
        lines.append(''.join(f'{v:>9}' for v in vals))
    return '\n'.join(lines)


def write_figures(out: Path, res: dict, summary: dict, dataset, class_names: Sequence[str], num_draw: int,
                  draw_threshold: float, scale: int = 4) -> list[Path]:
    """IoU histogram, PR curves (IoU 0.25 and 0.5) and ``num_draw`` frames with true (green) and predicted (red,
    score >= ``draw_threshold``) boxes, upscaled ``scale`` times so the boxes are legible."""
    from string_perception import metrics
    from string_perception.evaluation import plots
    written = []
    best = metrics.best_iou_per_gt(res['preds'], res['gts'], class_aware=True)
    written.append(plots.plot_iou_histogram(best, out / 'iou_hist.png'))
    for sfx, what in (('', 'AP3D'), ('_sym', 'symmetry-aware AP3D')):
        for thr, curves in summary.get(f'pr_curves{sfx}', {}).items():
            ap = summary[f'ap3d{sfx}'][thr]['per_class']
            name = f'pr_curve_{round(float(thr) * 100):d}{sfx}.png'
            written.append(plots.plot_pr_curves(curves, out / name, title=f'{what} @ IoU {thr}', ap=ap))
    if num_draw > 0:
        import cv2
        for i in range(min(num_draw, len(res['preds']))):
            raw = dataset.raw(i)
            img = annotate_frame(raw.rgb, raw.K, res['preds'][i], res['gts'][i], class_names, draw_threshold, scale)
            path = out / f'frame_{res["seeds"][i]}.png'
            cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
            written.append(path)
    return written


def annotate_frame(rgb: np.ndarray, K: np.ndarray, pred: dict | None, gt: dict | None, class_names: Sequence[str],
                   draw_threshold: float, scale: int = 4) -> np.ndarray:
    """RGB ``uint8[H,W,3]`` upscaled ``scale`` times (nearest) with true (green) and predicted (red, score >=
    ``draw_threshold``) boxes -> ``uint8[sH,sW,3]``. Either box set may be None."""
    import cv2

    from string_perception.runtime import draw
    H, W = rgb.shape[:2]
    image = cv2.resize(rgb, (W * scale, H * scale), interpolation=cv2.INTER_NEAREST)   # [sH,sW,3]
    K = np.asarray(K, np.float64).copy()
    K[:2] *= scale
    K[:2, 2] += (scale - 1) / 2.0              # pixel centres at integer coordinates, before and after
    return draw.draw_predictions(image, K, pred, gt, class_names, score_threshold=draw_threshold)


def json_default(o):
    """``json.dumps(..., default=json_default)``: numpy arrays as lists, numpy scalars as Python numbers."""
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f'not JSON serialisable: {type(o).__name__}')


if __name__ == '__main__':
    sys.exit(main())

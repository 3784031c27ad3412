"""Where a workcell model's confident false boxes stand: on the robot, the cell's structure, clutter, unlabelled
objects, as duplicates of labelled ones, or in mid-air.

    python -m benchmarks.false_boxes models/vitd_workcell_hr.onnx --frames-per-rig 20 --out runs/false_boxes/hr

Renders the workcell evaluator's rig test frames (the same seeds and label rule as
``string-perception-eval-workcell --frames-per-rig N --min-visible-pixels 1024``) with the simulator's segmentation,
runs the model through ``runtime.Pipeline`` as the evaluator does, and calls a kept box (score >= ``--threshold``)
*false* when its best symmetry-aware IoU with any labelled object is below ``--iou`` (the evaluator's
precision@0.3 at IoU 0.25). Each false box gets the role of most of the surface points inside it
(``evaluation/false_boxes.py``). Prints, per cell and rig, kept / false boxes and the false ones by role, and writes
``results.json`` and ``table.md`` to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import numpy as np

from string_perception.evaluation import false_boxes as fb
from string_perception.evaluation.workcell import (MAX_DETECTIONS, PRE_NMS_TOP_K, WorkcellEvalConfig, frame_jobs,
                                                   frame_sim_config)


def _render(job) -> dict[str, Any]:
    """One rig test frame with its pixel roles and exact depth (a spawned worker: MuJoCo stays in it)."""
    cell, rig, seed, cfg = job
    os.environ.setdefault('MUJOCO_GL', 'osmesa')
    from string_perception import box_ops
    from string_perception.sim.generator import render_sim_scene
    truth = render_sim_scene(int(seed), frame_sim_config(cfg, cell, rig))
    f, idx = truth.frame, truth.index
    roles = fb.pixel_roles(truth.geom_ids, idx.geom_obj, truth.label_index, idx.arm_geom, idx.distractor_geom)
    params = box_ops.encode_box_params(np.asarray(f.translations, float).reshape(-1, 3),
                                       np.asarray(f.rotations, float).reshape(-1, 3, 3),
                                       np.asarray(f.sizes, float).reshape(-1, 3)).reshape(-1, 12)   # [M,12]
    return {'cell': cell, 'rig': rig, 'seed': int(seed), 'rgb': f.rgb, 'depth_mm': f.depth_mm,
            'K': np.asarray(f.K, float), 'params': params, 'labels': np.asarray(f.labels, np.int64),
            'z': np.asarray(truth.depth_exact_m, np.float32), 'roles': roles}


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-box rows (``group``, ``false``, ``role``, ``score``) -> ``{group: {'kept', 'false', 'by_role': {role:
    count}, 'score_by_role': {role: mean score}}}`` with an ``'all'`` group over every row."""
    out: dict[str, Any] = {}
    for key in ['all'] + sorted({r['group'] for r in rows}):
        sel = [r for r in rows if key == 'all' or r['group'] == key]
        false = [r for r in sel if r['false']]
        out[key] = {'kept': len(sel), 'false': len(false),
                    'by_role': {name: sum(r['role'] == i for r in false) for i, name in enumerate(fb.ROLES)},
                    'score_by_role': {name: (float(np.mean(s)) if s else None) for i, name in enumerate(fb.ROLES)
                                      for s in [[r['score'] for r in false if r['role'] == i]]}}
    return out


def format_tally(t: dict[str, Any]) -> str:
    """Markdown: one row per group, the false boxes' roles as counts and shares."""
    lines = ['| group | kept | false | ' + ' | '.join(fb.ROLES) + ' |',
             '| --- | ---: | ---: | ' + ' | '.join('---:' for _ in fb.ROLES) + ' |']
    for key, s in t.items():
        n = max(s['false'], 1)
        lines.append(f"| {key} | {s['kept']} | {s['false']} | "
                     + ' | '.join(f"{s['by_role'][r]} ({100 * s['by_role'][r] / n:.0f} %)" for r in fb.ROLES) + ' |')
    return '\n'.join(lines) + '\n'


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    from string_perception import metrics
    from string_perception.runtime import Pipeline
    from string_perception.training.inference import detections_to_arrays
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('model', help='ONNX file')
    p.add_argument('--frames-per-rig', type=int, default=20)
    p.add_argument('--cells', nargs='+', default=None, help='only these cells (default: both)')
    p.add_argument('--height', type=int, default=WorkcellEvalConfig.height)
    p.add_argument('--width', type=int, default=WorkcellEvalConfig.width)
    p.add_argument('--min-visible-pixels', type=int, default=1024)
    p.add_argument('--threshold', type=float, default=0.3, help='score of a kept box')
    p.add_argument('--iou', type=float, default=0.25, help='a kept box below this IoU with every object is false')
    p.add_argument('--processes', type=int, default=2)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--out', required=True, help='folder for results.json and table.md')
    args = p.parse_args(argv)
    cfg = WorkcellEvalConfig(height=args.height, width=args.width, frames_per_rig=args.frames_per_rig,
                             heldout_frames=0, seen_mesh_frames=0, min_visible_pixels=args.min_visible_pixels)
    jobs = [(*j, cfg) for j in frame_jobs(cfg) if args.cells is None or j[0] in args.cells]
    pipe = Pipeline(args.model, ('CPUExecutionProvider',), score_threshold=args.threshold, nms_iou=cfg.nms_iou,
                    max_detections=MAX_DETECTIONS, pre_nms_top_k=PRE_NMS_TOP_K, intra_op_threads=args.threads,
                    resize_mode=cfg.resize_mode)
    names = list(pipe.labels)
    rows = []
    with mp.get_context('spawn').Pool(max(1, args.processes)) as pool:
        for f in tqdm(pool.imap(_render, jobs, chunksize=2), total=len(jobs), desc='frames'):
            pred = detections_to_arrays(pipe(f['rgb'], f['depth_mm'], f['K']).detections)
            gt = {'params': f['params'], 'labels': f['labels']}
            iou = metrics.frame_ious_sym([pred], [gt], names)[0]                     # [K,M]
            best = iou.max(axis=1) if iou.shape[1] else np.zeros(len(pred['scores']))   # [K]
            roles = fb.box_roles(fb.box_role_counts(pred['params'], f['z'], f['K'], f['roles']))
            for k in range(len(pred['scores'])):
                rows.append({'group': f"{f['cell']}/{f['rig']}", 'cell': f['cell'], 'seed': f['seed'],
                             'false': bool(best[k] < args.iou), 'role': int(roles[k]),
                             'score': float(pred['scores'][k]), 'best_iou': float(best[k])})
    by_cell = tally([dict(r, group=r['cell']) for r in rows])
    by_rig = tally(rows)
    del by_rig['all']
    table = format_tally(by_cell) + '\n' + format_tally(by_rig)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'results.json').write_text(json.dumps({'args': vars(args), 'by_cell': by_cell, 'by_rig': by_rig,
                                                  'boxes': rows}, indent=1) + '\n')
    (out / 'table.md').write_text(table)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

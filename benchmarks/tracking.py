"""CLEAR MOT figures of the 3D tracker (runtime/tracking.py) on generated scenes whose objects move.

    python -m benchmarks.tracking --sequences 8 --frames 60 --out docs/results/tracking.md
    python -m benchmarks.tracking --sequences 2 --frames 20 --no-model          # ground truth inputs only, fast

Sequences: ``scenes.sequence.generate_sequence`` (test-split seeds from 2e9 + 7_000_000, static camera, 70 % of the
objects sliding at up to 0.3 m/s, objects passing through each other, labels only for visible objects), 30 Hz.
Tracker inputs:

- (a) ``gt_noisy``: each visible object's ground-truth box, centre and size with Gaussian noise (``--noise-m``),
  dropped with probability ``--dropout`` (missed detections), plus Poisson(``--false-positives``) boxes per frame
  scattered around the objects (clutter);
- (b) ``model``: the shipped model's detections (``runtime.Pipeline`` at the model's operating threshold), unless
  ``--no-model``.

Scoring (``motmetrics``, the CLEAR MOT definitions of Bernardin & Stiefelhagen 2008): per frame, ground truth =
the visible objects with their object index as id; hypotheses = the tracks the tracker publishes that frame
(confirmed, coasting ones included) with their track ids; a pair may match when the centres are at most
``--match-m`` apart (distance in metres). MOTA = 1 - (misses + false positives + ID switches) / objects; MOTP =
mean centre distance of the matches (metres, lower is better); ID switches and fragmentations as defined there;
IDF1 as in Ristani et al. 2016. Cost: the CPU time (``time.thread_time``, robust to other processes' load) and
wall time of ``Tracker.update`` per frame, and of a worst-case frame (``max_tracks`` tracks against 50 detections,
the decoder's default ``max_detections``). Nothing here asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from string_perception.runtime.postprocess import Detections
from string_perception.runtime.tracking import Tracker, TrackerConfig
from string_perception.scenes import SceneConfig
from string_perception.scenes.sequence import SequenceConfig, generate_sequence

FIRST_SEED = 2_000_000_000 + 7_000_000
METRICS = ['num_frames', 'num_objects', 'mota', 'motp', 'num_switches', 'num_fragmentations', 'num_misses',
           'num_false_positives', 'idf1', 'mostly_tracked', 'mostly_lost', 'num_unique_objects']


def noisy_detections(frame, rng: np.random.Generator, noise_m: float, dropout: float, false_pos: float) -> Detections:
    """Ground-truth boxes of one frame with noise, dropouts and clutter (see the module docstring)."""
    keep = rng.random(frame.num_objects) >= dropout                                   # [M]
    t = frame.translations[keep] + rng.normal(0, noise_m, (int(keep.sum()), 3))      # [m,3]
    s = np.maximum(frame.sizes[keep] + rng.normal(0, noise_m, (int(keep.sum()), 3)), 0.005)
    R, cls = frame.rotations[keep], frame.labels[keep]
    n_fp = int(rng.poisson(false_pos))
    if n_fp and frame.num_objects:
        lo, hi = frame.translations.min(0) - 0.1, frame.translations.max(0) + 0.1
        t = np.concatenate([t, rng.uniform(lo, hi, (n_fp, 3))])
        s = np.concatenate([s, rng.uniform(0.03, 0.15, (n_fp, 3))])
        R = np.concatenate([R, np.broadcast_to(np.eye(3), (n_fp, 3, 3))])
        cls = np.concatenate([cls, rng.integers(0, max(int(frame.labels.max()) + 1, 1), n_fp)])
    return Detections.from_boxes(t, s, rotations=R, class_ids=cls, scores=np.full(len(t), 0.9))


def score_sequence(mm, seq, dets_per_frame, config: TrackerConfig | None, match_m: float):
    """(motmetrics accumulator, per-frame update (CPU ms, wall ms)) of one sequence. ``config=None``: no tracker,
    the raw detections with a new id each (the detector's own misses and false positives, for reference)."""
    acc = mm.MOTAccumulator(auto_id=True)
    tracker = Tracker(config) if config is not None else None
    times, next_id = [], 1
    for sf, dets in zip(seq, dets_per_frame):
        if tracker is None:
            centres, ids = dets.translations, list(range(next_id, next_id + len(dets)))
            next_id += len(dets)
        else:
            c0, t0 = time.thread_time(), time.perf_counter()
            tracks = tracker.update(dets, sf.stamp_s)
            times.append(((time.thread_time() - c0) * 1e3, (time.perf_counter() - t0) * 1e3))
            centres, ids = tracks.translations, tracks.ids.tolist()
        gt = sf.frame.translations                                                    # [M,3]
        d = np.linalg.norm(gt[:, None] - centres[None], axis=2)                       # [M,T]
        acc.update(sf.object_ids.tolist(), ids, np.where(d <= match_m, d, np.nan))
    return acc, times


def worst_case_ms(config: TrackerConfig, detections: int, repeats: int = 20) -> float:
    """Median CPU time of a frame with ``config.max_tracks`` live tracks against ``detections`` detections."""
    rng = np.random.default_rng(0)
    tracker = Tracker(config.replace(birth_hits=1))
    grid = rng.uniform(-1, 1, (config.max_tracks, 3)) + [0, 0, 2]
    tracker.update(Detections.from_boxes(grid, np.full((len(grid), 3), 0.05)), 0.0)
    times = []
    for k in range(repeats):
        d = Detections.from_boxes(grid[:detections] + rng.normal(0, 0.01, (detections, 3)),
                                  np.full((detections, 3), 0.05))
        c0 = time.thread_time()
        tracker.update(d, (k + 1) / 30.0)
        times.append((time.thread_time() - c0) * 1e3)
    return float(np.median(times))


def model_detections(model: str, seqs):
    from string_perception.node_params import effective_score_threshold
    from string_perception.runtime import Pipeline
    pipe = Pipeline(model, providers=('CPUExecutionProvider',))
    pipe.set_params(score_threshold=effective_score_threshold(-1.0, pipe.model.metadata))
    return [[pipe(sf.frame.rgb, sf.frame.depth_mm, sf.frame.K).detections for sf in seq] for seq in seqs], \
        pipe.params['score_threshold']


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument('--sequences', type=int, default=8)
    ap.add_argument('--frames', type=int, default=60)
    ap.add_argument('--height', type=int, default=240)
    ap.add_argument('--width', type=int, default=320)
    ap.add_argument('--noise-m', type=float, default=0.01, help='(a) centre/size noise, metres')
    ap.add_argument('--dropout', type=float, default=0.1, help='(a) probability a visible object is not detected')
    ap.add_argument('--false-positives', type=float, default=0.2, help='(a) mean clutter boxes per frame')
    ap.add_argument('--match-m', type=float, default=0.1, help='CLEAR MOT match distance (centres, metres)')
    ap.add_argument('--model', default='models/vitd_tiny_cayley.onnx')
    ap.add_argument('--no-model', action='store_true', help='skip (b), the model detections')
    ap.add_argument('--out', default=None, help='write a markdown report here')
    ap.add_argument('--json', default=None)
    a = ap.parse_args(argv)
    import motmetrics as mm

    t_start = time.time()
    scene = SceneConfig(height=a.height, width=a.width, min_objects=3, max_objects=8)
    seqs = [generate_sequence(FIRST_SEED + i, SequenceConfig(frames=a.frames), scene) for i in range(a.sequences)]
    rng = np.random.default_rng(1)
    inputs = {'gt_noisy': [[noisy_detections(sf.frame, rng, a.noise_m, a.dropout, a.false_positives) for sf in seq]
                           for seq in seqs]}
    threshold = None
    if not a.no_model:
        inputs['model'], threshold = model_detections(a.model, seqs)
    configs = {'none: raw detections, new id each': None, 'distance (default)': TrackerConfig(),
               'iou': TrackerConfig(association='iou')}
    mh = mm.metrics.create()
    rows, times = [], []
    for inp, dets in inputs.items():
        for cname, cfg in configs.items():
            accs = []
            for seq, ds in zip(seqs, dets):
                acc, ts = score_sequence(mm, seq, ds, cfg, a.match_m)
                accs.append(acc)
                times += ts
            summ = mh.compute_many(accs, metrics=METRICS, names=[str(i) for i in range(len(accs))],
                                   generate_overall=True)
            rows.append({'input': inp, 'association': cname,
                         **{k: float(v) for k, v in summ.loc['OVERALL'].items()}})
    cpu, wall = np.array(times).T                                                     # [frames] each
    cost = {'update_cpu_ms_p50': float(np.percentile(cpu, 50)), 'update_cpu_ms_p99': float(np.percentile(cpu, 99)),
            'update_cpu_ms_max': float(np.max(cpu)), 'update_wall_ms_p50': float(np.percentile(wall, 50)),
            'update_wall_ms_p99': float(np.percentile(wall, 99)),
            'worst_case_ms_distance': worst_case_ms(TrackerConfig(), 50),
            'worst_case_ms_iou': worst_case_ms(TrackerConfig(association='iou'), 50)}
    info = {'command': 'python -m benchmarks.tracking ' + ' '.join(sys.argv[1:] if argv is None else argv),
            'args': vars(a), 'tracker_defaults': asdict(TrackerConfig()), 'operating_threshold': threshold,
            'objects_moving_share': float(np.mean([np.linalg.norm(sf.velocities, axis=1).max() > 0.01
                                                   for seq in seqs for sf in seq if len(sf.object_ids)])),
            'machine': f'{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average '
                       f'{os.getloadavg()[0]:.1f}', 'seconds': round(time.time() - t_start, 1)}
    text = report(rows, cost, info)
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps({'rows': rows, 'cost': cost, 'info': info}, indent=2, default=str))
    return 0


def report(rows, cost, info) -> str:
    lines = ['# 3D tracking: CLEAR MOT on generated sequences with moving objects', '',
             f'Command: `{info["command"]}` ({info["seconds"]} s on {info["machine"]}).', '',
             'Inputs: `gt_noisy` = ground-truth boxes of the visible objects with noise '
             f'{info["args"]["noise_m"]} m, {info["args"]["dropout"]:.0%} dropouts and '
             f'{info["args"]["false_positives"]} clutter boxes per frame; `model` = the shipped model\'s detections '
             f'(operating threshold {info["operating_threshold"]}). {info["args"]["sequences"]} sequences x '
             f'{info["args"]["frames"]} frames at 30 Hz, {info["args"]["height"]}x{info["args"]["width"]}; a match '
             f'needs centres within {info["args"]["match_m"]} m; MOTP is the mean centre distance of matches (m).', '',
             '| input | association | MOTA | MOTP (m) | ID switches | fragmentations | misses | false positives | '
             'IDF1 | mostly tracked | objects |', '|---|---|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f'| {r["input"]} | {r["association"]} | {r["mota"]:.3f} | {r["motp"]:.4f} | '
                     f'{int(r["num_switches"])} | {int(r["num_fragmentations"])} | {int(r["num_misses"])} | '
                     f'{int(r["num_false_positives"])} | {r["idf1"]:.3f} | {int(r["mostly_tracked"])} / '
                     f'{int(r["num_unique_objects"])} | {int(r["num_objects"])} |')
    lines += ['', f'Tracker cost per frame (`Tracker.update`, every frame of the runs above): CPU time p50 '
              f'{cost["update_cpu_ms_p50"]:.2f} ms, p99 {cost["update_cpu_ms_p99"]:.2f} ms, max '
              f'{cost["update_cpu_ms_max"]:.2f} ms (wall p50 {cost["update_wall_ms_p50"]:.2f} ms, p99 '
              f'{cost["update_wall_ms_p99"]:.2f} ms under the load above). Worst case (100 live tracks, 50 '
              f'detections), CPU time: {cost["worst_case_ms_distance"]:.1f} ms with distance association, '
              f'{cost["worst_case_ms_iou"]:.1f} ms with 3D IoU.', '',
              f'Tracker defaults: `{info["tracker_defaults"]}`.', '']
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())

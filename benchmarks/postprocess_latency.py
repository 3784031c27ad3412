"""Postprocess (decode + 3D NMS) latency, the decoder before issue 37 against today's, on the shipped model's frames.

    python -m benchmarks.postprocess_latency                          # 300 frames, thresholds: the model's and 0.05
    python -m benchmarks.postprocess_latency --frames 1000 --thresholds 0.47 0.05 0.3 --class-agnostic

Runs the shipped model (``models/vitd_tiny_cayley.onnx``, CPU provider) once over generated frames of the held-out
test split (seeds from 2e9, 640x480 as the camera publishes them, through ``runtime.prepare_inputs``), then decodes
every frame's outputs with the reference decoder (benchmarks/common/postprocess_reference.py, one exact-IoU call
per kept box) and with ``runtime.postprocess.decode_detections``, alternating old and new frame by frame so that a
change of the machine's load hits both, each call timed on its own (``time.perf_counter``). Prints per setting:
p50 / p99 / mean in ms of both (wall, and the thread's CPU time), the ratios old / new (wall), the candidates
(argmax scores at or above the threshold) and kept boxes per frame, and how many frames differ in any kept box
(must be 0); the 1-minute load average with every row. Nothing asserts; test/runtime/test_nms.py checks correctness, never
time.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

from benchmarks.common.postprocess_reference import decode_detections_reference, same_detections
from string_perception.runtime.postprocess import decode_detections

REPO = Path(__file__).resolve().parent.parent

FIRST_SEED = 2_000_000_000
MODEL = REPO / 'models' / 'vitd_tiny_cayley.onnx'


def shipped_model_outputs(model_path=MODEL, num_frames: int = 300, first_seed: int = FIRST_SEED,
                          frame_hw: tuple[int, int] = (480, 640)):
    """``(boxes[F,N,12], logits[F,N,C], labels, score_threshold)``: the model's raw outputs on the generated frames
    ``first_seed ..`` of size ``frame_hw`` (CPU provider), its labels and its recommended threshold (None when the
    metadata has none). 480x640 is what the camera publisher of benchmarks/soak.py sends (~0.1 s a frame to
    render); the model's own 128x128 renders 20x faster and is what the tests use."""
    from string_perception.runtime.onnx_runner import OnnxModel
    from string_perception.runtime.preprocess import prepare_inputs
    from string_perception.scenes import SceneConfig, generate_frame

    model = OnnxModel(str(model_path), providers=('CPUExecutionProvider',))
    config = SceneConfig(height=int(frame_hw[0]), width=int(frame_hw[1]))
    boxes, logits = [], []
    for seed in range(first_seed, first_seed + num_frames):
        frame = generate_frame(seed, config)
        x = prepare_inputs(frame.rgb, frame.depth_mm, frame.K, model.input_hw)
        out = model.run(x.image, x.depth, x.intrinsics)
        boxes.append(out['boxes'][0])
        logits.append(out['logits'][0])
    return np.stack(boxes), np.stack(logits), tuple(model.labels), getattr(model.metadata, 'score_threshold', None)


def _stats(ms) -> str:
    ms = np.asarray(ms)
    return f'{np.percentile(ms, 50):7.3f} {np.percentile(ms, 99):7.3f} {ms.mean():7.3f}'


def compare(boxes, logits, labels, score_threshold: float, nms_iou: float = 0.3, class_agnostic: bool = False,
            multi_label: bool = False, repeats: int = 1) -> dict:
    """Old and new decoder on every frame, alternating -> per-frame times (ms), counts and the differing frames."""
    kw = dict(score_threshold=score_threshold, nms_iou=nms_iou, class_agnostic=class_agnostic,
              multi_label=multi_label)
    old_ms, new_ms, old_cpu, new_cpu, kept, differ = [], [], [], [], [], []
    for f, (b, lg) in enumerate(zip(boxes, logits)):
        for _ in range(repeats):
            c0, t0 = time.thread_time(), time.perf_counter()
            ref = decode_detections_reference(b, lg, labels, **kw)
            c1, t1 = time.thread_time(), time.perf_counter()
            new = decode_detections(b, lg, labels, **kw)
            c2, t2 = time.thread_time(), time.perf_counter()
            old_ms.append((t1 - t0) * 1e3)
            new_ms.append((t2 - t1) * 1e3)
            old_cpu.append((c1 - c0) * 1e3)
            new_cpu.append((c2 - c1) * 1e3)
        kept.append(len(new))
        if not same_detections(ref, new):
            differ.append(f)
    return {'old_ms': old_ms, 'new_ms': new_ms, 'old_cpu_ms': old_cpu, 'new_cpu_ms': new_cpu, 'kept': kept,
            'differ': differ}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--model', default=str(MODEL))
    p.add_argument('--frames', type=int, default=300)
    p.add_argument('--frame-size', type=int, nargs=2, default=(480, 640), metavar=('H', 'W'),
                   help='generated camera frames (default 480 640, as benchmarks/soak.py publishes)')
    p.add_argument('--thresholds', type=float, nargs='+', default=None,
                   help="score thresholds (default: the model's recommended one, and 0.05)")
    p.add_argument('--nms-iou', type=float, default=0.3)
    p.add_argument('--class-agnostic', action='store_true', help='also class-agnostic NMS')
    p.add_argument('--multi-label', action='store_true', help='also multi-label candidates')
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    boxes, logits, labels, recommended = shipped_model_outputs(args.model, args.frames, frame_hw=args.frame_size)
    thresholds = args.thresholds or [recommended if recommended is not None else 0.3, 0.05]
    print(f'{args.frames} frames {args.frame_size[0]}x{args.frame_size[1]} (seeds {FIRST_SEED}..), model '
          f'{Path(args.model).name} outputs in {time.perf_counter() - t0:.1f} s; cores {os.cpu_count()}; '
          f'nms_iou {args.nms_iou}')
    print('wall ms (perf_counter) per call; cpu = this thread\'s CPU time (time.thread_time), which a loaded '
          'machine inflates less')
    print('threshold  nms             labels        old p50  old p99 old mean | new p50  new p99 new mean | '
          'p50 ratio p99 ratio | cpu old p50/p99  cpu new p50/p99 | cand/frame kept/frame | frames differing | '
          'load 1 min')
    for thr in thresholds:
        cand = float(np.mean(np.sum(expit(logits.max(axis=2)) >= thr, axis=1)))
        for agnostic in (False, True) if args.class_agnostic else (False,):
            for multi in (False, True) if args.multi_label else (False,):
                r = compare(boxes, logits, labels, thr, args.nms_iou, agnostic, multi)
                o, n = np.asarray(r['old_ms']), np.asarray(r['new_ms'])
                ratios = np.percentile(o, [50, 99]) / np.percentile(n, [50, 99])
                print(f"{thr:9.2f}  {'class-agnostic' if agnostic else 'class-wise':14s}  "
                      f"{'multi-label' if multi else 'argmax':11s}  {_stats(o)} | {_stats(n)} | "
                      f"{ratios[0]:8.1f}x {ratios[1]:8.1f}x"
                      f" | {np.percentile(r['old_cpu_ms'], 50):7.3f} {np.percentile(r['old_cpu_ms'], 99):7.3f}"
                      f"  {np.percentile(r['new_cpu_ms'], 50):7.3f} {np.percentile(r['new_cpu_ms'], 99):7.3f}"
                      f" | {cand:10.1f} {np.mean(r['kept']):10.1f} | {len(r['differ']):16d} | "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

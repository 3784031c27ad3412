"""Faster variants of an exported model, side by side (issue 37 item 2): ORT graph optimisation levels, an offline
optimised file, ORT's transformer fusions, static int8 QDQ (``export.optimize``), latency and accuracy vs fp32.

    python -m benchmarks.model_variants                                   # shipped 128x128 model
    python -m benchmarks.model_variants --onnx models/vitd_workcell.onnx --eval-frames 60

Variants (all from the same fp32 file, built into a temporary directory):

* ``fp32`` at ORT_ENABLE_ALL: what ``runtime.OnnxModel`` runs today, the reference of every ratio;
  ``fp32_basic`` / ``fp32_extended``: the same file at ORT_ENABLE_BASIC / ORT_ENABLE_EXTENDED;
  ``fp32_offline``: the ORT_ENABLE_EXTENDED graph saved (``SessionOptions.optimized_model_filepath``) and loaded
  with optimisations off (what an offline-optimised file buys at run time);
  ``fp32_fused``: ``onnxruntime.transformers.optimizer`` (model_type vit) fusions, statistics printed (the STRING
  attention is custom: its Attention fusion count shows whether it applies);
* ``int8``: ``export.optimize.quantize_int8`` (encoder qkv/proj/fc1/fc2, per-channel weights, calibrated on
  training-split frames, fp32 MatMul outputs -> MatMulIntegerToFloat); ``int8_mlp``: only fc1/fc2 quantised;
  ``int8_qout``: the outputs quantised to uint8 too (QLinearMatMul);
* ``fp32_lean``: the checkpoint exported again by this checkout's exporter (``export.pipeline.export_checkpoint``,
  the graph without batch-shape arithmetic and with one angle MatMul / Cos / Sin for all layers), to compare with a
  ``--onnx`` file exported by an older exporter; ``int8_lean``: ``quantize_int8`` of that file.

``--variants`` picks a subset (``fp32`` is always run: it is the reference).

Latency: plain ``onnxruntime.InferenceSession`` per variant and thread count (--threads, default 1 and 2), one
generated test-split frame per round, rounds interleaved round-robin with a rotating start so load from other
processes hits every variant alike; p50/p99 and the ratio of p50s to ``fp32`` at the same thread count, plus the
paired ratio (median over rounds of the per-round ratio). The load average is printed before and after.
Accuracy: every variant's file through ``export.accuracy.evaluate_exports`` (the runtime's ``OnnxModel``, the
evaluator's decoding and scoring) on --eval-frames test-split frames: symmetry-aware avg best 3D IoU and AP3D@0.25
(and the rest of the headline), difference to fp32, against the bound |Δ| <= 0.005.
Nothing here asserts on time. Goal (issue 37): a variant within the bound at <= 0.6x fp32's p50.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.transformers import optimizer as ort_transformers
from onnxruntime.transformers.fusion_options import FusionOptions

from string_perception.export.accuracy import evaluate_exports
from string_perception.export.optimize import calibration_feeds, quantize_int8
from string_perception.export.pipeline import export_checkpoint
from string_perception.model import load_checkpoint
from string_perception.runtime.model_metadata import ModelMetadata
from string_perception.runtime.model_variant import INT8_KERNEL_FLAGS, cpu_flags, int8_kernels

ACCURACY_BOUND = 0.005
GOAL_RATIO = 0.6
LEVELS = {'basic': ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          'extended': ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          'all': ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
          'off': ort.GraphOptimizationLevel.ORT_DISABLE_ALL}


# variant -> (file it runs, ORT graph optimisation level)
VARIANTS = {'fp32': ('fp32', 'all'), 'fp32_basic': ('fp32', 'basic'), 'fp32_extended': ('fp32', 'extended'),
            'fp32_offline': ('fp32_offline', 'off'), 'fp32_fused': ('fp32_fused', 'all'),
            'int8': ('int8', 'all'), 'int8_mlp': ('int8_mlp', 'all'), 'int8_qout': ('int8_qout', 'all'),
            'fp32_lean': ('fp32_lean', 'all'), 'int8_lean': ('int8_lean', 'all')}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--onnx', default='models/vitd_tiny_cayley.onnx')
    p.add_argument('--checkpoint', default=None, help='default: <onnx stem>.pt')
    p.add_argument('--threads', type=int, nargs='+', default=[1, 2])
    p.add_argument('--rounds', type=int, default=100, help='timed calls per variant and thread count')
    p.add_argument('--warmup', type=int, default=5)
    p.add_argument('--calibration-frames', type=int, default=64)
    p.add_argument('--eval-frames', type=int, default=100, help='test-split frames scored per variant (0: skip)')
    p.add_argument('--save-int8', default=None, help='also copy the int8 file here')
    p.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=list(VARIANTS),
                   help='variants to build and measure (fp32 always)')
    return p


def session(path: Path, threads: int, level: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=['CPUExecutionProvider'])


def offline_file(src: Path, out: Path) -> Path:
    """The ORT_ENABLE_EXTENDED graph of ``src`` saved to ``out`` (portable: no hardware-specific NCHWc layout)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS['extended']
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 3
    ort.InferenceSession(str(src), so, providers=['CPUExecutionProvider'])
    return out


def fused_file(src: Path, out: Path, num_heads: int, width: int) -> tuple[Path, dict]:
    m = ort_transformers.optimize_model(str(src), model_type='vit', num_heads=num_heads, hidden_size=width,
                                        optimization_options=FusionOptions('vit'), opt_level=0, use_gpu=False)
    m.save_model_to_file(str(out))
    return out, {k: v for k, v in m.get_fused_operator_statistics().items() if v or k in ('Attention', 'Gelu')}


def test_feed(config, checkpoint) -> dict[str, np.ndarray]:
    from string_perception.evaluation.evaluate import source_dataset_for
    _, _, ckpt = load_checkpoint(checkpoint, map_location='cpu')
    dataset, _, _, _ = source_dataset_for(config, ckpt, 'test', 1)
    s = dataset[0]
    return {'image': s['image'].numpy()[None], 'depth': s['depth'].numpy()[None].astype(np.float32),
            'intrinsics': s['K'].numpy()[None].astype(np.float32)}


def time_interleaved(cases: dict[str, ort.InferenceSession], feed, rounds: int, warmup: int) -> dict[str, list[float]]:
    names = list(cases)
    for _ in range(warmup):
        for n in names:
            cases[n].run(None, feed)
    times = {n: [] for n in names}
    for r in range(rounds):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            t0 = time.perf_counter()
            cases[n].run(None, feed)
            times[n].append((time.perf_counter() - t0) * 1e3)
    return times


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    src = Path(args.onnx)
    ckpt = Path(args.checkpoint) if args.checkpoint else src.with_suffix('.pt')
    meta = ModelMetadata.from_model(onnx.load(str(src), load_external_data=False))
    _, config, _ = load_checkpoint(ckpt, map_location='cpu')
    flags = cpu_flags()
    print(f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  {platform.processor() or platform.machine()}, '
          f'{os.cpu_count()} CPUs, ONNX Runtime {ort.__version__}; int8 flags present: '
          f'{[f for f in INT8_KERNEL_FLAGS if f in flags]} (amx_bf16: {"amx_bf16" in flags}); '
          f'auto choice would run int8: {int8_kernels(flags)}')
    print(f'model {src} ({meta.input_height}x{meta.input_width}, precision {meta.precision}), load average '
          f'{os.getloadavg()}')
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        feeds, calib = calibration_feeds(ckpt, args.calibration_frames)
        variants = {name: VARIANTS[name] for name in ['fp32'] + [v for v in args.variants if v != 'fp32']}
        wanted = {f for f, _ in variants.values()}
        files = {'fp32': src}
        if 'fp32_offline' in wanted:
            files['fp32_offline'] = offline_file(src, tmp / 'offline.onnx')
        if 'fp32_fused' in wanted:
            files['fp32_fused'], stats = fused_file(src, tmp / 'fused.onnx', config.num_heads, config.width)
            print(f'transformers optimizer fusions: {stats}')
        if 'int8' in wanted:
            files['int8'] = tmp / 'int8.onnx'
            quantize_int8(src, files['int8'], feeds, calib)
        if 'int8_mlp' in wanted:
            files['int8_mlp'] = tmp / 'int8_mlp.onnx'
            quantize_int8(src, files['int8_mlp'], feeds, calib, layers=('/mlp/fc1/', '/mlp/fc2/'))
        if 'int8_qout' in wanted:
            files['int8_qout'] = tmp / 'int8_qout.onnx'
            quantize_int8(src, files['int8_qout'], feeds, calib, fp32_outputs=False)
        if wanted & {'fp32_lean', 'int8_lean'}:
            files['fp32_lean'] = tmp / 'lean.onnx'
            rec = export_checkpoint(ckpt, files['fp32_lean'], score_threshold=meta.score_threshold, verify_frames=1,
                                    log=lambda *a: None)
            print(f'fp32_lean: export checks {"passed" if rec["ok"] else "FAILED"}, parity vs PyTorch '
                  f'{rec["files"]["fp32"]["parity_max_abs_diff"]}')
        if 'int8_lean' in wanted:
            files['int8_lean'] = tmp / 'int8_lean.onnx'
            quantize_int8(files['fp32_lean'], files['int8_lean'], feeds, calib)
        if args.save_int8 and 'int8' in files:
            Path(args.save_int8).write_bytes(files['int8'].read_bytes())
        print(f'built variants in {time.perf_counter() - t0:.0f} s (calibration: {calib})')
        for name, f in files.items():
            print(f'  {name:<13} {len(onnx.load(str(f)).graph.node):4d} nodes  {f.stat().st_size / 1e6:.2f} MB')

        feed = test_feed(config, ckpt)
        ref = session(src, 1, 'all').run(None, feed)
        print('\nmax |variant - fp32| on one test frame (boxes m, logits):')
        for name, (f, level) in variants.items():
            out = session(files[f], 1, level).run(None, feed)
            print(f'  {name:<13} boxes {np.abs(out[0] - ref[0]).max():.4f}  logits {np.abs(out[1] - ref[1]).max():.4f}')

        for threads in args.threads:
            cases = {name: session(files[f], threads, level) for name, (f, level) in variants.items()}
            la0 = os.getloadavg()
            times = time_interleaved(cases, feed, args.rounds, args.warmup)
            la1 = os.getloadavg()
            base = statistics.median(times['fp32'])
            print(f'\nlatency, {threads} intra-op thread(s), {args.rounds} interleaved rounds, load average '
                  f'{la0[0]:.2f} -> {la1[0]:.2f}')
            print('| variant | p50 ms | p99 ms | p50 / fp32 | paired ratio |\n| --- | ---: | ---: | ---: | ---: |')
            for name, t in times.items():
                paired = statistics.median(a / b for a, b in zip(t, times['fp32']))
                print(f'| {name} | {statistics.median(t):.2f} | {np.percentile(t, 99):.2f} | '
                      f'{statistics.median(t) / base:.3f} | {paired:.3f} |')
            del cases

        if args.eval_frames > 0:
            model, _, ck = load_checkpoint(ckpt, map_location='cpu')
            # fp32_offline / fp32_fused: same outputs as fp32 to float rounding (printed above), and ORT rewrites
            # their initializers, so the runtime's weights checksum refuses them: not scored
            acc_files = {name: files[name] for name in ('fp32', 'int8', 'int8_mlp', 'int8_qout', 'fp32_lean',
                                                        'int8_lean') if name in variants}
            t0 = time.perf_counter()
            res = evaluate_exports(model, ck, acc_files, num_frames=args.eval_frames)
            keys = list(res['fp32'])
            print(f'\naccuracy, test split, {args.eval_frames} frames ({time.perf_counter() - t0:.0f} s); '
                  f'bound |variant - fp32| <= {ACCURACY_BOUND} on avg_best_iou and AP3D@0.25')
            print('| variant | ' + ' | '.join(keys) + ' |\n| --- |' + ' ---: |' * len(keys))
            for name, h in res.items():
                delta = '' if name in ('fp32', 'pytorch') else '  (Δ ' + ', '.join(
                    f'{h[k] - res["fp32"][k]:+.4f}' for k in keys) + ')'
                print(f'| {name} | ' + ' | '.join(f'{h[k]:.4f}' for k in keys) + f' |{delta}')
    print(f'\nload average at the end {os.getloadavg()}; goal: within {ACCURACY_BOUND} at <= {GOAL_RATIO}x fp32 p50')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

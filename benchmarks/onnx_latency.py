"""Latency of the exported ViTD: STRING (cayley, circulant) vs RoPE vs no encoding, ORT vs PyTorch eager, fp16 vs fp32.

    python -m benchmarks.onnx_latency --preset tiny --threads 1 --repeats 30
    python -m benchmarks.onnx_latency --preset base --providers cuda tensorrt cpu --repeats 100

Every variant is built at the same model size from the preset (random weights: latency does not depend on values),
compiled and exported exactly as `string-perception-export` does (DeployableViTD -> ONNX, TorchScript exporter)
into a temporary directory, and loaded with the runtime's `OnnxModel` (what the node runs; warm-up at load). The
input is one generated test-split scene frame (batch --batch). Timed calls are interleaved round-robin across all
cases (the starting case rotates every round), so load from other processes hits every case alike. Ratios: of the
p50s of the same run, and 'paired' = median over rounds of the per-round ratio (robust to load drift); the goal
verdict uses the ratio of p50s. PyTorch eager runs the original (uncompiled, e.g. Cayley with its linear solve) model
with torch.set_num_threads(--threads). fp16 is exported for --fp16-variants; on the CPU provider ONNX Runtime has few
float16 kernels and inserts casts, so expect fp16 to be slower there (it is meant for CUDA / TensorRT).
Nothing here asserts on time. Goals (issue 4): STRING/RoPE <= 1.02, STRING/none <= 1.10, ORT CPU >= 1.5x eager.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from string_perception.export.deployable import DeployableViTD
from string_perception.export.metadata import build_metadata
from string_perception.export.to_onnx import export_deployable
from string_perception.export.verify import scene_frames
from string_perception.model import ViTDConfig, build_model
from string_perception.runtime.errors import ModelLoadError
from string_perception.runtime.onnx_runner import OnnxModel, normalize_provider_name

VARIANTS = ('none', 'rope', 'rope_mixed', 'cayley', 'circulant')
STRING_VARIANTS = ('cayley', 'circulant')
GOALS = {'string/rope': 1.02, 'string/none': 1.10, 'eager/ort': 1.5}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--preset', default='tiny', choices=('tiny', 'base'))
    p.add_argument('--providers', nargs='+', default=['cpu'], help='ONNX Runtime providers: cpu, cuda, tensorrt')
    p.add_argument('--threads', type=int, default=1, help='ORT intra-op and torch threads (shared CPU: keep small)')
    p.add_argument('--repeats', type=int, default=30, help='timed calls per case (interleaved)')
    p.add_argument('--warmup', type=int, default=3, help='untimed calls per case before timing')
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=VARIANTS)
    p.add_argument('--fp16-variants', nargs='*', default=['cayley'], choices=VARIANTS,
                   help='also export these in fp16 (empty: none)')
    p.add_argument('--torch-variants', nargs='*', default=['cayley'], choices=VARIANTS,
                   help='also time PyTorch eager for these (empty: none)')
    p.add_argument('--io-binding', action='store_true', help='run ORT through IO binding')
    p.add_argument('--keep', default=None, help='keep the exported files in this directory')
    return p.parse_args(argv)


def export_variant(preset: str, variant: str, precision: str, out_dir: Path) -> tuple[Path, torch.nn.Module]:
    torch.manual_seed(0)
    model = build_model(ViTDConfig.preset(preset, encoding=variant)).eval()
    path = out_dir / f'vitd_{preset}_{variant}_{precision}.onnx'
    meta = build_metadata(model.config, {}, precision=precision)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        export_deployable(DeployableViTD(model, precision), str(path), meta)
    return path, model


class Case:
    """One timed thing: a callable and its latencies (seconds)."""

    def __init__(self, name: str, fn):
        self.name, self.fn, self.times = name, fn, []

    def timed(self) -> None:
        t0 = time.perf_counter()
        self.fn()
        self.times.append(time.perf_counter() - t0)

    def p(self, q: float) -> float:
        return float(np.percentile(self.times, q)) * 1e3   # ms


def build_cases(args, out_dir: Path) -> tuple[list[Case], list[str]]:
    frames = scene_frames(ViTDConfig.preset(args.preset), count=args.batch)
    torch_inputs = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in frames)
    providers = [normalize_provider_name(p) for p in args.providers]
    cases, notes = [], []
    for variant in args.variants:
        precisions = ['fp32'] + (['fp16'] if variant in args.fp16_variants else [])
        for precision in precisions:
            t0 = time.perf_counter()
            path, model = export_variant(args.preset, variant, precision, out_dir)
            print(f'exported {path.name} in {time.perf_counter() - t0:.1f} s', file=sys.stderr)
            for prov in providers:
                short = prov.replace('ExecutionProvider', '')
                try:
                    runner = OnnxModel(path, (prov,), intra_op_threads=args.threads, cpu_fallback=False,
                                       use_io_binding=args.io_binding, trt_fp16=precision == 'fp16')
                except ModelLoadError as e:
                    reason = e.message.split('(', 1)[-1].rstrip(')')   # the per-provider reasons
                    notes.append(f'{short} {variant} {precision}: not run ({e.kind}: {reason[:200]})')
                    continue
                cases.append(Case(f'ort:{short}:{variant}:{precision}', lambda r=runner: r.run(*frames)))
            if precision == 'fp32' and variant in args.torch_variants:
                def eager(m=model):
                    with torch.no_grad():
                        m(*torch_inputs)
                cases.append(Case(f'torch:eager:{variant}:fp32', eager))
    return cases, notes


def run(cases: list[Case], repeats: int, warmup: int) -> None:
    for c in cases:
        for _ in range(warmup):
            c.fn()
    for r in range(repeats):
        k = r % len(cases)
        for c in cases[k:] + cases[:k]:
            c.timed()


def ratios(cases: list[Case]) -> list[tuple[str, float, float, float | None]]:
    """(label, p50 ratio, paired ratio, goal) for STRING vs RoPE / none per provider, eager vs ORT, fp16 vs fp32.

    The paired ratio is the median over rounds of time_a / time_b within the same round (robust to load drift)."""
    p50 = {c.name: c.p(50) for c in cases}
    times = {c.name: np.asarray(c.times) for c in cases}
    out = []

    def pair(a: str, b: str, label: str, goal: float | None) -> None:
        if a in p50 and b in p50:
            out.append((label, p50[a] / p50[b], float(np.median(times[a] / times[b])), goal))

    providers = sorted({n.split(':')[1] for n in p50 if n.startswith('ort:')})
    for prov in providers:
        def ort(v, prec='fp32'):
            return f'ort:{prov}:{v}:{prec}'
        for s in STRING_VARIANTS:
            for base, goal in (('rope', GOALS['string/rope']), ('none', GOALS['string/none'])):
                pair(ort(s), ort(base), f'{prov} {s}/{base}', goal)
        pair(ort('rope_mixed'), ort('rope'), f'{prov} rope_mixed/rope', None)
        for v in VARIANTS:
            pair(ort(v, 'fp16'), ort(v), f'{prov} {v} fp16/fp32', None)
    for name in p50:
        if name.startswith('torch:eager:'):
            v = name.split(':')[2]
            for prov in providers:
                pair(name, f'ort:{prov}:{v}:fp32', f'eager/{prov} {v} (ORT speed-up)', GOALS['eager/ort'])
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix='onnx_latency_')
    out_dir = Path(args.keep or tmp.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases, notes = build_cases(args, out_dir)
    run(cases, args.repeats, args.warmup)
    cfg = ViTDConfig.preset(args.preset)
    print(f'preset {args.preset}: {cfg.image_size[0]}x{cfg.image_size[1]}, patch {cfg.patch_size} '
          f'({cfg.num_tokens} tokens), width {cfg.width}, {cfg.depth} layers; batch {args.batch}; '
          f'threads {args.threads} (OMP_NUM_THREADS={os.environ.get("OMP_NUM_THREADS", "unset")}); '
          f'{args.repeats} interleaved repeats')
    import onnxruntime
    print(f'machine: {platform.machine()} {platform.processor() or ""} {os.cpu_count()} CPUs; '
          f'onnxruntime {onnxruntime.__version__}, torch {torch.__version__}, io_binding {args.io_binding}')
    print(f'{"case":<36} {"p50 ms":>9} {"p95 ms":>9} {"mean ms":>9}')
    for c in cases:
        print(f'{c.name:<36} {c.p(50):9.2f} {c.p(95):9.2f} {statistics.fmean(c.times) * 1e3:9.2f}')
    print(f'{"ratio":<36} {"of p50s":>9} {"paired":>9} {"goal":>9}')
    for label, value, paired, goal in ratios(cases):
        higher_is_better = label.startswith('eager')
        verdict = '' if goal is None else ('  met' if (value >= goal if higher_is_better else value <= goal)
                                           else '  missed')
        goal_s = '' if goal is None else (f'>= {goal}' if higher_is_better else f'<= {goal}')
        print(f'{label:<36} {value:9.3f} {paired:9.3f} {goal_s:>9}{verdict}')
    for n in notes:
        print('note:', n)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == '__main__':
    sys.exit(main())

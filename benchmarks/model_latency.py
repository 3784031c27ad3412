"""Batch-1 CPU latency of ONNX model files side by side (interleaved calls on the same frame).

    python -m benchmarks.model_latency models/vitd_tiny_cayley.onnx OTHER.onnx --threads 1 --repeats 200

Each file is loaded with the runtime's ``OnnxModel`` (what the node runs) and called round-robin on one generated
test-split frame at its own input size (files of different sizes, e.g. a square and a 4:3 model, each get the same
scene rendered at their size), so load from other processes hits every file alike. Prints p50 / p90 per file and
each file's p50 relative to the first. Nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from string_perception.runtime.onnx_runner import OnnxModel
from string_perception.scenes import SceneConfig, generate_frame


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('models', nargs='+')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--repeats', type=int, default=200)
    args = p.parse_args(argv)
    models = [OnnxModel(m, ('CPUExecutionProvider',), intra_op_threads=args.threads) for m in args.models]
    feeds = []
    for m in models:
        h, w = m.input_hw
        f = generate_frame(2_000_000_000, SceneConfig(height=h, width=w))
        feeds.append((f.rgb[None],                                               # [1,H,W,3] uint8
                      (f.depth_mm.astype(np.float32) * 1e-3)[None],              # [1,H,W] metres
                      f.K.astype(np.float32)[None]))                             # [1,3,3]
    times = [[] for _ in models]
    for r in range(args.repeats):
        for i in [(r + k) % len(models) for k in range(len(models))]:
            t0 = time.perf_counter()
            models[i].run(*feeds[i])
            times[i].append((time.perf_counter() - t0) * 1e3)
    base = np.median(times[0])
    for path, t in zip(args.models, times):
        print(f'{path} ({"x".join(map(str, models[args.models.index(path)].input_hw))}): p50 {np.median(t):.2f} ms, '
              f'p90 {np.percentile(t, 90):.2f} ms, x{np.median(t) / base:.3f}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

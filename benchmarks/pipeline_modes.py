"""Per-frame latency of the runtime's inference modes side by side: plain, flip test-time augmentation, tiling.

    python -m benchmarks.pipeline_modes models/vitd_workcell.onnx models/vitd_workcell_hr.onnx --threads 2

Each model runs ``runtime.Pipeline`` (what the node runs: preprocess, model, decoding) on the same 640x480
generated test-split frame; one pipeline (one ONNX Runtime session) per model switches between the modes live
(``set_params(flip_tta=...)``, ``set_tiling``), called round-robin so that load from other processes hits every
mode alike (separate sessions interleaved would also time each other's spinning thread pools). Models run one after
the other. Prints p50 / p90 of the pipeline's ``total_ms`` and each mode's p50 relative to the first mode of the
same model. Nothing here asserts on time; accuracy of the modes is the workcell evaluator's (``--flip-tta``,
``MODEL:tiles2x2``; docs/results/workcell.md).
"""
from __future__ import annotations

import argparse

import numpy as np

from string_perception.runtime import Pipeline
from string_perception.runtime.tiling import parse_tiling
from string_perception.scenes import SceneConfig, generate_frame

MODES = {'plain': (False, None), 'flip': (True, None), 'tiles2x2': (False, '2x2')}   # (flip_tta, tiling spec)


def set_mode(pipe: Pipeline, mode: str) -> Pipeline:
    """Switch ``pipe`` to ``mode`` (one of :data:`MODES`) and return it."""
    flip, tiles = MODES[mode]
    pipe.set_params(flip_tta=flip)
    pipe.set_tiling(parse_tiling(tiles) if tiles else None)
    return pipe


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('models', nargs='+')
    p.add_argument('--modes', nargs='+', default=list(MODES), choices=list(MODES))
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--repeats', type=int, default=30)
    args = p.parse_args(argv)
    f = generate_frame(2_000_000_000, SceneConfig(height=480, width=640))
    print(f'| model | mode | p50 ms | p90 ms | p50 / {args.modes[0]} |')
    print('| --- | --- | ---: | ---: | ---: |')
    for model in args.models:
        pipe = Pipeline(model, ('CPUExecutionProvider',), score_threshold=0.3, intra_op_threads=args.threads)
        times: dict[str, list[float]] = {mode: [] for mode in args.modes}
        for r in range(args.repeats):
            for k in range(len(args.modes)):
                mode = args.modes[(r + k) % len(args.modes)]
                times[mode].append(set_mode(pipe, mode)(f.rgb, f.depth_mm, f.K).timings['total_ms'])
        base = np.median(times[args.modes[0]])
        for mode, t in times.items():
            print(f'| {model} | {mode} | {np.median(t):.1f} | {np.percentile(t, 90):.1f} | {np.median(t) / base:.2f} |')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

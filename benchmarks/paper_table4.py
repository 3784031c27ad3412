"""Reproduce the STRING paper's 3D detection comparison ([STRING] §4.2.2 Table 4, App. F.4 Table 6; issue 8).

Trains ViT and ViTD x {none, rope, rope_mixed, circulant, cayley} (+ ViTD camera_xyz with the best ViTD encoding)
with one shared budget and several seeds, evaluates every run's best checkpoint (picked on validation) on the same
held-out test split, and writes to ``--out``: ``table.md`` (best and mean ± std per cell next to the paper's
numbers, which of the paper's claims hold, and whether the best ViTD run beats the shipped model, ``--reference``,
scored on the same test seeds), ``results.json`` and ``learning_curves.png``.

    python -m benchmarks.paper_table4                            # the full table: 11 configs x 3 seeds, tiny preset
    python -m benchmarks.paper_table4 --estimate                 # time 20 steps per config, project the wall time
    python -m benchmarks.paper_table4 --budget-scale 0.25 --seeds 1 --configs vit-none vitd-cayley
    python -m benchmarks.paper_table4 --device cuda --preset base --out runs/table4_base
    python -m benchmarks.paper_table4 --scenes kuka --sim mesh_object_fraction=0 --out runs/table4_kuka

The runner (configurations, budget and how it was sized, resumable run directories, subprocess jobs, the
estimate, the output files) is ``benchmarks/common/table4.py``; this is its command line.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.common.table4 import (FAMILY_CONFIGS, budget_from_args, build_parser, estimate, run_benchmark,
                                      settings_from_args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser(__doc__.split('\n\n')[0]).parse_args(argv)
    budget, settings = budget_from_args(args), settings_from_args(args)
    if args.family:
        args.configs = list(dict.fromkeys([*args.configs, *FAMILY_CONFIGS]))
    if args.estimate:
        est = estimate(args.configs, budget, settings, args.estimate_steps, args.target_hours)
        settings.out.mkdir(parents=True, exist_ok=True)
        (settings.out / 'estimate.json').write_text(json.dumps(est, indent=2) + '\n')
        return 0
    reference = None if args.reference.lower() == 'none' else Path(args.reference)
    results = run_benchmark(args.configs, budget, settings, reference, report_only=args.report_only)
    return 1 if results['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())

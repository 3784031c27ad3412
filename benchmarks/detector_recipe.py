"""Short, comparable detector-recipe runs (issue 19): same frames, same budget, one change at a time.

    python -m benchmarks.detector_recipe run dense dense_geom --steps 1500 --out runs/recipe --parallel 2
    python -m benchmarks.detector_recipe report --runs runs/recipe --out docs/results/detector_recipe.md

``run`` trains each named recipe with ``string-perception-train`` and the common settings below (one shared
8 000-frame cache file, batch 16, lr 7e-4, validation on 64 frames every 500 steps); ``--parallel 2`` runs two at a
time with one torch thread each (the 2-core machine). ``report`` scores every run's ``last.pt`` on the held-out
test split with ``string-perception-eval-checkpoint`` (strict and symmetry-aware metrics, error breakdown) and writes a
markdown table with the validation curve, the test numbers and the commands. Finished runs are skipped, so an
interrupted ``run`` resumes where it stopped (``--resume auto``).
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

COMMON = ['--preset', 'tiny', '--batch-size', '16', '--lr', '7e-4', '--num-train-frames', '8000',
          '--val-every', '500', '--val-frames', '64', '--no-progress']
DENSE = ['--assignment', 'dense']
GEOM = ['--model', 'patch_geometry=true']
RECIPES: dict[str, list[str]] = {   # name -> training options on top of COMMON; each adds one change
    'hungarian': [],
    'dense': DENSE,
    'dense_geom': DENSE + GEOM,
    'dense_geom_xyz': DENSE + GEOM + ['--coord-mode', 'camera_xyz'],
    'dense_geom_sym': DENSE + GEOM + ['--loss', 'symmetric=true'],
    'dense_geom_xyz_sym': DENSE + GEOM + ['--coord-mode', 'camera_xyz', '--loss', 'symmetric=true'],
}
HEADLINE = ('avg_best_iou', 'avg_best_iou_sym', 'avg_best_iou_agnostic_sym', 'ap3d_25_sym', 'ap3d_50_sym',
            'ap3d_25', 'op_ap3d_25_sym')


def train_command(name: str, steps: int, out: Path, cache: str, threads: int) -> list[str]:
    return [sys.executable, '-m', 'string_perception.training.train', *COMMON, *RECIPES[name],
            '--steps', str(steps), '--cache-file', cache, '--threads', str(threads), '--out', str(out / name),
            '--resume', 'auto']


def finished(run: Path) -> bool:
    return (run / 'summary.json').exists()


def cmd_run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [n for n in args.recipes if not finished(out / n)]
    threads = 1 if args.parallel > 1 else 0
    running: list[tuple[str, subprocess.Popen, float]] = []
    while todo or running:
        while todo and len(running) < args.parallel:
            name = todo.pop(0)
            cmd = train_command(name, args.steps, out, args.cache, threads)
            (out / f'{name}.cmd').write_text(' '.join(cmd[1:]) + '\n')
            log = open(out / f'{name}.log', 'a')
            running.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), time.time()))
            print(f'[recipe] started {name}', flush=True)
        time.sleep(5)
        for item in list(running):
            name, proc, t0 = item
            if proc.poll() is not None:
                running.remove(item)
                print(f'[recipe] {name} exited {proc.returncode} after {(time.time() - t0) / 60:.1f} min', flush=True)
    return 0


def val_rows(run: Path) -> list[dict]:
    path = run / 'val.csv'
    if not path.exists():
        return []
    with open(path) as f:
        return [{k: float(v) for k, v in row.items() if v not in ('', None)} for row in csv.DictReader(f)]


def evaluate(run: Path, frames: int, threshold: float) -> dict:
    dest = run / f'test{frames}'
    if not (dest / 'metrics.json').exists():
        subprocess.run([sys.executable, '-m', 'string_perception.evaluation.evaluate', str(run / 'last.pt'),
                        '--num-frames', str(frames), '--out', str(dest), '--num-draw', '0', '--no-progress',
                        '--operating-threshold', str(threshold)], check=True)
    return json.loads((dest / 'metrics.json').read_text())


def _fmt(v) -> str:
    return '' if v is None else f'{v:.3f}'


def cmd_report(args) -> int:
    runs = Path(args.runs)
    lines = ['# Detector recipe: short comparable runs', '',
             f'Written by `python -m benchmarks.detector_recipe report --runs {args.runs}` on '
             f'{time.strftime("%Y-%m-%d")}. Every run: `string-perception-train {" ".join(COMMON)} '
             '--cache-file CACHE --steps S` plus the options in the table (the same 8 000 training frames, data '
             'seed 0, init seed 0); test = the first '
             f'{args.test_frames} held-out test frames (seeds 2e9...), all boxes scoring >= 0.05 after NMS 0.3; '
             f'"op" = boxes scoring >= {args.threshold}. "sym" = symmetry-aware IoU (docs/DESIGN.md).', '',
             '| recipe | options | steps | wall min | val sym IoU @500 / @1000 / @1500 | test IoU strict '
             '| test IoU sym | sym class-agnostic | AP3D@0.25 sym | AP3D@0.5 sym | AP3D@0.25 strict '
             '| op AP3D@0.25 sym |',
             '| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |']
    details = []
    for name in args.recipes or RECIPES:
        run = runs / name
        if not (run / 'last.pt').exists():
            continue
        rows = val_rows(run)
        curve = ' / '.join(_fmt(r.get('avg_best_iou_sym')) for r in rows if int(r['step']) % 500 == 0)
        log = run / 'log.csv'
        wall = ''
        if log.exists():
            with open(log) as f:
                t = [float(r['time']) for r in csv.DictReader(f)]
            wall = f'{(t[-1] - t[0]) / 60:.0f}' if len(t) > 1 else ''
        res = evaluate(run, args.test_frames, args.threshold)
        h = res['headline']
        lines.append(f'| {name} | `{" ".join(RECIPES.get(name, ["?"]))}` | {res.get("train_step")} | {wall} | '
                     f'{curve} | ' + ' | '.join(_fmt(h.get(k)) for k in HEADLINE) + ' |')
        if 'breakdown' in res.get('metrics', {}):
            details.append((name, res['metrics']['breakdown']))
    if details:
        lines += ['', '## Error breakdown of matched pairs (test split)', '']
        for name, b in details:
            lines += [f'### {name}', '', '```json', json.dumps(b, indent=1, default=float)[:4000], '```', '']
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = p.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('run', help='train recipes')
    r.add_argument('recipes', nargs='+', choices=sorted(RECIPES))
    r.add_argument('--steps', type=int, default=1500)
    r.add_argument('--out', default='runs/recipe')
    r.add_argument('--cache', default='runs/recipe/train8k.npz', help='shared training-frame cache file')
    r.add_argument('--parallel', type=int, default=2)
    q = sub.add_parser('report', help='evaluate finished runs and write the table')
    q.add_argument('--runs', default='runs/recipe')
    q.add_argument('--recipes', nargs='*', default=None)
    q.add_argument('--test-frames', type=int, default=200)
    q.add_argument('--threshold', type=float, default=0.3, help="the node's operating threshold")
    q.add_argument('--out', default='docs/results/detector_recipe.md')
    args = p.parse_args(argv)
    return cmd_run(args) if args.cmd == 'run' else cmd_report(args)


if __name__ == '__main__':
    raise SystemExit(main())

"""Domain transfer between the procedural ray caster and the simulated workcells (issue 21): one model per training
source, each scored on the held-out test frames of every source.

    python -m benchmarks.domain_transfer run                       # the full table (see Budget), resumable
    python -m benchmarks.domain_transfer run --steps 20 --train-frames 16 --val-frames 4 --test-frames 4 \\
        --out runs/domain_smoke --results runs/domain_smoke/domain_transfer.md      # smoke configuration
    python -m benchmarks.domain_transfer report                    # re-render the markdown from OUT/results.json
    python -m benchmarks.domain_transfer run --init-from models/vitd_tiny_cayley.pt --lr 3e-4 ...   # fine-tuned table

``run`` trains ``procedural``, ``aloha``, ``kuka`` and ``mix`` (``string-perception-train --scenes``) with the
shipped model's recipe (tiny preset, ``--assignment dense --model patch_geometry=true --lr 7e-4``,
docs/results/detector_recipe.md) and one shared budget (steps, batch, training frames; ``mix`` = the same number
of frames, a third from each source by seed % 3), then scores each run's ``last.pt`` on ``--test-frames`` held-out
test frames (seeds ``[2e9, ...)``) of each test source, decoded as in validation (score >= 0.05, class-wise NMS
0.3, top 50). The table: symmetry-aware average best 3D IoU and AP3D@0.25, rows = trained on, columns = tested on.

One class list for every source: simulated frames are primitive-only (``--sim mesh_object_fraction=0``), so every
model has the five procedural classes and a cell's numbers compare like with like; the generic mesh class
``object`` exists only in the simulator and would leave the procedural column without it.

Cost of the default budget (4 x 2000 steps x 16, 8 000 training frames per source, 200 test frames per column),
from the rates measured on the 2-core machine when quiet (tiny model ~1.7 steps/s on 2 threads; simulated frames
8.9 ALOHA / 6.4 KUKA per CPU-second at 128x128, README): training ~80 min, rendering ~11 000 ALOHA + ~11 000 KUKA
frames ~50 CPU-min (~25 min on 2 workers), scoring 12 cells ~5 min: about 1.8 h wall, 3.5 CPU-hours. The smoke
configuration above took 8.5 min at load average ~9 (another training run held the cores).

``--init-from CKPT`` fine-tunes every source from one checkpoint (the workcell model's own start: the procedural
model) instead of training from scratch, and adds a row ``start``: that checkpoint scored as it is. Each row then
says what its source's frames add to the same start, at one budget.

Resumable: training runs continue from ``OUT/train_<source>/last.pt`` (``--resume auto``) and are skipped once
they reached ``--steps``; a scored cell is kept in ``OUT/cells/<train>_on_<test>.json`` and skipped when its budget
and checkpoint step match. Frames are rendered once per source into ``OUT/cache`` (spawned workers for the
simulator; fingerprinted, so a changed simulator or config re-renders).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

TRAIN_SOURCES = ('procedural', 'aloha', 'kuka', 'mix')
TEST_SOURCES = ('procedural', 'aloha', 'kuka')
RECIPE = ['--preset', 'tiny', '--assignment', 'dense', '--model', 'patch_geometry=true']   # + Budget.lr
SIM = {'mesh_object_fraction': 0.0}          # primitive-only simulated frames: one class list for all sources
DECODE = {'score_threshold': 0.05, 'nms_iou': 0.3, 'max_detections': 50}
METRICS = ('avg_best_iou_sym', 'ap3d_25_sym')
DEFAULT_RESULTS = REPO / 'docs' / 'results' / 'domain_transfer.md'


@dataclass
class Budget:
    """Shared by every training source."""
    steps: int = 2000
    batch_size: int = 16
    train_frames: int = 8000       # training seeds [0, n) of the source (mix: a third each)
    val_frames: int = 64           # validation seeds [1e9, ...) of the same source
    val_every: int = 500
    test_frames: int = 200         # test seeds [2e9, ...) of each test source
    lr: float = 7e-4               # the shipped model's from-scratch rate (docs/results/detector_recipe.md)
    init_from: str = ''            # fine-tune every source from this checkpoint ('' = from scratch)


START = 'start'                    # the row of the --init-from checkpoint itself, scored without training
FINE_TUNE_LR = 3e-4                # --lr's default with --init-from: the workcell model's stage 1


def table_rows(budget: Budget, train_sources) -> list[str]:
    """The table's rows in order: ``START`` first when the budget fine-tunes from a checkpoint, then the sources."""
    return ([START] if budget.init_from else []) + list(train_sources)


def train_argv(source: str, budget: Budget, out: Path, threads: int, workers: int) -> list[str]:
    """``string-perception-train`` options of one training source."""
    sim = [a for k, v in SIM.items() for a in ('--sim', f'{k}={json.dumps(v)}')]
    init = ['--init-from', budget.init_from] if budget.init_from else []
    return [*RECIPE, '--lr', repr(budget.lr), *init, '--scenes', source, *sim, '--steps', str(budget.steps),
            '--batch-size', str(budget.batch_size),
            '--num-train-frames', str(budget.train_frames), '--val-frames', str(budget.val_frames),
            '--val-every', str(min(budget.val_every, budget.steps)), '--num-workers', str(workers),
            '--cache-file', str(out / 'cache' / f'train_{source}_{budget.train_frames}.npz'),
            '--threads', str(threads), '--out', str(out / f'train_{source}'), '--resume', 'auto', '--no-progress']


def trained_step(run: Path) -> int:
    path = run / 'last.pt'
    if not path.exists():
        return 0
    from string_perception.training.checkpoint import load_training_checkpoint
    return int(load_training_checkpoint(path)['step'])


def train_source(source: str, budget: Budget, out: Path, threads: int, workers: int) -> dict[str, Any]:
    """Train (or resume, or skip) one source's model; returns its command and seconds spent in this call."""
    from string_perception.training.train import main as train_main
    argv = train_argv(source, budget, out, threads, workers)
    run = out / f'train_{source}'
    spent = run / 'seconds.json'            # training wall time summed over invocations (resumed runs)
    seconds = json.loads(spent.read_text())['seconds'] if spent.exists() else 0.0
    if trained_step(run) < budget.steps:
        print(f'[domain] training on {source}', flush=True)
        t0 = time.perf_counter()
        train_main(argv)
        seconds += time.perf_counter() - t0
        spent.write_text(json.dumps({'seconds': seconds}) + '\n')
    else:
        print(f'[domain] {source}: already trained to step {budget.steps}', flush=True)
    return {'command': 'string-perception-train ' + shlex.join(argv), 'seconds': seconds}


def score_cell(train: str, test: str, budget: Budget, out: Path, workers: int) -> dict[str, Any]:
    """Headline metrics of ``train``'s ``last.pt`` (``START``: the ``--init-from`` checkpoint) on ``test``'s held-out
    frames (kept in OUT/cells)."""
    from string_perception.evaluation.evaluate import load_model, source_dataset_for
    from string_perception.training.inference import evaluate_predictions, headline, predict
    ckpt_path = Path(budget.init_from) if train == START else out / f'train_{train}' / 'last.pt'
    path = out / 'cells' / f'{train}_on_{test}.json'
    step = 0 if train == START else trained_step(out / f'train_{train}')
    key = {'budget': dataclasses.asdict(budget), 'step': step, 'decode': DECODE}
    if path.exists() and (rec := json.loads(path.read_text())).get('key') == key:
        return rec
    t0 = time.perf_counter()
    model, model_cfg, ckpt = load_model(ckpt_path)
    dataset, _, sim_used, _ = source_dataset_for(model_cfg, ckpt, 'test', budget.test_frames, test, SIM)
    dataset.build_cache(processes=workers, path=out / 'cache' / f'test_{test}_{budget.test_frames}.npz')
    t1 = time.perf_counter()
    res = predict(model, dataset, batch_size=16, decode=DECODE)
    summary = evaluate_predictions(res['preds'], res['gts'], model_cfg.class_names, breakdown=False)
    rec = {'train': train, 'test': test, 'key': key, 'checkpoint': str(ckpt_path), 'class_names':
           list(model_cfg.class_names), 'sim_overrides': sim_used if test != 'procedural' else None,
           'num_frames': len(dataset), 'num_objects': int(sum(len(g['labels']) for g in res['gts'])),
           'headline': headline(summary), 'frames_seconds': t1 - t0, 'eval_seconds': time.perf_counter() - t1}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix('.tmp')
    tmp.write_text(json.dumps(rec, indent=2) + '\n')
    os.replace(tmp, path)
    print(f'[domain] {train} -> {test}: ' + ' '.join(f'{m}={rec["headline"][m]:.3f}' for m in METRICS), flush=True)
    return rec


def render(results: dict[str, Any]) -> str:
    """The markdown page: budget, command, the table (sym avg best IoU / AP3D@0.25 sym), timings."""
    b = results['budget']
    tests = results['test_sources']
    cells = {(c['train'], c['test']): c['headline'] for c in results['cells']}

    def cell(train, test):
        h = cells.get((train, test))
        if h is None:
            return '-'
        text = f'{h[METRICS[0]]:.3f} / {h[METRICS[1]]:.3f}'
        return f'**{text}**' if train == test else text

    def mean(train, metric):
        vals = [cells[(train, t)][metric] for t in tests if (train, t) in cells]
        return f'{sum(vals) / len(vals):.3f}' if len(vals) == len(tests) else '-'

    init = b.get('init_from', '')
    how = (f"fine-tuned from `{init}` (row `{START}`: that checkpoint as it is) with the shipped model's recipe "
           f"(`{' '.join(RECIPE)}`) at lr {b['lr']:g}" if init else
           f"the shipped model's recipe (`{' '.join(RECIPE)} --lr {b.get('lr', Budget.lr):g}`)")
    title = ('fine-tuned from one start (issue 38)' if init else
             'procedural ray caster vs simulated ALOHA / KUKA workcells (issue 21)')
    lines = [f'# Domain transfer: {title}', '',
             f"Date {results['date']}; {results['machine']}; 1-min load average {results['load_average']:.1f} at "
             f"the end.", '',
             '```bash', results['command'], '```', '',
             f"Every model: {how}, {b['steps']} steps x batch "
             f"{b['batch_size']}, {b['train_frames']} training frames of its source (mix: a third each, by seed % 3), "
             f"validation on {b['val_frames']} frames of its source; scored at `last.pt` on {b['test_frames']} "
             'held-out test frames (seeds 2e9 ...) per column, all boxes scoring >= 0.05 after class-wise NMS 0.3. '
             'Simulated frames are primitive-only (`--sim mesh_object_fraction=0`) so that every model and column '
             'shares the five procedural classes.', '',
             'Cells: symmetry-aware average best 3D IoU / AP3D@0.25 (symmetry-aware); rows = trained on, columns = '
             'tested on; in-domain in bold.', '',
             '| trained on \\ tested on | ' + ' | '.join(tests) + ' | mean IoU | mean AP |',
             '| --- |' + ' --- |' * (len(tests) + 2)]
    rows = ([START] if any(c['train'] == START for c in results['cells']) else []) + list(results['train_sources'])
    for train in rows:
        lines.append(f'| {train} | ' + ' | '.join(cell(train, t) for t in tests)
                     + f' | {mean(train, METRICS[0])} | {mean(train, METRICS[1])} |')
    lines += ['', 'Training wall time per source (cache rendering included): '
              + ', '.join(f"{s} {t['seconds'] / 60:.1f} min" for s, t in results['training'].items())
              + f"; scoring {sum(c['eval_seconds'] + c['frames_seconds'] for c in results['cells']) / 60:.1f} min "
              f"(test frames rendered once per source, then cached); wall time of the last invocation "
              f"{results['wall_seconds'] / 60:.1f} min.",
              '']
    return '\n'.join(lines)


def collect(out: Path, budget: Budget, trains, tests, training: dict, wall_s: float, command: str) -> dict:
    import platform
    cells = [json.loads((out / 'cells' / f'{tr}_on_{te}.json').read_text()) for tr in table_rows(budget, trains)
             for te in tests
             if (out / 'cells' / f'{tr}_on_{te}.json').exists()]
    return {'budget': dataclasses.asdict(budget), 'train_sources': list(trains), 'test_sources': list(tests),
            'cells': cells, 'training': training, 'wall_seconds': wall_s, 'command': command,
            'date': time.strftime('%Y-%m-%d'), 'load_average': os.getloadavg()[0],
            'machine': f'{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), no GPU'}


def cmd_run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.steps, args.batch_size, args.train_frames, args.val_frames, args.val_every, args.test_frames,
                    args.lr if args.lr is not None else (FINE_TUNE_LR if args.init_from else Budget.lr),
                    args.init_from)
    check_same_budget(out, budget)
    t0 = time.perf_counter()
    training = {s: train_source(s, budget, out, args.threads, args.workers) for s in args.train_sources}
    for train in table_rows(budget, args.train_sources):
        for test in args.test_sources:
            score_cell(train, test, budget, out, args.workers)
    command = 'python -m benchmarks.domain_transfer ' + shlex.join(sys.argv[1:] if args.argv is None else args.argv)
    results = collect(out, budget, args.train_sources, args.test_sources, training, time.perf_counter() - t0,
                      command)
    (out / 'results.json').write_text(json.dumps(results, indent=2) + '\n')
    write_page(results, Path(args.results))
    return 0


def check_same_budget(out: Path, budget: Budget) -> None:
    """OUT holds the runs of one budget: resuming them under another (steps, start, rate...) would mix two tables."""
    path = out / 'budget.json'
    want = dataclasses.asdict(budget)
    if path.exists() and (have := json.loads(path.read_text())) != want:
        diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
        raise SystemExit(f'{out} holds runs of another budget (field: (there, asked)): {diff}; use another --out')
    path.write_text(json.dumps(want, indent=2) + '\n')


def write_page(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(results))
    print(f'[domain] wrote {path}', flush=True)


def cmd_report(args) -> int:
    write_page(json.loads((Path(args.out) / 'results.json').read_text()), Path(args.results))
    return 0


def build_parser() -> argparse.ArgumentParser:
    d = Budget()
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest='cmd', required=True)
    run = sub.add_parser('run', help='train every source, score every cell (resumable), write the page')
    report = sub.add_parser('report', help='re-render the page from OUT/results.json')
    for q in (run, report):
        q.add_argument('--out', default='runs/domain_transfer', help='runs, caches, cells and results.json')
        q.add_argument('--results', default=str(DEFAULT_RESULTS), help='markdown page to write')
    run.add_argument('--steps', type=int, default=d.steps)
    run.add_argument('--batch-size', type=int, default=d.batch_size)
    run.add_argument('--train-frames', type=int, default=d.train_frames, help='per training source')
    run.add_argument('--val-frames', type=int, default=d.val_frames)
    run.add_argument('--val-every', type=int, default=d.val_every)
    run.add_argument('--test-frames', type=int, default=d.test_frames, help='per test source')
    run.add_argument('--train-sources', nargs='+', default=list(TRAIN_SOURCES), choices=TRAIN_SOURCES)
    run.add_argument('--test-sources', nargs='+', default=list(TEST_SOURCES), choices=TRAIN_SOURCES)
    run.add_argument('--init-from', default='', help='fine-tune every source from this checkpoint (adds the row '
                     f'{START!r}: it scored as it is); default: from scratch')
    run.add_argument('--lr', type=float, default=None, help=f'peak learning rate (default {Budget.lr:g} from scratch, '
                     f'{FINE_TUNE_LR:g} with --init-from: the workcell model\'s stage 1)')
    run.add_argument('--threads', type=int, default=2, help='torch CPU threads for training')
    run.add_argument('--workers', type=int, default=2, help='processes rendering frames into the caches')
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = argv
    return cmd_run(args) if args.cmd == 'run' else cmd_report(args)


if __name__ == '__main__':
    sys.exit(main())

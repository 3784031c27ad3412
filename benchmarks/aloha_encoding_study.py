"""Which position encoding makes the better policy encoder? Issue 23 item 3 on the two-stage transfer-cube policy.

    python -m benchmarks.aloha_encoding_study run --detector /work/runs/table4_recipe/runs/vitd-cayley/seed1/best.pt \
        --privileged runs/aloha_policy/privileged/best.pt --out runs/aloha_encoding/vitd-cayley-seed1
    python -m benchmarks.aloha_encoding_study report runs/aloha_encoding/* --out docs/results/aloha_encoding

``run`` takes one ViTD detector (a Table-4 run's best.pt: every encoding trained with the same recipe, frames and
budget) and, for each probe seed: trains the cube localiser on its frozen tokens
(``string-perception-train-localiser``, policy/train_localiser.py: 1 000 reset seeds, embedding only, as the
perception ONNX publishes it), saves it along the way (``--save-at``), exports each saved localiser with the
privileged chunk head as the deployable ONNX pair (policy/export.export_two_stage) and runs the pair closed loop on
the held-out evaluation seeds (``benchmarks.aloha_policy eval``). The privileged chunk head is the same for every
encoding (trained on the true cube position, never on an image), so what differs is only how well each encoder's
embedding localises the cube. Resumable: a probe with ``probe.json`` and an evaluation with its JSON are skipped.

``report`` collects the ``run`` directories into a table (success over the evaluation seeds per encoding:
mean and spread over probe seeds, at every saved step; the probe's held-out error; the detector's own Table-4 IoU)
and a success-vs-probe-step plot (the paper's Fig. 4 analogue).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402

from benchmarks import aloha_policy  # noqa: E402
from benchmarks.common.study_report import write_study_report  # noqa: E402
from string_perception.policy import train_localiser  # noqa: E402

RESULT_FILE = 'study.json'
PROBE_NAME = re.compile(r'probe_n(\d+)_seed(\d+)_step(\d+)\.pt$')


def _detector_info(checkpoint: Path) -> dict:
    """The detector's encoding (its config) and, when it is a Table-4 run, its seed and test metrics."""
    import torch
    ck = torch.load(checkpoint, map_location='cpu', weights_only=True)
    cfg = ck.get('config') or {}
    info = {'checkpoint': str(checkpoint), 'encoding': cfg.get('encoding'), 'use_depth': cfg.get('use_depth'),
            'coord_mode': cfg.get('coord_mode')}
    run = checkpoint.parent
    if (run / 'test.json').exists():                                   # benchmarks/common/table4.py's run layout
        test = json.loads((run / 'test.json').read_text())
        info.update(table4_config=run.parent.name, detector_seed=int(test['seed']),
                    detector_test={k: test['test'][k] for k in ('avg_best_iou', 'avg_best_iou_sym')})
    return info


def cmd_run(args) -> int:
    from string_perception.policy.export import export_two_stage
    out = Path(args.out)
    probe_dir = out / 'probe'
    t0 = time.perf_counter()
    if not (probe_dir / 'probe.json').exists():
        train_localiser.main(['--encoder-checkpoint', str(args.detector), '--train-seeds', args.train_seeds,
                           '--test-seeds', args.test_seeds, '--sizes', str(args.train_size), '--pool-points', 'false',
                           '--steps', str(args.steps), '--probe-seeds', *map(str, args.probe_seeds),
                           '--save-at', *map(str, args.save_at), '--threads', str(args.threads),
                           '--processes', str(args.processes), '--out', str(probe_dir)])
    probe = json.loads((probe_dir / 'probe.json').read_text())
    rows = []
    for ckpt in sorted(probe_dir.glob('probe_n*_seed*_step*.pt')):
        n, probe_seed, step = (int(g) for g in PROBE_NAME.search(ckpt.name).groups())
        tag = f'seed{probe_seed}_step{step}'
        result = out / 'eval' / f'{tag}.json'
        if not result.exists():
            onnx_dir = out / 'onnx' / tag
            export_two_stage(args.privileged, ckpt, onnx_dir, log=lambda *_: None)
            result.parent.mkdir(parents=True, exist_ok=True)
            aloha_policy.main(['eval', '--perception', str(onnx_dir / 'perception.onnx'),
                               '--policy', str(onnx_dir / 'policy.onnx'), '--seeds', args.eval_seeds,
                               '--processes', str(args.processes), '--out', str(result)])
        summary = json.loads(result.read_text())['summary']
        probe_row = next((r for r in probe['rows'] if r['probe_seed'] == probe_seed), {})
        along = {a['step']: a for a in probe_row.get('along', [])}
        err = along.get(step, probe_row if step == probe_row.get('steps') else {})
        rows.append(dict(probe_seed=probe_seed, step=step, train_seeds=n, success=summary['success'],
                         episodes=summary['episodes'], reached=summary['reached'],
                         probe_test_median_cm=err.get('test_median_cm')))
    eval_cpu_s = sum(e['cpu_s'] for f in (out / 'eval').glob('*.json') for e in json.loads(f.read_text())['episodes'])
    study = {'detector': _detector_info(Path(args.detector)), 'privileged': str(args.privileged), 'rows': rows,
             'cpu_s': {'probe_encode': probe['encode_cpu_s'], 'probe_train': probe['probe_cpu_s'],
                       'eval_episodes': eval_cpu_s, 'render_start_frames_wall': probe['render_wall_s']},
             'wall_s_this_call': time.perf_counter() - t0, 'load_avg': os.getloadavg()[0],
             'args': {k: str(v) for k, v in vars(args).items()}}
    (out / RESULT_FILE).write_text(json.dumps(study, indent=1))
    print(json.dumps({k: v for k, v in study.items() if k != 'rows'}), flush=True)
    return 0


def collect(dirs) -> list[dict]:
    """Every run directory's rows, each with its detector's table-4 config, encoding and seed."""
    out = []
    for d in dirs:
        f = Path(d) / RESULT_FILE
        if not f.exists():
            continue
        study = json.loads(f.read_text())
        det = study['detector']
        for r in study['rows']:
            out.append(dict(r, config=det.get('table4_config') or det.get('encoding'), encoding=det.get('encoding'),
                            detector_seed=det.get('detector_seed'),
                            detector_iou_sym=(det.get('detector_test') or {}).get('avg_best_iou_sym')))
    return out


def sample_sd(values) -> float:
    """Sample standard deviation (0 for a single value)."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def table_lines(rows: list[dict]) -> list[str]:
    """Markdown: per (config, detector seed) the success per probe seed at every saved step, and the mean."""
    steps = sorted({r['step'] for r in rows})
    groups = sorted({(r['config'], r['detector_seed'] if r['detector_seed'] is not None else -1) for r in rows})
    head = '| detector (Table-4 run) | its test IoU (sym) | probe seed | ' + ' | '.join(f'step {s}' for s in steps)
    lines = [head + ' | held-out error at the last step (cm) |',
             '| --- | ---: | ---: | ' + ' | '.join('---:' for _ in steps) + ' | ---: |']
    for config, dseed in groups:
        g = [r for r in rows if r['config'] == config and (r['detector_seed'] if r['detector_seed'] is not None
                                                            else -1) == dseed]
        iou = g[0]['detector_iou_sym']
        iou_s = '' if iou is None else f'{100 * iou:.1f} %'
        name = f'{config} seed {dseed}' if dseed >= 0 else config
        for ps in sorted({r['probe_seed'] for r in g}):
            by_step = {r['step']: r for r in g if r['probe_seed'] == ps}
            cells = [f'{by_step[s]["success"]}/{by_step[s]["episodes"]}' if s in by_step else '' for s in steps]
            last = by_step[max(by_step)]['probe_test_median_cm']
            lines.append(f'| {name} | {iou_s} | {ps} | ' + ' | '.join(cells)
                         + f' | {"" if last is None else f"{last:.2f}"} |')
        means = []
        for s in steps:
            v = [r['success'] / r['episodes'] for r in g if r['step'] == s]
            means.append(f'**{100 * np.mean(v):.0f} %** ± {100 * sample_sd(v):.0f}' if v else '')
        lines.append(f'| {name} | | mean ± sd | ' + ' | '.join(means) + ' | |')
    return lines


def summary_lines(rows: list[dict]) -> list[str]:
    """Markdown: per configuration, success at the last saved step over every (detector seed, probe seed) pair,
    and over detectors (each detector weighted once: the mean of its probe seeds)."""
    last = max(r['step'] for r in rows)
    lines = [f'| detector config | detectors (seeds) | probes | success at step {last}: mean ± sd over policies '
             '| min-max | mean ± sd over detectors | held-out localisation error (cm, mean of medians) |',
             '| --- | --- | ---: | ---: | ---: | ---: | ---: |']
    for config in sorted({r['config'] for r in rows}):
        g = [r for r in rows if r['config'] == config and r['step'] == last]
        if not g:
            continue
        rates = [100 * r['success'] / r['episodes'] for r in g]
        detectors = sorted({r['detector_seed'] for r in g}, key=str)
        err = [r['probe_test_median_cm'] for r in g if r['probe_test_median_cm'] is not None]
        per_detector = [np.mean([x for x, r in zip(rates, g) if r['detector_seed'] == d])
                        for d in detectors]                                       # each detector's probe mean
        lines.append(f'| {config} | {len(detectors)} ({", ".join(map(str, detectors))}) | {len(g)} | '
                     f'**{np.mean(rates):.0f} %** ± {sample_sd(rates):.0f} | {min(rates):.0f}-{max(rates):.0f} % | '
                     f'{np.mean(per_detector):.0f} % ± {sample_sd(per_detector):.0f} | {np.mean(err):.2f} |')
    return lines


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for config, dseed in sorted({(r['config'], r['detector_seed']) for r in rows}, key=str):
        g = [r for r in rows if r['config'] == config and r['detector_seed'] == dseed]
        steps = sorted({r['step'] for r in g})
        rates = [[100 * r['success'] / r['episodes'] for r in g if r['step'] == s] for s in steps]
        m, sd = np.array([np.mean(v) for v in rates]), np.array([sample_sd(v) for v in rates])
        ax.plot(steps, m, marker='o', label=config if dseed is None else f'{config} (detector seed {dseed})')
        ax.fill_between(steps, m - sd, m + sd, alpha=0.2)
    ax.set_xlabel('probe training step')
    ax.set_ylabel('transfer-cube success (%)')
    ax.set_title('two-stage policy: success vs localiser training step')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_report(args) -> int:
    rows = collect(args.dirs)
    if not rows:
        raise SystemExit(f'no {RESULT_FILE} in {args.dirs}')
    return write_study_report(args.out, summary_lines(rows) + [''] + table_lines(rows), rows, 'rows.json',
                              lambda path: plot(rows, path))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('run', help='probe + export + closed-loop evaluation for one detector')
    r.add_argument('--detector', required=True, help='a ViTD detector checkpoint (e.g. a Table-4 run\'s best.pt)')
    r.add_argument('--out', required=True)
    r.add_argument('--probe-seeds', type=int, nargs='+', default=[0, 1, 2])
    r.add_argument('--steps', type=int, default=6000, help='probe steps')
    r.add_argument('--save-at', type=int, nargs='*', default=[1500, 3000], help='also evaluate the probe here')
    r.add_argument('--train-size', type=int, default=1000)
    aloha_policy.add_study_arguments(r)
    p = sub.add_parser('report', help='table + success-vs-step plot over run directories')
    p.add_argument('dirs', nargs='+')
    p.add_argument('--out', required=True)
    args = ap.parse_args(argv)
    return {'run': cmd_run, 'report': cmd_report}[args.cmd](args)


if __name__ == '__main__':
    raise SystemExit(main())

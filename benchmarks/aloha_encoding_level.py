"""The encoding comparison with the controller at ACT's level (issue 39 item 3): none / RoPE / Cayley-STRING detectors.

    python -m benchmarks.aloha_encoding_level run --detector-run runs/table4_recipe/runs/vitd-cayley/seed0 \
        --privileged runs/vision/privileged/best.pt --frames runs/vision/ft/frames_0_1000.npz \
        --out runs/enc39/vitd-cayley-seed0
    python -m benchmarks.aloha_encoding_level report runs/enc39/vitd-* --out docs/results/aloha_encoding_level

The earlier comparison (``aloha_encoding_study.py``, docs/results/aloha_encoding.md) ran every encoder with a chunk
head that succeeded 29 / 50 times even when handed the cube's true position. Here the chunk head is the shipped
pair's (50 / 50 on the true position, docs/results/aloha_privileged.md) and each detector goes through the recipe
that made the shipped vision pair: ``run`` does, for one Table-4 detector run (every encoding trained alike),

1. **frozen**: the cube localiser on the detector's frozen tokens (``aloha_encoding_study run``: probe seed 0,
   6 000 steps, the embedding only), exported with the chunk head and run closed loop on the evaluation seeds;
2. **trained**: that localiser continued with the whole ViTD trained on the same loss (``aloha_finetune_study run
   --arms finetuned``: 1 000 steps, encoder lr 3e-5, 100 warm-up steps, cosine), exported and run closed loop at
   ``--save-at`` steps and at the end; the network is also scored as a detector on its Table-4 test split.

Both steps are the existing studies' own commands (resumable: what exists is skipped), written into
``OUT/frozen`` and ``OUT/trained``. ``report`` collects run directories into one table per detector and per
encoding (mean ± sample sd over detectors) and a success-vs-step plot (frozen probe, then the trained steps).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks import aloha_encoding_study, aloha_finetune_study, aloha_policy
from benchmarks.aloha_encoding_study import sample_sd
from benchmarks.common.study_report import write_study_report
from string_perception.policy import train_localiser

ENCODING_ORDER = ('vitd-none', 'vitd-rope', 'vitd-cayley', 'vitd-circulant')


def cmd_run(args) -> int:
    run = Path(args.detector_run)
    out = Path(args.out)
    common = ['--privileged', args.privileged, '--train-seeds', args.train_seeds, '--test-seeds', args.test_seeds,
              '--eval-seeds', args.eval_seeds, '--threads', str(args.threads), '--processes', str(args.processes)]
    aloha_encoding_study.main(['run', '--detector', str(run / 'best.pt'), '--out', str(out / 'frozen'),
                               '--probe-seeds', '0', '--steps', str(args.probe_steps), '--train-size',
                               str(args.train_size), '--save-at', *common])
    probe = out / 'frozen' / 'probe' / train_localiser.probe_file_name(args.train_size, 0, args.probe_steps)
    aloha_finetune_study.main(['run', '--localiser', str(probe), '--frames', args.frames, '--detector-run', str(run),
                               '--out', str(out / 'trained'), '--arms', 'finetuned', '--steps', str(args.steps),
                               '--save-at', *map(str, args.save_at), *common])
    return 0


def load_run(d: Path) -> dict | None:
    """One run directory -> {config, seed, detector IoU, frozen row, trained rows}; None while unfinished."""
    frozen_f = d / 'frozen' / aloha_encoding_study.RESULT_FILE
    trained_f = d / 'trained' / aloha_finetune_study.RESULT_FILE
    if not (frozen_f.exists() and trained_f.exists()):
        return None
    frozen, trained = json.loads(frozen_f.read_text()), json.loads(trained_f.read_text())
    det = frozen['detector']
    probe = max(frozen['rows'], key=lambda r: r['step'])
    rows = sorted(trained['rows'], key=lambda r: r['step'])
    return dict(config=det.get('table4_config') or det.get('encoding'), seed=det.get('detector_seed'),
                detector_iou_sym=(det.get('detector_test') or {}).get('avg_best_iou_sym'),
                frozen=dict(success=_max_reward_successes(d / 'frozen' / 'eval' / f'seed{probe["probe_seed"]}_step'
                                                          f'{probe["step"]}.json'),
                            success_last=probe['success'], episodes=probe['episodes'],
                            error_cm=probe['probe_test_median_cm']),
                trained=[dict(step=r['step'], episodes=r['episodes'], success_last=r['success'],
                              success=_max_reward_successes(d / 'trained' / r['arm'] / 'eval' / f'step{r["step"]}.json'),
                              error_cm=r['test_median_cm'], p90_cm=r['test_p90_cm'],
                              detection_iou_sym=(r.get('detection_test') or {}).get('avg_best_iou_sym'))
                         for r in rows])


def _max_reward_successes(eval_file: Path) -> int:
    """Episodes of one closed-loop evaluation that reached reward 4 at any step (gym-aloha's rule, the one ACT's
    numbers use); the studies' own ``success`` is reward 4 at the last step."""
    return int(json.loads(eval_file.read_text())['summary']['success_max'])


def _order(config: str) -> tuple:
    return (ENCODING_ORDER.index(config) if config in ENCODING_ORDER else len(ENCODING_ORDER), config)


def _pct(runs: list[dict], get) -> str:
    v = [100 * get(r) for r in runs]
    return f'**{np.mean(v):.0f} %** ± {sample_sd(v):.0f}' if v else ''


def summary_lines(runs: list[dict]) -> list[str]:
    """Per encoding: success (max-reward rule) with the frozen encoder and at the trained arm's last step, mean ±
    sample sd over detectors, and the held-out localisation errors."""
    lines = ['| encoder | detectors (seeds) | detection IoU (test, sym.) | frozen: success | trained: success | '
             'frozen: held-out error (cm) | trained: held-out error (cm) |',
             '| --- | --- | ---: | ---: | ---: | ---: | ---: |']
    for config in sorted({r['config'] for r in runs}, key=_order):
        g = sorted((r for r in runs if r['config'] == config), key=lambda r: r['seed'])
        iou = [r['detector_iou_sym'] for r in g if r['detector_iou_sym'] is not None]
        lines.append(f'| {config} | {len(g)} ({", ".join(str(r["seed"]) for r in g)}) | '
                     f'{100 * np.mean(iou):.1f} % | '
                     f'{_pct(g, lambda r: r["frozen"]["success"] / r["frozen"]["episodes"])} | '
                     f'{_pct(g, lambda r: r["trained"][-1]["success"] / r["trained"][-1]["episodes"])} | '
                     f'{np.mean([r["frozen"]["error_cm"] for r in g]):.2f} | '
                     f'{np.mean([r["trained"][-1]["error_cm"] for r in g]):.2f} |')
    return lines


def detail_lines(runs: list[dict]) -> list[str]:
    """Per detector: frozen probe, then every trained step: successes by the max-reward rule of the episodes (in
    brackets: at the last step; the held-out localisation error, median)."""
    steps = sorted({t['step'] for r in runs for t in r['trained']})
    lines = ['| detector (Table-4 run) | its test IoU (sym.) | frozen probe | '
             + ' | '.join(f'trained {s}' for s in steps) + ' | detection IoU after |',
             '| --- | ---: | ---: | ' + ' | '.join('---:' for _ in steps) + ' | ---: |']
    for r in sorted(runs, key=lambda r: (_order(r['config']), r['seed'])):
        f = r['frozen']
        by_step = {t['step']: t for t in r['trained']}
        cells = [f'{by_step[s]["success"]}/{by_step[s]["episodes"]} ({by_step[s]["success_last"]}; '
                 f'{by_step[s]["error_cm"]:.2f} cm)' if s in by_step else '' for s in steps]
        after = r['trained'][-1]['detection_iou_sym']
        lines.append(f'| {r["config"]} seed {r["seed"]} | {100 * r["detector_iou_sym"]:.1f} % | '
                     f'{f["success"]}/{f["episodes"]} ({f["success_last"]}; {f["error_cm"]:.2f} cm) | '
                     + ' | '.join(cells)
                     + f' | {"" if after is None else f"{100 * after:.1f} %"} |')
    return lines


def plot(runs: list[dict], path: Path) -> None:
    """Success vs encoder-training step (0 = the frozen probe), mean ± sd over detectors, one line per encoding."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for config in sorted({r['config'] for r in runs}, key=_order):
        g = [r for r in runs if r['config'] == config]
        steps = [0] + sorted({t['step'] for r in g for t in r['trained']})
        rates = [[100 * r['frozen']['success'] / r['frozen']['episodes'] for r in g]]
        rates += [[100 * t['success'] / t['episodes'] for r in g for t in r['trained'] if t['step'] == s]
                  for s in steps[1:]]
        m, sd = np.array([np.mean(v) for v in rates]), np.array([sample_sd(v) for v in rates])
        ax.plot(steps, m, marker='o', label=f'{config} ({len(g)} detector{"s" if len(g) > 1 else ""})')
        ax.fill_between(steps, m - sd, m + sd, alpha=0.2)
    ax.set_xlabel('steps of training the encoder with the policy (0 = frozen encoder)')
    ax.set_ylabel('transfer-cube success (%)')
    ax.set_ylim(0, 100)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_report(args) -> int:
    runs = [r for r in (load_run(Path(d)) for d in args.dirs) if r is not None]
    if not runs:
        raise SystemExit(f'no finished run in {args.dirs}')
    return write_study_report(args.out, summary_lines(runs) + [''] + detail_lines(runs), runs, 'runs.json',
                              lambda path: plot(runs, path))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('run', help='frozen probe + encoder trained with the policy, for one detector run')
    r.add_argument('--detector-run', required=True, help='a Table-4 run directory (best.pt, test.json, spec.json)')
    r.add_argument('--frames', required=True, help='npz cache of the start frames (aloha_finetune_study)')
    r.add_argument('--out', required=True)
    r.add_argument('--probe-steps', type=int, default=6000)
    r.add_argument('--train-size', type=int, default=1000, help='training seeds of the localiser (of --train-seeds)')
    r.add_argument('--steps', type=int, default=1000, help='steps of training the encoder with the policy')
    r.add_argument('--save-at', type=int, nargs='*', default=[250, 500])
    aloha_policy.add_study_arguments(r)           # --privileged (the shipped pair's head: 50/50 on the truth), seeds
    p = sub.add_parser('report', help='table + plot over run directories')
    p.add_argument('dirs', nargs='+')
    p.add_argument('--out', required=True)
    args = ap.parse_args(argv)
    return {'run': cmd_run, 'report': cmd_report}[args.cmd](args)


if __name__ == '__main__':
    raise SystemExit(main())

"""Why the privileged transfer-cube policy fails, and what fixes it (issue 39, item 1): physics only, no rendering.

    python -m benchmarks.aloha_privileged record --episodes 505 --out /work/runs/policy/demos
    python -m benchmarks.aloha_privileged variant baseline --policy-seeds 0       # train + evaluate, resumable
    python -m benchmarks.aloha_privileged variant baseline --policy-seeds 0 1 2
    python -m benchmarks.aloha_privileged eval /work/runs/policy/baseline/s0/best.pt --query-every 1
    python -m benchmarks.aloha_privileged table                                   # markdown rows of every run

A variant (VARIANTS) is a set of PolicyConfig overrides for training (string_perception/policy/train_bc.py) and
RolloutConfig overrides for the closed loop; it is trained once per policy seed under --root/<variant>/s<seed>/
(skipped when last.pt has reached the step count) and evaluated on the held-out seeds 1000-1049 (skipped when
eval.json exists). Demos are the scripted demonstrator (physics only, no frames: policy/privileged.PrivilegedActor
reads no image) on seeds 0.., one npz each, recorded once (existing files are kept). Episodes are scored by both
success rules and put in one failure category each (sim/demos/outcomes.py). Run with `nice -n 10`: one thread.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

os.environ.setdefault('LP_NUM_THREADS', '1')

import numpy as np  # noqa: E402
import torch  # noqa: E402

from string_perception.cli import parse_seed_range  # noqa: E402
from string_perception.policy.config import PolicyConfig  # noqa: E402
from string_perception.policy.privileged import PrivilegedActor  # noqa: E402
from string_perception.policy.train_bc import train  # noqa: E402
from string_perception.sim.demos.outcomes import (outcome_counts, success_last_step,  # noqa: E402
                                                  success_max_reward)
from string_perception.sim.demos.rollout import RolloutConfig, record_demonstration, run_episode  # noqa: E402
from string_perception.sim.demos.scripted import TransferScript  # noqa: E402
from string_perception.sim.demos.tasks import TASK_NAMES, get_task  # noqa: E402

ROOT = Path('/work/runs/policy')
EVAL_SEEDS = '1000:1050'

# name -> (what changed, the variant it changes (None: BASE), PolicyConfig overrides, RolloutConfig overrides): ONE
# change on top of its parent. 'baseline' is today's recipe (docs/results/aloha_policy.md): 45 train demos + 5 for
# validation, samples at every 4th step, K 50, query every 10, m 0.01, 3000 steps. A variant that changes only the
# rollout evaluates its parent's checkpoints.
BASE = dict(observation='privileged', episodes=50, steps=3000)
VARIANTS: dict[str, tuple[str, str | None, dict, dict]] = {
    'baseline': ('today: 45 demos, every 4th step, K 50, query every 10, m 0.01, 3000 steps', None, {}, {}),
    'query1': ('query every step (ACT)', 'baseline', {}, {'query_every': 1}),
    'every1': ('samples at every step instead of every 4th', 'baseline', {'sample_every': 1}, {}),
    'demos200': ('200 train demos', 'baseline', {'episodes': 205}, {}),
    'demos500': ('500 train demos', 'baseline', {'episodes': 505}, {}),
    'steps10k': ('10000 training steps instead of 3000', 'baseline', {'steps': 10000}, {}),
    'chunk100': ('K 100 (ACT) instead of 50', 'baseline', {'chunk_size': 100}, {}),
    'chunk20': ('K 20 instead of 50', 'baseline', {'chunk_size': 20}, {}),
    'wide': ('head 1024 wide, 4 layers', 'baseline', {'hidden': 1024, 'layers': 4}, {}),
    'nodropout': ('dropout 0 instead of 0.1', 'baseline', {'dropout': 0.0}, {}),
    'pitch45': ('demonstrator turns the right wrist first (TransferScript.t_pitch 45): one IK branch',
                'baseline', {'demos': 'demos_pitch45'}, {}),
    'pitch45_wide': ('pitch45 + head 1024 wide, 4 layers', 'pitch45', {'hidden': 1024, 'layers': 4}, {}),
    'pitch45_10k': ('pitch45 + 10000 steps', 'pitch45', {'steps': 10000}, {}),
    'pitch45_query1': ('pitch45, query every step', 'pitch45', {}, {'query_every': 1}),
    # insertion (item 5): peg + socket start positions (6-D) instead of the cube's; its demos in demos_insertion
    'ins_baseline': ('insertion: the transfer-cube recipe (45 demos, every 4th step, K 50, query every 10, m 0.01, '
                     '3000 steps)', None, {'task': 'insertion', 'demos': 'demos_insertion'}, {}),
    'ins_demos200': ('200 train demos', 'ins_baseline', {'episodes': 205}, {}),
    'ins_demos500': ('500 train demos', 'ins_baseline', {'episodes': 505}, {}),
    'ins_query1': ('query every step (ACT)', 'ins_baseline', {}, {'query_every': 1}),
    'ins_wide': ('head 1024 wide, 4 layers', 'ins_baseline', {'hidden': 1024, 'layers': 4}, {}),
    'ins_steps10k': ('10000 training steps instead of 3000', 'ins_baseline', {'steps': 10000}, {}),
}


def resolve(name: str) -> tuple[dict, dict, str]:
    """(PolicyConfig overrides, RolloutConfig overrides, the variant whose checkpoints it evaluates) of a variant,
    its parents' changes included."""
    what, parent, train_over, roll_over = VARIANTS[name]
    if parent is None:
        return dict(train_over), dict(roll_over), name
    t, r, trained_as = resolve(parent)
    return {**t, **train_over}, {**r, **roll_over}, (name if train_over else trained_as)


def demo_path(out: Path, seed: int) -> Path:
    return out / f'demo_{seed:06d}.npz'


def cmd_record(args) -> int:
    """Physics-only scripted demos on seeds first..first+episodes-1; existing files are kept (resumable)."""
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = RolloutConfig(task=args.task, render=False)
    script = TransferScript(t_pitch=args.t_pitch) if args.task == 'transfer_cube' else None
    done, failed, c0 = 0, [], time.process_time()
    for seed in range(args.first_seed, args.first_seed + args.episodes):
        p = demo_path(args.out, seed)
        if p.exists():
            continue
        demo = record_demonstration(seed, args.frame_every, cfg, script, action_noise_std=args.action_noise)
        tmp = p.with_name('tmp_' + p.name)                 # not a demo_*.npz until complete
        np.savez_compressed(tmp, **demo)
        tmp.replace(p)
        done += 1
        if not demo['success']:
            failed.append(seed)
    print(json.dumps(dict(recorded=done, failed_seeds=failed, cpu_s=round(time.process_time() - c0, 1))))
    return 0


def evaluate(checkpoint, seeds: range, rollout_overrides: dict) -> dict:
    """Closed-loop episodes of a privileged checkpoint -> {'summary', 'episodes'} (both success rules, outcomes)."""
    actor = PrivilegedActor(checkpoint)
    cfg = actor.rollout_config(**rollout_overrides)
    task = get_task(cfg.task)
    rows, c0 = [], time.process_time()
    for seed in seeds:
        r = run_episode(seed, actor, cfg)
        rows.append(dict(seed=seed, max_reward=r.max_reward, final_reward=int(r.rewards[-1]),
                         success_max=success_max_reward(r.rewards), success_last=success_last_step(r.rewards),
                         outcome=task.outcome(r.rewards),
                         first_step={k: int(np.argmax(r.rewards >= k)) if (r.rewards >= k).any() else None
                                     for k in range(1, 5)}))
    n = len(rows)
    summary = dict(episodes=n, success_max=sum(r['success_max'] for r in rows),
                   success_last=sum(r['success_last'] for r in rows),
                   outcomes=outcome_counts((r['outcome'] for r in rows), task.outcomes), task=task.name,
                   rollout={k: v for k, v in dataclasses.asdict(cfg).items()
                            if k in ('chunk_size', 'query_every', 'temporal_ensemble_m', 'render')},
                   cpu_s=round(time.process_time() - c0, 1), checkpoint=str(checkpoint))
    return {'summary': summary, 'episodes': rows}


def run_variant(name: str, policy_seed: int, root: Path, demos: Path, seeds: range, progress: bool) -> dict:
    """Train (resumable) and evaluate one variant for one policy seed; returns the eval summary."""
    what = VARIANTS[name][0]
    train_over, roll_over, train_name = resolve(name)
    run = root / train_name / f's{policy_seed}'
    demos = root / train_over['demos'] if 'demos' in train_over else demos       # a variant's own demos
    cfg = PolicyConfig(**{**BASE, **train_over, 'demos': str(demos), 'out': str(run), 'seed': policy_seed,
                          'threads': 1})
    last = run / 'last.pt'
    if not last.exists() or int(torch.load(last, weights_only=True)['step']) < cfg.steps:
        result = train(cfg, resume=str(last) if last.exists() else None, progress=progress)
        print(json.dumps({'trained': str(run), **{k: float(v) for k, v in result.items()}}), flush=True)
    out = root / name / f's{policy_seed}' / 'eval.json'
    if out.exists():
        return json.loads(out.read_text())['summary']
    res = evaluate(run / 'best.pt', seeds, roll_over)
    res['summary'].update(variant=name, what=what, policy_seed=policy_seed, train_overrides=train_over,
                          rollout_overrides=roll_over, parent=VARIANTS[name][1], load_avg=os.getloadavg()[0],
                          date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    return res['summary']


def cmd_variant(args) -> int:
    torch.set_num_threads(1)
    for s in args.policy_seeds:
        summary = run_variant(args.name, s, args.root, args.demos, parse_seed_range(args.seeds), not args.no_progress)
        print(json.dumps(summary), flush=True)
    return 0


def cmd_eval(args) -> int:
    torch.set_num_threads(1)
    over = {k: v for k, v in (('query_every', args.query_every), ('temporal_ensemble_m', args.m)) if v is not None}
    res = evaluate(args.checkpoint, parse_seed_range(args.seeds), over)
    print(json.dumps(res['summary']))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


def table_rows(root: Path) -> list[str]:
    """One markdown row per variant with evaluations: per-seed successes (max-reward rule / last-step rule),
    mean ± sd of the max-reward rule, outcomes summed over seeds."""
    rows = []
    for name in VARIANTS:
        evals = sorted((root / name).glob('s*/eval.json'))
        if not evals:
            continue
        sums = [json.loads(p.read_text())['summary'] for p in evals]
        outcomes = get_task(sums[0].get('task', 'transfer_cube')).outcomes
        rates = np.array([100.0 * s['success_max'] / s['episodes'] for s in sums])
        per_seed = ', '.join(f"s{s['policy_seed']}: {s['success_max']}/{s['success_last']}" for s in sums)
        oc = {k: sum(s['outcomes'][k] for s in sums) for k in outcomes}
        sd = f' ± {rates.std(ddof=1):.1f}' if len(rates) > 1 else ''
        rows.append(f"| {name} | {VARIANTS[name][0]} | {per_seed} | {rates.mean():.1f}{sd} % | "
                    + ' / '.join(f'{oc[k]} {k}' for k in outcomes if oc[k]) + ' |')
    return rows


def cmd_table(args) -> int:
    print('| variant | change | max-reward / last-step successes of 50, per policy seed | success (max rule) '
          '| outcomes |')
    print('| --- | --- | --- | --- | --- |')
    print('\n'.join(table_rows(args.root)))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('record', help='physics-only scripted demos (resumable)')
    r.add_argument('--episodes', type=int, default=505)
    r.add_argument('--first-seed', type=int, default=0)
    r.add_argument('--task', choices=TASK_NAMES, default='transfer_cube')
    r.add_argument('--frame-every', type=int, default=4)
    r.add_argument('--action-noise', type=float, default=0.0,
                   help='DART: executed actions get Gaussian noise of this std (rad, arm joints), labels stay clean')
    r.add_argument('--t-pitch', type=int, default=TransferScript().t_pitch,
                   help='TransferScript.t_pitch (0: the demonstrator before issue 39)')
    r.add_argument('--out', type=Path, default=ROOT / 'demos')
    v = sub.add_parser('variant', help='train + evaluate a named variant (resumable)')
    v.add_argument('name', choices=sorted(VARIANTS))
    v.add_argument('--policy-seeds', type=int, nargs='+', default=[0])
    v.add_argument('--root', type=Path, default=ROOT)
    v.add_argument('--demos', type=Path, default=ROOT / 'demos')
    v.add_argument('--seeds', default=EVAL_SEEDS)
    v.add_argument('--no-progress', action='store_true')
    e = sub.add_parser('eval', help='evaluate one privileged checkpoint')
    e.add_argument('checkpoint')
    e.add_argument('--seeds', default=EVAL_SEEDS)
    e.add_argument('--query-every', type=int)
    e.add_argument('--m', type=float, help='temporal ensembling weight')
    e.add_argument('--out')
    t = sub.add_parser('table', help='markdown rows of every evaluated variant')
    t.add_argument('--root', type=Path, default=ROOT)
    args = ap.parse_args(argv)
    return {'record': cmd_record, 'variant': cmd_variant, 'eval': cmd_eval, 'table': cmd_table}[args.cmd](args)


if __name__ == '__main__':
    raise SystemExit(main())

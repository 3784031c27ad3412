"""Behaviour-cloning pilot on the simulated ALOHA transfer-cube cell (issue 23): record demos, train, evaluate.

    python -m benchmarks.aloha_policy record --episodes 50 --out runs/aloha_policy/demos --processes 2
    python -m benchmarks.aloha_policy step-error runs/aloha_policy/bc/best.pt --demos runs/aloha_policy/demos
    python -m benchmarks.aloha_policy eval --policy runs/aloha_policy/bc/policy.onnx \
        --perception runs/aloha_policy/bc/perception.onnx --seeds 1000:1050 --processes 2
    python -m benchmarks.aloha_policy eval --seeds 1000:1050          # the shipped pair (models/MODEL_CARD_policy.md)
    python -m benchmarks.aloha_policy eval --task insertion --seeds 1000:1050      # the shipped insertion pair

Demonstrations are the scripted demonstrator (sim/demos/scripted.py) on seeds 0.., observed every --frame-every
steps (sim/demos/rollout.record_demonstration), one npz per episode. Evaluation seeds start at 1000 (held out).
Training is `string-perception-train-policy` (string_perception/policy/train_bc.py); the cube localiser of the
two-stage policy is `string-perception-train-localiser` (string_perception/policy/train_localiser.py, used here by
``eval --cube-estimator``). Report the load average.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from pathlib import Path

os.environ.setdefault('MUJOCO_GL', 'osmesa')
os.environ.setdefault('LP_NUM_THREADS', '1')

import numpy as np  # noqa: E402

from string_perception.aloha_tasks import ALOHA_TASK_NAMES, DEFAULT_ALOHA_TASK, LEGACY_TASK  # noqa: E402
from string_perception.cli import parse_seed_range  # noqa: E402
from string_perception.paths import shipped_policy_pair  # noqa: E402
from string_perception.sim.demos.outcomes import outcome_counts, success_max_reward  # noqa: E402
from string_perception.sim.demos.rollout import (OnnxActor, RolloutConfig, record_demonstration,  # noqa: E402
                                                 run_episode)
from string_perception.sim.demos.tasks import get_task  # noqa: E402


def _record(job) -> tuple:
    seed, frame_every, out = job
    c0 = time.process_time()
    demo = record_demonstration(seed, frame_every)
    np.savez_compressed(Path(out) / f'demo_{seed:06d}.npz', **demo)
    return seed, bool(demo['success']), int(demo['reward'].max()), time.process_time() - c0


def _pool_map(fn, jobs, processes):
    if processes > 1:
        with mp.get_context('spawn').Pool(processes) as pool:
            yield from pool.imap(fn, jobs)
    else:
        yield from map(fn, jobs)


def cmd_record(args) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(s, args.frame_every, str(args.out)) for s in range(args.first_seed, args.first_seed + args.episodes)]
    print(f'load average {os.getloadavg()[0]:.2f}; recording {len(jobs)} demos, a frame every {args.frame_every} '
          f'steps, {args.processes} process(es)', flush=True)
    t0, rows = time.perf_counter(), []
    for row in _pool_map(_record, jobs, args.processes):
        rows.append(row)
        print(f'seed {row[0]}: success {row[1]} max reward {row[2]} cpu {row[3]:.2f} s', flush=True)
    ok = sum(r[1] for r in rows)
    summary = dict(episodes=len(rows), success=ok, cpu_s=sum(r[3] for r in rows),
                   wall_s=time.perf_counter() - t0, load_avg=os.getloadavg()[0])
    print(json.dumps(summary), flush=True)
    (args.out / 'record_summary.json').write_text(json.dumps(summary, indent=1))
    return 0


class PrivilegedActor:
    """act() of a privileged BC checkpoint (torch): the cube's initial position (seen at step 0) + qpos.

    How well must vision localise the cube? ``cube_noise_m``: Gaussian noise of this standard deviation (metres,
    per axis, seeded by the episode's cube position) on the position the policy is given. ``estimator``: a vision
    BC checkpoint trained with the auxiliary cube loss (``--aux-cube-weight``) or a localiser
    (``string-perception-train-localiser``): the position is then its estimate from the step-0 camera frame (ViTD
    embedding -> linear map), i.e. a two-stage vision policy."""

    def __init__(self, checkpoint, cube_noise_m: float = 0.0, estimator: str | None = None):
        import torch
        from string_perception.policy.train_bc import load_policy
        torch.set_num_threads(1)
        _, self.head, self.cfg, _ = load_policy(checkpoint)
        self.cube_noise_m = cube_noise_m
        self.estimator = CubeEstimator(estimator) if estimator else None
        self.state = None
        self.errors_m: list[float] = []               # |estimate - true| per episode (m), with an estimator

    def __call__(self, obs):
        import torch
        from string_perception.policy.data import BOX_SCALE, privileged_state
        if obs.step == 0:
            truth = privileged_state(obs.object_xyz, self.cfg.task)
            if self.estimator is not None:
                state = self.estimator(obs)
                self.errors_m.append(float(np.linalg.norm((state - truth).reshape(-1, 3), axis=-1).max()
                                           * BOX_SCALE))                             # the worse object
            else:
                # the episode's own noise: seeded by its cube position (the Observation has no seed)
                rng = np.random.default_rng(np.frombuffer(np.asarray(obs.object_xyz, np.float64).tobytes(), np.uint32))
                xyz = np.asarray(obs.object_xyz)
                state = privileged_state(xyz + rng.normal(0.0, self.cube_noise_m, xyz.shape), self.cfg.task)
            self.state = torch.as_tensor(state, dtype=torch.float32)[None]              # [1,D]
        with torch.no_grad():
            return self.head(self.state, torch.as_tensor(obs.qpos, dtype=torch.float32)[None])[0].numpy()

    def rollout_config(self, **overrides):
        base = dict(task=self.cfg.task, chunk_size=self.cfg.chunk_size, query_every=self.cfg.query_every,
                    temporal_ensemble_m=self.cfg.temporal_ensemble_m)
        return RolloutConfig(**{**base, **overrides})


class CubeEstimator:
    """The cube's (scaled) position from a camera frame: a vision BC checkpoint's embedding through its auxiliary
    linear map (trained on the privileged position, ``--aux-cube-weight``)."""

    def __init__(self, checkpoint):
        import torch
        from string_perception.policy.train_bc import load_policy
        from string_perception.policy.localiser import LOCALISER_FORMAT, load_localiser
        if torch.load(checkpoint, weights_only=True).get('format') == LOCALISER_FORMAT:     # a localiser
            self.policy, self.aux, _ = load_localiser(checkpoint)
            return
        self.policy, _, _, ck = load_policy(checkpoint)
        if ck.get('aux') is None:
            raise SystemExit(f'{checkpoint}: no auxiliary cube head (train with --aux-cube-weight > 0)')
        self.aux = torch.nn.Linear(self.policy.chunk_head.embed_dim, 3)
        self.aux.load_state_dict(ck['aux'])

    def __call__(self, obs) -> np.ndarray:
        import torch
        from string_perception.runtime.preprocess import prepare_inputs
        inp = prepare_inputs(obs.color, obs.depth, obs.K, self.policy.vitd.config.image_size,
                             resize_mode='crop')
        image, depth, K = (torch.as_tensor(v) for v in inp.feed().values())
        with torch.no_grad():
            return self.aux(self.policy.embedding(image, depth, K))[0].numpy()                  # [3]


class TorchActor:
    """act() of a vision BC checkpoint in PyTorch (for variants the ONNX pair cannot express, e.g. pool_points):
    the frame through runtime.prepare_inputs, as OnnxActor does."""

    def __init__(self, checkpoint):
        import torch
        from string_perception.policy.train_bc import load_policy
        torch.set_num_threads(1)
        self.policy, _, self.cfg, _ = load_policy(checkpoint)

    def __call__(self, obs):
        import torch
        from string_perception.runtime.preprocess import prepare_inputs
        inp = prepare_inputs(obs.color, obs.depth, obs.K, self.policy.vitd.config.image_size,
                             resize_mode='crop')
        with torch.no_grad():
            return self.policy(*(torch.as_tensor(v) for v in inp.feed().values()),
                               torch.as_tensor(obs.qpos, dtype=torch.float32)[None])[0].numpy()   # [K,14]

    rollout_config = PrivilegedActor.rollout_config


_ACTOR: dict[str, object] = {}        # {spec key: actor}: the last spec's actor in this process


def actor_for(spec: dict):
    """The actor `spec` describes, built once per process and spec: a pool worker evaluates many seeds with one
    model; a later ``eval`` in the same process with another spec (the encoding study) gets a new actor."""
    key = json.dumps(spec, sort_keys=True)
    if key not in _ACTOR:
        _ACTOR.clear()
        _ACTOR[key] = (PrivilegedActor(spec['privileged'], spec.get('cube_noise_m') or 0.0, spec.get('cube_estimator'))
                       if spec.get('privileged')
                       else TorchActor(spec['torch']) if spec.get('torch')
                       else OnnxActor(spec['perception'], spec['policy']))
    return _ACTOR[key]


def _evaluate(job) -> dict:
    seed, spec = job
    actor = actor_for(spec)
    overrides = {} if spec.get('query_every') is None else {'query_every': spec['query_every']}
    cfg = actor.rollout_config(**overrides)
    r = run_episode(seed, actor, cfg)
    row = dict(seed=seed, task=cfg.task, success=r.success, max_reward=r.max_reward, final_reward=int(r.rewards[-1]),
               success_max=success_max_reward(r.rewards), outcome=get_task(cfg.task).outcome(r.rewards),
               cpu_s=r.cpu_s, render_cpu_s=r.render_cpu_s, act_cpu_s=r.act_cpu_s, queries=r.queries)
    if getattr(actor, 'errors_m', None):
        row['cube_error_m'] = actor.errors_m[-1]
    return row


def summarize(rows: list[dict]) -> dict:
    n = len(rows)
    stages = {k: sum(r['max_reward'] == k for r in rows) for k in range(5)}
    task = get_task(rows[0].get('task', LEGACY_TASK))
    return dict(task=task.name, episodes=n, success=sum(r['success'] for r in rows),
                success_rate=sum(r['success'] for r in rows) / n,
                success_max=sum(r['success_max'] for r in rows),
                outcomes=outcome_counts((r['outcome'] for r in rows), task.outcomes),
                reached={k: sum(r['max_reward'] >= k for r in rows) for k in range(1, 5)}, max_stage=stages,
                cpu_s_per_episode=float(np.mean([r['cpu_s'] for r in rows])),
                render_cpu_s_per_episode=float(np.mean([r['render_cpu_s'] for r in rows])),
                act_cpu_s_per_episode=float(np.mean([r['act_cpu_s'] for r in rows])),
                **({'cube_error_m_median': float(np.median([r['cube_error_m'] for r in rows]))}
                   if all('cube_error_m' in r for r in rows) else {}))


def cmd_eval(args) -> int:
    seeds = parse_seed_range(args.seeds)
    if not (args.perception or args.policy or args.privileged or args.torch):      # the shipped controller
        args.perception, args.policy = (str(p) for p in shipped_policy_pair(args.task))
    elif bool(args.perception) != bool(args.policy):
        raise SystemExit('--perception and --policy go together (neither: the shipped pair)')
    spec = dict(perception=args.perception, policy=args.policy, privileged=args.privileged, torch=args.torch,
                query_every=args.query_every, cube_noise_m=args.cube_noise_m, cube_estimator=args.cube_estimator)
    if (args.cube_noise_m or args.cube_estimator) and not args.privileged:
        raise SystemExit('--cube-noise-m / --cube-estimator apply to a --privileged policy')
    jobs = [(s, spec) for s in seeds]
    print(f'load average {os.getloadavg()[0]:.2f}; evaluating {len(jobs)} seeds {seeds.start}..{seeds.stop - 1}, '
          f'{args.processes} process(es)', flush=True)
    t0, rows = time.perf_counter(), []
    for row in _pool_map(_evaluate, jobs, args.processes):
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {**summarize(rows), 'wall_s': time.perf_counter() - t0, 'load_avg': os.getloadavg()[0],
               'spec': spec}
    print(json.dumps(summary), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({'summary': summary, 'episodes': rows}, indent=1))
    return 0


def cmd_step_error(args) -> int:
    """L1 (radians, masked) of each checkpoint's chunks against the demos' own, at given steps, split train / val:
    where in the episode a policy is no better than the average chunk."""
    import glob

    import torch
    from string_perception.policy.data import build_samples, load_demos
    from string_perception.policy.train_bc import load_policy
    torch.set_num_threads(1)
    demos = load_demos(args.demos)
    n_val = None
    for ckpt in args.checkpoints:
        policy, head, cfg, _ = load_policy(ckpt)
        n_val = cfg.val_episodes
        s = build_samples(demos, cfg.chunk_size)
        per_ep = len(demos[0]['frame_steps'])
        tokens = points = None
        if policy is not None:
            tokens = torch.load(glob.glob(str(Path(args.demos) / 'tokens_*.pt'))[0], weights_only=True)
            if cfg.pool_points:
                from string_perception.policy.data import encode_points, model_frames
                points = encode_points(policy, model_frames(demos, policy.vitd.config.image_size))
        for split, eps in (('train', range(len(demos) - n_val)), ('val', range(len(demos) - n_val, len(demos)))):
            for step in args.steps:
                b = s.batch(np.array([e * per_ep + step // args.frame_every for e in eps]))
                with torch.no_grad():
                    if policy is None:
                        pred = head(b['state'], b['qpos'])
                    else:
                        pts = None if points is None else points[b['frame']]
                        pred = policy.forward_from_tokens(tokens[b['frame']].float(), b['qpos'], points=pts)
                m = b['mask'][..., None].float()
                err = lambda x: float(((x - b['target']).abs() * m).sum() / (m.sum() * 14))   # noqa: E731
                print(f'{ckpt} {split} step {step}: L1 {err(pred):.4f} rad; mean chunk of these frames '
                      f'{err(b["target"].mean(0, keepdim=True).expand_as(b["target"])):.4f}', flush=True)
    return 0


def add_study_arguments(p: argparse.ArgumentParser) -> None:
    """The chunk head, seed ranges and parallelism the encoding and fine-tune studies share."""
    p.add_argument('--privileged', required=True, help='the privileged chunk head (train_bc --observation privileged)')
    p.add_argument('--train-seeds', default='0:1000', help='first:end of the reset seeds the localiser learns from')
    p.add_argument('--test-seeds', default='1000000:1000200', help='held-out seeds for the localisation error')
    p.add_argument('--eval-seeds', default='1000:1050', help='closed-loop evaluation seeds')
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--processes', type=int, default=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('record', help='scripted demonstrations')
    r.add_argument('--episodes', type=int, default=50)
    r.add_argument('--first-seed', type=int, default=0)
    r.add_argument('--frame-every', type=int, default=4)
    r.add_argument('--processes', type=int, default=1)
    r.add_argument('--out', type=Path, required=True)
    e = sub.add_parser('eval', help='closed-loop success on held-out seeds')
    e.add_argument('--perception', help='perception ONNX (policy/export.py); with --policy. Neither, nor '
                   '--privileged / --torch: the shipped pair (models/MODEL_CARD_policy.md)')
    e.add_argument('--policy', help='policy ONNX')
    e.add_argument('--task', default=DEFAULT_ALOHA_TASK, choices=ALOHA_TASK_NAMES,
                   help='with neither --perception nor --policy: whose shipped pair runs (a pair runs its own task)')
    e.add_argument('--privileged', help='a privileged BC checkpoint instead of the ONNX pair')
    e.add_argument('--torch', help='a vision BC checkpoint run in PyTorch instead of the ONNX pair')
    e.add_argument('--cube-noise-m', type=float, default=0.0,
                   help='privileged: Gaussian noise (m, per axis) on the cube position it is given')
    e.add_argument('--cube-estimator', help='privileged: the cube position estimated from the step-0 frame by this '
                   'vision checkpoint (trained with --aux-cube-weight) instead of the true one')
    e.add_argument('--seeds', default='1000:1050', help='first:end (held out: demos use 0..)')
    e.add_argument('--query-every', type=int, help='override the policy file\'s query interval')
    e.add_argument('--processes', type=int, default=1)
    e.add_argument('--out', help='write summary + per-episode rows (JSON) here')
    p = sub.add_parser('step-error', help='chunk L1 per episode step (does vision tell where the cube is?)')
    p.add_argument('checkpoints', nargs='+')
    p.add_argument('--demos', required=True)
    p.add_argument('--steps', type=int, nargs='+', default=[0, 40, 100])
    p.add_argument('--frame-every', type=int, default=4)
    args = ap.parse_args(argv)
    return {'record': cmd_record, 'eval': cmd_eval, 'step-error': cmd_step_error}[args.cmd](args)


if __name__ == '__main__':
    raise SystemExit(main())

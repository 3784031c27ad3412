"""Behaviour-cloning pilot on the simulated ALOHA transfer-cube cell (issue 23): record demos, train, evaluate.

    python benchmarks/aloha_policy.py record --episodes 50 --out runs/aloha_policy/demos --processes 2
    python benchmarks/aloha_policy.py step-error runs/aloha_policy/bc/best.pt --demos runs/aloha_policy/demos
    python benchmarks/aloha_policy.py eval --policy runs/aloha_policy/bc/policy.onnx \
        --perception runs/aloha_policy/bc/perception.onnx --seeds 1000:1050 --processes 2

Demonstrations are the scripted demonstrator (sim/demos/scripted.py) on seeds 0.., observed every --frame-every
steps (sim/demos/rollout.record_demonstration), one npz per episode. Evaluation seeds start at 1000 (held out).
Training is `string-perception-train-policy` (string_perception/policy/train_bc.py). Report the load average.
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

from string_perception.sim.demos.rollout import (OnnxActor, RolloutConfig, record_demonstration,  # noqa: E402
                                                 run_episode)
from string_perception.training.schedule import lr_factor  # noqa: E402


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
    BC checkpoint trained with the auxiliary cube loss (``--aux-cube-weight``) or a ``probe`` checkpoint: the
    position is then its estimate from the step-0 camera frame (ViTD embedding -> linear map), i.e. a two-stage
    vision policy."""

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
            truth = privileged_state(obs.cube_xyz)
            if self.estimator is not None:
                state = self.estimator(obs)
                self.errors_m.append(float(np.linalg.norm(state - truth) * BOX_SCALE))
            else:
                # the episode's own noise: seeded by its cube position (the Observation has no seed)
                rng = np.random.default_rng(np.frombuffer(np.asarray(obs.cube_xyz, np.float64).tobytes(), np.uint32))
                state = privileged_state(np.asarray(obs.cube_xyz) + rng.normal(0.0, self.cube_noise_m, 3))
            self.state = torch.as_tensor(state, dtype=torch.float32)[None]              # [1,3]
        with torch.no_grad():
            return self.head(self.state, torch.as_tensor(obs.qpos, dtype=torch.float32)[None])[0].numpy()

    def rollout_config(self, **overrides):
        base = dict(chunk_size=self.cfg.chunk_size, query_every=self.cfg.query_every,
                    temporal_ensemble_m=self.cfg.temporal_ensemble_m)
        return RolloutConfig(**{**base, **overrides})


class CubeEstimator:
    """The cube's (scaled) position from a camera frame: a vision BC checkpoint's embedding through its auxiliary
    linear map (trained on the privileged position, ``--aux-cube-weight``)."""

    def __init__(self, checkpoint):
        import torch
        from string_perception.policy.train_bc import load_policy
        from string_perception.policy.localiser import LOCALISER_FORMAT, load_localiser
        if torch.load(checkpoint, weights_only=True).get('format') == LOCALISER_FORMAT:     # `probe` output
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
    r = run_episode(seed, actor, actor.rollout_config(**overrides))
    row = dict(seed=seed, success=r.success, max_reward=r.max_reward, final_reward=int(r.rewards[-1]),
               cpu_s=r.cpu_s, render_cpu_s=r.render_cpu_s, act_cpu_s=r.act_cpu_s, queries=r.queries)
    if getattr(actor, 'errors_m', None):
        row['cube_error_m'] = actor.errors_m[-1]
    return row


def summarize(rows: list[dict]) -> dict:
    n = len(rows)
    stages = {k: sum(r['max_reward'] == k for r in rows) for k in range(5)}
    return dict(episodes=n, success=sum(r['success'] for r in rows), success_rate=sum(r['success'] for r in rows) / n,
                reached={k: sum(r['max_reward'] >= k for r in rows) for k in range(1, 5)}, max_stage=stages,
                cpu_s_per_episode=float(np.mean([r['cpu_s'] for r in rows])),
                render_cpu_s_per_episode=float(np.mean([r['render_cpu_s'] for r in rows])),
                act_cpu_s_per_episode=float(np.mean([r['act_cpu_s'] for r in rows])),
                **({'cube_error_m_median': float(np.median([r['cube_error_m'] for r in rows]))}
                   if all('cube_error_m' in r for r in rows) else {}))


def cmd_eval(args) -> int:
    a, b = (int(x) for x in args.seeds.split(':'))
    spec = dict(perception=args.perception, policy=args.policy, privileged=args.privileged, torch=args.torch,
                query_every=args.query_every, cube_noise_m=args.cube_noise_m, cube_estimator=args.cube_estimator)
    if (args.cube_noise_m or args.cube_estimator) and not args.privileged:
        raise SystemExit('--cube-noise-m / --cube-estimator apply to a --privileged policy')
    jobs = [(s, spec) for s in range(a, b)]
    print(f'load average {os.getloadavg()[0]:.2f}; evaluating {len(jobs)} seeds {a}..{b - 1}, '
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


def _start_frame(seed: int) -> tuple:
    """The top camera at step 0 of episode ``seed`` (before any arm moves): colour, depth (m), K, cube position."""
    from string_perception.sim.demos.rollout import CellCamera
    from string_perception.sim.demos.transfer_cube import TransferCubeScene
    scene = TransferCubeScene()
    scene.reset(seed)
    camera = CellCamera(scene, RolloutConfig())
    try:
        obs = camera.observe(0)
    finally:
        camera.close()
    return obs.color, obs.depth, obs.K, np.asarray(obs.cube_xyz, np.float64)


def _rows(x, idx):
    return None if x is None else x[idx]


def cmd_probe(args) -> int:
    """Can the frozen ViTD localise the cube, and does more data help? Step-0 frames of many seeds (one render each,
    no demonstration needed), the encoder's tokens cached once; the PolicyHead's attention pool (+ its pooled patch
    point) and a linear map are trained to the cube's position on the first N training seeds, for each N, and
    scored on held-out seeds. The best probe is saved (policy/localiser.py) for ``eval --cube-estimator`` and
    ``python -m string_perception.policy.export --localiser``."""
    import torch
    from string_perception.policy.config import PolicyConfig
    from string_perception.policy.data import BOX_SCALE, encode_points, encode_tokens, privileged_state
    from string_perception.policy.localiser import save_localiser
    from string_perception.policy.train_bc import build_policy
    from string_perception.runtime.preprocess import prepare_inputs
    torch.set_num_threads(args.threads)
    a, b = (int(x) for x in args.train_seeds.split(':'))
    c, d = (int(x) for x in args.test_seeds.split(':'))
    seeds = list(range(a, b)) + list(range(c, d))
    t0, c0 = time.perf_counter(), time.process_time()
    shots = list(_pool_map(_start_frame, seeds, args.processes))
    render_s = time.perf_counter() - t0
    policy, _ = build_policy(PolicyConfig(encoder_checkpoint=args.encoder_checkpoint, pool_points=args.pool_points))
    size = policy.vitd.config.image_size
    frames = {'image': [], 'depth': [], 'intrinsics': []}
    for color, depth, K, _ in shots:
        for k, v in prepare_inputs(color, depth, K, size, resize_mode='crop').feed().items():
            frames[k].append(v[0])
    frames = {k: np.stack(v) for k, v in frames.items()}
    tokens = encode_tokens(policy, frames, progress=False).float()                      # [S,N,D]
    points = encode_points(policy, frames) if args.pool_points else None                # [S,N,3]
    state = torch.as_tensor(np.stack([privileged_state(s[3]) for s in shots]))          # [S,3]
    encode_cpu_s = time.process_time() - c0
    n_train = b - a
    test = torch.arange(n_train, len(seeds))
    initial = {k: v.clone() for k, v in policy.vitd.policy_head.state_dict().items()}
    save_at = sorted({s for s in args.save_at if 0 < s < args.steps})
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)

    def score(aux, n) -> dict:
        """Median / mean / p90 position error (cm) on the first n training seeds and the held-out ones."""
        policy.vitd.policy_head.eval()
        with torch.no_grad():
            err = {}
            for name, sel in (('train', torch.arange(n)), ('test', test)):
                pred = aux(policy.embedding_from_tokens(tokens[sel], _rows(points, sel)))
                err[name] = ((pred - state[sel]).norm(dim=-1) * BOX_SCALE).numpy()        # metres
        policy.vitd.policy_head.train()
        return dict(train_median_cm=100 * float(np.median(err['train'])),
                    test_median_cm=100 * float(np.median(err['test'])), test_mean_cm=100 * float(err['test'].mean()),
                    test_p90_cm=100 * float(np.percentile(err['test'], 90)))

    rows, best = [], None
    for n in sorted({min(n, n_train) for n in args.sizes}):
        baseline = ((state[test] - state[:n].mean(0)).norm(dim=-1) * BOX_SCALE).numpy()   # predict the mean
        for probe_seed in args.probe_seeds:
            torch.manual_seed(probe_seed)
            policy.vitd.policy_head.load_state_dict(initial)
            aux = torch.nn.Linear(policy.chunk_head.embed_dim, 3)
            opt = torch.optim.AdamW([*policy.vitd.policy_head.parameters(), *aux.parameters()], lr=args.lr,
                                    weight_decay=1e-4)
            rng = np.random.default_rng(probe_seed)
            policy.vitd.policy_head.train()
            along = []                                                  # the probe's error at each --save-at step
            for step in range(args.steps):
                if step in save_at:
                    along.append(dict(step=step, **score(aux, n)))
                    if args.out:
                        save_localiser(args.out / f'probe_n{n}_seed{probe_seed}_step{step}.pt', policy, aux,
                                       dict(train_seeds=n, probe_seed=probe_seed, **along[-1]))
                for g in opt.param_groups:
                    g['lr'] = args.lr * lr_factor(step, 0, args.steps)                   # cosine to 0
                idx = torch.as_tensor(rng.integers(0, n, args.batch_size))                 # [B]
                pred = aux(policy.embedding_from_tokens(tokens[idx], _rows(points, idx)))   # [B,3]
                loss = (pred - state[idx]).abs().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            row = dict(train_seeds=n, probe_seed=probe_seed, steps=args.steps, **score(aux, n),
                       mean_position_median_cm=100 * float(np.median(baseline)), along=along)
            rows.append(row)
            print(json.dumps(row), flush=True)
            is_best = best is None or row['test_median_cm'] < best['test_median_cm']
            best = row if is_best else best
            if args.out:
                save_localiser(args.out / f'probe_n{n}_seed{probe_seed}_step{args.steps}.pt', policy, aux, row)
                if is_best:
                    save_localiser(args.out / 'probe.pt', policy, aux, row)
    out = {'rows': rows, 'render_wall_s': render_s, 'encode_cpu_s': encode_cpu_s,
           'probe_cpu_s': time.process_time() - c0 - encode_cpu_s, 'load_avg': os.getloadavg()[0],
           'args': {k: str(v) for k, v in vars(args).items()}}
    print(json.dumps(out), flush=True)
    if args.out:
        (args.out / 'probe.json').write_text(json.dumps(out, indent=1))
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
    e.add_argument('--perception', help='perception ONNX (policy/export.py)')
    e.add_argument('--policy', help='policy ONNX')
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
    q = sub.add_parser('probe', help='cube localisation from the frozen encoder vs the number of training seeds')
    q.add_argument('--encoder-checkpoint', default='models/vitd_tiny_cayley.pt')
    q.add_argument('--train-seeds', default='0:2000', help='first:end of the seeds the probe learns from')
    q.add_argument('--test-seeds', default='1000000:1000200', help='held-out seeds (not the eval seeds 1000..)')
    q.add_argument('--sizes', type=int, nargs='+', default=[45, 200, 1000, 2000])
    q.add_argument('--pool-points', type=lambda v: v.lower() in ('1', 'true', 'yes'), default=True,
                   help='the linear map also gets the patch point the attention pools (not in the exported '
                        'embedding); false: the embedding alone, as the perception ONNX publishes it')
    q.add_argument('--steps', type=int, default=2000)
    q.add_argument('--probe-seeds', type=int, nargs='+', default=[0],
                   help='training seeds of the probe (its linear map\'s initialisation and batch order); every '
                        'probe is saved as probe_n{N}_seed{K}_step{S}.pt, the best one also as probe.pt')
    q.add_argument('--save-at', type=int, nargs='*', default=[],
                   help='also save (and score) the probe before these steps: the success-vs-step curve')
    q.add_argument('--batch-size', type=int, default=64)
    q.add_argument('--lr', type=float, default=1e-3)
    q.add_argument('--threads', type=int, default=1)
    q.add_argument('--processes', type=int, default=1)
    q.add_argument('--out', type=Path)
    args = ap.parse_args(argv)
    return {'record': cmd_record, 'eval': cmd_eval, 'step-error': cmd_step_error, 'probe': cmd_probe}[args.cmd](args)


if __name__ == '__main__':
    raise SystemExit(main())

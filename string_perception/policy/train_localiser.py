"""Train the localiser the two-stage policy deploys (issue 23): ViTD PolicyHead + a linear map to the task objects'
start positions (the cube; with ``--task insertion`` the peg and the socket, issue 39 item 5).

    string-perception-train-localiser --encoder-checkpoint models/vitd_tiny_cayley.pt --train-seeds 0:1000 \
        --sizes 1000 --pool-points false --steps 6000 --out runs/aloha_policy/probe_emb
    python -m string_perception.policy.export runs/aloha_policy/privileged/best.pt \
        --localiser runs/aloha_policy/probe_emb/probe.pt --out runs/aloha_policy/two_stage/onnx

Can the frozen ViTD localise the cube, and does more data help? The top camera at step 0 of many reset seeds
(:func:`start_frame`: one render each, no demonstration needed), the encoder's tokens cached once; the PolicyHead's
attention pool (+ its pooled patch point with ``pool_points``) and a linear map are trained (AdamW, L1 to the
cube's scaled start position, cosine to 0) on the first N training seeds, for each N in ``sizes`` and each probe
seed, and scored on held-out seeds (median / mean / p90 error in cm, and the error of predicting the mean
position). Every probe is saved (``policy/localiser.py`` format) as ``probe_n{N}_seed{K}_step{S}.pt`` (also at
``save_at`` steps), the best one (held-out median) as ``probe.pt``, the rows as ``probe.json``. A probe trained
with ``pool_points`` false uses the embedding alone, as the perception ONNX publishes it: the deployable kind
(``python -m string_perception.policy.export --localiser``).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import multiprocessing as mp
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from ..aloha_tasks import DEFAULT_ALOHA_TASK
from ..cli import parse_seed_range
from ..runtime.preprocess import prepare_inputs
from ..sim.demos.rollout import CellCamera, RolloutConfig
from ..sim.demos.tasks import TASK_NAMES, get_task
from .config import PolicyConfig
from .data import encode_points, encode_tokens, object_errors_m, privileged_state
from .localiser import save_localiser
from ..training.schedule import lr_factor
from .train_bc import build_policy

__all__ = ['LocaliserConfig', 'probe_file_name', 'start_frame', 'start_frames', 'train_localisers', 'main']


@dataclasses.dataclass(frozen=True)
class LocaliserConfig:
    """What :func:`train_localisers` trains and where it writes (the command line's options, same names)."""
    task: str = DEFAULT_ALOHA_TASK               # sim/demos/tasks.py: what is localised
    encoder_checkpoint: str = 'models/vitd_tiny_cayley.pt'
    train_seeds: str = '0:2000'                  # first:end of the reset seeds the probe learns from
    test_seeds: str = '1000000:1000200'          # held-out seeds (not the policy evaluation seeds 1000..)
    sizes: tuple[int, ...] = (45, 200, 1000, 2000)   # training seeds used: the first N, for each N
    pool_points: bool = True                     # the map also gets the pooled patch point (not deployable)
    steps: int = 2000
    probe_seeds: tuple[int, ...] = (0,)          # the map's initialisation and batch order
    save_at: tuple[int, ...] = ()                # also save (and score) each probe before these steps
    batch_size: int = 64
    lr: float = 1e-3
    threads: int = 1                             # torch threads
    processes: int = 1                           # render processes
    out: Path | None = None                      # None: nothing saved


def probe_file_name(train_seeds: int, probe_seed: int, step: int) -> str:
    """The file a probe trained on ``train_seeds`` seeds with ``probe_seed`` is saved as at ``step``."""
    return f'probe_n{train_seeds}_seed{probe_seed}_step{step}.pt'


def start_frame(seed: int, task: str = DEFAULT_ALOHA_TASK) -> tuple:
    """The top camera at step 0 of episode ``seed`` of ``task`` (before any arm moves): colour uint8 [H,W,3], depth
    float32 [H,W] (m), K [3,3], the objects' positions float64 [3 * objects] (world, m)."""
    scene = get_task(task).make_scene()
    scene.reset(seed)
    camera = CellCamera(scene, RolloutConfig(task=task))
    try:
        obs = camera.observe(0)
    finally:
        camera.close()
    return obs.color, obs.depth, obs.K, np.asarray(obs.object_xyz, np.float64)


def start_frames(seeds: Sequence[int], processes: int = 1, task: str = DEFAULT_ALOHA_TASK) -> Iterator[tuple]:
    """:func:`start_frame` of every seed, in order; ``processes`` > 1 renders in that many spawned workers."""
    render = functools.partial(start_frame, task=task)
    if processes > 1:
        with mp.get_context('spawn').Pool(processes) as pool:
            yield from pool.imap(render, seeds)
    else:
        yield from map(render, seeds)


def _rows(x, idx):
    return None if x is None else x[idx]


def train_localisers(cfg: LocaliserConfig, log=print) -> dict:
    """Train and score every (size, probe seed) probe of ``cfg`` (see the module doc); returns what
    ``probe.json`` holds: the rows (one per probe, with its errors along ``save_at``), render wall time, encode
    and probe CPU time, load average, the config."""
    torch.set_num_threads(cfg.threads)
    train_range, test_range = parse_seed_range(cfg.train_seeds), parse_seed_range(cfg.test_seeds)
    seeds = list(train_range) + list(test_range)
    out_dir = None if cfg.out is None else Path(cfg.out)
    t0, c0 = time.perf_counter(), time.process_time()
    shots = list(start_frames(seeds, cfg.processes, cfg.task))
    render_s = time.perf_counter() - t0
    policy, _ = build_policy(PolicyConfig(encoder_checkpoint=cfg.encoder_checkpoint, pool_points=cfg.pool_points))
    size = policy.vitd.config.image_size
    frames = {'image': [], 'depth': [], 'intrinsics': []}
    for color, depth, K, _ in shots:
        for k, v in prepare_inputs(color, depth, K, size, resize_mode='crop').feed().items():
            frames[k].append(v[0])
    frames = {k: np.stack(v) for k, v in frames.items()}
    tokens = encode_tokens(policy, frames, progress=False).float()                      # [S,N,D]
    points = encode_points(policy, frames) if cfg.pool_points else None                 # [S,N,3]
    state = torch.as_tensor(np.stack([privileged_state(s[3], cfg.task) for s in shots]))   # [S,D]
    encode_cpu_s = time.process_time() - c0
    n_train = len(train_range)
    test = torch.arange(n_train, len(seeds))
    initial = {k: v.clone() for k, v in policy.vitd.policy_head.state_dict().items()}
    save_at = sorted({s for s in cfg.save_at if 0 < s < cfg.steps})
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)

    def score(aux, n) -> dict:
        """Median / mean / p90 position error (cm, over seeds x objects) on the first n training seeds and the
        held-out ones."""
        policy.vitd.policy_head.eval()
        with torch.no_grad():
            err = {}
            for name, sel in (('train', torch.arange(n)), ('test', test)):
                pred = aux(policy.embedding_from_tokens(tokens[sel], _rows(points, sel)))
                err[name] = object_errors_m(pred, state[sel]).numpy().ravel()            # metres
        policy.vitd.policy_head.train()
        return dict(train_median_cm=100 * float(np.median(err['train'])),
                    test_median_cm=100 * float(np.median(err['test'])), test_mean_cm=100 * float(err['test'].mean()),
                    test_p90_cm=100 * float(np.percentile(err['test'], 90)))

    rows, best = [], None
    for n in sorted({min(n, n_train) for n in cfg.sizes}):
        baseline = object_errors_m(state[:n].mean(0).expand_as(state[test]), state[test]).numpy()   # the mean
        for probe_seed in cfg.probe_seeds:
            torch.manual_seed(probe_seed)
            policy.vitd.policy_head.load_state_dict(initial)
            aux = torch.nn.Linear(policy.chunk_head.embed_dim, state.shape[1])
            opt = torch.optim.AdamW([*policy.vitd.policy_head.parameters(), *aux.parameters()], lr=cfg.lr,
                                    weight_decay=1e-4)
            rng = np.random.default_rng(probe_seed)
            policy.vitd.policy_head.train()
            along = []                                                  # the probe's error at each save_at step
            for step in range(cfg.steps):
                if step in save_at:
                    along.append(dict(step=step, **score(aux, n)))
                    if out_dir:
                        save_localiser(out_dir / probe_file_name(n, probe_seed, step), policy, aux,
                                       dict(train_seeds=n, probe_seed=probe_seed, **along[-1]), task=cfg.task)
                for g in opt.param_groups:
                    g['lr'] = cfg.lr * lr_factor(step, 0, cfg.steps)     # cosine to 0
                idx = torch.as_tensor(rng.integers(0, n, cfg.batch_size))                 # [B]
                pred = aux(policy.embedding_from_tokens(tokens[idx], _rows(points, idx)))   # [B,D]
                loss = (pred - state[idx]).abs().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            row = dict(train_seeds=n, probe_seed=probe_seed, steps=cfg.steps, **score(aux, n),
                       mean_position_median_cm=100 * float(np.median(baseline)), along=along)
            rows.append(row)
            log(json.dumps(row))
            is_best = best is None or row['test_median_cm'] < best['test_median_cm']
            best = row if is_best else best
            if out_dir:
                save_localiser(out_dir / probe_file_name(n, probe_seed, cfg.steps), policy, aux, row,
                               task=cfg.task)
                if is_best:
                    save_localiser(out_dir / 'probe.pt', policy, aux, row, task=cfg.task)
    return {'rows': rows, 'render_wall_s': render_s, 'encode_cpu_s': encode_cpu_s,
            'probe_cpu_s': time.process_time() - c0 - encode_cpu_s, 'load_avg': os.getloadavg()[0],
            'args': {k: str(list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(cfg).items()}}


def build_parser() -> argparse.ArgumentParser:
    d = LocaliserConfig()
    q = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    q.add_argument('--task', choices=TASK_NAMES, default=d.task)
    q.add_argument('--encoder-checkpoint', default=d.encoder_checkpoint)
    q.add_argument('--train-seeds', default=d.train_seeds, help='first:end of the seeds the probe learns from')
    q.add_argument('--test-seeds', default=d.test_seeds, help='held-out seeds (not the eval seeds 1000..)')
    q.add_argument('--sizes', type=int, nargs='+', default=list(d.sizes))
    q.add_argument('--pool-points', type=lambda v: v.lower() in ('1', 'true', 'yes'), default=d.pool_points,
                   help='the linear map also gets the patch point the attention pools (not in the exported '
                        'embedding); false: the embedding alone, as the perception ONNX publishes it')
    q.add_argument('--steps', type=int, default=d.steps)
    q.add_argument('--probe-seeds', type=int, nargs='+', default=list(d.probe_seeds),
                   help='training seeds of the probe (its linear map\'s initialisation and batch order); every '
                        'probe is saved as probe_n{N}_seed{K}_step{S}.pt, the best one also as probe.pt')
    q.add_argument('--save-at', type=int, nargs='*', default=list(d.save_at),
                   help='also save (and score) the probe before these steps: the success-vs-step curve')
    q.add_argument('--batch-size', type=int, default=d.batch_size)
    q.add_argument('--lr', type=float, default=d.lr)
    q.add_argument('--threads', type=int, default=d.threads)
    q.add_argument('--processes', type=int, default=d.processes)
    q.add_argument('--out', type=Path)
    return q


def main(argv=None) -> int:
    """``string-perception-train-localiser``: train, print each probe's row and the summary, write
    ``OUT/probe.json``."""
    os.environ.setdefault('LP_NUM_THREADS', '1')          # one llvmpipe thread per render process
    args = build_parser().parse_args(argv)
    cfg = LocaliserConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()})
    out = train_localisers(cfg, log=lambda line: print(line, flush=True))
    print(json.dumps(out), flush=True)
    if cfg.out:
        (cfg.out / 'probe.json').write_text(json.dumps(out, indent=1))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

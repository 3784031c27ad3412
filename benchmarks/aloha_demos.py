"""Scripted transfer-cube demonstrations (string_perception/sim/demos): success rate and CPU time per episode.

    python -m benchmarks.aloha_demos --episodes 20                          # top camera, 120x160, not saved
    python -m benchmarks.aloha_demos --episodes 50 --cameras --processes 2  # physics + IK only
    python -m benchmarks.aloha_demos --episodes 50 --out runs/demos/transfer_cube --cameras top angle

Episodes are seeds --first-seed .. + --episodes (gym-aloha's cube pose per seed), 400 steps at 50 Hz, recorded
(sim.demos.record_episode) in spawned worker processes (a GL context does not survive fork); with --out each is
saved as episode_<seed>.npz. Success = gym-aloha's reward 4 at the last step (the left gripper touches the cube
and the cube touches no table); 'reached 4' = at any step (ACT's criterion). CPU seconds are each worker's process
time for its episode (OSMesa renders with several threads unless LP_NUM_THREADS=1); report the load average.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault('MUJOCO_GL', 'osmesa')

from string_perception.sim.demos.episodes import (EpisodeConfig, episode_filename, record_episode,  # noqa: E402
                                                  save_episode)
from string_perception.sim.demos.transfer_cube import MAX_REWARD  # noqa: E402


def _run(job) -> tuple:
    seed, config, out = job
    c0 = time.process_time()
    ep = record_episode(seed, config)
    cpu = time.process_time() - c0
    if out is not None:
        save_episode(Path(out) / episode_filename(seed), ep)
    return seed, ep.success, int(ep.reward.max()), int(ep.reward[-1]), cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--episodes', type=int, default=20)
    ap.add_argument('--first-seed', type=int, default=0)
    ap.add_argument('--processes', type=int, default=1)
    ap.add_argument('--cameras', nargs='*', default=['top'], help='none: no images (physics + IK only)')
    ap.add_argument('--size', default='120x160', help='HxW')
    ap.add_argument('--out', type=Path, help='save episode_<seed>.npz here')
    args = ap.parse_args(argv)
    h, w = (int(x) for x in args.size.split('x'))
    config = EpisodeConfig(cameras=tuple(args.cameras), height=h, width=w)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(s, config, None if args.out is None else str(args.out))
            for s in range(args.first_seed, args.first_seed + args.episodes)]
    print(f'load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {len(jobs)} episodes, cameras '
          f'{list(config.cameras)} at {h}x{w}, {args.processes} process(es)', flush=True)
    t0 = time.perf_counter()
    if args.processes > 1:
        with mp.get_context('spawn').Pool(args.processes) as pool:
            rows = list(pool.imap(_run, jobs))
    else:
        rows = [_run(j) for j in jobs]
    wall = time.perf_counter() - t0
    for seed, ok, best, last, cpu in rows:
        print(f'seed {seed:4d}: {"success" if ok else "FAIL   "} max reward {best} final {last}  {cpu:6.2f} CPU s')
    n = len(rows)
    ok = sum(r[1] for r in rows)
    reached = sum(r[2] == MAX_REWARD for r in rows)
    cpu = [r[4] for r in rows]
    print(f'scripted success {ok}/{n} = {ok / n:.1%} (reward 4 at the end), reached 4 at some step {reached}/{n}; '
          f'CPU s per episode mean {statistics.mean(cpu):.2f} median {statistics.median(cpu):.2f}; wall {wall:.1f} s; '
          f'load average now {os.getloadavg()[0]:.2f}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

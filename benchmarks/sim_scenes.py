"""Frames per second of the simulated workcells (string_perception/sim) per core, and across processes.

    python -m benchmarks.sim_scenes --frames 10
    python -m benchmarks.sim_scenes --frames 40 --processes 2 --sizes 128x128

One process generates --frames frames (seeds from --first-seed) per cell and image size: compile the cell with its
objects, arm sampling, drop and settle, render (colour + depth, segmentation, 'alone' silhouettes), sensor model.
The first frame of each case (GL context, mesh cache) is timed separately. With --processes N, the same frames are
also generated through sim.cache.build_sim_cache with N spawned workers (wall time includes start-up).
'Per CPU second' counts the process's CPU time (all its threads: OSMesa's llvmpipe renders with several threads
unless LP_NUM_THREADS=1), the per-core rate on a loaded machine; 'wall' is what one process achieved.
Nothing here asserts on time; other load on the machine shows in the numbers (report the load average).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault('MUJOCO_GL', 'osmesa')

from string_perception.sim import CELL_NAMES, SimConfig, render_sim_scene  # noqa: E402
from string_perception.sim.cache import build_sim_cache  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--cells', nargs='+', default=list(CELL_NAMES), choices=CELL_NAMES)
    ap.add_argument('--sizes', nargs='+', default=['128x128', '480x640'], help='HxW')
    ap.add_argument('--frames', type=int, default=10)
    ap.add_argument('--first-seed', type=int, default=0)
    ap.add_argument('--processes', type=int, default=1)
    args = ap.parse_args(argv)
    print(f'load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.frames} frames per case')
    for cell in args.cells:
        for size in args.sizes:
            h, w = (int(x) for x in size.split('x'))
            cfg = SimConfig(cell=cell, height=h, width=w)
            seeds = range(args.first_seed, args.first_seed + args.frames)
            times, cpu, settle, labels = [], [], [], []
            for s in seeds:
                t0, c0 = time.perf_counter(), time.process_time()
                truth = render_sim_scene(s, cfg)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                settle.append(truth.settle_time_s)
                labels.append(truth.frame.num_objects)
            steady = times[1:] or times
            steady_cpu = cpu[1:] or cpu
            line = (f'{cell:5s} {h}x{w}: {1.0 / statistics.mean(steady):5.2f} frames/s wall, '
                    f'{1.0 / statistics.mean(steady_cpu):5.2f} frames/s per CPU second '
                    f'(median {statistics.median(steady) * 1e3:.0f} ms/frame, first {times[0] * 1e3:.0f} ms; '
                    f'simulated settle {statistics.mean(settle):.2f} s; {statistics.mean(labels):.1f} labels/frame)')
            if args.processes > 1:
                t0 = time.perf_counter()
                build_sim_cache(seeds, cfg, processes=args.processes)
                wall = time.perf_counter() - t0
                line += f'; {args.processes} processes: {len(seeds) / wall:.2f} frames/s'
            print(line, flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

"""Live end-to-end demo on the simulated workcells: ``string-perception-sim`` -> the node -> this listener, over DDS.

    python -m string_perception.sim_ros.sim_demo --suite workcell --frames 8 --rate 2 \\
        --image docs/images/sim_demo_workcell.png
    python -m string_perception.sim_ros.sim_demo --cells aloha kuka --rigs top front --frames 4
    python -m string_perception.sim_ros.sim_demo --cell aloha --rig angle --frames 8 --rate 2 --annotate-frame 4

Starts the node (its inputs on the sim's camera topics; the workcell evaluator's settings: all boxes scoring >= 0.05,
NMS 0.3, at most 100, the whole frame) once, then for each cell x rig run (``--cells`` x the ``--rigs`` each cell
has, or ``--suite workcell`` = three table rigs per cell) the simulated camera as a child process, all on a private
ROS_DOMAIN_ID with the loopback-only DDS profile. Labels follow the workcell evaluator (``evaluation/workcell.py``):
objects with >= 1024 visible pixels at 640x480 (scaled with the image area), mesh objects from the training meshes,
held-out test seeds per rig (``workcell.rig_seed``) unless ``--seed`` is given. It listens to the node's detections,
the sim's ground truth, colour, depth and CameraInfo and prints one line per frame (the node's boxes; per labelled
object its best symmetry-aware 3D IoU class-aware / class-agnostic; latency from the first of the frame's colour,
depth, CameraInfo and ground-truth messages to arrive here, ``demo_scores.first_arrival``), then the per-cell and
per-rig table of the workcell evaluator (``sim_ros/demo_scores.py``). Writes under ``--out``: ``metrics.json`` (runs,
per-frame IoUs, summary), ``sim_demo.png`` (one annotated frame per run in a grid: true boxes green, the node's
red; ``demo_composite.py``), ``node.log`` and ``sim_<cell>_<rig>.log``; with ``--save-frames`` also ``frames.npz``
(what arrived, for an offline check). ``--image PATH`` writes the grid there too. Exit status 0 when the node
answered in every run, 1 when it did not, 2 when the node or a sim did not start.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..bags.topics import DEFAULT_TOPICS
from ..child_process import ChildProcess
from ..codec.detection_msgs import camera_info_to_k, detections_from_msg, stamp_to_ns
from ..codec.image_conversion import convert_encoding, imgmsg_to_array
from ..dds_env import MAX_DOMAIN_ID, apply_dds_env, merged_dds_env
from ..demo import DetectionListener, default_model, label_list, wait_for_node
from ..evaluation.evaluate import json_default
from ..evaluation.workcell import WorkcellEvalConfig, label_min_visible_pixels, rig_seed
from ..sim.config import CELL_NAMES
from .demo_composite import composite, pick_frame, save_png
from .demo_scores import LiveFrame, first_arrival, frame_ious, frame_line, summarize
from .sim_camera import READY_LINE as SIM_READY

GROUND_TRUTH = '/ground_truth/detections'
SUITES = {'workcell': {'aloha': ('top', 'angle', 'front_close'), 'kuka': ('front', 'right', 'left')}}
RUN_TIME_SPACING_S = 10_000.0   # run i's stamps start at i x this (sim_camera --time-offset): the runs share one node,
                                # and each run's simulated time starts at 0, so without it two runs publish the same
                                # stamps and a message the node still queues from one run can pair with the next's
SETTLE_S = 2.0               # after a run's last frame, wait this long past the node's last answer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='python -m string_perception.sim_ros.sim_demo',
                                description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--cells', '--cell', nargs='+', default=['aloha'], choices=CELL_NAMES)
    p.add_argument('--rigs', '--rig', nargs='+', default=None,
                   help="camera rigs; each cell runs the ones it has (sim/cells.py; default: one run per cell, its "
                        "rig drawn from the seed)")
    p.add_argument('--suite', default=None, choices=sorted(SUITES),
                   help=f"a set of cells x rigs instead of --cells / --rigs: {SUITES}")
    p.add_argument('--seed', type=int, default=None,
                   help="scene seed of every run (default: the workcell evaluator's held-out test seed of each rig)")
    p.add_argument('--motion', default='pick', choices=('pick', 'sweep'), help='arm motion of the simulated cell')
    p.add_argument('--frames', type=int, default=8, help='frames per run')
    p.add_argument('--rate', type=float, default=2.0, help='frames per second (simulated time runs in real time)')
    p.add_argument('--width', type=int, default=640)
    p.add_argument('--height', type=int, default=480)
    p.add_argument('--model', default=None, help='ONNX model (default: the node\'s default, models/vitd_workcell.onnx)')
    p.add_argument('--providers', nargs='+', default=None)
    p.add_argument('--out', default='out/sim_demo')
    p.add_argument('--image', default=None, help='also write the annotated grid here (e.g. docs/images/...png)')
    p.add_argument('--annotate-frame', type=int, default=None,
                   help='index of the frame drawn per run (default: the answered one with the most boxes)')
    p.add_argument('--draw-threshold', type=float, default=WorkcellEvalConfig().operating_threshold,
                   help="the node's boxes drawn from this score")
    p.add_argument('--tile-width', type=int, default=320, help='width of one run\'s frame in the grid')
    p.add_argument('--save-frames', action='store_true', help='write frames.npz (what arrived over DDS per frame)')
    p.add_argument('--domain-id', type=int, default=None)
    p.add_argument('--start-timeout', type=float, default=120.0, help='seconds for the node / the sim to start')
    return p


def plan_runs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(cell, rig or None) per run, cells in order: the suite's, or each of ``--cells`` with the ``--rigs`` it has
    (ValueError when a cell has none of them, or when a run would outlast its stamp range, RUN_TIME_SPACING_S)."""
    from ..sim.cells import build_cell                 # mujoco: only when the demo runs
    if args.frames / args.rate > RUN_TIME_SPACING_S / 2:    # half: the scene's settling comes before the first frame
        raise ValueError(f'--frames / --rate = {args.frames / args.rate:g} simulated seconds per run; at most '
                         f'{RUN_TIME_SPACING_S / 2:g} (each run has its own {RUN_TIME_SPACING_S:g} s of stamps)')
    if args.suite:
        return [(c, r) for c, rigs in SUITES[args.suite].items() for r in rigs]
    runs = []
    for cell in dict.fromkeys(args.cells):
        if not args.rigs:
            runs.append((cell, None))
            continue
        have = [r.name for r in build_cell(cell).rigs]
        mine = [r for r in dict.fromkeys(args.rigs) if r in have]
        if not mine:
            raise ValueError(f'the {cell} cell has none of the rigs {args.rigs}; its rigs: {have}')
        runs += [(cell, r) for r in mine]
    return runs


def run_seed(args: argparse.Namespace, cell: str, rig: str | None) -> int:
    """``--seed``, else the workcell evaluator's first held-out test seed of the rig (of the cell for no rig)."""
    if args.seed is not None:
        return args.seed
    first = WorkcellEvalConfig().first_seed
    return rig_seed(first, cell, rig) if rig else first + 1_000_000 * CELL_NAMES.index(cell)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ..ros.node import READY_LINE, node_command    # rclpy, cv2 at import: only when the demo runs

    try:
        runs = plan_runs(args)
    except ValueError as e:
        print(f'sim_demo: {e}', file=sys.stderr)
        return 2
    model = Path(args.model) if args.model else default_model()
    if not model.is_file():
        print(f'sim_demo: model {model} not found', file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    domain = args.domain_id if args.domain_id is not None else 1 + os.getpid() % MAX_DOMAIN_ID
    env = merged_dds_env(domain)
    env['PYTHONUNBUFFERED'] = '1'
    wc = WorkcellEvalConfig()
    params = {'image_transport': 'raw', 'depth_transport': 'raw', 'score_threshold': wc.score_threshold,
              'nms_iou': wc.nms_iou, 'max_detections': 100, 'resize_mode': wc.resize_mode}
    if args.providers:
        params['providers'] = list(args.providers)
    cmd = node_command(model, params=params, remaps={'image': DEFAULT_TOPICS.image, 'depth': DEFAULT_TOPICS.depth,
                                                     'camera_info': DEFAULT_TOPICS.camera_info})
    names = ', '.join(f'{c}/{r or "drawn"}' for c, r in runs)
    print(f'[sim_demo] {len(runs)} runs ({names}), model {model}, '
          f'{args.width}x{args.height}, ROS_DOMAIN_ID {domain} (loopback only), logs in {out}', flush=True)
    node_proc = ChildProcess('node', cmd, env, out / 'node.log')
    try:
        if not node_proc.wait_for_line(READY_LINE, args.start_timeout):
            print(f'sim_demo: the node did not start:\n{node_proc.log()}', file=sys.stderr)
            return 2
        return _run_all(args, runs, domain, env, out, str(model), wc)
    except KeyboardInterrupt:
        return 130
    finally:
        print(f'[sim_demo] node stopped (exit status {node_proc.stop()})', flush=True)


def sim_command(args: argparse.Namespace, cell: str, rig: str | None, seed: int, run_index: int = 0) -> list[str]:
    """The simulated camera of run ``run_index``: the workcell evaluator's labels, stamps from ``run_index *
    RUN_TIME_SPACING_S`` on; its first frame waits until the node and this listener (2 subscribers) have matched
    each camera topic."""
    camera = [DEFAULT_TOPICS.image, DEFAULT_TOPICS.depth, DEFAULT_TOPICS.camera_info]
    cmd = [sys.executable, '-m', 'string_perception.sim_ros.sim_camera', '--cell', cell, '--seed', str(seed),
           '--motion', args.motion, '--frames', str(args.frames), '--rate', str(args.rate), '--width', str(args.width),
           '--height', str(args.height), '--min-visible-pixels', str(label_min_visible_pixels(args.height, args.width)),
           '--object-split', 'train', '--wait-for-subscribers', '2', '--wait-topics', *camera,
           '--wait-timeout', '120',       # the camera topics: the node and this listener
           '--time-offset', f'{run_index * RUN_TIME_SPACING_S:g}']
    return cmd + (['--rig', rig] if rig else [])


class _Inputs:
    """What the sim publishes, per colour stamp, for the current run (callbacks in the executor thread)."""

    def __init__(self, node):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CameraInfo, Image
        from vision_msgs.msg import Detection3DArray
        self.lock = threading.Lock()
        self.reset()
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        topics = ((Detection3DArray, GROUND_TRUTH, 'gt'), (Image, DEFAULT_TOPICS.image, 'image'),
                  (Image, DEFAULT_TOPICS.depth, 'depth'), (CameraInfo, DEFAULT_TOPICS.camera_info, 'info'))
        for ty, topic, key in topics:
            node.create_subscription(ty, topic, lambda m, k=key: self._on(k, m), qos)

    def reset(self) -> None:
        with self.lock:
            self.msgs: dict[str, dict[int, tuple]] = {k: {} for k in ('gt', 'image', 'depth', 'info')}

    def _on(self, key: str, msg) -> None:
        with self.lock:
            self.msgs[key][stamp_to_ns(msg.header.stamp)] = (msg, time.monotonic())

    def snapshot(self) -> dict[str, dict[int, tuple]]:
        with self.lock:
            return {k: dict(v) for k, v in self.msgs.items()}


def _run_all(args, runs, domain: int, env: dict, out: Path, model: str, wc: WorkcellEvalConfig) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    apply_dds_env(domain)
    rclpy.init(args=None)
    node = rclpy.create_node('string_perception_sim_demo')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    inputs = _Inputs(node)
    listener = DetectionListener(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    results: list[tuple[str, str, int, dict, dict]] = []          # (cell, rig, seed, inputs, detections)
    try:
        problem = wait_for_node(listener, args.start_timeout)
        if problem:
            print(f'sim_demo: {problem}', file=sys.stderr)
            return 2
        for run_index, (cell, rig) in enumerate(runs):
            seed = run_seed(args, cell, rig)
            inputs.reset()
            with listener.lock:
                listener.received.clear()
            name = f'{cell}_{rig or "drawn"}'
            sim_proc = ChildProcess(f'sim {name}', sim_command(args, cell, rig, seed, run_index), env,
                                    out / f'sim_{name}.log')
            try:
                if not sim_proc.wait_for_line(SIM_READY, args.start_timeout):
                    print(f'sim_demo: the simulated camera did not start:\n{sim_proc.log()}', file=sys.stderr)
                    return 2
                ready = sim_proc.log().split(SIM_READY)[-1].splitlines()[0].strip()
                print(f'[sim_demo] seed {seed}: {ready}', flush=True)
                rig = rig or ready.split('camera ')[-1].split(',')[0]
                sim_proc.wait(timeout=args.frames / args.rate * 20 + 120)
            finally:
                sim_proc.stop()
            t_end = time.monotonic()
            while (time.monotonic() - max(listener.last, t_end) < SETTLE_S
                   and len(listener.received) < len(inputs.snapshot()['gt'])):
                time.sleep(0.05)
            with listener.lock:
                received = dict(listener.received)
            results.append((cell, rig, seed, inputs.snapshot(), received))
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return _score_and_report(args, results, listener.id_names, out, model, wc)


def _live_frames(cell: str, rig: str, msgs: dict, received: dict, labels: list[str], id_names) -> list[LiveFrame]:
    """The answered frames of one run (ground-truth order) with their IoUs; prints a line for each frame."""
    frames = []
    for i, stamp in enumerate(sorted(msgs['gt'])):
        if stamp not in received:
            print(f'{cell}/{rig} frame {i:3d} stamp {stamp / 1e9:.3f}: no detections (dropped: the node keeps the '
                  f'newest frame)', flush=True)
            continue
        msg, t_recv = received[stamp]
        gt_msg = msgs['gt'][stamp][0]
        gt = {k: v for k, v in detections_from_msg(gt_msg, labels).items() if k in ('params', 'labels')}
        pred = {k: v for k, v in detections_from_msg(msg, labels, id_names).items()
                if k in ('params', 'labels', 'scores', 'class_names')}
        f = LiveFrame(cell, rig, i, stamp, gt, pred, (t_recv - first_arrival(msgs, stamp)) * 1e3)
        if stamp in msgs['image'] and stamp in msgs['info']:
            im = msgs['image'][stamp][0]
            f.rgb = convert_encoding(imgmsg_to_array(im), im.encoding, 'rgb8')                  # [H,W,3]
            f.K = camera_info_to_k(msgs['info'][stamp][0])[0]
        if stamp in msgs['depth']:
            f.depth_mm = np.asarray(imgmsg_to_array(msgs['depth'][stamp][0]))                     # [H,W] uint16
        f.best_aware, f.best_agnostic = frame_ious(pred, gt, labels)
        print(frame_line(f, labels), flush=True)
        frames.append(f)
    return frames


def _score_and_report(args, results, id_names, out: Path, model: str, wc: WorkcellEvalConfig) -> int:
    labels = label_list(id_names, *(m for _, _, _, msgs, _ in results for m, _ in msgs['gt'].values()),
                        *(m for *_, rec in results for m, _ in rec.values()))
    runs, frames, ok = [], [], True
    for cell, rig, seed, msgs, received in results:
        fs = _live_frames(cell, rig, msgs, received, labels, id_names)
        ok &= bool(fs)
        frames += fs
        runs.append({'cell': cell, 'rig': rig, 'seed': seed, 'frames': len(msgs['gt']), 'answered': len(fs),
                     'per_frame': [{'index': f.index, 'stamp_ns': f.stamp_ns, 'boxes': len(f.pred['scores']),
                                    'true_boxes': len(f.gt['labels']), 'latency_ms': f.latency_ms,
                                    'true_classes': [labels[k] for k in f.gt['labels']],
                                    'best_iou': f.best_aware, 'best_iou_agnostic': f.best_agnostic} for f in fs]})
    if not frames:
        print('sim_demo: the node answered no frame', file=sys.stderr)
        return 1
    summary = summarize(frames, labels, model, wc.resize_mode, wc.operating_threshold)
    answered = sum(r['answered'] for r in runs)
    print(f'{answered} of {sum(r["frames"] for r in runs)} frames answered in {len(runs)} runs '
          f'(symmetry-aware best 3D IoU, all boxes >= {wc.score_threshold}):\n{summary["table"]}', flush=True)
    shown = [pick_frame([f for f in frames if (f.cell, f.rig) == (r['cell'], r['rig'])], args.annotate_frame)
             for r in runs]
    grid = [[f for f, r in zip(shown, runs) if r['cell'] == cell] for cell in dict.fromkeys(r['cell'] for r in runs)]
    image = None
    if any(f is not None for f in shown):
        image = save_png(composite(grid, labels, args.tile_width, args.draw_threshold), out / 'sim_demo.png')
        if args.image:
            Path(args.image).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(image, args.image)
    for r, f in zip(runs, shown):
        r['image_frame'] = None if f is None else f.index
    report = {'model': model, 'motion': args.motion, 'width': args.width, 'height': args.height,
              'min_visible_pixels': label_min_visible_pixels(args.height, args.width), 'labels': labels,
              'runs': runs, 'summary': summary, 'image': None if image is None else image.name}
    (out / 'metrics.json').write_text(json.dumps(report, indent=1, default=json_default) + '\n')
    if args.save_frames:
        _save_frames(out / 'frames.npz', frames)
    print(f'[sim_demo] wrote {out / "metrics.json"}' + (f' and {image}' if image else '')
          + (f', {args.image}' if args.image and image else ''), flush=True)
    return 0 if ok else 1


def _save_frames(path: Path, frames: list[LiveFrame]) -> None:
    """frames.npz: ``n`` and per frame ``<i>_cell``, ``_rig``, ``_index``, ``_rgb``, ``_depth``, ``_K``,
    ``_gt_params``, ``_gt_labels``, ``_pred_params``, ``_pred_labels``, ``_pred_scores`` (frames that arrived with
    colour, depth and CameraInfo)."""
    kept = [f for f in frames if f.rgb is not None and f.depth_mm is not None and f.K is not None]
    arrays = {'n': np.array(len(kept))}
    for i, f in enumerate(kept):
        arrays.update({f'{i}_cell': np.array(f.cell), f'{i}_rig': np.array(f.rig), f'{i}_index': np.array(f.index),
                       f'{i}_rgb': f.rgb, f'{i}_depth': f.depth_mm, f'{i}_K': f.K,
                       f'{i}_gt_params': f.gt['params'], f'{i}_gt_labels': f.gt['labels'],
                       f'{i}_pred_params': f.pred['params'], f'{i}_pred_labels': f.pred['labels'],
                       f'{i}_pred_scores': f.pred['scores']})
    np.savez_compressed(path, **arrays)


if __name__ == '__main__':
    sys.exit(main())

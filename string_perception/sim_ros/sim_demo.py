"""Live end-to-end demo on a simulated workcell: ``string-perception-sim`` -> the node -> this listener.

    python -m string_perception.sim_ros.sim_demo --cell aloha --rig top --frames 20 --rate 2

Starts the node (its inputs on the sim's camera topics) and the simulated camera as child processes on a private
ROS_DOMAIN_ID with the loopback-only DDS profile, listens to the node's detections and the sim's ground truth,
prints one line per frame (boxes, best 3D IoU against the ground truth, latency from the ground truth's arrival,
published right after the colour image) and the metrics, and writes ``metrics.json`` and one annotated frame
(``frame_<i>.png``: the colour image with the true boxes in green and the node's in red) under ``--out``. Exit
status 0 when the node answered, 1 when it did not, 2 when the node or the sim did not start.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from ..bags.topics import DEFAULT_TOPICS
from ..child_process import ChildProcess
from ..codec.detection_msgs import camera_info_to_k, detections_from_msg, stamp_to_ns
from ..codec.image_conversion import convert_encoding, imgmsg_to_array
from ..dds_env import MAX_DOMAIN_ID, apply_dds_env, merged_dds_env
from ..demo import DetectionListener, default_model, frame_line, label_list
from ..evaluation import evaluate as E
from .sim_camera import READY_LINE as SIM_READY

GROUND_TRUTH = '/ground_truth/detections'


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='python -m string_perception.sim_ros.sim_demo', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--cell', default='aloha', choices=('aloha', 'kuka'))
    p.add_argument('--rig', default=None, help='camera position of the cell (default: drawn from the seed)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--motion', default='pick', choices=('pick', 'sweep'), help='arm motion of the simulated cell')
    p.add_argument('--frames', type=int, default=20)
    p.add_argument('--rate', type=float, default=2.0, help='frames per second (simulated time runs in real time)')
    p.add_argument('--width', type=int, default=320)
    p.add_argument('--height', type=int, default=240)
    p.add_argument('--model', default=None, help='ONNX model (default: the bundled one)')
    p.add_argument('--providers', nargs='+', default=None)
    p.add_argument('--out', default='out/sim_demo')
    p.add_argument('--annotate-frame', type=int, default=None,
                   help='index of the frame drawn to frame_<i>.png (default: the answered one with the most boxes)')
    p.add_argument('--domain-id', type=int, default=None)
    p.add_argument('--start-timeout', type=float, default=120.0, help='seconds for the node / the sim to start')
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ..ros.node import READY_LINE, node_command    # rclpy, cv2 at import: only when the demo runs

    model = Path(args.model) if args.model else default_model()
    if not model.is_file():
        print(f'sim_demo: model {model} not found', file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    domain = args.domain_id if args.domain_id is not None else 1 + os.getpid() % MAX_DOMAIN_ID
    env = merged_dds_env(domain)
    env['PYTHONUNBUFFERED'] = '1'
    params = {'image_transport': 'raw', 'depth_transport': 'raw'}
    if args.providers:
        params['providers'] = list(args.providers)
    cmd = node_command(model, params=params, remaps={'image': DEFAULT_TOPICS.image, 'depth': DEFAULT_TOPICS.depth,
                                                     'camera_info': DEFAULT_TOPICS.camera_info})
    camera = [DEFAULT_TOPICS.image, DEFAULT_TOPICS.depth, DEFAULT_TOPICS.camera_info]
    sim_cmd = [sys.executable, '-m', 'string_perception.sim_ros.sim_camera', '--cell', args.cell, '--seed',
               str(args.seed), '--motion', args.motion, '--frames', str(args.frames), '--rate', str(args.rate),
               '--width', str(args.width), '--height', str(args.height), '--wait-for-subscribers', '1',
               '--wait-topics', *camera, GROUND_TRUTH, '--wait-timeout', '120']
    sim_cmd += ['--rig', args.rig] if args.rig else []
    print(f'[sim_demo] {args.cell} cell, model {model}, ROS_DOMAIN_ID {domain} (loopback only), logs in {out}',
          flush=True)
    node_proc = ChildProcess('node', cmd, env, out / 'node.log')
    sim_proc = None
    try:
        if not node_proc.wait_for_line(READY_LINE, args.start_timeout):
            print(f'sim_demo: the node did not start:\n{node_proc.log()}', file=sys.stderr)
            return 2
        sim_proc = ChildProcess('sim', sim_cmd, env, out / 'sim.log')
        return _listen_and_score(args, domain, out, sim_proc, SIM_READY)
    except KeyboardInterrupt:
        return 130
    finally:
        if sim_proc is not None:
            sim_proc.stop()
        print(f'[sim_demo] node stopped (exit status {node_proc.stop()})', flush=True)


def _listen_and_score(args, domain: int, out: Path, sim_proc, sim_ready: str) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image
    from vision_msgs.msg import Detection3DArray

    apply_dds_env(domain)
    rclpy.init(args=None)
    node = rclpy.create_node('string_perception_sim_demo')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    gt_msgs: dict[int, tuple] = {}                                  # stamp -> (Detection3DArray, monotonic)
    node.create_subscription(Detection3DArray, GROUND_TRUTH,
                             lambda m: gt_msgs.__setitem__(stamp_to_ns(m.header.stamp), (m, time.monotonic())),
                             QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
    images: dict[int, object] = {}                                 # stamp -> colour Image (for the drawing)
    infos: dict[int, object] = {}                                  # stamp -> CameraInfo
    reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Image, DEFAULT_TOPICS.image,
                             lambda m: images.__setitem__(stamp_to_ns(m.header.stamp), m), reliable)
    node.create_subscription(CameraInfo, DEFAULT_TOPICS.camera_info,
                             lambda m: infos.__setitem__(stamp_to_ns(m.header.stamp), m), reliable)
    listener = DetectionListener(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        if not sim_proc.wait_for_line(sim_ready, args.start_timeout):
            print(f'sim_demo: the simulated camera did not start:\n{sim_proc.log()}', file=sys.stderr)
            return 2
        print(f'[sim_demo] {sim_proc.log().split(sim_ready)[-1].splitlines()[0].strip()}', flush=True)
        sim_proc.wait(timeout=args.frames / args.rate * 20 + 120)
        t_end = time.monotonic()
        while time.monotonic() - max(listener.last, t_end) < 2.0 and len(listener.received) < len(gt_msgs):
            time.sleep(0.05)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()

    with listener.lock:
        received = dict(listener.received)
    gts = dict(gt_msgs)
    labels = label_list(listener.id_names, *(m for m, _ in gts.values()), *(m for m, _ in received.values()))
    preds, truths, per_frame = [], [], []
    for i, stamp in enumerate(sorted(gts)):
        if stamp not in received:
            print(f'frame {i:3d} stamp {stamp / 1e9:.3f}: no detections (dropped: the node keeps the newest frame)')
            continue
        msg, t_recv = received[stamp]
        pred = detections_from_msg(msg, labels, listener.id_names)
        gt = detections_from_msg(gts[stamp][0], labels)
        latency_ms = (t_recv - gts[stamp][1]) * 1e3
        print(frame_line(i, stamp, pred, gt, labels, latency_ms), flush=True)
        per_frame.append({'index': i, 'stamp_ns': stamp, 'boxes': len(pred['scores']), 'true_boxes': len(gt['labels']),
                          'latency_ms': latency_ms})
        preds.append({k: pred[k] for k in ('params', 'labels', 'scores')})
        truths.append({k: gt[k] for k in ('params', 'labels')})
    if not per_frame:
        print(f'sim_demo: the node answered none of {len(gts)} frames', file=sys.stderr)
        return 1
    summary = E.evaluate_predictions(preds, truths, labels)
    head = ', '.join(f'{k} {v:.3f}' for k, v in E.headline(summary).items())
    print(f'{len(per_frame)} of {len(gts)} frames answered: {head}', flush=True)
    image = _annotate(args.annotate_frame, out, per_frame, preds, truths, images, infos, labels)
    report = {'cell': args.cell, 'motion': args.motion, 'frames': len(gts), 'answered': len(per_frame),
              'labels': labels, 'headline': E.headline(summary), 'metrics': summary, 'per_frame': per_frame,
              'image': None if image is None else image.name}
    (out / 'metrics.json').write_text(json.dumps(report, indent=2, default=E.json_default) + '\n')
    print(f'[sim_demo] wrote {out / "metrics.json"}' + (f' and {image}' if image else ''), flush=True)
    return 0


def _annotate(index, out: Path, per_frame: list[dict], preds: list[dict], truths: list[dict], images: dict,
              infos: dict, labels: list[str]) -> Path | None:
    """One answered frame (`index`, else the one with the most true + predicted boxes) drawn with the true boxes
    (green) and the node's (red) at the image's own size -> frame_<i>.png; None when its image did not arrive."""
    import cv2
    rows = [(f, p, t) for f, p, t in zip(per_frame, preds, truths) if f['stamp_ns'] in images
            and f['stamp_ns'] in infos and (index is None or f['index'] == index)]
    if not rows:
        return None
    frame, pred, truth = max(rows, key=lambda r: (r[0]['boxes'] + r[0]['true_boxes'], -r[0]['index']))
    msg = images[frame['stamp_ns']]
    rgb = convert_encoding(imgmsg_to_array(msg), msg.encoding, 'rgb8')             # [H,W,3]
    K, _ = camera_info_to_k(infos[frame['stamp_ns']])
    drawn = E.annotate_frame(rgb, K, pred, truth, labels, 0.0, scale=1)
    path = out / f'frame_{frame["index"]}.png'
    cv2.imwrite(str(path), cv2.cvtColor(drawn, cv2.COLOR_RGB2BGR))
    return path


if __name__ == '__main__':
    sys.exit(main())

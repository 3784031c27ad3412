"""End-to-end demo (``make demo`` / ``string-perception-demo``): the ROS 2 node on the bundled recording.

    python -m string_perception.demo                               # bundled model + data/sample_recording
    python -m string_perception.demo --model my.onnx --bag my_bag --rate 0.5 --out out/demo

1. starts the node (``ros/node.py``, in a subprocess, via ``node_command``) on its own ROS_DOMAIN_ID with the
   loopback-only DDS profile (``dds_env.py``), its inputs remapped to the bag's camera topics;
2. plays the bag's camera topics into it (``bags/play.BagPlayer``, original 30 Hz timing times ``--rate``);
3. listens to ``/string_perception/detections`` and prints one line per frame (boxes, best 3D IoU against the
   bag's ``/ground_truth/detections``, latency from publishing the colour image to receiving the boxes);
4. prints the metrics of what the node published against the ground truth (the evaluator's functions) and
   writes ``metrics.json`` and an annotated frame (true boxes green, the node's red) under ``--out``.

The node is always stopped (SIGINT, then SIGTERM/SIGKILL), also on errors and Ctrl-C. Exit status 0 when the
node answered, 1 when it gave no detections, 2 for a missing model / bag or a node that did not start.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import metrics
from .bags.eval_bag import latency_stats, legible_scale, summary_text
from .bags.play import BagPlayer
from .bags.reader import BagError, BagFrameReader, header_of, open_bag
from .bags.sample import default_sample_path
from .bags.topics import COMPRESSED
from .bags.typestore import make_typestore
from .child_process import ChildProcess
from .codec.detection_msgs import detections_from_msg, label_map, stamp_to_ns
from .dds_env import MAX_DOMAIN_ID, apply_dds_env, merged_dds_env
from .evaluation import evaluate as E
from .paths import model_file
from .runtime.preprocess import to_rgb
from .scenes import CLASS_NAMES

__all__ = ['main', 'build_parser', 'DEMO_NODE_NAME', 'LABEL_INFO_TOPIC', 'DetectionListener', 'default_model',
           'wait_for_node', 'label_list', 'frame_line']

DEMO_NODE_NAME = 'string_perception_demo'
DETECTIONS_TOPIC = '/string_perception/detections'
LABEL_INFO_TOPIC = '/string_perception/label_info'
NODE_START_TIMEOUT_S = 60.0
SETTLE_S = 2.0               # wait this long after the last frame for the node's last answers


def default_model() -> Path:
    """The bundled model the demos run by default: ``models/<ros.node.DEFAULT_MODEL>`` (installed share dir or the
    source tree; the relative path when neither has it, for the caller's not-found message)."""
    from .ros.node import DEFAULT_MODEL    # rclpy at import: only when the demo runs
    try:
        return model_file(DEFAULT_MODEL)
    except FileNotFoundError:
        return Path('models') / DEFAULT_MODEL


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-demo', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--model', default=None, help='ONNX model (default: the bundled models/vitd_workcell.onnx)')
    p.add_argument('--bag', default=None, help='recording to play (default: the bundled data/sample_recording)')
    p.add_argument('--out', default='out/demo', help='output folder (metrics.json, annotated frame, node log)')
    p.add_argument('--rate', type=float, default=1.0, help='playback speed factor')
    p.add_argument('--domain-id', type=int, default=None, help='ROS_DOMAIN_ID (default: derived from the pid)')
    p.add_argument('--providers', nargs='+', default=None, help="the node's ONNX Runtime providers")
    return p


class DetectionListener:
    """Subscribes to the node's detections (keeps every message with its receive time; ``subscription`` is that
    subscription, e.g. for ``get_publisher_count()``) and its LabelInfo (class id -> name, latched), in the executor
    thread."""

    def __init__(self, node):
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from vision_msgs.msg import Detection3DArray, LabelInfo
        self.received: dict[int, tuple[Any, float]] = {}        # colour stamp ns -> (Detection3DArray, monotonic)
        self.id_names: dict[int, str] | None = None             # from ~/label_info
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.subscription = node.create_subscription(Detection3DArray, DETECTIONS_TOPIC, self._on_msg,
                                                     QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
        node.create_subscription(LabelInfo, LABEL_INFO_TOPIC, lambda m: setattr(self, 'id_names', label_map(m)),
                                 QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                            durability=DurabilityPolicy.TRANSIENT_LOCAL))

    def _on_msg(self, msg) -> None:
        with self.lock:
            self.received[stamp_to_ns(msg.header.stamp)] = (msg, time.monotonic())
            self.last = time.monotonic()


def _ground_truth(bag: Path, topic: str) -> dict[int, Any]:
    """Header stamp -> ground-truth Detection3DArray (rosbags object) of the bag."""
    store, out = make_typestore(), {}
    reader = open_bag(bag)
    try:
        conns = [c for c in reader.connections if c.topic == topic]
        for conn, _, raw in reader.messages(conns):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            out[int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)] = msg
    finally:
        reader.close()
    return out


def wait_for_node(listener, timeout_s: float, poll_s: float = 0.05) -> str | None:
    """Wait until the node's detections topic matches ``listener`` (a :class:`~string_perception.demo.
    DetectionListener`) and its latched ``~/label_info`` has arrived; None when both did within ``timeout_s``, else
    what is missing. Without the LabelInfo the class ids could only be named by guess (the procedural classes), and
    every class-aware figure would be wrong (a sim demo run once printed 'cube', '4' and '5' for the workcell
    classes). The bag demo and the sim demo call it before their first frame."""
    deadline = time.monotonic() + timeout_s
    while listener.subscription.get_publisher_count() < 1:
        if time.monotonic() > deadline:
            return "the node's detections topic never matched this listener"
        time.sleep(poll_s)
    while listener.id_names is None:
        if time.monotonic() > deadline:
            return f"the node's {LABEL_INFO_TOPIC} (class names) never arrived"
        time.sleep(poll_s)
    return None


def label_list(id_names: dict[int, str] | None, *msgs) -> list[str]:
    """The node's classes in id order (its LabelInfo; else the scene classes), then any other class name that
    older messages (class_id = name) use."""
    names = [id_names[k] for k in sorted(id_names)] if id_names else list(CLASS_NAMES)
    for m in msgs:
        for d in m.detections:
            for r in d.results[:1]:
                cid = str(r.hypothesis.class_id)
                if not cid.isdigit() and cid not in names:
                    names.append(cid)
    return names


def frame_line(i: int, stamp: int, pred: dict, gt: dict | None, labels: list[str], latency_ms: float | None) -> str:
    """The demos' line for frame ``i``: its boxes (class, score), with ``gt`` the number of true objects and the
    mean best class-aware 3D IoU, with ``latency_ms`` the latency."""
    boxes = ', '.join(f'{n} {s:.2f}' for n, s in zip(pred['class_names'], pred['scores'])) or '-'
    line = f'frame {i:3d} stamp {stamp / 1e9:.3f}: {len(pred["scores"])} boxes [{boxes}]'
    if gt is not None:
        best = metrics.best_iou_per_gt([pred], [gt], class_aware=True)
        mean = best.mean() if len(best) else float('nan')
        line += f' | {len(gt["labels"])} true objects, mean best 3D IoU {mean:.3f}'
    if latency_ms is not None:
        line += f' | {latency_ms:.0f} ms'
    return line


def run_demo(args: argparse.Namespace) -> int:
    from .ros.node import READY_LINE, node_command    # rclpy at import: only when the demo runs

    model = Path(args.model) if args.model else default_model()
    if not model.is_file():
        print(f'string-perception-demo: model {model} not found. The bundled model models/vitd_workcell.onnx '
              f'ships with the repository once released; until then pass --model PATH (an ONNX file from '
              f'string-perception-export, or a test model).', file=sys.stderr)
        return 2
    try:
        bag = Path(args.bag) if args.bag else default_sample_path()
    except FileNotFoundError as e:
        print(f'string-perception-demo: {e}', file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    domain = args.domain_id if args.domain_id is not None else 1 + os.getpid() % MAX_DOMAIN_ID
    try:
        with BagFrameReader(bag) as reader:
            topics, msgtypes = reader.topics, reader.msgtypes
    except BagError as e:
        print(f'string-perception-demo: {e}', file=sys.stderr)
        return 2
    compressed = msgtypes.get(topics['image']) == COMPRESSED
    image_base = topics['image'][:-len('/compressed')] if compressed else topics['image']
    depth_packed = msgtypes.get(topics['depth']) == COMPRESSED          # image_transport compressedDepth
    depth_base = topics['depth'].removesuffix('/compressedDepth') if depth_packed else topics['depth']
    params: dict[str, Any] = {'image_transport': 'compressed' if compressed else 'raw',
                              'depth_transport': 'compressedDepth' if depth_packed else 'raw'}
    if args.providers:
        params['providers'] = list(args.providers)
    cmd = node_command(model, params=params, remaps={'image': image_base, 'depth': depth_base,
                                                     'camera_info': topics['camera_info']})
    env = merged_dds_env(domain)
    env['PYTHONUNBUFFERED'] = '1'
    print(f'[demo] bag {bag}, model {model}, ROS_DOMAIN_ID {domain} (loopback only), node log {out / "node.log"}',
          flush=True)
    node_proc = ChildProcess('node', cmd, env, out / 'node.log')
    try:
        if not node_proc.wait_for_line(READY_LINE, NODE_START_TIMEOUT_S):
            print(f'string-perception-demo: the node did not start:\n{node_proc.log()}', file=sys.stderr)
            return 2
        print(f'[demo] {node_proc.log(100000).split(READY_LINE)[-1].splitlines()[0].strip(": ")} node ready',
              flush=True)
        return _play_and_score(args, bag, topics, domain, out, model, node_proc)
    except KeyboardInterrupt:
        return 130
    finally:
        rc = node_proc.stop()
        print(f'[demo] node stopped (exit status {rc})', flush=True)


def _play_and_score(args, bag: Path, topics: dict, domain: int, out: Path, model: Path, node_proc) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor


    apply_dds_env(domain)
    rclpy.init(args=None)
    node = rclpy.create_node(DEMO_NODE_NAME)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    try:
        listener = DetectionListener(node)
        spin.start()
        camera = [topics['image'], topics['depth'], topics['camera_info']]
        player = BagPlayer(node, bag, rate=args.rate, topics=camera)
        if not player.wait_for_subscribers(1, 30.0):
            print('string-perception-demo: the node did not subscribe to the camera topics', file=sys.stderr)
            return 2
        problem = wait_for_node(listener, 30.0)
        if problem:
            print(f'string-perception-demo: {problem}', file=sys.stderr)
            return 2
        time.sleep(0.5)                                   # let discovery finish on the node's side too
        published: dict[int, float] = {}                   # colour stamp -> monotonic publish time

        def on_publish(topic: str, data: bytes) -> None:
            if topic == topics['image']:
                published[header_of(data)[0]] = time.monotonic()

        t0 = time.monotonic()
        player.play(on_publish=on_publish)
        print(f'[demo] played {len(published)} frames in {time.monotonic() - t0:.1f} s (x{args.rate:g})', flush=True)
        while time.monotonic() - max(listener.last, t0) < SETTLE_S and len(listener.received) < len(published):
            time.sleep(0.05)
        time.sleep(0.2)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()

    gt_msgs = _ground_truth(bag, topics['ground_truth']) if topics.get('ground_truth') else {}
    with listener.lock:
        received = dict(listener.received)
    labels = label_list(listener.id_names, *gt_msgs.values(), *(m for m, _ in received.values()))
    order = sorted(published)
    preds, gts, per_frame, latencies = [], [], [], []
    for i, stamp in enumerate(order):
        if stamp not in received:
            print(f'frame {i:3d} stamp {stamp / 1e9:.3f}: no detections (dropped: the node keeps the newest frame)')
            continue
        msg, t_recv = received[stamp]
        pred = detections_from_msg(msg, labels, listener.id_names)
        gt = detections_from_msg(gt_msgs[stamp], labels) if stamp in gt_msgs else None
        latency_ms = (t_recv - published[stamp]) * 1e3
        latencies.append({'total_ms': latency_ms})
        print(frame_line(i, stamp, pred, gt, labels, latency_ms), flush=True)
        per_frame.append({'index': i, 'stamp_ns': stamp, 'boxes': len(pred['scores']), 'latency_ms': latency_ms,
                          'classes': pred['class_names'], 'scores': pred['scores'].tolist()})
        if gt is not None:
            preds.append({k: pred[k] for k in ('params', 'labels', 'scores')})
            gts.append({k: gt[k] for k in ('params', 'labels')})
    if not per_frame:
        print(f'string-perception-demo: the node published no detections for {len(order)} frames\n{node_proc.log()}',
              file=sys.stderr)
        return 1
    summary = E.evaluate_predictions(preds, gts, labels) if gts else None
    report = {'bag': str(bag), 'model': str(model), 'ros_domain_id': domain, 'rate': args.rate,
              'frames_played': len(order), 'frames_evaluated': len(per_frame), 'frames_scored': len(gts),
              'num_objects': int(sum(len(g['labels']) for g in gts)), 'provider': 'node', 'labels': labels,
              'operating_threshold': None, 'latency_ms': latency_stats(latencies),
              'headline': E.headline(summary) if summary else None, 'metrics': summary, 'frames': per_frame}
    print(summary_text(report).replace('frames on node: latency', 'frames answered by the node: latency'))
    (out / 'metrics.json').write_text(json.dumps(report, indent=2, default=E.json_default) + '\n')
    image = _annotate(bag, out, per_frame, received, gt_msgs, labels)
    print(f'[demo] wrote {out / "metrics.json"} and {image}', flush=True)
    return 0


def _annotate(bag: Path, out: Path, per_frame: list[dict], received: dict, gt_msgs: dict, labels: list[str]) -> Path:
    """The answered frame with the most boxes, drawn with the node's boxes (red) and the true ones (green)."""
    import cv2

    best = max(per_frame, key=lambda f: (f['boxes'], -f['index']))
    path = out / f'frame_{best["index"]}.png'
    with BagFrameReader(bag) as reader:
        for frame in reader:
            if frame.stamp_ns != best['stamp_ns']:
                continue
            pred = detections_from_msg(received[frame.stamp_ns][0], labels)
            gt = detections_from_msg(gt_msgs[frame.stamp_ns], labels) if frame.stamp_ns in gt_msgs else None
            rgb = to_rgb(frame.rgb, frame.encoding)
            img = E.annotate_frame(rgb, frame.K, pred, gt, labels, 0.0, scale=legible_scale(rgb))
            cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
            break
    return path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.rate > 0:
        print('string-perception-demo: --rate must be > 0', file=sys.stderr)
        return 2
    return run_demo(args)


if __name__ == '__main__':
    sys.exit(main())

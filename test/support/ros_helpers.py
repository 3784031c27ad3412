"""Helpers for tests that run ROS 2 processes talking over loopback DDS (reused by the node tests).

In-test helpers (no rclpy import at module level):

- ``ros_skip_reason()``         why ROS tests cannot run here (None when they can)
- ``reserved_domain_id()``      a ROS_DOMAIN_ID in 1..101 no other test on this machine holds right now
                                (``string_perception.domain_reservation``, which the benchmarks use too)
- ``ros_test_env(domain_id)``   full child environment: loopback Fast DDS profile, domain id, unbuffered
- ``ProcessGroup``              start helper/peer processes (``sys.executable``, as ``child_process.ChildProcess``), wait/stop with timeouts,
                                always cleaned up, logs kept for failure messages
- ``make_detection_array()`` / ``make_label_info()`` / ``message_to_dict()``  deterministic vision_msgs
                                payloads and a plain-data view for round-trip comparisons
- ``percentile()``

Peer processes (``python test/support/ros_helpers.py <role> ...``):

- ``image-publisher``  640x480 rgb8 (+ 16UC1 depth) Images at a fixed rate, then a Detection3DArray and a
                       LabelInfo (reliable, transient local); writes what it sent as JSON
- ``listener``         receives those, records per-frame latency (receive time - header stamp) and writes JSON

Child processes inherit the parent's environment (LD_LIBRARY_PATH and the ros wheels' bootstrap guard), so
``sys.executable`` works directly; without the guard the wheels' .pth re-execs Python, which keeps the pid.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).resolve()
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from string_perception.child_process import ChildProcess  # noqa: E402
from string_perception.domain_reservation import reserved_domain_id  # noqa: E402,F401  (shared with benchmarks)
from string_perception.dds_env import merged_dds_env  # noqa: E402


# ----------------------------------------------------------------------------------------------------------
# In-test helpers
# ----------------------------------------------------------------------------------------------------------

def ros_skip_reason(*modules: str) -> str | None:
    """None when rclpy (and the given message modules, e.g. 'vision_msgs') can be imported."""
    for mod in ('rclpy', *modules):
        if importlib.util.find_spec(mod) is None:
            hint = ' (run scripts/build_interfaces.sh .venv)' if mod == 'vision_msgs' else ''
            return f'{mod} is not importable{hint}'
    return None


def ros_test_env(domain_id: int, **kwargs) -> dict[str, str]:
    """Environment for a child ROS process: os.environ + loopback DDS (see dds_env) + unbuffered output."""
    env = merged_dds_env(domain_id, **kwargs)
    env['PYTHONUNBUFFERED'] = '1'
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(REPO), env.get('PYTHONPATH', '')) if p)
    env.setdefault('RCUTILS_COLORIZED_OUTPUT', '0')
    return env


class ProcessGroup:
    """Start processes for one test and always stop them: ``with ProcessGroup(tmp_path, env) as pg:``."""

    def __init__(self, log_dir: Path, env: dict[str, str]):
        self.log_dir, self.env = Path(log_dir), env
        self.procs: list[ChildProcess] = []

    def start_python(self, name: str, args: list[str], cwd: Path = REPO) -> ChildProcess:
        """``sys.executable *args`` with this group's environment; output to ``<log_dir>/<name>.log``."""
        proc = ChildProcess(name, [sys.executable, *args], self.env, self.log_dir / f'{name}.log', cwd=cwd)
        self.procs.append(proc)
        return proc

    def start_peer(self, name: str, role: str, *args: str) -> ChildProcess:
        """A peer role of this file (see the module docstring)."""
        return self.start_python(name, [str(HELPERS), role, *args])

    def logs(self) -> str:
        return '\n'.join(f'--- {p.name} (pid {p.pid}, rc {p.popen.poll()}) ---\n{p.log()}' for p in self.procs)

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            p.stop()

    def __enter__(self) -> 'ProcessGroup':
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()


def percentile(values, q: float) -> float:
    vals = sorted(values)
    if not vals:
        return float('nan')
    pos = (len(vals) - 1) * q / 100.0
    lo, hi = int(pos), min(int(pos) + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


# ----------------------------------------------------------------------------------------------------------
# Message payloads (rclpy/vision_msgs imported lazily)
# ----------------------------------------------------------------------------------------------------------

def message_to_dict(msg):
    """Plain data (dict/list/float/int/str) view of a ROS message, recursing into nested messages."""
    if hasattr(msg, 'get_fields_and_field_types'):
        return {f: message_to_dict(getattr(msg, f)) for f in msg.get_fields_and_field_types()}
    if isinstance(msg, (bytes, bytearray)):
        return list(msg)
    if isinstance(msg, (list, tuple)) or type(msg).__name__ in ('array', 'ndarray'):
        return [message_to_dict(v) for v in msg]
    if hasattr(msg, 'item'):  # numpy scalar
        return msg.item()
    return msg


def make_detection_array(stamp=None, frame_id: str = 'camera_color_optical_frame'):
    """A deterministic vision_msgs/Detection3DArray with two boxes (every field non-default)."""
    from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

    arr = Detection3DArray()
    arr.header.frame_id = frame_id
    if stamp is not None:
        arr.header.stamp = stamp
    for i, (label, score) in enumerate((('mug', 0.875), ('screwdriver', 0.3125))):
        det = Detection3D()
        det.header = arr.header
        det.id = f'track-{i}'
        det.bbox.center.position.x = 0.1 + i
        det.bbox.center.position.y = -0.25 * (i + 1)
        det.bbox.center.position.z = 0.75 + 0.5 * i
        det.bbox.center.orientation.x = 0.0
        det.bbox.center.orientation.y = 0.0
        det.bbox.center.orientation.z = 0.3826834323650898
        det.bbox.center.orientation.w = 0.9238795325112867
        det.bbox.size.x, det.bbox.size.y, det.bbox.size.z = 0.08 + i, 0.09, 0.12 + 0.01 * i
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = label
        hyp.hypothesis.score = score
        hyp.pose.pose = det.bbox.center
        hyp.pose.covariance = [float(k) / 36.0 for k in range(36)]
        det.results.append(hyp)
        arr.detections.append(det)
    return arr


def make_label_info(stamp=None, names=('mug', 'screwdriver', 'box')):
    from vision_msgs.msg import LabelInfo, VisionClass
    info = LabelInfo()
    if stamp is not None:
        info.header.stamp = stamp
    info.class_map = [VisionClass(class_id=i, class_name=n) for i, n in enumerate(names)]
    info.threshold = 0.25
    return info


# ----------------------------------------------------------------------------------------------------------
# Peer processes
# ----------------------------------------------------------------------------------------------------------

def _qos(kind: str, depth: int):
    from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy)
    if kind == 'sensor':
        return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                          reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)
    if kind == 'reliable':
        return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                          reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
    if kind == 'latched':
        return QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                          reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    raise ValueError(kind)


def _frame_value(i: int) -> int:
    return (7 * i + 3) % 251


def _write_json(path: str, data) -> None:
    tmp = f'{path}.tmp'
    with open(tmp, 'w') as f:
        json.dump(data, f)
    os.replace(tmp, path)


def peer_image_publisher(a) -> int:
    import array

    import rclpy
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection3DArray, LabelInfo

    rclpy.init()
    node = rclpy.create_node('sp_test_image_publisher')
    pubs = {'image': node.create_publisher(Image, f'{a.prefix}/image', _qos(a.qos, 5))}
    if a.depth:
        pubs['depth'] = node.create_publisher(Image, f'{a.prefix}/depth', _qos(a.qos, 5))
    det_pub = node.create_publisher(Detection3DArray, f'{a.prefix}/detections', _qos('latched', 1))
    info_pub = node.create_publisher(LabelInfo, f'{a.prefix}/label_info', _qos('latched', 1))
    sent = {'frames': 0, 'matched_after_s': None}
    try:
        t0 = time.monotonic()
        everyone = list(pubs.values()) + [det_pub, info_pub]
        while any(p.get_subscription_count() < a.subscribers for p in everyone):
            if time.monotonic() - t0 > a.wait:
                print(f'no subscriber after {a.wait} s', flush=True)
                return 2
            time.sleep(0.02)
        sent['matched_after_s'] = round(time.monotonic() - t0, 3)
        time.sleep(a.settle)   # let the readers' side of discovery finish too
        h, w = a.height, a.width
        period = 1.0 / a.rate
        start = time.monotonic()
        for i in range(a.frames):
            target = start + i * period
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            img = Image(height=h, width=w, encoding='rgb8', is_bigendian=0, step=w * 3)
            img.data = array.array('B', bytes([_frame_value(i)])) * (h * w * 3)
            img.header.frame_id = f'frame-{i}'
            if a.depth:
                dep = Image(height=h, width=w, encoding='16UC1', is_bigendian=0, step=w * 2)
                dep.data = array.array('B', bytes([_frame_value(i), 0])) * (h * w)
                dep.header.frame_id = f'frame-{i}'
            # stamp right before publishing, so latency = publish + transport + delivery to the callback
            img.header.stamp = node.get_clock().now().to_msg()
            pubs['image'].publish(img)
            if a.depth:
                dep.header.stamp = img.header.stamp   # one capture time for the pair, as RGB-D drivers do
                pubs['depth'].publish(dep)
            sent['frames'] += 1
        sent['publish_s'] = round(time.monotonic() - start, 3)
        det = make_detection_array(node.get_clock().now().to_msg())
        info = make_label_info(det.header.stamp)
        det_pub.publish(det)
        info_pub.publish(info)
        sent['detections'] = message_to_dict(det)
        sent['label_info'] = message_to_dict(info)
        for p in (det_pub, info_pub):
            p.wait_for_all_acked(rclpy.duration.Duration(seconds=a.wait))
        _write_json(a.out, sent)
        time.sleep(a.linger)   # keep the transient-local samples available a little longer
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def peer_listener(a) -> int:
    import numpy as np
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection3DArray, LabelInfo

    rclpy.init()
    node = rclpy.create_node('sp_test_listener')
    got = {'image': {}, 'depth': {}, 'bad_payload': [], 'detections': None, 'label_info': None}
    done_at = [None]

    def on_image(kind):
        def cb(msg):
            now_ns = time.time_ns()
            stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            i = int(msg.header.frame_id.split('-')[1])
            data = np.frombuffer(msg.data, dtype=np.uint8)
            bpp = 3 if kind == 'image' else 2
            ok = (msg.height == a.height and msg.width == a.width and data.size == a.height * a.width * bpp
                  and data[0] == _frame_value(i) and data[-bpp] == _frame_value(i))
            if not ok:
                got['bad_payload'].append(f'{kind}:{i}')
            got[kind][i] = (now_ns - stamp_ns) / 1e6
        return cb

    node.create_subscription(Image, f'{a.prefix}/image', on_image('image'), _qos(a.qos, 5))
    if a.depth:
        node.create_subscription(Image, f'{a.prefix}/depth', on_image('depth'), _qos(a.qos, 5))

    hashes = {}

    def record_type_hash(topic):   # while the publisher is surely still there
        infos = node.get_publishers_info_by_topic(f'{a.prefix}/{topic}')
        hashes[topic] = sorted({str(i.topic_type_hash) for i in infos})

    def on_det(msg):
        got['detections'] = message_to_dict(msg)
        record_type_hash('detections')
        done_at[0] = done_at[0] or time.monotonic()

    def on_info(msg):
        got['label_info'] = message_to_dict(msg)
        record_type_hash('label_info')

    node.create_subscription(Detection3DArray, f'{a.prefix}/detections', on_det, _qos('latched', 1))
    node.create_subscription(LabelInfo, f'{a.prefix}/label_info', on_info, _qos('latched', 1))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + a.timeout
    try:
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            if done_at[0] is not None and got['label_info'] is not None and \
                    time.monotonic() - done_at[0] > a.drain:
                break
        out = {
            'type_hashes': hashes,
            'frames': {k: {str(i): lat for i, lat in got[k].items()} for k in ('image', 'depth')},
            'bad_payload': got['bad_payload'], 'detections': got['detections'],
            'label_info': got['label_info'], 'timed_out': done_at[0] is None,
        }
        _write_json(a.out, out)
        return 0
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='role', required=True)
    for role in ('image-publisher', 'listener'):
        p = sub.add_parser(role)
        p.add_argument('--prefix', default='/sp_test')
        p.add_argument('--out', required=True)
        p.add_argument('--width', type=int, default=640)
        p.add_argument('--height', type=int, default=480)
        p.add_argument('--depth', action='store_true', help='also a 16UC1 depth stream')
        p.add_argument('--qos', choices=('sensor', 'reliable'), default='sensor')
    pub = sub.choices['image-publisher']
    pub.add_argument('--frames', type=int, default=90)
    pub.add_argument('--rate', type=float, default=30.0)
    pub.add_argument('--subscribers', type=int, default=1)
    pub.add_argument('--wait', type=float, default=20.0)
    pub.add_argument('--settle', type=float, default=0.5)
    pub.add_argument('--linger', type=float, default=0.5)
    lis = sub.choices['listener']
    lis.add_argument('--timeout', type=float, default=40.0)
    lis.add_argument('--drain', type=float, default=0.5)
    a = ap.parse_args(argv)
    return {'image-publisher': peer_image_publisher, 'listener': peer_listener}[a.role](a)


if __name__ == '__main__':
    sys.exit(main())

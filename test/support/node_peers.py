"""Peer processes for test_node_dds.py (``python test/support/node_peers.py <role> ...``); environment from ros_helpers.

- ``frame-publisher``: generates scenes (``string_perception.scenes``, given seeds), waits until the node
  subscribes to all three topics and the listener is ready, then plays rgb8 Image + 16UC1 depth Image +
  CameraInfo with one stamp per frame at a fixed rate (best effort, as camera drivers do); writes
  ``{seed: stamp_ns}`` as JSON. ``--moving``: one scene whose objects move (``scenes.sequence``), frames keyed by
  index instead of seed.
- ``output-listener``: subscribes to the node's outputs (detections, markers, embedding, label_info,
  /diagnostics); writes what it received, keyed by header stamp, as JSON once the publisher is done and the
  outputs went quiet.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run as a script: the repository's `test` package
from test.support.ros_helpers import _qos, _write_json  # noqa: E402

FRAME_ID = 'camera_color_optical_frame'


def frame_publisher(a) -> int:
    import rclpy
    from sensor_msgs.msg import CameraInfo, Image

    from string_perception.codec.image_conversion import array_to_imgmsg
    from string_perception.scenes import SceneConfig, generate_frame
    from string_perception.scenes.sequence import SequenceConfig, generate_sequence

    rclpy.init()
    node = rclpy.create_node('sp_test_frame_publisher')
    topics = {'image': f'{a.prefix}/color/image_raw', 'depth': f'{a.prefix}/depth/image_raw',
              'info': f'{a.prefix}/color/camera_info'}
    pubs = {k: node.create_publisher(CameraInfo if k == 'info' else Image, t, _qos('sensor', 5))
            for k, t in topics.items()}
    try:
        cfg = SceneConfig(height=a.height, width=a.width)
        frames = []
        if a.moving:
            seq = [s.frame for s in generate_sequence(a.first_seed, SequenceConfig(frames=a.frames), cfg)]
        for seed in range(a.first_seed, a.first_seed + a.frames):   # generated before playing: steady 30 Hz
            f = seq[seed - a.first_seed] if a.moving else generate_frame(seed, cfg)
            info = CameraInfo(height=a.height, width=a.width, distortion_model='plumb_bob')
            info.k = [float(v) for v in f.K.reshape(-1)]
            info.p = [float(f.K[0, 0]), 0.0, float(f.K[0, 2]), 0.0, 0.0, float(f.K[1, 1]), float(f.K[1, 2]), 0.0,
                      0.0, 0.0, 1.0, 0.0]
            frames.append((seed, array_to_imgmsg(f.rgb, 'rgb8'), array_to_imgmsg(f.depth_mm, '16UC1'), info))
        t0 = time.monotonic()
        while any(p.get_subscription_count() < 1 for p in pubs.values()) or not os.path.exists(a.listener_ready):
            if time.monotonic() - t0 > a.wait:
                print(f'node/listener not ready after {a.wait} s', flush=True)
                return 2
            time.sleep(0.02)
        time.sleep(a.settle)
        sent, period, start = {}, 1.0 / a.rate, time.monotonic()
        for i, (seed, img, dep, info) in enumerate(frames):
            delay = start + i * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            stamp = node.get_clock().now().to_msg()
            for msg in (img, dep, info):
                msg.header.stamp, msg.header.frame_id = stamp, FRAME_ID
            pubs['image'].publish(img)
            pubs['depth'].publish(dep)
            pubs['info'].publish(info)
            sent[str(seed)] = stamp.sec * 1_000_000_000 + stamp.nanosec
        _write_json(a.out, {'stamps': sent, 'publish_s': round(time.monotonic() - start, 3), 'rate': a.rate})
        time.sleep(a.linger)
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def output_listener(a) -> int:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection3DArray, LabelInfo
    from visualization_msgs.msg import MarkerArray

    from string_perception.codec.detection_msgs import image_to_tensor, stamp_to_ns

    rclpy.init()
    node = rclpy.create_node('sp_test_output_listener')
    ns = a.node_ns
    got = {'detections': {}, 'markers': {}, 'embedding': {}, 'diagnostics': [], 'label_info': None, 'tracks': {},
           'tf': []}
    last = [time.monotonic()]

    def on_det(msg):
        now = time.time_ns()
        s = stamp_to_ns(msg.header.stamp)
        got['detections'][str(s)] = {
            'frame_id': msg.header.frame_id, 'latency_ms': (now - s) / 1e6,
            'det_frame_ids': [d.header.frame_id for d in msg.detections],
            'det_stamps': [stamp_to_ns(d.header.stamp) for d in msg.detections],
            'translations': [[d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.position.z]
                             for d in msg.detections],
            'quaternions': [[d.bbox.center.orientation.x, d.bbox.center.orientation.y, d.bbox.center.orientation.z,
                             d.bbox.center.orientation.w] for d in msg.detections],
            'sizes': [[d.bbox.size.x, d.bbox.size.y, d.bbox.size.z] for d in msg.detections],
            'class_ids': [d.results[0].hypothesis.class_id for d in msg.detections],
            'ids': [d.id for d in msg.detections],
            'scores': [d.results[0].hypothesis.score for d in msg.detections]}
        last[0] = time.monotonic()

    def on_markers(msg):
        s = str(stamp_to_ns(msg.markers[0].header.stamp)) if msg.markers else 'empty'
        got['markers'][s] = [{'ns': m.ns, 'id': m.id, 'type': m.type, 'action': m.action, 'frame_id':
                              m.header.frame_id, 'scale': [m.scale.x, m.scale.y, m.scale.z], 'alpha': m.color.a,
                              'text': m.text} for m in msg.markers]

    def on_emb(msg):
        got['embedding'][str(stamp_to_ns(msg.header.stamp))] = {
            'frame_id': msg.header.frame_id, 'encoding': msg.encoding, 'height': msg.height, 'width': msg.width,
            'values': image_to_tensor(msg).reshape(-1).tolist()}

    def on_diag(msg):
        for st in msg.status:
            if st.name.startswith('string_perception'):
                got['diagnostics'].append({'name': st.name, 'level': int.from_bytes(st.level, 'little')
                                           if isinstance(st.level, bytes) else int(st.level),
                                           'message': st.message, 'values': {kv.key: kv.value for kv in st.values}})

    def on_info(msg):
        got['label_info'] = {'names': [c.class_name for c in msg.class_map], 'threshold': msg.threshold}

    node.create_subscription(Detection3DArray, f'{ns}/detections', on_det, _qos('reliable', 50))
    node.create_subscription(MarkerArray, f'{ns}/markers', on_markers, _qos('reliable', 50))
    node.create_subscription(Image, f'{ns}/embedding', on_emb, _qos('reliable', 50))
    node.create_subscription(DiagnosticArray, '/diagnostics', on_diag, _qos('reliable', 10))
    node.create_subscription(LabelInfo, f'{ns}/label_info', on_info, _qos('latched', 1))
    if a.tracking:
        from tf2_msgs.msg import TFMessage
        node.create_subscription(Detection3DArray, f'{ns}/tracks', lambda m: got['tracks'].__setitem__(
            str(stamp_to_ns(m.header.stamp)), [d.id for d in m.detections]), _qos('reliable', 50))
        node.create_subscription(TFMessage, '/tf', lambda m: got['tf'].extend(
            [t.header.frame_id, t.child_frame_id, stamp_to_ns(t.header.stamp)] for t in m.transforms),
            _qos('reliable', 100))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + a.timeout
    ready = False
    try:
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            if not ready and node.count_publishers(f'{ns}/detections') >= 1 and got['label_info'] is not None:
                Path(a.ready).write_text('ready')
                ready = True
            if os.path.exists(a.publisher_done) and time.monotonic() - last[0] > a.quiet and got['diagnostics']:
                break
        _write_json(a.out, {**got, 'timed_out': time.monotonic() >= deadline})
        return 0
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='role', required=True)
    pub = sub.add_parser('frame-publisher')
    pub.add_argument('--prefix', required=True, help='camera namespace, e.g. /camera')
    pub.add_argument('--out', required=True)
    pub.add_argument('--listener-ready', required=True, help='file the listener creates when it is ready')
    pub.add_argument('--first-seed', type=int, default=2_000_000_000)
    pub.add_argument('--frames', type=int, default=60)
    pub.add_argument('--rate', type=float, default=30.0)
    pub.add_argument('--height', type=int, default=480)
    pub.add_argument('--width', type=int, default=640)
    pub.add_argument('--wait', type=float, default=30.0)
    pub.add_argument('--settle', type=float, default=0.5)
    pub.add_argument('--linger', type=float, default=1.0)
    pub.add_argument('--moving', action='store_true', help='one scene with moving objects (scenes.sequence)')
    lis = sub.add_parser('output-listener')
    lis.add_argument('--node-ns', default='/string_perception')
    lis.add_argument('--out', required=True)
    lis.add_argument('--ready', required=True)
    lis.add_argument('--publisher-done', required=True, help="the publisher's --out file")
    lis.add_argument('--timeout', type=float, default=50.0)
    lis.add_argument('--quiet', type=float, default=1.5, help='seconds without detections before stopping')
    lis.add_argument('--tracking', action='store_true', help='also record ~/tracks ids and /tf')
    a = ap.parse_args(argv)
    return {'frame-publisher': frame_publisher, 'output-listener': output_listener}[a.role](a)


if __name__ == '__main__':
    sys.exit(main())

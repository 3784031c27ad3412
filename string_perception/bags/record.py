"""Subscribe to topics and write a rosbag2 bag (``string-perception-record``), for machines without ``ros2 bag``.

    string-perception-record /camera/color/image_raw /camera/depth/image_raw /camera/color/camera_info -o my_bag
    string-perception-record --all -o my_bag --storage mcap --duration 10
    string-perception-record --all -o my_bag --max-bag-duration 60        # my_bag_0.db3, my_bag_1.db3, ...

On a ROS workcell the equivalent is ``ros2 bag record -o my_bag <topics>`` (``-s mcap`` for mcap). Messages
are stored as received (CDR bytes, no decoding) with their receive time, like ``ros2 bag record``; each
subscription's QoS matches the topic's publishers (reliable / transient local only when all of them offer it).
Topics appearing later are picked up (every 0.5 s). Stops on Ctrl-C / SIGTERM, after ``--duration`` seconds or
``--max-messages``, and always closes the bag (metadata.yaml written). ``--max-bag-size`` / ``--max-bag-duration``
split the recording into several storage files in the one bag folder, as ``ros2 bag record -b / -d`` (see
``splitting.py``). Types must be known to the rosbags typestore (ROS 2 standard messages and vision_msgs); others
are skipped with a warning.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from ..dds_env import apply_dds_env
from .ros_io import adaptive_qos, bag_qos, message_class
from .splitting import SplitPolicy
from .writer import COMPRESSION_MODES, STORAGES, BagWriter

__all__ = ['BagRecorder', 'main']

STARTED_LINE = 'string-perception-record: started'       # printed once the bag is open
RECORDING_LINE = 'string-perception-record: recording'     # printed per topic once subscribed: '<line> <topic>'


class BagRecorder:
    """Raw subscriptions on ``node`` writing into a :class:`BagWriter` (call :meth:`discover` periodically)."""

    def __init__(self, node, writer: BagWriter, topics: list[str] | None):
        self.node, self.writer, self.topics = node, writer, topics      # topics None = everything
        self.subscriptions: dict[str, object] = {}
        self.skipped: dict[str, str] = {}
        self.received = 0

    def discover(self) -> list[str]:
        """Subscribe to wanted topics that now have publishers; returns the topics newly subscribed."""
        new = []
        for topic, types in self.node.get_topic_names_and_types():
            if topic in self.subscriptions or topic in self.skipped:
                continue
            if self.topics is not None and topic not in self.topics:
                continue
            if self.topics is None and topic in ('/rosout', '/parameter_events'):
                continue
            msgtype = types[0]
            if msgtype not in self.writer.typestore.types:
                self.skipped[topic] = f'type {msgtype} unknown to the typestore'
                self.node.get_logger().warning(f'not recording {topic}: {self.skipped[topic]}')
                continue
            infos = self.node.get_publishers_info_by_topic(topic)
            if not infos:
                continue
            self.writer.connection(topic, msgtype, offered_qos=[bag_qos(i.qos_profile) for i in infos])
            self.subscriptions[topic] = self.node.create_subscription(
                message_class(msgtype), topic, self._callback(topic, msgtype), adaptive_qos(infos), raw=True)
            new.append(topic)
        return new

    def _callback(self, topic: str, msgtype: str):
        def on_message(data: bytes) -> None:
            self.writer.write_cdr(topic, msgtype, data, time.time_ns())
            self.received += 1
        return on_message

    def missing(self) -> list[str]:
        return [] if self.topics is None else [t for t in self.topics if t not in self.subscriptions]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-record', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('topics', nargs='*', help='topics to record')
    p.add_argument('--all', action='store_true', help='record every topic (except /rosout, /parameter_events)')
    p.add_argument('-o', '--output', required=True, help='bag folder to create (must not exist)')
    p.add_argument('-s', '--storage', choices=tuple(STORAGES), default='sqlite3')
    p.add_argument('--compression-mode', choices=COMPRESSION_MODES, default='none',
                   help='zstd-compress each message, or the storage file when the bag closes (as ros2 bag record)')
    p.add_argument('-b', '--max-bag-size', type=int, default=0,
                   help='start the next storage file after this many message bytes (0: one file)')
    p.add_argument('-d', '--max-bag-duration', type=float, default=0.0,
                   help='start the next storage file after this many seconds of log time (0: one file)')
    p.add_argument('--duration', type=float, default=None, help='stop after this many seconds')
    p.add_argument('--max-messages', type=int, default=None, help='stop after this many messages')
    p.add_argument('--domain-id', type=int, default=None,
                   help='ROS_DOMAIN_ID with the loopback-only DDS profile (default: the environment as it is)')
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        split = SplitPolicy(max_bytes=args.max_bag_size, max_duration_s=args.max_bag_duration)
    except ValueError as e:
        parser.error(str(e))
    if not args.topics and not args.all:
        print('string-perception-record: name the topics to record, or pass --all', file=sys.stderr)
        return 2
    if Path(args.output).exists():
        print(f'string-perception-record: {args.output} exists already; not overwriting', file=sys.stderr)
        return 2
    if args.domain_id is not None:
        apply_dds_env(args.domain_id)
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    rclpy.init(args=None)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    node = rclpy.create_node('string_perception_record')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    rec = None
    try:
        with BagWriter(args.output, storage=args.storage, compression=args.compression_mode,
                       split=split) as writer:
            rec = BagRecorder(node, writer, None if args.all else list(args.topics))
            start, next_discovery = time.monotonic(), 0.0
            print(f'{STARTED_LINE}: {args.output} ({args.storage}), '
                  f'{"every topic" if args.all else " ".join(args.topics)}', flush=True)
            try:
                while rclpy.ok():                    # Ctrl-C / SIGINT: rclpy's handler shuts the context down
                    now = time.monotonic()
                    if now >= next_discovery:
                        for topic in rec.discover():
                            print(f'{RECORDING_LINE} {topic}', flush=True)
                        next_discovery = now + 0.5
                    if args.duration is not None and now - start >= args.duration:
                        break
                    if args.max_messages is not None and rec.received >= args.max_messages:
                        break
                    try:
                        executor.spin_once(timeout_sec=0.05)
                    except Exception:
                        if rclpy.ok():
                            raise
                        break          # the signal came between the ok() check and the wait: an invalid context
            except (KeyboardInterrupt, ExternalShutdownException):
                pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    missing = rec.missing() if rec is not None else []
    files = len(rec.writer.storage_files) if rec is not None else 0
    print(f'string-perception-record: wrote {rec.received if rec else 0} messages to {args.output} '
          f'({files} storage file{"s" if files != 1 else ""})'
          + (f'; never saw {", ".join(missing)}' if missing else ''), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Publish a rosbag2 bag over DDS with its original timing (``string-perception-play``), without ``ros2 bag``.

    string-perception-play data/sample_recording                      # once, real time
    string-perception-play BAG --rate 0.5 --loop --remap /camera/color/image_raw/compressed:=/cam/rgb/compressed
    string-perception-play BAG --wait-for-subscribers 2 --topics /camera/depth/image_raw
    string-perception-play BAG --clock                                  # + /clock at 40 Hz (use_sim_time nodes)

Messages are published as the CDR bytes stored in the bag (no decoding), spaced as their recorded (receive)
times divided by ``--rate``. Publishers are reliable KEEP_LAST 100 (best-effort subscribers such as the node's
camera inputs accept them); a topic the recorder saw offered transient-local by every publisher (latched:
``/tf_static``, the node's ``~/label_info``) is played transient-local with its recorded depth, as
``ros2 bag play`` does, so a subscriber that joins later still gets it. The DDS environment is the process's own
(``ROS_DOMAIN_ID``, Fast DDS profile); ``--domain-id`` applies ``dds_env`` (loopback-only profile) first.

``--clock [HZ]`` (as ``ros2 bag play --clock``): the player is a ROS time source. It publishes
``rosgraph_msgs/Clock`` on ``/clock`` (best effort, depth 1, as rclcpp's ``ClockQoS``) every 1/HZ s of wall time
(default 40 Hz), holding the bag time it has reached: the first message's recorded time when playback starts,
then advancing with the recorded times at ``--rate``. A tick that falls due before a message is published before
it, so a node with ``use_sim_time`` never sees data from its future. Each loop starts the clock again at the start.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..dds_env import apply_dds_env
from .reader import BagError, open_bag
from .ros_io import message_class, parse_remaps, playback_qos

__all__ = ['BagPlayer', 'main']


CLOCK_TOPIC = '/clock'
DEFAULT_CLOCK_HZ = 40.0      # ros2 bag play --clock without a value


# Reliable publishers keep this many messages for slow subscribers: with a shallow history (10) a loaded machine
# overwrote frames a recorder had not acknowledged yet, and they were lost.
PLAYER_QOS_DEPTH = 100


def parse_wait_topics(items: Iterable[str] | None, count: int) -> dict[str, int] | None:
    """``['/a', '/b=1']`` -> ``{'/a': count, '/b': 1}`` (None stays None: every played topic)."""
    if items is None:
        return None
    out = {}
    for item in items:
        topic, sep, n = item.partition('=')
        try:
            out[topic] = int(n) if sep else count
        except ValueError:
            raise ValueError(f'--wait-topics: expected TOPIC or TOPIC=N, got {item!r}') from None
        if out[topic] < 0:
            raise ValueError(f'--wait-topics: subscriber count must be >= 0, got {item!r}')
    return out


class BagPlayer:
    """Publishers for a bag's topics on ``node``; :meth:`play` publishes its messages in time."""

    def __init__(self, node, bag: str | Path, *, rate: float = 1.0, remaps: dict[str, str] | None = None,
                 topics: Iterable[str] | None = None, reliability: str = 'reliable', clock_hz: float = 0.0):
        if not rate > 0:
            raise ValueError(f'rate must be > 0, got {rate}')
        if not (clock_hz >= 0 and clock_hz < float('inf')):
            raise ValueError(f'clock_hz must be >= 0 (0: no /clock), got {clock_hz}')
        self.node, self.bag, self.rate = node, Path(bag), float(rate)
        remaps = dict(remaps or {})
        reader = open_bag(self.bag)
        try:
            conns = [c for c in reader.connections if topics is None or c.topic in set(topics)]
            self.duration_ns = reader.duration
        finally:
            reader.close()
        if not conns:
            raise BagError(f'{self.bag}: none of the topics {sorted(topics or [])} is in the bag')
        self.publishers = {}
        self.output_topics = {}
        for c in conns:
            if c.topic in self.publishers:
                continue
            out = remaps.get(c.topic, c.topic)
            qos = playback_qos(getattr(c.ext, 'offered_qos_profiles', ()), reliability, PLAYER_QOS_DEPTH)
            self.publishers[c.topic] = node.create_publisher(message_class(c.msgtype), out, qos)
            self.output_topics[c.topic] = out
        self.published = 0
        self.clock_period_s = 1.0 / clock_hz if clock_hz else 0.0
        self.clock_publisher = self.clock_class = None
        self.clock_ticks = 0
        if clock_hz:
            from rclpy.qos import QoSProfile, ReliabilityPolicy
            from rosgraph_msgs.msg import Clock
            self.clock_class = Clock
            self.clock_publisher = node.create_publisher(
                Clock, CLOCK_TOPIC, QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))

    def wait_for_subscribers(self, count: int = 1, timeout: float = 30.0,
                             topics: Iterable[str] | Mapping[str, int] | None = None) -> bool:
        """Block until every (or each of ``topics``, bag names) publisher has ``count`` subscribers; a mapping
        ``{topic: n}`` gives each topic its own count."""
        wanted = dict(topics) if isinstance(topics, Mapping) else {t: count for t in (topics or self.publishers)}
        unknown = set(wanted) - set(self.publishers)
        if unknown:
            raise BagError(f'{self.bag}: not played, so cannot wait for subscribers: {", ".join(sorted(unknown))}')
        deadline = time.monotonic() + timeout
        while any(self.publishers[t].get_subscription_count() < n for t, n in wanted.items()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def play(self, loop: bool = False, should_stop: Callable[[], bool] = lambda: False,
             on_publish: Callable[[str, bytes], None] | None = None) -> int:
        """Publish every message once (or forever with ``loop``); returns how many were published.
        ``on_publish(bag_topic, cdr_bytes)`` is called right after each message is published."""
        while True:
            self._play_once(should_stop, on_publish)
            if not loop or should_stop():
                return self.published

    def wait_for_acks(self, timeout: float = 5.0) -> bool:
        """Block until reliable subscribers acknowledged everything published (call before exiting: a process that
        ends right after its last ``publish`` can take that message with it). Best-effort topics return at once."""
        from rclpy.duration import Duration
        return all(p.wait_for_all_acked(Duration(seconds=timeout)) for p in self.publishers.values())

    def _play_once(self, should_stop: Callable[[], bool], on_publish) -> None:
        reader = open_bag(self.bag)
        try:
            conns = [c for c in reader.connections if c.topic in self.publishers]
            start_wall, first, tick = time.monotonic(), None, 0
            for conn, t, raw in _checked(self.bag, reader.messages(conns)):
                if should_stop():
                    return
                first = t if first is None else first
                due = start_wall + (t - first) / 1e9 / self.rate
                while self.clock_publisher is not None and start_wall + tick * self.clock_period_s <= due:
                    _sleep_until(start_wall + tick * self.clock_period_s)
                    self._publish_clock(first + round(tick * self.clock_period_s * self.rate * 1e9))
                    tick += 1
                _sleep_until(due)
                data = bytes(raw)
                self.publishers[conn.topic].publish(data)
                self.published += 1
                if on_publish is not None:
                    on_publish(conn.topic, data)
        finally:
            reader.close()

    def _publish_clock(self, bag_time_ns: int) -> None:
        msg = self.clock_class()
        msg.clock.sec, msg.clock.nanosec = divmod(int(bag_time_ns), 1_000_000_000)
        self.clock_publisher.publish(msg)
        self.clock_ticks += 1


def _sleep_until(wall: float) -> None:
    delay = wall - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _checked(bag: Path, messages):
    """The reader's messages; a storage error becomes a :class:`BagError` naming the bag."""
    it = iter(messages)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except Exception as e:
            raise BagError(f'{bag}: reading stopped ({type(e).__name__}: {e}); is the bag truncated?') from e
        yield item


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-play', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('bag', help='rosbag2 folder (sqlite3 or mcap), or a .db3 / .mcap file')
    p.add_argument('--rate', type=float, default=1.0, help='playback speed factor')
    p.add_argument('--loop', action='store_true', help='play again and again until Ctrl-C')
    p.add_argument('--remap', nargs='+', default=[], metavar='FROM:=TO', help='publish topic FROM as TO')
    p.add_argument('--topics', nargs='+', default=None, help='only these topics (bag names)')
    p.add_argument('--reliability', choices=('reliable', 'best_effort'), default='reliable')
    p.add_argument('--wait-for-subscribers', type=int, default=0, metavar='N',
                   help='wait until every topic has N subscribers before playing')
    p.add_argument('--wait-topics', nargs='+', default=None, metavar='TOPIC[=N]',
                   help='only these (bag) topics need the N subscribers, or their own =N (default: every topic)')
    p.add_argument('--wait-timeout', type=float, default=30.0, help='seconds to wait for subscribers')
    p.add_argument('--clock', type=float, nargs='?', const=DEFAULT_CLOCK_HZ, default=0.0, metavar='HZ',
                   help=f'publish the bag time on {CLOCK_TOPIC} at HZ (default {DEFAULT_CLOCK_HZ:g} Hz when given '
                        'without a value), for nodes with use_sim_time')
    p.add_argument('--domain-id', type=int, default=None,
                   help='ROS_DOMAIN_ID with the loopback-only DDS profile (default: the environment as it is)')
    return p


def without_ros_args(argv: list[str]) -> list[str]:
    """``argv`` less its ROS arguments (``--ros-args ... [--]``, which launch_ros adds to name the node); rclpy
    reads those from ``sys.argv`` itself."""
    out, in_ros_args = [], False
    for a in argv:
        if a == '--ros-args':
            in_ros_args = True
        elif in_ros_args and a == '--':
            in_ros_args = False
        elif not in_ros_args:
            out.append(a)
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(without_ros_args(sys.argv[1:] if argv is None else argv))
    try:
        remaps = parse_remaps(args.remap)
        wait_topics = parse_wait_topics(args.wait_topics, args.wait_for_subscribers)
        if not 0 <= args.clock < float('inf'):
            raise ValueError(f'--clock: the rate must be a positive number of Hz, got {args.clock:g}')
    except ValueError as e:
        print(f'string-perception-play: {e}', file=sys.stderr)
        return 2
    if args.domain_id is not None:
        apply_dds_env(args.domain_id)
    import rclpy
    rclpy.init(args=None)
    node = rclpy.create_node('string_perception_play')
    try:
        player = BagPlayer(node, args.bag, rate=args.rate, remaps=remaps, topics=args.topics,
                           reliability=args.reliability, clock_hz=args.clock)
        if (args.wait_for_subscribers > 0 or wait_topics) and not player.wait_for_subscribers(
                args.wait_for_subscribers, args.wait_timeout, topics=wait_topics):
            print(f'string-perception-play: too few subscribers after {args.wait_timeout:g} s', file=sys.stderr)
            return 1
        print(f'playing {args.bag} ({len(player.publishers)} topics, {player.duration_ns / 1e9:.2f} s '
              f'at x{args.rate:g}' + (f', {CLOCK_TOPIC} at {args.clock:g} Hz' if args.clock else '') + ')',
              flush=True)
        n = player.play(loop=args.loop)
        acked = player.wait_for_acks()
        print(f'published {n} messages' + ('' if acked else ' (not all acknowledged by reliable subscribers)'),
              flush=True)
        return 0
    except BagError as e:
        print(f'string-perception-play: {e}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())

"""The simulated ALOHA cell in a closed loop over ROS (``string-perception-sim-aloha``): transfer-cube (or, with
``--task insertion``, insertion) episodes in LOCKSTEP with a controller (the perception node + the policy node,
launch/aloha_policy.launch.py).

Each control step (50 Hz of simulated time) publishes the top camera as an RGB-D driver does (colour rgb8, depth
16UC1 mm or 32FC1 m, CameraInfo; the recorder's / rollout.py's camera settings), ``/joint_states`` (the 14 joints
of rollout.JOINT_NAMES, grippers normalised 0..1) and ``/clock``, all stamped with the simulated time; then waits
for a command on ``--command-topic`` (sensor_msgs/JointState; default the policy node's) carrying that stamp and
applies its positions (by joint name). No command within ``--command-timeout``: the last command is held (the
start pose before any) and the step counts as a miss. Episodes are separated by ``--episode-gap`` simulated
seconds, so the policy node restarts its action ensemble. Messages are rosbags objects published as CDR bytes
(as sim_camera.py).

    string-perception-sim-aloha --seeds 0 1 2 --steps 400 --out runs/aloha_loop.json

Per episode it prints one JSON line: seed, success (reward 4 at the end), max_reward (stage reached), steps,
control steps per wall second, latency (ms, publishing the step's messages -> its command arriving) p50 / p99,
misses (timeouts) and late (commands for an earlier stamp). ``--trace-dir`` keeps every step's frames (as
published), qpos and commands (npz) for tests.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..aloha_tasks import ALOHA_TASK_NAMES, DEFAULT_ALOHA_TASK
from ..bags import messages as M
from ..bags.ros_io import message_class, publisher_qos
from ..bags.typestore import make_typestore
from ..dds_env import apply_dds_env

__all__ = ['READY_LINE', 'EPISODE_LINE', 'EpisodeStats', 'main', 'build_parser', 'COMMAND_TOPIC']

READY_LINE = 'string-perception-sim-aloha: controller answered, running episodes'
EPISODE_LINE = 'episode '
COMMAND_TOPIC = '/string_perception_policy/joint_command'     # the policy node's ~/joint_command
CAMERA_FRAME = 'camera_color_optical_frame'


@dataclass
class EpisodeStats:
    seed: int
    success: bool = False
    max_reward: int = 0
    steps: int = 0
    wall_s: float = 0.0
    steps_per_s: float = 0.0
    latency_ms_p50: float = float('nan')
    latency_ms_p99: float = float('nan')
    misses: int = 0
    late: int = 0
    stage_ms: dict = field(default_factory=dict)          # mean wall ms per step: render, publish, wait, physics
    latencies_ms: list = field(default_factory=list, repr=False)

    def summary(self) -> dict:
        d = asdict(self)
        d.pop('latencies_ms')
        return d


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-sim-aloha', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--task', default=DEFAULT_ALOHA_TASK, choices=ALOHA_TASK_NAMES,
                   help='the gym-aloha task (sim/demos/tasks.py); the policy file must be trained for it')
    p.add_argument('--seeds', type=int, nargs='+', default=[0], help='one episode per seed (gym-aloha reset pose)')
    p.add_argument('--steps', type=int, default=400, help='control steps per episode (gym-aloha: 400)')
    p.add_argument('--camera', default='top')
    p.add_argument('--height', type=int, default=120)
    p.add_argument('--width', type=int, default=160)
    p.add_argument('--depth-encoding', default='16UC1', choices=('16UC1', '32FC1'),
                   help='16UC1 mm (RealSense-like) or 32FC1 m (as the offline rollout feeds the model)')
    p.add_argument('--command-timeout', type=float, default=5.0, help='wall seconds to wait for each command')
    p.add_argument('--start-timeout', type=float, default=120.0,
                   help='wall seconds for the controller to come up and answer a first frame')
    p.add_argument('--episode-gap', type=float, default=1.0,
                   help='simulated seconds between episodes (above the policy node\'s episode_gap)')
    p.add_argument('--image-topic', default='/camera/color/image_raw')
    p.add_argument('--depth-topic', default='/camera/depth/image_raw')
    p.add_argument('--info-topic', default='/camera/color/camera_info')
    p.add_argument('--command-topic', default=COMMAND_TOPIC, help='sensor_msgs/JointState joint targets')
    p.add_argument('--out', type=Path, default=None, help='write every episode and the summary as JSON here')
    p.add_argument('--trace-dir', type=Path, default=None,
                   help='write episode_<seed>.npz: colour, depth, K, qpos, stamps, commands per step')
    p.add_argument('--domain-id', type=int, default=None,
                   help='ROS_DOMAIN_ID with the loopback-only DDS profile (default: the environment as it is)')
    return p


class _Loop:
    """The rclpy side: publishers (CDR bytes), the command subscription, waiting for a stamped command."""

    def __init__(self, args, joint_names):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState
        self.rclpy = rclpy
        self.node = rclpy.create_node('string_perception_sim_aloha')
        self.store = make_typestore()
        self.types = {'/clock': 'rosgraph_msgs/msg/Clock', '/joint_states': 'sensor_msgs/msg/JointState',
                      args.image_topic: 'sensor_msgs/msg/Image', args.depth_topic: 'sensor_msgs/msg/Image',
                      args.info_topic: 'sensor_msgs/msg/CameraInfo'}
        self.pubs = {t: self.node.create_publisher(message_class(ty), t, publisher_qos('reliable'))
                     for t, ty in self.types.items()}
        self.commands: dict[int, tuple[float, object]] = {}         # stamp ns -> (arrival monotonic s, msg)
        self.node.create_subscription(JointState, args.command_topic, self._on_command, publisher_qos('reliable'))
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.joint_names = tuple(joint_names)

    def _on_command(self, msg) -> None:
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.commands[stamp] = (time.monotonic(), msg)

    def publish(self, messages) -> float:
        for topic, msg in messages:
            self.pubs[topic].publish(bytes(self.store.serialize_cdr(msg, self.types[topic])))
        return time.monotonic()

    def wait_command(self, stamp_ns: int, timeout_s: float):
        """(arrival time, msg) of the command stamped ``stamp_ns``, or None after ``timeout_s``; commands for
        earlier stamps are discarded (returned count: late)."""
        deadline = time.monotonic() + timeout_s
        while stamp_ns not in self.commands and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=min(0.05, max(0.0, deadline - time.monotonic())))
        got = self.commands.pop(stamp_ns, None)
        late = [s for s in self.commands if s < stamp_ns]
        for s in late:
            del self.commands[s]
        return got, len(late)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


def depth_image(depth_m: np.ndarray, encoding: str) -> np.ndarray:
    """Depth in metres (0 = none) as published: 16UC1 -> uint16 mm [H,W], 32FC1 -> float32 m [H,W]."""
    if encoding == '16UC1':
        return np.clip(np.round(depth_m * 1000.0), 0, 65535).astype(np.uint16)
    return depth_m.astype(np.float32)


def _messages(obs, stamp_ns: int, args, joint_names):
    """(topic, rosbags message) of one observation."""
    Time = M.msg_type('builtin_interfaces/msg/Time')
    h, w = obs.color.shape[:2]
    depth = depth_image(obs.depth, args.depth_encoding)
    joints = M.msg_type('sensor_msgs/msg/JointState')(
        header=M.header(stamp_ns, ''), name=list(joint_names), position=np.asarray(obs.qpos, np.float64),
        velocity=np.zeros(0), effort=np.zeros(0))
    return [('/clock', M.msg_type('rosgraph_msgs/msg/Clock')(clock=Time(sec=int(stamp_ns // M.NS),
                                                                       nanosec=int(stamp_ns % M.NS)))),
            ('/joint_states', joints),
            (args.image_topic, M.image_msg(obs.color, 'rgb8', stamp_ns, CAMERA_FRAME)),
            (args.depth_topic, M.image_msg(depth, args.depth_encoding, stamp_ns, CAMERA_FRAME)),
            (args.info_topic, M.camera_info_msg(obs.K, h, w, stamp_ns, CAMERA_FRAME))]


def _command_positions(msg, joint_names) -> np.ndarray | None:
    """A JointState command -> [14] in ``joint_names`` order, or None if it lacks a joint or is not finite."""
    index = {n: i for i, n in enumerate(msg.name)}
    if len(msg.position) != len(msg.name) or any(n not in index for n in joint_names):
        return None
    a = np.asarray([msg.position[index[n]] for n in joint_names], np.float64)
    return a if np.isfinite(a).all() else None


def _wait_for_controller(loop: _Loop, obs, stamp_ns: int, args, joint_names) -> bool:
    """Publish the first observation (stamps before the episode's) until a command for one of them arrives."""
    deadline, period, k = time.monotonic() + args.start_timeout, 1.0, 0
    while time.monotonic() < deadline:
        stamp = stamp_ns + k * 1_000_000                   # 1 ms apart: all well before the episode
        loop.publish(_messages(obs, stamp, args, joint_names))
        got, _ = loop.wait_command(stamp, period)
        if got is not None:
            loop.commands.clear()
            return True
        k += 1
    return False


def run_episode(loop: _Loop, seed: int, t0_ns: int, args, joint_names, trace_dir: Path | None) -> EpisodeStats:
    from ..sim.demos.rollout import CellCamera, RolloutConfig
    from ..sim.demos.aloha_scene import CONTROL_DT
    from ..sim.demos.tasks import get_task
    task = get_task(args.task)
    scene = task.make_scene()
    scene.reset(seed)
    camera = CellCamera(scene, RolloutConfig(task=task.name, camera=args.camera, height=args.height,
                                             width=args.width))
    stats = EpisodeStats(seed)
    dt_ns = int(round(CONTROL_DT * 1e9))
    command = scene.qpos14()                                 # before any command: hold the start pose
    rewards = np.zeros(args.steps, np.int8)
    trace = {k: [] for k in ('color', 'depth', 'qpos', 'stamp_ns', 'command', 'answered')} if trace_dir else None
    wall0 = time.monotonic()
    try:
        for t in range(args.steps):
            w0 = time.monotonic()
            obs = camera.observe(t)
            stamp = t0_ns + t * dt_ns
            w1 = time.monotonic()
            sent = loop.publish(_messages(obs, stamp, args, joint_names))
            got, late = loop.wait_command(stamp, args.command_timeout)
            w2 = time.monotonic()
            stats.late += late
            positions = None if got is None else _command_positions(got[1], joint_names)
            if positions is None:
                stats.misses += 1
            else:
                command = positions
                stats.latencies_ms.append((got[0] - sent) * 1e3)
            if trace is not None:
                for k, v in (('color', obs.color), ('depth', depth_image(obs.depth, args.depth_encoding)),
                             ('qpos', obs.qpos), ('stamp_ns', stamp), ('command', command),
                             ('answered', positions is not None)):
                    trace[k].append(v)
            scene.step(command)
            rewards[t] = scene.reward()
            for k, v in (('render', w1 - w0), ('publish', sent - w1), ('wait', w2 - sent),
                         ('physics', time.monotonic() - w2)):
                stats.stage_ms[k] = stats.stage_ms.get(k, 0.0) + v * 1e3 / args.steps
    finally:
        camera.close()
    stats.wall_s = time.monotonic() - wall0
    stats.steps = args.steps
    stats.steps_per_s = args.steps / max(stats.wall_s, 1e-9)
    stats.success, stats.max_reward = bool(rewards[-1] == task.max_reward), int(rewards.max())
    if stats.latencies_ms:
        stats.latency_ms_p50 = float(np.percentile(stats.latencies_ms, 50))
        stats.latency_ms_p99 = float(np.percentile(stats.latencies_ms, 99))
    if trace is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(trace_dir / f'episode_{seed:06d}.npz', K=camera.K, rewards=rewards,
                            joint_names=np.array(joint_names), **{k: np.asarray(v) for k, v in trace.items()})
    return stats


def summarize(episodes: list[EpisodeStats]) -> dict:
    lat = [x for e in episodes for x in e.latencies_ms]
    steps, wall = sum(e.steps for e in episodes), sum(e.wall_s for e in episodes)
    return {'episodes': len(episodes), 'success_rate': float(np.mean([e.success for e in episodes])),
            'mean_max_reward': float(np.mean([e.max_reward for e in episodes])),
            'steps_per_s': steps / max(wall, 1e-9), 'misses': sum(e.misses for e in episodes),
            'late': sum(e.late for e in episodes),
            'latency_ms_p50': float(np.percentile(lat, 50)) if lat else float('nan'),
            'latency_ms_p99': float(np.percentile(lat, 99)) if lat else float('nan')}


def main(argv: list[str] | None = None) -> int:
    """Console script; arguments after ``--ros-args`` (as launch_ros appends them) go to rclpy."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args = argv[argv.index('--ros-args'):] if '--ros-args' in argv else []
    args = build_parser().parse_args(argv[:len(argv) - len(ros_args)])
    if args.steps < 1 or args.command_timeout <= 0:
        print('string-perception-sim-aloha: need --steps >= 1 and --command-timeout > 0', file=sys.stderr)
        return 2
    os.environ.setdefault('MUJOCO_GL', 'osmesa')
    if args.domain_id is not None:
        apply_dds_env(args.domain_id)
    from ..sim.demos.rollout import JOINT_NAMES, CellCamera, RolloutConfig    # mujoco: only when it runs
    from ..sim.demos.aloha_scene import CONTROL_DT
    from ..sim.demos.tasks import get_task
    import rclpy
    rclpy.init(args=['string-perception-sim-aloha', *ros_args])
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    loop = _Loop(args, JOINT_NAMES)
    episodes: list[EpisodeStats] = []
    try:
        scene = get_task(args.task).make_scene()
        scene.reset(args.seeds[0])
        camera = CellCamera(scene, RolloutConfig(task=args.task, camera=args.camera, height=args.height,
                                                 width=args.width))
        first = camera.observe(0)
        camera.close()
        gap_ns, episode_ns = int(args.episode_gap * 1e9), int(round(args.steps * CONTROL_DT * 1e9))
        if not _wait_for_controller(loop, first, gap_ns // 10, args, JOINT_NAMES):
            print(f'string-perception-sim-aloha: no command within {args.start_timeout:g} s: are the perception '
                  'and policy nodes running and remapped to these topics?', file=sys.stderr, flush=True)
            return 1
        print(READY_LINE, flush=True)
        t0 = gap_ns
        for seed in args.seeds:
            stats = run_episode(loop, seed, t0, args, JOINT_NAMES, args.trace_dir)
            episodes.append(stats)
            print(EPISODE_LINE + json.dumps(stats.summary()), flush=True)
            t0 += episode_ns + gap_ns
        summary = summarize(episodes)
        print('summary ' + json.dumps(summary), flush=True)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({'summary': summary, 'episodes': [e.summary() for e in episodes],
                                            'args': {k: str(v) for k, v in vars(args).items()}}, indent=1))
        return 0
    except KeyboardInterrupt:
        print(f'string-perception-sim-aloha: stopped after {len(episodes)} episodes', flush=True)
        return 0
    finally:
        loop.close()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())

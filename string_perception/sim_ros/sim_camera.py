"""A simulated RGB-D camera (``string-perception-sim``): a running MuJoCo workcell (sim/live.py) published as an
RGB-D driver does, for the node, RViz, the recorder and the bag evaluator.

    string-perception-sim --cell aloha --rig top --rate 15                 # real time, until Ctrl-C
    string-perception-sim --cell kuka --frames 30 --realtime-factor 0      # 30 frames as fast as it renders
    string-perception-sim --cell aloha --motion sweep                      # arms sweep instead of picking

Topics (camera_msgs.py): /camera/color/image_raw (rgb8), /camera/depth/image_raw (16UC1, registered to colour),
/camera/color/camera_info, /ground_truth/detections (Detection3DArray, class names as class ids), /clock (the
simulated time, plus ``--time-offset``; every header stamp is it), /tf (world -> camera_color_optical_frame and the
robot links), /joint_states. Messages are built as rosbags objects and published as their CDR bytes (as the bag player does).
Stops on Ctrl-C / SIGTERM or after --frames / --duration (simulated seconds).
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from ..bags.ros_io import message_class, publisher_qos
from ..bags.typestore import make_typestore
from ..dds_env import apply_dds_env

__all__ = ['READY_LINE', 'main', 'build_parser']

READY_LINE = 'string-perception-sim: publishing'


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-sim', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--cell', default='aloha', choices=('aloha', 'kuka'))
    p.add_argument('--seed', type=int, default=0, help='scene seed (objects, arm motion, camera jitter)')
    p.add_argument('--rig', default=None, help="camera position of the cell (e.g. aloha 'top', kuka "
                                               "'over_shoulder'); default: drawn from the seed")
    p.add_argument('--min-visible-pixels', type=int, default=None,
                   help='label objects with at least this many visible pixels (default: SimConfig.min_visible_pixels)')
    p.add_argument('--object-split', default='all', choices=('all', 'train', 'heldout'),
                   help='mesh objects drawn from these meshes (sim/mesh_library.py)')
    p.add_argument('--width', type=int, default=640)
    p.add_argument('--height', type=int, default=480)
    p.add_argument('--rate', type=float, default=15.0, help='frames per simulated second')
    p.add_argument('--realtime-factor', type=float, default=1.0,
                   help='simulated seconds per wall second (0: as fast as frames render)')
    p.add_argument('--frames', type=int, default=0, help='stop after this many frames (0: no limit)')
    p.add_argument('--duration', type=float, default=0.0, help='stop after this many simulated seconds (0: none)')
    p.add_argument('--time-offset', type=float, default=0.0,
                   help='seconds added to the simulated time in every stamp and /clock: a harness that runs several '
                        'cameras one after another against one node gives each its own time range, so that no stamp '
                        'of one run equals a stamp of another (every run starts its simulated time at 0)')
    p.add_argument('--motion', default='pick', choices=('pick', 'sweep'),
                   help='pick: scripted pick-and-place (an arm carries an object to a free place); sweep: arms move '
                        'between random collision-free configurations')
    p.add_argument('--respawn-period', type=float, default=2.0,
                   help='re-drop one object every this many seconds (0: only objects that fell off)')
    p.add_argument('--reliability', default='reliable', choices=('reliable', 'best_effort'))
    p.add_argument('--wait-for-subscribers', type=int, default=0,
                   help="before the first frame, wait until every topic has this many subscribers")
    p.add_argument('--wait-topics', nargs='+', default=None, metavar='TOPIC',
                   help='only these topics need the subscribers (default: every topic)')
    p.add_argument('--wait-timeout', type=float, default=30.0)
    p.add_argument('--domain-id', type=int, default=None,
                   help='ROS_DOMAIN_ID with the loopback-only DDS profile (default: the environment as it is)')
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.rate <= 0 or args.realtime_factor < 0 or args.time_offset < 0:
        print('string-perception-sim: need --rate > 0, --realtime-factor >= 0 and --time-offset >= 0', file=sys.stderr)
        return 2
    if args.domain_id is not None:
        apply_dds_env(args.domain_id)
    from ..sim import SimConfig    # mujoco: only when the camera runs
    from ..sim.live import LiveCell, LiveConfig
    from .camera_msgs import TOPIC_TYPES, view_messages

    try:
        labels = {} if args.min_visible_pixels is None else {'min_visible_pixels': args.min_visible_pixels}
        sim = SimConfig(cell=args.cell, height=args.height, width=args.width, object_split=args.object_split, **labels)
        cell = LiveCell(sim, seed=args.seed,
                        rig=args.rig, live=LiveConfig(motion=args.motion, respawn_period_s=args.respawn_period))
    except ValueError as e:
        print(f'string-perception-sim: {e}', file=sys.stderr)
        return 2
    import rclpy
    from rclpy.duration import Duration
    rclpy.init(args=None)
    node = rclpy.create_node('string_perception_sim')
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    store = make_typestore()
    pubs = {t: node.create_publisher(message_class(ty), t, publisher_qos(args.reliability))
            for t, ty in TOPIC_TYPES.items()}
    wait_topics = list(args.wait_topics or pubs)
    frames = 0
    try:
        unknown = set(wait_topics) - set(pubs)
        if unknown:
            print(f'string-perception-sim: --wait-topics {sorted(unknown)} are not published here', file=sys.stderr)
            return 2
        deadline = time.monotonic() + args.wait_timeout
        while args.wait_for_subscribers > 0 and any(
                pubs[t].get_subscription_count() < args.wait_for_subscribers for t in wait_topics):
            if time.monotonic() > deadline:
                print(f'string-perception-sim: too few subscribers after {args.wait_timeout:g} s', file=sys.stderr)
                return 1
            time.sleep(0.05)
        print(f'{READY_LINE} {args.cell} cell, camera {cell.rig.name}, {args.width}x{args.height} at '
              f'{args.rate:g} Hz, arms {args.motion}', flush=True)
        wall0, sim0 = time.monotonic(), cell.time_s
        while (args.frames <= 0 or frames < args.frames) and (
                args.duration <= 0 or cell.time_s - sim0 < args.duration):
            cell.advance(1.0 / args.rate)
            view = cell.view()
            stamp = int(round((view.time_s + args.time_offset) * 1e9))
            for topic, msg in view_messages(view, stamp):
                pubs[topic].publish(bytes(store.serialize_cdr(msg, TOPIC_TYPES[topic])))
            frames += 1
            if frames % max(1, int(args.rate)) == 1:
                doing = f', pick: {cell.picker.phase}' if cell.picker is not None else ''
                print(f'frame {frames}: t={view.time_s:.2f} s, {view.frame.num_objects} labelled objects{doing}',
                      flush=True)
            if args.realtime_factor > 0:
                ahead = wall0 + (cell.time_s - sim0) / args.realtime_factor - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        for p in pubs.values():
            p.wait_for_all_acked(Duration(seconds=5.0))
        print(f'string-perception-sim: published {frames} frames', flush=True)
        return 0
    except KeyboardInterrupt:
        print(f'string-perception-sim: stopped after {frames} frames', flush=True)
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())

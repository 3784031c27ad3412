"""string-perception-sim -> string-perception-record over loopback DDS (own ROS_DOMAIN_ID): the recorded bag
holds every topic of every frame, stamps follow /clock, the colour / depth / ground truth equal the same live
simulation run in this process, and the bag evaluator's reader reads the frames."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs', 'tf2_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs', 'tf2_msgs')))]

FRAMES, RATE = 5, 10.0
TIME_OFFSET_S = 100.0        # added to every stamp and /clock (sim_demo gives each of its runs its own range)
ARGS = ['--cell', 'kuka', '--rig', 'over_shoulder', '--seed', '4', '--width', '96', '--height', '72']


def _record(tmp_path):
    from string_perception.bags.record import RECORDING_LINE
    from string_perception.sim_ros.sim_camera import READY_LINE
    from string_perception.sim_ros.camera_msgs import TOPIC_TYPES
    bag = tmp_path / 'sim_bag'
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        rec = pg.start_python('record', ['-m', 'string_perception.bags.record', *TOPIC_TYPES, '-o', str(bag)])
        sim = pg.start_python('sim', ['-m', 'string_perception.sim_ros.sim_camera', *ARGS, '--frames', str(FRAMES),
                                      '--rate', str(RATE), '--realtime-factor', '0', '--wait-for-subscribers', '1',
                                      '--time-offset', str(TIME_OFFSET_S)])
        assert sim.wait_for_line(READY_LINE, 240), pg.logs()
        for topic in TOPIC_TYPES:
            assert rec.wait_for_line(f"{RECORDING_LINE} {topic}", 60), pg.logs()
        assert sim.wait(timeout=240) == 0, pg.logs()
        assert rec.stop(grace=60) == 0, pg.logs()          # SIGINT: the recorder closes the bag
    return bag


def test_sim_camera_recorded_bag_matches_the_simulation(tmp_path):
    from string_perception.bags.reader import BagFrameReader, open_bag
    from string_perception.bags.typestore import make_typestore
    from string_perception.sim import SIM_CLASS_NAMES, SimConfig
    from string_perception.sim.live import LiveCell
    from string_perception.sim_ros.camera_msgs import CAMERA_FRAME, TOPIC_TYPES

    bag = _record(tmp_path)
    store = make_typestore()
    reader = open_bag(bag)
    try:
        msgs = {t: [] for t in TOPIC_TYPES}
        for conn, _, raw in reader.messages():
            msgs[conn.topic].append(store.deserialize_cdr(bytes(raw), conn.msgtype))
    finally:
        reader.close()
    assert {t: len(m) for t, m in msgs.items()} == {t: FRAMES for t in TOPIC_TYPES}

    clock = [m.clock.sec * 10**9 + m.clock.nanosec for m in msgs['/clock']]
    assert np.allclose(np.diff(clock), 1e9 / RATE, atol=2e6)           # one frame per 1/RATE simulated seconds
    for topic in ('/camera/color/image_raw', '/camera/depth/image_raw', '/camera/color/camera_info',
                  '/ground_truth/detections', '/joint_states'):
        assert [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in msgs[topic]] == clock, topic
    tf_children = {t.child_frame_id for t in msgs['/tf'][0].transforms}
    assert CAMERA_FRAME in tf_children and {f'iiwa/lbr_iiwa_link_{i}' for i in range(8)} <= tf_children
    assert msgs['/joint_states'][0].name == [f'iiwa/lbr_iiwa_joint_{i}' for i in range(1, 8)]

    live = LiveCell(SimConfig(cell='kuka', height=72, width=96), seed=4, rig='over_shoulder')
    frames = list(BagFrameReader(bag, class_names=SIM_CLASS_NAMES))
    assert len(frames) == FRAMES
    for got, stamp in zip(frames, clock):
        live.advance(1.0 / RATE)
        view = live.view()
        assert stamp == int(round((view.time_s + TIME_OFFSET_S) * 1e9))
        want = view.frame
        assert np.array_equal(got.rgb, want.rgb) and np.array_equal(got.depth, want.depth_mm)
        assert np.allclose(got.K, want.K)
        assert list(got.ground_truth['labels']) == list(want.labels)


@pytest.mark.parametrize('bad', [['--time-offset', '-1'], ['--rate', '0'], ['--realtime-factor', '-1']])
def test_bad_timing_arguments_are_refused_with_a_clear_message(bad, capsys):
    from string_perception.sim_ros.sim_camera import main
    assert main([*ARGS, *bad]) == 2                                     # before any simulator or ROS start
    assert 'need --rate > 0, --realtime-factor >= 0 and --time-offset >= 0' in capsys.readouterr().err

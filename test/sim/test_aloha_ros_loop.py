"""The closed loop over loopback DDS (own ROS_DOMAIN_ID): string-perception-sim-aloha -> perception node (a tiny
model) -> policy node (the linear test policy) -> simulator, a few control steps of two episodes.

Known answer: every command the simulator applied equals the linear policy's actions on the perception model's
embedding of the frame the simulator published at that stamp (the runtime Pipeline recomputes it from the trace),
queried every ``query_every`` steps and ensembled as ACT does; each episode restarts the ensemble.
"""
import json
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import pytest  # noqa: E402

from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs', 'rosgraph_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs', 'rosgraph_msgs')))]

E, K, Q, M = 8, 5, 2, 0.1
SEEDS, STEPS = (0, 1), 4


def _files(tmp_path):
    from string_perception.runtime.policy_model import PolicyMetadata
    from string_perception.runtime.linear_policy import make_linear_policy
    from test.support.tiny_model import save_tiny_model
    from string_perception.sim.demos.rollout import JOINT_NAMES
    perception = save_tiny_model(tmp_path / 'tiny.onnx', embedding_dim=E)
    meta = PolicyMetadata(chunk_size=K, embed_dim=E, joint_names=JOINT_NAMES, control_rate_hz=50.0,
                          temporal_ensemble_m=M, query_every=Q, task='aloha_transfer_cube')
    policy = make_linear_policy(meta, seed=1)
    onnx.save(policy, str(tmp_path / 'policy.onnx'))
    return perception, tmp_path / 'policy.onnx', policy


@pytest.mark.parametrize('task', ['transfer_cube', 'insertion'])
def test_sim_perception_policy_loop_applies_the_policy_commands(tmp_path, task):
    from string_perception.ros.node import READY_LINE as NODE_READY, node_command
    from string_perception.ros.policy_node import READY_LINE as POLICY_READY, policy_node_command
    from string_perception.sim_ros.sim_aloha_loop import EPISODE_LINE, READY_LINE
    from string_perception.runtime import Pipeline
    from string_perception.runtime.action_chunks import TemporalEnsemble
    from string_perception.runtime.linear_policy import linear_policy_actions
    from string_perception.sim.demos.rollout import JOINT_NAMES
    from string_perception.policy.train_localiser import start_frame

    perception, policy_path, policy = _files(tmp_path)
    cam = {'image': '/camera/color/image_raw', 'depth': '/camera/depth/image_raw',
           'camera_info': '/camera/color/camera_info'}
    node_params = {'providers': ['CPUExecutionProvider'], 'intra_op_threads': 1, 'resize_mode': 'crop',
                   **{f'{k}_qos_reliability': 'reliable' for k in cam}}
    trace, out = tmp_path / 'trace', tmp_path / 'loop.json'
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        node = pg.start_python('perception', node_command(perception, params=node_params, remaps=cam)[1:])
        pol = pg.start_python('policy', policy_node_command(
            policy_path, params={'providers': ['CPUExecutionProvider']},
            remaps={'embedding': '/string_perception/embedding', 'joint_states': '/joint_states'})[1:])
        assert node.wait_for_line(NODE_READY, 120) and pol.wait_for_line(POLICY_READY, 120), pg.logs()
        sim = pg.start_python('sim', ['-m', 'string_perception.sim_ros.sim_aloha_loop', '--task', task,
                                      '--seeds', *map(str, SEEDS),
                                      '--steps', str(STEPS), '--trace-dir', str(trace), '--out', str(out)])
        assert sim.wait(timeout=300) == 0, pg.logs()
        assert sim.wait_for_line(READY_LINE, 1), pg.logs()
        log = sim.log()
    episodes = [json.loads(line[len(EPISODE_LINE):]) for line in log.splitlines() if line.startswith(EPISODE_LINE)]
    assert [e['seed'] for e in episodes] == list(SEEDS) and all(e['misses'] == 0 for e in episodes), log
    assert json.loads(out.read_text())['summary']['episodes'] == len(SEEDS)

    pipe = Pipeline(perception, providers=('CPUExecutionProvider',), resize_mode='crop')   # as the node here
    for seed in SEEDS:
        z = np.load(trace / f'episode_{seed:06d}.npz')
        assert list(z['joint_names']) == list(JOINT_NAMES) and z['answered'].all()
        np.testing.assert_array_equal(z['color'][0], start_frame(seed, task)[0])   # the task's cell at reset
        assert np.allclose(np.diff(z['stamp_ns']), 20_000_000)            # 50 Hz of simulated time
        ens = TemporalEnsemble(K, len(JOINT_NAMES), M)
        for t in range(STEPS):
            rgb = z['color'][t]
            emb = pipe(rgb, z['depth'][t], z['K'], encoding='rgb8', depth_encoding='16UC1',
                       intrinsics_hw=rgb.shape[:2]).embedding                                  # [E]
            if t % Q == 0:
                ens.add(t, linear_policy_actions(policy, emb[None], z['qpos'][t][None].astype(np.float32))[0])
            assert np.allclose(z['command'][t], ens.action(t), atol=1e-5), (seed, t)


def test_command_positions_are_read_by_name_and_bad_commands_refused():
    from types import SimpleNamespace as Msg

    from string_perception.sim_ros.sim_aloha_loop import _command_positions, depth_image
    names = ('a', 'b', 'c')
    assert _command_positions(Msg(name=['c', 'x', 'a', 'b'], position=[3.0, 9.0, 1.0, 2.0]), names).tolist() == \
        [1.0, 2.0, 3.0]
    assert _command_positions(Msg(name=['a', 'b'], position=[1.0, 2.0]), names) is None             # a joint missing
    assert _command_positions(Msg(name=['a', 'b', 'c'], position=[1.0, 2.0]), names) is None        # lengths differ
    assert _command_positions(Msg(name=['a', 'b', 'c'], position=[1.0, float('nan'), 3.0]), names) is None
    d = np.array([[0.0, 1.2344, 70.0]], np.float32)
    assert depth_image(d, '16UC1').tolist() == [[0, 1234, 65535]] and depth_image(d, '16UC1').dtype == np.uint16
    assert depth_image(d, '32FC1').dtype == np.float32


def test_sim_without_a_controller_exits_with_a_clear_message(tmp_path):
    from string_perception.sim_ros.sim_aloha_loop import READY_LINE
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        sim = pg.start_python('sim', ['-m', 'string_perception.sim_ros.sim_aloha_loop', '--steps', '2',
                                      '--start-timeout', '2', '--ros-args', '-r', '__node:=sim_test'])
        assert sim.wait(timeout=120) == 1, pg.logs()
        log = sim.log()
    assert 'no command within 2 s' in log and READY_LINE not in log and 'Traceback' not in log

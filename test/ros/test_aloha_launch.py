"""launch/aloha_policy.launch.py against the recording stand-ins of test_node_launch.py: the simulator, the
perception node and the policy node are remapped into one loop (sim camera -> perception inputs, perception
~/embedding -> policy embedding, /joint_states -> policy, policy ~/joint_command -> the simulator's command topic),
with executables that setup.py installs and parameters the nodes declare."""
import re
from pathlib import Path

import pytest

from string_perception import node_params as P
from string_perception.paths import (SHIPPED_INSERTION_PERCEPTION, SHIPPED_INSERTION_POLICY, SHIPPED_POLICY,
                                     SHIPPED_POLICY_PERCEPTION)
from string_perception.ros.node import DEFAULT_MODEL
from string_perception.ros import policy_params as PP
from string_perception.ros.aloha_launch import SIM_TOPICS
from string_perception.ros.launch_setup import node_fqn
from string_perception.sim_ros.sim_aloha_loop import build_parser
from test.ros.test_node_launch import _declared, _load, _resolve, _run

REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / 'launch' / 'aloha_policy.launch.py'


@pytest.fixture()
def description(monkeypatch):
    return _load(monkeypatch, LAUNCH)


def _by_executable(actions):
    return {a.kwargs['executable']: a.kwargs for a in actions}


def test_share_files_exist_and_executables_are_installed(description):
    paths = [_resolve(a.kwargs['default_value']) for a in _declared(description).values()]
    assert sorted(p.name for p in filter(None, paths)) == ['default.yaml', 'fastdds_loopback.xml']
    scripts = dict(re.findall(r"'([\w-]+) = ([\w.]+):main'", (REPO / 'setup.py').read_text()))
    nodes = _by_executable(_run(description, policy_model_path='/p.onnx'))
    assert {scripts[e] for e in nodes} == {'string_perception.ros.node', 'string_perception.ros.policy_node',
                                           'string_perception.sim_ros.sim_aloha_loop'}


@pytest.mark.parametrize('namespace', ['', '/cell'])
def test_the_three_processes_are_remapped_into_one_loop(description, namespace):
    actions = _run(description, model_path='/m.onnx', policy_model_path='/p.onnx', seeds='0, 3', steps='50',
                   results='/tmp/r.json', namespace=namespace, depth_encoding='32FC1')
    nodes = _by_executable(actions)
    perception, policy = nodes['string_perception_node'], nodes['string_perception_policy']
    sim = build_parser().parse_args(nodes['string-perception-sim-aloha']['arguments'])
    assert [type(a).__name__ for a in actions] == ['LifecycleNode', 'LifecycleNode', 'Node']
    assert dict(perception['remappings']) == {'image': sim.image_topic, 'depth': sim.depth_topic,
                                              'camera_info': sim.info_topic}
    assert dict(policy['remappings']) == {
        'embedding': node_fqn(namespace, perception['name']) + '/embedding', 'joint_states': SIM_TOPICS['joint_states']}
    assert sim.command_topic == node_fqn(namespace, policy['name']) + '/joint_command'
    assert (sim.seeds, sim.steps, str(sim.out), sim.depth_encoding) == ([0, 3], 50, '/tmp/r.json', '32FC1')
    params_file, overrides = perception['parameters']
    assert Path(params_file) == REPO / 'config' / 'default.yaml'
    assert overrides['model_path'] == '/m.onnx' and overrides['use_sim_time'] is True
    assert set(overrides) <= set(P.SPECS) | {'use_sim_time'}
    (policy_params,) = policy['parameters']
    assert policy_params == {'model_path': '/p.onnx', 'autostart': True, 'use_sim_time': True}
    assert set(policy_params) <= set(PP.SPECS) | {'use_sim_time'}


def test_bad_arguments_are_refused(description):
    with pytest.raises(ValueError, match='seeds'):
        _run(description, seeds='a,b', policy_model_path='/p.onnx')
    with pytest.raises(ValueError, match='use_sim_time'):
        _run(description, use_sim_time='perhaps', policy_model_path='/p.onnx')


@pytest.mark.parametrize('empty', ['', '  '])
def test_empty_model_paths_launch_the_shipped_pair(description, empty):
    nodes = _by_executable(_run(description, model_path=empty, policy_model_path=empty))
    perception, policy = nodes['string_perception_node'], nodes['string_perception_policy']
    assert Path(perception['parameters'][1]['model_path']) == REPO / 'models' / SHIPPED_POLICY_PERCEPTION
    assert Path(policy['parameters'][0]['model_path']) == REPO / 'models' / SHIPPED_POLICY
    # the policy's perception file, not the perception node's own default (the detector)
    assert SHIPPED_POLICY_PERCEPTION != DEFAULT_MODEL
    assert _by_executable(_run(description)) == nodes                     # not given at all: the same


def test_task_picks_the_simulated_task_and_its_shipped_pair(description):
    nodes = _by_executable(_run(description, task='insertion'))
    sim = build_parser().parse_args(nodes['string-perception-sim-aloha']['arguments'])
    assert sim.task == 'insertion'
    assert Path(nodes['string_perception_node']['parameters'][1]['model_path']) == \
        REPO / 'models' / SHIPPED_INSERTION_PERCEPTION
    assert Path(nodes['string_perception_policy']['parameters'][0]['model_path']) == \
        REPO / 'models' / SHIPPED_INSERTION_POLICY
    default = build_parser().parse_args(_by_executable(_run(description))['string-perception-sim-aloha']['arguments'])
    assert default.task == 'transfer_cube'
    with pytest.raises(ValueError, match='task'):
        _run(description, task='stacking', policy_model_path='/p.onnx')


def test_given_model_paths_hold(description):
    nodes = _by_executable(_run(description, policy_model_path='/p.onnx', model_path='/m.onnx'))
    assert nodes['string_perception_node']['parameters'][1]['model_path'] == '/m.onnx'
    assert nodes['string_perception_policy']['parameters'][0]['model_path'] == '/p.onnx'


@pytest.mark.parametrize('text, value', [('True', True), ('False', False), ('true', True), ('false', False)])
def test_boolean_arguments_take_either_case(description, text, value):
    nodes = _by_executable(_run(description, policy_model_path='/p.onnx', use_sim_time=text, loopback_only=text))
    assert nodes['string_perception_node']['parameters'][1]['use_sim_time'] is value
    assert nodes['string_perception_policy']['parameters'][0]['use_sim_time'] is value

"""ros_node_argv: the argv both nodes' ``*_command`` helpers return, known answers (no ROS graph)."""
from __future__ import annotations

from string_perception.ros.node import node_command
from string_perception.ros.node_argv import ros_node_argv
from string_perception.ros.policy_node import policy_node_command


def test_argv_known_answer():
    argv = ros_node_argv('pkg.mod', model_path='m.onnx', params={'rate': 0.5, 'model_path': 'other.onnx',
                                                                  'providers': ['CPUExecutionProvider'], 'on': True},
                         params_file='p.yaml', remaps={'image': '/cam/rgb'}, python='py')
    # the file first, then -p (rcl applies -p after files), model_path winning over params; values as JSON (YAML)
    assert argv == ['py', '-m', 'pkg.mod', '--ros-args', '--params-file', 'p.yaml',
                    '-p', 'rate:=0.5', '-p', 'model_path:="m.onnx"', '-p', 'providers:=["CPUExecutionProvider"]',
                    '-p', 'on:=true', '-r', 'image:=/cam/rgb']


def test_without_options():
    assert ros_node_argv('pkg.mod', python='py') == ['py', '-m', 'pkg.mod', '--ros-args']


def test_both_nodes_use_it():
    assert node_command('m.onnx', params_file='f.yaml', python='py') == ros_node_argv(
        'string_perception.ros.node', model_path='m.onnx', params_file='f.yaml', python='py')
    assert policy_node_command('p.onnx', remaps={'a': 'b'}, python='py') == ros_node_argv(
        'string_perception.ros.policy_node', model_path='p.onnx', remaps={'a': 'b'}, python='py')

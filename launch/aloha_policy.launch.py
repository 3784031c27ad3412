"""The closed loop over ROS: simulated ALOHA cell (lockstep) -> perception node -> policy node -> simulator.

    ros2 launch string_perception aloha_policy.launch.py                 # the shipped pair (models/MODEL_CARD_policy.md)
    ros2 launch string_perception aloha_policy.launch.py model_path:=perception.onnx policy_model_path:=policy.onnx
    ros2 launch string_perception aloha_policy.launch.py ... seeds:=0,1,2 steps:=400 results:=/tmp/loop.json
    ros2 launch string_perception aloha_policy.launch.py task:=insertion      # the shipped insertion pair

The simulator (string-perception-sim-aloha) runs episodes of ``task`` (transfer_cube or insertion), one per seed, publishing the top camera,
/joint_states and /clock at each control step and waiting for the policy node's ~/joint_command with that stamp
(string_perception/ros/aloha_launch.py wires the topics). ``use_sim_time`` (default true) puts both nodes on the
simulator's /clock; ``loopback_only`` keeps DDS on this host (the shipped Fast DDS profile). The simulator exits
after the last episode and prints / writes (``results``) success, control rate and image-stamp -> command latency.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from string_perception.aloha_tasks import DEFAULT_ALOHA_TASK
from string_perception.ros.aloha_launch import DEFAULT_POLICY_NODE_NAME, TASKS, aloha_policy_actions
from string_perception.ros.launch_setup import BOOL_CHOICES, loopback_environment

PACKAGE = 'string_perception'


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(PACKAGE)
    loopback = IfCondition(LaunchConfiguration('loopback_only'))
    args = [
        DeclareLaunchArgument('model_path', default_value='',
                              description='perception ONNX whose embedding the policy consumes (empty: the shipped '
                                          'policy perception file, models/aloha_policy_perception.onnx)'),
        DeclareLaunchArgument('policy_model_path', default_value='',
                              description='policy ONNX (runtime/policy_model.py contract; empty: the shipped policy, '
                                          'models/aloha_policy.onnx, see models/MODEL_CARD_policy.md)'),
        DeclareLaunchArgument('task', default_value=DEFAULT_ALOHA_TASK, choices=list(TASKS),
                              description='gym-aloha task the simulator runs; empty model paths pick its shipped '
                                          'pair (a given policy file must be trained for it)'),
        DeclareLaunchArgument('seeds', default_value='0', description='episodes: comma-separated reset seeds'),
        DeclareLaunchArgument('steps', default_value='400', description='control steps per episode'),
        DeclareLaunchArgument('results', default_value='', description='JSON file for the episode results'),
        DeclareLaunchArgument('depth_encoding', default_value='16UC1', choices=['16UC1', '32FC1'],
                              description='depth the simulator publishes: 16UC1 mm (driver-like) or 32FC1 m'),
        DeclareLaunchArgument('namespace', default_value='', description='namespace of the two nodes'),
        DeclareLaunchArgument('perception_node_name', default_value=PACKAGE),
        DeclareLaunchArgument('policy_node_name', default_value=DEFAULT_POLICY_NODE_NAME),
        DeclareLaunchArgument('config', default_value=PathJoinSubstitution([share, 'config', 'default.yaml']),
                              description='perception node parameters file'),
        DeclareLaunchArgument('use_sim_time', default_value='true', choices=BOOL_CHOICES),
        DeclareLaunchArgument('log_level', default_value='info',
                              choices=['debug', 'info', 'warn', 'error', 'fatal']),
        DeclareLaunchArgument('loopback_only', default_value='true', choices=BOOL_CHOICES,
                              description='keep DDS traffic on this host (the shipped Fast DDS profile)'),
        DeclareLaunchArgument('fastdds_profile',
                              default_value=PathJoinSubstitution([share, 'config', 'fastdds_loopback.xml'])),
    ]
    return LaunchDescription([
        *args,
        *loopback_environment(loopback),
        OpaqueFunction(function=aloha_policy_actions),
    ])

"""Launch the string_perception node (a lifecycle node) and optionally RViz for one RGB-D camera.

    ros2 launch string_perception string_perception.launch.py                       # realsense2_camera defaults
    ros2 launch string_perception string_perception.launch.py driver:=zed use_rviz:=true
    ros2 launch string_perception string_perception.launch.py camera:=/camera depth:=/camera/depth/image_raw
    ros2 launch string_perception string_perception.launch.py config:=my.yaml      # my.yaml's model_path is used

Inputs: ``driver`` (a driver version's topic layout: ``string_perception/ros/launch_setup.DRIVERS`` and docs/node.md's
table), ``camera_name`` / ``camera_namespace`` (the values given to the driver's own launch; empty = its defaults),
``camera`` (the whole topic prefix, replacing the preset's), ``image`` / ``depth`` / ``camera_info`` (full topic
names). Node: ``namespace``, ``node_name``, ``config`` (parameters file), and ``model_path`` / ``autostart`` /
``use_sim_time``: empty = not given, so the ``config`` file's value (else the node's default: the shipped model,
autostart true, wall time) holds; a given value wins over the file. ``log_level``. RViz: ``use_rviz``,
``rviz_config`` (template), ``fixed_frame`` (empty: the driver's colour optical frame); its topics follow
``namespace``/``node_name`` and it runs on sim time when the node does. Booleans: true, false, True or False.
DDS: the system's set-up by default (RMW, profiles, discovery range as the environment has them), so drivers and
RViz on other hosts or containers are reached. ``loopback_only:=true`` sets the shipped loopback-only Fast DDS
profile (``fastdds_profile``), as tests and the demo use.

Declarative only: the node and RViz actions are computed when the launch runs (``OpaqueFunction``).
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from string_perception.ros.launch_setup import (BOOL_CHOICES, DEFAULT_DRIVER, DRIVERS, OPTIONAL_BOOL_CHOICES,
                                                loopback_environment, single_camera_actions)

PACKAGE = 'string_perception'
UNSET = ' (empty: the config file decides)'


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(PACKAGE)
    loopback = IfCondition(LaunchConfiguration('loopback_only'))
    args = [
        DeclareLaunchArgument('driver', default_value=DEFAULT_DRIVER, choices=list(DRIVERS),
                              description='camera driver (and version) whose topic layout to use'),
        DeclareLaunchArgument('camera_name', default_value='',
                              description="the driver's camera name (empty: the driver's default)"),
        DeclareLaunchArgument('camera_namespace', default_value='',
                              description="the driver's camera namespace, realsense >= 4.55 (empty: its default)"),
        DeclareLaunchArgument('camera', default_value='', description='topic prefix replacing the preset\'s'),
        DeclareLaunchArgument('image', default_value='', description='colour topic (empty: from driver)'),
        DeclareLaunchArgument('depth', default_value='', description='depth topic registered to colour'),
        DeclareLaunchArgument('camera_info', default_value='', description='CameraInfo of the colour image'),
        DeclareLaunchArgument('namespace', default_value='', description='node namespace'),
        DeclareLaunchArgument('node_name', default_value=PACKAGE, description='node name'),
        DeclareLaunchArgument('model_path', default_value='',
                              description='ONNX model' + UNSET + ', else the shipped model'),
        DeclareLaunchArgument('config', default_value=PathJoinSubstitution([share, 'config', 'default.yaml']),
                              description='node parameters file'),
        DeclareLaunchArgument('autostart', default_value='', choices=OPTIONAL_BOOL_CHOICES,
                              description='configure and activate at start (false: wait for lifecycle transitions)'
                                          + UNSET),
        DeclareLaunchArgument('use_sim_time', default_value='', choices=OPTIONAL_BOOL_CHOICES,
                              description='node (and RViz) on /clock' + UNSET),
        DeclareLaunchArgument('log_level', default_value='info',
                              choices=['debug', 'info', 'warn', 'error', 'fatal']),
        DeclareLaunchArgument('use_rviz', default_value='false', choices=BOOL_CHOICES,
                              description='start RViz showing this node'),
        DeclareLaunchArgument('rviz_config',
                              default_value=PathJoinSubstitution([share, 'config', 'string_perception.rviz'])),
        DeclareLaunchArgument('fixed_frame', default_value='', description="RViz fixed frame (empty: the driver's "
                                                                           'colour optical frame)'),
        DeclareLaunchArgument('loopback_only', default_value='false', choices=BOOL_CHOICES,
                              description='keep DDS traffic on this host (the shipped Fast DDS profile)'),
        DeclareLaunchArgument('fastdds_profile',
                              default_value=PathJoinSubstitution([share, 'config', 'fastdds_loopback.xml']),
                              description='Fast DDS profile set when loopback_only is true'),
    ]
    return LaunchDescription([
        *args,
        *loopback_environment(loopback),
        OpaqueFunction(function=single_camera_actions),
    ])

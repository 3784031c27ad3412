"""One string_perception node per camera (e.g. the ALOHA cell's cam_high, cam_left_wrist, cam_right_wrist).

    ros2 launch string_perception multi_camera.launch.py
    ros2 launch string_perception multi_camera.launch.py cameras:=cam_high,cam_left_wrist driver:=zed

``cameras`` are the driver's camera names (realsense2_camera's ``camera_name``, ZED's ``camera_name``, depthai's
``name``, Orbbec's ``camera_name``); camera ``c`` is read where the ``driver`` preset puts it, e.g. realsense2_camera
>= 4.55 started with ``camera_name:=c``: ``/camera/c/color/image_raw`` (``camera_namespace``, default ``camera``).
Its node is ``<node_name>_<c>`` (in ``namespace``), so outputs are distinct: ``/string_perception_cam_high/detections``.
``model_path``, ``config``, ``autostart``, ``use_sim_time`` (empty: the config file decides), ``log_level`` and
``loopback_only`` apply to every node.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from string_perception.ros.launch_setup import (ALOHA_CAMERAS, BOOL_CHOICES, DEFAULT_DRIVER, DRIVERS,
                                                OPTIONAL_BOOL_CHOICES, loopback_environment, multi_camera_actions)

PACKAGE = 'string_perception'


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(PACKAGE)
    loopback = IfCondition(LaunchConfiguration('loopback_only'))
    args = [
        DeclareLaunchArgument('cameras', default_value=','.join(ALOHA_CAMERAS),
                              description="comma-separated camera names (the driver's), one node each"),
        DeclareLaunchArgument('driver', default_value=DEFAULT_DRIVER, choices=list(DRIVERS)),
        DeclareLaunchArgument('camera_namespace', default_value='',
                              description="the driver's camera namespace, realsense >= 4.55 (empty: its default)"),
        DeclareLaunchArgument('namespace', default_value=''),
        DeclareLaunchArgument('node_name', default_value=PACKAGE, description='prefix of the node names'),
        DeclareLaunchArgument('model_path', default_value=''),
        DeclareLaunchArgument('config', default_value=PathJoinSubstitution([share, 'config', 'default.yaml'])),
        DeclareLaunchArgument('autostart', default_value='', choices=OPTIONAL_BOOL_CHOICES,
                              description='empty: the config file decides (else true)'),
        DeclareLaunchArgument('use_sim_time', default_value='', choices=OPTIONAL_BOOL_CHOICES,
                              description='empty: the config file decides (else false)'),
        DeclareLaunchArgument('log_level', default_value='info',
                              choices=['debug', 'info', 'warn', 'error', 'fatal']),
        DeclareLaunchArgument('loopback_only', default_value='false', choices=BOOL_CHOICES),
        DeclareLaunchArgument('fastdds_profile',
                              default_value=PathJoinSubstitution([share, 'config', 'fastdds_loopback.xml'])),
    ]
    return LaunchDescription([
        *args,
        *loopback_environment(loopback),
        OpaqueFunction(function=multi_camera_actions),
    ])

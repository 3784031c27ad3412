"""Replay a recording into the string_perception node on the bag's time: the player publishes the recorded time on
/clock and the node (and RViz) run with use_sim_time true, so the node's clock, stamp checks, timers and
diagnostics follow the recording instead of the wall clock.

    ros2 launch string_perception replay.launch.py                                  # the bundled sample recording
    ros2 launch string_perception replay.launch.py bag:=/data/run3 image_transport:=raw rate:=0.5 use_rviz:=true
    ros2 launch string_perception replay.launch.py bag:=/data/run3 image:=/cam/rgb depth:=/cam/depth \\
        camera_info:=/cam/rgb/camera_info loop:=true

Player: ``bag`` (a rosbag2 folder, sqlite3 or mcap), ``rate``, ``loop``, ``clock_hz`` (the /clock rate, as
``ros2 bag play --clock``); it waits until the node subscribes to ``camera_info``. Node inputs: ``image`` /
``depth`` / ``camera_info`` (full topic names as recorded; defaults: the sample recording's),
``image_transport`` (raw | compressed: the colour topic is ``image`` or ``image``/compressed) and
``depth_transport`` (raw | compressedDepth). Node: ``namespace``, ``node_name``, ``model_path`` (empty: the
shipped model), ``config``, ``autostart``, ``log_level``. RViz: ``use_rviz``, ``rviz_config``, ``fixed_frame``.
DDS: ``loopback_only`` (default true: a replay stays on this host).
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from string_perception.ros.launch_setup import loopback_environment, replay_actions

PACKAGE = 'string_perception'


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(PACKAGE)
    loopback = IfCondition(LaunchConfiguration('loopback_only'))
    args = [
        DeclareLaunchArgument('bag', default_value=PathJoinSubstitution([share, 'data', 'sample_recording']),
                              description='rosbag2 folder to replay'),
        DeclareLaunchArgument('rate', default_value='1.0', description='playback speed factor'),
        DeclareLaunchArgument('loop', default_value='false', choices=['true', 'false']),
        DeclareLaunchArgument('clock_hz', default_value='40', description='/clock publication rate (Hz)'),
        DeclareLaunchArgument('image', default_value='/camera/color/image_raw', description='colour topic'),
        DeclareLaunchArgument('depth', default_value='/camera/depth/image_raw',
                              description='depth topic registered to colour'),
        DeclareLaunchArgument('camera_info', default_value='/camera/color/camera_info',
                              description='CameraInfo of the colour image'),
        DeclareLaunchArgument('image_transport', default_value='compressed', choices=['raw', 'compressed']),
        DeclareLaunchArgument('depth_transport', default_value='raw', choices=['raw', 'compressedDepth']),
        DeclareLaunchArgument('namespace', default_value='', description='node namespace'),
        DeclareLaunchArgument('node_name', default_value=PACKAGE, description='node name'),
        DeclareLaunchArgument('model_path', default_value='', description='ONNX model; empty = the shipped model'),
        DeclareLaunchArgument('config', default_value=PathJoinSubstitution([share, 'config', 'default.yaml']),
                              description='node parameters file'),
        DeclareLaunchArgument('autostart', default_value='true', choices=['true', 'false']),
        DeclareLaunchArgument('log_level', default_value='info',
                              choices=['debug', 'info', 'warn', 'error', 'fatal']),
        DeclareLaunchArgument('use_rviz', default_value='false', choices=['true', 'false']),
        DeclareLaunchArgument('rviz_config',
                              default_value=PathJoinSubstitution([share, 'config', 'string_perception.rviz'])),
        DeclareLaunchArgument('fixed_frame', default_value='camera_color_optical_frame',
                              description='RViz fixed frame'),
        DeclareLaunchArgument('loopback_only', default_value='true', choices=['true', 'false'],
                              description='keep DDS traffic on this host (the shipped Fast DDS profile)'),
        DeclareLaunchArgument('fastdds_profile',
                              default_value=PathJoinSubstitution([share, 'config', 'fastdds_loopback.xml'])),
    ]
    return LaunchDescription([
        *args,
        *loopback_environment(loopback),
        OpaqueFunction(function=replay_actions),
    ])

"""Launch the string_perception node (and optionally RViz) for one RGB-D camera.

    ros2 launch string_perception string_perception.launch.py camera:=/camera model_path:=/path/model.onnx

Arguments: ``camera`` (namespace of the camera driver: topics <camera>/color/image_raw, <camera>/depth/image_raw,
<camera>/color/camera_info; override each with ``image``, ``depth``, ``camera_info``), ``model_path`` (empty:
the shipped model), ``config`` (parameters file, default config/default.yaml), ``use_rviz``, ``fastdds_profile``
(Fast DDS XML profile; default: $FASTDDS_DEFAULT_PROFILES_FILE if set, else the shipped loopback profile
config/fastdds_loopback.xml; set it to your own profile for multi-machine set-ups). Declarative only: no work
happens while the description is built.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.conditions import IfCondition
from launch.substitutions import EnvironmentVariable, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

PACKAGE = 'string_perception'


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare(PACKAGE)
    camera = LaunchConfiguration('camera')
    args = [
        DeclareLaunchArgument('camera', default_value='/camera', description='camera driver namespace'),
        DeclareLaunchArgument('image', default_value=[camera, '/color/image_raw'], description='colour topic'),
        DeclareLaunchArgument('depth', default_value=[camera, '/depth/image_raw'],
                              description='depth topic, registered to colour'),
        DeclareLaunchArgument('camera_info', default_value=[camera, '/color/camera_info'],
                              description='CameraInfo of the colour image'),
        DeclareLaunchArgument('model_path', default_value='', description='ONNX model; empty = the shipped model'),
        DeclareLaunchArgument('config', default_value=PathJoinSubstitution([share, 'config', 'default.yaml']),
                              description='node parameters file'),
        DeclareLaunchArgument('use_rviz', default_value='false', description='start RViz with the shipped config'),
        DeclareLaunchArgument('rviz_config',
                              default_value=PathJoinSubstitution([share, 'config', 'string_perception.rviz'])),
        DeclareLaunchArgument('fastdds_profile', default_value=EnvironmentVariable(
            'FASTDDS_DEFAULT_PROFILES_FILE',
            default_value=PathJoinSubstitution([share, 'config', 'fastdds_loopback.xml'])),
            description='Fast DDS XML profile (default: the shipped loopback profile)'),
    ]
    node = Node(
        package=PACKAGE, executable='string_perception_node', name='string_perception', output='screen',
        parameters=[LaunchConfiguration('config'), {'model_path': LaunchConfiguration('model_path')}],
        remappings=[('image', LaunchConfiguration('image')), ('depth', LaunchConfiguration('depth')),
                    ('camera_info', LaunchConfiguration('camera_info'))])
    rviz = Node(package='rviz2', executable='rviz2', name='rviz2', output='log',
                arguments=['-d', LaunchConfiguration('rviz_config')],
                condition=IfCondition(LaunchConfiguration('use_rviz')))
    return LaunchDescription([
        *args,
        SetEnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', LaunchConfiguration('fastdds_profile')),
        SetEnvironmentVariable('RMW_IMPLEMENTATION', EnvironmentVariable('RMW_IMPLEMENTATION',
                                                                         default_value='rmw_fastrtps_cpp')),
        node, rviz,
    ])

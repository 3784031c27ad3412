"""What ``launch/*.launch.py`` start, computed at launch time from the launch arguments.

- :data:`DRIVERS`: the topic layout of each supported RGB-D driver (colour, depth registered to colour,
  CameraInfo, the colour optical frame) relative to its camera namespace; :func:`camera_topics` applies a
  namespace and explicit overrides.
- :func:`rviz_config` rewrites the shipped RViz config so its fixed frame and topics follow the arguments.
- :func:`single_camera_actions` / :func:`multi_camera_actions`: ``OpaqueFunction`` bodies that return the
  ``launch_ros`` ``LifecycleNode`` (and RViz) actions; :func:`replay_actions` adds the bag player (``/clock``)
  and puts everything on sim time. ``launch``/``launch_ros`` are imported only there, so the
  rest is testable without them.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ['DriverTopics', 'DRIVERS', 'DEFAULT_DRIVER', 'ALOHA_CAMERAS', 'parse_bool', 'camera_topics',
           'node_fqn', 'rviz_config', 'node_action', 'single_camera_actions', 'multi_camera_actions',
           'replay_actions']

PACKAGE = 'string_perception'
EXECUTABLE = 'string_perception_node'


@dataclass(frozen=True)
class DriverTopics:
    """Topics of one driver, relative to its camera namespace ``camera`` (the driver's default)."""
    camera: str
    image: str
    depth: str
    camera_info: str
    frame: str            # the colour optical frame (RViz fixed frame)
    depth_encoding: str
    note: str


DRIVERS: dict[str, DriverTopics] = {
    'realsense': DriverTopics('/camera/camera', 'color/image_raw', 'aligned_depth_to_color/image_raw',
                              'color/camera_info', 'camera_color_optical_frame', '16UC1',
                              'realsense2_camera 4.x; start it with align_depth.enable:=true (older wrappers '
                              'use the namespace /camera: camera:=/camera)'),
    'zed': DriverTopics('/zed/zed_node', 'rgb/image_rect_color', 'depth/depth_registered', 'rgb/camera_info',
                        'zed_left_camera_optical_frame', '32FC1',
                        'zed-ros2-wrapper 4.x (camera_model zed2i etc.; the namespace is /<camera_name>/zed_node); '
                        'depth_registered is in metres, registered to the left rectified image'),
    'depthai': DriverTopics('/oak', 'rgb/image_raw', 'stereo/image_raw', 'rgb/camera_info',
                            'oak_rgb_camera_optical_frame', '16UC1',
                            'depthai-ros (depthai_ros_driver camera.launch.py); stereo depth is aligned to rgb '
                            'while stereo.i_align_depth is true (its default)'),
    'orbbec': DriverTopics('/camera', 'color/image_raw', 'depth/image_raw', 'color/camera_info',
                           'camera_color_optical_frame', '16UC1',
                           'OrbbecSDK_ROS2; start it with depth_registration:=true so depth is registered to colour'),
}
DEFAULT_DRIVER = 'realsense'
ALOHA_CAMERAS = ('cam_high', 'cam_left_wrist', 'cam_right_wrist')


def parse_bool(value: str, name: str) -> bool:
    """A launch argument as a bool ('true'/'false', any case; also 1/0, yes/no); ValueError otherwise."""
    text = str(value).strip().lower()
    if text in ('true', '1', 'yes', 'on'):
        return True
    if text in ('false', '0', 'no', 'off'):
        return False
    raise ValueError(f'launch argument {name}:={value!r} must be true or false')


def _join(namespace: str, rel: str) -> str:
    return '/' + '/'.join(p for p in (namespace.strip('/'), rel.strip('/')) if p)


def camera_topics(driver: str = DEFAULT_DRIVER, camera: str = '', image: str = '', depth: str = '',
                  camera_info: str = '') -> dict[str, str]:
    """``{'image', 'depth', 'camera_info', 'frame'}`` for ``driver`` under ``camera`` (empty: the driver's
    namespace); a non-empty ``image``/``depth``/``camera_info`` is used as given."""
    if driver not in DRIVERS:
        raise ValueError(f'launch argument driver:={driver!r} is not one of {", ".join(DRIVERS)}')
    d = DRIVERS[driver]
    ns = camera or d.camera
    return {'image': image or _join(ns, d.image), 'depth': depth or _join(ns, d.depth),
            'camera_info': camera_info or _join(ns, d.camera_info), 'frame': d.frame}


def node_fqn(namespace: str, node_name: str) -> str:
    """Fully qualified node name, e.g. ('/cell', 'string_perception') -> '/cell/string_perception'."""
    return _join(namespace, node_name)


def rviz_config(template: str | Path, node: str, fixed_frame: str, image_topic: str | None = None) -> str:
    """The shipped RViz config with its fixed frame and topics set: markers and debug image of ``node`` (fully
    qualified name), the camera image display on ``image_topic``. Returns YAML text."""
    import yaml
    cfg = yaml.safe_load(Path(template).read_text())
    manager = cfg['Visualization Manager']
    manager['Global Options']['Fixed Frame'] = fixed_frame
    topics = {'Detections': f'{node}/markers', 'Debug image': f'{node}/debug_image'}
    if image_topic:
        topics['Camera image'] = image_topic
    for display in manager['Displays']:
        if display.get('Name') in topics:
            display['Topic']['Value'] = topics[display['Name']]
    return yaml.safe_dump(cfg, sort_keys=False)


def _write_rviz(text: str, node: str) -> str:
    fd, path = tempfile.mkstemp(prefix=f'{node.strip("/").replace("/", "_")}_', suffix='.rviz')
    with open(fd, 'w') as f:
        f.write(text)
    return path


def node_action(cfg: Mapping[str, str], *, node_name: str, topics: Mapping[str, str],
                extra_params: Mapping[str, Any] | None = None):
    """The node as a ``launch_ros`` ``LifecycleNode`` (launch or a lifecycle manager can drive its transitions;
    with autostart true it configures and activates itself). ``extra_params`` override the parameters file."""
    from launch_ros.actions import LifecycleNode
    params: list[Any] = [cfg['config'], {'model_path': cfg['model_path'],
                                         'autostart': parse_bool(cfg['autostart'], 'autostart'),
                                         'use_sim_time': parse_bool(cfg['use_sim_time'], 'use_sim_time'),
                                         **(extra_params or {})}]
    return LifecycleNode(package=PACKAGE, executable=EXECUTABLE, name=node_name, namespace=cfg['namespace'],
                         output='screen', parameters=params,
                         remappings=[(k, topics[k]) for k in ('image', 'depth', 'camera_info')],
                         arguments=['--ros-args', '--log-level', cfg['log_level']])


def single_camera_actions(context, *_args, **_kwargs) -> list:
    """``OpaqueFunction`` body of ``string_perception.launch.py``."""
    from launch_ros.actions import Node
    cfg = context.launch_configurations
    topics = camera_topics(cfg['driver'], cfg['camera'], cfg['image'], cfg['depth'], cfg['camera_info'])
    actions = [node_action(cfg, node_name=cfg['node_name'], topics=topics)]
    if parse_bool(cfg['use_rviz'], 'use_rviz'):
        fqn = node_fqn(cfg['namespace'], cfg['node_name'])
        text = rviz_config(cfg['rviz_config'], fqn, cfg['fixed_frame'] or topics['frame'], topics['image'])
        actions.append(Node(package='rviz2', executable='rviz2', name=f'rviz2_{cfg["node_name"]}',
                            namespace=cfg['namespace'], output='log', arguments=['-d', _write_rviz(text, fqn)]))
    return actions


def multi_camera_actions(context, *_args, **_kwargs) -> list:
    """``OpaqueFunction`` body of ``multi_camera.launch.py``: one node per camera in ``cameras`` (comma
    separated), named ``<node_name>_<camera>``, inputs under ``/<camera>`` in the driver's layout."""
    cfg = context.launch_configurations
    cameras = [c.strip().strip('/') for c in cfg['cameras'].split(',') if c.strip().strip('/')]
    if not cameras or len(set(cameras)) != len(cameras):
        raise ValueError(f'launch argument cameras:={cfg["cameras"]!r} must list distinct camera names')
    return [node_action(cfg, node_name=f'{cfg["node_name"]}_{cam}',
                        topics=camera_topics(cfg['driver'], '/' + cam)) for cam in cameras]


PLAY_EXECUTABLE = 'string-perception-play'


def replay_actions(context, *_args, **_kwargs) -> list:
    """``OpaqueFunction`` body of ``replay.launch.py``: the bag player, publishing the recorded time on /clock
    (``--clock``), and the node with ``use_sim_time`` true, RViz too when asked (also on sim time). The player
    waits until the node subscribes to ``camera_info`` (a bag topic) so the first frames are not lost."""
    from launch_ros.actions import Node
    cfg = dict(context.launch_configurations, use_sim_time='true')
    clock_hz, rate = float(cfg['clock_hz']), float(cfg['rate'])
    if not (clock_hz > 0 and rate > 0):
        raise ValueError(f'launch arguments clock_hz:={cfg["clock_hz"]} and rate:={cfg["rate"]} must be > 0')
    topics = {k: cfg[k] for k in ('image', 'depth', 'camera_info')}
    player_args = [cfg['bag'], '--clock', f'{clock_hz:g}', '--rate', f'{rate:g}',
                   '--wait-for-subscribers', '1', '--wait-topics', topics['camera_info'], '--wait-timeout', '120']
    if parse_bool(cfg['loop'], 'loop'):
        player_args.append('--loop')
    actions = [
        Node(package=PACKAGE, executable=PLAY_EXECUTABLE, name='string_perception_play', output='screen',
             arguments=player_args),
        node_action(cfg, node_name=cfg['node_name'], topics=topics,
                    extra_params={'image_transport': cfg['image_transport'],
                                  'depth_transport': cfg['depth_transport']}),
    ]
    if parse_bool(cfg['use_rviz'], 'use_rviz'):
        fqn = node_fqn(cfg['namespace'], cfg['node_name'])
        text = rviz_config(cfg['rviz_config'], fqn, cfg['fixed_frame'], topics['image'])
        actions.append(Node(package='rviz2', executable='rviz2', name=f'rviz2_{cfg["node_name"]}',
                            namespace=cfg['namespace'], output='log', arguments=['-d', _write_rviz(text, fqn)],
                            parameters=[{'use_sim_time': True}]))
    return actions

"""What ``launch/*.launch.py`` start, computed at launch time from the launch arguments.

- :data:`DRIVERS`: one :class:`DriverPreset` per supported RGB-D driver *version*: where its colour, depth registered
  to colour and CameraInfo topics live relative to the driver's camera name / namespace, the colour optical frame,
  which upstream release the layout was checked against, and the driver parameters file (``config/driver_*.yaml``)
  that makes it publish depth registered to colour. :func:`camera_topics` applies a camera name, namespace and
  explicit overrides.
- :func:`node_parameters`: the node's ``parameters`` list. The ``config`` file comes first and a dict holds only the
  launch arguments that were *given* (empty = unset). launch_ros writes that dict to a parameters file keyed by the
  node's full name (``Node._create_params_file_from_dict``) and passes it after ``config``; rcl applies parameter
  files in order, the later one winning, whatever their node-name keys. So a given argument wins over the file,
  and an unset one leaves the file's value (or the node's default) alone.
- :func:`rviz_config` rewrites the shipped RViz config so its fixed frame and topics follow the arguments; RViz gets
  ``use_sim_time`` when the node runs on sim time (the argument, else the ``config`` file's value for the node).
- :func:`single_camera_actions` / :func:`multi_camera_actions`: ``OpaqueFunction`` bodies that return the
  ``launch_ros`` ``LifecycleNode`` (and RViz) actions; :func:`replay_actions` adds the bag player (``/clock``)
  and puts everything on sim time. ``launch``/``launch_ros`` are imported only there, so the
  rest is testable without them.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ['DriverPreset', 'DRIVERS', 'DEFAULT_DRIVER', 'ALOHA_CAMERAS', 'BOOL_CHOICES', 'OPTIONAL_BOOL_CHOICES',
           'parse_bool', 'optional_bool', 'camera_topics', 'node_fqn', 'node_parameters', 'file_parameter',
           'rviz_config', 'node_action', 'single_camera_actions', 'multi_camera_actions', 'replay_actions']

PACKAGE = 'string_perception'
EXECUTABLE = 'string_perception_node'
BOOL_CHOICES = ['true', 'false', 'True', 'False']     # what launch's IfCondition reads (case-insensitive)
OPTIONAL_BOOL_CHOICES = ['', *BOOL_CHOICES]            # '' = not given: the config file (or the node) decides


@dataclass(frozen=True)
class DriverPreset:
    """Topic layout of one driver version. ``root`` is the topic prefix as a template over ``{camera}`` (the
    driver's camera name launch argument) and ``{namespace}`` (its camera namespace argument, where it has one);
    ``image`` / ``depth`` / ``camera_info`` are relative to it; ``frame`` is the colour optical frame (template
    over ``{camera}``)."""
    driver: str            # upstream package and the versions this layout holds for
    checked: str           # upstream release / commit whose source the layout was read from
    root: str
    camera: str            # the driver's default camera name
    namespace: str         # the driver's default camera namespace ('' where the root has no {namespace})
    image: str
    depth: str
    camera_info: str
    frame: str
    depth_encoding: str
    params_file: str       # config/<file>: the driver parameters that give registered depth (its header: how)


DRIVERS: dict[str, DriverPreset] = {
    'realsense': DriverPreset(
        'realsense2_camera >= 4.55 (rs_launch.py)',
        'realsense-ros 4.55.1 / 4.56.1 (rs_launch.py, rs_node_setup.cpp)',
        '/{namespace}/{camera}', 'camera', 'camera', 'color/image_raw', 'aligned_depth_to_color/image_raw',
        'color/camera_info', '{camera}_color_optical_frame', '16UC1', 'driver_realsense.yaml'),
    'realsense_4.51': DriverPreset(
        'realsense2_camera 4.51-4.54 (namespace = camera_name)', 'realsense-ros 4.51.1, 4.54.1 (rs_launch.py)',
        '/{camera}/{camera}', 'camera', '', 'color/image_raw', 'aligned_depth_to_color/image_raw',
        'color/camera_info', '{camera}_color_optical_frame', '16UC1', 'driver_realsense.yaml'),
    'zed': DriverPreset(
        'zed-ros2-wrapper >= 5.1',
        'zed-ros2-wrapper v5.4.1 (zed_camera_component_video_depth.cpp, CHANGELOG v5.1.0)',
        '/{camera}/zed_node', 'zed', '', 'rgb/color/rect/image', 'depth/depth_registered',
        'rgb/color/rect/camera_info', '{camera}_left_camera_frame_optical', '32FC1', 'driver_zed.yaml'),
    'zed_5.0': DriverPreset(
        'zed-ros2-wrapper 4.x - 5.0', 'zed-ros2-wrapper humble-v4.2.5, humble-v5.0.0',
        '/{camera}/zed_node', 'zed', '', 'rgb/image_rect_color', 'depth/depth_registered', 'rgb/camera_info',
        '{camera}_left_camera_optical_frame', '32FC1', 'driver_zed.yaml'),
    'depthai': DriverPreset(
        'depthai-ros v3 (depthai_ros_driver[_v3] driver.launch.py) and v2.10 (camera.launch.py)',
        'depthai-ros v2.10.3 (humble/jazzy), v3 kilted sources (sensor_helpers NodeNameMap, Camera, Stereo)',
        '/{camera}', 'oak', '', 'rgb/image_raw', 'stereo/image_raw', 'rgb/camera_info',
        '{camera}_rgb_camera_optical_frame', '16UC1', 'driver_depthai.yaml'),
    'orbbec': DriverPreset(
        'OrbbecSDK_ROS2 v2.x (orbbec_camera)',
        'OrbbecSDK_ROS2 v2.6.3 (gemini_330_series.launch.py, ob_camera_node.cpp)',
        '/{camera}', 'camera', '', 'color/image_raw', 'depth/image_raw', 'color/camera_info',
        '{camera}_color_optical_frame', '16UC1', 'driver_orbbec.yaml'),
}
DEFAULT_DRIVER = 'realsense'
ALOHA_CAMERAS = ('cam_high', 'cam_left_wrist', 'cam_right_wrist')


def loopback_environment(condition) -> list:
    """The environment every launch file sets under ``loopback_only:=true``: Fast DDS with the shipped profile
    (launch argument ``fastdds_profile``) and discovery on this host only; ``condition`` is the IfCondition."""
    from launch.actions import SetEnvironmentVariable
    from launch.substitutions import LaunchConfiguration
    return [SetEnvironmentVariable('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp', condition=condition),
            SetEnvironmentVariable('FASTDDS_DEFAULT_PROFILES_FILE', LaunchConfiguration('fastdds_profile'),
                                   condition=condition),
            SetEnvironmentVariable('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST', condition=condition)]


def parse_bool(value: str, name: str) -> bool:
    """A launch argument as a bool ('true'/'false', any case; also 1/0, yes/no); ValueError otherwise."""
    text = str(value).strip().lower()
    if text in ('true', '1', 'yes', 'on'):
        return True
    if text in ('false', '0', 'no', 'off'):
        return False
    raise ValueError(f'launch argument {name}:={value!r} must be true or false')


def optional_bool(value: str, name: str) -> bool | None:
    """An optional boolean launch argument: None when not given (empty), else :func:`parse_bool`."""
    return None if str(value).strip() == '' else parse_bool(value, name)


def _join(*parts: str) -> str:
    return '/' + '/'.join(p.strip('/') for p in parts if p.strip('/'))


def camera_topics(driver: str = DEFAULT_DRIVER, camera_name: str = '', camera_namespace: str = '', *,
                  root: str = '', image: str = '', depth: str = '', camera_info: str = '') -> dict[str, str]:
    """``{'image', 'depth', 'camera_info', 'frame'}`` of ``driver`` for the driver's camera ``camera_name`` (empty:
    its default) in ``camera_namespace`` (empty: its default; only presets whose root has one use it). ``root``
    replaces the whole topic prefix; a non-empty ``image``/``depth``/``camera_info`` is used as given."""
    if driver not in DRIVERS:
        raise ValueError(f'launch argument driver:={driver!r} is not one of {", ".join(DRIVERS)}')
    d = DRIVERS[driver]
    camera = camera_name.strip('/') or d.camera
    prefix = root or d.root.format(camera=camera, namespace=camera_namespace.strip('/') or d.namespace)
    return {'image': image or _join(prefix, d.image), 'depth': depth or _join(prefix, d.depth),
            'camera_info': camera_info or _join(prefix, d.camera_info), 'frame': d.frame.format(camera=camera)}


def node_fqn(namespace: str, node_name: str) -> str:
    """Fully qualified node name, e.g. ('/cell', 'string_perception') -> '/cell/string_perception'."""
    return _join(namespace, node_name)


def node_parameters(cfg: Mapping[str, str]) -> list[Any]:
    """The node's ``parameters``: ``[config, {given arguments}]``. Only the launch arguments that were given reach
    the dict (``model_path`` non-empty, ``autostart`` / ``use_sim_time`` not ''), so an unset one leaves the value
    of the ``config`` file (or the node's default); a given one wins, because launch_ros passes the dict's file
    after ``config`` and rcl lets the later file win. No dict when nothing was given."""
    given: dict[str, Any] = {}
    if cfg['model_path'].strip():
        given['model_path'] = cfg['model_path']
    for name in ('autostart', 'use_sim_time'):
        value = optional_bool(cfg[name], name)
        if value is not None:
            given[name] = value
    return [cfg['config'], given] if given else [cfg['config']]


def _key_matches(key: str, fqn: str) -> bool:
    """Whether a parameters-file node key (``/**``, ``/ns/name``, ``name``, ``/*/name`` ...) applies to ``fqn``:
    rcl's wildcards, ``*`` one name token, ``**`` any number of them."""
    key = '/' + key.lstrip('/')
    pattern = ''.join('(/[^/]+)*' if token == '**' else '/[^/]*' if token == '*' else '/' + re.escape(token)
                      for token in key.strip('/').split('/'))
    return re.fullmatch(pattern, fqn) is not None


def file_parameter(path: str | Path, fqn: str, name: str) -> Any:
    """The value a ROS 2 parameters file gives parameter ``name`` of node ``fqn`` (the last matching entry in
    file order, as rcl applies them), or None when it gives none or the file is not readable YAML."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None
    value = None
    for key, entry in (data or {}).items() if isinstance(data, dict) else ():
        params = entry.get('ros__parameters') if isinstance(entry, dict) else None
        if isinstance(params, dict) and name in params and _key_matches(str(key), fqn):
            value = params[name]
    return value


def _sim_time(cfg: Mapping[str, str], fqn: str) -> bool:
    """Whether the node runs on sim time: the argument when given, else the config file's value, else false."""
    given = optional_bool(cfg['use_sim_time'], 'use_sim_time')
    if given is not None:
        return given
    from_file = file_parameter(cfg['config'], fqn, 'use_sim_time')
    return from_file is True or (isinstance(from_file, str) and optional_bool(from_file, 'use_sim_time') is True)


def rviz_config(template: str | Path, node: str, fixed_frame: str, image_topic: str | None = None) -> str:
    """The shipped RViz config with its fixed frame and topics set: markers, detections and debug image of ``node``
    (fully qualified name), the camera image display on ``image_topic``. Returns YAML text."""
    import yaml
    cfg = yaml.safe_load(Path(template).read_text())
    manager = cfg['Visualization Manager']
    manager['Global Options']['Fixed Frame'] = fixed_frame
    topics = {'Detections': f'{node}/markers', 'Detections 3D': f'{node}/detections',
              'Debug image': f'{node}/debug_image'}
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
    with autostart true, the node's default, it configures and activates itself). ``extra_params`` join the given
    arguments' dict (they win over the ``config`` file)."""
    from launch_ros.actions import LifecycleNode
    params = node_parameters(cfg)
    if extra_params:
        params = [params[0], {**(params[1] if len(params) > 1 else {}), **extra_params}]
    return LifecycleNode(package=PACKAGE, executable=EXECUTABLE, name=node_name, namespace=cfg['namespace'],
                         output='screen', parameters=params,
                         remappings=[(k, topics[k]) for k in ('image', 'depth', 'camera_info')],
                         arguments=['--ros-args', '--log-level', cfg['log_level']])


def single_camera_actions(context, *_args, **_kwargs) -> list:
    """``OpaqueFunction`` body of ``string_perception.launch.py``."""
    from launch_ros.actions import Node
    cfg = context.launch_configurations
    topics = camera_topics(cfg['driver'], cfg['camera_name'], cfg['camera_namespace'], root=cfg['camera'],
                           image=cfg['image'], depth=cfg['depth'], camera_info=cfg['camera_info'])
    actions = [node_action(cfg, node_name=cfg['node_name'], topics=topics)]
    if parse_bool(cfg['use_rviz'], 'use_rviz'):
        fqn = node_fqn(cfg['namespace'], cfg['node_name'])
        text = rviz_config(cfg['rviz_config'], fqn, cfg['fixed_frame'] or topics['frame'], topics['image'])
        actions.append(Node(package='rviz2', executable='rviz2', name=f'rviz2_{cfg["node_name"]}',
                            namespace=cfg['namespace'], output='log', arguments=['-d', _write_rviz(text, fqn)],
                            parameters=[{'use_sim_time': _sim_time(cfg, fqn)}]))
    return actions


def multi_camera_actions(context, *_args, **_kwargs) -> list:
    """``OpaqueFunction`` body of ``multi_camera.launch.py``: one node per camera in ``cameras`` (comma separated
    driver camera names), named ``<node_name>_<camera>``, inputs where the driver publishes camera ``c`` in
    ``camera_namespace`` (realsense2_camera >= 4.55: ``/camera/<c>/...``; zed: ``/<c>/zed_node/...``)."""
    cfg = context.launch_configurations
    cameras = [c.strip().strip('/') for c in cfg['cameras'].split(',') if c.strip().strip('/')]
    if not cameras or len(set(cameras)) != len(cameras):
        raise ValueError(f'launch argument cameras:={cfg["cameras"]!r} must list distinct camera names')
    return [node_action(cfg, node_name=f'{cfg["node_name"]}_{cam}',
                        topics=camera_topics(cfg['driver'], cam, cfg['camera_namespace'])) for cam in cameras]


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

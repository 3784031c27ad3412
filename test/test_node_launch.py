"""What launch/string_perception.launch.py, launch/multi_camera.launch.py and launch/replay.launch.py start, and
the RViz config.

The ``launch`` / ``launch_ros`` packages are not on PyPI, so the launch files run against small recording
stand-ins: every action and substitution records its arguments, ``FindPackageShare`` resolves to this checkout.
The launch-time part (``OpaqueFunction``) is then called with a context holding the launch configurations (the
declared defaults, resolved, plus the test's overrides), as ``ros2 launch`` would, and the test checks the
lifecycle nodes, names, parameters, remappings, DDS environment and RViz config those records name.
"""
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest
import yaml

from string_perception.ros import launch_setup as LS
from string_perception.ros import params as P
from string_perception.ros.markers import BOX_NS, TEXT_NS

REPO = Path(__file__).resolve().parent.parent
LAUNCH = REPO / 'launch' / 'string_perception.launch.py'
MULTI = REPO / 'launch' / 'multi_camera.launch.py'
RVIZ = REPO / 'config' / 'string_perception.rviz'


class Rec:
    """Records constructor arguments (stand-in for every launch class)."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _stub_classes(names):
    return {n: type(n, (Rec,), {}) for n in names}


def _load(monkeypatch, path):
    mods = {
        'launch': {'LaunchDescription': Rec},
        'launch.actions': _stub_classes(['DeclareLaunchArgument', 'SetEnvironmentVariable', 'OpaqueFunction']),
        'launch.conditions': _stub_classes(['IfCondition']),
        'launch.substitutions': _stub_classes(['EnvironmentVariable', 'LaunchConfiguration',
                                               'PathJoinSubstitution']),
        'launch_ros': {}, 'launch_ros.actions': _stub_classes(['Node', 'LifecycleNode']),
        'launch_ros.substitutions': _stub_classes(['FindPackageShare']),
    }
    for name, attrs in mods.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))
    spec = importlib.util.spec_from_file_location(f'sp_launch_under_test_{path.stem}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description().args[0]


def _resolve(sub):
    """A path for PathJoinSubstitution([FindPackageShare(pkg), 'a', 'b']) (None if not resolvable)."""
    if type(sub).__name__ != 'PathJoinSubstitution':
        return None
    parts = sub.args[0]
    if type(parts[0]).__name__ != 'FindPackageShare' or parts[0].args[0] != 'string_perception':
        return None
    return REPO.joinpath(*parts[1:])


def _declared(description):
    return {a.args[0]: a for a in description if type(a).__name__ == 'DeclareLaunchArgument'}


def _run(description, **overrides):
    """Call the launch file's OpaqueFunction as ``ros2 launch`` would; returns the actions it creates."""
    cfg = {}
    for name, arg in _declared(description).items():
        default = arg.kwargs['default_value']
        cfg[name] = str(_resolve(default)) if _resolve(default) is not None else default
        if 'choices' in arg.kwargs:
            assert cfg[name] in arg.kwargs['choices'], name
    for name, value in overrides.items():
        assert name in cfg, f'{name} is not a launch argument'
        cfg[name] = value
    opaque = next(a for a in description if type(a).__name__ == 'OpaqueFunction')
    return opaque.kwargs['function'](types.SimpleNamespace(launch_configurations=cfg))


def _nodes(actions, package='string_perception'):
    return [a for a in actions if a.kwargs['package'] == package]


@pytest.fixture()
def description(monkeypatch):
    return _load(monkeypatch, LAUNCH)


@pytest.fixture()
def multi(monkeypatch):
    return _load(monkeypatch, MULTI)


def test_every_share_file_the_launch_files_name_exists(description, multi):
    for desc in (description, multi):
        paths = [_resolve(a.kwargs['default_value']) for a in _declared(desc).values()]
        for p in filter(None, paths):
            assert p.is_file(), p
    names = sorted(p.name for p in filter(None, (_resolve(a.kwargs['default_value'])
                                                 for a in _declared(description).values())))
    assert names == ['default.yaml', 'fastdds_loopback.xml', 'string_perception.rviz']


def test_default_launch_starts_one_lifecycle_node_with_realsense_topics(description):
    declared = set(_declared(description))
    assert {'namespace', 'node_name', 'use_sim_time', 'autostart', 'log_level', 'loopback_only', 'driver',
            'camera', 'image', 'depth', 'camera_info', 'model_path', 'config', 'use_rviz'} <= declared
    actions = _run(description)
    assert [type(a).__name__ for a in actions] == ['LifecycleNode']           # no RViz by default
    node = actions[0].kwargs
    scripts = re.findall(r"'([\w-]+) = ([\w.]+):main'", (REPO / 'setup.py').read_text())
    assert (node['executable'], 'string_perception.ros.node') in scripts
    assert node['name'] == P.NODE_NAME and node['namespace'] == ''
    assert dict(node['remappings']) == {'image': '/camera/camera/color/image_raw',
                                        'depth': '/camera/camera/aligned_depth_to_color/image_raw',
                                        'camera_info': '/camera/camera/color/camera_info'}
    params_file, overrides = node['parameters']
    assert Path(params_file) == REPO / 'config' / 'default.yaml'
    assert overrides == {'model_path': '', 'autostart': True, 'use_sim_time': False}
    assert all(k in P.SPECS or k == 'use_sim_time' for k in overrides)
    assert node['arguments'] == ['--ros-args', '--log-level', 'info']


def test_launch_arguments_reach_the_node(description):
    node = _run(description, namespace='/cell', node_name='left', autostart='false', use_sim_time='true',
                log_level='debug', driver='zed', camera='/zed2i/zed_node', model_path='/m.onnx')[0].kwargs
    assert (node['namespace'], node['name']) == ('/cell', 'left')
    assert node['parameters'][1] == {'model_path': '/m.onnx', 'autostart': False, 'use_sim_time': True}
    assert node['arguments'][-1] == 'debug'
    assert dict(node['remappings']) == {'image': '/zed2i/zed_node/rgb/image_rect_color',
                                        'depth': '/zed2i/zed_node/depth/depth_registered',
                                        'camera_info': '/zed2i/zed_node/rgb/camera_info'}
    explicit = _run(description, depth='/my/depth')[0].kwargs
    assert dict(explicit['remappings'])['depth'] == '/my/depth'
    with pytest.raises(ValueError, match='autostart'):
        _run(description, autostart='maybe')


@pytest.mark.parametrize('driver', sorted(LS.DRIVERS))
def test_every_driver_preset_gives_three_distinct_absolute_topics(driver):
    t = LS.camera_topics(driver)
    topics = [t['image'], t['depth'], t['camera_info']]
    assert len(set(topics)) == 3 and all(x.startswith('/') and '//' not in x for x in topics)
    assert t['frame'].endswith('optical_frame')
    assert LS.camera_topics(driver, '/cam_a')['image'].startswith('/cam_a/')


def test_loopback_profile_only_when_asked(description, multi):
    for desc in (description, multi):
        env = {a.args[0]: a for a in desc if type(a).__name__ == 'SetEnvironmentVariable'}
        assert set(env) == {'FASTDDS_DEFAULT_PROFILES_FILE', 'RMW_IMPLEMENTATION', 'ROS_AUTOMATIC_DISCOVERY_RANGE'}
        for action in env.values():                    # every DDS setting is conditional on loopback_only
            cond = action.kwargs['condition']
            assert type(cond).__name__ == 'IfCondition' and cond.args[0].args == ('loopback_only',)
        assert env['FASTDDS_DEFAULT_PROFILES_FILE'].args[1].args == ('fastdds_profile',)
        arg = _declared(desc)
        assert arg['loopback_only'].kwargs['default_value'] == 'false'
        assert _resolve(arg['fastdds_profile'].kwargs['default_value']) == REPO / 'config' / 'fastdds_loopback.xml'


def test_multi_camera_launch_one_node_per_aloha_camera(multi):
    nodes = _nodes(_run(multi))
    assert [type(n).__name__ for n in nodes] == ['LifecycleNode'] * 3
    names = [n.kwargs['name'] for n in nodes]
    assert names == [f'{P.NODE_NAME}_{c}' for c in LS.ALOHA_CAMERAS]
    images = [dict(n.kwargs['remappings'])['image'] for n in nodes]
    assert images == [f'/{c}/color/image_raw' for c in LS.ALOHA_CAMERAS]
    outputs = {LS.node_fqn(n.kwargs['namespace'], n.kwargs['name']) + '/detections' for n in nodes}
    assert len(outputs) == 3                           # ~/detections of each node is its own topic
    two = _nodes(_run(multi, cameras='a, b', namespace='cell', driver='depthai'))
    assert [LS.node_fqn(n.kwargs['namespace'], n.kwargs['name']) for n in two] == \
        ['/cell/string_perception_a', '/cell/string_perception_b']
    assert dict(two[1].kwargs['remappings'])['depth'] == '/b/stereo/image_raw'
    with pytest.raises(ValueError, match='distinct'):
        _run(multi, cameras='a,a')


def test_rviz_follows_namespace_node_name_and_frame(description):
    actions = _run(description, use_rviz='true', namespace='cell', node_name='left', driver='orbbec')
    rviz = next(a for a in actions if a.kwargs['package'] == 'rviz2')
    cfg = yaml.safe_load(Path(rviz.kwargs['arguments'][1]).read_text())
    manager = cfg['Visualization Manager']
    displays = {d['Name']: d for d in manager['Displays']}
    assert manager['Global Options']['Fixed Frame'] == 'camera_color_optical_frame'
    assert displays['Detections']['Topic']['Value'] == '/cell/left/markers'
    assert displays['Debug image']['Topic']['Value'] == '/cell/left/debug_image'
    assert displays['Camera image']['Topic']['Value'] == '/camera/color/image_raw'
    framed = _run(description, use_rviz='true', fixed_frame='base_link')[1]
    assert yaml.safe_load(Path(framed.kwargs['arguments'][1]).read_text())[
        'Visualization Manager']['Global Options']['Fixed Frame'] == 'base_link'


def test_setup_installs_launch_and_config_files():
    text = (REPO / 'setup.py').read_text()
    for pattern in ("glob('launch/*.py')", "glob('config/*.yaml')", "glob('config/*.rviz')", "glob('config/*.xml')"):
        assert pattern in text


def test_rviz_config_shows_the_node_outputs():
    cfg = yaml.safe_load(RVIZ.read_text())
    displays = {d['Name']: d for d in cfg['Visualization Manager']['Displays']}
    markers = displays['Detections']
    assert markers['Class'] == 'rviz_default_plugins/MarkerArray'
    assert markers['Topic']['Value'] == f'/{P.NODE_NAME}/markers'
    assert set(markers['Namespaces']) == {BOX_NS, TEXT_NS}
    assert displays['Debug image']['Topic']['Value'] == f'/{P.NODE_NAME}/debug_image'
    # the node's outputs are reliable by default: a reliable RViz subscription matches them
    assert P.SPECS['output_qos_reliability'].default == 'reliable'
    assert markers['Topic']['Reliability Policy'] == 'Reliable'


# --- launch/replay.launch.py: a recording played into the node on the bag's time -------------------------------

REPLAY = REPO / 'launch' / 'replay.launch.py'


@pytest.fixture()
def replay(monkeypatch):
    return _load(monkeypatch, REPLAY)


def _bag_topics(bag):
    from string_perception.bags.writer import read_metadata
    return {e['topic_metadata']['name'] for e in read_metadata(bag)['topics_with_message_count']}


def test_replay_launch_plays_the_bag_with_clock_and_puts_every_node_on_sim_time(replay):
    from string_perception.bags.play import build_parser, without_ros_args
    assert 'use_sim_time' not in _declared(replay)                          # not optional in a replay
    actions = _run(replay, use_rviz='true')
    assert [type(a).__name__ for a in actions] == ['Node', 'LifecycleNode', 'Node']
    player, node, rviz = (a.kwargs for a in actions)
    scripts = dict(re.findall(r"'([\w-]+) = ([\w.]+):main'", (REPO / 'setup.py').read_text()))
    assert scripts[player['executable']] == 'string_perception.bags.play'
    args = build_parser().parse_args(without_ros_args(player['arguments'] + ['--ros-args', '-r', '__node:=p']))
    assert args.clock == 40.0 and args.rate == 1.0 and not args.loop
    bag = Path(args.bag)
    assert bag == REPO / 'data' / 'sample_recording' and (bag / 'metadata.yaml').is_file()
    topics = _bag_topics(bag)
    assert args.wait_for_subscribers == 1 and set(args.wait_topics) == {'/camera/color/camera_info'} <= topics
    # the node: sim time, and inputs that are the bag's topics (colour as image_transport's compressed)
    params_file, overrides = node['parameters']
    assert Path(params_file) == REPO / 'config' / 'default.yaml'
    assert overrides['use_sim_time'] is True
    assert (overrides['image_transport'], overrides['depth_transport']) == ('compressed', 'raw')
    assert all(k in P.SPECS or k == 'use_sim_time' for k in overrides)
    remaps = dict(node['remappings'])
    assert {remaps['image'] + '/compressed', remaps['depth'], remaps['camera_info']} <= topics
    assert rviz['parameters'] == [{'use_sim_time': True}]
    # every ROS node that is not the time source itself runs on the player's /clock
    for a in actions[1:]:
        assert any(isinstance(p, dict) and p.get('use_sim_time') is True for p in a.kwargs['parameters'])


def test_replay_launch_arguments_reach_the_player_and_the_node(replay):
    from string_perception.bags.play import build_parser, without_ros_args
    actions = _run(replay, bag='/data/run3', rate='0.5', loop='true', clock_hz='100', image='/cam/rgb',
                          depth='/cam/depth', camera_info='/cam/info', image_transport='raw', node_name='replayed')
    assert [type(a).__name__ for a in actions] == ['Node', 'LifecycleNode']
    args = build_parser().parse_args(without_ros_args(actions[0].kwargs['arguments']))
    assert (args.bag, args.rate, args.loop, args.clock, args.wait_topics) == ('/data/run3', 0.5, True, 100.0,
                                                                              ['/cam/info'])
    node = actions[1].kwargs
    assert node['name'] == 'replayed'
    assert dict(node['remappings']) == {'image': '/cam/rgb', 'depth': '/cam/depth', 'camera_info': '/cam/info'}
    assert node['parameters'][1]['image_transport'] == 'raw'
    for bad in ({'clock_hz': '0'}, {'rate': '-1'}):
        with pytest.raises(ValueError, match='must be > 0'):
            _run(replay, **bad)


def test_replay_launch_share_files_exist(replay):
    paths = [_resolve(a.kwargs['default_value']) for a in _declared(replay).values()]
    assert sorted(p.name for p in filter(None, paths)) == ['default.yaml', 'fastdds_loopback.xml',
                                                          'sample_recording', 'string_perception.rviz']
    for p in filter(None, paths):
        assert (p / 'metadata.yaml').is_file() if p.name == 'sample_recording' else p.is_file(), p
    assert "f'share/{PACKAGE}/data/sample_recording'" in (REPO / 'setup.py').read_text()   # installed there

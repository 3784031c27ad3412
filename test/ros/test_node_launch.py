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
from string_perception import node_params as P
from string_perception.codec.markers import BOX_NS, TEXT_NS

REPO = Path(__file__).resolve().parents[2]
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
    declared = _declared(description)
    for name, value in overrides.items():
        assert name in cfg, f'{name} is not a launch argument'
        choices = declared[name].kwargs.get('choices')
        if choices is not None and value not in choices:     # launch's DeclareLaunchArgument refuses it (exit 1)
            raise ValueError(f'argument {name}:={value!r} not in choices {choices}')
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
    (params_file,) = node['parameters']              # nothing given: the config file alone decides
    assert Path(params_file) == REPO / 'config' / 'default.yaml'
    assert node['arguments'] == ['--ros-args', '--log-level', 'info']


def test_launch_arguments_reach_the_node(description):
    node = _run(description, namespace='/cell', node_name='left', autostart='false', use_sim_time='true',
                log_level='debug', driver='zed', camera_name='zed2i', model_path='/m.onnx')[0].kwargs
    assert (node['namespace'], node['name']) == ('/cell', 'left')
    assert node['parameters'][1] == {'model_path': '/m.onnx', 'autostart': False, 'use_sim_time': True}
    assert all(k in P.SPECS or k == 'use_sim_time' for k in node['parameters'][1])
    assert node['arguments'][-1] == 'debug'
    assert dict(node['remappings']) == {'image': '/zed2i/zed_node/rgb/color/rect/image',
                                        'depth': '/zed2i/zed_node/depth/depth_registered',
                                        'camera_info': '/zed2i/zed_node/rgb/color/rect/camera_info'}
    rooted = _run(description, camera='/my/cam')[0].kwargs
    assert dict(rooted['remappings'])['image'] == '/my/cam/color/image_raw'
    explicit = _run(description, depth='/my/depth')[0].kwargs
    assert dict(explicit['remappings'])['depth'] == '/my/depth'
    with pytest.raises(ValueError, match='autostart'):
        _run(description, autostart='maybe')


@pytest.mark.parametrize('text, value', [('true', True), ('True', True), ('false', False), ('False', False)])
def test_boolean_arguments_take_either_case(description, multi, text, value):
    node = _run(description, autostart=text, use_sim_time=text, use_rviz=text, loopback_only=text)[0].kwargs
    assert node['parameters'][1] == {'autostart': value, 'use_sim_time': value}
    assert _nodes(_run(multi, autostart=text, use_sim_time=text, loopback_only=text))[0].kwargs[
        'parameters'][1] == {'autostart': value, 'use_sim_time': value}
    for desc in (description, multi):                   # loopback_only feeds IfCondition, which lower-cases
        for arg in _declared(desc).values():
            if set(arg.kwargs.get('choices') or ()) & {'true', 'false'}:
                assert {'true', 'false', 'True', 'False'} <= set(arg.kwargs['choices']), arg.args[0]


@pytest.mark.parametrize('driver', sorted(LS.DRIVERS))
def test_every_driver_preset_gives_three_distinct_absolute_topics(driver):
    t = LS.camera_topics(driver)
    topics = [t['image'], t['depth'], t['camera_info']]
    assert len(set(topics)) == 3 and all(x.startswith('/') and '//' not in x for x in topics)
    assert 'optical' in t['frame'] and t['frame'].startswith(LS.DRIVERS[driver].camera + '_')
    assert LS.camera_topics(driver, root='/cam_a')['image'].startswith('/cam_a/')
    assert (REPO / 'config' / LS.DRIVERS[driver].params_file).is_file()


# Each driver version's layout, read from its source (see DriverPreset.checked and docs/node.md's driver table):
# (driver, camera_name, camera_namespace) -> image, depth, camera_info, colour optical frame.
PRESETS = {
    ('realsense', '', ''): ('/camera/camera/color/image_raw', '/camera/camera/aligned_depth_to_color/image_raw',
                            '/camera/camera/color/camera_info', 'camera_color_optical_frame'),
    ('realsense', 'cam_high', ''): ('/camera/cam_high/color/image_raw',
                                    '/camera/cam_high/aligned_depth_to_color/image_raw',
                                    '/camera/cam_high/color/camera_info', 'cam_high_color_optical_frame'),
    ('realsense', 'cam_high', 'aloha'): ('/aloha/cam_high/color/image_raw',
                                         '/aloha/cam_high/aligned_depth_to_color/image_raw',
                                         '/aloha/cam_high/color/camera_info', 'cam_high_color_optical_frame'),
    ('realsense_4.51', 'cam_high', ''): ('/cam_high/cam_high/color/image_raw',
                                         '/cam_high/cam_high/aligned_depth_to_color/image_raw',
                                         '/cam_high/cam_high/color/camera_info', 'cam_high_color_optical_frame'),
    ('zed', '', ''): ('/zed/zed_node/rgb/color/rect/image', '/zed/zed_node/depth/depth_registered',
                      '/zed/zed_node/rgb/color/rect/camera_info', 'zed_left_camera_frame_optical'),
    ('zed_5.0', '', ''): ('/zed/zed_node/rgb/image_rect_color', '/zed/zed_node/depth/depth_registered',
                          '/zed/zed_node/rgb/camera_info', 'zed_left_camera_optical_frame'),
    ('zed', 'zed2i', ''): ('/zed2i/zed_node/rgb/color/rect/image', '/zed2i/zed_node/depth/depth_registered',
                           '/zed2i/zed_node/rgb/color/rect/camera_info', 'zed2i_left_camera_frame_optical'),
    ('depthai', '', ''): ('/oak/rgb/image_raw', '/oak/stereo/image_raw', '/oak/rgb/camera_info',
                          'oak_rgb_camera_optical_frame'),
    ('orbbec', '', ''): ('/camera/color/image_raw', '/camera/depth/image_raw', '/camera/color/camera_info',
                         'camera_color_optical_frame'),
}


@pytest.mark.parametrize('key', sorted(PRESETS))
def test_driver_presets_follow_each_driver_version(key):
    driver, name, namespace = key
    t = LS.camera_topics(driver, name, namespace)
    assert (t['image'], t['depth'], t['camera_info'], t['frame']) == PRESETS[key]


def test_docs_driver_table_names_every_preset_its_version_and_file():
    text = (REPO / 'docs' / 'node.md').read_text()
    rows = {line.split('|')[1].strip(' `').split('`')[0].removeprefix('driver:='): line
            for line in text.splitlines() if line.startswith('| `') and 'driver' not in line.split('|')[1]}
    for key, preset in LS.DRIVERS.items():
        row = rows.get(key)
        assert row is not None, f'docs/node.md driver table has no row for {key}'
        assert preset.driver in row and preset.params_file in row
        assert LS.camera_topics(key)['image'] in row and LS.camera_topics(key)['depth'] in row


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
    # realsense2_camera >= 4.55 rs_launch.py camera_name:=<c>: /<camera_namespace = camera>/<c>/...
    images = [dict(n.kwargs['remappings'])['image'] for n in nodes]
    assert images == [f'/camera/{c}/color/image_raw' for c in LS.ALOHA_CAMERAS]
    assert dict(nodes[0].kwargs['remappings'])['depth'] == '/camera/cam_high/aligned_depth_to_color/image_raw'
    outputs = {LS.node_fqn(n.kwargs['namespace'], n.kwargs['name']) + '/detections' for n in nodes}
    assert len(outputs) == 3                           # ~/detections of each node is its own topic
    assert all(n.kwargs['parameters'] == [str(REPO / 'config' / 'default.yaml')] for n in nodes)
    ns = _nodes(_run(multi, camera_namespace='aloha'))
    assert dict(ns[2].kwargs['remappings'])['camera_info'] == '/aloha/cam_right_wrist/color/camera_info'
    two = _nodes(_run(multi, cameras='a, b', namespace='cell', driver='depthai'))
    assert [LS.node_fqn(n.kwargs['namespace'], n.kwargs['name']) for n in two] == \
        ['/cell/string_perception_a', '/cell/string_perception_b']
    assert dict(two[1].kwargs['remappings'])['depth'] == '/b/stereo/image_raw'
    zed = _nodes(_run(multi, cameras='left', driver='zed'))
    assert dict(zed[0].kwargs['remappings'])['image'] == '/left/zed_node/rgb/color/rect/image'
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
    assert displays['Detections 3D']['Topic']['Value'] == '/cell/left/detections'
    framed = _run(description, use_rviz='true', fixed_frame='base_link')[1]
    assert yaml.safe_load(Path(framed.kwargs['arguments'][1]).read_text())[
        'Visualization Manager']['Global Options']['Fixed Frame'] == 'base_link'
    named = _run(description, use_rviz='true', driver='realsense', camera_name='cam_high')[1]
    assert yaml.safe_load(Path(named.kwargs['arguments'][1]).read_text())[
        'Visualization Manager']['Global Options']['Fixed Frame'] == 'cam_high_color_optical_frame'


def _rviz_sim_time(actions):
    (rviz,) = [a for a in actions if a.kwargs['package'] == 'rviz2']
    (params,) = rviz.kwargs['parameters']
    return params['use_sim_time']


def test_rviz_runs_on_sim_time_when_the_node_does(description, tmp_path):
    assert _rviz_sim_time(_run(description, use_rviz='true', use_sim_time='true')) is True
    assert _rviz_sim_time(_run(description, use_rviz='True', use_sim_time='False')) is False
    assert _rviz_sim_time(_run(description, use_rviz='true')) is False          # default.yaml: wall time
    sim = tmp_path / 'sim.yaml'                          # not given: the config file's value for this node
    sim.write_text('/**:\n  ros__parameters:\n    use_sim_time: true\n')
    assert _rviz_sim_time(_run(description, use_rviz='true', config=str(sim))) is True
    assert _rviz_sim_time(_run(description, use_rviz='true', config=str(sim), use_sim_time='false')) is False
    other = tmp_path / 'other.yaml'                      # keyed to another node: does not apply
    other.write_text('/other_node:\n  ros__parameters:\n    use_sim_time: true\n')
    assert _rviz_sim_time(_run(description, use_rviz='true', config=str(other))) is False


def test_file_parameter_reads_the_entry_that_applies_to_the_node(tmp_path):
    f = tmp_path / 'p.yaml'
    f.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'model_path': '/all.onnx'}},
                                 '/cell/left': {'ros__parameters': {'model_path': '/left.onnx'}},
                                 '/*/right': {'ros__parameters': {'model_path': '/right.onnx'}}}))
    assert LS.file_parameter(f, '/cell/left', 'model_path') == '/left.onnx'
    assert LS.file_parameter(f, '/cell/right', 'model_path') == '/right.onnx'
    assert LS.file_parameter(f, '/a/b/right', 'model_path') == '/all.onnx'     # '*' is one token
    assert LS.file_parameter(f, '/x', 'score_threshold') is None
    assert LS.file_parameter(tmp_path / 'missing.yaml', '/x', 'model_path') is None


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
    # the debug image display is on exactly when the node publishes it by default
    assert displays['Debug image']['Enabled'] is P.SPECS['publish_debug_image'].default
    # Detection3DArray display (vision_msgs_rviz_plugins): off, because that plugin package is not a dependency
    # and may be absent; the markers show the same boxes with only rviz_default_plugins
    det = displays['Detections 3D']
    assert det['Class'] == 'vision_msgs_rviz_plugins/Detection3DArray' and det['Enabled'] is False
    assert det['Topic']['Value'] == f'/{P.NODE_NAME}/detections'
    assert det['Topic']['Reliability Policy'] == 'Reliable'
    # the node's outputs are reliable by default: a reliable RViz subscription matches them
    assert P.SPECS['output_qos_reliability'].default == 'reliable'
    assert markers['Topic']['Reliability Policy'] == 'Reliable'


# ------------------------------------------------------------- parameter precedence, decided by the real rcl
# launch_ros Node (launch_ros/actions/node.py, _perform_substitutions / _create_params_file_from_dict) turns the
# ``parameters`` list, in order, into ``--params-file`` arguments: a path as given, a dict written to a temporary
# file keyed by the node's full name. Which value wins is then rcl's rule, so the script below hands those files
# to a real rclpy node and reads what it got.
EFFECTIVE_SCRIPT = '''
import json, sys
import rclpy
from rclpy.node import Node
out = []
for args in json.loads(sys.argv[1]):
    ctx = rclpy.Context()
    rclpy.init(args=['x', '--ros-args', *args], context=ctx)
    node = Node('string_perception', context=ctx, automatically_declare_parameters_from_overrides=True)
    out.append({k: node.get_parameter(k).value for k in ('model_path', 'autostart', 'score_threshold')
                if node.has_parameter(k)})
    node.destroy_node()
    rclpy.shutdown(context=ctx)
print(json.dumps(out))
'''


def _launch_ros_params_args(parameters, fqn, tmp_path):
    args = []
    for i, entry in enumerate(parameters):
        if isinstance(entry, dict):
            path = tmp_path / f'launch_params_{i}.yaml'
            path.write_text(yaml.safe_dump({fqn: {'ros__parameters': entry}}))
            entry = path
        args += ['--params-file', str(entry)]
    return args


def test_a_config_files_own_values_hold_unless_the_argument_is_given(description, tmp_path):
    import json
    import subprocess
    import sys
    from test.support.ros_helpers import reserved_domain_id, ros_skip_reason, ros_test_env
    if ros_skip_reason():
        pytest.skip(ros_skip_reason())
    user = tmp_path / 'my.yaml'                      # a user's file, keyed /** like config/default.yaml
    user.write_text('/**:\n  ros__parameters:\n    model_path: /user.onnx\n    autostart: false\n'
                    '    score_threshold: 0.4\n')
    cases = [dict(config=str(user)),                                            # nothing given: the file
             dict(config=str(user), model_path='/arg.onnx', autostart='True'),   # given: the arguments
             dict()]                                                            # default.yaml, nothing given
    runs = []
    for i, overrides in enumerate(cases):
        node = _run(description, **overrides)[0].kwargs
        (tmp_path / str(i)).mkdir()
        runs.append(_launch_ros_params_args(node['parameters'], LS.node_fqn(node['namespace'], node['name']),
                                            tmp_path / str(i)))
    with reserved_domain_id() as domain:
        done = subprocess.run([sys.executable, '-c', EFFECTIVE_SCRIPT, json.dumps(runs)], env=ros_test_env(domain),
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    from_file, from_args, default = json.loads(done.stdout.strip().splitlines()[-1])
    assert from_file == {'model_path': '/user.onnx', 'autostart': False, 'score_threshold': 0.4}
    assert from_args == {'model_path': '/arg.onnx', 'autostart': True, 'score_threshold': 0.4}
    assert default['model_path'] == P.SPECS['model_path'].default and default['autostart'] is True


def _flat(d, prefix=''):
    """{'a': {'b': 1}} -> {'a.b': 1} (ROS 2 nested parameter names)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f'{prefix}{k}.'))
        else:
            out[f'{prefix}{k}'] = v
    return out


def test_driver_parameter_files_ask_for_depth_registered_to_colour():
    def params(name):
        data = yaml.safe_load((REPO / 'config' / name).read_text())
        if '/**' in data:                            # a ROS 2 parameters file (zed, depthai)
            return _flat(data['/**']['ros__parameters'])
        return data                                  # a flat dict the driver's launch merges (realsense, orbbec)
    assert params('driver_realsense.yaml')['align_depth.enable'] is True
    zed = params('driver_zed.yaml')
    assert zed['depth.depth_mode'] != 'NONE' and zed['depth.openni_depth_mode'] is False   # 32FC1 m, as the table
    assert zed['video.publish_rgb'] is True and zed['depth.publish_depth_map'] is True
    depthai = params('driver_depthai.yaml')
    assert depthai['stereo.i_align_depth'] is True
    assert depthai['pipeline_gen.i_pipeline_type'] == depthai['camera.i_pipeline_type'] == 'RGBD'
    assert params('driver_orbbec.yaml')['depth_registration'] is True
    assert {LS.DRIVERS[k].depth_encoding for k in ('zed', 'zed_5.0')} == {'32FC1'}

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

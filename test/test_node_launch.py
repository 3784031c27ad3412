"""What launch/string_perception.launch.py and config/string_perception.rviz reference exists.

The ``launch`` / ``launch_ros`` packages are not on PyPI, so the launch file is run against small recording
stand-ins: every action and substitution records its arguments, ``FindPackageShare`` resolves to this
checkout, and the test checks the files, executable, node name, parameters and topics those records name.
"""
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest
import yaml

from string_perception.ros import params as P
from string_perception.ros.markers import BOX_NS, TEXT_NS

REPO = Path(__file__).resolve().parent.parent
LAUNCH = REPO / 'launch' / 'string_perception.launch.py'
RVIZ = REPO / 'config' / 'string_perception.rviz'


class Rec:
    """Records constructor arguments (stand-in for every launch class)."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _stub_classes(names):
    return {n: type(n, (Rec,), {}) for n in names}


@pytest.fixture()
def description(monkeypatch):
    mods = {
        'launch': {'LaunchDescription': Rec},
        'launch.actions': _stub_classes(['DeclareLaunchArgument', 'SetEnvironmentVariable']),
        'launch.conditions': _stub_classes(['IfCondition']),
        'launch.substitutions': _stub_classes(['EnvironmentVariable', 'LaunchConfiguration',
                                               'PathJoinSubstitution']),
        'launch_ros': {}, 'launch_ros.actions': _stub_classes(['Node']),
        'launch_ros.substitutions': _stub_classes(['FindPackageShare']),
    }
    for name, attrs in mods.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))
    spec = importlib.util.spec_from_file_location('sp_launch_under_test', LAUNCH)
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


def _walk(obj):
    yield obj
    if isinstance(obj, Rec):
        for v in list(obj.args) + list(obj.kwargs.values()):
            yield from _walk(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _walk(v)


def test_every_share_file_the_launch_file_names_exists(description):
    paths = [p for p in map(_resolve, _walk(description)) if p is not None]
    names = sorted(p.name for p in paths)
    assert names == ['default.yaml', 'fastdds_loopback.xml', 'string_perception.rviz']
    for p in paths:
        assert p.is_file(), p


def test_node_executable_name_remaps_and_parameters(description):
    nodes = [a for a in description if type(a).__name__ == 'Node']
    node = next(n for n in nodes if n.kwargs['package'] == 'string_perception')
    scripts = re.findall(r"'([\w-]+) = ([\w.]+):main'", (REPO / 'setup.py').read_text())
    assert (node.kwargs['executable'], 'string_perception.ros.node') in scripts
    assert node.kwargs['name'] == P.NODE_NAME
    assert re.search(r'<name>string_perception</name>', (REPO / 'package.xml').read_text())
    assert sorted(src for src, _ in node.kwargs['remappings']) == sorted(P.INPUTS)
    overrides = [p for p in node.kwargs['parameters'] if isinstance(p, dict)]
    assert all(k in P.SPECS for d in overrides for k in d)
    declared = {a.args[0] for a in description if type(a).__name__ == 'DeclareLaunchArgument'}
    used = {s.args[0] for s in _walk(description) if type(s).__name__ == 'LaunchConfiguration'}
    assert used <= declared, used - declared
    assert {'camera', 'model_path', 'config', 'use_rviz', 'fastdds_profile'} <= declared
    rviz = next(n for n in nodes if n.kwargs['package'] == 'rviz2')
    assert type(rviz.kwargs['condition']).__name__ == 'IfCondition'


def test_fastdds_profile_is_set_unless_overridden(description):
    env = {a.args[0]: a.args[1] for a in description if type(a).__name__ == 'SetEnvironmentVariable'}
    assert env['FASTDDS_DEFAULT_PROFILES_FILE'].args == ('fastdds_profile',)
    arg = next(a for a in description if type(a).__name__ == 'DeclareLaunchArgument'
               and a.args[0] == 'fastdds_profile')
    default = arg.kwargs['default_value']          # $FASTDDS_DEFAULT_PROFILES_FILE, else the shipped profile
    assert default.args[0] == 'FASTDDS_DEFAULT_PROFILES_FILE'
    assert _resolve(default.kwargs['default_value']) == REPO / 'config' / 'fastdds_loopback.xml'


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

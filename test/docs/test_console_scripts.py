"""setup.py's console scripts: one naming style per kind, and every old command name kept as an alias of its new one.

The two ROS node executables (``ros2 run string_perception <name>``, the launch files) use the package's underscore
style; every other command is ``string-perception-<what>`` (launch files start some of those too: play, sim-aloha;
test/ros/test_node_launch.py and test_aloha_launch.py check the names they use exist). Renamed commands keep their
old name for one release, mapped to the same function as the new name.
"""
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROS_EXECUTABLES = {'string_perception_node', 'string_perception_policy'}
ALIASES = {  # old name -> new name
    'string-perception-eval': 'string-perception-eval-bag',            # evaluates a recording
    'string-perception-evaluate': 'string-perception-eval-checkpoint',  # evaluates a checkpoint on the test split
}


def _scripts() -> dict[str, str]:
    text = (REPO / 'setup.py').read_text()
    pairs = re.findall(r"'([\w-]+) = ([\w.]+:\w+)'", text)
    names = [n for n, _ in pairs]
    assert len(names) == len(set(names)), names
    return dict(pairs)


def test_every_alias_maps_to_the_same_function_as_its_new_name():
    scripts = _scripts()
    for old, new in ALIASES.items():
        assert old in scripts and new in scripts, (old, new)
        assert scripts[old] == scripts[new], (old, scripts[old], new, scripts[new])


def test_ros_executables_use_underscores_and_commands_use_hyphens():
    scripts = _scripts()
    assert ROS_EXECUTABLES <= set(scripts)
    commands = set(scripts) - ROS_EXECUTABLES
    assert commands and all(re.fullmatch(r'string-perception(-[a-z0-9]+)+', c) for c in commands), sorted(commands)


def test_every_entry_point_names_a_function_of_the_package():
    for name, target in _scripts().items():
        module, func = target.split(':')
        path = REPO.joinpath(*module.split('.')).with_suffix('.py')
        assert path.is_file(), (name, target)
        functions = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert func in functions, (name, target)

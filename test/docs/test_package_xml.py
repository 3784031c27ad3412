"""package.xml: valid format 3, every dependency a real rosdep key, and every import of the code covered.

``rosdep install --from-paths src`` stops at the first key it does not know (issue 20: ``rclpy_lifecycle`` is
none; lifecycle nodes ship inside rclpy). The keys below were checked against ros/rosdistro (the Jazzy and Kilted
``distribution.yaml`` for ROS packages, ``rosdep/python.yaml`` / ``rosdep/base.yaml`` for the python3-* keys).
"""
import ast
import re
import sys
from pathlib import Path

from catkin_pkg.package import parse_package

REPO = Path(__file__).resolve().parents[2]

# rosdep key -> where it is defined (checked by hand; a new key must be checked and added here)
ROSDEP_KEYS = {
    **{k: 'ROS 2 package (ros2/rclpy)' for k in ('rclpy',)},
    **{k: 'ROS 2 package (ros2/rcl_interfaces)' for k in ('rcl_interfaces', 'lifecycle_msgs', 'builtin_interfaces',
                                                          'rosgraph_msgs')},
    **{k: 'ROS 2 package (ros2/common_interfaces)' for k in ('std_msgs', 'sensor_msgs', 'geometry_msgs',
                                                             'visualization_msgs', 'diagnostic_msgs')},
    'vision_msgs': 'ROS 2 package (ros-perception/vision_msgs)',
    'tf2_msgs': 'ROS 2 package (ros2/geometry2)',
    'message_filters': 'ROS 2 package (ros2/message_filters)',
    'cv_bridge': 'ROS 2 package (ros-perception/vision_opencv)',
    'tf2_ros_py': 'ROS 2 package (ros2/geometry2): the Python tf2_ros module',
    'ament_index_python': 'ROS 2 package (ament/ament_index)',
    'launch': 'ROS 2 package (ros2/launch)', 'launch_ros': 'ROS 2 package (ros2/launch_ros)',
    'python3-numpy': 'rosdep/python.yaml', 'python3-opencv': 'rosdep/python.yaml',
    'python3-scipy': 'rosdep/python.yaml', 'python3-yaml': 'rosdep/python.yaml',
    'python3-pytest': 'rosdep/python.yaml',
}
# top-level import -> the rosdep key that provides it
MODULE_KEY = {'tf2_ros': 'tf2_ros_py', 'cv2': 'python3-opencv', 'numpy': 'python3-numpy',
              'scipy': 'python3-scipy', 'yaml': 'python3-yaml'}
# used when the distribution has it, with a tested fallback otherwise, so not a dependency: image_transport_py is
# released from Kilted on (image_common 6.x), absent from Jazzy's distribution.yaml (ros/compressed_input.py)
OPTIONAL_ROS = {'image_transport_py'}
# installed with pip (README), no rosdep key; torch & co. only for training/export
PIP_ONLY = {'onnxruntime', 'onnx', 'rosbags', 'filterpy', 'torch', 'tqdm', 'matplotlib', 'onnxscript', 'mujoco',
            'string_perception'}


def _package():
    return parse_package(str(REPO / 'package.xml'))   # validates the format 3 schema rules catkin_pkg knows


def _declared() -> set[str]:
    pkg = _package()
    return {d.name for d in pkg.exec_depends + pkg.build_depends + pkg.build_export_depends + pkg.test_depends}


def _imported_modules() -> set[str]:
    mods = set()
    for path in [*(REPO / 'string_perception').rglob('*.py'), *(REPO / 'launch').glob('*.py')]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                mods.update(a.name.split('.')[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split('.')[0])
    return mods - set(sys.stdlib_module_names)


def test_package_xml_parses_and_names_the_package():
    pkg = _package()
    assert pkg.name == 'string_perception' and pkg.package_format == 3
    assert pkg.get_build_type() == 'ament_python'


def test_every_dependency_is_a_known_rosdep_key():
    declared = _declared()
    assert 'rclpy_lifecycle' not in declared
    unknown = sorted(declared - set(ROSDEP_KEYS))
    assert not unknown, f'not rosdep keys (or not checked yet): {unknown}'


def test_every_import_of_the_code_is_declared():
    declared = _declared()
    missing = []
    for mod in sorted(_imported_modules() - PIP_ONLY - OPTIONAL_ROS):
        key = MODULE_KEY.get(mod, mod)
        if key not in declared:
            missing.append(f'{mod} (key {key})')
    assert not missing, f'imported but not in package.xml: {missing}'


def test_every_message_type_named_in_the_code_is_declared():
    """Message types looked up by name at run time ('rosgraph_msgs/msg/Clock' for rosbags / rclpy) need their
    package too, though no import statement names it."""
    named = set()
    for path in [*(REPO / 'string_perception').rglob('*.py'), *(REPO / 'launch').glob('*.py')]:
        named.update(re.findall(r"""['"]([a-z_0-9]+)/(?:msg|srv)/[A-Z]\w*""", path.read_text()))
    assert {'sensor_msgs', 'rosgraph_msgs'} <= named                    # the scan finds what the code names
    missing = sorted(named - _declared() - {'builtin_interfaces'})  # builtin_interfaces comes with every msg pkg
    assert not missing, f'message packages named in the code but not in package.xml: {missing}'

"""vision_msgs as built from third_party/vision_msgs (or the real package on a ROS install).

The RIHS01 type hashes below are copied from upstream ros-perception/vision_msgs 4.x generated code
(rosidl_generator_c ``*__description.c``). A type hash covers field names, types, order and nested types
(not comments), and is what DDS endpoints compare on Iron and later: equal hashes == identical interface.
"""
import json
from pathlib import Path

import pytest

from test.support.ros_helpers import ros_skip_reason

pytestmark = pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                reason=str(ros_skip_reason('vision_msgs')))

REPO = Path(__file__).resolve().parents[2]
THIRD_PARTY = REPO / 'third_party' / 'vision_msgs'

UPSTREAM_HASHES = {
    'BoundingBox2D': '008eacbb0cf8f26e83795547bed013eec3675485ef386ec056d80eaaf1c1ce2f',
    'BoundingBox3D': 'bbb73a65c163d7f9bb29009c7bde9f7faa576bd2d23299c4511d19230dab4698',
    'Classification': 'f74db28d0eaef3afb78f48bf2161cd709a1383a0309d3454383b25be11345143',
    'Detection2D': '0d12b69df5c593b3455b7346fac8205437a7d4bcb09b9e0e0b2dde787ded38ea',
    'Detection2DArray': '214274120007f4a683866481336b70310268cfa107aebe9d594a6acf75bda968',
    'Detection3D': 'ddd703be132ab0b69d33121f1bb034132bfbb3b0ac5f9fb1516005ba1c8a265b',
    'Detection3DArray': '793f5eab9595ac1c0da07873cc859db42eae51f0ee76056db8562515d830e018',
    'LabelInfo': '3d37df4015cdf660cc851c51897f2acd957e1ca6205ba0a99aebffb9406b0783',
    'ObjectHypothesis': '51da43cec11c01957a64d1e05a24acd18aae7745ec30b74348ad5f6d634f7f90',
    'ObjectHypothesisWithPose': '41c12344c0396c48b81df12467c192d99b2a0eb1463c5c37194e4223251c80bc',
    'Point2D': 'eab0e83f44ab4de92ceaf76dd7d0e7638f2bdd1d16ffbe16c7a136c48e407247',
    'Pose2D': 'b0b5d1d7b4c20dd4fcde3ed1d4b289a919290572007d67a97043814db25d3648',
    'VisionClass': '1e4a11f0fed50b5623cb8ff26ca0e37952a48a9c074d16f804b44e9164c2037a',
    'VisionInfo': '95d3116a17484ad91c9a2686e1d54890bbfc3ff6c6a2de137738c4950d45d284',
}

# Field lists (name: type, in order) of the 4.x messages, as rosidl reports them.
UPSTREAM_FIELDS = {
    'BoundingBox2DArray': {'header': 'std_msgs/Header', 'boxes': 'sequence<vision_msgs/BoundingBox2D>'},
    'BoundingBox3DArray': {'header': 'std_msgs/Header', 'boxes': 'sequence<vision_msgs/BoundingBox3D>'},
    'Detection3DArray': {'header': 'std_msgs/Header', 'detections': 'sequence<vision_msgs/Detection3D>'},
    'Detection3D': {'header': 'std_msgs/Header', 'results': 'sequence<vision_msgs/ObjectHypothesisWithPose>',
                    'bbox': 'vision_msgs/BoundingBox3D', 'id': 'string'},
    'BoundingBox3D': {'center': 'geometry_msgs/Pose', 'size': 'geometry_msgs/Vector3'},
    'ObjectHypothesisWithPose': {'hypothesis': 'vision_msgs/ObjectHypothesis',
                                 'pose': 'geometry_msgs/PoseWithCovariance'},
    'ObjectHypothesis': {'class_id': 'string', 'score': 'double'},
    'LabelInfo': {'header': 'std_msgs/Header', 'class_map': 'sequence<vision_msgs/VisionClass>',
                  'threshold': 'float'},
    'VisionClass': {'class_id': 'uint16', 'class_name': 'string'},
}


def _share_dir() -> Path:
    import vision_msgs
    # <prefix>/lib/pythonX.Y/site-packages/vision_msgs/__init__.py -> <prefix>/share/vision_msgs
    for parent in Path(vision_msgs.__file__).resolve().parents:
        cand = parent / 'share' / 'vision_msgs'
        if (cand / 'package.xml').is_file():
            return cand
    pytest.skip('vision_msgs share directory not found next to the Python package')


def test_all_upstream_messages_are_defined():
    import vision_msgs.msg as m
    names = sorted(p.stem for p in (THIRD_PARTY / 'msg').glob('*.msg'))
    assert names == sorted(set(UPSTREAM_HASHES) | {'BoundingBox2DArray', 'BoundingBox3DArray'})
    for name in names:
        assert hasattr(m, name), name


@pytest.mark.parametrize('name', sorted(UPSTREAM_HASHES))
def test_type_hash_matches_upstream(name):
    desc = json.loads((_share_dir() / 'msg' / f'{name}.json').read_text())
    top = desc['type_hashes'][0]
    assert top['type_name'] == f'vision_msgs/msg/{name}'
    assert top['hash_string'] == 'RIHS01_' + UPSTREAM_HASHES[name]


@pytest.mark.parametrize('name', sorted(UPSTREAM_FIELDS))
def test_fields_and_order(name):
    import vision_msgs.msg as m
    cls = getattr(m, name)
    assert list(cls.get_fields_and_field_types().items()) == list(UPSTREAM_FIELDS[name].items())


def test_typesupport_loads_and_messages_construct():
    from vision_msgs.msg import Detection3DArray, LabelInfo
    for cls in (Detection3DArray, LabelInfo):
        cls.__class__.__import_type_support__()
        assert cls._TYPE_SUPPORT is not None
    from test.support.ros_helpers import make_detection_array, make_label_info
    arr = make_detection_array()
    assert len(arr.detections) == 2 and arr.detections[0].results[0].hypothesis.class_id == 'mug'
    assert [c.class_name for c in make_label_info().class_map] == ['mug', 'screwdriver', 'box']


def test_colcon_ignores_the_vendored_package():
    assert (REPO / 'third_party' / 'COLCON_IGNORE').is_file()

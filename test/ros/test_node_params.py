"""Node parameters: declared once, mirrored in config/default.yaml, validated at start-up and on set."""
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from string_perception import node_params as P

REPO = Path(__file__).resolve().parents[2]


def test_default_yaml_equals_declared_defaults():
    data = yaml.safe_load((REPO / 'config' / 'default.yaml').read_text())
    assert list(data) == ['/**']            # any node name / namespace (launch node_name:=..., multi-camera)
    assert data['/**']['ros__parameters'] == P.defaults()
    assert yaml.safe_load(P.render_yaml())['/**']['ros__parameters'] == P.defaults()


def test_every_parameter_is_described_ranged_and_valid_by_default():
    for spec in P.PARAMS:
        assert spec.description, spec.name
        if spec.type in ('int', 'double'):
            assert spec.lo is not None and spec.lo <= spec.default <= spec.hi, spec.name
        assert P.validate(spec.name, spec.default, tf2=False) == spec.default
    assert P.validate_all(P.defaults(), tf2=False) == P.defaults()


@pytest.mark.parametrize('name,value,needle', [
    ('score_threshold', 1.5, '[-1.0, 1.0]'),
    ('score_threshold', -0.5, '-1'),
    ('score_threshold', 'high', 'finite number'),
    ('nms_iou', 0.0, 'nms_iou'),
    ('max_detections', -1, 'max_detections'),
    ('max_detections', 2.5, 'integer'),
    ('max_detections', True, 'integer'),
    ('sync_slop', float('nan'), 'finite'),
    ('providers', [], 'at least one'),
    ('providers', ['FancyExecutionProvider'], 'FancyExecutionProvider'),
    ('providers', ['CPUExecutionProvider', 'CPUExecutionProvider'], 'twice'),
    ('providers', 'CPUExecutionProvider', 'list of strings'),
    ('image_transport', 'theora', 'raw, compressed'),
    ('depth_qos_reliability', 'sometimes', 'best_effort, reliable'),
    ('image_qos_depth', 0, 'image_qos_depth'),
    ('publish_embedding', 1, 'bool'),
    ('model_path', 3, 'string'),
    ('no_such_parameter', 1, 'unknown'),
])
def test_bad_values_are_rejected_with_a_clear_message(name, value, needle):
    with pytest.raises(ValueError) as e:
        P.validate(name, value, tf2=False)
    assert needle in str(e.value)


def test_target_frame_needs_tf2():
    with pytest.raises(ValueError, match='tf2_ros'):
        P.validate('target_frame', 'base_link', tf2=False)
    assert P.validate('target_frame', 'base_link', tf2=True) == 'base_link'
    assert P.validate('target_frame', '', tf2=False) == ''          # image frame: no tf2 needed
    if not P.tf2_available():
        with pytest.raises(ValueError, match='tf2_ros'):
            P.validate('target_frame', 'base_link')


def test_validate_all_reports_every_problem_and_converts_ints():
    with pytest.raises(ValueError) as e:
        P.validate_all({'nms_iou': 2.0, 'max_detections': -3}, tf2=False)
    assert 'nms_iou' in str(e.value) and 'max_detections' in str(e.value)
    assert P.validate_all({'nms_iou': 1}, tf2=False)['nms_iou'] == 1.0


def test_check_updates_all_or_nothing_and_ignores_foreign_parameters():
    assert P.check_updates([('use_sim_time', True), ('score_threshold', 0.5)], tf2=False) == (True, '')
    ok, reason = P.check_updates([('score_threshold', 0.5), ('nms_iou', 7.0)], tf2=False)
    assert not ok and 'nms_iou' in reason and 'score_threshold' not in reason


def test_effective_score_threshold():
    class Meta:
        score_threshold = 0.42
    assert P.effective_score_threshold(0.1, Meta()) == 0.1
    assert P.effective_score_threshold(-1.0, Meta()) == 0.42
    assert P.effective_score_threshold(-1.0, object()) == P.DEFAULT_SCORE_THRESHOLD


def test_ros_descriptors_carry_ranges():
    from rcl_interfaces.msg import ParameterType
    d = P._descriptor(P.SPECS['nms_iou'])
    assert d.type == ParameterType.PARAMETER_DOUBLE and d.description
    assert (d.floating_point_range[0].from_value, d.floating_point_range[0].to_value) == (0.01, 1.0)
    d = P._descriptor(P.SPECS['max_detections'])
    assert (d.integer_range[0].from_value, d.integer_range[0].to_value) == (0, 1000)
    assert 'raw' in P._descriptor(P.SPECS['image_transport']).additional_constraints


def test_node_command_is_ros_args():
    pytest.importorskip('rclpy')
    from string_perception.ros.node import node_command
    cmd = node_command('m.onnx', remaps={'image': '/cam/rgb'}, params={'publish_debug_image': True, 'nms_iou': 0.5,
                                                                        'providers': ['CPUExecutionProvider']})
    assert cmd[1:4] == ['-m', 'string_perception.ros.node', '--ros-args']
    assert ['-p', 'publish_debug_image:=true'] == cmd[4:6]
    assert '-p' in cmd and 'model_path:="m.onnx"' in cmd and 'providers:=["CPUExecutionProvider"]' in cmd
    assert cmd[-2:] == ['-r', 'image:=/cam/rgb']


def test_tracker_config_carries_every_tracking_parameter():
    from string_perception.runtime.tracking import TrackerConfig
    cfg = P.validate_all({'track_birth_hits': 2, 'track_death_misses': 4, 'track_max_gap': 9,
                          'track_association': 'iou', 'track_max_distance': 0.5, 'track_min_iou': 0.2,
                          'track_max_tracks': 7}, tf2=False)
    assert P.tracker_config(cfg) == TrackerConfig(birth_hits=2, death_misses=4, max_gap=9, association='iou',
                                                  max_distance_m=0.5, min_iou=0.2, max_tracks=7)
    assert P.tracker_config({**cfg, 'tracking': False}) is None


def test_score_threshold_zero_is_a_threshold_not_the_model_default():
    class Meta:
        score_threshold = 0.42
    assert P.effective_score_threshold(0.0, Meta()) == 0.0
    assert P.effective_score_threshold(-1.0, None) == P.DEFAULT_SCORE_THRESHOLD == 0.3


def test_range_text_and_choices_in_messages():
    assert P.SPECS['image_transport'].range_text() == 'one of raw, compressed'
    assert P.SPECS['nms_iou'].range_text() == '[0.01, 1.0]'
    assert P.SPECS['model_path'].range_text() == ''
    with pytest.raises(ValueError) as e:
        P.validate('image_transport', 'theora')
    assert str(e.value) == "image_transport: 'theora' is not one of raw, compressed"


def test_defaults_are_a_fresh_copy():
    d = P.defaults()
    d['providers'].append('CPUExecutionProvider')
    assert P.defaults()['providers'] == ['auto'] and P.SPECS['providers'].default == ['auto']


def test_qos_parameters_of_one_input():
    assert P._qos_params('x') == (
        P.ParamSpec('x_qos_reliability', 'string', 'best_effort',
                    'QoS reliability of the x subscription (sensor data: best_effort)',
                    choices=('best_effort', 'reliable')),
        P.ParamSpec('x_qos_depth', 'int', 1, 'QoS history depth of the x subscription (1: while a frame is '
                    'processed only the newest waits, latest wins)', 1, 100))
    for inp in ('image', 'depth', 'camera_info'):
        assert tuple(P.SPECS[f'{inp}_qos_{k}'] for k in ('reliability', 'depth')) == P._qos_params(inp)


def test_tf2_available_follows_the_import(monkeypatch):
    import sys
    import types
    monkeypatch.setitem(sys.modules, 'tf2_ros', None)             # import raises ImportError
    assert P.tf2_available() is False
    monkeypatch.setitem(sys.modules, 'tf2_ros', _tf2_stand_in(types))
    assert P.tf2_available() is True
    monkeypatch.setitem(sys.modules, 'tf2_ros', types.ModuleType('tf2_ros'))     # importable, but nothing in it
    assert P.tf2_available() is False


def _tf2_stand_in(types):
    """A module with what ros/tf_lookup.py uses of tf2_ros (test_node_outputs.py checks each one)."""
    mod = types.ModuleType('tf2_ros')
    mod.Buffer, mod.TransformListener, mod.TransformException = object, object, Exception
    return mod


def test_trt_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('XDG_CACHE_HOME', '/x/cache')
    assert P.trt_cache_dir('') == Path('/x/cache/string_perception/tensorrt')
    assert P.trt_cache_dir('/abs/engines') == Path('/abs/engines')
    assert P.trt_cache_dir('~/engines') == tmp_path / 'engines'
    monkeypatch.setenv('XDG_CACHE_HOME', '')                       # empty: as if unset
    assert P.trt_cache_dir('') == tmp_path / '.cache' / 'string_perception' / 'tensorrt'
    monkeypatch.delenv('XDG_CACHE_HOME')
    assert P.trt_cache_dir('') == tmp_path / '.cache' / 'string_perception' / 'tensorrt'


def test_model_options(monkeypatch):
    monkeypatch.setenv('XDG_CACHE_HOME', '/x/cache')
    trt_cpu = ('TensorrtExecutionProvider', 'CPUExecutionProvider')
    cfg = P.validate_all({'device_id': 3, 'trt_fp16': True}, tf2=False)            # providers: [auto]
    assert P.model_options(cfg, lambda: list(trt_cpu)) == {
        'providers': trt_cpu, 'device_id': 3, 'trt_fp16': True,
        'trt_engine_cache_path': Path('/x/cache/string_perception/tensorrt')}
    opts = P.model_options({**cfg, 'trt_engine_cache_path': '/e'}, lambda: trt_cpu)
    assert opts['trt_engine_cache_path'] == Path('/e') and type(opts['trt_fp16']) is bool

    def never():
        raise AssertionError('auto providers asked for although providers are explicit')
    cuda_cpu = ['CUDAExecutionProvider', 'CPUExecutionProvider']
    cfg = P.validate_all({'providers': cuda_cpu}, tf2=False)
    assert P.model_options(cfg, never) == {'providers': tuple(cuda_cpu), 'device_id': 0, 'trt_fp16': False,
                                           'trt_engine_cache_path': None}                # no TensorRT: no folder
    assert P.model_options({**cfg, 'trt_fp16': 0}, never)['trt_fp16'] is False


def test_default_yaml_is_exactly_what_render_yaml_writes():
    # the text, not only the parsed values: comments with ranges / choices, lower-case YAML booleans, header
    assert (REPO / 'config' / 'default.yaml').read_text() == P.render_yaml()
    lines = P.render_yaml('/cam').splitlines()
    assert lines[:4] == ['# Defaults of the string_perception node (generated from string_perception/node_params.py;',
                         '# test/ros/test_node_params.py checks they match). Copy and edit, then pass with --params-file.',
                         '/cam:', '  ros__parameters:']
    i = lines.index('    nms_iou: 0.3')
    assert lines[i - 1] == '    # class-wise 3D NMS IoU threshold (1 disables NMS) ([0.01, 1.0])'
    i = lines.index('    image_transport: "raw"')
    assert lines[i - 2:i] == [
        '    # colour input type: raw (sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage)',
        '    # one of raw, compressed']
    i = lines.index('    model_path: ""')
    assert lines[i - 2] == '    autostart: true' and lines[i - 1].startswith('    # ONNX model file')
    assert '    trt_fp16: false' in lines


def test_score_threshold_zero_and_provider_rules():
    assert P.validate('score_threshold', 0) == 0.0 and P.validate('score_threshold', -1) == -1.0
    assert P.validate('providers', ('CUDAExecutionProvider', 'CPUExecutionProvider')) == \
        ['CUDAExecutionProvider', 'CPUExecutionProvider']
    assert P.validate('providers', ['auto']) == ['auto']
    for value, message in [([], 'providers must name at least one execution provider'),
                           (['auto', 'CPUExecutionProvider'],
                            "providers: 'auto' stands alone (got ['auto', 'CPUExecutionProvider'])")]:
        with pytest.raises(ValueError) as e:
            P.validate('providers', value)
        assert str(e.value) == message


def test_target_frame_asks_tf2_available_when_not_told(monkeypatch):
    import sys
    import types
    monkeypatch.setitem(sys.modules, 'tf2_ros', _tf2_stand_in(types))
    assert P.validate('target_frame', 'base_link') == 'base_link'
    monkeypatch.setitem(sys.modules, 'tf2_ros', None)
    with pytest.raises(ValueError) as e:
        P.validate('target_frame', 'base_link')
    assert str(e.value) == ("target_frame 'base_link' needs tf2_ros, which is not importable here (PyPI set-up); "
                            'leave target_frame empty to publish boxes in the colour image frame')
    # an explicit tf2= is passed on by validate_all and check_updates (tf2_ros is not importable now)
    assert P.validate_all({'target_frame': 'base_link'}, tf2=True)['target_frame'] == 'base_link'
    assert P.check_updates([('target_frame', 'base_link')], tf2=True) == (True, '')


def test_validate_all_and_check_updates_messages():
    with pytest.raises(ValueError) as e:
        P.validate_all({'nms_iou': 2.0, 'max_detections': -3}, tf2=False)
    assert str(e.value) == ('invalid parameters: nms_iou must be in [0.01, 1.0], got 2.0; '
                            'max_detections must be in [0, 1000], got -3')
    # a foreign parameter first does not stop the check of ours
    assert P.check_updates([('use_sim_time', True), ('nms_iou', 7.0), ('max_detections', -1)], tf2=False) == \
        (False, 'nms_iou must be in [0.01, 1.0], got 7.0; max_detections must be in [0, 1000], got -1')


def test_descriptors_of_every_kind():
    from rcl_interfaces.msg import ParameterType
    d = P._descriptor(P.SPECS['nms_iou'])                        # live double
    assert d.name == 'nms_iou' and d.additional_constraints == ''
    assert (d.floating_point_range[0].step, len(d.integer_range)) == (0.0, 0)
    d = P._descriptor(P.SPECS['sync_queue_size'])                # int, applies at configure
    assert d.type == ParameterType.PARAMETER_INTEGER and d.additional_constraints == 'applies at configure'
    assert (d.integer_range[0].from_value, d.integer_range[0].to_value, d.integer_range[0].step) == (1, 1000, 0)
    assert len(d.floating_point_range) == 0
    d = P._descriptor(P.SPECS['image_transport'])                # string with choices
    assert d.type == ParameterType.PARAMETER_STRING
    assert d.additional_constraints == 'one of raw, compressed; applies at configure'
    assert P._descriptor(P.SPECS['autostart']).type == ParameterType.PARAMETER_BOOL
    assert P._descriptor(P.SPECS['providers']).type == ParameterType.PARAMETER_STRING_ARRAY
    # a double without a range gets none
    d = P._descriptor(P.ParamSpec('x', 'double', 0.5, 'a number', live=True))
    assert d.type == ParameterType.PARAMETER_DOUBLE and len(d.floating_point_range) == 0


def test_declare_all_and_read_all_on_a_stand_in_node():
    import types

    class Node:
        def declare_parameters(self, namespace, parameters):
            self.declared = (namespace, parameters)

        def get_parameter(self, name):
            return types.SimpleNamespace(value=f'value of {name}')
    node = Node()
    P.declare_all(node)
    namespace, declared = node.declared
    assert namespace == '' and [(n, v) for n, v, _ in declared] == [(p.name, p.default) for p in P.PARAMS]
    assert [d.name for _, _, d in declared] == [p.name for p in P.PARAMS]
    assert P.read_all(node) == {p.name: f'value of {p.name}' for p in P.PARAMS}


# ---------------------------------------------------------------------------------------- real node processes
from test.support.ros_helpers import ros_skip_reason  # noqa: E402

needs_ros = pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None, reason='rclpy / vision_msgs missing')

LIFECYCLE_SCRIPT = textwrap.dedent('''
    import json, sys
    import rclpy
    from rclpy.parameter import Parameter
    from string_perception.ros.node import StringPerceptionNode, SUCCESS
    rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', 'model_path:=' + sys.argv[1],
                     '-p', 'providers:=["CPUExecutionProvider"]'])
    node = StringPerceptionNode()
    out = {'configure': node.trigger_configure() == SUCCESS, 'threshold': node.pipeline.params['score_threshold']}
    out['activate'] = node.trigger_activate() == SUCCESS
    import time
    def subs_when(done, timeout=60.0):
        # the graph cache fills asynchronously (rmw discovery), even for the node's own entities: poll it
        deadline = time.monotonic() + timeout
        while True:
            subs = sorted(t for t, _ in node.get_subscriber_names_and_types_by_node(node.get_name(), '/'))
            if done(set(subs)) or time.monotonic() > deadline:
                return subs
            time.sleep(0.05)
    INPUTS = {'/image', '/depth', '/camera_info'}
    out['subs'] = subs_when(lambda s: INPUTS <= s)
    r = node.set_parameters([Parameter('score_threshold', value=0.55), Parameter('nms_iou', value=0.5)])
    out['set_ok'] = [x.successful for x in r]
    out['after_set'] = node.pipeline.params['score_threshold']
    r = node.set_parameters([Parameter('nms_iou', value=0.2), Parameter('score_threshold', value=-0.5)])
    out['set_bad'] = [x.successful for x in r] + [x.reason for x in r]
    r = node.set_parameters_atomically([Parameter('target_frame', value='base_link')])
    out['tf_reject'] = [r.successful, r.reason]
    out['after_bad'] = [node.pipeline.params['score_threshold'], node.pipeline.params['nms_iou']]
    # frames straight into the worker function: bad ones are counted by kind, the node keeps going
    import numpy as np
    from sensor_msgs.msg import CameraInfo
    from string_perception.codec.image_conversion import array_to_imgmsg
    node.set_parameters([Parameter('publish_debug_image', value=True)])
    rgb = np.full((48, 64, 3), 90, np.uint8)
    depth = np.full((48, 64), 800, np.uint16)
    info = CameraInfo(height=48, width=64, k=[60.0, 0.0, 32.0, 0.0, 60.0, 24.0, 0.0, 0.0, 1.0])
    bad_k = CameraInfo(height=48, width=64, k=[0.0] * 9)
    frames = [(array_to_imgmsg(rgb, 'rgb8'), array_to_imgmsg(depth, '16UC1'), bad_k),
              (array_to_imgmsg(rgb, 'rgb8'), array_to_imgmsg(depth[:10], '16UC1'), info),
              (array_to_imgmsg(rgb, 'rgb8'), array_to_imgmsg(depth.astype(np.int32), '32SC1'), info),
              (array_to_imgmsg(rgb, 'bgr8'), array_to_imgmsg(depth, '16UC1'), info)]
    for f in frames:
        node._process(f)
    from sensor_msgs.msg import CompressedImage
    from string_perception.ros.compressed_input import decode_compressed_image
    from string_perception.codec.image_conversion import array_to_compressed_imgmsg
    node.cfg['image_transport'] = 'compressed'       # normally read at configure; the decode path is per frame
    png = array_to_compressed_imgmsg(rgb, 'png', encoding='rgb8', msg_type=CompressedImage)
    node._process((decode_compressed_image(png), array_to_imgmsg(depth, '16UC1'), info))   # as compressed_input gives
    import struct, zlib                    # a 45-byte PNG whose header claims 50000x50000: refused before decoding
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
    bomb = array_to_compressed_imgmsg(rgb, 'png', encoding='rgb8', msg_type=CompressedImage)
    bomb.data = bytes.fromhex('89504e470d0a1a0a') + chunk(b'IHDR', struct.pack('>IIBBBBB', 50000, 50000, 8, 2, 0, 0, 0)) \
        + chunk(b'IEND', b'')
    try:                                   # what compressed_input does with it: refused, handed to on_bad
        decode_compressed_image(bomb)
        raise AssertionError('the PNG bomb was decoded')
    except ValueError as e:
        node.inputs.bad_compressed(e)
    node.cfg['image_transport'] = 'raw'
    gid = {'data': bytes(range(24))}       # colour frames 6..8 of this publisher never arrived: counted and said
    for seq in (5, 9):
        node.inputs.missed({'publication_sequence_number': seq, 'publisher_gid': gid})
    snap = node.stats.snapshot()
    out['bad_inputs'], out['processed'] = snap['bad_inputs'], snap['processed']
    out['not_received'] = snap['drops']['not_received']
    out['deactivate'] = node.trigger_deactivate() == SUCCESS
    out['subs_after'] = subs_when(lambda s: not INPUTS & s)
    out['cleanup'] = node.trigger_cleanup() == SUCCESS and node.pipeline is None
    # reconfigure with a model that has the optional tokens output: ~/tokens carries the pipeline's [N,D] tokens
    node.set_parameters([Parameter('model_path', value=sys.argv[2]), Parameter('publish_tokens', value=True)])
    out['reconfigure'] = node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
    import time
    from sensor_msgs.msg import Image
    from string_perception.codec.detection_msgs import image_to_tensor
    got, listener = [], rclpy.create_node('tokens_listener')
    listener.create_subscription(Image, node.outputs.publishers['tokens'].topic_name, got.append, 10)
    deadline = time.monotonic() + 10
    while node.outputs.publishers['tokens'].get_subscription_count() < 1 and time.monotonic() < deadline:
        rclpy.spin_once(listener, timeout_sec=0.05)
    node._process((array_to_imgmsg(rgb, 'rgb8'), array_to_imgmsg(depth, '16UC1'), info))
    while not got and time.monotonic() < deadline:
        rclpy.spin_once(listener, timeout_sec=0.05)
    ref = node.pipeline(rgb, depth, np.array(info.k).reshape(3, 3), depth_encoding='16UC1', intrinsics_hw=(48, 64))
    out['tokens'] = [{'topic': node.outputs.publishers['tokens'].topic_name, 'encoding': m.encoding,
                      'hw': [m.height, m.width],
                      'max_diff': float(np.abs(image_to_tensor(m) - ref.tokens).max())} for m in got]
    listener.destroy_node()
    out['shutdown'] = node.trigger_shutdown() == SUCCESS
    print('RESULT ' + json.dumps(out), flush=True)
    node.destroy_node(); rclpy.try_shutdown()
''')


def _run(tmp_path, name, args, timeout=40):
    from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_test_env
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        proc = pg.start_python(name, args)
        rc = proc.wait(timeout=timeout)
        return rc, proc.log(20000)


@pytest.mark.ros
@needs_ros
def test_lifecycle_transitions_and_live_parameter_updates(tmp_path, model_path):
    from test.support.tiny_model import TINY_TOKENS_DIM, save_tiny_model
    tokens_model = save_tiny_model(tmp_path / 'tokens.onnx', tokens=True)      # 32x48 input, 8x8 patches: N = 24
    rc, log = _run(tmp_path, 'lifecycle', ['-c', LIFECYCLE_SCRIPT, model_path, str(tokens_model)])
    assert rc == 0, log
    out = json.loads(log.split('RESULT ', 1)[1].splitlines()[0])
    assert out['configure'] and out['activate'] and out['deactivate'] and out['cleanup'] and out['reconfigure']
    assert out['shutdown']
    from string_perception.runtime import OnnxModel
    meta = OnnxModel(model_path, providers=('CPUExecutionProvider',)).metadata
    assert out['threshold'] == pytest.approx(P.effective_score_threshold(-1.0, meta))   # -1: the model's / 0.3
    assert {'/image', '/depth', '/camera_info'} <= set(out['subs']), out['subs']
    assert not {'/image', '/depth', '/camera_info'} & set(out['subs_after'])
    assert out['set_ok'] == [True, True] and out['after_set'] == pytest.approx(0.55)
    assert out['set_bad'][:2] == [True, False] and '-1' in out['set_bad'][3]
    if not P.tf2_available():
        assert out['tf_reject'][0] is False and 'tf2_ros' in out['tf_reject'][1]
    # the rejected threshold left the pipeline as it was; the valid nms_iou of the same call went through
    # (set_parameters applies one parameter at a time, as rclpy does)
    assert out['after_bad'] == [pytest.approx(0.55), pytest.approx(0.2)]
    assert out['bad_inputs'] == {'bad_intrinsics': 1, 'size_mismatch': 1, 'bad_encoding': 1,
                                 'image_too_large': 1}, log
    assert out['processed'] == 2                     # the bgr8 frame and the compressed (PNG) one
    assert out['not_received'] == 3 and 'dropped (not_received): 3 colour frame(s)' in log, log
    assert 'shared-memory segment' in log and 'image_qos_reliability:=reliable' in log, log
    for kind in ('bad_intrinsics', 'size_mismatch', 'bad_encoding'):     # throttled per kind, not globally
        assert f'bad input ({kind})' in log and 'node continues' in log, log
    # publish_tokens with a tokens model: one 32FC1 N x D Image per frame, the pipeline's tokens
    assert out['tokens'] == [{'topic': '/string_perception/tokens', 'encoding': '32FC1',
                              'hw': [(32 // 8) * (48 // 8), TINY_TOKENS_DIM], 'max_diff': 0.0}], log


@pytest.mark.ros
@needs_ros
def test_invalid_start_up_parameters_exit_with_a_clear_message(tmp_path, model_path):
    base = ['-m', 'string_perception.ros.node', '--ros-args', '-p', f'model_path:={model_path}']
    rc, log = _run(tmp_path, 'bad_provider', base + ['-p', 'providers:=["FancyExecutionProvider"]'])
    assert rc == 1 and 'configure failed' in log and 'FancyExecutionProvider' in log, log
    rc, log = _run(tmp_path, 'out_of_range', base + ['-p', 'nms_iou:=5.0'])
    assert rc == 2 and 'invalid parameter' in log and 'nms_iou' in log, log
    rc, log = _run(tmp_path, 'missing_model', ['-m', 'string_perception.ros.node', '--ros-args', '-p',
                                               f'model_path:={tmp_path / "nope.onnx"}'])
    assert rc == 1 and 'nope.onnx' in log and 'missing_file' in log, log


def test_model_path_finds_shipped_models_by_name(tmp_path, monkeypatch):
    """model_path:=vitd_tiny_cayley.onnx names a shipped model by its bare name: found in the package's models/; a
    file of that name in the working directory, or a path, is taken as given; empty is the default model (the
    accurate 240x320 one where the session's first provider is a GPU one)."""
    from string_perception.ros.node import DEFAULT_MODEL, resolve_model_path
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path('') == REPO / 'models' / DEFAULT_MODEL
    assert DEFAULT_MODEL == 'vitd_workcell.onnx'
    assert resolve_model_path('', on_gpu=True) == REPO / 'models' / 'vitd_workcell_hr.onnx'   # accurate on a GPU
    assert resolve_model_path('vitd_tiny_cayley.onnx', on_gpu=True) == REPO / 'models' / 'vitd_tiny_cayley.onnx'
    assert resolve_model_path('vitd_tiny_cayley.onnx') == REPO / 'models' / 'vitd_tiny_cayley.onnx'
    assert resolve_model_path('missing.onnx') == Path('missing.onnx')            # refused later, with its name
    (tmp_path / 'vitd_tiny_cayley.onnx').write_bytes(b'x')
    assert resolve_model_path('vitd_tiny_cayley.onnx') == Path('vitd_tiny_cayley.onnx')  # a local file wins
    assert resolve_model_path(str(tmp_path / 'm.onnx')) == tmp_path / 'm.onnx'

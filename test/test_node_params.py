"""Node parameters: declared once, mirrored in config/default.yaml, validated at start-up and on set."""
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from string_perception.ros import params as P

REPO = Path(__file__).resolve().parent.parent


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


# ---------------------------------------------------------------------------------------- real node processes
from ros_helpers import ros_skip_reason  # noqa: E402

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
    from string_perception.ros.image_conversion import array_to_imgmsg
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
    from string_perception.ros.image_conversion import array_to_compressed_imgmsg
    node.cfg['image_transport'] = 'compressed'       # normally read at configure; the decode path is per frame
    node._process((array_to_compressed_imgmsg(rgb, 'png', encoding='rgb8'), array_to_imgmsg(depth, '16UC1'), info))
    node.cfg['image_transport'] = 'raw'
    snap = node.stats.snapshot()
    out['bad_inputs'], out['processed'] = snap['bad_inputs'], snap['processed']
    out['deactivate'] = node.trigger_deactivate() == SUCCESS
    out['subs_after'] = subs_when(lambda s: not INPUTS & s)
    out['cleanup'] = node.trigger_cleanup() == SUCCESS and node.pipeline is None
    # reconfigure with a model that has the optional tokens output: ~/tokens carries the pipeline's [N,D] tokens
    node.set_parameters([Parameter('model_path', value=sys.argv[2]), Parameter('publish_tokens', value=True)])
    out['reconfigure'] = node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
    import time
    from sensor_msgs.msg import Image
    from string_perception.ros.messages import image_to_tensor
    got, listener = [], rclpy.create_node('tokens_listener')
    listener.create_subscription(Image, node._pubs['tokens'].topic_name, got.append, 10)
    deadline = time.monotonic() + 10
    while node._pubs['tokens'].get_subscription_count() < 1 and time.monotonic() < deadline:
        rclpy.spin_once(listener, timeout_sec=0.05)
    node._process((array_to_imgmsg(rgb, 'rgb8'), array_to_imgmsg(depth, '16UC1'), info))
    while not got and time.monotonic() < deadline:
        rclpy.spin_once(listener, timeout_sec=0.05)
    ref = node.pipeline(rgb, depth, np.array(info.k).reshape(3, 3), depth_encoding='16UC1', intrinsics_hw=(48, 64))
    out['tokens'] = [{'topic': node._pubs['tokens'].topic_name, 'encoding': m.encoding, 'hw': [m.height, m.width],
                      'max_diff': float(np.abs(image_to_tensor(m) - ref.tokens).max())} for m in got]
    listener.destroy_node()
    out['shutdown'] = node.trigger_shutdown() == SUCCESS
    print('RESULT ' + json.dumps(out), flush=True)
    node.destroy_node(); rclpy.try_shutdown()
''')


def _run(tmp_path, name, args, timeout=40):
    from ros_helpers import ProcessGroup, reserved_domain_id, ros_test_env
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        proc = pg.start_python(name, args)
        rc = proc.wait(timeout=timeout)
        return rc, proc.log(20000)


@pytest.mark.ros
@needs_ros
def test_lifecycle_transitions_and_live_parameter_updates(tmp_path, model_path):
    from string_perception.runtime.testing import TINY_TOKENS_DIM, save_tiny_model
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
    assert out['bad_inputs'] == {'bad_intrinsics': 1, 'size_mismatch': 1, 'bad_encoding': 1}, log
    assert out['processed'] == 2                     # the bgr8 frame and the compressed (PNG) one
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

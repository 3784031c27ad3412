"""Every live parameter set on an active node lands where it acts (pipeline, markers, stamp gate, input watch,
the frame config, ~/label_info's threshold); a non-live one waits for the next configure; deactivate clears RViz
with one DELETEALL; /diagnostics names its status after the node."""
import json
import textwrap

import pytest

from test.support.ros_helpers import ros_skip_reason
from string_perception import node_params as P

needs_ros = pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None, reason='rclpy / vision_msgs missing')

# live parameter -> a valid value different from its default (target_frame needs tf2_ros, absent off a ROS install)
LIVE_VALUES = {
    'score_threshold': 0.42, 'nms_iou': 0.45, 'max_detections': 7, 'pre_nms_top_k': 33, 'max_depth_m': 4.5,
    'publish_markers': False, 'marker_alpha': 0.8, 'marker_lifetime': 2.5, 'publish_embedding': False, 'publish_tokens': True,
    'publish_debug_image': True, 'tf_timeout': 0.2, 'max_stamp_future': 3.5, 'stamp_reset_jump': 0.75,
    'input_timeout': 2.5, 'log_throttle': 1.5, 'tiling': '2x2', 'flip_tta': 'on',
}
NOT_LIVE = {'sync_slop': 0.2, 'sync_queue_size': 3}

SCRIPT = textwrap.dedent('''
    import json, sys, time
    import rclpy
    from rclpy.parameter import Parameter
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from vision_msgs.msg import LabelInfo
    from visualization_msgs.msg import Marker, MarkerArray
    from string_perception.ros.node import StringPerceptionNode, SUCCESS
    live, not_live = json.loads(sys.argv[2]), json.loads(sys.argv[3])
    rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', 'model_path:=' + sys.argv[1],
                     '-p', 'providers:=["CPUExecutionProvider"]'])
    node = StringPerceptionNode('cam_left_perception')     # a launch file's node_name: the diagnostics status's
    out = {'configure': node.trigger_configure() == SUCCESS, 'activate': node.trigger_activate() == SUCCESS}
    peer = rclpy.create_node('label_info_listener')
    infos, diags = [], []
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    peer.create_subscription(LabelInfo, node.outputs.publishers['label_info'].topic_name, infos.append, latched)
    peer.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 10)

    def spin_until(cond, seconds=60):          # discovery on a loaded 2-core machine can take a while
        deadline = time.monotonic() + seconds
        while not cond() and time.monotonic() < deadline:
            rclpy.spin_once(peer, timeout_sec=0.05)
    spin_until(lambda: infos)
    spin_until(lambda: node._pubs['diagnostics'].get_subscription_count() > 0)
    node._publish_diagnostics()
    spin_until(lambda: diags)
    out['diagnostics_names'] = [st.name for d in diags for st in d.status]

    def sinks():
        pp = node.pipeline.params
        return {'pipeline': {k: pp[k] for k in ('score_threshold', 'nms_iou', 'max_detections', 'pre_nms_top_k',
                                                'max_depth_m', 'nms_class_agnostic', 'multi_label', 'flip_tta')},
                'marker_alpha': node.outputs.markers.alpha, 'marker_lifetime': node.outputs.markers.lifetime_s,
                'gate': [node.inputs.gate.max_future_s, node.inputs.gate.reset_jump_s],
                'watch': node.inputs.watch.timeout_s,
                'tiling': None if node.pipeline.tiling is None else list(node.pipeline.tiling.grid),
                'cfg': {k: node.cfg[k] for k in list(live) + list(not_live)},
                'sync_slop': node._sync.slop.nanoseconds / 1e9}     # a Duration in message_filters and ours

    out['before'] = sinks()
    r = node.set_parameters([Parameter(k, value=v) for k, v in live.items()])
    out['live_ok'] = [x.successful for x in r]
    out['after_live'] = sinks()
    spin_until(lambda: len(infos) >= 2)
    out['label_info_thresholds'] = [m.threshold for m in infos]
    peer.destroy_node()
    r = node.set_parameters([Parameter(k, value=v) for k, v in not_live.items()])
    out['not_live_ok'] = [x.successful for x in r]
    out['after_not_live'] = sinks()

    # deactivate: one DELETEALL on ~/markers (publish_markers back on, as RViz would show boxes)
    node.set_parameters([Parameter('publish_markers', value=True)])
    got, listener = [], rclpy.create_node('markers_listener')
    listener.create_subscription(MarkerArray, node.outputs.publishers['markers'].topic_name, got.append, 10)
    deadline = time.monotonic() + 60          # discovery on a loaded 2-core machine can take a while
    while node.outputs.publishers['markers'].get_subscription_count() < 1 and time.monotonic() < deadline:
        rclpy.spin_once(listener, timeout_sec=0.05)
    out['deactivate'] = node.trigger_deactivate() == SUCCESS
    while not got and time.monotonic() < deadline:
        rclpy.spin_once(listener, timeout_sec=0.05)
    out['markers_on_deactivate'] = [[m.action for m in a.markers] for a in got]
    out['deleteall'] = Marker.DELETEALL
    listener.destroy_node()

    # the non-live values apply at the next configure; the live ones set earlier stay
    out['reconfigure'] = node.trigger_cleanup() == SUCCESS and node.trigger_configure() == SUCCESS and \\
        node.trigger_activate() == SUCCESS
    out['after_reconfigure'] = sinks()
    node.trigger_shutdown()
    print('RESULT ' + json.dumps(out), flush=True)
    node.destroy_node(); rclpy.try_shutdown()
''')


def _run(tmp_path, args, timeout=300):
    from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_test_env
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        proc = pg.start_python('live_params', args)
        rc = proc.wait(timeout=timeout)
        return rc, proc.log(20000)


def other_live_values():
    """A changed value for each live bool / number parameter not in LIVE_VALUES (parameters added later still get
    checked to apply at once): a bool flipped, a number moved inside its range."""
    out = {}
    for spec in P.PARAMS:
        if not spec.live or spec.name in LIVE_VALUES or spec.type not in ('bool', 'int', 'double'):
            continue
        if spec.type == 'bool':
            out[spec.name] = not spec.default
        else:
            value = spec.default + 1 if spec.default + 1 <= spec.hi else spec.lo
            out[spec.name] = int(value) if spec.type == 'int' else float(value)
    return out


def test_the_values_are_valid_and_differ_from_the_defaults():
    d = P.defaults()
    for name, value in {**LIVE_VALUES, **other_live_values(), **NOT_LIVE}.items():
        assert value != d[name], name
        assert P.validate(name, value, tf2=False) == value
        assert P.SPECS[name].live == (name not in NOT_LIVE), name


@pytest.mark.ros
@needs_ros
def test_every_live_parameter_reaches_its_sink_while_active(tmp_path, model_path):
    live = {**LIVE_VALUES, **other_live_values()}
    rc, log = _run(tmp_path, ['-c', SCRIPT, model_path, json.dumps(live), json.dumps(NOT_LIVE)])
    assert rc == 0, log
    out = json.loads(log.split('RESULT ', 1)[1].splitlines()[0])
    assert out['configure'] and out['activate'] and out['deactivate'] and out['reconfigure'], log
    assert out['live_ok'] == [True] * len(live) and out['not_live_ok'] == [True] * len(NOT_LIVE), log

    before, after = out['before'], out['after_live']
    assert before['pipeline']['max_detections'] == 50 and before['gate'] == [2.0, 0.25] and before['watch'] == 1.0
    v = LIVE_VALUES
    assert after['pipeline'] == {'score_threshold': v['score_threshold'], 'nms_iou': v['nms_iou'],
                                 'max_detections': v['max_detections'], 'pre_nms_top_k': v['pre_nms_top_k'],
                                 'max_depth_m': v['max_depth_m'], 'nms_class_agnostic': True, 'multi_label': True,
                                 'flip_tta': True}
    assert not any(before['pipeline'][k] for k in ('nms_class_agnostic', 'multi_label', 'flip_tta'))
    assert after['marker_alpha'] == v['marker_alpha'] and after['marker_lifetime'] == v['marker_lifetime']
    # ~/label_info: the configure-time threshold, then the live one (latched, so late subscribers get it too)
    thresholds = out['label_info_thresholds']
    assert len(thresholds) == 2 and thresholds[1] == pytest.approx(v['score_threshold']), thresholds
    assert thresholds[0] != pytest.approx(v['score_threshold']), thresholds
    assert out['diagnostics_names'] == ['cam_left_perception: pipeline'], out['diagnostics_names']
    assert after['gate'] == [v['max_stamp_future'], v['stamp_reset_jump']]
    assert after['watch'] == v['input_timeout']
    assert before['tiling'] is None and after['tiling'] == [2, 2]    # the pipeline tiles from the next frame on
    assert {k: after['cfg'][k] for k in live} == live               # what _process reads each frame

    # non-live: accepted (ROS stores it) but the running configuration keeps the old value until configure
    held = out['after_not_live']
    assert {k: held['cfg'][k] for k in NOT_LIVE} == {k: P.defaults()[k] for k in NOT_LIVE}, held['cfg']
    assert held['sync_slop'] in (None, P.defaults()['sync_slop'])             # the synchroniser too
    assert all(f'{k} will apply at the next configure' in log for k in NOT_LIVE), log

    # deactivate clears RViz: exactly one MarkerArray holding one DELETEALL
    assert out['markers_on_deactivate'] == [[out['deleteall']]], log

    again = out['after_reconfigure']
    assert {k: again['cfg'][k] for k in NOT_LIVE} == NOT_LIVE
    assert again['pipeline']['max_detections'] == v['max_detections'] and again['gate'] == after['gate']
    assert again['watch'] == v['input_timeout'] and again['marker_alpha'] == v['marker_alpha']

"""The policy node (string_perception_policy) and its ROS-free core (runtime/policy_stepper.py).

Known answers come from the linear test policy (runtime/linear_policy.make_linear_policy: actions = qpos + [e, q] @ W + b)
ensembled with TemporalEnsemble as ACT does; the node runs in this process against a peer node over loopback DDS
(own ROS_DOMAIN_ID): commands carry the answered stamp and the policy's joint names, bad input is counted in
/diagnostics and the next good pair is answered, lifecycle transitions start and stop it.
"""
import time

import numpy as np
import onnx
import pytest

from string_perception.runtime.action_chunks import TemporalEnsemble
from string_perception.runtime.errors import InputError
from string_perception.runtime.policy_model import PolicyMetadata, PolicyModel
from string_perception.runtime.policy_stepper import PolicyStepper
from string_perception.runtime.linear_policy import linear_policy_actions, make_linear_policy
from string_perception.ros import policy_params as PP

E, J, K = 6, 4, 5
NAMES = ('a_waist', 'a_grip', 'b_waist', 'b_grip')
DT_NS = 20_000_000                     # 50 Hz


def _meta(query_every=2, m=0.1, names=NAMES):
    return PolicyMetadata(chunk_size=K, embed_dim=E, joint_names=names, control_rate_hz=50.0,
                          temporal_ensemble_m=m, query_every=query_every, task='test')


@pytest.fixture()
def policy(tmp_path):
    model = make_linear_policy(_meta(), seed=3)
    path = tmp_path / 'policy.onnx'
    onnx.save(model, str(path))
    return model, path


def _inputs(t):
    rng = np.random.default_rng(100 + t)
    return rng.standard_normal(E).astype(np.float32), rng.uniform(-1, 1, J).astype(np.float32)


def _expected(model, steps, query_every=2, m=0.1):
    """Ensembled linear-policy actions for steps 0..n-1 queried every ``query_every``."""
    ens, out = TemporalEnsemble(K, J, m), []
    for t in steps:
        e, q = _inputs(t)
        if t % query_every == 0:
            ens.add(t, linear_policy_actions(model, e[None], q[None])[0])
        out.append(ens.action(t))
    return np.array(out)


# ---------------------------------------------------------------------------------------------- stepper (no ROS)
def test_stepper_queries_every_q_steps_and_ensembles_the_chunks(policy):
    model, path = policy
    stepper = PolicyStepper(PolicyModel(path))
    got = [stepper(1_000_000_000 + t * DT_NS, *_inputs(t)) for t in range(9)]
    assert [r.step for r in got] == list(range(9))
    assert [r.queried for r in got] == [t % 2 == 0 for t in range(9)]
    assert np.allclose([r.action for r in got], _expected(model, range(9)), atol=1e-5)
    assert stepper.queries == 5 and [r.new_episode for r in got] == [True] + [False] * 8


def test_stepper_overrides_metadata_and_restarts_episodes(policy):
    model, path = policy
    stepper = PolicyStepper(PolicyModel(path), query_every=1, temporal_ensemble_m=0.0, episode_gap_s=0.5)
    for t in range(3):
        stepper(t * DT_NS, *_inputs(t))
    r = stepper(2 * DT_NS + 600_000_000, *_inputs(0))                # 0.6 s later: a new episode at step 0
    assert r.new_episode and r.step == 0 and r.queried
    e, q = _inputs(0)
    assert np.allclose(r.action, linear_policy_actions(model, e[None], q[None])[0, 0], atol=1e-5)
    back = stepper(DT_NS, *_inputs(0))                                # a stamp back in time: new episode too
    assert back.new_episode and back.step == 0
    with pytest.raises(ValueError, match='query_every'):
        PolicyStepper(PolicyModel(path), query_every=K + 1)


def test_stepper_latches_the_first_embedding_of_each_episode_when_the_policy_says_so(tmp_path):
    from dataclasses import replace
    from string_perception.runtime.errors import MetadataError
    model = make_linear_policy(replace(_meta(query_every=1, m=0.0), embedding_latch='episode_start'), seed=3)
    path = tmp_path / 'latched.onnx'
    onnx.save(model, str(path))
    stepper = PolicyStepper(PolicyModel(path))
    e0, _ = _inputs(0)
    latched, current = TemporalEnsemble(K, J, 0.0), TemporalEnsemble(K, J, 0.0)
    for t in range(4):                       # every query is given step 0's embedding, not the current one
        e, q = _inputs(t)
        r = stepper(t * DT_NS, e, q)
        latched.add(t, linear_policy_actions(model, e0[None], q[None])[0])
        current.add(t, linear_policy_actions(model, e[None], q[None])[0])
        assert np.allclose(r.action, latched.action(t), atol=1e-5)
        assert t == 0 or not np.allclose(r.action, current.action(t), atol=1e-3)
    e5, q5 = _inputs(5)
    r = stepper(3 * DT_NS + 600_000_000, e5, q5)                      # a new episode latches its own first
    assert r.new_episode and np.allclose(r.action, linear_policy_actions(model, e5[None], q5[None])[0, 0],
                                         atol=1e-5)
    assert PolicyModel(path).metadata.embedding_latch == 'episode_start'
    with pytest.raises(MetadataError, match='embedding_latch'):
        replace(_meta(), embedding_latch='sometimes').validate()


def test_stepper_bad_input_changes_nothing_and_a_missed_query_is_made_up(policy):
    model, path = policy
    stepper = PolicyStepper(PolicyModel(path))
    stepper(0, *_inputs(0))
    e, q = _inputs(1)
    bad = [((np.full(E, np.nan, np.float32), q), 'non_finite'), ((e[:-1], q), 'bad_shape'),
           ((e, np.r_[q, 0.0]), 'bad_shape')]
    for args, kind in bad:
        with pytest.raises(InputError) as info:
            stepper(DT_NS, *args)
        assert info.value.kind == kind
    with pytest.raises(InputError) as info:
        stepper(0, *_inputs(0))
    assert info.value.kind == 'out_of_order'
    # steps 1..5 missed: step 6 is a query step, step 7 is covered by chunk 6 (no query), step 13 is odd but no
    # chunk covers it (chunk 6 ends at step 10): queried
    assert stepper(6 * DT_NS, *_inputs(6)).queried
    assert not stepper(7 * DT_NS, *_inputs(7)).queried
    r = stepper(13 * DT_NS, *_inputs(13))
    assert r.step == 13 and r.queried and not r.new_episode
    e, q = _inputs(13)
    assert np.allclose(r.action, linear_policy_actions(model, e[None], q[None])[0, 0], atol=1e-5)


# ---------------------------------------------------------------------------------------------- parameters
def test_every_policy_parameter_default_is_valid_and_model_path_is_required():
    for p in PP.PARAMS:
        assert PP.validate(p.name, p.default) == p.default
        assert p.description
    with pytest.raises(ValueError, match='model_path is required'):
        PP.validate_all({})
    assert PP.validate_all({'model_path': '/p.onnx'})['on_miss'] == 'hold'
    for name, value in (('on_miss', 'drop'), ('stamp_tolerance', 0.0), ('query_every', -1),
                        ('providers', ['auto', 'CPUExecutionProvider'])):
        with pytest.raises(ValueError):
            PP.validate(name, value)
    ok, reason = PP.check_updates([('on_miss', 'skip'), ('log_throttle', -1.0)])
    assert not ok and 'log_throttle' in reason


# ---------------------------------------------------------------------------------------------- over DDS
def _ros():
    rclpy = pytest.importorskip('rclpy')
    from test.support.ros_helpers import ros_skip_reason
    if ros_skip_reason('sensor_msgs', 'diagnostic_msgs'):
        pytest.skip(ros_skip_reason('sensor_msgs', 'diagnostic_msgs'))
    return rclpy


def test_message_decoding_checks_encoding_size_and_joint_names():
    _ros()
    from sensor_msgs.msg import Image, JointState
    from string_perception.codec.detection_msgs import tensor_to_image
    from string_perception.ros.policy_node import embedding_from_image, qpos_from_joint_state
    e = np.arange(E, dtype=np.float32)
    assert np.array_equal(embedding_from_image(tensor_to_image(e)), e)
    for msg, kind in ((Image(encoding='rgb8', height=1, width=2, step=6, data=bytes(6)), 'bad_encoding'),
                      (Image(encoding='32FC1', height=2, width=3, step=12, data=bytes(24)), 'bad_shape'),
                      (Image(encoding='32FC1', height=1, width=3, step=12, data=bytes(8)), 'bad_shape')):
        with pytest.raises(InputError) as info:
            embedding_from_image(msg)
        assert info.value.kind == kind
    js = JointState(name=['x', *reversed(NAMES)], position=[9.0, 4.0, 3.0, 2.0, 1.0])
    assert qpos_from_joint_state(js, NAMES).tolist() == [1.0, 2.0, 3.0, 4.0]     # by name, extra joints ignored
    for bad, kind in ((JointState(name=list(NAMES[:3]), position=[0.0] * 3), 'missing_joint'),
                      (JointState(name=list(NAMES), position=[0.0] * 3), 'bad_joint_state')):
        with pytest.raises(InputError) as info:
            qpos_from_joint_state(bad, NAMES)
        assert info.value.kind == kind


class _Peer:
    """Publishes embedding + joint_states, collects ~/joint_command and /diagnostics (one executor with the node)."""

    def __init__(self, rclpy, ctx, node):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, JointState
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        self.peer = rclpy.create_node('policy_test_peer', context=ctx)
        self.pub_e = self.peer.create_publisher(Image, 'embedding', qos)
        self.pub_j = self.peer.create_publisher(JointState, 'joint_states', qos)
        self.commands, self.diag = {}, {}
        self.peer.create_subscription(JointState, f'/{PP.NODE_NAME}/joint_command',
                                      lambda m: self.commands.__setitem__(
                                          m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, m), qos)
        self.peer.create_subscription(DiagnosticArray, '/diagnostics', self._on_diag, qos)
        self.executor = SingleThreadedExecutor(context=ctx)
        self.executor.add_node(node)
        self.executor.add_node(self.peer)

    def _on_diag(self, msg):
        for st in msg.status:
            if st.name.startswith(PP.NODE_NAME):
                self.diag = {kv.key: kv.value for kv in st.values}

    def spin_until(self, cond, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not cond() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
        return cond()

    def wait_matched(self):
        return self.spin_until(lambda: self.pub_e.get_subscription_count() > 0
                               and self.pub_j.get_subscription_count() > 0
                               and self.peer.count_publishers(f'/{PP.NODE_NAME}/joint_command') > 0)

    def send(self, stamp_ns, e, q, names=NAMES, encoding='32FC1'):
        from builtin_interfaces.msg import Time
        from sensor_msgs.msg import JointState
        from string_perception.codec.detection_msgs import tensor_to_image
        stamp = Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
        img = tensor_to_image(e)
        img.header.stamp, img.encoding = stamp, encoding
        js = JointState(name=list(names), position=[float(v) for v in q])
        js.header.stamp = stamp
        self.pub_j.publish(js)
        self.pub_e.publish(img)


def _interface_graph():
    from string_perception.ros.interface import POLICY_TOPICS
    full = {t.name: f'/{PP.NODE_NAME}/{t.name[2:]}' if t.name.startswith('~/') else
            t.name if t.name.startswith('/') else f'/{t.name}' for t in POLICY_TOPICS}
    return ({full[t.name]: t.type for t in POLICY_TOPICS if t.direction == 'out'},
            {full[t.name]: t.type for t in POLICY_TOPICS if t.direction == 'in'})


def _graph(node, timeout=30.0):
    """(publishers, subscriptions) of the node as {topic: type} once they equal the interface's (or after timeout)."""
    want, deadline = _interface_graph(), time.monotonic() + timeout
    while True:
        name = node.get_name()
        pubs = {t: ty[0] for t, ty in node.get_publisher_names_and_types_by_node(name, '/')
                if t not in ('/rosout', '/parameter_events') and 'transition_event' not in t}
        subs = {t: ty[0] for t, ty in node.get_subscriber_names_and_types_by_node(name, '/')
                if t != '/parameter_events'}
        if (pubs, subs) == want or time.monotonic() > deadline:
            return pubs, subs
        time.sleep(0.1)


@pytest.mark.ros
@pytest.mark.slow
def test_policy_node_answers_bad_input_and_lifecycle_over_dds(policy, monkeypatch, tmp_path):
    rclpy = _ros()
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.policy_node import SUCCESS, PolicyNode
    model, path = policy
    args = ['-p', 'autostart:=false', '-p', 'diagnostics_period:=0.1', '-p', 'log_throttle:=0.0']
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(args=['x', '--ros-args', *args], context=ctx)
        node = PolicyNode(context=ctx)
        peer = _Peer(rclpy, ctx, node)
        try:
            assert node.trigger_configure() != SUCCESS              # no model_path: configure fails, node lives
            from rclpy.parameter import Parameter
            node.set_parameters([Parameter('model_path', value=str(path))])
            assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
            assert peer.wait_matched()
            assert _graph(node) == _interface_graph()                  # README's POLICY_TOPICS = what it does
            base = 5 * 10**9
            stamps = [base + t * DT_NS for t in range(6)]
            for t, s in enumerate(stamps):
                peer.send(s, *_inputs(t))
                assert peer.spin_until(lambda s=s: s in peer.commands), t
            want = _expected(model, range(6))
            for t, s in enumerate(stamps):
                cmd = peer.commands[s]
                assert tuple(cmd.name) == NAMES
                assert np.allclose(cmd.position, want[t], atol=1e-5)
            # bad input: NaN embedding, wrong size, wrong encoding, a missing joint -> held command, counted
            e, q = _inputs(6)
            bad = [(np.full(E, np.nan, np.float32), q, NAMES, '32FC1'), (e[:3], q, NAMES, '32FC1'),
                   (e, q, NAMES, '16UC1'), (e, q[:3], NAMES[:3], '32FC1')]
            for k, (be, bq, names, enc) in enumerate(bad):
                s = base + (6 + k) * DT_NS
                peer.send(s, be, bq, names=names, encoding=enc)
                assert peer.spin_until(lambda s=s: s in peer.commands), k
                assert np.allclose(peer.commands[s].position, want[5], atol=1e-5)     # on_miss hold: the last one
            want_counts = {'bad_inputs.non_finite': '1', 'bad_inputs.bad_shape': '1', 'bad_inputs.bad_encoding': '1',
                           'bad_inputs.missing_joint': '1', 'warnings.held_last_command': '4', 'published': '6'}
            assert peer.spin_until(lambda: all(peer.diag.get(k) == v for k, v in want_counts.items())), peer.diag
            s = base + 10 * DT_NS                                   # a good pair after the bad ones is answered
            peer.send(s, *_inputs(10))
            assert peer.spin_until(lambda: s in peer.commands)
            e, q = _inputs(10)
            assert np.isfinite(peer.commands[s].position).all() and tuple(peer.commands[s].name) == NAMES
            # skip: a bad pair gets no command
            node.set_parameters([Parameter('on_miss', value='skip')])
            s_bad = base + 11 * DT_NS
            peer.send(s_bad, np.full(E, np.nan, np.float32), q)
            assert not peer.spin_until(lambda: s_bad in peer.commands, timeout=1.0)
            # deactivated: no answers; cleanup + configure + activate: answering again, a fresh episode
            assert node.trigger_deactivate() == SUCCESS
            s_off = base + 12 * DT_NS
            peer.send(s_off, *_inputs(12))
            assert not peer.spin_until(lambda: s_off in peer.commands, timeout=1.0)
            assert node.trigger_cleanup() == SUCCESS
            assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
            assert peer.wait_matched()
            s_on = base + 100 * DT_NS
            e, q = _inputs(0)
            peer.send(s_on, e, q)
            assert peer.spin_until(lambda: s_on in peer.commands)
            assert np.allclose(peer.commands[s_on].position, linear_policy_actions(model, e[None], q[None])[0, 0],
                               atol=1e-5)
        finally:
            peer.executor.shutdown()
            peer.peer.destroy_node()
            node.destroy_node()
            rclpy.shutdown(context=ctx)


def test_policy_tables_are_generated_between_their_markers():
    from string_perception.ros import interface as I
    keys = ('policy_parameters', 'policy_topics')
    page = '\n'.join(f'{I.MARKERS[k][0]}\nold\n{I.MARKERS[k][1]}' for k in keys) + '\n'
    text = I.render_tables(page, keys)
    rows = text.split(I.MARKERS['policy_parameters'][0])[1].split(I.MARKERS['policy_parameters'][1])[0]
    assert [r.split('|')[1].strip(' `') for r in rows.strip().splitlines()[2:]] == [p.name for p in PP.PARAMS]
    topics = text.split(I.MARKERS['policy_topics'][0])[1].split(I.MARKERS['policy_topics'][1])[0]
    assert [r.split('|')[2].strip(' `') for r in topics.strip().splitlines()[2:]] == [t.name for t in
                                                                                      I.POLICY_TOPICS]
    assert I.render_tables(text, keys) == text
    with pytest.raises(ValueError, match='<!-- parameters:begin'):               # the node's are not on this page
        I.render_tables(text, ('parameters',))

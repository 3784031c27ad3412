"""ApproximateTimeSynchronizer semantics (string_perception.ros.message_filters_fallback; also the real message_filters
when it is installed, to show both behave the same). ROS-free for the fallback."""
import importlib.util
import threading
from types import SimpleNamespace

import pytest

from string_perception.ros import message_filters_fallback as ours
from string_perception.ros.message_filters_fallback import StampInput, slop_to_ns

MS = 1_000_000
BASE = 1_700_000_000 * 1_000_000_000  # a realistic epoch stamp

IMPLS = [pytest.param(ours, id='fallback')]
if importlib.util.find_spec('message_filters') is not None:
    import message_filters as _real
    IMPLS.append(pytest.param(_real, id='message_filters'))


def _stamp(ns):
    try:
        from builtin_interfaces.msg import Time
        return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
    except ImportError:
        return SimpleNamespace(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def msg(ns, tag=None):
    return SimpleNamespace(header=SimpleNamespace(stamp=_stamp(BASE + ns)), tag=tag if tag is not None else ns)


class Harness:
    def __init__(self, impl, n_inputs=2, queue_size=10, slop=0.1, **kw):
        self.inputs = [StampInput() for _ in range(n_inputs)]
        self.sync = impl.ApproximateTimeSynchronizer(self.inputs, queue_size, slop, **kw)
        self.out = []
        self.sync.registerCallback(lambda *ms: self.out.append(tuple(m.tag for m in ms)))

    def feed(self, *events):
        """events: (input_index, stamp_offset_ns[, tag])"""
        for ev in events:
            i, ns = ev[0], ev[1]
            self.inputs[i].add(msg(ns, ev[2] if len(ev) > 2 else (i, ns // MS)))
        return self.out

    def queued(self, i):
        return sorted((t - BASE) // MS for t in self.sync.queues[i])


@pytest.fixture(params=IMPLS)
def impl(request):
    return request.param


def test_exact_match_and_input_order(impl):
    h = Harness(impl)
    h.feed((1, 0), (0, 0))          # depth first, then colour: callback still gets (colour, depth)
    assert h.out == [((0, 0), (1, 0))]
    assert h.queued(0) == [] and h.queued(1) == []


def test_stream_ordering_with_jitter(impl):
    h = Harness(impl, slop=0.010)
    events = []
    for k in range(10):
        events += [(0, k * 33 * MS), (1, k * 33 * MS + 3 * MS)]
    h.feed(*events)
    assert h.out == [((0, k * 33), (1, k * 33 + 3)) for k in range(10)]


def test_slop_edges(impl):
    slop_ns = slop_to_ns(0.1)
    assert slop_ns == 100 * MS
    # just below slop: match
    h = Harness(impl, slop=0.1)
    h.feed((0, 0, 'a'), (1, slop_ns - 1, 'b'))
    assert h.out == [('a', 'b')]
    # exactly slop apart: upstream requires max - min < slop, so no match
    h = Harness(impl, slop=0.1)
    h.feed((0, 0, 'a'), (1, slop_ns, 'b'))
    assert h.out == []
    # just above: no match, both stay queued
    h = Harness(impl, slop=0.1)
    h.feed((0, 0, 'a'), (1, slop_ns + 1, 'b'))
    assert h.out == [] and h.queued(0) == [0] and h.queued(1) == [100]


def test_slop_conversion_matches_rclpy_duration():
    for slop in (0.0, 0.001, 0.01, 0.033, 0.05, 0.1, 0.3, 1.0, 2.5):
        assert slop_to_ns(slop) == int(slop * 1e9)
    assert slop_to_ns(1.001) == 1_000_999_999   # float truncation, as Duration(seconds=1.001)
    if importlib.util.find_spec('rclpy') is not None:
        from rclpy.duration import Duration
        for slop in (0.001, 0.01, 0.033, 0.05, 0.1, 0.3, 1.001, 1.003, 2.5):
            assert slop_to_ns(slop) == Duration(seconds=slop).nanoseconds


def test_zero_slop_never_matches(impl):
    h = Harness(impl, slop=0.0)
    h.feed((0, 0), (1, 0))
    assert h.out == []


def test_closest_candidate_wins(impl):
    h = Harness(impl, slop=0.1)
    h.feed((0, 0), (0, 40 * MS), (0, 80 * MS), (1, 50 * MS))
    assert h.out == [((0, 40), (1, 50))]
    assert h.queued(0) == [0, 80]          # the others stay queued


def test_queue_overflow_drops_oldest_stamp(impl):
    h = Harness(impl, queue_size=2, slop=0.01)
    h.feed((0, 0), (0, 100 * MS), (0, 200 * MS))
    assert h.queued(0) == [100, 200]
    h.feed((1, 0))                          # its partner was pushed out
    assert h.out == [] and h.queued(1) == [0]
    h.feed((1, 200 * MS))
    assert h.out == [((0, 200), (1, 200))]
    assert h.queued(0) == [100] and h.queued(1) == [0]


def test_late_message_older_than_full_queue_is_dropped_at_once(impl):
    h = Harness(impl, queue_size=2, slop=0.01)
    h.feed((0, 500 * MS), (0, 600 * MS), (0, 100 * MS))   # oldest by stamp goes, not by arrival
    assert h.queued(0) == [500, 600]
    h.feed((1, 100 * MS))
    assert h.out == []


def test_out_of_order_stamps_still_pair(impl):
    h = Harness(impl, slop=0.01)
    h.feed((0, 100 * MS), (0, 0), (1, 100 * MS), (1, 0))
    assert h.out == [((0, 100), (1, 100)), ((0, 0), (1, 0))]


def test_unmatched_older_messages_are_kept(impl):
    h = Harness(impl, slop=0.01)
    h.feed((0, 0), (0, 33 * MS), (0, 66 * MS), (1, 66 * MS))
    assert h.out == [((0, 66), (1, 66))]
    assert h.queued(0) == [0, 33]           # not purged (unlike the C++ policy)
    h.feed((1, 0))
    assert h.out[-1] == ((0, 0), (1, 0))


def test_duplicate_stamp_replaces_queued_message(impl):
    h = Harness(impl)
    h.feed((0, 0, 'first'), (0, 0, 'second'), (1, 0, 'depth'))
    assert h.out == [('second', 'depth')]


def test_three_inputs(impl):
    h = Harness(impl, n_inputs=3, slop=0.1)
    h.feed((0, 0, 'c'), (1, 5 * MS, 'd'))
    assert h.out == []                      # camera_info missing
    h.feed((2, 2 * MS, 'k'))
    assert h.out == [('c', 'd', 'k')]
    # each partner within slop of the newcomer, but the spread equals slop: no match ...
    h = Harness(impl, n_inputs=3, slop=0.1)
    h.feed((0, 0, 'c'), (1, 100 * MS, 'd'), (2, 50 * MS, 'k'))
    assert h.out == []
    # ... and one nanosecond less spread matches
    h = Harness(impl, n_inputs=3, slop=0.1)
    h.feed((0, 0, 'c'), (1, 100 * MS - 1, 'd'), (2, 50 * MS, 'k'))
    assert h.out == [('c', 'd', 'k')]


def test_three_inputs_search_picks_first_valid_combination(impl):
    h = Harness(impl, n_inputs=3, slop=0.1)
    # colour at 0 and 90 ms, depth at 60 ms; camera_info at 40 ms arrives last
    h.feed((0, 0, 'c0'), (0, 90 * MS, 'c90'), (1, 60 * MS, 'd60'), (2, 40 * MS, 'k40'))
    # candidates for colour sorted by |dt| to 40 ms: 0 (40) then 90 (50); (0, 60, 40) spreads 60 < 100
    assert h.out == [('c0', 'd60', 'k40')]
    assert h.queued(0) == [90]


def test_headerless_messages(impl, caplog):
    if impl is ours:
        h = Harness(impl)
        h.inputs[0].add(SimpleNamespace(tag='no header'))
        assert h.sync.queues[0] == {}
        clock = iter([BASE + 7, BASE + 7])
        inputs = [StampInput(), StampInput()]
        sync = impl.ApproximateTimeSynchronizer(inputs, 10, 0.1, allow_headerless=True,
                                                clock=lambda: next(clock))
        out = []
        sync.registerCallback(lambda a, b: out.append((a.tag, b.tag)))
        inputs[0].add(SimpleNamespace(tag='x'))
        inputs[1].add(SimpleNamespace(tag='y'))
        assert out == [('x', 'y')]
    else:  # real message_filters: headerless ignored by default
        h = Harness(impl)
        h.inputs[0].add(SimpleNamespace(tag='no header'))
        assert h.sync.queues[0] == {}


def test_arguments_after_slop_are_keyword_only_in_the_fallback():
    """Upstream put queue_offset fourth in 2026: a positional allow_headerless would mean something else there."""
    with pytest.raises(TypeError):
        ours.ApproximateTimeSynchronizer([StampInput(), StampInput()], 10, 0.1, True)


def test_callbacks_with_extra_args_and_connection_ids(impl):
    inputs = [StampInput(), StampInput()]
    sync = impl.ApproximateTimeSynchronizer(inputs, 5, 0.05)
    seen = []
    assert sync.registerCallback(lambda a, b, extra: seen.append(('cb0', a.tag, b.tag, extra)), 'X') == 0
    assert sync.registerCallback(lambda a, b: seen.append(('cb1', a.tag, b.tag))) == 1
    inputs[0].add(msg(0, 'a'))
    inputs[1].add(msg(0, 'b'))
    assert seen == [('cb0', 'a', 'b', 'X'), ('cb1', 'a', 'b')]


def test_concurrent_inputs_are_consistent(impl):
    h = Harness(impl, queue_size=300, slop=0.001)
    n = 300

    def feeder(i):
        for k in range(n):
            h.inputs[i].add(msg(k * 10 * MS, (i, k)))

    threads = [threading.Thread(target=feeder, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(h.out) == n
    assert all(a[1] == b[1] for a, b in h.out)


class FakeNode:
    def __init__(self):
        self.calls = []

    def create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs):
        sub = SimpleNamespace(topic_name=topic, callback=callback)
        self.calls.append((msg_type, topic, qos_profile, kwargs))
        return sub


def test_subscriber_wrapper_feeds_the_synchronizer():
    node = FakeNode()
    a = ours.Subscriber(node, 'Image', 'image', qos_profile='sensor')
    b = ours.Subscriber(node, 'Image', 'depth')
    assert node.calls == [('Image', 'image', 'sensor', {}), ('Image', 'depth', 10, {})]
    assert a.getTopic() == 'image' and a.topic_name == 'image'   # attributes served by the subscription
    sync = ours.ApproximateTimeSynchronizer([a, b], 5, 0.05)
    out = []
    sync.registerCallback(lambda x, y: out.append((x.tag, y.tag)))
    a.sub.callback(msg(0, 'colour'))
    b.sub.callback(msg(1 * MS, 'depth'))
    assert out == [('colour', 'depth')]


@pytest.mark.parametrize('call', [
    lambda n: ours.Subscriber(n, 'Image', 'image', 'sensor'),                    # positional QoS: Humble..2025
    lambda n: ours.Subscriber(n, 'Image', 'image', qos_profile=1, callback_group='cg'),   # e.g. Humble 4.3.12
    lambda n: ours.Subscriber(n, 'Image', 'image', qos_profile=1, raw=True),
    lambda n: ours.Subscriber(node=n, msg_type='Image', topic='image'),          # keywords only: Humble..2025
], ids=['positional_qos', 'callback_group', 'raw', 'all_keywords'])
def test_subscriber_refuses_call_forms_some_release_refuses(call):
    """Only ``Subscriber(node, type, topic, qos_profile=q)`` works on every message_filters release."""
    with pytest.raises((TypeError, IndexError)):       # IndexError: what *args releases raise for keywords
        call(FakeNode())


def _rclpy_refusal(stamp):
    from rclpy.time import Time
    try:
        Time.from_msg(stamp)
    except Exception as e:  # noqa: BLE001 - the very exception is compared
        return type(e), str(e)
    return None


@pytest.mark.parametrize('stamp', [
    SimpleNamespace(sec=1, nanosec=2),                       # a look-alike: what image_cdr used to hand over
    pytest.param('raw_stamp', id='image_cdr.RawStamp'),
    pytest.param('negative', id='negative_builtin_time'),
], ids=['namespace', 'raw_stamp', 'negative'])
def test_fallback_refuses_every_stamp_rclpy_refuses(impl, stamp):
    """The synchroniser converts stamps with rclpy.time.Time.from_msg (the real function): a plain dataclass
    stamp raises the very TypeError the real message_filters raises, a negative one its ValueError."""
    from builtin_interfaces.msg import Time as TimeMsg
    from string_perception.codec.image_cdr import RawStamp
    stamp = {'raw_stamp': RawStamp(1, 2), 'negative': TimeMsg(sec=-1, nanosec=0)}.get(stamp, stamp) \
        if isinstance(stamp, str) else stamp
    expected = _rclpy_refusal(stamp)
    assert expected is not None
    h = Harness(impl)
    with pytest.raises(expected[0]) as e:
        h.inputs[0].add(SimpleNamespace(header=SimpleNamespace(stamp=stamp), tag='bad'))
    assert str(e.value) == expected[1]
    assert ours.stamp_error(SimpleNamespace(header=SimpleNamespace(stamp=stamp))) == \
        f'{expected[0].__name__}: {expected[1]}'


def test_image_cdr_stamps_are_what_rclpy_takes(impl):
    """The node's default input (raw_image_input): image_cdr.read_image's RawImage goes through both
    synchronisers, its stamp a builtin_interfaces/Time that rclpy.time.Time.from_msg accepts."""
    from rclpy.serialization import serialize_message
    from rclpy.time import Time
    from sensor_msgs.msg import Image
    from string_perception.codec.image_cdr import read_image
    img = Image(height=1, width=1, encoding='mono8', step=1, data=[7])
    img.header.stamp.sec, img.header.stamp.nanosec = 1_700_000_000, 5
    raw = read_image(serialize_message(img))
    assert Time.from_msg(raw.header.stamp).nanoseconds == 1_700_000_000_000_000_005
    h = Harness(impl)
    raw.tag = 'raw'
    h.inputs[0].add(raw)
    h.inputs[1].add(SimpleNamespace(header=img.header, tag='depth'))
    assert h.out == [('raw', 'depth')]


def test_synchronizer_prefers_real_message_filters():
    from string_perception.ros import synchronizer as sync
    if importlib.util.find_spec('message_filters') is not None:
        assert sync.IMPLEMENTATION == 'message_filters'
    else:
        assert sync.IMPLEMENTATION == 'string_perception.ros.message_filters_fallback'
        assert sync.ApproximateTimeSynchronizer is ours.ApproximateTimeSynchronizer
        assert sync.Subscriber is ours.Subscriber

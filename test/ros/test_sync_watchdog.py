"""SyncWatchdog (ros/sync_watchdog.py) over both synchronisers: poisoned queues are unblocked, good traffic never is.

Frames are driven with an explicit monotonic clock (arrivals 100 ms apart), as the node drives it: ``arrived``
before the synchroniser takes a message, ``synced`` on every output, ``stuck`` -> ``recover``.
"""
import importlib.util
from types import SimpleNamespace

import pytest

from string_perception.ros import message_filters_fallback as ours
from string_perception.ros.message_filters_fallback import StampInput
from string_perception.ros.sync_watchdog import SyncWatchdog

S = 1_000_000_000
MS = 1_000_000
BASE = 1_700_000_000 * S
NAMES = ('image', 'depth', 'camera_info')
TIMEOUT_S, QUEUE, SLOP = 1.0, 10, 0.05

IMPLS = [pytest.param(ours, id='fallback')]
if importlib.util.find_spec('message_filters') is not None:
    import message_filters as _real
    IMPLS.append(pytest.param(_real, id='message_filters'))


def _msg(stamp_ns, tag):
    from builtin_interfaces.msg import Time
    return SimpleNamespace(header=SimpleNamespace(stamp=Time(sec=stamp_ns // S, nanosec=stamp_ns % S)), tag=tag)


class Rig:
    """Three inputs -> synchroniser; the watchdog sees every arrival first, as in the node's ``_on_input``."""

    def __init__(self, impl, watchdog=True):
        self.inputs = [StampInput() for _ in NAMES]
        self.sync = impl.ApproximateTimeSynchronizer(self.inputs, queue_size=QUEUE, slop=SLOP)
        self.watch = SyncWatchdog(NAMES, TIMEOUT_S) if watchdog else None
        self.out, self.recoveries, self.now = [], [], 0
        self.sync.registerCallback(self._synced)

    def _synced(self, *msgs):
        self.out.append(tuple(m.tag for m in msgs))
        if self.watch is not None:
            self.watch.synced(self.now)

    def send(self, i, stamp_ns, tag):
        if self.watch is not None:
            self.watch.arrived(NAMES[i], self.now)
            if self.watch.stuck(self.now):
                self.recoveries.append(self.watch.recover(self.sync, int(SLOP * S)))
        self.inputs[i].add(_msg(stamp_ns, tag))

    def frame(self, k, stamp_ns, skip=()):
        """One good triple stamped ``stamp_ns`` (inputs in ``skip`` left out), then 100 ms pass."""
        for i in range(3):
            if i not in skip:
                self.send(i, stamp_ns, (NAMES[i], k))
        self.now += 100 * MS

    def answered(self, k):
        return ((NAMES[0], k), (NAMES[1], k), (NAMES[2], k)) in self.out


def _poison_then_good(rig, inputs, offset_ns, n_poison=11, n_good=40):
    """``n_poison`` messages on ``inputs`` stamped ``offset_ns`` from the live clock, then good frames; returns
    the index of the first good frame answered (None: none)."""
    for j in range(n_poison):
        for i in inputs:
            rig.send(i, BASE + rig.now + offset_ns + j * MS, ('poison', j))
        rig.now += 10 * MS
    first = None
    for k in range(n_good):
        rig.frame(k, BASE + rig.now)
        if first is None and rig.answered(k):
            first = k
    return first


@pytest.fixture(params=IMPLS)
def impl(request):
    return request.param


@pytest.mark.parametrize('inputs, offset_s, cause, rounds', [
    ((2,), 3600.0, 'ahead_camera_info', 1),         # CameraInfo-only, 1 h ahead
    ((1,), 10.0, 'ahead_depth', 1),                 # depth-only, 10 s ahead
    ((0,), 3600.0, 'ahead_image', 1),               # colour-only, 1 h ahead
    ((0, 1), 3600.0, None, 2),                      # two ahead, no node clock: the median is wrong, then cleared
], ids=['camera_info_1h', 'depth_10s', 'image_1h', 'image_and_depth_1h'])
def test_future_stamps_block_the_synchroniser_and_are_dropped(impl, inputs, offset_s, cause, rounds):
    stuck = Rig(impl, watchdog=False)
    assert _poison_then_good(stuck, inputs, int(offset_s * S)) is None      # the bug: deaf
    rig = Rig(impl)
    first = _poison_then_good(rig, inputs, int(offset_s * S))
    assert first is not None, rig.recoveries
    # answered within ``rounds`` input_timeouts of good traffic (+1 frame to notice, +2 to refill the partners)
    assert first <= rounds * (TIMEOUT_S / 0.1 + 1) + 2, (first, rig.recoveries)
    assert len(rig.recoveries) == rounds, rig.recoveries
    assert rig.recoveries, 'answered without a recovery?'
    if cause is not None:
        assert cause in rig.recoveries[0].causes and 'ahead' in rig.recoveries[0].reason
    after = [k for k in range(first, 40) if not rig.answered(k)]
    assert after == [], after                       # once unblocked, every good frame is answered


def test_two_inputs_ahead_are_dropped_against_the_node_clock(impl):
    rig = Rig(impl, watchdog=False)
    watch = SyncWatchdog(NAMES, TIMEOUT_S)
    for j in range(11):
        for i in (0, 1):
            rig.inputs[i].add(_msg(BASE + 3600 * S + j * MS, 'poison'))
    rig.inputs[2].add(_msg(BASE, 'good'))
    rec = watch.recover(rig.sync, int(SLOP * S), clock_ns=BASE, future_ns=2 * S)
    assert set(rec.causes) == {'ahead_image', 'ahead_depth'} and rec.dropped == {'image': 10, 'depth': 10}
    assert len(rig.sync.queues[2]) == 1             # the good camera_info stays


def test_stale_stamps_never_block(impl):
    """Messages stamped in the past are the oldest: overflow drops them first, good frames match at once."""
    for inputs in ((2,), (1,), (0,)):
        rig = Rig(impl)
        assert _poison_then_good(rig, inputs, -10 * S) == 0 and rig.recoveries == []


def test_a_stuck_clock_is_reported_behind(impl):
    """camera_info whose stamp never advances: nothing can match; the watchdog says which input lags, once per
    timeout, and good frames are answered as soon as its stamps move again."""
    rig = Rig(impl)
    frozen = BASE
    for k in range(25):
        rig.send(2, frozen, ('frozen', k))
        rig.frame(k, BASE + 5 * S + rig.now, skip=(2,))
    assert rig.out == [] and rig.recoveries
    assert 'behind_camera_info' in rig.recoveries[0].causes and 'behind' in rig.recoveries[0].reason
    assert len(rig.recoveries) <= 25 * 0.1 / TIMEOUT_S + 1
    k0 = 100
    rig.frame(k0, BASE + 5 * S + rig.now)
    assert rig.answered(k0)


def test_good_traffic_with_jitter_and_pauses_never_triggers(impl):
    rig = Rig(impl)
    for k in range(200):
        jitter = (k * 7919) % 20 * MS                 # 0..19 ms between the three stamps, under the slop
        t = BASE + rig.now
        for i, dt in enumerate((0, jitter, jitter // 2)):
            rig.send(i, t + dt, (NAMES[i], k))
        rig.now += 33 * MS
        if k % 50 == 49:
            rig.now += 5 * S                           # the executor was busy (a long frame): a pause, no input
    assert len(rig.out) == 200 and rig.recoveries == []


def test_a_silent_input_is_not_a_stuck_synchroniser(impl):
    rig = Rig(impl)
    for k in range(50):
        rig.frame(k, BASE + rig.now, skip=(2,))      # no camera_info at all: missing_camera_info, not this
    assert rig.recoveries == [] and rig.out == []


def test_diagnostics_say_inputs_arrive_and_count_recoveries():
    """/diagnostics no longer says "no input" while inputs arrive but nothing synchronises, and carries the
    recoveries as sync_recoveries.<cause>."""
    pytest.importorskip('diagnostic_msgs')
    from string_perception.ros.diagnostics import NodeStats, diagnostic_array
    clock = iter([0.0, 1.0, 2.0, 3.0])
    stats = NodeStats(clock=lambda: next(clock))

    def status():
        st = diagnostic_array(stats.snapshot(), _stamp(), node_name='n', hardware_id='x', provider='cpu').status[0]
        return st.level, st.message, {kv.key: kv.value for kv in st.values}

    for name in NAMES:
        stats.count_input(name)
    level, message, values = status()
    assert level == b'\x01' and message == 'inputs arrive, none synchronised yet'
    stats.count_synced()
    stats.frame_done(10.0, 5.0)
    status()                                             # one good period
    for name in NAMES:
        stats.count_input(name)
    stats.sync_recovered('ahead_camera_info')
    level, message, values = status()
    assert message == 'inputs arrive, none synchronised in the last period'
    assert values['sync_recoveries.ahead_camera_info'] == '1'


def _stamp():
    from builtin_interfaces.msg import Time
    return Time(sec=1)

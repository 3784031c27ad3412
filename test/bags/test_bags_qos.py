"""Recorded QoS is replayed: the recorder stores each topic's offered QoS in the bag's metadata (as ``ros2 bag
record``), the player offers a latched (transient-local) topic latched again, so a subscriber that joins after the
message was played still receives it; volatile topics stay volatile."""
import time

import pytest

from test.support.ros_helpers import ros_skip_reason

pytestmark = pytest.mark.skipif(ros_skip_reason('std_msgs') is not None, reason='rclpy / std_msgs missing')


def _qos(durability: str, depth: int):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                      durability=getattr(DurabilityPolicy, durability))


def test_playback_qos_latches_only_what_every_publisher_latched():
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy
    from string_perception.bags.ros_io import bag_qos, playback_qos
    latched1, latched3, volatile = bag_qos(_qos('TRANSIENT_LOCAL', 1)), bag_qos(_qos('TRANSIENT_LOCAL', 3)), \
        bag_qos(_qos('VOLATILE', 7))
    q = playback_qos([latched1, latched3], 'reliable', 100)
    assert (q.durability, q.depth, q.reliability) == (DurabilityPolicy.TRANSIENT_LOCAL, 3, ReliabilityPolicy.RELIABLE)
    for offered in ([], [volatile], [latched1, volatile]):      # none stored (older bags), volatile, mixed
        q = playback_qos(offered, 'best_effort', 100)
        assert (q.durability, q.depth, q.reliability) == (DurabilityPolicy.VOLATILE, 100, ReliabilityPolicy.BEST_EFFORT)


def test_writer_stores_the_offered_qos_and_the_reader_reads_it_back(tmp_path):
    from rosbags.interfaces import QosDurability
    from string_perception.bags.reader import open_bag
    from string_perception.bags.ros_io import bag_qos
    from string_perception.bags.writer import BagWriter
    with BagWriter(tmp_path / 'bag') as bag:
        bag.connection('/latched', 'std_msgs/msg/String', offered_qos=[bag_qos(_qos('TRANSIENT_LOCAL', 2))])
        bag.connection('/plain', 'std_msgs/msg/String')
    reader = open_bag(tmp_path / 'bag')
    try:
        got = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
    finally:
        reader.close()
    assert [(q.durability, q.depth) for q in got['/latched']] == [(QosDurability.TRANSIENT_LOCAL, 2)]
    assert got['/plain'] == []


@pytest.mark.parametrize('stored, opens', [
    ('- history: [unclosed', False),                    # not YAML
    ('nonsense', False),                                # YAML, not a list of profiles
    ('- {history: 1}', False),                          # a profile without depth / deadline / ...
    ('', True),                                         # nothing stored (rosbag2 before Humble): plays volatile
])
def test_malformed_offered_qos_metadata_is_a_clear_bag_error(tmp_path, stored, opens):
    import yaml
    from rclpy.qos import DurabilityPolicy
    from string_perception.bags.reader import BagError, open_bag
    from string_perception.bags.ros_io import bag_qos, playback_qos
    from string_perception.bags.writer import BagWriter
    with BagWriter(tmp_path / 'bag') as bag:
        bag.connection('/latched', 'std_msgs/msg/String', offered_qos=[bag_qos(_qos('TRANSIENT_LOCAL', 2))])
    meta_path = tmp_path / 'bag' / 'metadata.yaml'
    meta = yaml.safe_load(meta_path.read_text())
    meta['rosbag2_bagfile_information']['topics_with_message_count'][0]['topic_metadata'][
        'offered_qos_profiles'] = stored
    meta_path.write_text(yaml.safe_dump(meta))
    if not opens:
        with pytest.raises(BagError, match='cannot open the bag'):
            open_bag(tmp_path / 'bag')
        return
    reader = open_bag(tmp_path / 'bag')
    try:
        offered = reader.connections[0].ext.offered_qos_profiles
    finally:
        reader.close()
    assert offered == [] and playback_qos(offered).durability == DurabilityPolicy.VOLATILE


@pytest.mark.ros
def test_record_then_play_keeps_a_latched_topic_latched(tmp_path, monkeypatch):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.bags.play import BagPlayer
    from string_perception.bags.record import BagRecorder
    from string_perception.bags.writer import BagWriter
    from string_perception.dds_env import merged_dds_env

    def spin_until(executor, done, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        return done()

    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(args=None, context=ctx)
        executor = SingleThreadedExecutor(context=ctx)
        nodes = [rclpy.create_node(name, context=ctx) for name in ('talker', 'recorder', 'player', 'late')]
        talker, recorder, player, late = nodes
        for n in nodes:
            executor.add_node(n)
        try:
            # a latched and a volatile publisher; each publishes once before anything records
            pubs = {'/latched': talker.create_publisher(String, '/latched', _qos('TRANSIENT_LOCAL', 1)),
                    '/plain': talker.create_publisher(String, '/plain', _qos('VOLATILE', 10))}
            pubs['/latched'].publish(String(data='label map'))
            with BagWriter(tmp_path / 'bag') as writer:
                rec = BagRecorder(recorder, writer, ['/latched', '/plain'])
                assert spin_until(executor, lambda: not rec.discover() and not rec.missing())
                assert spin_until(executor, lambda: rec.received == 1)       # the latched sample, recorded late
                assert spin_until(executor, lambda: all(p.get_subscription_count() for p in pubs.values()))
                pubs['/plain'].publish(String(data='frame'))
                assert spin_until(executor, lambda: rec.received == 2)
                for s in rec.subscriptions.values():
                    recorder.destroy_subscription(s)
            for p in pubs.values():
                talker.destroy_publisher(p)

            bag_player = BagPlayer(player, tmp_path / 'bag', rate=100.0)
            assert bag_player.play() == 2
            got = {'/latched': [], '/plain': []}
            for topic, durability in (('/latched', 'TRANSIENT_LOCAL'), ('/plain', 'VOLATILE')):   # join after the play
                late.create_subscription(String, topic, lambda m, t=topic: got[t].append(m.data), _qos(durability, 10))
            assert spin_until(executor, lambda: got['/latched'] == ['label map']), got
            # the volatile topic is matched (a compatible subscriber) but keeps nothing for late joiners
            assert spin_until(executor, lambda: bag_player.publishers['/plain'].get_subscription_count() == 1)
            spin_until(executor, lambda: False, timeout=1.0)
            assert got == {'/latched': ['label map'], '/plain': []}
        finally:
            executor.shutdown()
            for n in nodes:
                n.destroy_node()
            rclpy.try_shutdown(context=ctx)

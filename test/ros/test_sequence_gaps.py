"""Frames a subscription never received, from the publishers' sequence numbers (ros/sequence_gaps.py)."""
import time

import pytest

from string_perception.ros.sequence_gaps import SequenceGaps


def info(seq, gid=b'A'):
    return {'publication_sequence_number': seq, 'publisher_gid': {'implementation_identifier': 'x', 'data': gid}}


def test_gaps_per_publisher_known_answers():
    g = SequenceGaps()
    assert g.missed(info(5)) == 0                    # first message heard: what came before is not ours to count
    assert g.missed(info(6)) == 0
    assert g.missed(info(10)) == 3                   # 7, 8, 9 never arrived
    assert g.missed(info(1, b'B')) == 0              # another publisher has its own numbering
    assert g.missed(info(3, b'B')) == 1
    assert g.missed(info(11)) == 0
    assert g.missed(info(2)) == 0                    # numbers went back: the publisher restarted
    assert g.missed(info(4)) == 1


def test_no_sequence_number_counts_nothing_and_no_gid_is_one_publisher():
    g = SequenceGaps()
    for i in (None, {}, {'publication_sequence_number': None}, {'publication_sequence_number': 0}):
        assert g.missed(i) == 0
    assert g.missed({'publication_sequence_number': 3}) == 0
    assert g.missed({'publication_sequence_number': 7, 'publisher_gid': None}) == 3


def test_without_publisher_gid_numbers_are_per_topic_and_counted_only_with_one_publisher():
    """Jazzy's rclpy MessageInfo has no publisher_gid: the numbers are keyed per topic, and counted only while the
    topic has one publisher (two publishers' numbers interleaved would read as gaps)."""
    def jazzy(seq):           # the keys rclpy 7 (Jazzy) passes, no publisher_gid
        return {'source_timestamp': 1, 'received_timestamp': 2, 'publication_sequence_number': seq,
                'reception_sequence_number': None}
    publishers = [1]
    g = SequenceGaps(publisher_count=lambda: publishers[0])
    assert g.keyed_by == ''
    assert g.missed(jazzy(5)) == 0 and g.keyed_by == 'topic'
    assert g.missed(jazzy(9)) == 3                   # one publisher: 6, 7, 8 never arrived
    publishers[0] = 2                                # a second publisher starts, numbering from 1
    assert [g.missed(jazzy(n)) for n in (10, 1, 11, 2, 14)] == [0, 0, 0, 0, 0]   # mixed numbers count nothing
    publishers[0] = 1                                # back to one: its next number starts afresh
    assert g.missed(jazzy(20)) == 0 and g.missed(jazzy(23)) == 2

    def never():
        raise AssertionError('publisher_count asked although the message has a publisher_gid')
    g = SequenceGaps(publisher_count=never)
    assert g.missed(info(1)) == 0 and g.missed(info(4)) == 2 and g.keyed_by == 'publisher'


def test_publishers_are_forgotten_least_recent_first():
    g = SequenceGaps(max_publishers=2)
    g.missed(info(1, b'A')), g.missed(info(1, b'B'))
    g.missed(info(2, b'A'))                          # A heard again: B is now the least recent
    g.missed(info(1, b'C'))                          # forgets B
    assert g.missed(info(5, b'A')) == 2
    assert g.missed(info(5, b'B')) == 0              # B forgotten: a first message again


@pytest.mark.ros
def test_messages_overwritten_in_a_depth_1_queue_are_counted_over_real_dds(monkeypatch):
    """rclpy really passes the MessageInfo to a two-parameter callback and Fast DDS numbers the samples: 20
    messages published while nobody spins, then a depth-1 subscription takes only the newest: 19 counted."""
    rclpy = pytest.importorskip('rclpy')
    from rclpy.executors import SingleThreadedExecutor
    from test.support.ros_helpers import reserved_domain_id
    from std_msgs.msg import String
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.sequence_gaps import SequencedSubscriber
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(context=ctx)
        try:
            node = rclpy.create_node('seq_gaps_test', context=ctx)
            gaps, got, missed = SequenceGaps(), [], []
            sub = SequencedSubscriber(node, String, 'seq_gaps', qos_profile=1,
                                      on_info=lambda i: missed.append(gaps.missed(i)))
            sub.registerCallback(got.append)
            pub = node.create_publisher(String, 'seq_gaps', 100)
            executor = SingleThreadedExecutor(context=ctx)
            executor.add_node(node)
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:     # until discovery: one message gets through
                pub.publish(String(data='first'))
                executor.spin_once(timeout_sec=0.1)
            for _ in range(5):                           # take a 'first' still in the queue
                executor.spin_once(timeout_sec=0.05)
            before = len(got)
            for i in range(20):
                pub.publish(String(data=str(i)))
            time.sleep(0.3)                              # delivered into the depth-1 history, not yet taken
            for _ in range(10):
                executor.spin_once(timeout_sec=0.05)
            assert [m.data for m in got[before:]] == ['19'] and missed[before:] == [19], (got, missed)
        finally:
            rclpy.shutdown(context=ctx)

"""The rosbag2 format our bags are written in: metadata version 9 with the fields ``ros2 bag`` writes on Jazzy /
Kilted, each topic's RIHS01 type hash in ``metadata.yaml`` and in the MCAP channel metadata (``topic_type_hash``,
as rosbag2's MCAP plugin writes it), equal to the hash rosidl computes for the type (``share/<pkg>/msg/<T>.json``)
and to the one rclpy reports for a publisher of that type; bags written as version 8 still read.
"""
import json
import os
import struct
import sys
from pathlib import Path

import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.metadata import parse_qos

from test.support.bag_helpers import frames, write_bag
from test.support.ros_helpers import reserved_domain_id, ros_skip_reason
from string_perception.bags.reader import open_bag
from string_perception.bags.splitting import SplitPolicy
from string_perception.bags.typestore import make_typestore
from string_perception.bags.writer import BAG_VERSION, BagWriter, read_metadata

REPO = Path(__file__).resolve().parents[2]
# rosbag2_storage's yaml.hpp (BagMetadata, TopicMetadata encode for version 9)
BAG_FIELDS = {'version', 'storage_identifier', 'duration', 'starting_time', 'message_count',
              'topics_with_message_count', 'compression_format', 'compression_mode', 'relative_file_paths', 'files',
              'custom_data', 'ros_distro'}
TOPIC_FIELDS = {'name', 'type', 'serialization_format', 'offered_qos_profiles', 'type_description_hash'}
QOS_FIELDS = {'history', 'depth', 'reliability', 'durability', 'deadline', 'lifespan', 'liveliness',
              'liveliness_lease_duration', 'avoid_ros_namespace_conventions'}


def _mcap_channels(path: Path) -> dict[str, dict[str, str]]:
    """topic -> channel metadata, from the Channel records (op 0x04) at the top level of an MCAP file (its summary
    section repeats every channel; records inside chunks are skipped)."""
    data = path.read_bytes()
    assert data[:8] == b'\x89MCAP0\r\n'

    def string(at):
        (n,) = struct.unpack_from('<I', data, at)
        return data[at + 4:at + 4 + n].decode(), at + 4 + n

    out, pos = {}, 8
    while pos < len(data) - 8:
        op, length = data[pos], struct.unpack_from('<Q', data, pos + 1)[0]
        body = pos + 9
        if op == 0x02:                                   # footer
            break
        if op == 0x04:
            topic, at = string(body + 4)                 # after channel id and schema id (uint16 each)
            _, at = string(at)                           # message encoding
            (nbytes,) = struct.unpack_from('<I', data, at)
            at, end, meta = at + 4, at + 4 + nbytes, {}
            while at < end:
                key, at = string(at)
                meta[key], at = string(at)
            out[topic] = meta
        pos = body + length
    return out


def _rosidl_hash(msgtype: str) -> str:
    """The RIHS01 hash rosidl generated for ``pkg/msg/Type`` (``share/pkg/msg/Type.json`` of the installed
    interface package, under a ROS install's prefixes or the venv's, where the ROS wheels put them)."""
    pkg, _, name = msgtype.split('/')
    prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p] + [sys.prefix]
    (path, *_) = [f for p in prefixes if (f := Path(p) / 'share' / pkg / 'msg' / f'{name}.json').is_file()]
    desc = json.loads(path.read_text())
    hashes = {h['type_name']: h['hash_string'] for h in desc['type_hashes']}
    return hashes[msgtype]


@pytest.fixture(scope='module')
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp('format')
    fs = frames(2)
    return {storage: write_bag(root / storage, fs, storage=storage) for storage in ('sqlite3', 'mcap')}


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_metadata_is_version_9_with_the_fields_ros2_bag_writes(bags, storage):
    meta = read_metadata(bags[storage])
    assert BAG_VERSION == 9 and meta['version'] == 9
    assert set(meta) == BAG_FIELDS
    assert meta['storage_identifier'] == storage
    typestore = make_typestore()
    assert len(meta['topics_with_message_count']) == 4           # colour, depth, CameraInfo, ground truth
    for entry in meta['topics_with_message_count']:
        topic = entry['topic_metadata']
        assert set(topic) == TOPIC_FIELDS
        assert topic['type_description_hash'] == typestore.hash_rihs01(topic['type'])
        assert topic['type_description_hash'].startswith('RIHS01_') and len(topic['type_description_hash']) == 71
        assert isinstance(topic['offered_qos_profiles'], list)   # version 9: a YAML list, no longer a string


def test_version_9_qos_is_a_list_of_named_policies(tmp_path):
    """A recorded topic's offered QoS (version 9 writes policy names, 8 wrote numbers) reads back as it was."""
    from rosbags.typesys.stores.ros2_kilted import std_msgs__msg__String as String
    qos = parse_qos([{'history': 'keep_last', 'depth': 1, 'reliability': 'reliable',
                      'durability': 'transient_local', 'deadline': {'sec': 0, 'nsec': 0},
                      'lifespan': {'sec': 0, 'nsec': 0}, 'liveliness': 'automatic',
                      'liveliness_lease_duration': {'sec': 0, 'nsec': 0},
                      'avoid_ros_namespace_conventions': False}])
    with BagWriter(tmp_path / 'latched', storage='mcap') as bag:
        bag.connection('/latched', 'std_msgs/msg/String', offered_qos=qos)
        bag.write('/latched', String(data='x'), 1)
    (entry,) = read_metadata(tmp_path / 'latched')['topics_with_message_count']
    (profile,) = entry['topic_metadata']['offered_qos_profiles']
    assert set(profile) == QOS_FIELDS
    assert (profile['history'], profile['reliability'], profile['durability'], profile['liveliness']) == (
        'keep_last', 'reliable', 'transient_local', 'automatic')
    reader = open_bag(tmp_path / 'latched')
    try:
        (conn,) = reader.connections
        assert conn.ext.offered_qos_profiles == qos
    finally:
        reader.close()


def test_mcap_channels_carry_the_topic_type_hash(bags):
    meta = read_metadata(bags['mcap'])
    want = {e['topic_metadata']['name']: e['topic_metadata']['type_description_hash']
            for e in meta['topics_with_message_count']}
    (name,) = meta['relative_file_paths']
    channels = _mcap_channels(bags['mcap'] / name)
    assert set(channels) == set(want)
    for topic, channel in channels.items():
        assert set(channel) == {'offered_qos_profiles', 'topic_type_hash'}
        assert channel['topic_type_hash'] == want[topic]


def test_split_bags_are_version_9_and_every_file_carries_the_hashes(tmp_path):
    bag = write_bag(tmp_path / 'split', frames(3), storage='mcap', split=SplitPolicy(max_duration_s=0.03))
    meta = read_metadata(bag)
    assert meta['version'] == 9 and len(meta['relative_file_paths']) >= 2
    want = {e['topic_metadata']['name']: e['topic_metadata']['type_description_hash']
            for e in meta['topics_with_message_count']}
    for name in meta['relative_file_paths']:
        hashes = {t: c['topic_type_hash'] for t, c in _mcap_channels(bag / name).items()}
        assert hashes == {t: want[t] for t in hashes} and hashes


@pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None, reason=str(ros_skip_reason('vision_msgs')))
def test_the_hashes_are_the_ones_rosidl_generated(bags):
    meta = read_metadata(bags['mcap'])
    types = {e['topic_metadata']['type']: e['topic_metadata']['type_description_hash']
             for e in meta['topics_with_message_count']}
    assert 'vision_msgs/msg/Detection3DArray' in types and 'sensor_msgs/msg/Image' in types
    for msgtype, rihs01 in types.items():
        assert rihs01 == _rosidl_hash(msgtype), msgtype


@pytest.mark.ros
@pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None, reason=str(ros_skip_reason('vision_msgs')))
def test_the_hashes_are_the_ones_rclpy_reports_for_publishers(bags, monkeypatch):
    """A publisher of each type in the bag: the type hash rclpy reports for it on the ROS graph is the bag's."""
    import rclpy
    from string_perception.bags.ros_io import message_class
    from string_perception.dds_env import merged_dds_env
    meta = read_metadata(bags['sqlite3'])
    types = {e['topic_metadata']['type']: e['topic_metadata']['type_description_hash']
             for e in meta['topics_with_message_count']}
    with reserved_domain_id() as dom:
        for k, v in merged_dds_env(dom).items():
            monkeypatch.setenv(k, v)
        context = rclpy.Context()
        rclpy.init(context=context)
        try:
            node = rclpy.create_node('bag_format_hashes', context=context)
            for i, msgtype in enumerate(types):
                node.create_publisher(message_class(msgtype), f'/hash_{i}', 1)
            for i, (msgtype, rihs01) in enumerate(types.items()):
                (info,) = node.get_publishers_info_by_topic(f'/hash_{i}')
                assert str(info.topic_type_hash) == rihs01, msgtype
            node.destroy_node()
        finally:
            rclpy.try_shutdown(context=context)


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_version_8_bags_still_read(tmp_path, storage):
    """A bag written as version 8 (as we wrote them before; the bundled recording is one) opens and reads."""
    from rosbags.typesys.stores.ros2_kilted import std_msgs__msg__String as String
    typestore = make_typestore()
    with Writer(tmp_path / 'v8', version=8, storage_plugin=StoragePlugin[storage.upper()]) as w:
        conn = w.add_connection('/s', 'std_msgs/msg/String', typestore=typestore)
        w.write(conn, 5, typestore.serialize_cdr(String(data='old'), 'std_msgs/msg/String'))
    assert read_metadata(tmp_path / 'v8')['version'] == 8
    reader = open_bag(tmp_path / 'v8')
    try:
        ((conn, t, raw),) = list(reader.messages())
        assert (conn.topic, t, typestore.deserialize_cdr(raw, conn.msgtype).data) == ('/s', 5, 'old')
    finally:
        reader.close()
    sample = REPO / 'data' / 'sample_recording'
    assert read_metadata(sample)['version'] == 8
    reader = open_bag(sample)
    try:
        assert next(iter(reader.messages())) is not None
    finally:
        reader.close()

"""Split recordings (``ros2 bag record --max-bag-size / --max-bag-duration``): one bag folder, several storage
files named as rosbag2 names them, one metadata.yaml; the bag reads back as exactly the messages and frames of the
same recording in one file, every file but the last is full, and each file can be read alone."""
import math

import numpy as np
import pytest
import yaml

from test.support.bag_helpers import FRAME_ID, PERIOD_NS, START_NS, frames, write_bag
from string_perception.bags import messages as M
from string_perception.bags.reader import BagFrameReader, open_bag
from string_perception.bags.record import main as record_main
from string_perception.bags.splitting import SplitPolicy, merge_part_metadata
from string_perception.bags.writer import BagWriter

SUFFIX = {'sqlite3': '.db3', 'mcap': '.mcap'}


@pytest.fixture(scope='module')
def fs():
    return frames(4)


def _metadata(bag):
    return yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']


def _messages(path):
    """(topic, type, log time, bytes) of every message, in the reader's order (log time)."""
    reader = open_bag(path)
    try:
        return [(c.topic, c.msgtype, t, bytes(raw)) for c, t, raw in reader.messages()]
    finally:
        reader.close()


def _topic_counts(meta):
    return {e['topic_metadata']['name']: e['message_count'] for e in meta['topics_with_message_count']}


@pytest.mark.parametrize('storage,compression', [('sqlite3', 'none'), ('mcap', 'none'), ('sqlite3', 'message'),
                                                 ('mcap', 'file')])
def test_a_size_split_bag_reads_back_as_the_same_recording_in_one_file(tmp_path, fs, storage, compression):
    max_bytes = 50_000                       # a frame is ~62 kB of messages (96x128 rgb8 + 16UC1 + info + boxes)
    one = write_bag(tmp_path / 'one', fs, storage=storage, compression=compression)
    split = write_bag(tmp_path / 'split', fs, storage=storage, compression=compression,
                      split=SplitPolicy(max_bytes=max_bytes))
    meta, meta_one = _metadata(split), _metadata(one)
    n = len(meta['relative_file_paths'])
    names = [f'split_{i}{SUFFIX[storage]}' + ('.zstd' if compression == 'file' else '') for i in range(n)]
    assert n >= 4 and meta['relative_file_paths'] == names == [f['path'] for f in meta['files']]
    assert sorted(p.name for p in split.iterdir()) == sorted(names + ['metadata.yaml'])    # no leftover folders
    # sorted by log time: rosbags reads the files one after the other, each in log-time order, and the helper's
    # log times step back within a frame (colour +5 ms is written before depth +4 ms), across a file boundary too
    assert sorted(_messages(split), key=lambda m: m[2]) == sorted(_messages(one), key=lambda m: m[2])
    for key in ('message_count', 'starting_time', 'duration', 'storage_identifier', 'compression_mode'):
        assert meta[key] == meta_one[key], key
    assert _topic_counts(meta) == _topic_counts(meta_one)
    assert sum(f['message_count'] for f in meta['files']) == meta['message_count'] == 4 * len(fs)
    with BagFrameReader(split) as a, BagFrameReader(one) as b:
        for fa, fb in zip(a, b, strict=True):
            assert fa.stamp_ns == fb.stamp_ns
            np.testing.assert_array_equal(fa.rgb, fb.rgb)
            np.testing.assert_array_equal(fa.depth, fb.depth)
    if compression == 'none':                # each file alone: every one but the last is full, and only just
        for i, name in enumerate(names):
            sizes = [len(m[3]) for m in _messages(split / name)]
            assert len(sizes) == meta['files'][i]['message_count']
            if i < n - 1:
                assert max_bytes <= sum(sizes) < max_bytes + max(sizes), (name, sizes)


def test_a_duration_split_starts_a_file_at_the_first_message_past_the_limit(tmp_path, fs):
    # log times per frame (ms after its stamp): colour +5, depth +4, info +3, ground truth +6, frames 33.3 ms
    # apart. The first file starts with frame 0's colour (+5 ms); frame 2's colour (66.7 + 5 ms) is the first
    # message 50 ms or more after it, so frames 0-1 and 2-3 share a file each.
    split = write_bag(tmp_path / 'bag', fs, split=SplitPolicy(max_duration_s=0.05))
    meta = _metadata(split)
    assert [f['message_count'] for f in meta['files']] == [8, 8]
    assert [f['starting_time']['nanoseconds_since_epoch'] for f in meta['files']] == \
        [START_NS + 3_000_000, START_NS + 2 * PERIOD_NS + 3_000_000]
    assert all(f['duration']['nanoseconds'] == PERIOD_NS + 3_000_000 for f in meta['files'])
    assert len(list(BagFrameReader(split))) == len(fs)


def test_every_file_holds_the_topics_known_when_it_opened(tmp_path, fs):
    info = M.camera_info_msg(fs[0].K, 96, 128, START_NS, FRAME_ID)
    with BagWriter(tmp_path / 'bag', split=SplitPolicy(max_duration_s=1.0)) as bag:
        bag.write('/a', info, START_NS)
        bag.write('/a', info, START_NS + 10**9)          # file 1
        bag.write('/b', info, START_NS + 11 * 10**8)     # new topic, in file 1
        bag.write('/a', info, START_NS + 22 * 10**8)     # file 2: both connections, no /b message
    assert bag.storage_files == ['bag_0.db3', 'bag_1.db3', 'bag_2.db3'] and bag.counts == {'/a': 3, '/b': 1}
    topics = []
    for name in bag.storage_files:
        reader = open_bag(tmp_path / 'bag' / name)
        topics.append([c.topic for c in reader.connections])
        reader.close()
    assert topics == [['/a'], ['/a', '/b'], ['/a', '/b']]
    meta = _metadata(tmp_path / 'bag')
    assert _topic_counts(meta) == {'/a': 3, '/b': 1} and meta['message_count'] == 4
    assert meta['duration']['nanoseconds'] == 22 * 10**8
    assert [t for _, _, t, _ in _messages(tmp_path / 'bag')] == [START_NS + k * 10**8 for k in (0, 10, 11, 22)]


def test_an_exception_keeps_the_files_finished_before_it_readable(tmp_path, fs):
    info = M.camera_info_msg(fs[0].K, 96, 128, START_NS, FRAME_ID)
    with pytest.raises(RuntimeError, match='camera unplugged'):
        with BagWriter(tmp_path / 'bag', split=SplitPolicy(max_duration_s=1.0)) as bag:
            bag.write('/a', info, START_NS)
            bag.write('/a', info, START_NS + 5 * 10**8)
            bag.write('/a', info, START_NS + 10**9)      # file 1, aborted below
            raise RuntimeError('camera unplugged')
    meta = _metadata(tmp_path / 'bag')
    assert meta['relative_file_paths'] == ['bag_0.db3'] and meta['message_count'] == 2
    assert [t for _, _, t, _ in _messages(tmp_path / 'bag')] == [START_NS, START_NS + 5 * 10**8]
    assert (tmp_path / 'bag' / 'bag_1').is_dir()        # the aborted file is left as it is, not deleted


def test_without_a_policy_the_bag_is_one_file_named_as_before(tmp_path, fs):
    bag = write_bag(tmp_path / 'plain', fs[:1], storage='mcap')
    assert sorted(p.name for p in bag.iterdir()) == ['metadata.yaml', 'plain.mcap']
    with pytest.raises(Exception, match='exists already'):
        BagWriter(bag, split=SplitPolicy(max_bytes=1))
    with pytest.raises(Exception, match='exists already'):
        BagWriter(bag)


@pytest.mark.parametrize('kwargs,match', [({'max_bytes': -1}, 'max_bytes'), ({'max_bytes': 1.5}, 'max_bytes'),
                                          ({'max_bytes': True}, 'max_bytes'),
                                          ({'max_duration_s': -0.1}, 'max_duration_s'),
                                          ({'max_duration_s': math.nan}, 'max_duration_s'),
                                          ({'max_duration_s': math.inf}, 'max_duration_s')])
def test_policy_rejects_bad_limits(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SplitPolicy(**kwargs)


def test_policy_known_answers():
    assert not SplitPolicy().enabled and not SplitPolicy().due(10**6, 10**12, 0, 10**18)
    size = SplitPolicy(max_bytes=100)
    assert size.enabled and not size.due(0, 500, 0, 0)          # an empty file takes any message
    assert [size.due(3, b, 0, 0) for b in (99, 100, 101)] == [False, True, True]
    dur = SplitPolicy(max_duration_s=2.0)
    assert [dur.due(1, 0, 10**9, t) for t in (10**9, 3 * 10**9 - 1, 3 * 10**9)] == [False, False, True]


def _file(path, start, duration, count, topics):
    return {'version': 8, 'storage_identifier': 'sqlite3', 'relative_file_paths': [path],
            'starting_time': {'nanoseconds_since_epoch': start}, 'duration': {'nanoseconds': duration},
            'message_count': count, 'compression_format': '', 'compression_mode': '', 'custom_data': {'k': 'v'},
            'files': [{'path': path, 'starting_time': {'nanoseconds_since_epoch': start},
                       'duration': {'nanoseconds': duration}, 'message_count': count}],
            'topics_with_message_count': [{'topic_metadata': {'name': n, 'type': 'std_msgs/msg/Empty'},
                                           'message_count': c} for n, c in topics]}


def test_merged_metadata_known_answer():
    parts = [_file('b_0.db3', 100, 50, 3, [('/x', 3)]),
             _file('b_1.db3', 2**63 - 1, 0, 0, [('/x', 0), ('/y', 0)]),     # rosbags' placeholder for no message
             _file('b_2.db3', 400, 20, 2, [('/x', 1), ('/y', 1)])]
    before = yaml.safe_dump(parts)
    merged = merge_part_metadata(parts)
    assert yaml.safe_dump(parts) == before                                     # the parts are not changed
    assert merged['relative_file_paths'] == ['b_0.db3', 'b_1.db3', 'b_2.db3']
    assert [f['message_count'] for f in merged['files']] == [3, 0, 2] and merged['message_count'] == 5
    assert merged['starting_time'] == {'nanoseconds_since_epoch': 100} and merged['duration'] == {'nanoseconds': 320}
    assert merged['topics_with_message_count'] == [
        {'topic_metadata': {'name': '/x', 'type': 'std_msgs/msg/Empty'}, 'message_count': 4},
        {'topic_metadata': {'name': '/y', 'type': 'std_msgs/msg/Empty'}, 'message_count': 1}]
    assert (merged['version'], merged['custom_data']) == (8, {'k': 'v'})
    with pytest.raises(ValueError, match='at least one'):
        merge_part_metadata([])


@pytest.mark.parametrize('flag,value', [('--max-bag-size', '-5'), ('--max-bag-duration', 'nan'),
                                        ('-d', '-1')])
def test_recorder_rejects_bad_split_limits_before_it_starts(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        record_main(['--all', '-o', str(tmp_path / 'bag'), flag, value])
    assert e.value.code == 2 and 'max_' in capsys.readouterr().err
    assert not (tmp_path / 'bag').exists()

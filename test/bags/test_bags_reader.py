"""Bag reading: synchronised frames from raw / compressed colour and 16UC1 / 32FC1 depth in sqlite3 and mcap;
clear reasons for frames that cannot be used (no depth / CameraInfo within the slop, unsupported encodings)
while the others are still read; clear errors for missing, truncated and corrupt bags."""
import shutil

import numpy as np
import pytest

from test.support.bag_helpers import FRAME_ID, START_NS, W, frames, ground_truth, write_bag
from string_perception.bags.reader import BagError, BagFrameReader, header_of
from string_perception.bags.typestore import make_typestore
from string_perception.bags.writer import BagWriter
from string_perception.scenes import CLASS_NAMES


@pytest.fixture(scope='module')
def fs():
    return frames(4)


@pytest.mark.parametrize('storage,compression', [('sqlite3', 'none'), ('mcap', 'none'), ('sqlite3', 'file'),
                                                 ('mcap', 'message')])
def test_raw_colour_and_16uc1_depth_round_trip_exactly(tmp_path, fs, storage, compression):
    bag = write_bag(tmp_path / 'bag', fs, storage=storage, compression=compression)
    if compression == 'file':                    # zstd-compressed storage file; the reader decompresses it
        assert [p.suffix for p in bag.glob('*.zstd')] == ['.zstd']
    with BagFrameReader(bag) as reader:
        got = list(reader)
        report = reader.report
    assert report.storage == storage and report.yielded == len(fs) and not report.skipped
    for i, (f, g) in enumerate(zip(fs, got)):
        assert (g.index, g.stamp_ns, g.frame_id, g.encoding, g.depth_encoding) == (i, START_NS + i * 33_333_333,
                                                                                     FRAME_ID, 'rgb8', '16UC1')
        np.testing.assert_array_equal(g.rgb, f.rgb)
        np.testing.assert_array_equal(g.depth, f.depth_mm)
        np.testing.assert_array_equal(g.K, f.K)
        assert g.info_hw == f.rgb.shape[:2]
        gt = ground_truth(f)
        assert g.ground_truth['labels'].tolist() == gt['labels'].tolist()
        np.testing.assert_allclose(g.ground_truth['params'], gt['params'], atol=1e-12)
        assert g.ground_truth['class_names'] == [CLASS_NAMES[k] for k in f.labels]


def test_writer_refuses_an_unknown_storage_or_compression(tmp_path):
    with pytest.raises(ValueError, match='compression must be one of none, file, message'):
        BagWriter(tmp_path / 'a', compression='lz4')
    with pytest.raises(ValueError, match='storage must be one of'):
        BagWriter(tmp_path / 'b', storage='bag')


def test_compressed_png_colour_and_32fc1_depth(tmp_path, fs):
    bag = write_bag(tmp_path / 'bag', fs, colour='png', depth='32FC1')
    with BagFrameReader(bag) as reader:
        got = list(reader)
        assert reader.topics['image'] == '/camera/color/image_raw/compressed'
    assert len(got) == len(fs)
    for f, g in zip(fs, got):
        assert (g.encoding, g.depth_encoding, g.depth.dtype) == ('rgb8', '32FC1', np.float32)
        np.testing.assert_array_equal(g.rgb, f.rgb)                        # PNG is lossless
        np.testing.assert_allclose(g.depth, f.depth_mm / 1000.0, rtol=1e-6)


@pytest.mark.parametrize('depth', ['16UC1', '32FC1'])
def test_compressed_depth_topics_are_found_and_decoded(tmp_path, fs, depth):
    """image_transport's compressedDepth on /camera/depth/image_raw/compressedDepth (lossless for 16UC1, one
    inverse-depth quantisation step for 32FC1; 0 mm = invalid becomes NaN)."""
    bag = write_bag(tmp_path / 'bag', fs, colour='jpeg', depth=depth, depth_transport='compressedDepth')
    with BagFrameReader(bag) as reader:
        got = list(reader)
        assert reader.topics['depth'] == '/camera/depth/image_raw/compressedDepth'
    assert len(got) == len(fs)
    for f, g in zip(fs, got):
        assert g.depth_encoding == depth
        if depth == '16UC1':
            np.testing.assert_array_equal(g.depth, f.depth_mm)
        else:
            m = f.depth_mm / 1000.0
            assert np.array_equal(np.isnan(g.depth), f.depth_mm == 0)
            ok = f.depth_mm > 0
            np.testing.assert_allclose(g.depth[ok], m[ok], rtol=m.max() / 10100 * 1.01)


@pytest.mark.parametrize('style', ['names', 'ids', 'ids+label_info'])
def test_ground_truth_class_ids_old_and_new(tmp_path, fs, style):
    """Older bags name the class in class_id; new ones carry the integer id (vision_msgs), named by the bag's
    LabelInfo when it has one, else by position in the reader's class_names. All read the same."""
    bag = write_bag(tmp_path / 'bag', fs, gt_class_ids=style)
    with BagFrameReader(bag) as reader:
        got = list(reader)
        assert (reader.topics['label_info'] is not None) == (style == 'ids+label_info')
    for f, g in zip(fs, got):
        assert g.ground_truth['labels'].tolist() == [int(k) for k in f.labels]
        assert g.ground_truth['class_names'] == [CLASS_NAMES[k] for k in f.labels]
    # the LabelInfo decides, not the reader's label order: reversed labels move the indices, not the names
    with BagFrameReader(bag, class_names=CLASS_NAMES[::-1]) as reader:
        g = next(iter(reader))
    names = [CLASS_NAMES[k] for k in fs[0].labels]
    if style == 'ids':       # no LabelInfo: ids index the reader's class_names
        assert g.ground_truth['class_names'] == [CLASS_NAMES[::-1][k] for k in fs[0].labels]
    else:
        assert g.ground_truth['class_names'] == names
        assert g.ground_truth['labels'].tolist() == [CLASS_NAMES[::-1].index(n) for n in names]


def test_unmatched_depth_stamps_are_skipped_with_a_reason_and_the_rest_is_read(tmp_path, fs):
    bag = write_bag(tmp_path / 'bag', fs, depth_offset_ns=lambda i: 80_000_000 if i == 1 else 2_000_000)
    with BagFrameReader(bag) as reader:
        got = [g.index for g in reader]
        report = reader.report
    assert got == [0, 2, 3]                   # frame 1's depth is 80 ms off: beyond the node's 50 ms slop
    assert report.skipped == {'no_depth': 1}
    text = '\n'.join(report.lines())
    assert 'no depth image within the slop' in text and 'ms away' in text


def test_unknown_encodings_are_skipped_with_a_reason(tmp_path, fs):
    bag = write_bag(tmp_path / 'bag', fs, colour_encoding='yuv422')
    with BagFrameReader(bag) as reader:
        assert list(reader) == []
        assert reader.report.skipped == {'bad_colour': len(fs)}
        assert "colour image encoding 'yuv422' is not one of" in '\n'.join(reader.report.lines())
    bag = write_bag(tmp_path / 'bag2', fs, depth_encoding='8UC2')
    with BagFrameReader(bag) as reader:
        assert list(reader) == []
        assert reader.report.skipped == {'bad_depth': len(fs)}
        assert "depth image encoding '8UC2' is not one of" in '\n'.join(reader.report.lines())
    bag = write_bag(tmp_path / 'bag3', fs, depth_step=W * 2 + 2)    # rows claim 2 more bytes than the data has
    with BagFrameReader(bag) as reader:
        assert list(reader) == []
        assert reader.report.skipped == {'bad_depth': len(fs)}
        assert f'step {W * 2 + 2}' in '\n'.join(reader.report.lines())


def test_missing_camera_info_is_a_clear_error_unless_intrinsics_are_given(tmp_path, fs):
    bag = write_bag(tmp_path / 'bag', fs, camera_info=False, gt=False)
    with pytest.raises(BagError, match='no sensor_msgs/CameraInfo topic.*--intrinsics'):
        BagFrameReader(bag)
    K = fs[0].K
    with BagFrameReader(bag, intrinsics=(K[0, 0], K[1, 1], K[0, 2], K[1, 2])) as reader:
        got = list(reader)
        lines = '\n'.join(reader.report.lines())
    assert len(got) == len(fs) and all(g.ground_truth is None for g in got)
    np.testing.assert_array_equal(got[0].K, K)
    assert 'using the --intrinsics' in lines and 'no ground truth' in lines


def test_topics_are_auto_detected_when_the_defaults_are_absent(tmp_path, fs):
    from string_perception.bags.topics import CameraTopics
    bag = write_bag(tmp_path / 'bag', fs[:1])
    wanted = CameraTopics(image='/cam/rgb', depth='/cam/aligned_depth', camera_info='/cam/info')
    with BagFrameReader(bag, topics=wanted) as reader:
        assert reader.topics['image'] == '/camera/color/image_raw'
        assert len(list(reader)) == 1
        assert any('/cam/rgb is not in the bag; using /camera/color/image_raw' in n for n in reader.report.notes)


def test_missing_truncated_and_corrupt_bags_give_clear_errors(tmp_path, fs):
    with pytest.raises(BagError, match='no such bag'):
        BagFrameReader(tmp_path / 'nope')
    for storage, suffix in (('sqlite3', 'db3'), ('mcap', 'mcap')):
        good = write_bag(tmp_path / f'good_{storage}', fs, storage=storage)
        data = (good / f'good_{storage}.{suffix}').read_bytes()
        for name, payload in (('truncated', data[:len(data) // 3]), ('garbage', b'\x00not a bag\xff' * 100)):
            bad = tmp_path / f'{name}_{storage}'
            shutil.copytree(good, bad)
            (bad / f'good_{storage}.{suffix}').write_bytes(payload)
            with pytest.raises(BagError, match='cannot open the bag|truncated or corrupt') as e:
                with BagFrameReader(bad) as reader:
                    list(reader)
            assert str(bad) in str(e.value)
        missing = tmp_path / f'missing_{storage}'
        shutil.copytree(good, missing)
        (missing / f'good_{storage}.{suffix}').unlink()
        with pytest.raises(BagError, match='cannot open the bag.*missing'):
            BagFrameReader(missing)


def test_header_parser_matches_the_typestore(fs):
    from string_perception.bags import messages as M
    store = make_typestore()
    msg = M.image_msg(fs[0].rgb, 'rgb8', 1_234_567_890_123_456_789, 'some_frame')
    raw = store.serialize_cdr(msg, 'sensor_msgs/msg/Image')
    assert header_of(raw) == (1_234_567_890_123_456_789, 'some_frame')


def test_player_wait_topics_take_their_own_subscriber_counts():
    from string_perception.bags.play import parse_wait_topics
    assert parse_wait_topics(None, 2) is None
    assert parse_wait_topics(['/a', '/b=1', '/c=0'], 2) == {'/a': 2, '/b': 1, '/c': 0}
    for bad in (['/a=x'], ['/a=-1']):
        with pytest.raises(ValueError, match='wait-topics'):
            parse_wait_topics(bad, 1)

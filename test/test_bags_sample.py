"""The bundled recording data/sample_recording: regenerated bit for bit from its seed (message bytes), within the
size budget, laid out as an RGB-D driver publishes (topics, types, 30 Hz stamps), test-split seeds only, and the
vision_msgs definitions in our typestore hash like the built ROS interfaces."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from string_perception.bags.reader import BagFrameReader, open_bag
from string_perception.bags.sample import config_of, default_sample_path, sample_messages
from string_perception.bags.typestore import make_typestore

REGENERATED_FRAMES = 3          # enough to cover every topic and the timing RNG; the script's --check does all


@pytest.fixture(scope='module')
def sample():
    return default_sample_path()


def test_regeneration_is_bit_for_bit_identical(sample):
    cfg = config_of(sample)
    store = make_typestore()
    fresh = [(topic, store.serialize_cdr(msg, msg.__msgtype__).tobytes(), t)
             for topic, msg, t in sample_messages(cfg, frames=REGENERATED_FRAMES)]
    reader = open_bag(sample)
    try:
        stored = []
        for conn, t, raw in reader.messages():
            if len(stored) == len(fresh):
                break
            stored.append((conn.topic, bytes(raw), t))
    finally:
        reader.close()
    assert len(fresh) == 4 * REGENERATED_FRAMES
    assert [(a, c) for a, _, c in stored] == [(a, c) for a, _, c in fresh]
    for (topic, a, _), (_, b, _) in zip(stored, fresh):
        assert a == b, f'{topic}: regenerated message bytes differ'


def test_size_topics_types_and_30hz_stamps(sample):
    size = sum(p.stat().st_size for p in Path(sample).iterdir())
    assert size <= 5_000_000, f'{size / 1e6:.2f} MB'
    cfg = config_of(sample)
    assert cfg.seed >= 2_000_000_000 and cfg.seed + cfg.frames < 2_000_000_000 + 10**9
    reader = open_bag(sample)
    try:
        types = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    finally:
        reader.close()
    n = cfg.frames
    assert types == {'/camera/color/image_raw/compressed': ('sensor_msgs/msg/CompressedImage', n),
                     '/camera/depth/image_raw': ('sensor_msgs/msg/Image', n),
                     '/camera/color/camera_info': ('sensor_msgs/msg/CameraInfo', n),
                     '/ground_truth/detections': ('vision_msgs/msg/Detection3DArray', n)}
    with BagFrameReader(sample) as bag:
        got = list(bag)
        assert not bag.report.skipped
    stamps = np.array([f.stamp_ns for f in got])
    period = np.diff(stamps) / 1e6                                              # ms
    assert len(got) == n and np.all(np.abs(period - 1000 / 30) < 1.0), period
    assert {f.depth_encoding for f in got} == {'16UC1'} and got[0].rgb.shape == (cfg.height, cfg.width, 3)
    assert all(f.log_time_ns > f.stamp_ns for f in got)                         # received after capture
    assert sum(len(f.ground_truth['labels']) for f in got) >= n                 # objects to score


def test_vision_msgs_hashes_match_the_built_interfaces():
    share = Path(sys.prefix) / 'share' / 'vision_msgs' / 'msg'
    if not (share / 'Detection3DArray.json').is_file():
        pytest.skip('vision_msgs interfaces not built into this environment (scripts/build_interfaces.sh)')
    store = make_typestore()
    for name in ('Detection3DArray', 'Detection3D', 'LabelInfo'):
        desc = json.loads((share / f'{name}.json').read_text())
        want = next(h['hash_string'] for h in desc['type_hashes'] if h['type_name'] == f'vision_msgs/msg/{name}')
        assert store.hash_rihs01(f'vision_msgs/msg/{name}') == want, name

"""Small rosbag2 bags of generated test-split frames for the bag tests (ROS-free: rosbags only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from string_perception import box_ops
from string_perception.bags import messages as M
from string_perception.bags.topics import DEFAULT_TOPICS
from string_perception.bags.writer import BagWriter
from string_perception.scenes import CLASS_NAMES, SceneConfig, generate_frame

FIRST_SEED, H, W = 2_000_900_000, 96, 128
START_NS, PERIOD_NS = 1_700_000_000 * 10**9, 33_333_333
FRAME_ID = 'camera_color_optical_frame'


def frames(n: int, first_seed: int = FIRST_SEED):
    cfg = SceneConfig(height=H, width=W)
    return [generate_frame(first_seed + i, cfg) for i in range(n)]


def ground_truth(f) -> dict:
    """The metrics' ground-truth format for a generated frame."""
    return {'params': box_ops.encode_box_params(f.translations, f.rotations, f.sizes).reshape(-1, 12),
            'labels': np.asarray(f.labels, np.int64)}


def write_bag(path: Path, fs, *, storage: str = 'sqlite3', colour: str = 'rgb8', depth: str = '16UC1',
              camera_info: bool = True, gt: bool = True, depth_offset_ns=None, colour_encoding: str | None = None,
              depth_encoding: str | None = None, depth_step: int | None = None,
              depth_transport: str = 'raw', gt_class_ids: str = 'names', compression: str = 'none',
              split=None) -> Path:
    """One bag: colour (rgb8 raw Image, or 'png'/'jpeg' CompressedImage), depth (16UC1 mm or 32FC1 m),
    CameraInfo, ground truth. ``depth_transport='compressedDepth'`` writes depth as image_transport's
    compressedDepth on <depth>/compressedDepth; ``gt_class_ids``: ground-truth class_id as 'names' (older bags),
    'ids' or 'ids+label_info' (integer ids, with a LabelInfo on /ground_truth/label_info).
    ``depth_offset_ns(i)`` shifts depth stamps; ``*_encoding`` overrides the encoding field (to make
    unsupported-encoding frames); ``depth_step`` overrides the depth row stride (to make a data length that does
    not match step x height); ``compression``, ``split``: BagWriter's (zstd per file or per message; a
    ``splitting.SplitPolicy``). Per frame, the messages are logged at +5 (colour), +4 (depth), +3 (CameraInfo)
    and +6 ms (ground truth) after the frame's stamp, in that order."""
    with BagWriter(path, storage=storage, compression=compression, split=split) as bag:
        for i, f in enumerate(fs):
            stamp = START_NS + i * PERIOD_NS
            if colour == 'rgb8':
                c = M.image_msg(f.rgb, 'rgb8', stamp, FRAME_ID)
                if colour_encoding:
                    c.encoding = colour_encoding
                bag.write(DEFAULT_TOPICS.image, c, stamp + 5_000_000)
            else:
                bag.write(DEFAULT_TOPICS.compressed_image, M.compressed_image_msg(f.rgb, colour, stamp, FRAME_ID),
                          stamp + 5_000_000)
            dstamp = stamp + (depth_offset_ns(i) if depth_offset_ns else 0)
            depth_array = f.depth_mm if depth == '16UC1' else f.depth_mm.astype(np.float32) / 1000.0
            if depth_transport == 'compressedDepth':      # image_transport's compressed_depth_image_transport
                bag.write(DEFAULT_TOPICS.compressed_depth,
                          M.compressed_depth_msg(depth_array, depth, dstamp, FRAME_ID), stamp + 4_000_000)
            else:
                d = M.image_msg(depth_array, depth, dstamp, FRAME_ID)
                if depth_encoding:
                    d.encoding = depth_encoding
                if depth_step is not None:
                    d.step = depth_step
                bag.write(DEFAULT_TOPICS.depth, d, stamp + 4_000_000)
            if camera_info:
                bag.write(DEFAULT_TOPICS.camera_info, M.camera_info_msg(f.K, H, W, stamp, FRAME_ID), stamp + 3_000_000)
            if gt:
                if gt_class_ids == 'names':                      # the older convention: class_id = class name
                    names = [CLASS_NAMES[int(k)] for k in f.labels]
                else:                                             # vision_msgs': integer id (+ LabelInfo)
                    names = [str(int(k)) for k in f.labels]
                    if gt_class_ids == 'ids+label_info' and i == 0:
                        bag.write(DEFAULT_TOPICS.ground_truth.rsplit('/', 1)[0] + '/label_info',
                                  M.label_info_msg(CLASS_NAMES, stamp, FRAME_ID), stamp)
                bag.write(DEFAULT_TOPICS.ground_truth,
                          M.detections_msg(f.translations, f.rotations, f.sizes, names, None, stamp, FRAME_ID),
                          stamp + 6_000_000)
    return path

"""The bundled recording ``data/sample_recording``: generated test-split scenes (seeds >= 2e9, never trained on)
laid out as an RGB-D camera driver publishes them, plus their ground truth. Regenerated bit for bit by
``scripts/make_sample_recording.py`` (same seed and config -> the same message bytes; with the pinned
OpenCV, whose JPEG encoder makes the colour bytes).

Per frame ``i`` (seed ``seed + i``), all with the same header stamp and frame_id (depth registered to colour):

- ``/camera/color/image_raw/compressed``  sensor_msgs/CompressedImage, JPEG (or ``colour='rgb8'``: a raw Image
                                          on ``/camera/color/image_raw``; ``'png'``: lossless compressed)
- ``/camera/depth/image_raw``             sensor_msgs/Image 16UC1 (millimetres, 0 = invalid)
- ``/camera/color/camera_info``           sensor_msgs/CameraInfo (plumb_bob, no distortion)
- ``/ground_truth/detections``            vision_msgs/Detection3DArray (class_id = class name, score 1)

Header stamps tick at 30 Hz from a fixed epoch with +-0.3 ms exposure jitter; bag (receive) times add a
deterministic 8-15 ms transport delay per message, as a driver on a workcell would show.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..scenes import CLASS_NAMES, SceneConfig, generate_frame
from . import messages as M
from .topics import DEFAULT_TOPICS
from .writer import BagWriter

__all__ = ['SampleRecordingConfig', 'sample_messages', 'write_sample_recording', 'messages_digest',
           'default_sample_path']

NS = 1_000_000_000


@dataclass(frozen=True)
class SampleRecordingConfig:
    seed: int = 2_000_500_000           # first scene seed (test split, apart from evaluate.py's first frames)
    frames: int = 24                    # 0.8 s at 30 Hz; ~4.3 MB at 320x240
    height: int = 240
    width: int = 320
    colour: str = 'jpeg'                # jpeg | png (CompressedImage) | rgb8 (raw Image)
    rate_hz: float = 30.0
    start_ns: int = 1_750_000_000 * NS  # first header stamp
    frame_id: str = 'camera_color_optical_frame'
    storage: str = 'sqlite3'

    def __post_init__(self):
        if self.seed < 2_000_000_000:
            raise ValueError(f'recording seeds must be test-split seeds (>= 2e9), got {self.seed}')
        if self.colour not in ('jpeg', 'png', 'rgb8'):
            raise ValueError(f"colour must be 'jpeg', 'png' or 'rgb8', got {self.colour!r}")
        if self.frames < 1 or not self.rate_hz > 0:
            raise ValueError('need frames >= 1 and rate_hz > 0')

    @property
    def image_topic(self) -> str:
        return DEFAULT_TOPICS.image if self.colour == 'rgb8' else DEFAULT_TOPICS.compressed_image

    def to_custom_data(self) -> dict[str, str]:
        return {'string_perception.sample_recording': json.dumps(dataclasses.asdict(self), sort_keys=True)}


def _frame_messages(cfg: SampleRecordingConfig, i: int, rng: np.random.Generator) -> list[tuple[str, Any, int]]:
    f = generate_frame(cfg.seed + i, SceneConfig(height=cfg.height, width=cfg.width))
    stamp = cfg.start_ns + int(round(i * NS / cfg.rate_hz)) + int(rng.integers(-300_000, 300_001))
    delay = rng.integers(8_000_000, 15_000_001, size=4)          # ns: colour, depth, info, ground truth
    fid = cfg.frame_id
    if cfg.colour == 'rgb8':
        colour = M.image_msg(f.rgb, 'rgb8', stamp, fid)
    else:
        colour = M.compressed_image_msg(f.rgb, cfg.colour, stamp, fid)
    names = [CLASS_NAMES[int(k)] for k in f.labels]
    msgs = [(cfg.image_topic, colour, stamp + int(delay[0])),
            (DEFAULT_TOPICS.depth, M.image_msg(f.depth_mm, '16UC1', stamp, fid), stamp + int(delay[1])),
            (DEFAULT_TOPICS.camera_info, M.camera_info_msg(f.K, cfg.height, cfg.width, stamp, fid),
             stamp + int(delay[2])),
            (DEFAULT_TOPICS.ground_truth, M.detections_msg(f.translations, f.rotations, f.sizes, names, None, stamp,
                                                           fid), stamp + int(delay[3]))]
    return sorted(msgs, key=lambda m: m[2])


def sample_messages(cfg: SampleRecordingConfig = SampleRecordingConfig(),
                    frames: int | None = None) -> Iterator[tuple[str, Any, int]]:
    """(topic, rosbags message, log_time_ns) of the first ``frames`` (default all) frames, in log-time order."""
    rng = np.random.default_rng(cfg.seed)
    for i in range(cfg.frames if frames is None else min(frames, cfg.frames)):
        yield from _frame_messages(cfg, i, rng)


def write_sample_recording(path: str | Path, cfg: SampleRecordingConfig = SampleRecordingConfig()) -> Path:
    """Write the recording to the (new) folder ``path``; returns it."""
    path = Path(path)
    with BagWriter(path, storage=cfg.storage, custom_data=cfg.to_custom_data()) as bag:
        for topic, msg, t in sample_messages(cfg):
            bag.write(topic, msg, t)
    return path


def messages_digest(path: str | Path) -> str:
    """sha256 over every message of a bag (topic, log time, CDR bytes, in storage order): equal for two bags with
    the same messages whatever their storage files look like."""
    from .reader import open_bag
    h = hashlib.sha256()
    reader = open_bag(path)
    try:
        for conn, t, raw in reader.messages():
            h.update(conn.topic.encode() + b'\0' + conn.msgtype.encode() + b'\0' + int(t).to_bytes(8, 'little'))
            h.update(len(raw).to_bytes(8, 'little') + bytes(raw))
    finally:
        reader.close()
    return h.hexdigest()


def default_sample_path() -> Path:
    """``data/sample_recording`` of the source tree or the installed share folder."""
    from ..paths import share_file
    return share_file('data', 'sample_recording')


def config_of(path: str | Path) -> SampleRecordingConfig:
    """The config a recording was generated with (from its metadata custom_data)."""
    import yaml
    meta = yaml.safe_load((Path(path) / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    raw = (meta.get('custom_data') or {}).get('string_perception.sample_recording')
    if raw is None:
        raise ValueError(f'{path} is not a generated sample recording (no custom_data)')
    return SampleRecordingConfig(**json.loads(raw))

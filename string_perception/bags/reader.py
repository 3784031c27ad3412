"""Synchronised RGB-D frames (+ ground truth) from a rosbag2 bag (sqlite3 or mcap, a bag folder or a lone
``.db3`` / ``.mcap`` file), ROS-free.

    with BagFrameReader('data/sample_recording') as bag:
        for frame in bag:                  # BagFrame: rgb + encoding, depth + encoding, K, ground truth, stamp
            ...
        print('\\n'.join(bag.report.lines()))

Matching uses the node's tolerance: colour and depth images are paired one to one by header stamp within
``slop_s`` (default: the node's ``sync_slop``), closest pairs first; each frame takes the CameraInfo whose stamp
is nearest to its colour stamp, within the slop too. Ground truth (vision_msgs/Detection3DArray) is matched
the same way. A frame that cannot be used (no depth / CameraInfo within the slop, an undecodable or
unsupported colour or depth encoding, a corrupt message) is skipped and counted by kind in :class:`ReadReport`, with one example message per kind; everything
else is still yielded. A bag that cannot be opened or read (missing, truncated, corrupt) raises
:class:`BagError` with what was wrong.

Two passes over the bag: the first reads only header stamps (parsed from the CDR bytes) and the small messages
(CameraInfo, ground truth) and plans the frames; the second decodes the planned images in colour-stamp order,
holding only the few images whose partner has not been read yet.
"""
from __future__ import annotations

import bisect
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..codec.detection_msgs import camera_info_to_k, detections_from_msg, label_map
from ..codec.frame_decode import decode_image
from ..codec.image_conversion import ImageEncodingError
from ..node_params import defaults as node_defaults
from ..scenes import CLASS_NAMES
from .topics import COMPRESSED, DEFAULT_TOPICS, CameraTopics, resolve_topics
from .typestore import make_typestore

__all__ = ['BagError', 'BagFrame', 'ReadReport', 'BagFrameReader', 'open_bag', 'SKIP_KINDS']

NODE_SLOP_S = float(node_defaults()['sync_slop'])
SKIP_KINDS = {
    'no_depth': 'no depth image within the slop',
    'no_camera_info': 'no CameraInfo within the slop',
    'bad_colour': 'colour image not decodable / unsupported encoding',
    'bad_depth': 'depth image not decodable / unsupported encoding',
    'bad_message': 'message could not be deserialised',
    'bad_input': 'the pipeline rejected the frame (size, intrinsics, ...)',
}


class BagError(RuntimeError):
    """The bag cannot be opened or read (missing, truncated, corrupt, unsupported), or has no usable frames."""


@dataclass(frozen=True)
class BagFrame:
    """One synchronised frame, ready for ``Pipeline(rgb, depth, K, encoding=..., depth_encoding=...)``."""

    index: int                          # position among the bag's colour messages (stamp order)
    stamp_ns: int                       # colour header stamp
    frame_id: str                       # colour header frame_id
    rgb: np.ndarray                     # uint8 [H,W,C] in `encoding` (compressed colour is decoded to rgb8)
    encoding: str                       # rgb8 / bgr8 / rgba8 / bgra8 / mono8
    depth: np.ndarray                   # uint16 [h,w] millimetres or float32 [h,w] metres
    depth_encoding: str                 # 16UC1 / mono16 / 32FC1
    K: np.ndarray                       # float64 [3,3]
    info_hw: tuple[int, int] | None     # CameraInfo (height, width); None when unset or from --intrinsics
    ground_truth: dict | None           # {'params': [M,12], 'labels': [M], ...} (metrics format) or None
    log_time_ns: int                    # when the colour message was recorded


@dataclass
class ReadReport:
    """What a bag held and what could not be used."""

    bag: str
    storage: str = ''
    topics: dict[str, str | None] = field(default_factory=dict)   # role -> topic (None: not found)
    notes: list[str] = field(default_factory=list)               # topic choices, missing ground truth, ...
    colour_messages: int = 0
    planned: int = 0                                             # frames with depth + CameraInfo matched
    yielded: int = 0
    with_ground_truth: int = 0
    skipped: Counter = field(default_factory=Counter)            # kind (SKIP_KINDS) -> frames
    examples: dict[str, str] = field(default_factory=dict)       # kind -> first message

    def skip(self, kind: str, message: str) -> None:
        self.skipped[kind] += 1
        self.examples.setdefault(kind, message)

    def lines(self) -> list[str]:
        """Human-readable summary: one line per note and per kind of skipped frame."""
        out = [f'bag {self.bag} ({self.storage}): {self.colour_messages} colour messages, {self.yielded} frames '
               f'used, {self.with_ground_truth} with ground truth']
        out += [f'  note: {n}' for n in self.notes]
        for kind, n in sorted(self.skipped.items()):
            out.append(f'  skipped {n} frame(s): {SKIP_KINDS[kind]} (e.g. {self.examples[kind]})')
        return out

    def to_dict(self) -> dict[str, Any]:
        return {'bag': self.bag, 'storage': self.storage, 'topics': dict(self.topics), 'notes': list(self.notes),
                'colour_messages': self.colour_messages, 'frames_used': self.yielded,
                'frames_with_ground_truth': self.with_ground_truth, 'skipped': dict(self.skipped),
                'skipped_examples': dict(self.examples)}


def open_bag(path: str | Path):
    """An open ``rosbags.rosbag2.Reader``; :class:`BagError` (with the cause) when that fails."""
    from rosbags.rosbag2 import Reader
    path = Path(path)
    if not path.exists():
        raise BagError(f'{path}: no such bag (a rosbag2 folder with metadata.yaml, or a .db3 / .mcap file)')
    try:
        reader = Reader(path)
        reader.open()
    except Exception as e:  # rosbags ReaderError, sqlite3.DatabaseError, mcap/struct errors, YAML errors, ...
        raise BagError(f'{path}: cannot open the bag ({type(e).__name__}: {e}); is it a complete rosbag2 '
                       f'recording (sqlite3 or mcap)?') from e
    return reader


def header_of(raw: bytes | memoryview) -> tuple[int, str]:
    """(stamp_ns, frame_id) of a CDR message whose first field is a std_msgs/Header (all camera messages)."""
    buf = memoryview(raw)
    if len(buf) < 16:
        raise ValueError(f'message of {len(buf)} bytes is too short for a header')
    end = '<' if buf[1] & 1 else '>'                      # encapsulation: CDR_LE = 00 01, CDR_BE = 00 00
    sec, nanosec, n = struct.unpack_from(end + 'iII', buf, 4)
    if n == 0 or 16 + n > len(buf):
        raise ValueError('header frame_id runs past the end of the message')
    return sec * 1_000_000_000 + nanosec, bytes(buf[16:16 + n - 1]).decode('utf-8', 'replace')


def _nearest(stamps: list[int], t: int, slop_ns: int) -> int | None:
    """Index of the stamp nearest to ``t`` within ``slop_ns`` (``stamps`` sorted), None if there is none."""
    i = bisect.bisect_left(stamps, t)
    near = [j for j in (i - 1, i) if 0 <= j < len(stamps) and abs(stamps[j] - t) <= slop_ns]
    return min(near, key=lambda j: (abs(stamps[j] - t), j)) if near else None


def _match_one_to_one(a: list[int], b: list[int], slop_ns: int) -> dict[int, int]:
    """Pairs ``a[i] <-> b[j]`` (sorted stamps) within ``slop_ns``, each used once, closest pairs first (so a
    missing or late message never shifts its neighbours' partners) -> ``{i: j}``."""
    pairs = []
    for i, t in enumerate(a):
        lo, hi = bisect.bisect_left(b, t - slop_ns), bisect.bisect_right(b, t + slop_ns)
        pairs += [(abs(b[j] - t), i, j) for j in range(lo, hi)]
    out, used = {}, set()
    for _, i, j in sorted(pairs):
        if i not in out and j not in used:
            out[i] = j
            used.add(j)
    return out


@dataclass
class _Plan:
    index: int
    stamp_ns: int
    frame_id: str
    log_time_ns: int
    colour_key: tuple[int, int]          # (log time, sequence) of the colour message
    depth_key: tuple[int, int]
    info: Any                            # deserialised CameraInfo or None (fixed intrinsics)
    gt: Any                              # deserialised Detection3DArray or None


class BagFrameReader:
    """Iterate a bag's synchronised frames; see the module docstring. ``intrinsics=(fx, fy, cx, cy)`` replaces a
    missing CameraInfo topic."""

    def __init__(self, path: str | Path, topics: CameraTopics = DEFAULT_TOPICS, slop_s: float = NODE_SLOP_S,
                 intrinsics: tuple[float, float, float, float] | None = None, class_names=CLASS_NAMES):
        if not slop_s > 0:
            raise ValueError(f'slop_s must be > 0, got {slop_s}')
        self.path = Path(path)
        self.slop_ns = int(round(slop_s * 1e9))
        self.class_names = list(class_names)
        self.intrinsics = None if intrinsics is None else _k_from(intrinsics)
        self.typestore = make_typestore()
        self._reader = open_bag(self.path)
        try:
            self.report = ReadReport(bag=str(self.path), storage=self._storage_name())
            types = {c.topic: c.msgtype for c in self._reader.connections}
            self.msgtypes = types                                   # topic -> message type, the whole bag
            self.topics, notes = resolve_topics(types, topics)
            self.report.topics, self.report.notes = dict(self.topics), notes
            self._check_topics(types)
            self.gt_id_names = self._label_map()
            self.plans = self._plan()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ set-up
    def _storage_name(self) -> str:
        name = type(self._reader.storage).__name__.lower()
        for s in ('mcap', 'sqlite3'):
            if s in name:
                return s
        plugins = {type(s).__name__.lower() for s in getattr(self._reader.storage, 'storages', [])}
        return 'mcap' if any('mcap' in p for p in plugins) else 'sqlite3'

    def _check_topics(self, types: dict[str, str]) -> None:
        listing = ', '.join(f'{t} [{ty}]' for t, ty in sorted(types.items())) or '(no topics)'
        for role in ('image', 'depth'):
            if self.topics[role] is None:
                raise BagError(f'{self.path}: {self.report.notes[-1] if self.report.notes else "missing " + role}'
                               f'\n  topics in the bag: {listing}')
        if self.topics['camera_info'] is None and self.intrinsics is None:
            raise BagError(f'{self.path}: no sensor_msgs/CameraInfo topic, so no frame has intrinsics; pass '
                           f'--camera-info-topic, or --intrinsics FX FY CX CY for the colour image\n'
                           f'  topics in the bag: {listing}')
        if self.topics['camera_info'] is None:
            self.report.notes.append('no CameraInfo topic: using the --intrinsics given for every frame')

    def _label_map(self) -> dict[int, str] | None:
        """Class id -> name from the ground truth's LabelInfo (``<gt namespace>/label_info``), None when the bag
        has none (then integer class ids index ``class_names``; older bags carry class names)."""
        for _, conn, _, raw in self._messages('label_info'):
            try:
                return label_map(self._deserialize(raw, conn.msgtype))
            except ValueError as e:
                self.report.notes.append(f'{conn.topic}: unreadable LabelInfo ({e}); ignored')
        return None

    def _connections(self, *roles: str):
        wanted = {self.topics[r] for r in roles if self.topics.get(r)}
        return [c for c in self._reader.connections if c.topic in wanted]

    def _messages(self, *roles: str):
        """(role, connection, log_time, raw) in storage order; read errors become BagError."""
        role_of = {self.topics[r]: r for r in roles if self.topics.get(r)}
        conns = self._connections(*roles)
        if not conns:
            return
        try:
            for conn, t, raw in self._reader.messages(conns):
                yield role_of[conn.topic], conn, t, raw
        except BagError:
            raise
        except Exception as e:
            raise BagError(f'{self.path}: the bag is truncated or corrupt; reading stopped with '
                           f'{type(e).__name__}: {e}') from e

    def _deserialize(self, raw, msgtype: str):
        try:
            return self.typestore.deserialize_cdr(raw, msgtype)
        except Exception as e:
            raise ValueError(f'{msgtype} could not be deserialised ({type(e).__name__}: {e})') from None

    def _plan(self) -> list[_Plan]:
        stamps: dict[str, list[tuple[int, str, tuple[int, int]]]] = {'image': [], 'depth': []}
        small: dict[str, list[tuple[int, Any]]] = {'camera_info': [], 'ground_truth': []}
        for seq, (role, conn, t, raw) in enumerate(self._messages('image', 'depth', 'camera_info', 'ground_truth')):
            try:
                if role in stamps:
                    stamp, frame_id = header_of(raw)
                    stamps[role].append((stamp, frame_id, (t, seq)))
                else:
                    msg = self._deserialize(raw, conn.msgtype)
                    small[role].append((_stamp_ns(msg.header.stamp), msg))
            except (ValueError, struct.error) as e:
                if role == 'image':
                    self.report.colour_messages += 1
                    self.report.skip('bad_message', f'{conn.topic} at {t}: {e}')
                elif role != 'ground_truth':
                    self.report.notes.append(f'{conn.topic}: a message at {t} is corrupt ({e}); ignored')
        for v in (*stamps.values(), *small.values()):
            v.sort(key=lambda x: x[0])
        self.report.colour_messages += len(stamps['image'])
        depth_t = [s for s, _, _ in stamps['depth']]
        info_t = [s for s, _ in small['camera_info']]
        gt_t = [s for s, _ in small['ground_truth']]
        depth_of = _match_one_to_one([s for s, _, _ in stamps['image']], depth_t, self.slop_ns)
        plans = []
        for index, (stamp, frame_id, key) in enumerate(stamps['image']):
            d = depth_of.get(index)
            if d is None:
                self.report.skip('no_depth', f'colour stamp {_fmt(stamp)}: {_gap(depth_t, stamp)}')
                continue
            info = None
            if self.topics['camera_info'] is not None:
                i = _nearest(info_t, stamp, self.slop_ns)
                if i is None:
                    self.report.skip('no_camera_info', f'colour stamp {_fmt(stamp)}: {_gap(info_t, stamp)}')
                    continue
                info = small['camera_info'][i][1]
            g = _nearest(gt_t, stamp, self.slop_ns) if gt_t else None
            plans.append(_Plan(index, stamp, frame_id, key[0], key, stamps['depth'][d][2], info,
                               None if g is None else small['ground_truth'][g][1]))
        self.report.planned = len(plans)
        if self.topics['ground_truth'] is not None and len(plans) and not any(p.gt is not None for p in plans):
            self.report.notes.append('no ground-truth message matches any frame stamp: metrics are skipped')
        return plans

    # ------------------------------------------------------------------ frames
    def __len__(self) -> int:
        return len(self.plans)

    def __iter__(self) -> Iterator[BagFrame]:
        by_key = {}
        for p in self.plans:
            by_key[p.colour_key] = (p, 'image')
            by_key[p.depth_key] = (p, 'depth')
        pending: dict[int, dict[str, Any]] = {}       # plan index -> {'image': (conn, raw), 'depth': ...}
        order = [p.index for p in self.plans]
        next_i = 0
        plans = {p.index: p for p in self.plans}
        for seq, (role, conn, t, raw) in enumerate(self._messages('image', 'depth', 'camera_info', 'ground_truth')):
            hit = by_key.get((t, seq))
            if hit is None:
                continue
            p, part = hit
            pending.setdefault(p.index, {})[part] = (conn, raw)
            while next_i < len(order) and len(pending.get(order[next_i], ())) == 2:
                parts = pending.pop(order[next_i])
                frame = self._decode(plans[order[next_i]], parts)
                next_i += 1
                if frame is not None:
                    self.report.yielded += 1
                    self.report.with_ground_truth += frame.ground_truth is not None
                    yield frame
        if next_i < len(order):
            raise BagError(f'{self.path}: {len(order) - next_i} planned frame(s) were not found on the second '
                           f'read; was the bag modified while it was read?')

    def _decode(self, p: _Plan, parts: dict[str, Any]) -> BagFrame | None:
        (cconn, craw), (dconn, draw) = parts['image'], parts['depth']
        where = f'stamp {_fmt(p.stamp_ns)}'
        try:
            cmsg = self._deserialize(craw, cconn.msgtype)     # raw: the node's header check first (check_layout)
            rgb, enc = decode_image(cmsg, 'colour', compressed=cconn.msgtype == COMPRESSED, check_layout=True)
        except (ValueError, ImageEncodingError) as e:  # InputError is a ValueError
            self.report.skip('bad_colour', f'{cconn.topic} {where}: {e}')
            return None
        try:
            dmsg = self._deserialize(draw, dconn.msgtype)     # compressed: image_transport compressedDepth
            depth, depth_enc = decode_image(dmsg, 'depth', compressed=dconn.msgtype == COMPRESSED, check_layout=True)
        except (ValueError, ImageEncodingError) as e:  # InputError is a ValueError
            self.report.skip('bad_depth', f'{dconn.topic} {where}: {e}')
            return None
        if p.info is not None:
            K, hw = camera_info_to_k(p.info)
        else:
            K, hw = self.intrinsics, None
        gt = None
        if p.gt is not None:
            gt = detections_from_msg(p.gt, self.class_names, self.gt_id_names)
        return BagFrame(index=p.index, stamp_ns=p.stamp_ns, frame_id=p.frame_id, rgb=rgb, encoding=enc,
                        depth=depth, depth_encoding=depth_enc, K=np.array(K, np.float64), info_hw=hw,
                        ground_truth=gt, log_time_ns=p.log_time_ns)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        reader, self._reader = getattr(self, '_reader', None), None
        if reader is not None and reader.is_open:
            reader.close()

    def __enter__(self) -> 'BagFrameReader':
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _k_from(fx_fy_cx_cy) -> np.ndarray:
    fx, fy, cx, cy = (float(v) for v in fx_fy_cx_cy)
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _fmt(stamp_ns: int) -> str:
    return f'{stamp_ns // 1_000_000_000}.{stamp_ns % 1_000_000_000:09d}'


def _gap(stamps: list[int], t: int) -> str:
    if not stamps:
        return 'the topic has no messages'
    i = bisect.bisect_left(stamps, t)
    near = min((abs(stamps[j] - t) for j in (i - 1, i) if 0 <= j < len(stamps)))
    return f'nearest is {near / 1e6:.1f} ms away'

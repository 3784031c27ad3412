"""3D multi-object tracking of one camera stream (AB3DMOT design): a constant-velocity Kalman filter per track,
Hungarian association, birth after ``birth_hits`` hits, ids kept across occlusion gaps. numpy + scipy + filterpy.

>>> tracker = Tracker(TrackerConfig(birth_hits=3, death_misses=3, max_gap=15))
>>> tracks = tracker.update(detections, stamp_s=1.25)     # Detections of one frame, image stamp in seconds
>>> tracks.ids, tracks.translations, tracks.velocities    # the confirmed tracks worth publishing this frame
>>> tracks.detection_ids                                  # per input detection: its confirmed track id, or -1
>>> tracker.reset()                                       # a new stream (bag loop, camera restart)

State per track (Kalman filter, ``filterpy.kalman.KalmanFilter``): ``x = [centre(3), velocity(3), size(3)]``,
measurement ``z = [centre(3), size(3)]``, all in the detections' frame (camera optical frame, metres, m/s).
Centre and velocity follow the constant-velocity model with white-acceleration process noise
(``filterpy.common.Q_discrete_white_noise``); the size is a random walk with a small variance. Why no angle in
the filter: AB3DMOT filters one yaw angle because driving boxes rest on the ground plane, but here a box has a
full 3D rotation in the camera frame (objects seen from a tilted workcell camera), which a linear filter cannot
hold without linearising SO(3). Objects on a table move by translation far more than they turn, so the track's
rotation is the last matched detection's, re-expressed by the proper signed axis permutation (one of the 24
symmetries of a box's description) closest to the track's previous rotation, with the sizes permuted the same
way. That keeps the filtered sizes on consistent axes even when the detector swaps a box's axes between frames.

Association per frame: predict every track to the frame's stamp, build a cost between predicted tracks and
detections (``association='distance'``: centre distance in metres, gated at ``max_distance_m``; ``'iou'``:
``1 - IoU3D`` from :mod:`string_perception.iou3d`, gated at ``min_iou``), solve it with
``scipy.optimize.linear_sum_assignment`` and drop pairs beyond the gate. Classes are not gated: a track's class
is the score-weighted vote of its matched detections (the detector may flicker between classes).

Life cycle: a new detection starts a *tentative* track; it becomes *confirmed* (and gets the next id of this
tracker, starting at 1, never reused) after ``birth_hits`` consecutive hits, and dies at its first miss before
that. A confirmed track missing for fewer than ``death_misses`` frames is still published (coasting on its
prediction); after that it is *lost*: not published, but kept, and a detection matched to it within ``max_gap``
missed frames resumes the same id. After ``max_gap`` misses it is deleted.

Cost per frame is bounded: at most ``max_tracks`` tracks (new ones are not started beyond that) against the
frame's detections (the decoder's ``max_detections``); the 'iou' metric computes the exact IoU only for pairs
whose bounding spheres overlap. A stamp that goes back or jumps by more than ``max_dt_s`` resets the tracker.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from filterpy.common import Q_discrete_white_noise
from filterpy.kalman import KalmanFilter
from scipy.optimize import linear_sum_assignment

from ..box_ops import Box3D, box_symmetries, rotation_to_quaternion
from ..iou3d import paired_box3d_iou
from .postprocess import Detections

__all__ = ['TrackerConfig', 'Tracks', 'Tracker', 'ASSOCIATIONS', 'box_symmetries', 'align_box']

ASSOCIATIONS = ('distance', 'iou')
_GATED = 1e6           # cost of a pair beyond the gate (never chosen: such pairs are dropped after assignment)


@dataclass(frozen=True)
class TrackerConfig:
    """Every tracking knob (validated on construction)."""

    birth_hits: int = 3                 # consecutive hits before a track is confirmed and gets an id (n)
    death_misses: int = 3               # a confirmed track is published until this many consecutive misses (m)
    max_gap: int = 15                   # misses a lost track keeps its id before deletion (>= death_misses)
    association: str = 'distance'       # 'distance' (centre distance) | 'iou' (3D IoU)
    max_distance_m: float = 0.15        # gate of 'distance': predicted centre to detected centre
    min_iou: float = 0.1                # gate of 'iou'
    min_score: float = 0.0              # detections scoring below this are not tracked
    max_tracks: int = 100               # at most this many live tracks (bounds the cost per frame)
    default_dt_s: float = 1.0 / 30.0    # time step when a frame comes without a stamp
    max_dt_s: float = 5.0               # a larger step (or a step back) resets the tracker
    accel_std: float = 0.5              # m/s^2, white-acceleration process noise of centre and velocity
    size_std: float = 0.01              # m per sqrt(s), random walk of the size
    measurement_std_m: float = 0.05     # m, detection noise of centre and size (the shipped model's scale)
    initial_velocity_std: float = 1.0   # m/s, prior on the velocity of a new track

    def __post_init__(self):
        if self.birth_hits < 1 or self.death_misses < 1:
            raise ValueError(f'birth_hits and death_misses must be >= 1, got {self.birth_hits}, {self.death_misses}')
        if self.max_gap < self.death_misses:
            raise ValueError(f'max_gap ({self.max_gap}) must be >= death_misses ({self.death_misses})')
        if self.association not in ASSOCIATIONS:
            raise ValueError(f'association must be one of {ASSOCIATIONS}, got {self.association!r}')
        if not (self.max_distance_m > 0 and 0 < self.min_iou <= 1 and 0 <= self.min_score <= 1):
            raise ValueError('need max_distance_m > 0, min_iou in (0, 1], min_score in [0, 1]')
        if self.max_tracks < 1 or not (0 < self.default_dt_s <= self.max_dt_s):
            raise ValueError('need max_tracks >= 1 and 0 < default_dt_s <= max_dt_s')
        if min(self.accel_std, self.size_std, self.measurement_std_m, self.initial_velocity_std) <= 0:
            raise ValueError('noise standard deviations must be > 0')

    def replace(self, **changes) -> 'TrackerConfig':
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Tracks:
    """The confirmed tracks published for one frame (in id order) and the ids given to that frame's detections."""

    ids: np.ndarray                 # [T] int64 track ids (>= 1)
    translations: np.ndarray        # [T,3] filtered centres, metres
    velocities: np.ndarray          # [T,3] filtered velocities, m/s, same frame as the detections
    rotations: np.ndarray           # [T,3,3] last matched detection's rotation, aligned to the track
    quaternions_xyzw: np.ndarray    # [T,4]
    sizes: np.ndarray               # [T,3] filtered sizes along the rotation's axes
    class_ids: np.ndarray           # [T] int64, score-weighted vote
    class_names: list[str]          # [T]
    scores: np.ndarray              # [T] last matched detection's score
    misses: np.ndarray              # [T] int64 consecutive misses (0 = measured in this frame)
    detection_indices: np.ndarray   # [T] int64 the detection matched this frame, -1 when coasting
    detection_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [M] id per detection, -1

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def empty(cls, num_detections: int = 0) -> 'Tracks':
        return cls(ids=np.zeros(0, np.int64), translations=np.zeros((0, 3)), velocities=np.zeros((0, 3)),
                   rotations=np.zeros((0, 3, 3)), quaternions_xyzw=np.zeros((0, 4)), sizes=np.zeros((0, 3)),
                   class_ids=np.zeros(0, np.int64), class_names=[], scores=np.zeros(0), misses=np.zeros(0, np.int64),
                   detection_indices=np.zeros(0, np.int64), detection_ids=np.full(num_detections, -1, np.int64))


_SYMMETRIES = box_symmetries()


def align_box(R_ref: np.ndarray, R: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R', size')`` describing box ``(R, size)`` with the axes closest to ``R_ref`` (max trace(R_refᵀ R'))."""
    M = R_ref.T @ R                                             # [3,3]
    score = np.einsum('ij,kji->k', M, _SYMMETRIES)              # [24] trace(M P_k)
    P = _SYMMETRIES[int(np.argmax(score))]
    return R @ P, np.abs(P).T @ size


class _Track:
    """One track's filter and bookkeeping (internal)."""

    def __init__(self, cfg: TrackerConfig, centre, rotation, size, class_id: int, score: float):
        kf = KalmanFilter(dim_x=9, dim_z=6)
        kf.x = np.concatenate([centre, np.zeros(3), size])      # [9]
        kf.H = np.zeros((6, 9))
        kf.H[0:3, 0:3] = np.eye(3)
        kf.H[3:6, 6:9] = np.eye(3)
        kf.R = np.eye(6) * cfg.measurement_std_m ** 2
        kf.P = np.diag([cfg.measurement_std_m ** 2] * 3 + [cfg.initial_velocity_std ** 2] * 3
                       + [cfg.measurement_std_m ** 2] * 3)
        self.kf = kf
        self.rotation = np.asarray(rotation, np.float64)
        self.score = float(score)
        self.votes: dict[int, float] = {int(class_id): float(score)}
        self.hits, self.misses, self.id = 1, 0, 0               # id 0 = tentative
        self.detection_index = -1

    def predict(self, cfg: TrackerConfig, dt: float) -> None:
        F = np.eye(9)
        F[0:3, 3:6] = np.eye(3) * dt
        Q = np.zeros((9, 9))
        Q[0:6, 0:6] = Q_discrete_white_noise(dim=2, dt=dt, var=cfg.accel_std ** 2, block_size=3, order_by_dim=False)
        Q[6:9, 6:9] = np.eye(3) * cfg.size_std ** 2 * dt
        self.kf.predict(F=F, Q=Q)
        self.kf.x[6:9] = np.maximum(self.kf.x[6:9], 1e-6)        # a size stays positive

    def update(self, centre, rotation, size, class_id: int, score: float) -> None:
        R, s = align_box(self.rotation, rotation, size)
        self.kf.update(np.concatenate([centre, s]))
        self.kf.x[6:9] = np.maximum(self.kf.x[6:9], 1e-6)
        self.rotation, self.score = R, float(score)
        self.votes[int(class_id)] = self.votes.get(int(class_id), 0.0) + float(score)
        self.hits += 1
        self.misses = 0

    @property
    def centre(self) -> np.ndarray:
        return self.kf.x[0:3]

    @property
    def class_id(self) -> int:
        return max(sorted(self.votes), key=lambda c: self.votes[c])   # ties: the lowest class id


class Tracker:
    """Stateful tracker of one stream; :meth:`update` once per frame in stamp order, :meth:`reset` between
    streams. Not thread-safe (one worker owns it)."""

    def __init__(self, config: TrackerConfig = TrackerConfig()):
        self.config = config
        self._tracks: list[_Track] = []
        self._names: dict[int, str] = {}
        self._next_id = 1
        self._last_stamp: float | None = None
        self.resets = 0                                         # resets caused by stamps (a step back / a jump)

    def reset(self) -> None:
        """Forget every track (ids keep counting up, so an id never names two objects of one tracker)."""
        self._tracks = []
        self._last_stamp = None

    @property
    def num_live(self) -> int:
        """Tentative, confirmed and lost tracks held now."""
        return len(self._tracks)

    def _step(self, stamp_s: float | None) -> float:
        cfg = self.config
        if stamp_s is None:
            dt = cfg.default_dt_s
            self._last_stamp = None if self._last_stamp is None else self._last_stamp + dt
            return dt
        stamp_s = float(stamp_s)
        if self._last_stamp is None:
            dt = cfg.default_dt_s
        else:
            dt = stamp_s - self._last_stamp
            if not (0.0 < dt <= cfg.max_dt_s):
                if self._tracks:
                    self.resets += 1
                self._tracks = []
                dt = cfg.default_dt_s
        self._last_stamp = stamp_s
        return dt

    def _cost(self, dets: Detections, cols: np.ndarray) -> np.ndarray:
        """[T,D] association cost, :data:`_GATED` beyond the gate."""
        cfg = self.config
        centres = np.array([t.centre for t in self._tracks]).reshape(-1, 3)          # [T,3]
        dist = np.linalg.norm(centres[:, None] - dets.translations[cols][None], axis=2)  # [T,D]
        if cfg.association == 'distance':
            return np.where(dist <= cfg.max_distance_m, dist, _GATED)
        sizes = np.array([t.kf.x[6:9] for t in self._tracks]).reshape(-1, 3)         # [T,3]
        reach = 0.5 * (np.linalg.norm(sizes, axis=1)[:, None]
                       + np.linalg.norm(dets.sizes[cols], axis=1)[None])            # [T,D] sum of radii
        iou = np.zeros_like(dist)
        rows, cs = np.nonzero(dist < reach)                      # only pairs whose bounding spheres overlap
        if rows.size:
            rots = np.array([t.rotation for t in self._tracks])                      # [T,3,3]
            a = Box3D(centres[rows], rots[rows], sizes[rows])
            d = cols[cs]
            b = Box3D(dets.translations[d], dets.rotations[d], dets.sizes[d])
            iou[rows, cs] = paired_box3d_iou(a, b)
        return np.where(iou >= cfg.min_iou, 1.0 - iou, _GATED)

    def update(self, dets: Detections, stamp_s: float | None = None) -> Tracks:
        """One frame's detections (``stamp_s``: the image stamp in seconds; None = ``default_dt_s`` later)."""
        cfg = self.config
        dt = self._step(stamp_s)
        for t in self._tracks:
            t.predict(cfg, dt)
            t.detection_index = -1
        for c, n in zip(dets.class_ids, dets.class_names):
            self._names[int(c)] = str(n)
        cols = np.flatnonzero(dets.scores >= cfg.min_score)                          # [D] tracked detections
        matched_tracks, matched_dets = set(), set()
        if self._tracks and cols.size:
            cost = self._cost(dets, cols)
            rows, cs = linear_sum_assignment(cost)
            for r, c in zip(rows, cs):
                if cost[r, c] >= _GATED:
                    continue
                d = int(cols[c])
                t = self._tracks[r]
                t.update(dets.translations[d], dets.rotations[d], dets.sizes[d], dets.class_ids[d], dets.scores[d])
                t.detection_index = d
                matched_tracks.add(r)
                matched_dets.add(d)
        kept = []
        for r, t in enumerate(self._tracks):
            if r not in matched_tracks:
                t.misses += 1
                if t.id == 0 or t.misses > cfg.max_gap:          # tentative tracks die at their first miss
                    continue
            elif t.id == 0 and t.hits >= cfg.birth_hits:
                t.id = self._confirm()
            kept.append(t)
        for d in cols:
            if int(d) in matched_dets or len(kept) >= cfg.max_tracks:
                continue
            t = _Track(cfg, dets.translations[d], dets.rotations[d], dets.sizes[d], dets.class_ids[d], dets.scores[d])
            t.detection_index = int(d)
            if cfg.birth_hits <= 1:
                t.id = self._confirm()
            kept.append(t)
        self._tracks = kept
        return self._output(len(dets))

    def _confirm(self) -> int:
        tid, self._next_id = self._next_id, self._next_id + 1
        return tid

    def _output(self, num_detections: int) -> Tracks:
        out = sorted((t for t in self._tracks if t.id > 0 and t.misses < self.config.death_misses),
                     key=lambda t: t.id)
        det_ids = np.full(num_detections, -1, np.int64)
        for t in self._tracks:
            if t.id > 0 and t.detection_index >= 0:
                det_ids[t.detection_index] = t.id
        if not out:
            return dataclasses.replace(Tracks.empty(num_detections), detection_ids=det_ids)
        rot = np.array([t.rotation for t in out])                                   # [T,3,3]
        cls = np.array([t.class_id for t in out], np.int64)                         # [T]
        return Tracks(ids=np.array([t.id for t in out], np.int64),
                      translations=np.array([t.kf.x[0:3] for t in out]),            # [T,3]
                      velocities=np.array([t.kf.x[3:6] for t in out]),              # [T,3]
                      rotations=rot, quaternions_xyzw=rotation_to_quaternion(rot).reshape(-1, 4),
                      sizes=np.array([t.kf.x[6:9] for t in out]),                   # [T,3]
                      class_ids=cls, class_names=[self._names.get(int(c), str(c)) for c in cls],
                      scores=np.array([t.score for t in out]),
                      misses=np.array([t.misses for t in out], np.int64),
                      detection_indices=np.array([t.detection_index for t in out], np.int64),
                      detection_ids=det_ids)

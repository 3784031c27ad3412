"""runtime/tracking.py: Kalman filter, association, life cycle and id stability, with known answers."""
import numpy as np
import pytest

from string_perception.box_ops import rotation_to_quaternion
from string_perception.runtime.postprocess import Detections
from string_perception.runtime.tracking import Tracker, TrackerConfig, align_box, box_symmetries

DT = 0.1
SIZE = [0.05, 0.06, 0.07]


def dets(*centres, sizes=None, classes=None, scores=None, rotations=None):
    c = np.array(centres, np.float64).reshape(-1, 3)
    s = np.tile(SIZE, (len(c), 1)) if sizes is None else sizes
    return Detections.from_boxes(c, s, rotations=rotations, class_ids=classes, scores=scores,
                                 labels=('cube', 'ball', 'can'))


def rot_z(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def test_box_symmetries_are_the_24_proper_signed_permutations():
    P = box_symmetries()
    assert P.shape == (24, 3, 3)
    np.testing.assert_allclose(np.linalg.det(P), 1.0)
    assert len({p.tobytes() for p in P}) == 24
    np.testing.assert_allclose(np.abs(P).sum(axis=1), 1.0)


def test_align_box_undoes_an_axis_swap():
    R = rot_z(0.3)
    P = np.array([[0, 0, 1.0], [1, 0, 0], [0, 1, 0]])            # proper: det +1
    size = np.array([1.0, 2.0, 3.0])
    R2, s2 = align_box(R, R @ P, np.abs(P).T @ size)              # same box, axes permuted
    np.testing.assert_allclose(R2, R, atol=1e-12)
    np.testing.assert_allclose(s2, size)


def test_constant_velocity_object_is_predicted_exactly_through_a_gap():
    """Noise-free constant velocity and a filter without process noise: after 4 frames the velocity is exact, and
    coasting frames (no detection) publish the true position p0 + v t."""
    tr = Tracker(TrackerConfig(birth_hits=1, death_misses=4, max_gap=4, measurement_std_m=1e-6, accel_std=1e-6))
    p0, v = np.array([0.1, -0.2, 0.8]), np.array([0.3, 0.1, -0.2])
    for k in range(4):
        out = tr.update(dets(p0 + v * k * DT), stamp_s=k * DT)
    np.testing.assert_allclose(out.velocities[0], v, atol=1e-5)
    for k in (4, 5, 6):                                            # the object is not detected
        out = tr.update(dets(), stamp_s=k * DT)
        assert out.ids.tolist() == [1] and out.misses[0] == k - 3 and out.detection_indices[0] == -1
        np.testing.assert_allclose(out.translations[0], p0 + v * k * DT, atol=1e-5)


def test_noise_free_estimates_converge_with_default_noise_settings():
    tr = Tracker(TrackerConfig(birth_hits=1))
    p0, v = np.array([0.0, 0.0, 1.0]), np.array([-0.2, 0.05, 0.1])
    errors = []
    for k in range(150):
        out = tr.update(dets(p0 + v * k * DT, sizes=np.array([[0.1, 0.2, 0.3]])), stamp_s=k * DT)
        errors.append(np.linalg.norm(out.velocities[0] - v))
    assert errors[10] > errors[50] > errors[149]
    assert errors[149] < 1e-6
    np.testing.assert_allclose(out.translations[0], p0 + v * 149 * DT, atol=1e-6)
    np.testing.assert_allclose(out.sizes[0], [0.1, 0.2, 0.3], atol=1e-6)


def test_hungarian_association_beats_greedy_nearest():
    """Tracks at x=0 and x=0.06; detections at 0.04 and 0.11 (gate 0.1 m). Greedy nearest would give the
    closest pair (0.06 -> 0.04) and leave x=0 unmatched; the assignment matches 0->0.04 and 0.06->0.11."""
    tr = Tracker(TrackerConfig(birth_hits=1, max_distance_m=0.1, initial_velocity_std=1e-3))
    first = tr.update(dets([0, 0, 1], [0.06, 0, 1]), stamp_s=0.0)
    assert first.detection_ids.tolist() == [1, 2]
    out = tr.update(dets([0.04, 0, 1], [0.11, 0, 1]), stamp_s=DT)
    assert out.detection_ids.tolist() == [1, 2]


def test_gate_and_iou_association():
    tr = Tracker(TrackerConfig(birth_hits=1, association='iou', min_iou=0.3, initial_velocity_std=1e-3))
    tr.update(dets([0, 0, 1]), stamp_s=0.0)
    out = tr.update(dets([0.01, 0, 1], [0.5, 0, 1]), stamp_s=DT)   # IoU ~0.8 with track 1; the other is far
    assert out.detection_ids.tolist() == [1, 2]
    tr2 = Tracker(TrackerConfig(birth_hits=1, max_distance_m=0.05, initial_velocity_std=1e-3))
    tr2.update(dets([0, 0, 1]), stamp_s=0.0)
    out = tr2.update(dets([0.06, 0, 1]), stamp_s=DT)                # beyond the 5 cm gate: a new track
    assert out.detection_ids.tolist() == [2]
    assert out.ids.tolist() == [1, 2] and out.misses.tolist() == [1, 0]


def test_birth_after_n_hits_and_tentative_death_at_first_miss():
    tr = Tracker(TrackerConfig(birth_hits=3, initial_velocity_std=1e-3))
    p = [0, 0, 1]
    assert len(tr.update(dets(p), 0.0)) == 0
    out = tr.update(dets(p), DT)
    assert len(out) == 0 and out.detection_ids.tolist() == [-1]
    tr.update(dets(), 2 * DT)                                       # miss: the tentative track dies
    assert tr.num_live == 0
    for k in range(3, 5):
        assert len(tr.update(dets(p), k * DT)) == 0
    out = tr.update(dets(p), 5 * DT)                                # third consecutive hit
    assert out.ids.tolist() == [1] and out.detection_ids.tolist() == [1]


def test_death_after_m_misses_and_id_kept_across_gaps_up_to_max_gap():
    cfg = TrackerConfig(birth_hits=1, death_misses=2, max_gap=4, initial_velocity_std=1e-3)
    tr = Tracker(cfg)
    p = [0, 0, 1]
    assert tr.update(dets(p), 0.0).ids.tolist() == [1]
    assert tr.update(dets(), DT).ids.tolist() == [1]               # 1 miss: still published, coasting
    assert tr.update(dets(), 2 * DT).ids.tolist() == []            # 2 misses: lost, not published
    tr.update(dets(), 3 * DT)
    tr.update(dets(), 4 * DT)                                       # 4 misses = max_gap: still kept
    out = tr.update(dets(p), 5 * DT)
    assert out.ids.tolist() == [1] and out.detection_ids.tolist() == [1]   # same id after a 4-frame gap
    for k in range(6, 11):                                          # 5 misses > max_gap: deleted
        tr.update(dets(), k * DT)
    assert tr.num_live == 0
    assert tr.update(dets(p), 11 * DT).ids.tolist() == [2]         # a new id, never a reused one


def test_class_is_the_score_weighted_vote():
    tr = Tracker(TrackerConfig(birth_hits=1, initial_velocity_std=1e-3))
    p = [0, 0, 1]
    for k, (c, s) in enumerate([(0, 0.9), (1, 0.5), (1, 0.5), (2, 0.3)]):
        out = tr.update(dets(p, classes=[c], scores=[s]), k * DT)
    assert out.class_ids.tolist() == [1] and out.class_names == ['ball']   # 1.0 for ball > 0.9 cube > 0.3 can
    assert out.scores.tolist() == [0.3]                                      # the last matched detection's


def test_sizes_stay_on_the_track_axes_when_the_detector_swaps_axes():
    tr = Tracker(TrackerConfig(birth_hits=1, initial_velocity_std=1e-3))
    R, size = rot_z(0.2), np.array([[0.1, 0.2, 0.3]])
    P = np.array([[0, 1.0, 0], [-1, 0, 0], [0, 0, 1]])              # a 90 degree turn about z: same box
    tr.update(dets([0, 0, 1], sizes=size, rotations=R[None]), 0.0)
    out = tr.update(dets([0, 0, 1], sizes=size @ np.abs(P), rotations=(R @ P)[None]), DT)
    np.testing.assert_allclose(out.sizes[0], size[0], atol=1e-9)
    np.testing.assert_allclose(np.abs(out.quaternions_xyzw[0] @ rotation_to_quaternion(R)), 1.0, atol=1e-9)


def test_stamp_step_back_resets_and_ids_keep_counting():
    tr = Tracker(TrackerConfig(birth_hits=1))
    tr.update(dets([0, 0, 1]), 10.0)
    out = tr.update(dets([0, 0, 1]), 9.0)                            # bag loop: stamps jumped back
    assert out.ids.tolist() == [2] and tr.resets == 1
    tr.reset()
    assert tr.num_live == 0 and tr.update(dets([0, 0, 1]), 0.0).ids.tolist() == [3]


def test_min_score_and_max_tracks_bound_the_work():
    tr = Tracker(TrackerConfig(birth_hits=1, max_tracks=10, min_score=0.5))
    centres = np.stack([np.arange(40) * 0.5, np.zeros(40), np.ones(40)], axis=1)
    scores = np.where(np.arange(40) % 2 == 0, 0.9, 0.1)
    out = tr.update(dets(*centres, scores=scores), 0.0)
    assert tr.num_live == 10 and len(out) == 10
    assert (out.detection_ids[1::2] == -1).all()                     # low scores are never tracked


def _synthetic_crossing(frames=60, seed=0):
    """Three boxes moving at constant velocity; two cross in x at different depths; every fifth detection
    dropped for object 0; small noise. Returns per frame (detections, true object id per detection)."""
    rng = np.random.default_rng(seed)
    p0 = np.array([[-0.3, 0.0, 0.8], [0.3, 0.0, 0.95], [0.0, 0.2, 0.7]])
    v = np.array([[0.4, 0.0, 0.0], [-0.4, 0.0, 0.0], [0.0, -0.1, 0.05]])
    seq = []
    for k in range(frames):
        keep = [i for i in range(3) if not (i == 0 and k % 5 == 4)]
        c = p0[keep] + v[keep] * k / 30.0 + rng.normal(0, 0.003, (len(keep), 3))
        seq.append((dets(*c, classes=keep), keep))
    return seq


def test_ids_stable_on_a_synthetic_sequence_with_crossings_and_dropouts():
    tr = Tracker(TrackerConfig(birth_hits=3, death_misses=3, max_gap=10))
    owner: dict[int, int] = {}                                      # true object -> track id
    for k, (d, truth) in enumerate(_synthetic_crossing()):
        out = tr.update(d, stamp_s=k / 30.0)
        for tid, obj in zip(out.detection_ids, truth):
            if tid >= 0:
                assert owner.setdefault(obj, int(tid)) == tid, f'frame {k}: object {obj} switched id'
    assert sorted(owner) == [0, 1, 2] and len(set(owner.values())) == 3


@pytest.mark.slow
def test_ids_stable_on_a_rendered_sequence_with_moving_objects():
    """Ground-truth boxes of a generated scene whose objects slide (scenes.sequence): every object keeps one id."""
    from string_perception.scenes import SceneConfig
    from string_perception.scenes.sequence import SequenceConfig, generate_sequence
    seq = generate_sequence(2_000_000_000, SequenceConfig(frames=30), SceneConfig(min_objects=4, max_objects=6))
    assert any(np.linalg.norm(f.velocities, axis=1).max() > 0.05 for f in seq if len(f.object_ids))
    tr = Tracker(TrackerConfig(birth_hits=2))
    owner: dict[int, int] = {}
    for f in seq:
        fr = f.frame
        out = tr.update(dets(*fr.translations, sizes=fr.sizes, rotations=fr.rotations, classes=fr.labels), f.stamp_s)
        for tid, obj in zip(out.detection_ids, f.object_ids):
            if tid >= 0:
                assert owner.setdefault(int(obj), int(tid)) == tid
    assert len(owner) >= 2 and len(set(owner.values())) == len(owner)


def test_config_validation():
    with pytest.raises(ValueError, match='max_gap'):
        TrackerConfig(death_misses=5, max_gap=2)
    with pytest.raises(ValueError, match='association'):
        TrackerConfig(association='mahalanobis')
    with pytest.raises(ValueError):
        TrackerConfig(birth_hits=0)

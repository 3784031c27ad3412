"""benchmarks/tracking.py's scoring adapter: CLEAR MOT figures with known answers on tiny sequences."""
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import tracking as bench
from string_perception.runtime.postprocess import Detections
from string_perception.runtime.tracking import TrackerConfig

mm = pytest.importorskip('motmetrics')


def _sequence(frames=10):
    """Two static objects 0.5 m apart; detections exactly on them."""
    centres = np.array([[0.0, 0, 1], [0.5, 0, 1]])
    seq = [SimpleNamespace(stamp_s=k / 30.0, object_ids=np.array([0, 1]), frame=SimpleNamespace(translations=centres))
           for k in range(frames)]
    dets = [Detections.from_boxes(centres, np.full((2, 3), 0.1)) for _ in range(frames)]
    return seq, dets


def _overall(accs):
    return mm.metrics.create().compute_many(accs, metrics=bench.METRICS, names=[str(i) for i in range(len(accs))],
                                            generate_overall=True).loc['OVERALL']


def test_perfect_inputs_give_mota_one_and_birth_delay_counts_as_misses():
    seq, dets = _sequence()
    acc, times = bench.score_sequence(mm, seq, dets, TrackerConfig(birth_hits=1), 0.1)
    r = _overall([acc])
    assert (r['mota'], r['motp'], r['num_switches'], r['num_misses'], r['num_objects']) == (1.0, 0.0, 0, 0, 20)
    assert len(times) == 10
    acc, _ = bench.score_sequence(mm, seq, dets, TrackerConfig(birth_hits=3), 0.1)
    r = _overall([acc])                                      # 2 frames x 2 objects before the ids exist
    assert r['num_misses'] == 4 and r['mota'] == pytest.approx(1 - 4 / 20) and r['num_false_positives'] == 0


def test_a_gap_longer_than_max_gap_is_one_id_switch_and_one_fragmentation():
    seq, dets = _sequence(12)
    for k in (4, 5, 6):                                      # object 0 undetected for 3 frames
        dets[k] = Detections.from_boxes(dets[k].translations[1:], dets[k].sizes[1:])
    cfg = TrackerConfig(birth_hits=1, death_misses=1, max_gap=1)
    r = _overall([bench.score_sequence(mm, seq, dets, cfg, 0.1)[0]])
    assert (r['num_switches'], r['num_fragmentations'], r['num_misses']) == (1, 1, 3)
    cfg = TrackerConfig(birth_hits=1, death_misses=1, max_gap=5)   # the gap fits: the id survives
    r = _overall([bench.score_sequence(mm, seq, dets, cfg, 0.1)[0]])
    assert (r['num_switches'], r['num_fragmentations'], r['num_misses']) == (0, 1, 3)


def test_noisy_detections_drop_and_add_boxes():
    frame = SimpleNamespace(num_objects=4, translations=np.zeros((4, 3)) + [0, 0, 1], sizes=np.full((4, 3), 0.1),
                            rotations=np.broadcast_to(np.eye(3), (4, 3, 3)), labels=np.array([0, 1, 2, 3]))
    rng = np.random.default_rng(0)
    assert len(bench.noisy_detections(frame, rng, 0.0, 1.0, 0.0)) == 0          # everything dropped
    d = bench.noisy_detections(frame, rng, 0.0, 0.0, 0.0)
    np.testing.assert_array_equal(d.translations, frame.translations)           # no noise, nothing dropped
    assert len(bench.noisy_detections(frame, rng, 0.0, 0.0, 50.0)) > 4           # clutter added

"""The one learning-rate schedule (training/schedule.py): known answers, and the curves every trainer relied on."""
import math

import pytest

from string_perception.training.schedule import lr_factor


def test_known_answers_of_the_detector_schedule_bit_for_bit():
    """Values of the detector's schedule before it moved out of training/train.py (computed there), exact: a
    resumed run or a re-run of a recipe follows the same learning rates to the last bit."""
    known = {(0, 100, 1000, 0.02): 0.01, (50, 100, 1000, 0.02): 0.51, (100, 100, 1000, 0.02): 1.0,
             (550, 100, 1000, 0.02): 0.51, (777, 100, 1000, 0.02): 0.16110723746441175,
             (1000, 100, 1000, 0.02): 0.02, (5000, 100, 7000, 0.02): 0.20949929236097892,
             (7000, 100, 13000, 0.02): 0.45640810789484165, (12999, 100, 13000, 0.02): 0.020000014530695682,
             (250, 100, 1000, 0.0): 0.9330127018922194, (3, 0, 7, 0.0): 0.6112604669781572}
    for args, value in known.items():
        assert lr_factor(*args) == value, args


def test_closed_form_points_warmup_midpoint_floor():
    assert [lr_factor(s, 4, 10) for s in (0, 1, 3)] == [0.25, 0.5, 1.0]          # linear warm-up (s + 1) / warmup
    assert lr_factor(4, 4, 10) == 1.0                                              # the peak right after it
    assert lr_factor(7, 4, 10) == pytest.approx(0.5, abs=1e-15)                    # cosine midpoint
    assert lr_factor(10, 4, 10) == pytest.approx(0.0, abs=1e-15)                   # min_ratio 0: down to 0
    assert lr_factor(400, 100, 400, 0.1) == pytest.approx(0.1, abs=1e-15)
    assert lr_factor(10_000, 100, 400, 0.1) == lr_factor(400, 100, 400, 0.1)       # flat after total_steps
    assert lr_factor(0, 0, 10) == 1.0                                              # no warm-up: starts at the peak
    assert lr_factor(250, 100, 400, 0.1) == pytest.approx(0.1 + 0.9 * 0.5, abs=1e-15)


def test_cosine_is_monotone_and_matches_the_half_cosine_formula():
    f = [lr_factor(s, 10, 510, 0.05) for s in range(600)]
    assert all(a >= b for a, b in zip(f[10:], f[11:]))                            # never rises after warm-up
    for s in range(10, 510):
        want = 0.05 + 0.95 * (1 + math.cos(math.pi * (s - 10) / 500)) / 2
        assert f[s] == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_benchmark_forms_agree_with_the_shared_schedule():
    """The fine-tune study's (warm-up, cosine to 0) and the probe's (cosine to 0, no warm-up) schedules, as they
    were written in benchmarks/ before they called this one: equal up to the rounding of pi * k / n."""
    for steps, warmup in ((300, 100), (1000, 0), (7, 3)):
        for s in range(steps):
            old = (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) /
                                                                          max(steps - warmup, 1)))
            assert lr_factor(s, warmup, steps) == pytest.approx(old, rel=1e-11, abs=1e-15)

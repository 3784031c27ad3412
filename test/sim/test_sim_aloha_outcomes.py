"""Episode outcomes of the transfer-cube and insertion tasks (sim/demos/outcomes.py) on known reward traces: both success rules
and the one failure category each trace belongs to."""
import numpy as np
import pytest

pytest.importorskip('mujoco')  # optional: requirements/sim.txt (sim.demos imports it)

from string_perception.sim.demos.outcomes import (INSERTION_OUTCOMES, OUTCOMES, episode_outcome,
                                                  insertion_outcome, outcome_counts, success_last_step,
                                                  success_max_reward)


def trace(*segments):
    """(reward, steps) segments -> int8 [T]."""
    return np.concatenate([np.full(n, r, np.int8) for r, n in segments])


CASES = [   # trace, outcome, success by max reward, success at the last step
    (trace((0, 400)), 'never_touched', False, False),
    (trace((0, 100), (1, 50), (0, 250)), 'touched_not_lifted', False, False),
    (trace((0, 100), (1, 300)), 'touched_not_lifted', False, False),
    (trace((0, 100), (1, 50), (2, 100), (0, 150)), 'handover_missed', False, False),
    (trace((0, 100), (1, 50), (2, 100), (3, 20), (0, 130)), 'handover_missed', False, False),
    (trace((0, 100), (1, 50), (2, 250)), 'timeout', False, False),
    (trace((0, 100), (1, 50), (2, 100), (3, 5), (2, 145)), 'timeout', False, False),
    (trace((0, 100), (1, 50), (2, 100), (4, 50), (0, 100)), 'dropped', True, False),
    (trace((0, 100), (1, 50), (2, 100), (4, 50), (3, 100)), 'dropped', True, False),
    (trace((0, 100), (1, 50), (2, 100), (4, 150)), 'success', True, True),
    (trace((0, 100), (1, 50), (2, 100), (4, 20), (2, 20), (4, 110)), 'success', True, True),
]


@pytest.mark.parametrize('rewards,outcome,by_max,by_last', CASES)
def test_known_traces(rewards, outcome, by_max, by_last):
    assert episode_outcome(rewards) == outcome
    assert success_max_reward(rewards) is by_max and success_last_step(rewards) is by_last


def test_counts_cover_every_outcome_in_order():
    counts = outcome_counts(episode_outcome(c[0]) for c in CASES)
    assert tuple(counts) == OUTCOMES and sum(counts.values()) == len(CASES)
    assert counts == {'success': 2, 'dropped': 2, 'never_touched': 1, 'touched_not_lifted': 2,
                      'handover_missed': 2, 'timeout': 2}
    with pytest.raises(ValueError, match='unknown'):
        outcome_counts(['flew_away'])


def test_empty_or_2d_traces_are_refused():
    for bad in (np.zeros(0), np.zeros((2, 3))):
        with pytest.raises(ValueError):
            episode_outcome(bad)


INSERTION_CASES = [   # trace, insertion outcome
    (trace((0, 400)), 'never_grasped'),
    (trace((0, 150), (1, 250)), 'not_lifted'),
    (trace((0, 150), (1, 40), (2, 210)), 'never_met'),
    (trace((0, 150), (1, 40), (2, 100), (3, 50), (2, 60)), 'pin_missed'),
    (trace((0, 150), (1, 40), (2, 100), (3, 10), (4, 40), (3, 60)), 'pulled_out'),
    (trace((0, 150), (1, 40), (2, 100), (3, 10), (4, 100)), 'success'),
    (trace((0, 150), (4, 5), (0, 245)), 'pulled_out'),
]


@pytest.mark.parametrize('rewards,outcome', INSERTION_CASES)
def test_known_insertion_traces(rewards, outcome):
    assert insertion_outcome(rewards) == outcome
    assert success_max_reward(rewards) is (outcome in ('success', 'pulled_out'))
    assert success_last_step(rewards) is (outcome == 'success')


def test_insertion_counts_use_their_own_table():
    counts = outcome_counts((insertion_outcome(c[0]) for c in INSERTION_CASES), INSERTION_OUTCOMES)
    assert tuple(counts) == INSERTION_OUTCOMES and sum(counts.values()) == len(INSERTION_CASES)
    with pytest.raises(ValueError):
        outcome_counts(['pin_missed'])                         # not a transfer-cube outcome

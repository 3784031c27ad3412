"""How a transfer-cube or insertion episode ended, from its per-step gym-aloha rewards
(transfer_cube.TransferCubeScene.reward, insertion.InsertionScene.reward; both 0..4, 4 = done).

Rewards: 0 nothing, 1 the right fingers touch the cube (on the table), 2 the right fingers hold it off the table,
3 the left fingers touch it while it touches the table, 4 the left fingers hold it off the table (transferred).

Two success rules are in use and they differ on episodes that drop the cube after the hand-over:

- :func:`success_max_reward`: reward 4 at ANY step (gym-aloha's ``is_success``, ACT's and LeRobot's criterion);
- :func:`success_last_step`: reward 4 at the last step (this repository's earlier studies).

:func:`episode_outcome` puts every episode in exactly one of :data:`OUTCOMES`:

=====================  ======================================================================================
``success``            reward 4 at the last step (a success by both rules)
``dropped``            reached 4, lost it before the end (success by the max-reward rule only)
``never_touched``      max reward 0: the right fingers never touched the cube
``touched_not_lifted`` max reward 1: touched, never held off the table
``handover_missed``    max reward 2 or 3, the right arm no longer holds the cube aloft at the end (dropped it
                       before / during the hand-over, or the left touched it only on the table)
``timeout``            max reward 2 or 3 and the right arm still holds the cube aloft at the last step (reward 2):
                       the hand-over had not happened yet when the episode ended
=====================  ======================================================================================

Insertion rewards: 1 both grippers touch their object (the left the socket, the right the peg), 2 ... with neither
on the table, 3 the peg touches the socket with neither on the table, 4 the peg touches the pin (inserted).
:func:`insertion_outcome` puts every insertion episode in exactly one of :data:`INSERTION_OUTCOMES`:

=====================  ======================================================================================
``success``            reward 4 at the last step (a success by both rules)
``pulled_out``         reached 4, the peg left the pin before the end (success by the max-reward rule only)
``never_grasped``      max reward 0: the two grippers never touched their objects at the same time
``not_lifted``         max reward 1: both touched, never both held off the table
``never_met``          max reward 2: both held aloft, the peg never touched the socket
``pin_missed``         max reward 3: the peg touched the socket aloft but never reached the pin (blocked at the
                       socket's end plates, or the push fell short)
=====================  ======================================================================================
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import numpy as np

from .transfer_cube import MAX_REWARD

__all__ = ['INSERTION_OUTCOMES', 'OUTCOMES', 'episode_outcome', 'insertion_outcome', 'outcome_counts',
           'success_last_step', 'success_max_reward']

OUTCOMES = ('success', 'dropped', 'never_touched', 'touched_not_lifted', 'handover_missed', 'timeout')
INSERTION_OUTCOMES = ('success', 'pulled_out', 'never_grasped', 'not_lifted', 'never_met', 'pin_missed')


def _rewards(rewards) -> np.ndarray:
    r = np.asarray(rewards)
    if r.ndim != 1 or len(r) == 0:
        raise ValueError(f'rewards must be a non-empty 1-D sequence, got shape {r.shape}')
    return r


def success_max_reward(rewards) -> bool:
    """gym-aloha / ACT: reward 4 at any step of the episode."""
    return bool(_rewards(rewards).max() == MAX_REWARD)


def success_last_step(rewards) -> bool:
    """The earlier studies' rule: reward 4 at the last step."""
    return bool(_rewards(rewards)[-1] == MAX_REWARD)


def episode_outcome(rewards) -> str:
    """One of OUTCOMES for a reward trace int [T] (see the module docstring)."""
    r = _rewards(rewards)
    top, last = int(r.max()), int(r[-1])
    if top == MAX_REWARD:
        return 'success' if last == MAX_REWARD else 'dropped'
    if top == 0:
        return 'never_touched'
    if top == 1:
        return 'touched_not_lifted'
    return 'timeout' if last == 2 else 'handover_missed'


def insertion_outcome(rewards) -> str:
    """One of INSERTION_OUTCOMES for an insertion reward trace int [T] (see the module docstring)."""
    r = _rewards(rewards)
    top, last = int(r.max()), int(r[-1])
    if top == MAX_REWARD:
        return 'success' if last == MAX_REWARD else 'pulled_out'
    return INSERTION_OUTCOMES[2 + top]


def outcome_counts(outcomes: Iterable[str], table: tuple[str, ...] = OUTCOMES) -> dict[str, int]:
    """{outcome: count} over `table` (OUTCOMES or INSERTION_OUTCOMES; zeros included, in table order)."""
    c = Counter(outcomes)
    unknown = set(c) - set(table)
    if unknown:
        raise ValueError(f'unknown outcomes {sorted(unknown)}')
    return {k: c.get(k, 0) for k in table}

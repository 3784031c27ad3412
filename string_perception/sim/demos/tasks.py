"""The two gym-aloha tasks the policy pipeline runs, behind one interface: which scene to build, which scripted
demonstrator drives it, what the privileged state is and how an episode is judged.

    task = get_task('insertion')
    scene = task.make_scene(); scene.reset(seed)
    demo = task.make_demonstrator(scene)          # demo(step) -> 14-D action
    task.object_xyz(scene)                        # [6] peg then socket centre now (transfer_cube: [3] the cube)
    task.outcome(rewards)                         # one of task.outcomes

The privileged state of an episode is its objects' positions at step 0, scaled to about [-1, 1] by the middle of
the reset ranges and a common scale (:meth:`AlohaTask.scaled_state`); the privileged policy acts on it and the
two-stage vision policy estimates it from the camera (policy/localiser.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...aloha_tasks import ALOHA_TASK_NAMES
from .aloha_scene import AlohaScene
from .insertion import EPISODE_STEPS as INSERTION_STEPS
from .insertion import PEG_RANGE, SOCKET_RANGE, InsertionScene
from .insertion_script import InsertionDemonstrator, InsertionScript
from .outcomes import INSERTION_OUTCOMES, OUTCOMES, episode_outcome, insertion_outcome
from .scripted import TransferCubeDemonstrator, TransferScript
from .transfer_cube import BOX_RANGE, EPISODE_STEPS as TRANSFER_STEPS
from .transfer_cube import MAX_REWARD, TransferCubeScene

__all__ = ['AlohaTask', 'TASKS', 'TASK_NAMES', 'FILE_TASK_PREFIX', 'get_task', 'file_task', 'task_of_file']

STATE_SCALE = 0.1                       # metres -> about [-1, 1] over the 0.1-0.2 m wide reset ranges


def _middle(*ranges: np.ndarray) -> np.ndarray:
    return np.concatenate([r.mean(axis=1) for r in ranges])                           # [3 * objects]


@dataclass(frozen=True)
class AlohaTask:
    name: str
    scene_class: type
    script_class: type                   # the demonstrator's waypoint script (a frozen dataclass)
    demonstrator_class: type             # (scene, script) -> callable step -> [14] action
    objects: tuple[str, ...]             # what object_xyz lists, 3 numbers each
    state_centre: np.ndarray             # [3 * objects] middle of the reset ranges (m)
    steps: int
    max_reward: int
    outcome: Callable[[Any], str]        # rewards [T] -> one of outcomes
    outcomes: tuple[str, ...]

    @property
    def state_dim(self) -> int:
        return 3 * len(self.objects)

    def make_scene(self) -> AlohaScene:
        return self.scene_class()

    def make_demonstrator(self, scene: AlohaScene, script=None) -> Callable[[int], np.ndarray]:
        """The scripted demonstrator of a scene just reset (``script`` None: the task's default script)."""
        return self.demonstrator_class(scene, self.script_class() if script is None else script)

    def object_xyz(self, scene: AlohaScene) -> np.ndarray:
        """float64 [state_dim]: the task objects' centres now (world, m), in ``objects`` order."""
        return np.asarray(scene.object_positions(), np.float64)

    def scaled_state(self, object_xyz) -> np.ndarray:
        """float32 [..., state_dim]: positions -> the privileged policy's input, about [-1, 1]."""
        xyz = np.asarray(object_xyz, np.float64)
        if xyz.shape[-1] != self.state_dim:
            raise ValueError(f'{self.name}: object_xyz has {xyz.shape[-1]} numbers, expected {self.state_dim}')
        return ((xyz - self.state_centre) / STATE_SCALE).astype(np.float32)


TASKS: dict[str, AlohaTask] = {
    'transfer_cube': AlohaTask('transfer_cube', TransferCubeScene, TransferScript, TransferCubeDemonstrator,
                               ('cube',), _middle(BOX_RANGE), TRANSFER_STEPS, MAX_REWARD, episode_outcome,
                               OUTCOMES),
    'insertion': AlohaTask('insertion', InsertionScene, InsertionScript, InsertionDemonstrator, ('peg', 'socket'),
                           _middle(PEG_RANGE, SOCKET_RANGE), INSERTION_STEPS, MAX_REWARD, insertion_outcome,
                           INSERTION_OUTCOMES),
}
TASK_NAMES = tuple(TASKS)
if TASK_NAMES != ALOHA_TASK_NAMES:          # the MuJoCo-free list parsers and launch files offer
    raise ImportError(f'sim/demos/tasks.py implements {TASK_NAMES}, aloha_tasks.py lists {ALOHA_TASK_NAMES}')


FILE_TASK_PREFIX = 'aloha_'      # how exported files name a task (PolicyMetadata.task, perception policy_task)


def file_task(task: str) -> str:
    """A task name -> the string exported files carry (transfer_cube -> aloha_transfer_cube)."""
    return FILE_TASK_PREFIX + get_task(task).name


def task_of_file(text: str, default: str | None = None) -> str:
    """The task of a file's task string ('aloha_insertion', 'aloha_transfer_cube (linear TEST policy)'); a string
    naming no task gives ``default`` (None: ValueError)."""
    words = text.split()
    name = words[0][len(FILE_TASK_PREFIX):] if words and words[0].startswith(FILE_TASK_PREFIX) else ''
    if name in TASKS:
        return name
    if default is None:
        raise ValueError(f'{text!r} names no ALOHA task (expected {FILE_TASK_PREFIX}<one of {TASK_NAMES}>)')
    return default


def get_task(name: str) -> AlohaTask:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f'unknown task {name!r}; expected one of {TASK_NAMES}') from None

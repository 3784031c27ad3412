"""PolicyConfig: everything a behaviour-cloning run depends on (saved in every checkpoint as a plain dict)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..aloha_tasks import ALOHA_TASK_NAMES, DEFAULT_ALOHA_TASK

OBSERVATIONS = ('vision', 'privileged')
TASKS = ALOHA_TASK_NAMES


@dataclass
class PolicyConfig:
    # data
    task: str = DEFAULT_ALOHA_TASK              # the demos' task (sim/demos/tasks.py): transfer_cube | insertion
    demos: str = 'runs/aloha_policy/demos'      # demo_<seed>.npz (sim/demos/rollout.record_demonstration)
    val_episodes: int = 5                       # the last demos (by seed) are held out for the validation loss
    episodes: int = 0                           # use the first N demos by seed (0: all of the directory); the
                                                # last val_episodes of them are the validation split
    sample_every: int = 0                       # 0: one sample per recorded frame (the demo's frame_steps);
                                                # n: one per n-th control step (privileged only: no frames needed)
    # observation: 'vision' = the ViTD policy embedding of the top camera; 'privileged' = the task objects'
    # initial positions instead (no camera): separates behaviour-cloning error from vision error
    observation: str = 'vision'
    encoder_checkpoint: str = 'models/vitd_tiny_cayley.pt'   # a ViTD detector checkpoint (its architecture)
    finetune: bool = False                      # False: encoder frozen, tokens cached once (fp16), only the
                                                # PolicyHead + chunk head train; True: end to end (slow on CPU)
    encoder_lr: float = 1e-5                    # with finetune
    pool_points: bool = False                   # experimental: the chunk head also gets the 3D point the
                                                # PolicyHead attends to (model.BCPolicy.embedding_from_tokens)
    # experimental: auxiliary L1 from the embedding (linear) to the cube's initial position (privileged, training
    # only) on frames before aux_until_step (the cube still rests there), to make the PolicyHead find the cube
    aux_cube_weight: float = 0.0
    aux_until_step: int = 120
    # action chunks (ACT): K actions at 50 Hz
    chunk_size: int = 50
    query_every: int = 10
    temporal_ensemble_m: float = 0.01
    # chunk head: MLP on [embedding, normalised qpos] -> K x 14 normalised actions
    hidden: int = 512
    layers: int = 3
    dropout: float = 0.1
    # optimisation
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 100
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    seed: int = 0
    # logging / checkpoints
    log_every: int = 50
    val_every: int = 500                        # also writes last.pt (and best.pt on a lower validation L1)
    out: str = 'runs/aloha_policy/bc'
    threads: int = 1
    encode_batch: int = 32                      # frames per encoder forward when caching tokens

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f'task must be one of {TASKS}, got {self.task!r}')
        if self.observation not in OBSERVATIONS:
            raise ValueError(f'observation must be one of {OBSERVATIONS}, got {self.observation!r}')
        if not 1 <= self.query_every <= self.chunk_size:
            raise ValueError(f'query_every must be in 1..chunk_size, got {self.query_every}')
        if self.episodes < 0 or self.sample_every < 0:
            raise ValueError('episodes and sample_every must be >= 0')
        if self.sample_every and self.observation != 'privileged':
            raise ValueError('sample_every needs observation=privileged (vision samples are the recorded frames)')
        if self.finetune and self.observation != 'vision':
            raise ValueError('finetune needs observation=vision')

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> 'PolicyConfig':
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

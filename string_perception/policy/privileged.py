"""PrivilegedActor: the act() of a privileged BC checkpoint (train_bc --observation privileged) for
sim/demos/rollout.run_episode: the task objects' positions seen at the episode's step 0 (scaled,
data.privileged_state) and
the joint state -> an action chunk [K,14]. It reads no image, so it runs with ``RolloutConfig(render=False)``
(physics only: the baseline that separates behaviour-cloning error from vision error)."""
from __future__ import annotations

import numpy as np
import torch

from ..sim.demos.rollout import Observation, RolloutConfig
from .data import privileged_state
from .train_bc import load_policy

__all__ = ['PrivilegedActor']


class PrivilegedActor:
    """act(obs) -> chunk float32 [K,14]; the object state is latched at step 0 (obs.step == 0 starts an
    episode)."""

    def __init__(self, checkpoint):
        policy, self.head, self.cfg, _ = load_policy(checkpoint)
        if policy is not None:
            raise ValueError(f'{checkpoint}: a vision checkpoint, not a privileged one')
        self.state: torch.Tensor | None = None                                        # [1,D]

    @torch.no_grad()
    def __call__(self, obs: Observation) -> np.ndarray:
        if obs.step == 0 or self.state is None:
            state = privileged_state(obs.object_xyz, self.cfg.task)
            self.state = torch.as_tensor(state, dtype=torch.float32)[None]            # [1,D]
        qpos = torch.as_tensor(obs.qpos, dtype=torch.float32)[None]                  # [1,14]
        return self.head(self.state, qpos)[0].numpy()                                 # [K,14]

    def rollout_config(self, **overrides) -> RolloutConfig:
        """Physics-only RolloutConfig with the checkpoint's chunk size, query interval and ensembling weight."""
        base = dict(task=self.cfg.task, chunk_size=self.cfg.chunk_size, query_every=self.cfg.query_every,
                    temporal_ensemble_m=self.cfg.temporal_ensemble_m, render=False)
        return RolloutConfig(**{**base, **overrides})

"""Distributed data parallel helpers: join / leave the torchrun process group, rank info, cross-rank reductions.

``setup_distributed`` joins the group when started by torchrun (``WORLD_SIZE > 1``; gloo on CPU, nccl on CUDA) and
returns this process's :class:`DistInfo`; a plain ``python`` start is rank 0 of 1 and every helper here is then a
no-op. Each rank trains on its own shard of the training seeds (``training/data.py``: ``shard_indices``, ``ShardSampler``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


@dataclass
class DistInfo:
    """This process's place in the run: global rank, number of ranks, rank on this machine, its device."""
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device('cpu')

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> CUDA when available else CPU; plain ``cuda`` -> this rank's GPU ``cuda:<local_rank>``."""
    if name == 'auto':
        name = 'cuda' if torch.cuda.is_available() else 'cpu'
    if name == 'cuda':
        name = f'cuda:{local_rank}'
    return torch.device(name)


def setup_distributed(device: str) -> DistInfo:
    """Join the process group when started by torchrun (``WORLD_SIZE > 1``); gloo on CPU, nccl on CUDA."""
    world = int(os.environ.get('WORLD_SIZE', '1'))
    rank = int(os.environ.get('RANK', '0'))
    local_rank = int(os.environ.get('LOCAL_RANK', '0'))
    dev = resolve_device(device, local_rank)
    if world > 1 and not dist.is_initialized():
        if dev.type == 'cuda':
            torch.cuda.set_device(dev)
        dist.init_process_group('nccl' if dev.type == 'cuda' else 'gloo', rank=rank, world_size=world)
    return DistInfo(rank, world, local_rank, dev)


def cleanup_distributed() -> None:
    """Leave the process group (no-op when none was joined)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_mean(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """The mean of each value over all ranks (the values themselves on one rank)."""
    if not info.enabled or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    if info.device.type == 'cuda':
        t = t.to(info.device)
    dist.all_reduce(t)
    return {k: float(v) / info.world_size for k, v in zip(keys, t.tolist())}


def max_rank_divergence(model: torch.nn.Module, info: DistInfo) -> float:
    """Largest |weight - rank 0's weight| over all ranks (0.0 when DDP keeps the replicas in sync)."""
    if not info.enabled:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1) for p in unwrap(model).parameters()])   # [P]
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    diff = (flat - ref).abs().max().reshape(1)                                        # [1]
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a ``DistributedDataParallel`` wrapper (the model itself when not wrapped)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


__all__ = ['DistInfo', 'resolve_device', 'setup_distributed', 'cleanup_distributed', 'all_reduce_mean',
           'max_rank_divergence', 'unwrap']

"""Demonstrations -> behaviour-cloning samples: one per observed frame (sim/demos/rollout.record_demonstration),
with the joint state of that step, the next K actions as the chunk target and a mask that is False past the
episode's end (ACT's padding). Frames go through runtime.prepare_inputs, the perception node's own preprocessing,
so the exported perception model sees the same inputs at rollout. With a frozen encoder the encoder tokens of every
frame are computed once and cached (fp16) next to the demos."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from ..runtime.preprocess import prepare_inputs
from ..sim.demos.tasks import STATE_SCALE, get_task
from ..aloha_tasks import LEGACY_TASK       # demos recorded before tasks.py: key cube_xyz, no task

BOX_SCALE = STATE_SCALE                     # metres per unit of the scaled privileged state (every task)
STD_FLOOR = 1e-2


def load_demos(directory) -> list[dict]:
    """Every demo_*.npz of a directory as a dict of arrays, in seed order; demos of the former layout (key
    ``cube_xyz``, no ``task``) read as transfer-cube demos with ``object_xyz``. All must be of one task."""
    demos = []
    for p in sorted(Path(directory).glob('demo_*.npz')):
        with np.load(p) as z:
            d = {k: z[k] for k in z.files}
        if 'object_xyz' not in d:
            d['object_xyz'], d['task'] = d.pop('cube_xyz'), np.str_(LEGACY_TASK)
        demos.append(d)
    if not demos:
        raise FileNotFoundError(f'no demo_*.npz in {directory}')
    tasks = {demo_task(d) for d in demos}
    if len(tasks) > 1:
        raise ValueError(f'{directory}: demos of several tasks {sorted(tasks)}')
    return sorted(demos, key=lambda d: int(d['seed']))


def demo_task(demo: dict) -> str:
    """The task name a demo was recorded on (tasks.TASKS)."""
    return str(demo.get('task', LEGACY_TASK))


def chunk_target(actions: np.ndarray, t: int, chunk_size: int) -> tuple[np.ndarray, np.ndarray]:
    """actions [T,J] -> (actions[t:t+K] [K,J] padded with the last action, mask [K] True where t+i < T)."""
    idx = np.arange(t, t + chunk_size)
    mask = idx < len(actions)
    return actions[np.minimum(idx, len(actions) - 1)], mask


def masked_l1(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean |pred - target| over the valid steps: pred/target [B,K,J], mask [B,K] bool."""
    err = (pred - target).abs().mean(-1)                                   # [B,K]
    m = mask.to(err.dtype)
    return (err * m).sum() / m.sum().clamp_min(1.0)


def privileged_state(object_xyz, task: str = LEGACY_TASK) -> np.ndarray:
    """The privileged baseline's 'embedding': the task objects' initial positions, scaled to about [-1, 1]
    ([..., 3 * objects]: the cube; the peg then the socket)."""
    return get_task(task).scaled_state(object_xyz)


def object_errors_m(pred, state):
    """Per-object distance (m) between scaled states: pred / state [S, 3 * objects] -> [S, objects]."""
    diff = (pred - state).reshape(len(state), -1, 3)                        # [S,O,3] scaled units
    norm = diff.norm(dim=-1) if hasattr(diff, 'norm') else np.linalg.norm(diff, axis=-1)
    return norm * BOX_SCALE


def statistics(demos: list[dict]) -> dict[str, np.ndarray]:
    """Per-joint mean / std (floored) of qpos and actions over the given demos: the normalisation."""
    q = np.concatenate([d['qpos'] for d in demos])                          # [sum T,J]
    a = np.concatenate([d['action'] for d in demos])
    return {'qpos_mean': q.mean(0), 'qpos_std': np.maximum(q.std(0), STD_FLOOR),
            'action_mean': a.mean(0), 'action_std': np.maximum(a.std(0), STD_FLOOR)}


@dataclass
class Samples:
    """S samples over F frames (here S = F: one sample per observed frame)."""
    frame: np.ndarray        # int64 [S]      index into the frame arrays / token cache
    step: np.ndarray         # int64 [S]      the frame's control step in its episode
    qpos: np.ndarray         # float32 [S,J]
    target: np.ndarray       # float32 [S,K,J]
    mask: np.ndarray         # bool [S,K]
    state: np.ndarray        # float32 [S,D]  privileged_state of the episode's objects (D = 3 per object)
    seeds: tuple             # the episodes' seeds

    def __len__(self) -> int:
        return len(self.frame)

    def batch(self, idx: np.ndarray) -> dict[str, torch.Tensor]:
        return {'frame': torch.as_tensor(self.frame[idx]), 'step': torch.as_tensor(self.step[idx]),
                'qpos': torch.as_tensor(self.qpos[idx]),
                'target': torch.as_tensor(self.target[idx]), 'mask': torch.as_tensor(self.mask[idx]),
                'state': torch.as_tensor(self.state[idx])}


def sample_steps(demo: dict, sample_every: int = 0) -> np.ndarray:
    """The control steps a demo gives samples at: its recorded frame_steps (0), or every n-th step (n > 0)."""
    if sample_every < 0:
        raise ValueError(f'sample_every must be >= 0, got {sample_every}')
    return np.asarray(demo['frame_steps']) if sample_every == 0 else np.arange(0, len(demo['action']), sample_every)


def build_samples(demos: list[dict], chunk_size: int, frame_offset: int = 0, sample_every: int = 0) -> Samples:
    """One sample per observed frame of each demo (or per sample_every-th step: sample_steps); frames numbered
    from frame_offset in demo order (with sample_every > 0 they index no frame: privileged samples only)."""
    frame, step, qpos, target, mask, state = [], [], [], [], [], []
    f = frame_offset
    for d in demos:
        for t in sample_steps(d, sample_every):
            tgt, m = chunk_target(d['action'], int(t), chunk_size)
            frame.append(f)
            step.append(int(t))
            qpos.append(d['qpos'][t])
            target.append(tgt)
            mask.append(m)
            state.append(privileged_state(d['object_xyz'], demo_task(d)))
            f += 1
    return Samples(np.array(frame, np.int64), np.array(step, np.int64), np.stack(qpos).astype(np.float32),
                   np.stack(target).astype(np.float32), np.stack(mask), np.stack(state),
                   tuple(int(d['seed']) for d in demos))


def model_frames(demos: list[dict], model_hw: tuple[int, int]) -> dict[str, np.ndarray]:
    """Every observed frame through runtime.prepare_inputs: image uint8 [F,H,W,3], depth float32 [F,H,W] metres,
    intrinsics float32 [F,3,3]."""
    out = {'image': [], 'depth': [], 'intrinsics': []}
    for d in demos:
        for color, depth in zip(d['color'], d['depth']):
            inp = prepare_inputs(color, depth, d['K'], model_hw, resize_mode='crop')
            for k, v in inp.feed().items():
                out[k].append(v[0])
    return {k: np.stack(v) for k, v in out.items()}


@torch.no_grad()
def encode_tokens(policy, frames: dict[str, np.ndarray], batch: int = 32, progress: bool = True) -> torch.Tensor:
    """Encoder tokens of every frame: float16 [F,N,D]."""
    policy.eval()
    n = len(frames['image'])
    chunks = []
    for i in tqdm(range(0, n, batch), desc='encoding frames', disable=not progress, unit='batch'):
        sl = slice(i, i + batch)
        chunks.append(policy.tokens(torch.as_tensor(frames['image'][sl]), torch.as_tensor(frames['depth'][sl]),
                                    torch.as_tensor(frames['intrinsics'][sl])).to(torch.float16))
    return torch.cat(chunks)                                                  # [F,N,D]


@torch.no_grad()
def encode_points(policy, frames: dict[str, np.ndarray], batch: int = 64) -> torch.Tensor:
    """The tokens' patch points of every frame (tokenizer only, cheap): float32 [F,N,3]."""
    policy.eval()
    n = len(frames['image'])
    return torch.cat([policy.points(torch.as_tensor(frames['image'][i:i + batch]),
                                    torch.as_tensor(frames['depth'][i:i + batch]),
                                    torch.as_tensor(frames['intrinsics'][i:i + batch])) for i in range(0, n, batch)])


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cached_tokens(policy, demos: list[dict], encoder_checkpoint, cache_dir, batch: int = 32,
                  progress: bool = True) -> torch.Tensor:
    """encode_tokens of the demos' frames, cached in cache_dir/tokens_<encoder sha16>_<seeds sha16>.pt."""
    seeds = ','.join(str(int(d['seed'])) + ':' + ','.join(map(str, d['frame_steps'])) for d in demos)
    key = f'{file_sha256(encoder_checkpoint)[:16]}_{hashlib.sha256(seeds.encode()).hexdigest()[:16]}'
    path = Path(cache_dir) / f'tokens_{key}.pt'
    if path.exists():
        return torch.load(path, weights_only=True)
    tokens = encode_tokens(policy, model_frames(demos, policy.vitd.config.image_size), batch, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + '.tmp')
    torch.save(tokens, tmp)
    tmp.replace(path)
    return tokens

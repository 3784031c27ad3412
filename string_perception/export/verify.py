"""Self-verification of an exported file: ONNX Runtime (through `runtime.OnnxModel`, so the runtime's contract and
checksum checks run too) vs the original, unfolded PyTorch model, on random frames and on generated scene frames.

    report = verify_export('models/x.onnx', original_model, precision='fp32')
    print(report.table()); assert report.ok

Every output the file has is compared: boxes, logits, embedding, and tokens when it was exported with them.
Tolerances (max |ONNX − PyTorch| per output, every frame): fp32 1e-4 on boxes (metres), logits, the embedding and
the tokens.
fp16 (encoder Linear/LayerNorm in float16, see deployable.py): 1e-2 + 1e-2 · max|reference| per output: float16
keeps 11 significant bits (relative step 1e-3 per rounding) and the error grows with depth and width. Measured on
the tiny preset (6 layers, width 128, weights perturbed by N(0, 0.05²)): boxes 1.7e-4 m, logits 5e-3 (of |16|),
embedding 9e-4, i.e. 30-200x below the bound; trained weights are expected to use more of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from string_perception.model import ViTD, ViTDConfig
from string_perception.runtime.onnx_runner import OnnxModel

from .deployable import output_names

__all__ = ['TEST_SEED_BASE', 'FP32_ATOL', 'FP16_ATOL', 'FP16_RTOL', 'random_frames', 'scene_frames',
           'ParityReport', 'verify_export', 'tolerance']

TEST_SEED_BASE = 2_000_000_000   # held-out test split (docs/ARCHITECTURE.md seed ranges)
FP32_ATOL = 1e-4
FP16_ATOL = 1e-2
FP16_RTOL = 1e-2

Frames = tuple[np.ndarray, np.ndarray, np.ndarray]   # image uint8[B,H,W,3], depth float32[B,H,W] m, K float32[B,3,3]


def tolerance(precision: str, reference: np.ndarray) -> float:
    """The bound on max |ONNX − PyTorch| for one output (see the module docstring)."""
    if precision == 'fp32':
        return FP32_ATOL
    return FP16_ATOL + FP16_RTOL * float(np.abs(reference).max())


def random_frames(config: ViTDConfig, batch: int = 2, seed: int = 0) -> Frames:
    """Random colours; depth 0.3-3 m with holes of every kind (0, NaN, inf, negative, beyond range); a plausible K."""
    rng = np.random.default_rng(seed)
    H, W = config.image_size
    image = rng.integers(0, 256, (batch, H, W, 3), dtype=np.uint8)
    depth = rng.uniform(0.3, 3.0, (batch, H, W)).astype(np.float32)
    holes = rng.random((batch, H, W))
    depth[holes < 0.05] = 0.0
    depth[(holes >= 0.05) & (holes < 0.08)] = np.nan
    depth[(holes >= 0.08) & (holes < 0.09)] = np.inf
    depth[(holes >= 0.09) & (holes < 0.10)] = -1.0
    depth[(holes >= 0.10) & (holes < 0.11)] = 2 * config.depth_range[1]
    depth[0, : H // 2, : W // 2] = 0.0                                  # a region with no valid patch at all
    f = rng.uniform(0.8, 1.2, batch) * W
    K = np.zeros((batch, 3, 3), np.float32)
    K[:, 0, 0], K[:, 1, 1], K[:, 2, 2] = f, f * rng.uniform(0.97, 1.03, batch), 1.0
    K[:, 0, 2], K[:, 1, 2] = (W - 1) / 2 + rng.uniform(-2, 2, batch), (H - 1) / 2 + rng.uniform(-2, 2, batch)
    return image, depth, K


def scene_frames(config: ViTDConfig, count: int = 2, seed_offset: int = 0) -> Frames:
    """`count` generated scenes (seeds TEST_SEED_BASE + seed_offset + i) rendered at the model's input size."""
    from string_perception.scenes import SceneConfig, generate_frame
    H, W = config.image_size
    scene_cfg = SceneConfig(height=H, width=W)
    frames = [generate_frame(TEST_SEED_BASE + seed_offset + i, scene_cfg) for i in range(count)]
    image = np.stack([f.rgb for f in frames]).astype(np.uint8)                        # [B,H,W,3]
    depth = np.stack([f.depth_mm.astype(np.float32) / 1000.0 for f in frames])        # [B,H,W] m, 0 invalid
    K = np.stack([f.K for f in frames]).astype(np.float32)                            # [B,3,3]
    return image, depth, K


@dataclass
class ParityReport:
    """max |ONNX − PyTorch| per frame source and output, with the bound each is held to."""

    path: str
    precision: str
    provider: str
    diffs: dict[str, dict[str, float]] = field(default_factory=dict)    # source -> output -> max abs diff
    bounds: dict[str, dict[str, float]] = field(default_factory=dict)   # source -> output -> tolerance

    @property
    def ok(self) -> bool:
        return all(self.diffs[s][o] <= self.bounds[s][o] for s in self.diffs for o in self.diffs[s])

    def max_diff(self, output: str) -> float:
        return max(d[output] for d in self.diffs.values())

    def table(self) -> str:
        lines = [f'parity {self.path} ({self.precision}, ONNX Runtime {self.provider} vs PyTorch), max |diff|:']
        for source, d in self.diffs.items():
            cells = '  '.join(f'{o} {d[o]:.2e} (<= {self.bounds[source][o]:.1e})' for o in d)
            lines.append(f'  {source:<8} {cells}')
        lines.append(f'  -> {"OK" if self.ok else "FAILED"}')
        return '\n'.join(lines)


@torch.no_grad()
def _reference(model: ViTD, frames: Frames, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    image, depth, K = (torch.from_numpy(np.ascontiguousarray(a)) for a in frames)
    out = model.eval()(image, depth, K)
    return {name: out[name].numpy() for name in names}


def verify_export(path: str, model: ViTD, *, precision: str, frames: dict[str, Frames] | None = None,
                  threads: int = 1) -> ParityReport:
    """Run the exported file and the original `model` on `frames` (default: 2 random + 2 scene frames)."""
    if frames is None:
        frames = {'random': random_frames(model.config), 'scenes': scene_frames(model.config)}
    onnx_model = OnnxModel(path, ('CPUExecutionProvider',), intra_op_threads=threads, warmup=False)
    report = ParityReport(str(path), precision, onnx_model.provider)
    names = tuple(o for o in output_names(tokens=True) if o in onnx_model.output_names)   # the file's outputs
    for source, fr in frames.items():
        got = onnx_model.run(*fr)
        ref = _reference(model, fr, names)
        report.diffs[source] = {o: float(np.abs(got[o].astype(np.float64) - ref[o]).max()) for o in names}
        report.bounds[source] = {o: tolerance(precision, ref[o]) for o in names}
    return report

"""Detection accuracy of exported files on the held-out test split, next to the PyTorch checkpoint
(``string-perception-export ... --fp16 --eval-frames 200``: the fp16 accuracy loss the issue asks for).

Each ONNX file runs through the runtime's `OnnxModel` behind a small adapter with the call signature of the torch
model, so `training.inference.predict` decodes and scores it exactly as `string-perception-eval-checkpoint` scores the
checkpoint (same scene config as training, test seeds from 2e9, the evaluator's default decoding).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from string_perception.runtime.onnx_runner import OnnxModel

__all__ = ['OnnxAsModel', 'evaluate_exports']


class OnnxAsModel:
    """`OnnxModel` with the interface `training.inference.predict` uses: config, eval()/train(), __call__."""

    def __init__(self, path: str | os.PathLike, config, threads: int = 1):
        self.runner = OnnxModel(path, ('CPUExecutionProvider',), intra_op_threads=threads)
        self.config = config
        self.training = False

    def eval(self) -> 'OnnxAsModel':
        return self

    def train(self, mode: bool = True) -> 'OnnxAsModel':
        return self

    def __call__(self, image: torch.Tensor, depth: torch.Tensor, K: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.runner.run(image.numpy(), depth.numpy().astype(np.float32), K.numpy().astype(np.float32))
        return {k: torch.from_numpy(v) for k, v in out.items()}


def evaluate_exports(model, checkpoint: dict, paths: dict[str, str | os.PathLike], *, num_frames: int,
                     operating_threshold: float | None = None, threads: int = 1,
                     batch_size: int = 8) -> dict[str, dict[str, Any]]:
    """Headline metrics (avg best 3D IoU, AP3D@0.25/0.5, and at the operating threshold) of the PyTorch `model`
    (key 'pytorch') and of each exported file in `paths` (name -> path) on test frames [2e9, 2e9 + num_frames)."""
    from string_perception.evaluation import evaluate
    from string_perception.training import inference
    from string_perception.training.data import SceneDataset
    defaults = evaluate.build_parser().parse_args(['unused.pt'])
    decode = {'score_threshold': defaults.score_threshold, 'nms_iou': defaults.nms_iou,
              'max_detections': defaults.max_detections}
    op = defaults.operating_threshold if operating_threshold is None else operating_threshold
    dataset = SceneDataset('test', num_frames, evaluate.scene_config_for(model.config, checkpoint))
    candidates = {'pytorch': model}
    candidates.update({name: OnnxAsModel(p, model.config, threads) for name, p in paths.items()})
    results = {}
    for name, candidate in candidates.items():
        res = inference.predict(candidate, dataset, batch_size=batch_size, decode=decode)
        summary = inference.evaluate_predictions(res['preds'], res['gts'], model.config.class_names,
                                                 operating_threshold=op)
        results[name] = inference.headline(summary)
    return results

"""Fine-tuning initialisation: copy a checkpoint's weights into a model whose config differs in size or classes.

``load_matching_weights(model, path)`` copies every parameter / persistent buffer whose name and shape match
(input size and token count are not in the weights: the grid is a non-persistent buffer, so a 128x128 checkpoint
initialises a 120x160 model whole). The class head's embeddings ``[C, E]`` are matched by class NAME: a class both
models know keeps its row, a new class (e.g. ``object``) keeps the model's fresh initialisation. Anything else
that differs is left as initialised and reported.
"""
from __future__ import annotations

from pathlib import Path

import torch

__all__ = ['load_matching_weights']

_CLASS_EMBEDDINGS = 'class_head.class_embeddings'


def load_matching_weights(model: torch.nn.Module, path: str | Path) -> dict[str, object]:
    """Copy matching tensors from checkpoint ``path`` into ``model`` (in place); returns a short report:
    ``{'copied': n, 'classes_copied': [...], 'classes_new': [...], 'skipped': [names]}``."""
    ckpt = torch.load(path, map_location='cpu', weights_only=True)
    src, src_classes = ckpt['model'], list(ckpt['config'].get('class_names', ()))
    dst_classes = list(model.config.class_names)
    state = model.state_dict()
    copied, skipped = 0, []
    classes_copied, classes_new = [], []
    with torch.no_grad():
        for name, value in state.items():
            if name not in src:
                skipped.append(name)
            elif name.endswith(_CLASS_EMBEDDINGS) and src_classes != dst_classes:
                for row, cls in enumerate(dst_classes):                           # [C,E] rows by class name
                    if cls in src_classes:
                        value[row] = src[name][src_classes.index(cls)]
                        classes_copied.append(cls)
                    else:
                        classes_new.append(cls)
                copied += 1
            elif src[name].shape == value.shape:
                value.copy_(src[name])
                copied += 1
            else:
                skipped.append(name)
    return {'copied': copied, 'classes_copied': classes_copied, 'classes_new': classes_new, 'skipped': skipped}

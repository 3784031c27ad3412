"""Frames as plain files: PNG images + JSON labels, readable without this package.

``save_frame(frame, directory, stem)`` writes
    <stem>_rgb.png    8-bit colour (BGR on disk, as cv2 writes it; loads back as RGB)
    <stem>_depth.png  16-bit single channel, z-depth in millimetres, 0 = invalid (16UC1)
    <stem>_mask.png   16-bit single channel, instance_mask + 1 (0 = background / support / unlabelled object)
    <stem>.json       K, seed, class names and one record per labelled object (camera optical frame, metres):
                      {"label", "class_name", "translation" [3], "rotation" [3][3] (columns = object axes),
                       "size" [3], "visibility"}
``load_frame(directory, stem)`` is the exact inverse (floats round-trip through JSON bit for bit).
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from .frame import Frame
from .primitives import CLASS_NAMES

FORMAT = 'string_perception.scenes.frame/1'


def frame_paths(directory, stem: str) -> dict[str, Path]:
    d = Path(directory)
    return {'rgb': d / f'{stem}_rgb.png', 'depth': d / f'{stem}_depth.png', 'mask': d / f'{stem}_mask.png',
            'json': d / f'{stem}.json'}


def frame_to_dict(frame: Frame) -> dict:
    return {
        'format': FORMAT,
        'seed': int(frame.seed),
        'height': int(frame.height),
        'width': int(frame.width),
        'K': frame.K.tolist(),
        'depth_unit': 'mm',
        'class_names': list(CLASS_NAMES),
        'objects': [{'label': int(lab), 'class_name': CLASS_NAMES[lab], 'translation': t.tolist(),
                     'rotation': R.tolist(), 'size': s.tolist(), 'visibility': float(v)}
                    for lab, t, R, s, v in zip(frame.labels, frame.translations, frame.rotations, frame.sizes,
                                               frame.visibility)],
    }


def _write_png(path: Path, image: np.ndarray) -> None:
    if not cv2.imwrite(str(path), image):
        raise OSError(f'could not write {path}')


def _read_png(path: Path, flags: int) -> np.ndarray:
    image = cv2.imread(str(path), flags)
    if image is None:
        raise OSError(f'could not read {path}')
    return image


def save_frame(frame: Frame, directory, stem: str) -> dict[str, Path]:
    """Write the frame's files (see module docstring) into `directory` (created if needed); returns their paths."""
    paths = frame_paths(directory, stem)
    paths['json'].parent.mkdir(parents=True, exist_ok=True)
    _write_png(paths['rgb'], cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2BGR))
    _write_png(paths['depth'], frame.depth_mm)
    _write_png(paths['mask'], (frame.instance_mask.astype(np.int32) + 1).astype(np.uint16))
    paths['json'].write_text(json.dumps(frame_to_dict(frame), indent=1))
    return paths


def load_frame(directory, stem: str) -> Frame:
    """Read a frame written by :func:`save_frame`."""
    paths = frame_paths(directory, stem)
    meta = json.loads(paths['json'].read_text())
    if meta.get('format') != FORMAT:
        raise ValueError(f'{paths["json"]}: unknown format {meta.get("format")!r}')
    names = meta['class_names']
    objs = meta['objects']
    for o in objs:
        if names[o['label']] != o['class_name'] or o['class_name'] not in CLASS_NAMES:
            raise ValueError(f'{paths["json"]}: class {o["class_name"]!r} does not match this package')
    m = len(objs)
    rgb = cv2.cvtColor(_read_png(paths['rgb'], cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    depth = _read_png(paths['depth'], cv2.IMREAD_UNCHANGED)
    mask = _read_png(paths['mask'], cv2.IMREAD_UNCHANGED)
    if depth.dtype != np.uint16 or mask.dtype != np.uint16:
        raise ValueError(f'{directory}/{stem}: depth and mask PNGs must be 16-bit')
    return Frame(
        rgb=rgb,
        depth_mm=depth,
        K=np.array(meta['K'], dtype=np.float64),
        labels=np.array([CLASS_NAMES.index(o['class_name']) for o in objs], dtype=np.int64),
        translations=np.array([o['translation'] for o in objs], dtype=np.float64).reshape(m, 3),
        rotations=np.array([o['rotation'] for o in objs], dtype=np.float64).reshape(m, 3, 3),
        sizes=np.array([o['size'] for o in objs], dtype=np.float64).reshape(m, 3),
        visibility=np.array([o['visibility'] for o in objs], dtype=np.float64),
        instance_mask=(mask.astype(np.int32) - 1).astype(np.int16),
        seed=int(meta['seed']),
    )

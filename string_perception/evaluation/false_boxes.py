"""What a false box stands on: the surfaces inside a predicted 3D box, by what the simulator drew there.

A confident box that matches no labelled object is a false box. To choose the next step from data we ask what it
holds: the pixels whose back-projected surface point (exact z-depth, camera intrinsics ``K``) lies inside the box,
grown by ``GROW`` of its size on every side (a box sits on a surface it only nearly touches), each pixel's role
taken from the simulator's segmentation:

* ``labelled``: an object the frame labels (a duplicate or a badly placed box of a real object);
* ``unlabelled``: an object below the label rule (too few visible pixels or too occluded);
* ``distractor``: unlabelled clutter the generator adds on purpose;
* ``robot``: an arm link or gripper;
* ``structure``: every other drawn geom (table, tray, walls, floor, pillars);
* ``empty``: no drawn surface inside the box at all.

The box's role is the role of most of its pixels (``empty`` when it holds none). Pure numpy: the simulator's
arrays go in (``benchmarks/false_boxes.py`` renders them), so this is tested without MuJoCo.
"""
from __future__ import annotations

import numpy as np

from string_perception.box_ops import decode_box_params

ROLES = ('labelled', 'unlabelled', 'distractor', 'robot', 'structure', 'empty')
LABELLED, UNLABELLED, DISTRACTOR, ROBOT, STRUCTURE, EMPTY = range(len(ROLES))
BACKGROUND = -1          # a pixel with no geom (the sky / far plane): no role, never inside a box
GROW = 0.1               # each box is grown by this fraction of its size per side before counting its pixels


def pixel_roles(seg: np.ndarray, geom_obj: np.ndarray, label_index: np.ndarray, arm_geom: np.ndarray,
                distractor_geom: np.ndarray) -> np.ndarray:
    """Role (an index of :data:`ROLES`, or :data:`BACKGROUND`) of every pixel -> int8 ``[H,W]``.

    ``seg`` int ``[H,W]``: geom id per pixel (< 0: none); ``geom_obj`` int ``[ngeom]``: object index of a geom (-1:
    not an object); ``label_index`` int ``[O]``: the object's label row (-1: not labelled); ``arm_geom`` bool
    ``[ngeom]``; ``distractor_geom`` int ``[G]``: the clutter's geom ids."""
    seg = np.asarray(seg)
    g = np.maximum(seg, 0)                                                   # [H,W] safe index
    obj = np.asarray(geom_obj)[g]                                            # [H,W] object index or -1
    label_index = np.asarray(label_index)
    labelled = (label_index[np.maximum(obj, 0)] >= 0 if len(label_index)    # [H,W] (meaningful where obj >= 0)
                else np.zeros(seg.shape, bool))
    roles = np.full(seg.shape, STRUCTURE, np.int8)
    roles[np.asarray(arm_geom, bool)[g]] = ROBOT
    roles[np.isin(seg, np.asarray(distractor_geom))] = DISTRACTOR
    roles[(obj >= 0) & ~labelled] = UNLABELLED
    roles[(obj >= 0) & labelled] = LABELLED
    roles[seg < 0] = BACKGROUND
    return roles


def box_label_counts(params: np.ndarray, z: np.ndarray, K: np.ndarray, labels: np.ndarray, num_labels: int,
                     grow: float = GROW) -> np.ndarray:
    """Pixels of each label inside each box: ``params`` ``[N,12]`` camera-frame boxes, ``z`` ``[H,W]`` exact z-depth
    (metres, 0 / non-finite: none; pixel ``(u, v)`` is the point at ``u``, ``v``, as ``box_ops.project_points``
    maps), ``K`` ``[3,3]``, ``labels`` int ``[H,W]`` in ``[0, num_labels)`` (< 0: not counted) -> int64
    ``[N, num_labels]``. A pixel is inside when its surface point lies in the box grown by ``grow`` of its size on
    every side."""
    params = np.asarray(params, np.float64).reshape(-1, 12)
    out = np.zeros((len(params), num_labels), np.int64)
    valid = np.isfinite(z) & (z > 0) & (labels >= 0)                         # [H,W]
    v, u = np.nonzero(valid)                                                 # [P] pixel rows / columns
    d = z[v, u]
    pts = np.stack([(u - K[0, 2]) * d / K[0, 0], (v - K[1, 2]) * d / K[1, 1], d], axis=1)   # [P,3] pixel centres
    pix = labels[v, u].astype(np.int64)                                      # [P]
    t, R, size = decode_box_params(params)                                   # [N,3] [N,3,3] [N,3]
    for i in range(len(params)):
        local = (pts - t[i]) @ R[i]                                          # [P,3] in the box's axes
        inside = np.all(np.abs(local) <= 0.5 * size[i] * (1 + 2 * grow), axis=1)
        out[i] = np.bincount(pix[inside], minlength=num_labels)[:num_labels]
    return out


def box_role_counts(params: np.ndarray, z: np.ndarray, K: np.ndarray, roles: np.ndarray,
                    grow: float = GROW) -> np.ndarray:
    """:func:`box_label_counts` over the pixel roles of :func:`pixel_roles` -> int64 ``[N, len(ROLES)]`` (the
    ``empty`` column is 0: a box's emptiness is a zero row)."""
    return box_label_counts(params, z, K, roles, len(ROLES), grow)


def box_roles(counts: np.ndarray) -> np.ndarray:
    """The role of each box from :func:`box_role_counts`: its most frequent pixel role, ``EMPTY`` with none ->
    int64 ``[N]``."""
    counts = np.asarray(counts).reshape(-1, len(ROLES))
    return np.where(counts.sum(1) > 0, np.argmax(counts, axis=1), EMPTY)


__all__ = ['ROLES', 'LABELLED', 'UNLABELLED', 'DISTRACTOR', 'ROBOT', 'STRUCTURE', 'EMPTY', 'BACKGROUND', 'GROW',
           'pixel_roles', 'box_label_counts', 'box_role_counts', 'box_roles']

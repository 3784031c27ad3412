"""Symmetry-aware 3D IoU and orientation error (Objectron style), numpy only.

A symmetric object's box label is one member of a group of boxes that all describe the object equally well; the
symmetry-aware IoU is the best IoU over the ground truth's group (the prediction is left as it is):

* ``box``: the 24 relabellings of its axes (``R -> R P``, sizes permuted): the same physical box, so the
  symmetry-aware IoU *is* the strict IoU;
* ``cylinder``, ``cone``, ``capsule`` (an axis in :data:`~string_perception.scenes.SYMMETRY_AXIS`): any turn
  about the ground truth's symmetry axis. Maximised over the turn angle: a 12-step grid over one period (90
  degrees when the cross-section is square, else 180), the two turns that align the ground truth's perpendicular
  axes with the prediction's axes nearest that plane, then 3 rounds of local refinement (to ~0.5 degree);
* ``sphere``: any rotation of its cube: the cube turned to the prediction's rotation, plus 12 fixed rotations
  relative to it (45 degree turns about each axis and a fixed random set), the best refined by turns about its
  own axes (4 rounds of 6 turns, 8 down to 1 degree): on random noisy pairs within 0.015 of a 6000-rotation
  brute force (mean 0.002).

The group is the ground truth's class (whatever the prediction's class). Every search includes the ground truth as
labelled, so the symmetry-aware IoU is never below the strict one. Class names outside this list are plain boxes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.spatial.transform import Rotation

from .box_ops import Box3D, BoxesLike, as_boxes, box_symmetries
from .iou3d import paired_box3d_iou
from .scenes import SYMMETRY_AXIS

__all__ = ['symmetry_kind', 'paired_symmetric_iou', 'pairwise_symmetric_iou', 'orientation_error_deg',
           'nearest_relabelling', 'CUBE_GROUP']

BOX, AXIAL, SPHERE = 'box', 'axial', 'sphere'
_GRID = 12                 # turn angles per period
_REFINE_ROUNDS = 3         # each halves the step around the best angle: 90/12/2^4 ~ 0.5 degree
_FLIP_SYMMETRIC = {'cylinder', 'capsule'}   # axial classes whose axis has no direction (a cone's points to its apex)


CUBE_GROUP = box_symmetries()                           # [24,3,3]
# Sphere search: rotations of the cube relative to the prediction's axes (identity first).
_SPHERE_SAMPLES = np.concatenate([np.eye(3)[None]] + [Rotation.from_rotvec(np.pi / 4 * e).as_matrix()[None]
                                                       for e in np.eye(3)]
                                 + [Rotation.random(9, random_state=19).as_matrix()])      # [13,3,3]


def symmetry_kind(name: str) -> str:
    """``'sphere'``, ``'axial'`` (a class with a symmetry axis) or ``'box'`` (no continuous symmetry)."""
    if name == 'sphere':
        return SPHERE
    return AXIAL if SYMMETRY_AXIS.get(name) is not None else BOX


def _select(b: Box3D, idx) -> Box3D:
    return Box3D(b.t[idx], b.R[idx], b.size[idx])


def _turned(gt: Box3D, axis: np.ndarray, angle: np.ndarray) -> Box3D:
    """``gt[P]`` each turned about its own axis ``axis[P]`` by ``angle[P,C]`` -> ``Box3D[P*C]`` (pair-major)."""
    P, C = angle.shape
    rotvec = np.eye(3)[axis][:, None] * angle[..., None]                                  # [P,C,3]
    R = gt.R[:, None] @ Rotation.from_rotvec(rotvec.reshape(-1, 3)).as_matrix().reshape(P, C, 3, 3)
    return Box3D(np.repeat(gt.t, C, 0), R.reshape(-1, 3, 3), np.repeat(gt.size, C, 0))


def _repeat(b: Box3D, C: int) -> Box3D:
    return Box3D(*(np.repeat(x, C, 0) for x in b))


def _best_turn(pred: Box3D, gt: Box3D, axis: np.ndarray) -> np.ndarray:
    """Best IoU of ``pred[P]`` against ``gt[P]`` turned about its axis ``axis[P]`` -> ``[P]``."""
    P = len(axis)
    j1, j2 = (axis + 1) % 3, (axis + 2) % 3
    s1, s2 = gt.size[np.arange(P), j1], gt.size[np.arange(P), j2]
    period = np.where(np.abs(s1 - s2) <= 1e-6 * np.maximum(s1, s2), np.pi / 2, np.pi)        # [P]
    g = gt.R[np.arange(P), :, axis]                                                        # [P,3] symmetry axis
    u, v = gt.R[np.arange(P), :, j1], gt.R[np.arange(P), :, j2]
    # Turns that put the GT's first perpendicular axis onto a prediction axis's projection (the two axes of the
    # prediction least parallel to g).
    along = np.abs(np.einsum('pc,pck->pk', g, pred.R))                                      # [P,3]
    others = np.argsort(along, axis=1)[:, :2]                                               # [P,2]
    p = np.take_along_axis(pred.R, others[:, None, :], axis=2)                             # [P,3,2]
    align = np.arctan2(np.einsum('pc,pck->pk', v, p), np.einsum('pc,pck->pk', u, p))       # [P,2]
    angles = np.concatenate([period[:, None] * np.arange(_GRID) / _GRID, np.mod(align, period[:, None])], 1)

    def score(a):                                                                           # a [P,C] -> [P,C]
        return paired_box3d_iou(_repeat(pred, a.shape[1]), _turned(gt, axis, a)).reshape(a.shape)

    iou = score(angles)
    k = np.argmax(iou, axis=1)
    best, best_angle = iou[np.arange(P), k], angles[np.arange(P), k]
    step = period / _GRID / 2
    for _ in range(_REFINE_ROUNDS):
        cand = best_angle[:, None] + step[:, None] * np.array([-1.0, 1.0])                 # [P,2]
        c_iou = score(cand)
        k = np.argmax(c_iou, axis=1)
        better = c_iou[np.arange(P), k] > best
        best = np.where(better, c_iou[np.arange(P), k], best)
        best_angle = np.where(better, cand[np.arange(P), k], best_angle)
        step = step / 2
    return best


def _best_sphere(pred: Box3D, gt: Box3D) -> np.ndarray:
    """Best IoU of ``pred[P]`` against ``gt[P]``'s cube in the rotations ``R_pred Q`` (Q in the fixed samples),
    then refined by turns of the best cube about its own axes (steps of 8, 4, 2, 1 degrees)."""
    P = len(pred.t)

    def score(R):                                                                           # R [P,C,3,3] -> [P,C]
        c = R.shape[1]
        cubes = Box3D(np.repeat(gt.t, c, 0), R.reshape(-1, 3, 3), np.repeat(gt.size, c, 0))
        return paired_box3d_iou(_repeat(pred, c), cubes).reshape(P, c)

    R = pred.R[:, None] @ _SPHERE_SAMPLES[None]                                             # [P,C,3,3]
    iou = score(R)
    k = np.argmax(iou, axis=1)
    best, best_R = iou[np.arange(P), k], R[np.arange(P), k]
    for deg in (8.0, 4.0, 2.0, 1.0):
        turns = Rotation.from_rotvec(np.radians(deg) * np.concatenate([np.eye(3), -np.eye(3)])).as_matrix()
        R = best_R[:, None] @ turns[None]                                                   # [P,6,3,3]
        iou = score(R)
        k = np.argmax(iou, axis=1)
        better = iou[np.arange(P), k] > best
        best = np.where(better, iou[np.arange(P), k], best)
        best_R = np.where(better[:, None, None], R[np.arange(P), k], best_R)
    return best


def paired_symmetric_iou(preds: BoxesLike, gts: BoxesLike, gt_names: Sequence[str]) -> np.ndarray:
    """Symmetry-aware IoU of ``preds[i]`` with ``gts[i]`` whose class is ``gt_names[i]`` -> ``[N]`` float64."""
    a, b = as_boxes(preds), as_boxes(gts)
    if not (len(a.t) == len(b.t) == len(gt_names)):
        raise ValueError(f'paired IoU needs equal counts, got {len(a.t)}, {len(b.t)} and {len(gt_names)} names')
    out = paired_box3d_iou(a, b)
    kinds = np.array([symmetry_kind(n) for n in gt_names], dtype=object)
    # Bounding spheres are the same for every member of the group: pairs whose spheres miss stay at 0.
    reach = 0.5 * (np.linalg.norm(a.size, axis=1) + np.linalg.norm(b.size, axis=1))
    near = np.linalg.norm(a.t - b.t, axis=1) <= reach
    axial = np.nonzero(near & (kinds == AXIAL))[0]
    if len(axial):
        axis = np.array([SYMMETRY_AXIS[gt_names[i]] for i in axial], dtype=np.int64)
        out[axial] = np.maximum(out[axial], _best_turn(_select(a, axial), _select(b, axial), axis))
    sphere = np.nonzero(near & (kinds == SPHERE))[0]
    if len(sphere):
        out[sphere] = np.maximum(out[sphere], _best_sphere(_select(a, sphere), _select(b, sphere)))
    return out


def pairwise_symmetric_iou(preds: BoxesLike, gts: BoxesLike, gt_names: Sequence[str]) -> np.ndarray:
    """Symmetry-aware IoU of every prediction (K) with every ground-truth box (M, classes ``gt_names``) ->
    ``[K, M]``."""
    a, b = as_boxes(preds), as_boxes(gts)
    K, M = len(a.t), len(b.t)
    ia, ib = np.meshgrid(np.arange(K), np.arange(M), indexing='ij')
    ia, ib = ia.ravel(), ib.ravel()
    if not len(ia):
        return np.zeros((K, M))
    return paired_symmetric_iou(_select(a, ia), _select(b, ib), [gt_names[j] for j in ib]).reshape(K, M)


def nearest_relabelling(R_pred: np.ndarray, R_gt: np.ndarray) -> np.ndarray:
    """The relabelling ``P`` (of :data:`CUBE_GROUP`) that brings ``R_pred[N,3,3] P`` closest to ``R_gt[N,3,3]``
    (largest ``trace(R_gtᵀ R_pred P)``, i.e. smallest rotation angle) -> ``[N,3,3]``."""
    cos = np.einsum('nij,nik,gkj->ng', R_gt, R_pred, CUBE_GROUP)                          # [N,24] traces
    return CUBE_GROUP[np.argmax(cos, axis=1)]


def _angle_deg(cos: np.ndarray) -> np.ndarray:
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def orientation_error_deg(R_pred: np.ndarray, R_gt: np.ndarray, gt_names: Sequence[str]) -> np.ndarray:
    """Symmetry-aware orientation error in degrees of ``R_pred[N,3,3]`` against ``R_gt[N,3,3]`` -> ``[N]``.

    ``sphere``: 0. ``cylinder``/``capsule``: the angle between the symmetry axes (the class's axis column of both
    rotations; the model predicts it there) modulo a flip, in [0, 90]. ``cone``: the same without the flip (the
    axis points to the apex), in [0, 180]. ``box``: the smallest rotation angle between ``R_gt`` and any of the
    24 relabellings ``R_pred P``, in [0, ~98.4].
    """
    R_pred, R_gt = np.asarray(R_pred, np.float64).reshape(-1, 3, 3), np.asarray(R_gt, np.float64).reshape(-1, 3, 3)
    out = np.zeros(len(R_gt))
    for i, name in enumerate(gt_names):
        kind = symmetry_kind(name)
        if kind == AXIAL:
            k = SYMMETRY_AXIS[name]
            cos = R_pred[i, :, k] @ R_gt[i, :, k]
            out[i] = _angle_deg(abs(cos) if name in _FLIP_SYMMETRIC else cos)
        elif kind == BOX:
            trace = np.einsum('ij,ik,gkj->g', R_gt[i], R_pred[i], CUBE_GROUP).max()
            out[i] = _angle_deg((trace - 1.0) / 2.0)
    return out

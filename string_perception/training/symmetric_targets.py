"""Symmetry-aware box targets: move each target to the member of its symmetry group nearest the prediction.

A labelled box can be written in many ways that describe the same physical object, and the box loss should not
punish a prediction for picking another one (docs/DESIGN.md, symmetric objects):

* every box: the 24 axis relabellings ``R -> R G`` (G a signed permutation with det +1, sizes permuted with it);
* ``cylinder`` / ``capsule`` (mirror-symmetric about the middle): additionally any turn about the symmetry axis;
* ``cone``: any turn about the axis, but only relabellings that keep the apex direction (no flip);
* ``sphere``: any rotation (its box is a cube).

:func:`align_targets` picks, per pair, the relabelling with the largest ``trace(R_pred^T R_tgt G)`` and then the
turn about the symmetry axis that maximises the same trace (closed form, below). Alignment is not differentiated
(the prediction is detached), so the loss pulls the prediction towards the nearest equivalent target.
For a turn by ``θ`` about local axis ``j`` with ``(a, b)`` the other two axes in cyclic order and
``N = R_pred^T R_tgt``: ``trace(N Rot_j(θ)) = N_jj + cos θ (N_aa + N_bb) + sin θ (N_ab - N_ba)``, largest at
``θ = atan2(N_ab - N_ba, N_aa + N_bb)``.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..box_ops import box_symmetries
from ..box_ops_torch import rotation_from_6d, rotation_to_6d

# symmetry kind per class name; classes not listed have only the 24 relabellings of their box
SYMMETRY_KINDS = {'cylinder': 'axis_flip', 'capsule': 'axis_flip', 'cone': 'axis', 'sphere': 'sphere'}
AXIS = 2                         # the symmetry axis of our axis-symmetric shapes is their box's z column


def signed_permutations() -> torch.Tensor:
    """The 24 proper signed permutation matrices [24,3,3] (float64; ``box_ops.box_symmetries``)."""
    return torch.from_numpy(box_symmetries())


_GROUP = signed_permutations()                                        # [24,3,3]
_KEEPS_AXIS = (_GROUP[:, AXIS, :] > 0.5).any(dim=1)                   # [24] the old z lands on a + column
_AXIS_COLUMN = _GROUP[:, AXIS, :].abs().argmax(dim=1)                 # [24] where the old z lands


def class_kinds(class_names: Sequence[str]) -> list[str]:
    return [SYMMETRY_KINDS.get(n, 'box') for n in class_names]


@torch.no_grad()
def align_targets(pred: torch.Tensor, tgt: torch.Tensor, labels: torch.Tensor, kinds: Sequence[str]) -> torch.Tensor:
    """``pred`` [K,12], ``tgt`` [K,12] (``[t, rot6d, size]``), ``labels`` int64[K], ``kinds[c]`` per class ->
    targets [K,12] describing the same boxes, rotated to the group member nearest each prediction."""
    if tgt.shape[0] == 0:
        return tgt.clone()
    dtype = tgt.dtype
    Rp = rotation_from_6d(pred[:, 3:9].detach().double())                # [K,3,3]
    Rt = rotation_from_6d(tgt[:, 3:9].double())                          # [K,3,3]
    size = tgt[:, 9:12].double()                                         # [K,3]
    G = _GROUP.to(tgt.device)                                            # [24,3,3]
    kind = [kinds[int(c)] for c in labels.tolist()]
    cone = torch.tensor([k == 'axis' for k in kind], device=tgt.device)  # [K]
    turn = torch.tensor([k in ('axis', 'axis_flip') for k in kind], device=tgt.device)
    sphere = torch.tensor([k == 'sphere' for k in kind], device=tgt.device)

    RtG = torch.einsum('kij,gjl->kgil', Rt, G)                           # [K,24,3,3] every relabelling
    score = torch.einsum('kij,kgij->kg', Rp, RtG)                        # [K,24] trace(Rp^T Rt G)
    allowed = torch.where(cone[:, None], _KEEPS_AXIS.to(tgt.device)[None, :], torch.ones_like(score, dtype=bool))
    g = torch.where(allowed, score, torch.full_like(score, -1e9)).argmax(dim=1)          # [K]
    K = torch.arange(tgt.shape[0], device=tgt.device)
    R = RtG[K, g]                                                        # [K,3,3]
    size = torch.einsum('kji,kj->ki', G[g].abs(), size)                  # [K,3] sizes follow the axes

    # turn about the symmetry axis (now column j) that best matches the prediction
    j = _AXIS_COLUMN.to(tgt.device)[g]                                   # [K]
    a, b = (j + 1) % 3, (j + 2) % 3
    N = Rp.transpose(1, 2) @ R                                           # [K,3,3]
    theta = torch.atan2(N[K, a, b] - N[K, b, a], N[K, a, a] + N[K, b, b])                 # [K]
    theta = torch.where(turn, theta, torch.zeros_like(theta))
    c, s = torch.cos(theta), torch.sin(theta)
    Rot = torch.eye(3, dtype=R.dtype, device=R.device).repeat(tgt.shape[0], 1, 1)         # [K,3,3]
    Rot[K, a, a], Rot[K, a, b], Rot[K, b, a], Rot[K, b, b] = c, -s, s, c
    R = R @ Rot
    R = torch.where(sphere[:, None, None], Rp, R)                        # a sphere's cube may turn any way
    return torch.cat([tgt[:, 0:3], rotation_to_6d(R).to(dtype), size.to(dtype)], dim=1)


__all__ = ['SYMMETRY_KINDS', 'signed_permutations', 'class_kinds', 'align_targets']

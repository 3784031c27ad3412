"""Horizontal-flip test-time augmentation: the model sees the frame and its mirror image, and every token's two
predictions are averaged before decoding.

Mirroring the model input about its vertical centre line is a reflection ``M = diag(-1, 1, 1)`` of the camera
frame: a pixel ``u`` moves to ``W - 1 - u`` (pixel centres at integers, the image spanning ``[-0.5, W - 0.5]``, as
in :mod:`.preprocess`), so ``K``'s ``cx`` becomes ``W - 1 - cx`` and a back-projected point ``X`` becomes ``M X``
(``fx``, ``fy``, ``cy`` and the depth stay). The mirrored pass's predictions are brought back by the same
reflection: a box ``(t, R, size)`` becomes ``(M t, M R M, size)`` (``M R M`` is again a rotation: ``det = +1``),
and the token of patch ``(r, c)`` of the mirrored grid stands at patch ``(r, gw - 1 - c)`` of the frame.

The two boxes of one token then describe one object, but possibly with its axes labelled differently (the model
predicts one of the box's 24 axis labellings, and the mirror changes which one it picks). The mirrored pass's box is
relabelled to the original pass's (:func:`~string_perception.symmetry.nearest_relabelling`, the cube-group member
nearest its rotation: the same box, sizes permuted with its axes) before the average: translations and sizes are
averaged, the rotations by their chordal L2 mean (the rotation nearest ``(Ra + Rb) / 2``, by SVD, so that which
pass is called ``a`` does not change the box), and the class logits are averaged. Tokens whose patch is padding in
the original frame are dropped later by the pipeline as without the flip. The embedding and the encoder tokens stay
the original pass's.

Cost: two model passes a frame (one batched call where the model takes a batch of 2). Measured in
``docs/results/workcell.md`` ("Flip test-time augmentation").
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import box_ops
from ..symmetry import nearest_relabelling
from .preprocess import ModelInputs

__all__ = ['MIRROR', 'mirrored_cx', 'flip_inputs', 'mirror_boxes', 'mirrored_token_order', 'nearest_rotation',
           'fuse_boxes', 'fuse_flip_passes']

MIRROR = np.diag([-1.0, 1.0, 1.0])             # reflection of the camera frame's x axis


def mirrored_cx(cx, width: int):
    """The principal point's ``cx`` of an image ``width`` pixels wide mirrored left-right: ``width - 1 - cx``
    (numpy arrays and torch tensors alike; the checkpoint evaluator mirrors its batches with it)."""
    return (width - 1) - cx


def flip_inputs(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` mirrored left-right: image and depth reversed along the width, ``cx -> W - 1 - cx``."""
    W = inputs.image.shape[2]
    K = np.array(inputs.intrinsics, np.float32, copy=True)                       # [1,3,3]
    K[:, 0, 2] = mirrored_cx(K[:, 0, 2], W)
    return dataclasses.replace(inputs, image=np.ascontiguousarray(inputs.image[:, :, ::-1]),    # [1,H,W,3]
                               depth=np.ascontiguousarray(inputs.depth[:, :, ::-1]), intrinsics=K)  # [1,H,W]


def mirrored_token_order(grid_hw: tuple[int, int]) -> np.ndarray:
    """int ``[gh*gw]``: for each token of the frame (row-major patches), the token of the mirrored input that images
    the same patch. Its own inverse."""
    gh, gw = grid_hw
    return np.arange(gh * gw).reshape(gh, gw)[:, ::-1].reshape(-1)


def mirror_boxes(boxes: np.ndarray) -> np.ndarray:
    """Box rows ``[..., 12]`` (``[t, rot6d, size]``) reflected by :data:`MIRROR`: ``(M t, M R M, size)``."""
    t, R, size = box_ops.decode_box_params(boxes)
    return box_ops.encode_box_params(t @ MIRROR, MIRROR @ R @ MIRROR, size)


def nearest_rotation(A: np.ndarray) -> np.ndarray:
    """``A[..., 3, 3]`` -> the rotation nearest it in the Frobenius norm, ``U diag(1, 1, det(U V^T)) V^T`` from
    ``A = U S V^T`` (the chordal L2 mean of rotations when ``A`` is their average). ``nearest_rotation(A Q) =
    nearest_rotation(A) Q`` for every rotation ``Q``."""
    U, _, Vt = np.linalg.svd(np.asarray(A, np.float64))                          # [...,3,3] each
    D = np.ones(U.shape[:-1])                                                    # [...,3]
    D[..., 2] = np.sign(np.linalg.det(U @ Vt))
    return (U * D[..., None, :]) @ Vt


def fuse_boxes(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """Row-wise average of two box lists ``[N,12]`` describing the same objects: each ``b`` relabelled to the
    axis labelling of its ``a`` (nearest rotation in the cube group, sizes following the axes), then translations
    and sizes averaged and the rotations by their chordal L2 mean -> ``[N,12]`` float64."""
    ta, Ra, sa = box_ops.decode_box_params(boxes_a)                              # [N,3], [N,3,3], [N,3]
    tb, Rb, sb = box_ops.decode_box_params(boxes_b)
    P = nearest_relabelling(Rb, Ra)                                               # [N,3,3] Rb P nearest Ra
    Rb = Rb @ P                                                                   # [N,3,3]
    sb = np.einsum('nji,nj->ni', np.abs(P), sb)                                   # [N,3] |P|^T size
    R = nearest_rotation(0.5 * (Ra + Rb))                                         # [N,3,3]
    return box_ops.encode_box_params(0.5 * (ta + tb), R, 0.5 * (sa + sb))


def fuse_flip_passes(outputs: dict[str, np.ndarray], grid_hw: tuple[int, int]) -> dict[str, np.ndarray]:
    """Model outputs of ``P >= 2`` passes (``boxes [P,N,12]``, ``logits [P,N,C]``, ...) whose pass 1 is pass 0's
    input mirrored (:func:`flip_inputs`) -> the same outputs with ``P - 1`` passes: pass 0's boxes and logits
    fused with pass 1's (brought back by :func:`mirror_boxes` and :func:`mirrored_token_order`), pass 1 removed,
    every other output taken from pass 0 and the passes after 1."""
    order = mirrored_token_order(grid_hw)                                         # [N]
    boxes, logits = outputs['boxes'], outputs['logits']                           # [P,N,12], [P,N,C]
    if boxes.shape[0] < 2 or boxes.shape[1] != len(order):
        raise ValueError(f'expected >= 2 passes of {len(order)} tokens, got boxes of shape {boxes.shape}')
    back = mirror_boxes(boxes[1][order])                                          # [N,12] pass 1 at pass 0's tokens
    fused_boxes = fuse_boxes(boxes[0], back).astype(boxes.dtype)                  # [N,12]
    fused_logits = 0.5 * (logits[0] + logits[1][order])                           # [N,C]
    rest = [0] + list(range(2, boxes.shape[0]))
    out = {k: v[rest] for k, v in outputs.items()}
    out['boxes'] = np.concatenate([fused_boxes[None], boxes[2:]], axis=0)        # [P-1,N,12]
    out['logits'] = np.concatenate([fused_logits[None].astype(logits.dtype), logits[2:]], axis=0)  # [P-1,N,C]
    return out

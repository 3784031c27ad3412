"""Oriented 3D box geometry in numpy (no torch: the ROS node and the runtime reuse it).

Conventions (docs/ARCHITECTURE.md):

* A box is ``(t[3], R[3,3], size[3])``: ``t`` = centre in the camera frame, the columns of ``R`` = the box's own
  x, y, z axes in the camera frame, ``size`` = full edge lengths along those axes. :class:`Box3D` is a
  ``NamedTuple`` with exactly these fields, so a plain ``(t, R, size)`` tuple is interchangeable with it. Its
  fields may carry leading batch dimensions (``t[...,3]``, ``R[...,3,3]``, ``size[...,3]``).
* 6D rotation = first two COLUMNS of ``R``: ``x6[..., 0:3] = R[..., :, 0]``, ``x6[..., 3:6] = R[..., :, 1]``.
* Quaternions are ``(x, y, z, w)`` (ROS order), unit norm, canonical ``w >= 0``.
* 12-number box vector: ``[t(3), rot6d(6), size(3)]``.

Corner order (:data:`CORNER_SIGNS`, fixed: the corner loss and the drawing rely on it). Corner ``i`` is
``t + R @ (CORNER_SIGNS[i] * size / 2)`` with signs in the box frame::

    0 (-,-,-)  1 (+,-,-)  2 (+,+,-)  3 (-,+,-)     <- face z = -size_z/2, counter-clockwise seen from +z
    4 (-,-,+)  5 (+,-,+)  6 (+,+,+)  7 (-,+,+)     <- face z = +size_z/2, same order (corner i + 4 above i)

so the 12 edges are :data:`BOX_EDGES`: ``(0,1) (1,2) (2,3) (3,0)``, ``(4,5) (5,6) (6,7) (7,4)``, ``(i, i+4)``.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple, Sequence, Union

import numpy as np

# [8,3] signs of the corners in the box frame (see module docstring).
CORNER_SIGNS = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1],
                         [-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1]], dtype=np.float64)
# [12,2] corner indices of the box edges: bottom face, top face, verticals.
BOX_EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0],
                      [4, 5], [5, 6], [6, 7], [7, 4],
                      [0, 4], [1, 5], [2, 6], [3, 7]], dtype=np.int64)

_EPS = 1e-12


def box_symmetries() -> np.ndarray:
    """The 24 proper signed permutation matrices [24,3,3]: ``R @ P`` describes the same box as ``R`` (column j of
    ``R P`` = ±column perm[j] of R), with the sizes permuted by ``|P|ᵀ``."""
    mats = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            P = np.zeros((3, 3))
            P[list(perm), range(3)] = signs                     # column j = ±e_perm[j]
            if np.linalg.det(P) > 0:
                mats.append(P)
    return np.stack(mats)                                       # [24,3,3]


class Box3D(NamedTuple):
    """An oriented box (or a batch of them): ``t[...,3]`` centre, ``R[...,3,3]`` axes as columns, ``size[...,3]``."""

    t: np.ndarray
    R: np.ndarray
    size: np.ndarray

    @classmethod
    def from_params(cls, params) -> 'Box3D':
        """From the 12-number vector(s) ``[..., 12]`` (Gram-Schmidt on the 6D part)."""
        return cls(*decode_box_params(params))

    def to_params(self) -> np.ndarray:
        """``[..., 12]`` vector(s)."""
        return encode_box_params(*self)

    def corners(self) -> np.ndarray:
        """``[..., 8, 3]`` corners in the fixed order of :data:`CORNER_SIGNS`."""
        return box_corners(*self)

    @property
    def volume(self) -> np.ndarray:
        """``[...]`` volume."""
        return np.prod(np.asarray(self.size, dtype=np.float64), axis=-1)


def vector_norm(v: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """Euclidean norm over the last axis: ``np.linalg.norm(v, axis=-1)``'s operations (the same bits) without its
    argument handling."""
    return np.sqrt(np.add.reduce(v * v, axis=-1, keepdims=keepdims))


def _normalize(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors along the last axis and their norms ``[..., 1]``."""
    n = vector_norm(v, keepdims=True)
    return v / np.maximum(n, _EPS), n


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a x b`` over the last axis (length 3), the same floating-point operations as ``np.cross`` (so the same
    bits) at a fraction of its overhead on small arrays."""
    return a[..., _NEXT] * b[..., _PREV] - a[..., _PREV] * b[..., _NEXT]


_NEXT, _PREV = [1, 2, 0], [2, 0, 1]


def _any_perpendicular(u: np.ndarray) -> np.ndarray:
    """A unit vector perpendicular to each unit vector ``u[..., 3]`` (used for degenerate 6D inputs)."""
    # Cross with the basis axis least aligned with u.
    axis = np.eye(3)[np.argmin(np.abs(u), axis=-1)]
    return _normalize(cross3(u, axis))[0]


def rotation_from_6d(x6) -> np.ndarray:
    """``x6[..., 6]`` (two columns, any scale) -> ``R[..., 3, 3]`` in SO(3) by Gram-Schmidt.

    ``R[..., :, 0]`` is the first column normalised; the second column is the second input column with its
    component along the first removed, normalised; the third is their cross product. Degenerate input (a zero
    or parallel column) falls back to an arbitrary but valid completion instead of producing NaN.
    """
    x6 = np.asarray(x6, dtype=np.float64)
    a1, a2 = x6[..., 0:3], x6[..., 3:6]
    b1, n1 = _normalize(a1)
    b1 = np.where(n1 > _EPS, b1, np.array([1.0, 0.0, 0.0]))
    b2, n2 = _normalize(a2 - np.sum(b1 * a2, axis=-1, keepdims=True) * b1)
    good = n2 > _EPS * np.maximum(1.0, vector_norm(a2, keepdims=True))
    if not good.all():                                         # the fallback only where it is needed (rare)
        b2 = np.where(good, b2, _any_perpendicular(b1))
    R = np.empty(b1.shape + (3,))
    R[..., 0], R[..., 1], R[..., 2] = b1, b2, cross3(b1, b2)
    return R


def rotation_to_6d(R) -> np.ndarray:
    """``R[..., 3, 3]`` -> ``x6[..., 6]`` = first two columns, concatenated."""
    R = np.asarray(R, dtype=np.float64)
    return np.concatenate([R[..., :, 0], R[..., :, 1]], axis=-1)


def rotation_to_quaternion(R) -> np.ndarray:
    """``R[..., 3, 3]`` -> unit quaternion ``q[..., 4]`` as ``(x, y, z, w)`` with ``w >= 0``.

    Shepperd's method: per matrix, pick whichever of ``w, x, y, z`` has the largest magnitude (from the trace
    and the diagonal) and derive the others from off-diagonal sums/differences, so no branch divides by a small
    number (robust near 180 degrees). The result is normalised, then negated where ``w < 0``.
    """
    R = np.asarray(R, dtype=np.float64)
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    m01, m02, m10 = R[..., 0, 1], R[..., 0, 2], R[..., 1, 0]
    m12, m20, m21 = R[..., 1, 2], R[..., 2, 0], R[..., 2, 1]
    # Four candidate (x, y, z, w) tuples, each scaled by 4 * (its largest component); [..., 4, 4].
    cands = np.empty(R.shape[:-2] + (4, 4))
    for row, values in enumerate((
            (m21 - m12, m02 - m20, m10 - m01, 1.0 + m00 + m11 + m22),      # w largest
            (1.0 + m00 - m11 - m22, m01 + m10, m02 + m20, m21 - m12),      # x largest
            (m01 + m10, 1.0 - m00 + m11 - m22, m12 + m21, m02 - m20),      # y largest
            (m02 + m20, m12 + m21, 1.0 - m00 - m11 + m22, m10 - m01))):    # z largest
        for col, v in enumerate(values):
            cands[..., row, col] = v
    diag = np.empty(R.shape[:-2] + (4,))
    diag[..., 0], diag[..., 1], diag[..., 2], diag[..., 3] = m00 + m11 + m22, m00, m11, m22
    choice = np.argmax(diag, axis=-1)                                    # [...]
    flat = cands.reshape(-1, 4, 4)
    q = flat[np.arange(len(flat)), choice.reshape(-1)].reshape(R.shape[:-2] + (4,))
    q = q / vector_norm(q, keepdims=True)
    return np.where(q[..., 3:4] < 0.0, -q, q)


def quaternion_to_rotation(q) -> np.ndarray:
    """Quaternion ``q[..., 4]`` ``(x, y, z, w)``, any non-zero norm (normalised here) -> ``R[..., 3, 3]``."""
    q = np.asarray(q, dtype=np.float64)
    x, y, z, w = np.moveaxis(q / np.linalg.norm(q, axis=-1, keepdims=True), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=-1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=-1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def box_corners(t, R, size) -> np.ndarray:
    """``t[...,3], R[...,3,3], size[...,3]`` -> corners ``[..., 8, 3]`` in the order of :data:`CORNER_SIGNS`."""
    t, R, size = (np.asarray(a, dtype=np.float64) for a in (t, R, size))
    local = CORNER_SIGNS * (0.5 * size[..., None, :])                 # [..., 8, 3] box frame
    return np.einsum('...ij,...kj->...ki', R, local) + t[..., None, :]


def decode_box_params(params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``params[..., 12]`` = ``[t(3), rot6d(6), size(3)]`` -> ``(t[...,3], R[...,3,3], size[...,3])``."""
    p = np.asarray(params, dtype=np.float64)
    if p.shape[-1] != 12:
        raise ValueError(f'box params must end in 12 numbers, got shape {p.shape}')
    return p[..., 0:3], rotation_from_6d(p[..., 3:9]), p[..., 9:12]


def encode_box_params(t, R, size) -> np.ndarray:
    """``(t[...,3], R[...,3,3], size[...,3])`` -> ``params[..., 12]``."""
    t, size = np.asarray(t, dtype=np.float64), np.asarray(size, dtype=np.float64)
    x6 = rotation_to_6d(R)
    shape = np.broadcast_shapes(t.shape[:-1], x6.shape[:-1], size.shape[:-1])
    return np.concatenate([np.broadcast_to(t, shape + (3,)), np.broadcast_to(x6, shape + (6,)),
                           np.broadcast_to(size, shape + (3,))], axis=-1)


def project_points(points, K, min_depth: float = 1e-6) -> np.ndarray:
    """Pinhole projection of camera-frame ``points[..., 3]`` with ``K[3,3]`` -> pixel ``uv[..., 2]``.

    Points with ``z <= min_depth`` (behind or on the camera plane) project to NaN; callers drawing segments
    should clip them to ``z > 0`` first (see ``runtime/draw.py``).
    """
    p = np.asarray(points, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    z = p[..., 2:3]
    uvw = p @ K.T
    with np.errstate(divide='ignore', invalid='ignore'):
        uv = uvw[..., :2] / z
    return np.where(z > min_depth, uv, np.nan)


BoxesLike = Union[Box3D, tuple, np.ndarray, Sequence[Box3D]]


def as_boxes(boxes: BoxesLike) -> Box3D:
    """Normalise box input to a batched float64 ``Box3D`` (``t[N,3], R[N,3,3], size[N,3]``).

    Accepts a ``Box3D`` or ``(t, R, size)`` tuple (single or batched), 12-number vectors ``[..., 12]`` (array or
    torch tensor on CPU), or a sequence of any of these.
    """
    if isinstance(boxes, tuple) and len(boxes) == 3 and np.ndim(boxes[1]) >= 2:   # Box3D or (t, R, size)
        t, R, size = (np.asarray(a, dtype=np.float64) for a in boxes)
        return Box3D(t.reshape(-1, 3), R.reshape(-1, 3, 3), size.reshape(-1, 3))
    if isinstance(boxes, np.ndarray) or hasattr(boxes, '__array__'):             # [..., 12] params
        return Box3D(*decode_box_params(np.asarray(boxes, dtype=np.float64).reshape(-1, 12)))
    parts = [as_boxes(b) for b in boxes]
    if not parts:
        return Box3D(np.zeros((0, 3)), np.zeros((0, 3, 3)), np.zeros((0, 3)))
    return Box3D(*(np.concatenate(f, axis=0) for f in zip(*parts)))

"""Analytic ray casting against the primitives, vectorised over rays.

Rays are given in the object frame (see primitives.py): one origin ``o[3]`` (the camera centre) and directions
stored component-first, ``d[3, *S]`` (S = any ray-grid shape, e.g. a pixel rectangle ``[nv, nu]``). Camera rays have
d_z = 1 in the camera frame, so the returned ray parameter equals the z-depth of the hit in metres. Each function
returns ``t[*S]`` of the entry hit, ``inf`` for a miss; the camera must be outside the object. Only the faces that
can face the camera are tested. Normals come from the local hit point (:func:`surface_normal`).
"""
from __future__ import annotations

import math

import numpy as np

from .primitives import BOX, CAPSULE, CONE, CYLINDER, SPHERE

_INF = np.inf


def _nearest_root(a, b, c):
    """Smaller root of a t^2 + 2 b t + c = 0 (elementwise); -1 (a miss: t <= 0) where there is none.
    (numpy is several times slower on NaN results, so negative discriminants are clamped, not square-rooted.)"""
    disc = b * b - a * c
    t = (-b - np.sqrt(np.maximum(disc, 0.0))) / a
    return np.where(disc >= 0.0, t, -1.0)


def intersect_box(half: np.ndarray, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """|p_i| <= half_i: the entry face is one of the (at most 3) faces whose outer side holds the camera."""
    o_, h_ = o.tolist(), half.tolist()
    best = None
    for i in range(3):
        oi, hi = o_[i], h_[i]
        if abs(oi) <= hi:
            continue
        j, k = (i + 1) % 3, (i + 2) % 3
        t = (math.copysign(hi, oi) - oi) / d[i]                                  # [*S] face plane
        ok = (t > 0.0) & (np.abs(o_[j] + t * d[j]) <= h_[j]) & (np.abs(o_[k] + t * d[k]) <= h_[k])
        t = np.where(ok, t, _INF)
        best = t if best is None else np.minimum(best, t)
    return np.full(d.shape[1:], _INF) if best is None else best


def _norm2(d):
    return d[0] * d[0] + d[1] * d[1] + d[2] * d[2]


def _dot(v, d):
    """v[3] . d[3,*S] -> [*S] written out: a BLAS matmul may spin up threads that fight the other workers."""
    return v[0] * d[0] + v[1] * d[1] + v[2] * d[2]


def intersect_sphere(r: float, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """|o + t d| = r."""
    t = _nearest_root(_norm2(d), _dot(o, d), o @ o - r * r)
    return np.where(t > 0.0, t, _INF)


def _radial(o, d):
    """(x^2 + y^2)(t) = a t^2 + 2 b t + c: a, b [*S], c scalar."""
    return d[0] * d[0] + d[1] * d[1], o[0] * d[0] + o[1] * d[1], o[0] * o[0] + o[1] * o[1]


def _cap(z_cap, r2, o, d, a, b, c):
    """Entry through the disc z = z_cap, x^2 + y^2 <= r2 (only called when the camera faces it)."""
    t = (z_cap - o[2]) / d[2]
    return np.where((t > 0.0) & (a * t * t + 2.0 * b * t + c <= r2), t, _INF)


def intersect_cylinder(r: float, hz: float, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Side x^2 + y^2 = r^2 with |z| <= hz, plus the cap facing the camera."""
    a, b, c = _radial(o, d)
    t = _nearest_root(a, b, c - r * r)                                           # [*S] side entry
    t = np.where((t > 0.0) & (np.abs(o[2] + t * d[2]) <= hz), t, _INF)
    if abs(o[2]) > hz:
        t = np.minimum(t, _cap(np.copysign(hz, o[2]), r * r, o, d, a, b, c))
    return t


def intersect_cone(r: float, hz: float, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Side x^2 + y^2 = k^2 (hz - z)^2 for |z| <= hz (apex at +hz, k = r / 2hz), plus the base disc at -hz."""
    a, b, c = _radial(o, d)
    k2 = (r / (2.0 * hz)) ** 2
    w0 = hz - o[2]                                                               # hz - z at t = 0
    qa = a - k2 * d[2] * d[2]                                                    # [*S]
    qb = b + k2 * w0 * d[2]
    qc = c - k2 * w0 * w0
    disc = qb * qb - qa * qc
    sq = np.sqrt(np.maximum(disc, 0.0))
    inv = 1.0 / qa
    real = disc >= 0.0
    t = np.full(d.shape[1:], _INF)
    for root in ((-qb - sq) * inv, (-qb + sq) * inv):  # which root is the entry depends on the nappe
        z = o[2] + root * d[2]
        t = np.where(real & (root > 0.0) & (np.abs(z) <= hz), np.minimum(t, root), t)
    if o[2] < -hz:
        t = np.minimum(t, _cap(-hz, r * r, o, d, a, b, c))
    return t


def intersect_capsule(r: float, hz: float, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Cylinder side for |z| <= hz - r, plus the two end spheres beyond it."""
    h = hz - r
    dd = _norm2(d)
    a, b, c = _radial(o, d)
    t = _nearest_root(a, b, c - r * r)
    t = np.where((t > 0.0) & (np.abs(o[2] + t * d[2]) <= h), t, _INF)
    for sign in (1.0, -1.0):
        oc = o - np.array([0.0, 0.0, sign * h])                                  # [3] origin rel. to the end
        ts = _nearest_root(dd, _dot(oc, d), oc @ oc - r * r)
        t = np.where((ts > 0.0) & (sign * (o[2] + ts * d[2]) >= h), np.minimum(t, ts), t)
    return t


def intersect(label: int, size: np.ndarray, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Entry t[*S] of rays (o[3], d[3,*S]) with an object of class `label`, `size` (inf = miss)."""
    with np.errstate(all='ignore'):  # misses and rays parallel to faces give inf/NaN; every test rejects those
        return intersect_unchecked(label, size, o, d)


def intersect_unchecked(label: int, size: np.ndarray, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    """:func:`intersect` without its own np.errstate (the caller silences floating-point warnings once)."""
    hx, _, hz = (0.5 * size).tolist()
    if label == BOX:
        return intersect_box(0.5 * size, o, d)
    if label == SPHERE:
        return intersect_sphere(hx, o, d)
    if label == CYLINDER:
        return intersect_cylinder(hx, hz, o, d)
    if label == CONE:
        return intersect_cone(hx, hz, o, d)
    if label == CAPSULE:
        return intersect_capsule(hx, hz, o, d)
    raise ValueError(f'unknown class {label}')


def surface_normal(label: int, size: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Outward unit normals [3,N] at surface points p[3,N] (object frame); the nearest face wins at edges."""
    hx, hy, hz = size / 2.0
    x, y, z = p
    if label == BOX:
        g0, g1, g2 = hx - np.abs(x), hy - np.abs(y), hz - np.abs(z)             # distance to each face pair
        m0 = (g0 <= g1) & (g0 <= g2)
        m1 = ~m0 & (g1 <= g2)
        m2 = ~(m0 | m1)
        return np.stack([m0 * np.sign(x), m1 * np.sign(y), m2 * np.sign(z)])
    if label == SPHERE:
        return p / hx
    if label == CAPSULE:
        q = np.stack([x, y, z - np.clip(z, hx - hz, hz - hx)])
        return q / np.sqrt((q * q).sum(axis=0))
    rho = np.maximum(np.sqrt(x * x + y * y), 1e-12)                              # [N]
    zero = np.zeros_like(rho)
    if label == CYLINDER:
        side = np.abs(rho - hx) <= np.abs(np.abs(z) - hz)
        return np.where(side, np.stack([x / rho, y / rho, zero]), np.stack([zero, zero, np.sign(z)]))
    if label == CONE:
        k = hx / (2.0 * hz)
        s = 1.0 / np.sqrt(1.0 + k * k)
        side = np.abs(rho - k * (hz - z)) * s <= np.abs(z + hz)
        return np.where(side, np.stack([x / rho * s, y / rho * s, zero + k * s]), np.stack([zero, zero, zero - 1.0]))
    raise ValueError(f'unknown class {label}')


def lambert(label: int, size: np.ndarray, p: np.ndarray, light: np.ndarray) -> np.ndarray:
    """n . light [N] (unclipped) at surface points p[3,N] for a unit light direction [3], all in the object
    frame; equals ``light @ surface_normal(...)`` with fewer array passes (the shading hot path)."""
    hx, hy, hz = size / 2.0
    x, y, z = p
    l0, l1, l2 = light
    if label == SPHERE:
        return _dot(light, p) * (1.0 / hx)
    if label == CAPSULE:
        return (l0 * x + l1 * y + l2 * (z - np.clip(z, hx - hz, hz - hx))) * (1.0 / hx)
    if label == BOX:
        g0, g1, g2 = hx - np.abs(x), hy - np.abs(y), hz - np.abs(z)
        return np.where((g0 <= g1) & (g0 <= g2), l0 * np.sign(x), np.where(g1 <= g2, l1 * np.sign(y), l2 * np.sign(z)))
    rho = np.maximum(np.sqrt(x * x + y * y), 1e-12)
    radial = (l0 * x + l1 * y) / rho                                             # [N] light . radial unit
    if label == CYLINDER:
        return np.where(np.abs(rho - hx) <= np.abs(np.abs(z) - hz), radial, l2 * np.sign(z))
    if label == CONE:
        k = hx / (2.0 * hz)
        s = 1.0 / np.sqrt(1.0 + k * k)
        return np.where(np.abs(rho - k * (hz - z)) * s <= np.abs(z + hz), (radial + l2 * k) * s, -l2)
    raise ValueError(f'unknown class {label}')

"""Ray casting, normals and resting geometry of the scene primitives against independent brute-force checks."""
import numpy as np
import pytest

from string_perception.scenes.geometry import uniform_rotation
from string_perception.scenes.primitives import (BOX, CAPSULE, CLASS_NAMES, CONE, CYLINDER, SIZE_RANGES, SPHERE,
                                                 rest_extent, resting_rotation, sample_size, support_distance)
from string_perception.scenes.raycast import intersect, lambert, surface_normal


def inside(label, size, p):
    """Implicit inside test p[3,N] -> bool[N], written independently of raycast.py."""
    hx, hy, hz = size / 2
    x, y, z = p
    rho = np.hypot(x, y)
    if label == BOX:
        return (abs(x) <= hx) & (abs(y) <= hy) & (abs(z) <= hz)
    if label == SPHERE:
        return x * x + y * y + z * z <= hx * hx
    if label == CYLINDER:
        return (rho <= hx) & (abs(z) <= hz)
    if label == CONE:  # radius hx at z = -hz shrinking linearly to 0 at z = +hz
        return (abs(z) <= hz) & (rho <= hx * (hz - z) / (2 * hz))
    if label == CAPSULE:
        zc = np.clip(z, -(hz - hx), hz - hx)
        return rho ** 2 + (z - zc) ** 2 <= hx * hx
    raise ValueError(label)


def random_rays(rng, size, n):
    """Origin outside the object, directions aimed near it: (o[3], d[3,n])."""
    o = rng.normal(size=3)
    o *= 0.6 / np.linalg.norm(o)
    target = rng.uniform(-0.7, 0.7, (n, 3)) * size                     # [n,3] around the box
    d = (target - o).T                                                  # [3,n]
    return o, d


@pytest.mark.parametrize('label', range(len(CLASS_NAMES)))
def test_intersection_matches_ray_marching(label):
    rng = np.random.default_rng(label)
    for _ in range(4):
        size = sample_size(label, rng.random(3))
        o, d = random_rays(rng, size, 400)
        t = intersect(label, size, o, d)                                 # [n]
        steps = np.linspace(0.0, 1.5, 6001)                              # ray parameter samples, step 2.5e-4
        pts = o[:, None, None] + d[:, :, None] * steps[None, None, :]    # [3,n,S]
        ins = inside(label, size, pts.reshape(3, -1)).reshape(pts.shape[1:])  # [n,S]
        any_in = ins.any(axis=1)
        first = np.where(any_in, steps[ins.argmax(axis=1)], np.inf)      # [n]
        hit = np.isfinite(t)
        # a miss may only disagree for rays that graze the surface (inside for at most 2 marching samples);
        # a hit the marching misses is a graze between samples
        assert np.all(hit | ~any_in | (ins.sum(axis=1) <= 2))
        both = hit & any_in
        assert both.sum() > 50
        np.testing.assert_allclose(t[both], first[both], atol=3e-4)
        # the hit point lies on the surface: just before it is outside, just after inside
        p = o[:, None] + t[hit] * d[:, hit]
        assert np.all(~inside(label, size, o[:, None] + (t[hit] - 1e-6) * d[:, hit]))
        assert inside(label, size, p - 1e-6 * surface_normal(label, size, p)).mean() > 0.99


@pytest.mark.parametrize('label', range(len(CLASS_NAMES)))
def test_normals_unit_outward_and_lambert(label):
    rng = np.random.default_rng(10 + label)
    size = sample_size(label, rng.random(3))
    o, d = random_rays(rng, size, 500)
    t = intersect(label, size, o, d)
    hit = np.isfinite(t)
    p = o[:, None] + t[hit] * d[:, hit]                                  # [3,n] surface points
    n = surface_normal(label, size, p)
    np.testing.assert_allclose(np.linalg.norm(n, axis=0), 1.0, atol=1e-9)
    assert np.all((n * d[:, hit]).sum(axis=0) <= 1e-9)                   # faces the incoming ray
    assert inside(label, size, p + 1e-5 * n).mean() < 0.01               # outward
    light = rng.normal(size=3)
    light /= np.linalg.norm(light)
    np.testing.assert_allclose(lambert(label, size, p, light), light @ n, atol=1e-9)


@pytest.mark.parametrize('label', range(len(CLASS_NAMES)))
def test_sizes_in_range_and_rest_extent_exact(label):
    rng = np.random.default_rng(20 + label)
    lo, hi = (np.array(v) for v in SIZE_RANGES[CLASS_NAMES[label]])
    ang = np.linspace(0, 2 * np.pi, 2000, endpoint=False)
    horizontal = np.stack([np.cos(ang), np.sin(ang), 0 * ang], 1)        # [A,3]
    for k in range(100):
        size = sample_size(label, rng.random(3))
        assert np.all(size >= lo) and np.all(size <= hi)
        R = uniform_rotation(*rng.random(3)) if k % 2 else resting_rotation(label, size, rng.random(4))
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
        lift, radius = rest_extent(label, size, R)
        assert lift == pytest.approx(float(support_distance(label, size, -R[2])), abs=1e-12)
        sampled = support_distance(label, size, horizontal @ R).max()
        assert sampled - 1e-12 <= radius <= sampled * 1.0001 + 1e-12


def test_cone_lying_on_its_side_touches_with_apex_and_rim():
    size = np.array([0.1, 0.1, 0.2])                                    # r = 0.05, half height 0.1
    R = resting_rotation(CONE, size, [0.9, 0, 0, 0])                    # u0 > 0.7: on its side
    lift, _ = rest_extent(CONE, size, R)
    assert (R @ np.array([0, 0, 0.1]))[2] == pytest.approx(-lift, abs=1e-12)  # apex on the surface
    a = np.linspace(0, 2 * np.pi, 3601)
    rim = R @ np.stack([0.05 * np.cos(a), 0.05 * np.sin(a), np.full_like(a, -0.1)])  # [3,A] base rim
    assert rim[2].min() == pytest.approx(-lift, abs=1e-6)                  # and so is the rim

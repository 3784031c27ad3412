"""Procedural RGB-D scenes: determinism, shapes, and that labels, masks and depth agree geometrically."""
import numpy as np
import pytest

from string_perception.box_ops import CORNER_SIGNS
from string_perception.scenes import CLASS_NAMES, SIZE_RANGES, Frame, SceneConfig, generate_frame, render_scene
from string_perception.scenes.layout import Layout
from string_perception.scenes.primitives import support_distance
from string_perception.scenes.render import render_layout

SEEDS = range(24)
NOISE_FREE = SceneConfig.noise_free()


@pytest.fixture(scope='module')
def truths():
    return [render_scene(s) for s in SEEDS]


@pytest.fixture(scope='module')
def exact_truths():
    return [render_scene(s, NOISE_FREE) for s in SEEDS]


def back_project(frame, depth_m, vs, us):
    """Camera-frame points [n,3] of pixels (vs, us) at z-depth depth_m [n]; pixel centres at integer coords."""
    K = frame.K
    x = (us - K[0, 2]) / K[0, 0]
    y = (vs - K[1, 2]) / K[1, 1]
    return np.stack([x * depth_m, y * depth_m, depth_m], axis=1)


def test_deterministic_per_seed_and_config():
    a, b = generate_frame(123), generate_frame(123)
    assert a.equals(b)
    c = generate_frame(124)
    assert not np.array_equal(a.rgb, c.rgb) and not np.array_equal(a.depth_mm, c.depth_mm)
    small = generate_frame(123, SceneConfig(height=64, width=80))
    assert small.equals(generate_frame(123, SceneConfig(height=64, width=80)))


@pytest.mark.parametrize('hw', [(128, 128), (72, 96)])
def test_shapes_and_dtypes(hw):
    h, w = hw
    for seed in range(5):
        f = generate_frame(seed, SceneConfig(height=h, width=w))
        m = f.num_objects
        assert isinstance(f, Frame) and f.seed == seed
        assert f.rgb.shape == (h, w, 3) and f.rgb.dtype == np.uint8
        assert f.depth_mm.shape == (h, w) and f.depth_mm.dtype == np.uint16
        assert f.K.shape == (3, 3) and f.K.dtype == np.float64
        assert f.K[0, 1] == 0 and f.K[1, 0] == 0 and tuple(f.K[2]) == (0, 0, 1)
        assert f.labels.shape == (m,) and f.labels.dtype == np.int64
        assert f.translations.shape == (m, 3) and f.translations.dtype == np.float64
        assert f.rotations.shape == (m, 3, 3) and f.rotations.dtype == np.float64
        assert f.sizes.shape == (m, 3) and f.sizes.dtype == np.float64
        assert f.visibility.shape == (m,) and f.visibility.dtype == np.float64
        assert f.instance_mask.shape == (h, w) and f.instance_mask.dtype == np.int16
        assert set(np.unique(f.instance_mask)) <= set(range(-1, m))


def test_config_validation_and_edge_cases():
    with pytest.raises(ValueError):
        SceneConfig(min_objects=3, max_objects=2)
    with pytest.raises(ValueError):
        SceneConfig(hfov_deg_range=(80.0, 50.0))
    with pytest.raises(ValueError):
        SceneConfig(height=4)
    assert generate_frame(1, SceneConfig(min_objects=0, max_objects=0)).num_objects == 0
    tiny = generate_frame(1, SceneConfig(height=8, width=8))
    assert tiny.rgb.shape == (8, 8, 3)
    cfg = SceneConfig(height=32, width=48)
    assert SceneConfig.from_dict(cfg.to_dict()) == cfg


def test_content_variety(truths):
    frames = [t.frame for t in truths]
    counts = [f.num_objects for f in frames]
    assert max(counts) >= 6 and sum(counts) >= 3 * len(frames)
    assert set(np.concatenate([f.labels for f in frames])) == set(range(len(CLASS_NAMES)))
    assert any(t.layout.supports for t in truths) and any(not t.layout.supports for t in truths)  # table / floor
    fx = [f.K[0, 0] for f in frames]
    assert max(fx) / min(fx) > 1.2                                    # random intrinsics
    dist = [np.linalg.norm(t.layout.camera.p_wc) for t in truths]
    assert max(dist) > 2 * min(dist)                                  # near and far viewpoints


def test_rotations_and_sizes(truths):
    for t in truths:
        f = t.frame
        for lab, R, s in zip(f.labels, f.rotations, f.sizes):
            np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
            assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)
            lo, hi = SIZE_RANGES[CLASS_NAMES[lab]]
            assert np.all(s > 0) and np.all(s >= np.array(lo) - 1e-12) and np.all(s <= np.array(hi) + 1e-12)
            if CLASS_NAMES[lab] in ('cylinder', 'cone', 'capsule', 'sphere'):
                assert s[0] == s[1]                                  # round about the symmetry axis (box z)


def test_boxes_project_onto_their_pixels(truths):
    """The 8 corners through K bound every pixel of the object in instance_mask (exact: the shape is inside)."""
    n_checked = 0
    for t in truths:
        f = t.frame
        for i, (tr, R, s) in enumerate(zip(f.translations, f.rotations, f.sizes)):
            corners = tr + (CORNER_SIGNS * s / 2) @ R.T                  # [8,3]
            assert corners[:, 2].min() > 0
            uv = corners @ f.K.T
            uv = uv[:, :2] / uv[:, 2:]                                   # [8,2]
            vs, us = np.nonzero(f.instance_mask == i)
            assert vs.size >= SceneConfig().min_visible_pixels
            assert us.min() >= uv[:, 0].min() - 1e-6 and us.max() <= uv[:, 0].max() + 1e-6
            assert vs.min() >= uv[:, 1].min() - 1e-6 and vs.max() <= uv[:, 1].max() + 1e-6
            n_checked += 1
    assert n_checked > 50


def _depth_in_box_residual(frame, i, depth_m):
    """Per valid pixel of object i: how far its back-projected depth lies outside the box (metres, 0 inside),
    and the ray length factor |K^-1 (u, v, 1)|."""
    vs, us = np.nonzero((frame.instance_mask == i) & (frame.depth_mm > 0))
    p = back_project(frame, depth_m[vs, us], vs, us)                    # [n,3] camera frame
    local = (p - frame.translations[i]) @ frame.rotations[i]             # [n,3] box frame
    out = np.abs(local) - frame.sizes[i] / 2
    ray = np.linalg.norm(back_project(frame, np.ones(vs.size), vs, us), axis=1)
    return out.max(axis=1), ray, depth_m[vs, us]


def test_depth_inside_boxes_noise_free(exact_truths):
    for t in exact_truths:
        f = t.frame
        for i in range(f.num_objects):
            out, ray, _ = _depth_in_box_residual(f, i, f.depth_mm / 1000.0)
            assert out.size > 0
            assert np.all(out <= 0.5e-3 * ray + 1e-9)                   # only mm rounding along the ray


def test_depth_inside_boxes_with_sensor_noise(truths):
    cfg = SceneConfig()
    for t in truths:
        f = t.frame
        for i in range(f.num_objects):
            out, ray, z = _depth_in_box_residual(f, i, f.depth_mm / 1000.0)
            sigma = cfg.depth_noise_base_m + cfg.depth_noise_quad_per_m * z ** 2
            assert np.all(out <= (6 * sigma + 0.5e-3) * ray)


def test_quantisation_and_invalid_pixels(exact_truths, truths):
    cfg = NOISE_FREE
    for t in exact_truths:
        z, d = t.depth_exact_m, t.frame.depth_mm
        valid = d > 0
        in_range = np.isfinite(z) & (z >= cfg.min_range_m) & (z <= cfg.max_range_m)
        assert np.array_equal(valid, in_range)                          # noise-free: only range / no return
        np.testing.assert_array_equal(d[valid], np.rint(z[valid] * 1000).astype(np.uint16))
    for t in truths:                                                    # noisy: millimetres near the truth
        z, d = t.depth_exact_m, t.frame.depth_mm
        valid = d > 0
        assert np.all(np.isfinite(z[valid])) and np.all(z[valid] <= SceneConfig().max_range_m)
        err = d[valid] / 1000.0 - z[valid]
        sigma = SceneConfig().depth_noise_base_m + SceneConfig().depth_noise_quad_per_m * z[valid] ** 2
        assert np.all(np.abs(err) <= 6 * sigma + 0.5e-3)
        assert 0.5 < np.std(err / sigma) < 1.5                          # noise of the configured size
        assert not np.all(valid == np.isfinite(z))                      # some returns dropped


def test_noise_grows_with_distance(truths):
    errs, zs = [], []
    for t in truths:
        d, z = t.frame.depth_mm, t.depth_exact_m
        valid = d > 0
        errs.append(d[valid] / 1000.0 - z[valid])
        zs.append(z[valid])
    err, z = np.concatenate(errs), np.concatenate(zs)
    near, far = np.std(err[z < 1.0]), np.std(err[z > 2.5])
    assert far > 2 * near


def test_holes_at_depth_edges(truths):
    """Every pixel behind a depth step (farther than a 4-neighbour by > 3 % + 1 cm) reads 0; so do random blobs."""
    cfg = SceneConfig()
    n_edges = n_blob_holes = 0
    for t in truths:
        z = np.where(np.isfinite(t.depth_exact_m), t.depth_exact_m, 1e4)
        d = t.frame.depth_mm
        far = np.zeros(z.shape, bool)
        thr = cfg.edge_rel_threshold * z + cfg.edge_abs_threshold_m
        far[1:] |= z[1:] - z[:-1] > thr[:-1]
        far[:-1] |= z[:-1] - z[1:] > thr[1:]
        far[:, 1:] |= z[:, 1:] - z[:, :-1] > thr[:, :-1]
        far[:, :-1] |= z[:, :-1] - z[:, 1:] > thr[:, 1:]
        assert np.all(d[far] == 0)
        n_edges += far.sum()
        in_range = np.isfinite(t.depth_exact_m) & (t.depth_exact_m <= cfg.max_range_m)
        n_blob_holes += ((d == 0) & in_range & ~far).sum()
    assert n_edges > 500 and n_blob_holes > 500


def test_labels_are_the_visible_objects(truths):
    cfg = SceneConfig()
    n_dropped = 0
    for t in truths:
        f = t.frame
        keep = t.label_index >= 0
        assert keep.sum() == f.num_objects
        vis = t.visible_px / np.maximum(t.total_px, 1)
        assert np.array_equal(keep, (t.visible_px >= cfg.min_visible_pixels) & (vis >= cfg.min_visibility))
        assert np.all(t.visible_px <= t.total_px)
        for o in np.flatnonzero(keep):
            i = t.label_index[o]
            assert (f.instance_mask == i).sum() == t.visible_px[o]
            assert f.visibility[i] == pytest.approx(vis[o])
            assert f.labels[i] == t.layout.objects[o].label
        assert np.all((f.visibility > 0) & (f.visibility <= 1))
        n_dropped += (~keep).sum()
    assert n_dropped > 0                                               # occluded / tiny / off-image objects
    strict = generate_frame(3, SceneConfig(min_visible_pixels=10 ** 6))
    assert strict.num_objects == 0 and np.all(strict.instance_mask == -1)


def test_visibility_counts_match_rendering_each_object_alone(truths):
    checked = 0
    for t in truths[:8]:
        lay = t.layout
        for o, obj in enumerate(lay.objects):
            alone = render_layout(Layout([obj], [], [], lay.camera))
            in_image = int((alone.owner == 0).sum())
            assert in_image <= t.total_px[o]
            if alone.total[0] == in_image:                             # not cut off by the border
                assert t.total_px[o] == in_image
                checked += 1
    assert checked > 20


def test_objects_rest_on_supports_without_overlap(truths):
    for t in truths:
        lay = t.layout
        surface = lay.supports[0].p_w[2] + lay.supports[0].size[2] / 2 if lay.supports else 0.0
        xy, radii = [], []
        for obj in lay.objects:
            lowest = obj.p_w[2] - support_distance(obj.label, obj.size, -obj.R_w[2])
            assert lowest == pytest.approx(surface, abs=1e-9)
            ang = np.linspace(0, 2 * np.pi, 720, endpoint=False)
            h = np.stack([np.cos(ang), np.sin(ang), 0 * ang], 1)
            radii.append(support_distance(obj.label, obj.size, h @ obj.R_w).max())
            xy.append(obj.p_w[:2])
        for a in range(len(xy)):
            for b in range(a):
                assert np.linalg.norm(xy[a] - xy[b]) >= radii[a] + radii[b] - 1e-3


def test_some_objects_tilted_or_lying(truths):
    """Not everything stands upright: some symmetry axes are far from vertical, some boxes lean."""
    tilts = []
    for t in truths:
        for obj in t.layout.objects:
            tilts.append(np.degrees(np.arccos(min(np.abs(obj.R_w[2]).max(), 1.0))))  # 0 = an axis is vertical
    tilts = np.array(tilts)
    assert (tilts > 3).mean() > 0.05 and (tilts < 1e-6).mean() > 0.3

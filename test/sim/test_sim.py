"""Simulated ALOHA / KUKA workcells: labels agree with the rendered masks and depth, frames are deterministic per
seed, settled objects rest on a support, robot links are never labelled."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import cv2  # noqa: E402
import pytest  # noqa: E402
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from string_perception.box_ops import CORNER_SIGNS  # noqa: E402
from string_perception.scenes.primitives import support_distance  # noqa: E402
from string_perception.sim import OBJECT, SIM_CLASS_NAMES, SimConfig, generate_sim_frame, render_sim_scene  # noqa
from string_perception.sim.objects import geom_vertices_in_body  # noqa: E402

CELLS = ('aloha', 'kuka')
SEEDS = range(3)
EXACT = {cell: SimConfig.noise_free(cell=cell, height=96, width=128, mesh_object_fraction=0.3) for cell in CELLS}
SUPPORT_Z = {'aloha': {'table_box': 0.0, 'floor': -0.75}, 'kuka': {'table': 0.625, 'tray_base': 0.64, 'floor': 0.0}}


@pytest.fixture(scope='module')
def truths():
    return {cell: [render_sim_scene(s, EXACT[cell]) for s in SEEDS] for cell in CELLS}


def back_project(K, z, vs, us):
    return np.stack([(us - K[0, 2]) / K[0, 0] * z, (vs - K[1, 2]) / K[1, 1] * z, z], axis=1)   # [n,3]


@pytest.mark.parametrize('cell', CELLS)
def test_frames_have_labels_of_the_sim_classes(truths, cell):
    frames = [t.frame for t in truths[cell]]
    assert sum(f.num_objects for f in frames) > 0
    for f in frames:
        assert f.rgb.shape == (96, 128, 3) and f.depth_mm.shape == (96, 128) and f.instance_mask.shape == (96, 128)
        assert f.labels.dtype == np.int64 and np.all((f.labels >= 0) & (f.labels < len(SIM_CLASS_NAMES)))
        assert np.all(f.sizes > 0) and np.all((f.visibility > 0) & (f.visibility <= 1))
        assert np.allclose(np.linalg.det(f.rotations), 1.0) if f.num_objects else True
        assert set(np.unique(f.instance_mask)) <= set(range(-1, f.num_objects))
        for i in range(f.num_objects):                       # every labelled object is seen
            assert (f.instance_mask == i).sum() >= EXACT[cell].min_visible_pixels


@pytest.mark.parametrize('cell', CELLS)
def test_projected_box_contains_mask_pixels(truths, cell):
    checked = 0
    for t in truths[cell]:
        f = t.frame
        for i in range(f.num_objects):
            corners = f.translations[i] + (CORNER_SIGNS * (0.5 * f.sizes[i])) @ f.rotations[i].T   # [8,3]
            if corners[:, 2].min() <= 0.05:
                continue
            uv = corners @ f.K.T
            hull = cv2.convexHull((uv[:, :2] / uv[:, 2:]).astype(np.float32))
            vs, us = np.nonzero(f.instance_mask == i)
            dist = [cv2.pointPolygonTest(hull, (float(u), float(v)), True) for u, v in zip(us, vs)]
            assert min(dist) >= -1.0, f'seed {f.seed} object {i}: mask pixel {-min(dist):.1f} px outside its box'
            checked += 1
    assert checked > 0


@pytest.mark.parametrize('cell', CELLS)
def test_depth_inside_a_mask_lies_inside_its_box(truths, cell):
    checked = 0
    for t in truths[cell]:
        f = t.frame
        for i in range(f.num_objects):
            vs, us = np.nonzero((f.instance_mask == i) & (f.depth_mm > 0))
            p = back_project(f.K, f.depth_mm[vs, us] * 1e-3, vs, us)                    # [n,3] camera frame
            local = (p - f.translations[i]) @ f.rotations[i]                             # [n,3] box frame
            excess = np.abs(local) - 0.5 * f.sizes[i]
            assert excess.max() < 0.002, f'seed {f.seed} object {i}: a depth point {excess.max():.4f} m outside'
            checked += len(vs)
    assert checked > 0


def test_noisy_depth_stays_within_the_sensor_noise_of_the_box():
    f = generate_sim_frame(5, SimConfig(cell='aloha', height=96, width=128, cameras=('top',)))
    assert f.num_objects > 0
    for i in range(f.num_objects):
        vs, us = np.nonzero((f.instance_mask == i) & (f.depth_mm > 0))
        z = f.depth_mm[vs, us] * 1e-3
        sigma = 0.001 + 0.0015 * z * z                                                   # sensor_model's sigma(z)
        local = (back_project(f.K, z, vs, us) - f.translations[i]) @ f.rotations[i]
        excess = (np.abs(local) - 0.5 * f.sizes[i]).max(axis=1)                          # [n]
        assert np.all(excess < 5 * sigma + 0.001)


def test_deterministic_per_seed_and_config():
    cfg = SimConfig(cell='kuka', height=64, width=80)
    a, b = generate_sim_frame(11, cfg), generate_sim_frame(11, cfg)
    assert a.equals(b)
    c = generate_sim_frame(12, cfg)
    assert not np.array_equal(a.rgb, c.rgb)


def _lowest_z(t, o: int) -> float:
    obj = t.objects[o]
    R, body = t.box_R_w[o], t.model.geom_bodyid[t.index.obj_geom[o]]
    if obj.label == OBJECT or obj.label == 3:                                            # meshes (cone too)
        v = geom_vertices_in_body(t.model, t.index.obj_geom[o])                          # [V,3] body frame
        return float((t.data.xpos[body] + v @ t.data.xmat[body].reshape(3, 3).T)[:, 2].min())
    down = R.T @ np.array([0.0, 0.0, -1.0])                                               # -z in the box frame
    return float(t.box_t_w[o][2] - support_distance(obj.label, t.box_size[o], down))


@pytest.mark.parametrize('cell', CELLS)
def test_mesh_labels_are_the_tightest_box_around_every_vertex(truths, cell):
    """A library mesh's label holds every vertex of the mesh as posed in the scene and is never larger than the
    box along the mesh's own axes; the blobs' own axes are not their tightest, so some label is smaller."""
    meshes = tighter = 0
    for t in truths[cell]:
        for o, obj in enumerate(t.objects):
            if obj.label != OBJECT:
                continue
            meshes += 1
            g = t.index.obj_geom[o]
            body = t.model.geom_bodyid[g]
            v_b = geom_vertices_in_body(t.model, g)                                        # [V,3]
            v_w = t.data.xpos[body] + v_b @ t.data.xmat[body].reshape(3, 3).T              # [V,3] world
            local = (v_w - t.box_t_w[o]) @ t.box_R_w[o]                                     # [V,3] box frame
            assert np.all(np.abs(local) <= t.box_size[o] / 2 + 1e-7), f'seed {t.frame.seed} object {o}'
            own = np.prod(v_b.max(0) - v_b.min(0))
            assert np.prod(t.box_size[o]) <= own * (1 + 1e-9)
            tighter += np.prod(t.box_size[o]) < 0.98 * own
    assert meshes > 0 and tighter > 0, (meshes, tighter)


@pytest.mark.parametrize('cell', CELLS)
def test_settled_objects_rest_on_a_support(truths, cell):
    rested = 0
    for t in truths[cell]:
        m, d = t.model, t.data
        touching = {o: set() for o in range(len(t.objects))}
        for c in d.contact[:d.ncon]:
            assert c.dist > -0.003, f'seed {t.frame.seed}: {-c.dist * 1e3:.1f} mm interpenetration'
            for a, b in ((c.geom1, c.geom2), (c.geom2, c.geom1)):
                o = t.index.geom_obj[a]
                if o >= 0:
                    touching[o].add(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, b) or str(b))
        for o, names in touching.items():
            assert names, f'seed {t.frame.seed}: object {o} touches nothing (floating)'
            if len(names) == 1 and next(iter(names)) in SUPPORT_Z[cell]:   # resting on one support alone
                support = SUPPORT_Z[cell][next(iter(names))]
                assert abs(_lowest_z(t, o) - support) < 0.004, f'seed {t.frame.seed} object {o} on {names}'
                rested += 1
    assert rested > 0


@pytest.mark.parametrize('cell', CELLS)
def test_robot_links_are_never_labelled(truths, cell):
    arm_pixels = 0
    for t in truths[cell]:
        seg = t.geom_ids
        arm = (seg >= 0) & t.index.arm_geom[np.maximum(seg, 0)]
        assert np.all(t.frame.instance_mask[arm] == -1)
        arm_pixels += arm.sum()
        labelled_objects = np.flatnonzero(t.label_index >= 0)
        assert len(labelled_objects) == t.frame.num_objects
    assert arm_pixels > 0                                   # the arms are in view somewhere


def test_config_rejects_unknown_cell_and_camera():
    with pytest.raises(ValueError):
        SimConfig(cell='ur5')
    with pytest.raises(ValueError):
        generate_sim_frame(0, SimConfig(cell='kuka', cameras=('left_wrist',), height=32, width=32))


def test_cache_across_processes_matches_one_process(tmp_path):
    from string_perception.training.sim_frames import build_sim_cache, frame_to_raw_sim, sim_fingerprint
    from string_perception.training.data import FrameCache, raw_to_sample
    cfg = SimConfig(cell='aloha', height=48, width=64, mesh_object_fraction=1.0)
    seeds = [20, 21, 22]
    parallel = build_sim_cache(seeds, cfg, processes=2)
    assert sorted(parallel.samples) == seeds
    for s in seeds:
        single = frame_to_raw_sim(generate_sim_frame(s, cfg))
        got = parallel.samples[s]
        assert np.array_equal(got.rgb, single.rgb) and np.array_equal(got.depth_mm, single.depth_mm)
        assert np.array_equal(got.boxes, single.boxes) and np.array_equal(got.boxes_canonical, single.boxes_canonical)
        assert np.all(got.labels == OBJECT)
        sample = raw_to_sample(got, canonical=True)
        assert tuple(sample['target']['boxes'].shape) == (len(got.labels), 12)
    fp = sim_fingerprint(cfg, seeds)
    parallel.save(tmp_path / 'sim.npz', fp)
    assert FrameCache.load(tmp_path / 'sim.npz', fp) is not None
    assert FrameCache.load(tmp_path / 'sim.npz', sim_fingerprint(cfg.replace(cell='kuka'), seeds)) is None

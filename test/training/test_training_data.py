"""Training data pipeline: seeds per split, determinism, units, 12-number targets, sharding, collate, cache."""
import numpy as np
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception import box_ops  # noqa: E402
from string_perception.scenes import SceneConfig, generate_frame  # noqa: E402
from string_perception.training.data import (  # noqa: E402
    SPLIT_SEED_BASE, FrameCache, SceneDataset, ShardSampler, collate,
    make_loader, shard_indices, split_seeds)

SMALL = SceneConfig(height=64, width=64)


def test_split_seed_ranges_are_disjoint():
    assert split_seeds('train', 3) == range(0, 3)
    assert split_seeds('val', 2, offset=5) == range(1_000_000_005, 1_000_000_007)
    assert split_seeds('test', 4)[0] == 2_000_000_000
    assert SPLIT_SEED_BASE['train'] + 1_000_000 <= SPLIT_SEED_BASE['val'] < SPLIT_SEED_BASE['test']
    with pytest.raises(ValueError):
        split_seeds('train', 2, offset=999_999)      # would run into seeds that are not training seeds
    with pytest.raises(ValueError):
        split_seeds('val', 10_001)
    with pytest.raises(ValueError):
        split_seeds('nope', 1)
    with pytest.raises(ValueError, match=r'asked for \[-1, 1\)'):
        split_seeds('val', 2, offset=-1)             # a negative offset would reach below the split's first seed
    with pytest.raises(ValueError):
        split_seeds('train', -1)


def test_sample_is_deterministic_and_matches_the_frame():
    ds = SceneDataset('train', 3, SMALL)
    a, b = ds[2], SceneDataset('train', 3, SMALL)[2]
    frame = generate_frame(2, SMALL)
    assert a['seed'] == 2
    for k in ('image', 'depth', 'K'):
        assert torch.equal(a[k], b[k])
    assert a['image'].dtype == torch.uint8 and a['image'].shape == (64, 64, 3)
    assert np.array_equal(a['image'].numpy(), frame.rgb)
    # depth: uint16 mm -> float32 metres, 0 (invalid) stays 0
    assert a['depth'].dtype == torch.float32 and a['depth'].shape == (64, 64)
    np.testing.assert_allclose(a['depth'].numpy(), frame.depth_mm.astype(np.float64) / 1000.0, rtol=1e-6)
    assert np.array_equal(a['depth'].numpy() == 0, frame.depth_mm == 0)
    assert a['K'].dtype == torch.float32
    np.testing.assert_allclose(a['K'].numpy(), frame.K, rtol=1e-6)
    t = a['target']
    assert t['labels'].dtype == torch.int64 and t['boxes'].dtype == torch.float32
    assert torch.equal(t['labels'], b['target']['labels']) and torch.equal(t['boxes'], b['target']['boxes'])
    assert np.array_equal(t['labels'].numpy(), frame.labels)


def test_targets_round_trip_through_the_12_number_encoding():
    for seed in range(4):
        frame = generate_frame(seed, SMALL)
        boxes = SceneDataset('train', 4, SMALL)[seed]['target']['boxes'].double().numpy()   # [M,12]
        assert boxes.shape == (len(frame.labels), 12)
        tt, R, s = box_ops.decode_box_params(boxes)
        np.testing.assert_allclose(tt, frame.translations, atol=1e-5)
        np.testing.assert_allclose(R, frame.rotations, atol=1e-5)
        np.testing.assert_allclose(s, frame.sizes, atol=1e-5)
        assert (s > 0).all()


def test_cache_gives_the_same_samples_as_generation():
    ds = SceneDataset('val', 4, SMALL)
    fresh = [ds[i] for i in range(4)]
    cache = ds.build_cache(processes=2)
    assert len(cache) == 4 and cache.nbytes() > 4 * 64 * 64 * 5
    for i in range(4):
        c = ds[i]
        assert torch.equal(c['image'], fresh[i]['image']) and torch.equal(c['depth'], fresh[i]['depth'])
        assert torch.equal(c['target']['boxes'], fresh[i]['target']['boxes'])
    assert isinstance(cache, FrameCache) and 1_000_000_000 in cache


def test_shard_sampler_partitions_reshuffles_and_resumes():
    n, world = 10, 3
    shards = [ShardSampler(n, r, world, seed=1, infinite=False) for r in range(world)]
    firsts = [list(s) for s in shards]
    assert sorted(i for f in firsts for i in f) == list(range(n))            # disjoint cover of all items
    assert [sorted(f) for f in firsts] == [list(shard_indices(n, r, world)) for r in range(world)]
    s = ShardSampler(n, 0, 1, seed=1)
    it = iter(s)
    stream = [next(it) for _ in range(35)]                                     # 3.5 epochs
    assert stream[:10] != stream[10:20] and sorted(stream[10:20]) == list(range(10))
    again = iter(ShardSampler(n, 0, 1, seed=1))
    assert [next(again) for _ in range(35)] == stream                         # deterministic
    resumed = iter(ShardSampler(n, 0, 1, seed=1, start=17))
    assert [next(resumed) for _ in range(18)] == stream[17:]                  # exact resume
    assert list(ShardSampler(n, 0, 1, shuffle=False, infinite=False)) == list(range(n))
    with pytest.raises(ValueError):
        ShardSampler(2, 2, 3)


def test_collate_and_loader_shapes():
    ds = SceneDataset('train', 6, SMALL)
    batch = collate([ds[0], ds[1], ds[2]])
    assert batch['image'].shape == (3, 64, 64, 3) and batch['image'].dtype == torch.uint8
    assert batch['depth'].shape == (3, 64, 64) and batch['K'].shape == (3, 3, 3)
    assert batch['seeds'].tolist() == [0, 1, 2] and len(batch['targets']) == 3
    for t in batch['targets']:
        assert t['boxes'].shape[1] == 12 and t['boxes'].shape[0] == t['labels'].shape[0]
    loader = make_loader(ds, 4, rank=1, world_size=2, seed=0, num_workers=0)   # rank 1 owns seeds 1, 3, 5
    it = iter(loader)
    b1, b2 = next(it), next(it)
    assert set(b1['seeds'].tolist()) | set(b2['seeds'].tolist()) <= {1, 3, 5}
    assert b1['image'].shape[0] == 4


def test_canonical_targets_describe_the_same_box_and_remove_the_ambiguity():
    from string_perception.iou3d import box3d_iou
    from string_perception.scenes import CLASS_NAMES
    from string_perception.training.data import _CUBE_GROUP, canonical_box
    rng = np.random.default_rng(0)
    box, cyl, sph, cone = (CLASS_NAMES.index(n) for n in ('box', 'cylinder', 'sphere', 'cone'))
    for _ in range(20):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        R = q * np.sign(np.linalg.det(q))                                   # random rotation
        size = rng.uniform(0.05, 0.3, 3)
        Rc, sc = canonical_box(box, R, size)
        assert np.allclose(Rc.T @ Rc, np.eye(3)) and np.linalg.det(Rc) > 0
        assert box3d_iou((np.zeros(3), R, size), (np.zeros(3), Rc, sc)) == pytest.approx(1.0, abs=1e-9)
        for P in _CUBE_GROUP[::5]:                                          # every equivalent labelling -> same
            R2, s2 = canonical_box(box, R @ P, np.abs(P).T @ size)
            assert np.allclose(R2, Rc) and np.allclose(s2, sc)
        d = np.array([0.1, 0.1, 0.25])
        for label in (cyl, cone):
            Rc, sc = canonical_box(label, R, d)
            assert np.allclose(sc, d) and abs(Rc[:, 2] @ R[:, 2]) == pytest.approx(1.0)   # symmetry axis kept
            Rz = R @ np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])                       # turned about the axis
            assert np.allclose(canonical_box(label, Rz, d)[0], Rc)
        assert Rc[:, 2] @ R[:, 2] == pytest.approx(1.0)                     # a cone keeps its apex direction
        assert np.allclose(canonical_box(sph, R, np.full(3, 0.1))[0], np.eye(3))
    ds = SceneDataset('train', 3, SMALL, canonical_targets=True)
    raw = SceneDataset('train', 3, SMALL)
    for i in range(3):
        a, b = ds[i]['target'], raw[i]['target']
        assert torch.equal(a['labels'], b['labels']) and torch.equal(a['boxes'][:, :3], b['boxes'][:, :3])
        gt = ds[i]['gt']                                                    # metrics always see the generator's box
        np.testing.assert_array_equal(gt['params'], b['boxes'].double().numpy())
        np.testing.assert_array_equal(gt['labels'], b['labels'].numpy())


def test_disk_cache_round_trip_and_fingerprint(tmp_path):
    path = tmp_path / 'frames.npz'
    ds = SceneDataset('train', 3, SMALL, canonical_targets=True)
    built = ds.build_cache(path=path)
    assert path.exists()
    again = SceneDataset('train', 3, SMALL, canonical_targets=True)
    loaded = again.build_cache(path=path)
    assert loaded is not built and len(loaded) == 3
    for i in range(3):
        a, b = ds[i], again[i]
        assert torch.equal(a['image'], b['image']) and torch.equal(a['depth'], b['depth'])
        assert torch.equal(a['target']['boxes'], b['target']['boxes'])
    other = SceneDataset('train', 3, SceneConfig(height=64, width=64, max_objects=2))
    assert FrameCache.load(path, 'something else') is None
    assert other.build_cache(path=path) is not None and other[0]['target']['labels'].numel() <= 2   # rebuilt

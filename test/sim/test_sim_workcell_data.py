"""Workcell training data (issue 38 item 2): the validated mesh library and its held-out split, appearance
randomisation, object depth dropout, and fine-tuning initialisation across input sizes and class lists."""
import os

import numpy as np
import pytest

mujoco = pytest.importorskip('mujoco')
os.environ.setdefault('MUJOCO_GL', 'osmesa')

from string_perception.sim import SimConfig, generate_sim_frame, render_sim_scene  # noqa: E402
from string_perception.sim.classes import OBJECT  # noqa: E402
from string_perception.sim.generator import object_depth_dropout  # noqa: E402
from string_perception.sim.mesh_library import (HELDOUT_FIRST_RANDOM_URDF, MUG, library_problems,  # noqa: E402
                                                mesh_indices, mesh_problem, split_of)


def test_the_library_is_validated_and_168_is_left_out():
    problems = library_problems()
    assert set(problems) == {168} and 'non-finite' in problems[168]
    assert mesh_problem(0) is None and mesh_problem(MUG) is None
    every = set(mesh_indices('all'))
    assert 168 not in every and len(every) == 1000


def test_splits_are_disjoint_and_cover_the_usable_library():
    train, held = set(mesh_indices('train')), set(mesh_indices('heldout'))
    assert not train & held and train | held == set(mesh_indices('all'))
    assert max(train) < HELDOUT_FIRST_RANDOM_URDF and MUG in held and min(held) == HELDOUT_FIRST_RANDOM_URDF
    assert all(split_of(i) == 'heldout' for i in held) and all(split_of(i) == 'train' for i in train)
    with pytest.raises(ValueError):
        mesh_indices('test')
    with pytest.raises(ValueError):
        SimConfig(object_split='test')


@pytest.mark.slow
def test_a_seed_that_drew_the_broken_mesh_builds_its_frame():
    """Seed 2950000050 drew random_urdfs/168 (a non-finite vertex): MuJoCo refused to compile the cell."""
    f = generate_sim_frame(2950000050, SimConfig(cell='kuka', height=48, width=64))
    assert np.isfinite(f.translations).all()


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'heldout'])
def test_frames_draw_meshes_only_from_their_split(split):
    cfg = SimConfig(cell='aloha', height=32, width=32, mesh_object_fraction=1.0, object_split=split, max_objects=4)
    allowed = {str(p) for p in _mesh_files(mesh_indices(split))}
    for seed in range(3):
        truth = render_sim_scene(seed, cfg)
        drawn = {o.mesh_file for o in truth.objects}
        assert drawn and drawn <= allowed


def _mesh_files(indices):
    from string_perception.sim.objects import mesh_library_entry
    return [mesh_library_entry(i)[0] for i in indices]


@pytest.mark.slow
def test_appearance_randomisation_changes_colours_not_labels():
    base = SimConfig(cell='kuka', height=48, width=64, mesh_object_fraction=0.0)
    a = render_sim_scene(5, base)
    b = render_sim_scene(5, base.replace(appearance_randomization=1.0))
    c = render_sim_scene(5, base.replace(appearance_randomization=1.0))
    np.testing.assert_array_equal(b.frame.rgb, c.frame.rgb)                      # deterministic per seed
    table = a.model.geom('table').id
    assert not np.allclose(a.model.geom_rgba[table], b.model.geom_rgba[table])   # the table changed colour
    assert not np.allclose(a.model.light_dir, b.model.light_dir)
    assert np.abs(a.frame.rgb.astype(int) - b.frame.rgb.astype(int)).mean() > 5
    # objects keep their own colours
    for i in range(len(a.objects)):
        g = a.model.geom(f'obj{i}/geom').id
        assert np.allclose(a.model.geom_rgba[g], b.model.geom_rgba[g])


def test_object_depth_dropout_removes_only_object_pixels():
    rng = np.random.default_rng(0)
    depth = np.full((60, 80), 1000, np.uint16)
    owner = -np.ones((60, 80), int)
    owner[10:30, 10:40] = 0
    owner[35:55, 50:70] = 1
    out = object_depth_dropout(depth, owner, rng, probability=1.0)
    assert np.all(out[owner < 0] == 1000)                                         # background untouched
    for o in (0, 1):
        lost = (out[owner == o] == 0).mean()
        assert 0.25 <= lost <= 1.0                                                # 30-100 % of each object
    assert np.array_equal(object_depth_dropout(depth, owner, rng, probability=0.0), depth)


@pytest.mark.slow
def test_finetuning_init_copies_weights_and_classes_by_name(tmp_path):
    torch = pytest.importorskip('torch')
    from string_perception.model import ViTDConfig, build_model, save_checkpoint
    from string_perception.training.init import load_matching_weights
    src_cfg = ViTDConfig.preset('tiny', image_size=(32, 32), depth=1, class_names=('box', 'cylinder', 'sphere'))
    src = build_model(src_cfg)
    save_checkpoint(tmp_path / 'src.pt', src)
    dst = build_model(ViTDConfig.preset('tiny', image_size=(24, 40), depth=1,
                                        class_names=('sphere', 'box', 'object')))
    fresh_object = dst.class_head.class_embeddings[2].detach().clone()
    report = load_matching_weights(dst, tmp_path / 'src.pt')
    assert report['classes_copied'] == ['sphere', 'box'] and report['classes_new'] == ['object']
    assert report['skipped'] == []
    e_src, e_dst = src.class_head.class_embeddings, dst.class_head.class_embeddings
    assert torch.equal(e_dst[0], e_src[2]) and torch.equal(e_dst[1], e_src[0]) and torch.equal(e_dst[2], fresh_object)
    assert torch.equal(dst.class_head.proj.weight, src.class_head.proj.weight)
    x = dict(image=torch.zeros(1, 24, 40, 3, dtype=torch.uint8), depth=torch.ones(1, 24, 40),
             K=torch.tensor([[[30.0, 0, 19.5], [0, 30.0, 11.5], [0, 0, 1]]]))
    assert dst(**x)['boxes'].shape == (1, 15, 12)                                 # 3x5 tokens at the new size
    assert OBJECT == 5


def test_downscale_frame_is_what_the_node_hands_the_model():
    """render_scale: a frame rendered at 2x is brought to the input size by runtime.prepare_inputs itself; the
    instance mask is sampled at the depth's pixels, labels are unchanged."""
    pytest.importorskip('torch')
    from string_perception.runtime.preprocess import prepare_inputs
    from string_perception.scenes import SceneConfig, generate_frame
    from string_perception.training.data import downscale_frame
    big = generate_frame(7, SceneConfig(height=96, width=128))
    small = downscale_frame(big, (48, 64))
    ref = prepare_inputs(big.rgb, big.depth_mm, big.K, (48, 64))
    np.testing.assert_array_equal(small.rgb, ref.image[0])
    np.testing.assert_array_equal(small.depth_mm.astype(np.float32) / np.float32(1000), ref.depth[0])
    np.testing.assert_allclose(small.K, ref.intrinsics[0], rtol=1e-6)
    np.testing.assert_array_equal(small.instance_mask, big.instance_mask[1::2, 1::2])   # centre-aligned nearest
    np.testing.assert_array_equal(small.translations, big.translations)
    assert small.labels.tolist() == big.labels.tolist()
    # every labelled object still owns pixels of the small mask where its depth is
    for j in range(len(small.labels)):
        assert (small.instance_mask == j).any()
    with pytest.raises(ValueError):
        downscale_frame(big, (48, 48))                      # not one factor: refused, never cropped


@pytest.mark.slow
def test_a_seed_whose_first_three_drops_are_unstable_builds_its_frame():
    """Seed 2001900294 (KUKA, training meshes at 50 %: the workcell evaluator's paired control) went unstable in
    its first three drops (thin / tiny meshes: random_urdfs 292, 297, 167) and failed the whole evaluation run."""
    cfg = SimConfig(cell='kuka', height=48, width=64, object_split='train', mesh_object_fraction=0.5)
    f = generate_sim_frame(2001900294, cfg)
    assert np.isfinite(f.translations).all() and len(f.labels) >= 0

"""evaluation/workcell.py: scoring a model with tiled inference (``MODEL:tiles2x2``) on the same frames."""
import dataclasses

import numpy as np
import pytest

from string_perception import box_ops
from string_perception.evaluation import workcell
from string_perception.evaluation.workcell import WorkcellEvalConfig, format_table, parse_model_spec, score_model
from string_perception.runtime import OnnxModel
from test.support.tiny_model import save_tiny_model


def test_parse_model_spec():
    assert parse_model_spec('m.onnx') == ('m.onnx', None, None)
    assert parse_model_spec('m.onnx:crop') == ('m.onnx', 'crop', None)
    assert parse_model_spec('m.onnx:tiles2x2') == ('m.onnx', None, '2x2')
    assert parse_model_spec('m.onnx:tiles2x2,margin=0.1') == ('m.onnx', None, '2x2,margin=0.1')
    with pytest.raises(ValueError):
        parse_model_spec('m.onnx:tiles2x2,bogus=1')


def _frames(n=2):
    rng = np.random.default_rng(0)
    K = np.array([[300.0, 0, 143.5], [0, 300.0, 95.5], [0, 0, 1]])
    params = box_ops.encode_box_params(np.array([[0.0, 0.0, 1.0]]), np.eye(3)[None], np.array([[0.1, 0.1, 0.1]]))
    return [workcell.TestFrame('kuka', 'front', i, rng.integers(0, 256, (192, 288, 3), dtype=np.uint8),
                               rng.integers(500, 3000, (192, 288)).astype(np.uint16), K, params.reshape(-1, 12),
                               np.array([0]), np.array([1.0])) for i in range(n)]


def test_score_model_with_tiles(tmp_path, monkeypatch):
    model = save_tiny_model(tmp_path / 'tiny.onnx', logit_bias=3.0)
    frames, cfg = _frames(), WorkcellEvalConfig(height=192, width=288)
    passes = []
    run = OnnxModel.run
    monkeypatch.setattr(OnnxModel, 'run', lambda self, **feed: passes.append(len(feed['image'])) or run(self, **feed))
    plain = score_model(model, frames, cfg, threads=1)
    assert set(passes) == {1}
    passes.clear()
    tiled = score_model(model, frames, cfg, threads=1, tiling='2x2')
    assert passes[-2:] == [5, 5]                                  # the whole frame + 4 windows, batched, per frame
    assert plain['tiling'] == 'none' and tiled['tiling'] == '2x2'
    assert tiled['inference_ms_p50'] > 0 and set(tiled['rigs']) == {'kuka/front'}
    table = format_table([plain, tiled])
    assert '| pad + tiles 2x2 |' in table and 'tiny.onnx + tiles 2x2 | kuka/front' in table
    passes.clear()
    flipped = score_model(model, frames, dataclasses.replace(cfg, flip_tta=True), threads=1)
    assert passes[-2:] == [2, 2] and flipped['flip_tta'] is True   # the frame and its mirror image, batched
    assert '| pad + flip |' in format_table([flipped])


def test_mesh_best_ious_counts_only_mesh_objects():
    """Known answer: a prediction exactly on the mesh object and none on the primitive -> [1.0], the primitive ignored;
    a frame without mesh objects adds nothing."""
    from string_perception.sim.classes import OBJECT
    names = ['box', 'cylinder', 'sphere', 'cone', 'capsule', 'object']
    mesh = box_ops.encode_box_params(np.array([[0.2, 0.0, 1.0]]), np.eye(3)[None], np.array([[0.1, 0.2, 0.05]]))[0]
    prim = box_ops.encode_box_params(np.array([[-0.3, 0.0, 1.0]]), np.eye(3)[None], np.array([[0.1, 0.1, 0.1]]))[0]
    gts = [{'params': np.stack([prim, mesh]), 'labels': np.array([0, OBJECT])},
           {'params': prim[None], 'labels': np.array([0])}]
    preds = [{'params': mesh[None], 'labels': np.array([0]), 'scores': np.array([0.9])},  # wrong class: agnostic
             {'params': prim[None], 'labels': np.array([0]), 'scores': np.array([0.9])}]
    best = workcell._mesh_best_ious(preds, gts, names, OBJECT)
    np.testing.assert_allclose(best, [1.0], atol=1e-6)


def test_format_table_shows_mesh_object_counts():
    cells = {'kuka': {'class_aware': 0.5, 'agnostic': 0.6, 'hit_25': 0.9, 'ap3d_25': 0.7, 'heldout_agnostic': 0.25,
                      'heldout_num_gt': 1, 'seen_mesh_agnostic': None, 'seen_mesh_num_gt': 0}}
    table = format_table([{'model': 'm.onnx', 'resize_mode': 'pad', 'cells': cells, 'rigs': {}}])
    assert '| 0.250 (n 1) | - (n 0) |' in table


def test_format_table_shows_what_each_true_part_buys():
    """The oracle table reads the breakdown's true-centre / rotation / size IoUs: a mesh box right but for a 0.1 m
    shift of a 0.2 m cube is IoU 1/3 as matched, 1 with the true centre, 1/3 with either other true part."""
    from string_perception.training.breakdown import breakdown
    names = ['box', 'cylinder', 'sphere', 'cone', 'capsule', 'object']
    gt = box_ops.encode_box_params(np.array([0.0, 0.0, 2.0]), np.eye(3), np.full(3, 0.2))
    pred = box_ops.encode_box_params(np.array([0.1, 0.0, 2.0]), np.eye(3), np.full(3, 0.2))
    b = breakdown([{'params': pred[None], 'labels': np.array([5]), 'scores': np.array([0.9])}],
                  [{'params': gt[None], 'labels': np.array([5])}], names)['overall']
    cells = {'kuka': {'class_aware': None, 'agnostic': 1 / 3, 'hit_25': 1.0, 'ap3d_25': 1.0, 'heldout_breakdown': b}}
    table = format_table([{'model': 'm.onnx', 'resize_mode': 'pad', 'cells': cells, 'rigs': {}}])
    assert '| m.onnx | kuka | held-out meshes | 1 | 0.333 | 1.000 | 0.333 | 0.333 | 0.0 | 1.00 / 1.00 |' in table
    assert 'true centre' not in format_table([{'model': 'm.onnx', 'resize_mode': 'pad', 'rigs': {},
                                               'cells': {'kuka': dict(cells['kuka'], heldout_breakdown=None)}}])


def test_seen_mesh_control_frames_repeat_the_held_out_seeds_with_training_meshes():
    cfg = WorkcellEvalConfig(frames_per_rig=0, heldout_frames=3, seen_mesh_frames=2)
    jobs = workcell.frame_jobs(cfg)
    for cell in ('aloha', 'kuka'):
        held = [s for c, r, s in jobs if c == cell and r == workcell.HELDOUT]
        control = [s for c, r, s in jobs if c == cell and r == workcell.SEEN_MESHES]
        assert len(held) == 3 and control == held[:2]
        assert workcell.frame_sim_config(cfg, cell, workcell.HELDOUT).object_split == 'heldout'
        seen = workcell.frame_sim_config(cfg, cell, workcell.SEEN_MESHES)
        assert seen.object_split == 'train'
        assert seen.mesh_object_fraction == cfg.heldout_mesh_fraction
    assert WorkcellEvalConfig().frames_key() == WorkcellEvalConfig(seen_mesh_frames=0).frames_key()
    assert cfg.frames_key() != WorkcellEvalConfig(frames_per_rig=0, heldout_frames=3).frames_key()


def test_scoring_options_keep_the_rendered_frames():
    """NMS, thresholds and resize mode change how frames are scored, not the frames: one cache serves them all."""
    base = WorkcellEvalConfig(frames_per_rig=0, heldout_frames=3)
    other = dataclasses.replace(base, score_threshold=0.1, nms_iou=0.5, nms_class_agnostic=True,
                                operating_threshold=0.5, resize_mode='crop', min_gt_side_px=32.0, flip_tta=True)
    assert set(workcell.SCORING_FIELDS) < set(dataclasses.asdict(base))
    assert other.frames_key() == base.frames_key()
    assert dataclasses.replace(base, height=240).frames_key() != base.frames_key()
    args = workcell.build_parser().parse_args(['m.onnx', '--out', 'x', '--nms-iou', '0.5', '--nms-class-agnostic',
                                               '--flip-tta'])
    assert (args.nms_iou, args.nms_class_agnostic, args.flip_tta) == (0.5, True, True)
    args = workcell.build_parser().parse_args(['m.onnx', '--out', 'x'])
    assert (args.nms_iou, args.nms_class_agnostic, args.flip_tta) == (WorkcellEvalConfig.nms_iou, False, False)
    for bad in (0.0, 1.5, float('nan')):       # refused when the config is made, before frames are rendered
        with pytest.raises(ValueError, match='nms_iou'):
            WorkcellEvalConfig(nms_iou=bad)
    with pytest.raises(ValueError, match='nms_iou'):
        workcell.main(['m.onnx', '--out', 'x', '--nms-iou', '0'])


def test_control_frames_count_only_in_their_own_column(tmp_path):
    model = save_tiny_model(tmp_path / 'tiny.onnx', logit_bias=3.0)
    frames = _frames(3)
    frames[1].rig, frames[2].rig = workcell.HELDOUT, workcell.SEEN_MESHES
    for f in frames[1:]:
        f.labels = np.array([5])                                   # the mesh class ('object')
    res = score_model(model, frames, WorkcellEvalConfig(height=192, width=288), threads=1)
    s = res['cells']['kuka']
    assert s['num_frames'] == 1 and set(res['rigs']) == {'kuka/front'}
    assert s['heldout_num_gt'] == 1 and s['control_seen_num_gt'] == 1 and s['seen_mesh_num_gt'] == 0
    assert '; paired ' in format_table([res])


def test_mesh_breakdown_is_class_agnostic_geometry():
    """A prediction on the mesh object with the wrong class still matches, at IoU 1 and zero errors."""
    from string_perception.sim.classes import OBJECT
    names = ['box', 'cylinder', 'sphere', 'cone', 'capsule', 'object']
    mesh = box_ops.encode_box_params(np.array([[0.2, 0.0, 1.0]]), np.eye(3)[None], np.array([[0.1, 0.2, 0.05]]))[0]
    gts = [{'params': mesh[None], 'labels': np.array([OBJECT])}]
    b = workcell._mesh_breakdown([{'params': mesh[None], 'labels': np.array([1]), 'scores': np.array([0.9])}],
                                 gts, names, OBJECT)
    assert b['num_matched'] == 1
    assert b['iou']['median'] == pytest.approx(1.0, abs=1e-6)
    assert b['centre_3d_m']['median'] == pytest.approx(0.0, abs=1e-9)
    assert workcell._mesh_breakdown([], [{'params': np.zeros((0, 12)), 'labels': np.zeros(0, int)}], names,
                                    OBJECT) is None


def test_mesh_breakdown_by_visibility_bins_the_meshes():
    """Two meshes, one 30 % and one 90 % visible; the prediction on the second is half as long: each bin's
    breakdown sees only its own mesh."""
    from string_perception.sim.classes import OBJECT
    names = ['box', 'cylinder', 'sphere', 'cone', 'capsule', 'object']
    sizes = np.array([[0.1, 0.2, 0.05], [0.1, 0.2, 0.05]])
    meshes = box_ops.encode_box_params(np.array([[0.2, 0.0, 1.0], [-0.2, 0.0, 1.0]]), np.stack([np.eye(3)] * 2), sizes)
    pred = box_ops.encode_box_params(np.array([[0.2, 0.0, 1.0], [-0.2, 0.0, 1.0]]), np.stack([np.eye(3)] * 2),
                                     np.array([[0.1, 0.2, 0.05], [0.1, 0.1, 0.05]]))
    gts = [{'params': meshes, 'labels': np.array([OBJECT, OBJECT]), 'visibility': np.array([0.3, 0.9])}]
    preds = [{'params': pred, 'labels': np.array([0, 0]), 'scores': np.array([0.9, 0.8])}]
    col = workcell._mesh_column('heldout', preds, gts, names, OBJECT, with_breakdown=True)
    by = col['heldout_breakdown_by_visibility']
    assert list(by) == ['0-0.25', '0.25-0.5', '0.5-0.75', '0.75-1']
    assert by['0-0.25'] is None and by['0.5-0.75'] is None
    assert by['0.25-0.5']['num_matched'] == 1 and by['0.25-0.5']['size_ratio_longest']['median'] == pytest.approx(1.0)
    assert by['0.75-1']['num_matched'] == 1 and by['0.75-1']['size_ratio_longest']['median'] == pytest.approx(0.5)
    assert col['heldout_breakdown']['num_matched'] == 2

"""Scene sources (--scenes procedural | aloha | kuka | mix) in training and evaluation: the choice is saved with the
run, caches of different sources never match, mix frames are the sources' own frames, and a few simulated steps
train and evaluate a model with the source's class list."""
import json
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import pytest  # noqa: E402
pytest.importorskip('torch')  # optional: requirements/train.txt
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import torch  # noqa: E402

from string_perception.evaluation.evaluate import main as evaluate_main  # noqa: E402
from string_perception.evaluation.evaluate import source_dataset_for  # noqa: E402
from string_perception.model import ViTD, ViTDConfig  # noqa: E402
from string_perception.scenes import CLASS_NAMES, SceneConfig  # noqa: E402
from string_perception.sim import SIM_CLASS_NAMES  # noqa: E402
from string_perception.training import sources  # noqa: E402
from string_perception.training.data import SceneDataset, procedural_fingerprint  # noqa: E402
from string_perception.training.checkpoint import load_training_checkpoint, save_training_checkpoint  # noqa: E402
from string_perception.training.config import TrainConfig, build_model_config  # noqa: E402
from string_perception.training.train import build_parser, config_from_args, main  # noqa: E402

TINY = ['--image-size', '64', '--patch-size', '8', '--width', '32', '--layers', '1', '--heads', '2',
        '--model', 'class_embed_dim=16', '--model', 'embed_dim=16']
SMALL_SIM = sources.sim_config((48, 48), {'max_objects': 3, 'mesh_object_fraction': 0.0, 'min_visible_pixels': 8})


def test_scene_source_is_saved_in_the_checkpoint_and_kept_on_resume(tmp_path):
    cfg = config_from_args(build_parser().parse_args(
        TINY + ['--scenes', 'kuka', '--sim', 'mesh_object_fraction=0', '--sim', 'max_objects=4']))
    assert cfg.scenes == 'kuka' and cfg.sim_overrides == {'mesh_object_fraction': 0, 'max_objects': 4}
    model_cfg = build_model_config(cfg)
    model = ViTD(model_cfg)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    save_training_checkpoint(tmp_path / 'c.pt', model, model_cfg, cfg, opt, sched, step=3, best=None)
    saved = TrainConfig.from_dict(load_training_checkpoint(tmp_path / 'c.pt')['train_config'])
    assert saved == cfg
    resumed = config_from_args(build_parser().parse_args(['--steps', '9']), saved)   # what --resume does
    assert (resumed.scenes, resumed.sim_overrides, resumed.steps) == ('kuka', cfg.sim_overrides, 9)
    assert TrainConfig.from_dict({k: v for k, v in cfg.to_dict().items()
                                  if k not in ('scenes', 'sim_overrides')}).scenes == 'procedural'   # old runs
    with pytest.raises(ValueError, match='scene source'):
        TrainConfig(scenes='gazebo')


def test_class_names_follow_the_source():
    assert sources.class_names_for('procedural') == tuple(CLASS_NAMES)
    assert sources.class_names_for('procedural', {'mesh_object_fraction': 0.5}) == tuple(CLASS_NAMES)
    for scenes in ('aloha', 'kuka', 'mix'):
        assert sources.class_names_for(scenes) == tuple(SIM_CLASS_NAMES)      # SimConfig's default has meshes
        assert sources.class_names_for(scenes, {'mesh_object_fraction': 0}) == tuple(CLASS_NAMES)
    assert build_model_config(TrainConfig()).class_names == tuple(CLASS_NAMES)


def test_mix_is_an_even_split_by_seed():
    mix = sources.make_dataset('train', 9, 'mix', SceneConfig(height=48, width=48), SMALL_SIM)
    assert [mix.source(i) for i in range(9)] == ['procedural', 'aloha', 'kuka'] * 3   # seeds 0..8: seed % 3
    val = sources.make_dataset('val', 7, 'mix', sim_cfg=SMALL_SIM)                      # 1e9 % 3 == 1
    counts = {s: [val.source(i) for i in range(7)].count(s) for s in sources.MIX_ORDER}
    assert counts == {'procedural': 2, 'aloha': 3, 'kuka': 2}
    assert type(sources.make_dataset('train', 2, 'procedural')) is SceneDataset       # default path unchanged


def test_cache_fingerprints_differ_between_sources():
    seeds = range(4)
    scene = SceneConfig(height=48, width=48)
    prints = {s: sources.make_dataset('train', 4, s, scene, SMALL_SIM).fingerprint(seeds)
              for s in ('aloha', 'kuka', 'mix')}
    prints['procedural'] = procedural_fingerprint(scene, seeds)
    assert len(set(prints.values())) == 4
    assert set(json.loads(prints['mix'])['parts']) == set(sources.MIX_ORDER)
    other = sources.make_dataset('train', 4, 'aloha', scene, SMALL_SIM.replace(max_objects=4))
    assert other.fingerprint(seeds) != prints['aloha']                              # SimConfig matters too


@pytest.mark.slow
def test_mix_frames_are_the_sources_own_frames(tmp_path):
    scene = SceneConfig(height=48, width=48)
    mix = sources.make_dataset('test', 3, 'mix', scene, SMALL_SIM)
    mix.build_cache(processes=2, path=tmp_path / 'mix.npz')                      # one pool of spawned workers
    assert len(mix.cache) == 3
    for i, name in enumerate(sources.MIX_ORDER[2:] + sources.MIX_ORDER[:2]):        # 2e9 % 3 == 2: kuka first
        assert mix.source(i) == name
        alone = sources.make_dataset('test', 3, name, scene, SMALL_SIM)
        a, b = mix.raw(i), alone.raw(i)
        assert a.seed == b.seed and np.array_equal(a.rgb, b.rgb) and np.array_equal(a.labels, b.labels)
    assert sum(len(r.labels) for r in mix.cache.samples.values()) > 0
    again = sources.make_dataset('test', 3, 'mix', scene, SMALL_SIM)
    again.build_cache(path=tmp_path / 'mix.npz')                                   # reused, same frames
    assert all(np.array_equal(again.cache.samples[s].depth_mm, mix.cache.samples[s].depth_mm) for s in mix.seeds)
    kuka = sources.make_dataset('test', 3, 'kuka', scene, SMALL_SIM)
    assert kuka.fingerprint(kuka.seeds) != mix.fingerprint(mix.seeds)


@pytest.mark.slow
def test_sim_training_and_scenes_evaluation(tmp_path):
    run = tmp_path / 'aloha'
    assert main(TINY + ['--scenes', 'aloha', '--sim', 'max_objects=3', '--sim', 'min_visible_pixels=8',   # 64x64 frames
                        '--num-train-frames', '4', '--batch-size', '2',
                        '--steps', '2', '--val-every', '2', '--val-frames', '2', '--warmup-steps', '1',
                        '--assignment', 'dense', '--cache-file', str(tmp_path / 'train.npz'), '--no-progress',
                        '--out', str(run)]) == 0
    ck = load_training_checkpoint(run / 'last.pt')
    assert ck['step'] == 2 and ck['train_config']['scenes'] == 'aloha'
    assert tuple(ck['config']['class_names']) == tuple(SIM_CLASS_NAMES)   # mesh objects -> the 'object' class
    assert (tmp_path / 'train.npz').exists()
    # the five-class model scored on simulated frames gets primitive-only ones
    five = ViTDConfig.from_dict({**ck['config'], 'class_names': list(CLASS_NAMES)})
    _, scenes, used, note = source_dataset_for(five, ck, 'test', 2, 'kuka')
    assert scenes == 'kuka' and used['mesh_object_fraction'] == 0.0 and 'object' in note
    out = tmp_path / 'eval'
    assert evaluate_main([str(run / 'last.pt'), '--scenes', 'kuka', '--num-frames', '2', '--num-draw', '1',
                          '--out', str(out), '--no-progress']) == 0
    report = json.loads((out / 'metrics.json').read_text())
    assert report['scenes'] == 'kuka' and report['num_frames'] == 2
    assert report['seeds'] == [2_000_000_000, 2_000_000_002] and report['num_objects'] > 0
    assert 0.0 <= report['headline']['avg_best_iou_sym'] <= 1.0 and 'ap3d_25_sym' in report['headline']

"""Training loop: overfit a fixed tiny batch, schedule, CLI config, checkpoint -> resume, torchrun DDP (2 CPU ranks)."""
import json
import math
import os
import shutil
import subprocess
import sys

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.scenes import CLASS_NAMES, SceneConfig  # noqa: E402
from string_perception.training.data import SceneDataset, collate  # noqa: E402
from string_perception.training.checkpoint import load_training_checkpoint  # noqa: E402
from string_perception.training.config import TrainConfig  # noqa: E402
from string_perception.training.engine import build_criterion, param_groups  # noqa: E402
from string_perception.training.schedule import lr_factor  # noqa: E402
from string_perception.training.train import build_parser, config_from_args, main  # noqa: E402

# A model small enough for a few dozen CPU steps in seconds: 64x64 input, 8x8 patches (64 tokens), width 32.
TINY = ['--image-size', '64', '--patch-size', '8', '--width', '32', '--layers', '1', '--heads', '2',
        '--model', 'class_embed_dim=16', '--model', 'embed_dim=16']
TINY_MODEL = dict(image_size=(64, 64), patch_size=8, width=32, depth=1, num_heads=2, class_embed_dim=16,
                  embed_dim=16, class_names=CLASS_NAMES)


def test_lr_warmup_then_cosine():
    f = [lr_factor(s, 10, 110, 0.1) for s in range(111)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)             # linear warm-up
    assert all(a >= b - 1e-12 for a, b in zip(f[10:], f[11:]))                  # then non-increasing
    assert f[60] == pytest.approx(0.1 + 0.9 * 0.5)                              # cosine midpoint
    assert f[110] == pytest.approx(0.1)


def test_cli_overrides_build_the_configs():
    args = build_parser().parse_args(['--encoding', 'rope', '--coord-mode', 'camera_xyz', '--no-depth', '--lr',
                                      '3e-3', '--batch-size', '8', '--epochs', '2', '--num-train-frames', '100',
                                      '--model', 'size_prior=0.2', '--scene', 'max_objects=4', '--no-cache',
                                      '--loss', 'weights={"corners": 10}', '--matcher', 'cost_corners=10'])
    cfg = config_from_args(args)
    assert cfg.model_overrides == {'encoding': 'rope', 'coord_mode': 'camera_xyz', 'use_depth': False,
                                   'size_prior': 0.2}
    assert cfg.scene_overrides == {'max_objects': 4} and cfg.cache is False
    assert cfg.loss_overrides == {'weights': {'corners': 10}} and cfg.matcher_overrides == {'cost_corners': 10}
    crit = build_criterion(ViTDConfig.preset('tiny', **TINY_MODEL), cfg)
    assert crit.weights['corners'] == 10 and crit.matcher.cost_corners == 10 and crit.matcher.cost_params == 5.0
    assert cfg.lr == 3e-3 and cfg.steps == math.ceil(2 * 100 / 8)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg       # plain-dict round trip
    base = TrainConfig(lr=1.0, steps=5)
    assert config_from_args(build_parser().parse_args(['--steps', '9']), base).lr == 1.0   # resume keeps values


def test_no_weight_decay_on_position_encodings_norms_and_biases():
    model = build_model(ViTDConfig.preset('tiny', **TINY_MODEL))
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim >= 2 and '.pe.' not in names[id(p)] for p in decay['params'])
    assert any('.pe.' in names[id(p)] for p in no_decay['params'])
    assert len(decay['params']) + len(no_decay['params']) == len(list(model.parameters()))


def test_loss_decreases_when_overfitting_a_fixed_batch():
    torch.manual_seed(0)
    cfg = ViTDConfig.preset('tiny', **TINY_MODEL)
    model = build_model(cfg)
    criterion = build_criterion(cfg, TrainConfig())
    ds = SceneDataset('train', 2, SceneConfig(height=64, width=64, max_objects=3), canonical_targets=True)
    batch = collate([ds[0], ds[1]])
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    losses = []
    for _ in range(60):
        out = model(batch['image'], batch['depth'], batch['K'])
        loss = criterion(out, batch['targets'])['loss']
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.5 * losses[0], losses


def test_resume_continues_at_the_right_step_with_the_same_state(tmp_path):
    common = TINY + ['--num-train-frames', '12', '--batch-size', '2', '--val-frames', '0', '--warmup-steps', '2',
                     '--lr', '1e-3', '--log-every', '1', '--no-progress', '--scene', 'max_objects=3',
                     '--steps', '4', '--val-every', '2']
    # straight through: 4 steps, checkpoints every 2 steps, the step-2 one kept
    assert main(common + ['--keep-every', '2', '--out', str(tmp_path / 'a')]) == 0
    mid = tmp_path / 'a' / 'ckpt_000002.pt'
    ck_mid, ck_end = load_training_checkpoint(mid), load_training_checkpoint(tmp_path / 'a' / 'last.pt')
    assert ck_mid['step'] == 2 and ck_end['step'] == 4
    assert ck_mid['optimizer']['state'][0]['step'].item() == 2 and ck_mid['scheduler']['last_epoch'] == 2
    # interrupted at step 2, resumed into another directory: same step, weights and optimiser state at the end
    assert main(['--resume', str(mid), '--out', str(tmp_path / 'b'), '--no-progress']) == 0
    ck_res = load_training_checkpoint(tmp_path / 'b' / 'last.pt')
    assert ck_res['step'] == 4 and ck_res['scheduler']['last_epoch'] == 4
    assert ck_res['train_config'] == {**ck_end['train_config'], 'out': str(tmp_path / 'b')}
    for k, v in ck_end['model'].items():
        torch.testing.assert_close(ck_res['model'][k], v, rtol=1e-5, atol=1e-6, msg=k)
    for i, st in ck_end['optimizer']['state'].items():
        for k in ('step', 'exp_avg', 'exp_avg_sq'):
            torch.testing.assert_close(ck_res['optimizer']['state'][i][k], st[k], rtol=1e-5, atol=1e-7)
    rows = (tmp_path / 'b' / 'log.csv').read_text().splitlines()
    assert [r.split(',')[0] for r in rows[1:]] == ['3', '4']                 # continued at step 3
    # the training time adds up over the parts: the resumed run's includes the first part's 2 steps
    assert 0 < ck_mid['train_seconds'] < ck_end['train_seconds']
    assert ck_res['train_seconds'] > ck_mid['train_seconds']
    # --resume auto picks OUT/last.pt; a finished run is a no-op that reports the time already spent
    assert main(['--resume', 'auto', '--out', str(tmp_path / 'b'), '--no-progress']) == 0
    assert load_training_checkpoint(tmp_path / 'b' / 'last.pt')['step'] == 4
    summary = json.loads((tmp_path / 'b' / 'summary.json').read_text())
    assert summary['train_seconds'] == ck_res['train_seconds']


def test_data_only_then_train_offset_trains_on_the_seeds_after_it(tmp_path):
    """--data-only renders the run's frames into --cache-file and stops (its --init-from need not exist yet, no run
    directory is made); --train-offset 30: the frames are training seeds [30, 33), not [0, 3); the run then loads
    that file instead of rendering again, and saves the offset in its checkpoint."""
    cache = tmp_path / 'frames.npz'
    run = TINY + ['--num-train-frames', '3', '--train-offset', '30', '--batch-size', '2', '--val-frames', '0',
                  '--steps', '1', '--no-progress', '--scene', 'max_objects=3', '--cache-file', str(cache),
                  '--out', str(tmp_path / 'run')]
    assert main(run + ['--data-only', '--init-from', str(tmp_path / 'later.pt')]) == 0
    assert not (tmp_path / 'run').exists()
    import numpy as np
    with np.load(cache) as z:
        assert z['seeds'].tolist() == [30, 31, 32]
    written = cache.stat().st_mtime_ns
    assert main(run) == 0
    assert cache.stat().st_mtime_ns == written                      # loaded, not rendered again
    assert load_training_checkpoint(tmp_path / 'run' / 'last.pt')['train_config']['train_offset'] == 30
    with pytest.raises(ValueError, match='data_only needs cache and a cache_file'):
        main([a for a in run if a not in ('--cache-file', str(cache))] + ['--data-only'])   # nowhere to keep them


@pytest.mark.slow
def test_torchrun_ddp_two_cpu_ranks_stay_in_sync(tmp_path):
    out = tmp_path / 'ddp'
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
           '-m', 'string_perception.training.train', *TINY, '--device', 'cpu', '--steps', '3', '--batch-size', '2',
           '--num-train-frames', '8', '--val-frames', '2', '--val-every', '3', '--warmup-steps', '1',
           '--scene', 'max_objects=3', '--no-progress', '--out', str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and 'terminate called without an active exception' in proc.stderr:
        # gloo's threads can abort a rank at process teardown after training finished (seen once in a CI run;
        # upstream: pytorch/pytorch#179291); one fresh retry, and a second failure fails the test
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['world_size'] == 2 and summary['step'] == 3
    assert summary['rank_weight_max_abs_diff'] == 0.0                      # both ranks hold identical weights
    ck = load_training_checkpoint(out / 'last.pt')
    assert ck['step'] == 3 and 'loss' in ck['metrics']
    assert len((out / 'log.csv').read_text().splitlines()) == 2             # header + the step-3 row (rank 0)

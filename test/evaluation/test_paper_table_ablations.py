"""Table 4 ablations (issue 8: "where a claim fails, say what you tried"): the claims are re-checked with an
ablation's cells in place of the default ones, the Cayley drift measure is exact on known rotations, and the script
runs end to end on a micro budget. Model quality is not asserted."""
import json
import math
from pathlib import Path

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from benchmarks import paper_table4_ablations as ab  # noqa: E402
from benchmarks.common import table4  # noqa: E402
from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.model.vitd import save_checkpoint  # noqa: E402

MICRO = ['--model', 'image_size=[64,64]', '--model', 'width=32', '--model', 'depth=1', '--model', 'num_heads=2',
         '--model', 'class_embed_dim=16', '--model', 'embed_dim=16', '--steps', '2', '--batch-size', '2',
         '--train-frames', '4', '--val-points', '2', '--val-frames', '2', '--test-frames', '3', '--threads', '1']


def _run(ablation: str, config: str, seed: int, iou: float) -> dict:
    encoder, encoding = config.split('-')
    return {'ablation': ablation, 'config': config, 'encoder': encoder, 'encoding': encoding, 'seed': seed,
            'test': {'avg_best_iou': iou}}


def test_every_ablation_is_a_valid_change_of_contested_cells():
    assert ab.ABLATIONS[0].name == 'default' and set(ab.ABLATIONS[0].configs) == set(ab.CONTESTED)
    assert len(ab.BY_NAME) == len(ab.ABLATIONS)
    for a in ab.ABLATIONS:
        assert set(a.configs) <= set(ab.CONTESTED), a.name
        assert a.name == 'default' or a.model or a.train or a.steps_scale != 1, f'{a.name} changes nothing'
        for config in a.configs:    # the tiny preset (head dim 32) builds with the ablation's overrides
            encoder, encoding = table4.parse_config(config)
            cfg = ViTDConfig.preset('tiny', **{**a.model, **table4.ENCODERS[encoder], 'encoding': encoding})
            build_model(cfg)
    budget, settings = table4.Budget(), table4.Settings(out=Path('/nonexistent/abl'))
    specs = ab.specs_for([ab.BY_NAME['steps_2x'], ab.BY_NAME['lr_2e-3']], budget, settings)
    by = {(s['ablation'], s['config'], s['seed']): s['train_config'] for s in specs}
    assert len(specs) == 3 * (2 + len(ab.CONTESTED))
    longer, lr = by[('steps_2x', 'vitd-cayley', 0)], by[('lr_2e-3', 'vitd-cayley', 0)]
    assert (longer['steps'], longer['warmup_steps'], longer['val_every']) == (600, 30, 100)
    assert longer['num_train_frames'] == lr['num_train_frames'] == 4000 and longer['lr'] == 1e-3
    assert (lr['steps'], lr['lr']) == (300, 2e-3) and longer['cache_file'] == lr['cache_file']
    assert longer['cache_file'].startswith('/nonexistent/abl/cache/') and '/steps_2x/runs/' in longer['out']


def test_claims_use_the_ablation_cells_in_place_of_the_default_ones():
    runs = []
    for seed, jitter in enumerate((0.0, 0.002, -0.002)):
        runs += [_run('default', 'vit-rope_mixed', seed, 0.030 + jitter), _run('default', 'vit-circulant', seed, 0.024),
                 _run('default', 'vit-cayley', seed, 0.027), _run('default', 'vitd-rope_mixed', seed, 0.108),
                 _run('default', 'vitd-circulant', seed, 0.106), _run('default', 'vitd-cayley', seed, 0.104)]
        runs += [_run('circulant_block8', 'vit-circulant', seed, 0.035)]      # only this cell changes
    cells = ab.cells_by_ablation(runs)
    assert set(cells['circulant_block8']) == {'vit'} and cells['default']['vit']['rope_mixed'].values == \
        pytest.approx([3.0, 3.2, 2.8])
    claims = ab.claims_by_ablation(cells)
    assert claims['default']['circulant_best_vit']['verdict']['mean'] == 'fails'
    assert claims['circulant_block8']['circulant_best_vit']['verdict']['mean'] == 'holds'
    # ViTD cells are the default ones under every ablation that does not touch them
    assert claims['circulant_block8']['cayley_best_vitd'] == claims['default']['cayley_best_vitd']
    worst = min(claims['default']['cayley_best_vitd']['comparisons']['mean'], key=lambda c: c['margin'])
    assert worst['rhs'] == 'ViTD RoPE-M' and worst['margin'] == pytest.approx(-0.4)
    # another step budget is compared only within itself: no ViT cells, ViTD Cayley vs RoPE-M only
    runs += [_run('steps_2x', 'vitd-rope_mixed', 0, 0.12), _run('steps_2x', 'vitd-cayley', 0, 0.13)]
    steps2x = ab.claims_by_ablation(ab.cells_by_ablation(runs))['steps_2x']
    assert steps2x['circulant_best_vit']['verdict']['mean'] == 'untested'
    assert [(c['rhs'], round(c['margin'], 6)) for c in steps2x['cayley_best_vitd']['comparisons']['mean']] == [
        ('ViTD RoPE-M', 1.0)]
    md = ab.render(runs, {}, ['header'], ab.ABLATIONS)
    assert '| `circulant_block8` |' in md and '3.50 ± 0.00 (3.50)' in md and '3.00 ± 0.20 (3.20)' in md
    assert 'fails (-0.40 vs ViTD RoPE-M)' in md and '`lr_2e-3`' not in md     # ablations not run are not rows


def test_cayley_drift_is_zero_at_init_and_exact_for_one_plane(tmp_path):
    cfg = ViTDConfig.preset('tiny', image_size=(64, 64), width=32, depth=2, num_heads=2, encoding='cayley',
                            class_embed_dim=16, embed_dim=16)
    model = build_model(cfg)
    save_checkpoint(tmp_path / 'init.pt', model, extra={'step': 0})
    assert ab.cayley_drift(tmp_path / 'init.pt') == {'mean': 0.0, 'max': 0.0, 's_abs_max': 0.0}
    # one plane of one head of one layer: S = [[0, a], [-a, 0]] -> a rotation by theta, tan(theta / 2) = a
    a = 0.3
    encodings = [m for m in model.modules() if type(m).__name__ == 'CayleyStringEncoding']
    with torch.no_grad():
        encodings[0].weight[0, 0, 1] = a
    save_checkpoint(tmp_path / 'moved.pt', model, extra={'step': 1})
    d = ab.cayley_drift(tmp_path / 'moved.pt')
    cos = (1 - a * a) / (1 + a * a)
    dh = 32 // 2
    one = math.sqrt(4 * (1 - cos)) / math.sqrt(2 * dh)
    heads = sum(e.weight.shape[0] for e in encodings)
    assert d['max'] == pytest.approx(one, rel=1e-6) and d['mean'] == pytest.approx(one / heads, rel=1e-6)
    assert d['s_abs_max'] == pytest.approx(a)
    assert ab.cayley_drift(_rope_checkpoint(tmp_path)) is None


def _rope_checkpoint(tmp_path: Path) -> Path:
    cfg = ViTDConfig.preset('tiny', image_size=(64, 64), width=32, depth=1, num_heads=2, encoding='rope_mixed',
                            class_embed_dim=16, embed_dim=16)
    save_checkpoint(tmp_path / 'rope.pt', build_model(cfg), extra={'step': 0})
    return tmp_path / 'rope.pt'


@pytest.mark.slow
def test_micro_ablations_end_to_end(tmp_path):
    out = tmp_path / 'abl'
    args = ['--out', str(out), *MICRO, '--seeds', '1', '--jobs', '2', '--only', 'default', 'circulant_block8']
    assert ab.main(args) == 0
    results = json.loads((out / 'results.json').read_text())
    assert sorted((r['ablation'], r['config']) for r in results['runs']) == sorted(
        [('default', c) for c in ab.CONTESTED] + [('circulant_block8', 'vit-circulant')])
    block8 = next(r for r in results['runs'] if r['ablation'] == 'circulant_block8')
    spec = json.loads((out / 'circulant_block8' / 'runs' / 'vit-circulant' / 'seed0' / 'spec.json').read_text())
    assert spec['train_config']['model_overrides']['encoding_kwargs'] == {'block_size': 8}
    assert block8['fingerprint'] != next(r for r in results['runs'] if r['ablation'] == 'default'
                                         and r['config'] == 'vit-circulant')['fingerprint']
    assert list((out / 'cache').glob('train_*.npz')) and not (out / 'default' / 'cache').exists()  # one shared cache
    assert set(results['cayley_drift']) == {'default/vit-cayley/0', 'default/vitd-cayley/0'}
    assert all(0 < d['mean'] < 1 for d in results['cayley_drift'].values())     # trained 2 steps: moved, a little
    md = (out / 'ablations.md').read_text()
    assert '| `circulant_block8` |' in md and '## How far trained Cayley rotations moved' in md
    assert set(results['claims']) == {'default', 'circulant_block8'}

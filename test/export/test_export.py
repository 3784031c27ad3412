"""export/: compiled STRING == original model for every encoding, the ONNX graph has no FFT / solve / inverse / expm /
complex ops, metadata round trip through the runtime, fp32 and fp16 parity, dynamic batch, the CLI on a checkpoint
written the way string_perception.training (checkpoint.py) writes (and releases) them.

Small model (32x48 input, width 32, 2 layers): the whole file runs in seconds with the TorchScript exporter.
"""
import json

import numpy as np
import onnx
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import string_perception  # noqa: E402
from string_perception.encodings import ENCODING_NAMES  # noqa: E402
from string_perception.export import cli as export_cli  # noqa: E402
from string_perception.export.pipeline import export_checkpoint  # noqa: E402
from string_perception.export.deployable import DeployableViTD, FoldedAttention  # noqa: E402
from string_perception.export.graph_checks import (  # noqa: E402
    FORBIDDEN_OP_TYPES, complex_tensors, float16_violations,
    forbidden_ops, op_types)
from string_perception.export.verify import (  # noqa: E402
    FP32_ATOL, TEST_SEED_BASE, random_frames, scene_frames, tolerance,
    verify_export)
from string_perception.model import ViTDConfig, build_model, load_checkpoint  # noqa: E402
from string_perception.runtime.checksum import weights_sha256  # noqa: E402
from string_perception.runtime.errors import MetadataError  # noqa: E402
from string_perception.runtime.model_metadata import ModelMetadata  # noqa: E402
from string_perception.runtime.onnx_runner import OnnxModel  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::DeprecationWarning')

CPU = ('CPUExecutionProvider',)
SMALL = dict(image_size=(32, 48), patch_size=8, width=32, depth=2, num_heads=2, class_embed_dim=16, embed_dim=24)
TRAIN_SEED = 123
SCORE_THRESHOLD = 0.2


def _small_model(encoding: str, seed: int = 0, **overrides):
    """A small ViTD whose every parameter is perturbed (so Cayley's S != 0, the box head's last layer != 0, ...)."""
    torch.manual_seed(seed)
    model = build_model(ViTDConfig(**SMALL, encoding=encoding, **overrides)).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def _reference(model, frames):
    with torch.no_grad():
        out = model(*(torch.from_numpy(np.ascontiguousarray(a)) for a in frames))
    return {k: out[k].numpy() for k in ('boxes', 'logits', 'embedding')}


# ------------------------------------------------------------------------------------------------ deployable (torch)
@pytest.mark.parametrize('encoding', [e for e in ENCODING_NAMES])
@pytest.mark.parametrize('coord_mode', ['grid_depth', 'camera_xyz'])
def test_deployable_equals_original(encoding, coord_mode):
    model = _small_model(encoding, coord_mode=coord_mode)
    deploy = DeployableViTD(model)
    frames = random_frames(model.config, batch=2)
    ref = _reference(model, frames)
    with torch.no_grad():
        got = deploy(*(torch.from_numpy(a) for a in frames))
    for name, value in zip(('boxes', 'logits', 'embedding'), got):
        np.testing.assert_allclose(value.numpy(), ref[name], atol=2e-5, rtol=0, err_msg=f'{encoding} {name}')
    assert all(blk.pe is None for blk in deploy.model.encoder.blocks)    # compiled into the attention
    rotates = [blk.attn.rotates for blk in deploy.model.encoder.blocks]
    assert rotates == [encoding != 'none'] * 2                           # 'none': no rotation in the graph
    assert all(blk.pe is not None and not isinstance(blk.attn, FoldedAttention)
               for blk in model.encoder.blocks)                          # the original model is untouched


@pytest.mark.parametrize('encoding', ['cayley', 'circulant'])
def test_fold_is_needed(encoding, monkeypatch):
    """Folding nothing (freqs only, basis ignored) changes a STRING model's outputs: the parity is not vacuous."""
    from string_perception.export import deployable
    model = _small_model(encoding)
    monkeypatch.setattr(deployable, 'fold_basis_into_projection', lambda w, b, basis: (w, b))
    frames = random_frames(model.config)
    with torch.no_grad():
        got = DeployableViTD(model)(*(torch.from_numpy(a) for a in frames))[1].numpy()
    assert np.abs(got - _reference(model, frames)['logits']).max() > 1e-3


@pytest.mark.parametrize('overrides', [dict(use_depth=False), dict(shared_across_heads=True),
                                       dict(use_depth=False, translation_mode='absolute', encoding='circulant')])
def test_rgb_vit_and_shared_heads_export(tmp_path, overrides):
    """RGB-only ViT (2D coordinates; depth, and in 'absolute' mode K, unused) and head-shared encodings export
    with the full three-input contract and match PyTorch."""
    from string_perception.export.metadata import build_metadata
    from string_perception.export.to_onnx import export_deployable
    overrides = dict(overrides)
    model = _small_model(overrides.pop('encoding', 'cayley'), **overrides)
    path = tmp_path / 'm.onnx'
    export_deployable(DeployableViTD(model), str(path), build_metadata(model.config, {}, precision='fp32'))
    runner = OnnxModel(path, CPU, intra_op_threads=1)
    frames = random_frames(model.config, batch=3)
    got, ref = runner.run(*frames), _reference(model, frames)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], atol=FP32_ATOL, rtol=0, err_msg=name)


def test_deployable_rejects_unknown_precision():
    with pytest.raises(ValueError, match='precision'):
        DeployableViTD(_small_model('rope'), 'int8')


# ------------------------------------------------------------------------------------------------ CLI on a checkpoint
@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """A training checkpoint (optimizer, scheduler, rng, provenance), released, then exported by the CLI."""
    from string_perception.training.checkpoint import release_checkpoint, save_training_checkpoint
    from string_perception.training.config import TrainConfig
    d = tmp_path_factory.mktemp('export')
    model = _small_model('cayley', seed=3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    train_cfg = TrainConfig(seed=TRAIN_SEED, model_overrides=dict(SMALL, encoding='cayley'))
    save_training_checkpoint(d / 'best.pt', model, model.config, train_cfg, optimizer, scheduler, step=5, best=0.1,
                             metrics={'avg_best_iou': 0.1})
    release_checkpoint(d / 'best.pt', d / 'release.pt')
    out = d / 'models' / 'vitd_small_cayley.onnx'
    rc = export_cli.main([str(d / 'release.pt'), '--out', str(out), '--fp16', '--score-threshold',
                           str(SCORE_THRESHOLD)])
    record = json.loads(out.with_name('vitd_small_cayley.export.json').read_text())
    loaded, _, _ = load_checkpoint(d / 'release.pt')
    return {'rc': rc, 'record': record, 'fp32': out, 'fp16': out.with_name('vitd_small_cayley_fp16.onnx'),
            'model': loaded, 'train_ckpt': d / 'best.pt', 'dir': d}


def test_cli_exports_and_verifies(exported):
    assert exported['rc'] == 0 and exported['record']['ok']
    for precision in ('fp32', 'fp16'):
        assert exported[precision].is_file()
        entry = exported['record']['files'][precision]
        assert entry['parity_ok'] and not entry['graph_problems']
        assert set(entry['parity_max_abs_diff']) == {'random', 'scenes'}


@pytest.mark.parametrize('precision', ['fp32', 'fp16'])
def test_graph_has_no_forbidden_ops(exported, precision):
    model = onnx.load(str(exported[precision]))
    assert forbidden_ops(model) == [] and complex_tensors(model) == []
    ops = op_types(model)
    assert not ops & set(FORBIDDEN_OP_TYPES)
    assert {'Cos', 'Sin', 'MatMul', 'Softmax'} <= ops                      # the RoPE-Mixed graph is there
    assert model.opset_import[0].version >= 17


def test_forbidden_op_walk_finds_nested_and_complex_ops():
    then = helper.make_graph([helper.make_node('DFT', ['x'], ['y'])], 'then', [],
                             [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node('Identity', ['x'], ['w'])], 'else', [],
                              [helper.make_tensor_value_info('w', TensorProto.FLOAT, None)])
    nodes = [helper.make_node('If', ['c'], ['z'], then_branch=then, else_branch=other),
             helper.make_node('Cast', ['x'], ['xc'], to=TensorProto.COMPLEX64)]
    g = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('c', TensorProto.BOOL, []),
                                       helper.make_tensor_value_info('x', TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info('z', TensorProto.FLOAT, None)])
    model = helper.make_model(g)
    assert [op for _, op, _ in forbidden_ops(model)] == ['DFT']
    assert any('xc' in n for n in complex_tensors(model))


def test_fp16_graph_keeps_angles_and_softmax_in_fp32(exported):
    model = onnx.load(str(exported['fp16']))
    assert float16_violations(model) == []
    by_type = {}
    for t in model.graph.initializer:
        by_type[t.data_type] = by_type.get(t.data_type, 0) + int(np.prod(t.dims))
    assert by_type.get(TensorProto.FLOAT16, 0) > by_type.get(TensorProto.FLOAT, 0)   # mostly fp16 weights
    fp32 = onnx.load(str(exported['fp32']))
    assert TensorProto.FLOAT16 not in {t.data_type for t in fp32.graph.initializer}
    assert exported['fp16'].stat().st_size < 0.85 * exported['fp32'].stat().st_size


def test_float16_check_flags_a_half_precision_softmax():
    g = helper.make_graph([helper.make_node('Softmax', ['x'], ['y'], axis=-1)], 'g',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT16, [2, 3])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT16, [2, 3])])
    assert [(op, t) for _, op, t in float16_violations(helper.make_model(g))] == [('Softmax', 'FLOAT16')]


# ------------------------------------------------------------------------------------------------ metadata
@pytest.mark.parametrize('precision', ['fp32', 'fp16'])
def test_metadata_round_trip(exported, precision):
    model = onnx.load(str(exported[precision]))
    md = ModelMetadata.from_model(model)
    cfg = exported['model'].config
    assert md.labels == cfg.class_names and md.input_hw == cfg.image_size and md.patch_size == cfg.patch_size
    assert md.normalization_mean == cfg.mean and md.normalization_std == cfg.std
    assert md.coord_mode == cfg.coord_mode and md.encoding == 'cayley' and md.embedding_dim == cfg.embed_dim
    assert md.precision == precision and md.data_seed == TRAIN_SEED and md.score_threshold == SCORE_THRESHOLD
    assert md.package_version == string_perception.__version__
    assert md.weights_sha256 == weights_sha256(model)
    assert ViTDConfig.from_dict(md.config) == cfg
    assert md.output_layout['boxes']['fields'] == {'translation': [0, 3], 'rot6d': [3, 9], 'size': [9, 12]}
    assert md.extra['train_step'] == '5'
    assert ModelMetadata.from_props(md.to_props()) == md
    from string_perception.node_params import effective_score_threshold
    assert effective_score_threshold(-1.0, md) == SCORE_THRESHOLD


@pytest.mark.parametrize('value', ['1.5', '-0.1', 'abc', 'nan'])
def test_metadata_score_threshold_is_validated(value):
    from test.support.tiny_model import make_tiny_model
    props = ModelMetadata.from_model(make_tiny_model()).to_props()
    assert 'score_threshold' not in props and ModelMetadata.from_props(props).score_threshold is None
    props['score_threshold'] = value
    with pytest.raises(MetadataError, match=r'\[0, 1\]') as e:
        ModelMetadata.from_props(props)
    assert e.value.key == 'score_threshold'


def test_training_checkpoint_exports_too(exported, tmp_path):
    """The unreleased training checkpoint (optimizer/scheduler/rng inside) exports to the same weights."""
    record = export_checkpoint(exported['train_ckpt'], tmp_path / 'raw.onnx', log=lambda *_: None)
    assert record['ok']
    assert record['files']['fp32']['weights_sha256'] == exported['record']['files']['fp32']['weights_sha256']


# ------------------------------------------------------------------------------------------------ parity, batch
@pytest.mark.parametrize('precision', ['fp32', 'fp16'])
def test_parity_on_scene_frames_and_dynamic_batch(exported, precision):
    runner = OnnxModel(exported[precision], CPU, intra_op_threads=1, warmup=False)
    assert runner.metadata.precision == precision
    graph_in = onnx.load(str(exported[precision])).graph.input
    assert all(vi.type.tensor_type.shape.dim[0].dim_param == 'B' for vi in graph_in)
    frames = scene_frames(exported['model'].config, count=3, seed_offset=10)      # seeds 2e9 + 10 ..
    ref = _reference(exported['model'], frames)
    batched = runner.run(*frames)
    for name in ('boxes', 'logits', 'embedding'):
        diff = np.abs(batched[name] - ref[name]).max()
        assert diff <= tolerance(precision, ref[name]), (precision, name, diff)
        if precision == 'fp32':
            assert diff <= FP32_ATOL
    for i in range(3):                                                              # batch 1 == row of batch 3
        single = runner.run(*(a[i:i + 1] for a in frames))
        for name in ('boxes', 'logits', 'embedding'):
            np.testing.assert_allclose(single[name][0], batched[name][i], atol=1e-5 if precision == 'fp32' else 2e-3)


def test_verification_fails_against_other_weights(exported):
    other = _small_model('cayley', seed=11)
    report = verify_export(str(exported['fp32']), other, precision='fp32')
    assert not report.ok and 'FAILED' in report.table()


def test_scene_frames_use_the_test_split():
    cfg = ViTDConfig(**SMALL)
    image, depth, K = scene_frames(cfg, count=1)
    assert image.shape == (1, 32, 48, 3) and image.dtype == np.uint8 and depth.dtype == np.float32
    assert (depth >= 0).all() and (depth > 0).any() and K.shape == (1, 3, 3)
    assert TEST_SEED_BASE >= 2_000_000_000


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    assert export_cli.main(['x.pt', '--out', str(tmp_path / 'x.onnx'), '--opset', '16']) == 2
    assert export_cli.main([str(tmp_path / 'missing.pt'), '--out', str(tmp_path / 'x.onnx')]) == 2
    assert 'does not exist' in capsys.readouterr().err and not (tmp_path / 'x.onnx').exists()
    with pytest.raises(SystemExit):
        export_cli.main(['x.pt', '--out', str(tmp_path / 'x.onnx'), '--score-threshold', '2'])


@pytest.mark.slow
def test_accuracy_of_exports_on_the_test_split(tmp_path):
    """--eval-frames scores PyTorch and both files through the evaluator; an untrained model with a high class
    prior predicts its box priors (patch points, 0.15 m cubes), which overlap some objects: non-zero IoU."""
    torch.manual_seed(0)
    model = build_model(ViTDConfig(**SMALL, encoding='cayley', class_prior_prob=0.5, size_prior=0.15))
    from string_perception.model import save_checkpoint
    save_checkpoint(tmp_path / 'prior.pt', model)
    record = export_checkpoint(tmp_path / 'prior.pt', tmp_path / 'prior.onnx', fp16=True,
                                           eval_frames=6, log=lambda *_: None)
    acc = record['accuracy']
    assert acc['pytorch']['avg_best_iou_agnostic'] > 0.05
    for key, value in acc['pytorch'].items():
        assert abs(acc['onnx_fp32'][key] - value) <= 1e-4, key
        assert abs(acc['fp16_minus_fp32'][key]) <= 0.02, key
    assert json.loads((tmp_path / 'prior.export.json').read_text())['accuracy'] == acc


def test_pipeline_runs_the_exported_file(exported):
    """The node's pipeline on a camera-sized frame (resized to 32x48 by preprocess) with the default provider list:
    falls back to the CPU (no GPU here) and gives the model's embedding size and finite detections."""
    from string_perception.runtime.pipeline import Pipeline
    from string_perception.scenes import SceneConfig, generate_frame
    frame = generate_frame(TEST_SEED_BASE + 99, SceneConfig(height=96, width=144))
    pipe = Pipeline(exported['fp32'], score_threshold=0.0, intra_op_threads=1)
    result = pipe(frame.rgb, frame.depth_mm, frame.K)
    assert result.input_hw == (32, 48) and result.embedding.shape == (exported['model'].config.embed_dim,)
    assert np.isfinite(result.embedding).all() and len(result.detections.scores) > 0


# ------------------------------------------------------------------------------------------------ optional tokens
@pytest.mark.parametrize('normal_map', [False, True])
def test_deployable_tokens_are_the_models_tokens_after_fusion(normal_map):
    """tokens=True adds ViTD.forward's 'tokens' [B,N,D] (with normal maps: the fused RGB+normal tokens, N not 2N)."""
    model = _small_model('cayley', normal_map=normal_map)
    frames = random_frames(model.config, batch=2)
    with torch.no_grad():
        ref = model(*(torch.from_numpy(a) for a in frames))
        plain = DeployableViTD(model)(*(torch.from_numpy(a) for a in frames))
        got = DeployableViTD(model, tokens=True)(*(torch.from_numpy(a) for a in frames))
    assert len(plain) == 3 and len(got) == 4
    N = model.config.num_tokens
    assert got[3].shape == (2, N, model.config.width) == ref['tokens'].shape
    np.testing.assert_allclose(got[3].numpy(), ref['tokens'].numpy(), atol=2e-5, rtol=0)
    for a, b in zip(plain, got[:3]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.fixture(scope='module')
def exported_tokens(exported):
    """The same released checkpoint exported with --tokens (fp32 and fp16)."""
    out = exported['dir'] / 'models' / 'vitd_small_cayley_tokens.onnx'
    rc = export_cli.main([str(exported['dir'] / 'release.pt'), '--out', str(out), '--tokens', '--fp16'])
    record = json.loads(out.with_name('vitd_small_cayley_tokens.export.json').read_text())
    return {'rc': rc, 'record': record, 'fp32': out, 'fp16': out.with_name('vitd_small_cayley_tokens_fp16.onnx')}


def test_default_export_has_no_tokens_output(exported):
    for precision in ('fp32', 'fp16'):
        runner = OnnxModel(exported[precision], CPU, warmup=False)
        assert runner.output_names == ('boxes', 'logits', 'embedding') and not runner.has_tokens
        assert 'tokens' not in runner.metadata.output_layout
    assert exported['record']['outputs'] == ['boxes', 'logits', 'embedding']


@pytest.mark.parametrize('precision', ['fp32', 'fp16'])
def test_tokens_export_parity_and_metadata(exported, exported_tokens, precision):
    record = exported_tokens['record']
    assert exported_tokens['rc'] == 0 and record['ok'] and record['outputs'] == ['boxes', 'logits', 'embedding',
                                                                                  'tokens']
    entry = record['files'][precision]
    for source in ('random', 'scenes'):                          # verify.py checked tokens like the others
        assert entry['parity_max_abs_diff'][source]['tokens'] <= entry['parity_bound'][source]['tokens']
    # same weights as the default export: the extra output only exposes a tensor the graph computes anyway
    assert entry['weights_sha256'] == exported['record']['files'][precision]['weights_sha256']
    cfg = exported['model'].config
    runner = OnnxModel(exported_tokens[precision], CPU, intra_op_threads=1, warmup=False)
    assert runner.output_names == ('boxes', 'logits', 'embedding', 'tokens') and runner.tokens_dim == cfg.width
    assert runner.metadata.output_layout['tokens']['shape'] == ['B', 'N', 'D']
    assert runner.metadata.output_layout['tokens']['D'] == cfg.width
    assert onnx.load(str(exported_tokens[precision])).graph.output[3].type.tensor_type.shape.dim[0].dim_param == 'B'
    frames = scene_frames(cfg, count=3, seed_offset=20)
    with torch.no_grad():
        ref = exported['model'](*(torch.from_numpy(np.ascontiguousarray(a)) for a in frames))['tokens'].numpy()
    got = runner.run(*frames)['tokens']
    assert got.shape == (3, cfg.num_tokens, cfg.width) and got.dtype == np.float32
    diff = np.abs(got - ref).max()
    assert diff <= (FP32_ATOL if precision == 'fp32' else tolerance('fp16', ref)), diff
    single = runner.run(*(a[1:2] for a in frames))['tokens']                    # dynamic batch
    np.testing.assert_allclose(single[0], got[1], atol=1e-5 if precision == 'fp32' else 2e-3)


def test_export_refuses_tokens_metadata_mismatch(tmp_path):
    from string_perception.export.metadata import build_metadata
    from string_perception.export.to_onnx import export_deployable
    model = _small_model('rope')
    with pytest.raises(ValueError, match='tokens'):
        export_deployable(DeployableViTD(model, tokens=True), str(tmp_path / 'a.onnx'),
                          build_metadata(model.config, {}, precision='fp32'))
    with pytest.raises(ValueError, match='tokens'):
        export_deployable(DeployableViTD(model), str(tmp_path / 'b.onnx'),
                          build_metadata(model.config, {}, precision='fp32', tokens=True))


def test_pipeline_gives_the_exported_tokens(exported, exported_tokens):
    from string_perception.runtime.pipeline import Pipeline
    from string_perception.scenes import SceneConfig, generate_frame
    frame = generate_frame(TEST_SEED_BASE + 98, SceneConfig(height=96, width=144))
    cfg = exported['model'].config
    with_tokens = Pipeline(exported_tokens['fp32'], ('CPUExecutionProvider',), intra_op_threads=1)(
        frame.rgb, frame.depth_mm, frame.K)
    plain = Pipeline(exported['fp32'], ('CPUExecutionProvider',), intra_op_threads=1)(frame.rgb, frame.depth_mm,
                                                                                      frame.K)
    assert plain.tokens is None and with_tokens.tokens.shape == (cfg.num_tokens, cfg.width)
    assert np.isfinite(with_tokens.tokens).all()
    np.testing.assert_allclose(with_tokens.embedding, plain.embedding, rtol=0, atol=1e-6)


def test_checkpoint_flip_tta_equals_the_pipelines(exported):
    """The checkpoint evaluator's --flip-tta (training.inference.predict) and the runtime's flip_tta give the same
    boxes on the same frames: procedural figures with flip are the node's."""
    from string_perception.runtime.pipeline import Pipeline
    from string_perception.scenes import SceneConfig
    from string_perception.training.data import SceneDataset
    from string_perception.training.inference import detections_to_arrays, predict
    model = exported['model']
    dataset = SceneDataset('test', 3, SceneConfig(height=32, width=48))          # the model's own input size
    decode = {'score_threshold': 0.05, 'nms_iou': 0.3, 'max_detections': 50}
    flipped = predict(model, dataset, decode=decode, flip_tta=True)['preds']
    plain = predict(model, dataset, decode=decode)['preds']
    pipe = Pipeline(exported['fp32'], CPU, score_threshold=0.05, flip_tta=True, intra_op_threads=1)
    for i in range(3):
        raw = dataset.raw(i)
        ref = detections_to_arrays(pipe(raw.rgb, raw.depth_mm, raw.K).detections)
        assert len(ref['params']) == len(flipped[i]['params']) > 0
        np.testing.assert_allclose(flipped[i]['scores'], ref['scores'], atol=1e-4)
        np.testing.assert_allclose(flipped[i]['params'][:, :3], ref['params'][:, :3], atol=1e-4)   # centres
    assert any(len(p['params']) != len(f['params']) or not np.allclose(p['params'], f['params'])
               for p, f in zip(plain, flipped))                                  # the flip did change the boxes

"""The exported graph is lean (issue 37): no shape arithmetic of the dynamic batch (Shape, ConstantOfShape, Expand,
Range), the RoPE-Mixed angles of every layer from one MatMul / Cos / Sin, and the same numbers as the per-layer form.

Small model (32x48 input, width 32, 3 layers, patch geometry and grid_depth coordinates like the shipped models).
"""
import numpy as np
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.export.deployable import DeployableViTD, RotationTables  # noqa: E402
from string_perception.export.metadata import build_metadata  # noqa: E402
from string_perception.export.to_onnx import export_deployable  # noqa: E402
from string_perception.export.verify import random_frames  # noqa: E402
from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.runtime.onnx_runner import OnnxModel  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::DeprecationWarning')

SMALL = dict(image_size=(32, 48), patch_size=8, width=32, depth=3, num_heads=2, class_embed_dim=16, embed_dim=24,
             patch_geometry=True, coord_mode='grid_depth')
BATCH_SHAPE_OPS = ('Shape', 'ConstantOfShape', 'Expand', 'Range')


def _model(encoding: str = 'cayley', seed: int = 0):
    torch.manual_seed(seed)
    model = build_model(ViTDConfig(**SMALL, encoding=encoding)).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    model = _model()
    path = tmp_path_factory.mktemp('lean') / 'lean.onnx'
    onnx_model, _ = export_deployable(DeployableViTD(model), str(path), build_metadata(model.config, {},
                                                                                         precision='fp32'))
    return model, path, onnx_model


def test_graph_has_no_batch_shape_arithmetic(exported):
    _, _, onnx_model = exported
    ops = [n.op_type for n in onnx_model.graph.node]
    assert [op for op in ops if op in BATCH_SHAPE_OPS] == []


def test_angles_of_all_layers_are_one_matmul_cos_sin(exported):
    _, _, onnx_model = exported
    ops = [n.op_type for n in onnx_model.graph.node]
    assert ops.count('Cos') == 1 and ops.count('Sin') == 1


@pytest.mark.parametrize('batch', [1, 3])
def test_lean_graph_matches_pytorch_batched_and_single(exported, batch):
    model, path, _ = exported
    frames = random_frames(model.config, batch=3)
    runner = OnnxModel(path, ('CPUExecutionProvider',), warmup=False)
    batched = runner.run(*frames)
    with torch.no_grad():
        ref = model(*(torch.from_numpy(np.ascontiguousarray(a)) for a in frames))
    for name in ('boxes', 'logits', 'embedding'):
        np.testing.assert_allclose(batched[name], ref[name].numpy(), atol=1e-4)
    for i in range(batch):
        single = runner.run(*(a[i:i + 1] for a in frames))
        for name in ('boxes', 'logits', 'embedding'):
            np.testing.assert_allclose(single[name][0], batched[name][i], atol=1e-5)


@pytest.mark.parametrize('encoding', ['cayley', 'rope', 'none'])
def test_shared_rotation_tables_equal_each_layers_own_angles(encoding):
    deploy = DeployableViTD(_model(encoding)).eval()
    B, N, D = 2, deploy.config.num_tokens, deploy.config.width
    x, coords = torch.randn(B, N, D), 3 * torch.randn(B, N, 3)
    with torch.no_grad():
        shared = deploy.encode(x, coords)
        own = deploy.model.encoder(x, coords)                             # each FoldedAttention: coords @ freqs
        for blk in deploy.model.encoder.blocks:
            if blk.attn.rotates:
                theta = (coords @ blk.attn.freqs).unsqueeze(2)
                a = blk.attn(x, RotationTables(theta.cos(), theta.sin()))
                torch.testing.assert_close(a, blk.attn(x, coords), rtol=0, atol=0)
    assert any(b.attn.rotates for b in deploy.model.encoder.blocks) == (encoding != 'none')
    torch.testing.assert_close(shared, own, rtol=1e-6, atol=1e-5)

"""The compiled op, apply_rope_mixed, exports to a small ONNX graph (no complex, FFT, solve or expm) and
ONNX Runtime reproduces it at other batch / token counts."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.encodings import apply_rope_mixed, build_position_encoding, fold_basis_into_projection  # noqa: E402

onnx = pytest.importorskip('onnx')
ort = pytest.importorskip('onnxruntime')

ALLOWED = {'Constant', 'Cast', 'Mul', 'Unsqueeze', 'Slice', 'MatMul', 'Cos', 'Sin', 'Shape', 'Gather', 'Div',
           'Sub', 'Add', 'Concat', 'Transpose', 'Reshape', 'Identity'}


class CompiledAttentionLogits(torch.nn.Module):
    """What export builds from a trained STRING layer: folded q/k projections + apply_rope_mixed."""

    def __init__(self, enc, d_in, heads, head_dim):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        can = enc.canonical()
        wq, _ = fold_basis_into_projection(torch.randn(heads * head_dim, d_in, generator=g), None, can.basis)
        wk, _ = fold_basis_into_projection(torch.randn(heads * head_dim, d_in, generator=g), None, can.basis)
        self.register_buffer('wq', wq)
        self.register_buffer('wk', wk)
        self.register_buffer('freqs', can.freqs.float())
        self.heads, self.head_dim = heads, head_dim

    def forward(self, x, coords):
        b, n, _ = x.shape
        q = (x @ self.wq.T).reshape(b, n, self.heads, self.head_dim).transpose(1, 2)  # [B,H,N,Dh]
        k = (x @ self.wk.T).reshape(b, n, self.heads, self.head_dim).transpose(1, 2)
        return apply_rope_mixed(q, coords, self.freqs) @ apply_rope_mixed(k, coords, self.freqs).transpose(-1, -2)


@pytest.mark.slow  # ~15 s: the torch.export-based exporter
def test_compiled_circulant_exports_to_plain_ops_and_matches_onnxruntime(tmp_path):
    torch.manual_seed(0)
    enc = build_position_encoding('circulant', head_dim=16, num_heads=2, coord_dim=3, block_size=8)
    model = CompiledAttentionLogits(enc, 12, 2, 16).eval()
    x, r = torch.randn(2, 5, 12), torch.randn(2, 5, 3)
    path = tmp_path / 'logits.onnx'
    batch, tokens = torch.export.Dim('B'), torch.export.Dim('N')
    torch.onnx.export(model, (x, r), path, dynamo=True, input_names=['x', 'coords'], output_names=['logits'],
                      dynamic_shapes=({0: batch, 1: tokens}, {0: batch, 1: tokens}), verbose=False)
    graph = onnx.load(path)
    ops = {node.op_type for node in graph.graph.node}
    assert ops <= ALLOWED, f'unexpected ops in the compiled graph: {ops - ALLOWED}'
    sess = ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    x2, r2 = torch.randn(3, 9, 12), torch.randn(3, 9, 3)
    (out,) = sess.run(None, {'x': x2.numpy(), 'coords': r2.numpy()})
    with torch.no_grad():
        assert torch.allclose(torch.from_numpy(out), model(x2, r2), atol=1e-4)

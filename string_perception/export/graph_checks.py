"""Static checks of an exported graph: forbidden op types, and which ops must stay float32 in an fp16 model.

The deployment identity (docs/DESIGN.md §2) promises a plain RoPE-Mixed graph. `forbidden_ops` walks every node (nested
subgraphs of If/Loop/Scan included) and returns the ones whose op type computes an FFT, solves a linear system,
inverts or exponentiates a matrix, or makes complex numbers; `complex_tensors` finds complex-typed values.
`float16_violations` lists the ops that `DeployableViTD(precision='fp16')` keeps in float32 (the RoPE angle
MatMul's consumers Cos/Sin, and Softmax) but whose inputs are not float32.
"""
from __future__ import annotations

from typing import Iterator

import onnx
from onnx import TensorProto

__all__ = ['FORBIDDEN_OP_TYPES', 'FLOAT32_OP_TYPES', 'iter_nodes', 'op_types', 'forbidden_ops', 'complex_tensors',
           'float16_violations']

# op type -> why it may not appear. Default-domain ops plus the contrib ops ONNX Runtime would otherwise offer.
FORBIDDEN_OP_TYPES = {
    'DFT': 'FFT / DFT',
    'STFT': 'FFT (short-time Fourier transform)',
    'Rfft': 'FFT (com.microsoft contrib op)',
    'Irfft': 'FFT (com.microsoft contrib op)',
    'ComplexMul': 'complex numbers (com.microsoft contrib op)',
    'ComplexMulConj': 'complex numbers (com.microsoft contrib op)',
    'Inverse': 'matrix inverse (com.microsoft contrib op)',
    'LinalgSolve': 'linear solve',
    'LinalgInv': 'matrix inverse',
    'MatrixExp': 'matrix exponential',
    'Det': 'determinant (only needed by solves and inverses)',
    'Loop': 'a loop (how a matrix exponential / iterative solve would have to be exported)',
    'Scan': 'a scan (iterative solve / series expansion)',
}
FLOAT32_OP_TYPES = ('Cos', 'Sin', 'Softmax')
_COMPLEX = (TensorProto.COMPLEX64, TensorProto.COMPLEX128)


def iter_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and of the subgraphs in its nodes' attributes, depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from iter_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from iter_nodes(g)


def op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in iter_nodes(model.graph)}


def forbidden_ops(model: onnx.ModelProto) -> list[tuple[str, str, str]]:
    """[(node name, op type, reason)] for every node with an op type in FORBIDDEN_OP_TYPES."""
    return [(n.name, n.op_type, FORBIDDEN_OP_TYPES[n.op_type]) for n in iter_nodes(model.graph)
            if n.op_type in FORBIDDEN_OP_TYPES]


def _value_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every value after ONNX shape inference (inputs, outputs, intermediates, initializers)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {vi.name: vi.type.tensor_type.elem_type for vi in (*g.input, *g.output, *g.value_info)}
    types.update({t.name: t.data_type for t in g.initializer})
    return types


def complex_tensors(model: onnx.ModelProto) -> list[str]:
    """Names of values (or Cast targets) with a complex element type."""
    types = _value_types(model)
    names = [n for n, t in types.items() if t in _COMPLEX]
    names += [f'{n.name} (Cast to complex)' for n in iter_nodes(model.graph) if n.op_type == 'Cast'
              and any(a.name == 'to' and a.i in _COMPLEX for a in n.attribute)]
    return names


def float16_violations(model: onnx.ModelProto) -> list[tuple[str, str, str]]:
    """[(node name, op type, input dtype)] for Cos/Sin/Softmax nodes whose input is not float32."""
    types = _value_types(model)
    bad = []
    for n in iter_nodes(model.graph):
        if n.op_type in FLOAT32_OP_TYPES:
            t = types.get(n.input[0], TensorProto.UNDEFINED)
            if t != TensorProto.FLOAT:
                bad.append((n.name, n.op_type, TensorProto.DataType.Name(t)))
    return bad

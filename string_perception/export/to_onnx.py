"""`DeployableViTD` -> one ONNX model (docs/ARCHITECTURE.md, "The ONNX file"): I/O names, dynamic batch, weights as
initializers, metadata and checksum, `onnx.checker`.

Exporter: the TorchScript tracer (`torch.onnx.export(..., dynamo=False)`). Measured on the 2-core dev machine with
torch 2.13: the ViTD with 32x48 input, width 32, 2 layers exports in ~0.7 s with it and ~19 s with the dynamo
exporter (same ops after ORT's optimisations, both within 2e-6 of PyTorch); the tiny preset in ~1 s. The model has
no data-dependent control flow (depth_tokens.py is written for tracing), so tracing loses nothing.
The tracer leaves some weights (e.g. biases after constant folding) in `Constant` nodes; they are moved to graph
initializers so that `weights_sha256` covers every weight. Inputs the model ignores are dropped by the tracer and
put back (unused) so every file has the same three inputs.
"""
from __future__ import annotations

import io
import warnings

import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from string_perception.runtime.model_metadata import ModelMetadata

from .deployable import TOKENS_OUTPUT, DeployableViTD
from .metadata import stamp_metadata

__all__ = ['INPUT_NAMES', 'DEFAULT_OPSET', 'MIN_OPSET', 'example_inputs', 'trace_to_onnx',
           'constants_to_initializers', 'restore_unused_inputs', 'export_deployable']

INPUT_NAMES = ('image', 'depth', 'intrinsics')
DEFAULT_OPSET = 18
MIN_OPSET = 17   # LayerNormalization


def example_inputs(deploy: DeployableViTD, batch: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tracing inputs: image uint8[B,H,W,3], depth float32[B,H,W] (1-2 m), intrinsics float32[B,3,3]."""
    H, W = deploy.config.image_size
    g = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (batch, H, W, 3), generator=g, dtype=torch.uint8)
    depth = 1.0 + torch.rand(batch, H, W, generator=g)
    K = torch.tensor([[float(W), 0.0, (W - 1) / 2], [0.0, float(W), (H - 1) / 2], [0.0, 0.0, 1.0]])
    return image, depth, K.expand(batch, 3, 3).contiguous()


def trace_to_onnx(deploy: DeployableViTD, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """Trace and convert (in memory); inputs/outputs named per the contract, batch axis 'B' dynamic."""
    if opset < MIN_OPSET:
        raise ValueError(f'opset must be >= {MIN_OPSET}, got {opset}')
    buf = io.BytesIO()
    dynamic = {name: {0: 'B'} for name in (*INPUT_NAMES, *deploy.output_names)}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')   # TorchScript exporter deprecation + tracer warnings about shapes
        torch.onnx.export(deploy.eval(), example_inputs(deploy), buf, input_names=list(INPUT_NAMES),
                          output_names=list(deploy.output_names), dynamic_axes=dynamic, opset_version=opset,
                          do_constant_folding=True, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def constants_to_initializers(model: onnx.ModelProto) -> int:
    """Move top-level `Constant` nodes with a tensor `value` into graph initializers; returns how many."""
    keep, moved = [], 0
    for node in model.graph.node:
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == 'Constant' and set(attrs) == {'value'} and len(node.output) == 1:
            tensor = numpy_helper.from_array(numpy_helper.to_array(attrs['value'].t), node.output[0])
            model.graph.initializer.append(tensor)
            moved += 1
        else:
            keep.append(node)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return moved


def restore_unused_inputs(model: onnx.ModelProto, height: int, width: int) -> list[str]:
    """The tracer drops inputs the model ignores (depth for an RGB ViT, and K in its 'absolute' mode); put them back
    (unused) so every file has the three-input contract. Returns the names added."""
    spec = {'image': (TensorProto.UINT8, ['B', height, width, 3]), 'depth': (TensorProto.FLOAT, ['B', height, width]),
            'intrinsics': (TensorProto.FLOAT, ['B', 3, 3])}
    present = {vi.name: vi for vi in model.graph.input}
    added = [name for name in INPUT_NAMES if name not in present]
    ordered = [present.get(name) or helper.make_tensor_value_info(name, *spec[name]) for name in INPUT_NAMES]
    ordered += [vi for name, vi in present.items() if name not in INPUT_NAMES]
    del model.graph.input[:]
    model.graph.input.extend(ordered)
    return added


def export_deployable(deploy: DeployableViTD, path: str, metadata: ModelMetadata,
                      opset: int = DEFAULT_OPSET) -> tuple[onnx.ModelProto, ModelMetadata]:
    """Trace `deploy`, store weights as initializers, stamp `metadata` (+ checksum), check and save to `path`."""
    if metadata.precision != deploy.precision:
        raise ValueError(f'metadata precision {metadata.precision!r} != model precision {deploy.precision!r}')
    has_tokens, layout_tokens = TOKENS_OUTPUT in deploy.output_names, TOKENS_OUTPUT in (metadata.output_layout or {})
    if has_tokens != layout_tokens:
        raise ValueError(f'the model {"has" if has_tokens else "has no"} tokens output but the metadata '
                         f'output_layout {"lacks" if has_tokens else "declares"} it')
    model = trace_to_onnx(deploy, opset)
    restore_unused_inputs(model, *deploy.config.image_size)
    constants_to_initializers(model)
    model.producer_name = 'string_perception.export'
    model.doc_string = (f'ViTD ({deploy.config.encoding} compiled to folded RoPE-Mixed), {deploy.precision}; '
                        'see docs/ARCHITECTURE.md "The ONNX file"')
    final = stamp_metadata(model, metadata)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return model, final

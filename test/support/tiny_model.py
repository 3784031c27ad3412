"""Tiny contract-conforming ONNX models for tests (runtime, node, evaluator) without the real exporter.

``make_tiny_model()`` builds, with ``onnx.helper`` only, a model that has the exact I/O of docs/ARCHITECTURE.md
(inputs ``image`` uint8 [B,H,W,3], ``depth`` float32 [B,H,W], ``intrinsics`` float32 [B,3,3]; outputs ``boxes``
[B,N,12], ``logits`` [B,N,C], ``embedding`` [B,E]), complete metadata and a correct ``weights_sha256``. The
maths is fixed and simple: per patch (``patch x patch`` pixels, N = H/p * W/p tokens) the mean colour (0..1) and
mean depth form a feature ``f[B,N,4]``; ``boxes = [f @ Wt + bt, f @ Wr + br, softplus(f @ Ws + bs) + 0.01]``,
``logits = f @ Wc + bc``, ``embedding = [mean_N f, K.flatten()] @ We``; with ``tokens=True`` also the optional
output ``tokens = f @ Wk`` [B,N,TINY_TOKENS_DIM] (declared in ``output_layout``; the other outputs and their weights
stay the same). Weights come from ``seed``.
Keyword arguments produce the broken variants the runtime must reject (wrong input names/dtypes, bad metadata,
tampered weights, unsupported IR version).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from string_perception.runtime.checksum import weights_sha256
from string_perception.runtime.model_metadata import ModelMetadata

__all__ = ['make_tiny_model', 'save_tiny_model', 'TINY_LABELS', 'TINY_TOKENS_DIM']

TINY_LABELS = ('cube', 'cylinder', 'sphere')
TINY_TOKENS_DIM = 5   # D of the optional tokens output (differs from every other output's last dim)


def make_tiny_model(*, height: int = 32, width: int = 48, patch: int = 8, labels: Sequence[str] = TINY_LABELS,
                    embedding_dim: int = 8, seed: int = 0,
                    input_names: Sequence[str] = ('image', 'depth', 'intrinsics'),
                    image_elem_type: int = TensorProto.UINT8, static_batch: int | None = None,
                    logit_bias: float = 0.0, ir_version: int = 10, opset: int = 17,
                    metadata_overrides: Mapping[str, str | None] | None = None,
                    tamper_weights: bool = False, tokens: bool = False) -> onnx.ModelProto:
    """The model (see module docstring). ``metadata_overrides``: key -> new string (None deletes the key).
    ``tamper_weights``: change a weight after the checksum was recorded (checksum mismatch).
    ``tokens``: add the optional ``tokens`` output [B,N,TINY_TOKENS_DIM]."""
    rng = np.random.default_rng(seed)
    H, W, p, C, E = height, width, patch, len(labels), embedding_dim
    B = static_batch if static_batch is not None else 'B'
    img_name, depth_name, k_name = input_names

    def w(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = {
        'Wt': w(4, 3), 'bt': np.array([0.0, 0.0, 1.0], np.float32),
        'Wr': w(4, 6, scale=0.2), 'br': np.array([1, 0, 0, 0, 1, 0], np.float32),
        'Ws': w(4, 3), 'bs': np.full(3, -1.0, np.float32),
        'Wc': w(4, C, scale=2.0), 'bc': np.full(C, logit_bias, np.float32),
        'We': w(13, E),
        'shape_c': np.array([0, 3, -1], np.int64), 'shape_d': np.array([0, 1, -1], np.int64),
        'shape_k': np.array([0, 9], np.int64), 'inv255': np.array(1 / 255, np.float32),
        'eps_size': np.array(0.01, np.float32),
    }
    initializers = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    n = helper.make_node
    nodes = [
        n('Cast', [img_name], ['img_f'], to=TensorProto.FLOAT),                          # [B,H,W,3]
        n('Transpose', ['img_f'], ['img_nchw'], perm=[0, 3, 1, 2]),                      # [B,3,H,W]
        n('AveragePool', ['img_nchw'], ['img_pool'], kernel_shape=[p, p], strides=[p, p]),  # [B,3,h,w]
        n('Reshape', ['img_pool', 'shape_c'], ['img_tok_t']),                            # [B,3,N]
        n('Transpose', ['img_tok_t'], ['img_tok255'], perm=[0, 2, 1]),                   # [B,N,3]
        n('Mul', ['img_tok255', 'inv255'], ['img_tok']),                                 # [B,N,3] in 0..1
        n('Unsqueeze', [depth_name, 'axes1'], ['depth_n1']),                             # [B,1,H,W]
        n('AveragePool', ['depth_n1'], ['depth_pool'], kernel_shape=[p, p], strides=[p, p]),  # [B,1,h,w]
        n('Reshape', ['depth_pool', 'shape_d'], ['depth_tok_t']),                        # [B,1,N]
        n('Transpose', ['depth_tok_t'], ['depth_tok'], perm=[0, 2, 1]),                  # [B,N,1]
        n('Concat', ['img_tok', 'depth_tok'], ['feat'], axis=2),                         # [B,N,4]
        n('MatMul', ['feat', 'Wt'], ['t0']), n('Add', ['t0', 'bt'], ['t']),              # [B,N,3]
        n('MatMul', ['feat', 'Wr'], ['r0']), n('Add', ['r0', 'br'], ['r']),              # [B,N,6]
        n('MatMul', ['feat', 'Ws'], ['s0']), n('Add', ['s0', 'bs'], ['s1']),
        n('Softplus', ['s1'], ['s2']), n('Add', ['s2', 'eps_size'], ['s']),              # [B,N,3] > 0
        n('Concat', ['t', 'r', 's'], ['boxes'], axis=2),                                 # [B,N,12]
        n('MatMul', ['feat', 'Wc'], ['c0']), n('Add', ['c0', 'bc'], ['logits']),         # [B,N,C]
        n('ReduceMean', ['feat'], ['feat_mean'], axes=[1], keepdims=0),                  # [B,4]
        n('Reshape', [k_name, 'shape_k'], ['k_flat']),                                   # [B,9]
        n('Concat', ['feat_mean', 'k_flat'], ['emb_in'], axis=1),                        # [B,13]
        n('MatMul', ['emb_in', 'We'], ['embedding']),                                    # [B,E]
    ]
    initializers.append(numpy_helper.from_array(np.array([1], np.int64), 'axes1'))
    outputs = [helper.make_tensor_value_info('boxes', TensorProto.FLOAT, [B, 'N', 12]),
               helper.make_tensor_value_info('logits', TensorProto.FLOAT, [B, 'N', C]),
               helper.make_tensor_value_info('embedding', TensorProto.FLOAT, [B, E])]
    output_layout = {'boxes': ['t3', 'rot6d', 'size3'], 'logits': 'sigmoid'}
    if tokens:   # drawn after the other weights, so they are the same with or without tokens
        initializers.append(numpy_helper.from_array(w(4, TINY_TOKENS_DIM), 'Wk'))
        nodes.append(n('MatMul', ['feat', 'Wk'], ['tokens']))                           # [B,N,Dk]
        outputs.append(helper.make_tensor_value_info('tokens', TensorProto.FLOAT, [B, 'N', TINY_TOKENS_DIM]))
        output_layout['tokens'] = {'shape': ['B', 'N', 'D'], 'D': TINY_TOKENS_DIM}
    graph = helper.make_graph(
        nodes, 'tiny_vitd',
        inputs=[helper.make_tensor_value_info(img_name, image_elem_type, [B, H, W, 3]),
                helper.make_tensor_value_info(depth_name, TensorProto.FLOAT, [B, H, W]),
                helper.make_tensor_value_info(k_name, TensorProto.FLOAT, [B, 3, 3])],
        outputs=outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)],
                              producer_name='test.support.tiny_model')
    model.ir_version = ir_version
    meta = ModelMetadata(
        labels=tuple(labels), input_height=H, input_width=W, patch_size=p,
        normalization_mean=(0.485, 0.456, 0.406), normalization_std=(0.229, 0.224, 0.225),
        coord_mode='camera_xyz', encoding='rope_mixed', embedding_dim=E, weights_sha256=weights_sha256(model),
        precision='fp32', output_layout=output_layout,
        package_version='0.0.0-test', data_seed=seed, config={'preset': 'tiny-test'})
    props = meta.to_props()
    for k, v in (metadata_overrides or {}).items():
        if v is None:
            props.pop(k, None)
        else:
            props[k] = v
    helper.set_model_props(model, props)
    if tamper_weights:
        t = model.graph.initializer[0]
        arr = numpy_helper.to_array(t).copy()
        arr.flat[0] += 1.0
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return model


def save_tiny_model(path: str | Path, **kwargs) -> Path:
    """``make_tiny_model(**kwargs)`` written to ``path``; returns the path."""
    path = Path(path)
    onnx.save(make_tiny_model(**kwargs), str(path))
    return path

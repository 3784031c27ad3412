"""A policy ONNX file with known, linear maths: plumbing runs (benchmarks/aloha_ros_loop.py without ``--policy``)
and tests of the policy runtime and node, without torch or a trained policy.

``make_linear_policy(metadata)`` builds, with ``onnx.helper`` only, a file with the contract of
``runtime/policy_model.py`` (inputs ``embedding`` [B,E] and ``qpos`` [B,J], output ``actions`` [B,K,J], the
``PolicyMetadata`` JSON and ``weights_sha256`` in its metadata) computing
``actions[b, k, j] = qpos[b, j] + ([embedding, qpos][b] @ W)[k * J + j] + bias[k * J + j]`` with random weights from
``seed``. ``linear_policy_actions`` is that formula in numpy (the known answer). It cannot solve any task.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .checksum import weights_sha256
from .policy_model import POLICY_METADATA_KEY

__all__ = ['make_linear_policy', 'linear_policy_actions']


def make_linear_policy(metadata, *, seed: int = 0, tamper: bool = False) -> onnx.ModelProto:
    """A policy file with the contract of ``runtime/policy_model.py`` and known maths:
    ``actions[b, k, j] = qpos[b, j] + ([embedding, qpos][b] @ W)[k * J + j] + bias[k * J + j]`` (``metadata`` a
    ``PolicyMetadata``). ``tamper``: change a weight after hashing (checksum_mismatch)."""
    E, J, K = metadata.embed_dim, metadata.action_dim, metadata.chunk_size
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((E + J, K * J)) * 0.1).astype(np.float32)       # [E+J, K*J]
    bias = (rng.standard_normal(K * J) * 0.1).astype(np.float32)              # [K*J]
    inits = [numpy_helper.from_array(W, 'W'), numpy_helper.from_array(bias, 'bias'),
             numpy_helper.from_array(np.array([-1, K, J], np.int64), 'chunk_shape'),
             numpy_helper.from_array(np.array([1], np.int64), 'axis1')]
    nodes = [helper.make_node('Concat', ['embedding', 'qpos'], ['x'], axis=1),          # [B,E+J]
             helper.make_node('MatMul', ['x', 'W'], ['xw']),                            # [B,K*J]
             helper.make_node('Add', ['xw', 'bias'], ['flat']),
             helper.make_node('Reshape', ['flat', 'chunk_shape'], ['delta']),          # [B,K,J]
             helper.make_node('Unsqueeze', ['qpos', 'axis1'], ['q1']),                  # [B,1,J]
             helper.make_node('Add', ['delta', 'q1'], ['actions'])]
    graph = helper.make_graph(
        nodes, 'linear_policy',
        [helper.make_tensor_value_info('embedding', TensorProto.FLOAT, ['B', E]),
         helper.make_tensor_value_info('qpos', TensorProto.FLOAT, ['B', J])],
        [helper.make_tensor_value_info('actions', TensorProto.FLOAT, ['B', K, J])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    model.ir_version = 8
    sha = weights_sha256(model)
    if tamper:
        model.graph.initializer[1].CopyFrom(numpy_helper.from_array(bias + 1.0, 'bias'))
    helper.set_model_props(model, {POLICY_METADATA_KEY: metadata.to_json(), 'weights_sha256': sha})
    return model


def linear_policy_actions(model: onnx.ModelProto, embedding: np.ndarray, qpos: np.ndarray) -> np.ndarray:
    """The known answer of :func:`make_linear_policy`'s file for [B,E] / [B,J] inputs -> [B,K,J]."""
    w = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    B, J = qpos.shape
    flat = np.concatenate([embedding, qpos], 1).astype(np.float64) @ w['W'] + w['bias']   # [B,K*J]
    return flat.reshape(B, -1, J) + qpos[:, None, :]

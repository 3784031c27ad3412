"""The behaviour-cloning policy's ONNX file and its contract (no torch): embedding + joint state -> action chunk.

The perception model publishes a policy embedding per frame (``~/embedding``); the policy maps it, with the robot's
joint state, to the next ``chunk_size`` joint targets. The split is at the embedding so that the ROS perception
node and the policy node each run one ONNX file.

Contract (docs/ARCHITECTURE.md, "Policy model"):

- inputs ``embedding`` float32 [B, E] and ``qpos`` float32 [B, J]; output ``actions`` float32 [B, K, J]
  (absolute joint targets in the units of ``qpos``: radians, grippers normalised to [0, 1] as gym-aloha's);
- ``metadata_props``: ``weights_sha256`` (runtime/checksum.py) and ``string_perception_policy``, a JSON object
  with the keys of :class:`PolicyMetadata` (``POLICY_METADATA_KEYS`` required).

:class:`PolicyModel` raises :class:`~string_perception.runtime.errors.ModelLoadError` with the same ``kind``
strings as the perception model (``missing_file``, ``corrupt_file``, ``bad_metadata``, ``contract_mismatch``,
``checksum_mismatch``, ``session_failed``) and :class:`~string_perception.runtime.errors.InputError`
(``bad_shape``, ``non_finite``) for bad inputs.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort

from .checksum import weights_sha256
from .errors import InputError, MetadataError, ModelLoadError

__all__ = ['PolicyMetadata', 'PolicyModel', 'POLICY_METADATA_KEY', 'POLICY_METADATA_KEYS', 'POLICY_INPUTS',
           'POLICY_OUTPUT', 'EMBEDDING_LATCHES']

POLICY_METADATA_KEY = 'string_perception_policy'
POLICY_INPUTS = ('embedding', 'qpos')
POLICY_OUTPUT = 'actions'
POLICY_METADATA_KEYS = ('chunk_size', 'embed_dim', 'joint_names', 'control_rate_hz', 'temporal_ensemble_m',
                        'query_every', 'task')
EMBEDDING_LATCHES = ('none', 'episode_start')     # PolicyMetadata.embedding_latch


@dataclass(frozen=True)
class PolicyMetadata:
    """What a policy file says about itself (``metadata_props['string_perception_policy']``)."""
    chunk_size: int                  # K actions per query
    embed_dim: int                   # E, the perception model's embedding_dim
    joint_names: tuple[str, ...]     # J names, the order of qpos and of every action
    control_rate_hz: float           # the rate the demonstrations were recorded at (one action per step)
    temporal_ensemble_m: float       # ACT's ensembling weight exp(-m i) (runtime/action_chunks.py)
    query_every: int                 # control steps between two queries (1: every step, K: open-loop chunks)
    task: str                        # e.g. 'aloha_transfer_cube'
    perception_model_sha256: str = ''   # weights_sha256 of the perception ONNX whose embedding it consumes
    # 'none': every query gets the current embedding; 'episode_start': every query of an episode gets the
    # embedding of its first step (a policy conditioned on the scene's initial state, e.g. where the object
    # started, which the arms later occlude or move)
    embedding_latch: str = 'none'
    extra: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, text: str) -> 'PolicyMetadata':
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, TypeError) as e:
            raise MetadataError(f'{POLICY_METADATA_KEY} is not valid JSON ({e})', key=POLICY_METADATA_KEY) from None
        if not isinstance(d, dict):
            raise MetadataError(f'{POLICY_METADATA_KEY} must be a JSON object', key=POLICY_METADATA_KEY)
        missing = [k for k in POLICY_METADATA_KEYS if k not in d]
        if missing:
            raise MetadataError(f'{POLICY_METADATA_KEY} lacks {missing}', key=POLICY_METADATA_KEY)
        known = {f for f in cls.__dataclass_fields__ if f != 'extra'}
        meta = cls(chunk_size=d['chunk_size'], embed_dim=d['embed_dim'], joint_names=tuple(d['joint_names']),
                   control_rate_hz=d['control_rate_hz'], temporal_ensemble_m=d['temporal_ensemble_m'],
                   query_every=d['query_every'], task=str(d['task']),
                   perception_model_sha256=str(d.get('perception_model_sha256', '')),
                   embedding_latch=str(d.get('embedding_latch', 'none')),
                   extra={k: v for k, v in d.items() if k not in known} or None)
        meta.validate()
        return meta

    def validate(self) -> None:
        def bad(msg: str):
            raise MetadataError(f'{POLICY_METADATA_KEY}: {msg}', key=POLICY_METADATA_KEY)
        for name in ('chunk_size', 'embed_dim', 'query_every'):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                bad(f'{name} must be an integer >= 1, got {v!r}')
        if self.query_every > self.chunk_size:
            bad(f'query_every ({self.query_every}) > chunk_size ({self.chunk_size}) leaves steps without actions')
        if not self.joint_names or not all(isinstance(n, str) and n for n in self.joint_names):
            bad('joint_names must be a non-empty list of names')
        if len(set(self.joint_names)) != len(self.joint_names):
            bad('joint_names has duplicates')
        for name in ('control_rate_hz', 'temporal_ensemble_m'):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                bad(f'{name} must be a finite number >= 0, got {v!r}')
        if self.control_rate_hz <= 0:
            bad('control_rate_hz must be > 0')
        if self.embedding_latch not in EMBEDDING_LATCHES:
            bad(f'embedding_latch must be one of {EMBEDDING_LATCHES}, got {self.embedding_latch!r}')

    def to_json(self) -> str:
        d = {k: v for k, v in asdict(self).items() if k != 'extra'}
        d['joint_names'] = list(self.joint_names)
        return json.dumps({**d, **(self.extra or {})}, sort_keys=True)

    @property
    def action_dim(self) -> int:
        return len(self.joint_names)


def _dims(vi: onnx.ValueInfoProto) -> list[int | None]:
    return [d.dim_value if d.HasField('dim_value') else None for d in vi.type.tensor_type.shape.dim]


class PolicyModel:
    """A policy ONNX file checked against the contract above and run with ONNX Runtime."""

    def __init__(self, path: str | os.PathLike, providers: Sequence[str] = ('CPUExecutionProvider',), *,
                 intra_op_threads: int = 1, verify_checksum: bool = True):
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError('missing_file', f'policy model {self.path} does not exist')
        data = self.path.read_bytes()
        try:
            model = onnx.load_from_string(data)
        except Exception as e:  # noqa: BLE001 - protobuf raises several types for garbage
            raise ModelLoadError('corrupt_file',
                                 f'{self.path} is not an ONNX file ({type(e).__name__})') from None
        props = {p.key: p.value for p in model.metadata_props}
        if POLICY_METADATA_KEY not in props or 'weights_sha256' not in props:
            raise ModelLoadError('bad_metadata', f'{self.path} has no {POLICY_METADATA_KEY} / weights_sha256 '
                                 'metadata: not a string_perception policy')
        try:
            self.metadata = PolicyMetadata.from_json(props[POLICY_METADATA_KEY])
        except MetadataError as e:
            raise ModelLoadError('bad_metadata', e.message) from None
        self._check_contract(model)
        if verify_checksum and weights_sha256(model) != props['weights_sha256']:
            raise ModelLoadError('checksum_mismatch',
                                 f'{self.path}: weights_sha256 does not match the weights (corrupt or edited)')
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(intra_op_threads)
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry('session.intra_op.allow_spinning', '0')
        try:
            self.session = ort.InferenceSession(data, sess_options=opts, providers=list(providers))
        except Exception as e:  # noqa: BLE001
            raise ModelLoadError('session_failed', f'ONNX Runtime could not load {self.path}: {e}') from None

    def _check_contract(self, model: onnx.ModelProto) -> None:
        m = self.metadata
        ins = {i.name: i for i in model.graph.input}
        outs = {o.name: o for o in model.graph.output}
        want_in = {'embedding': [None, m.embed_dim], 'qpos': [None, m.action_dim]}
        problems = []
        for name, shape in want_in.items():
            vi = ins.get(name)
            if vi is None or vi.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
                problems.append(f'input {name} float32 missing')
            elif _dims(vi)[1:] != shape[1:]:
                problems.append(f'input {name} is {_dims(vi)}, metadata says [B, {shape[1]}]')
        vo = outs.get(POLICY_OUTPUT)
        if vo is None or vo.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            problems.append(f'output {POLICY_OUTPUT} float32 missing')
        elif _dims(vo)[1:] != [m.chunk_size, m.action_dim]:
            problems.append(f'output {POLICY_OUTPUT} is {_dims(vo)}, metadata says [B, {m.chunk_size}, '
                            f'{m.action_dim}]')
        if problems:
            raise ModelLoadError('contract_mismatch', f'{self.path}: ' + '; '.join(problems))

    def predict(self, embedding: np.ndarray, qpos: np.ndarray) -> np.ndarray:
        """embedding [E] or [B,E], qpos [J] or [B,J] -> actions float32 [B,K,J]."""
        m = self.metadata
        e = np.asarray(embedding, dtype=np.float32)
        q = np.asarray(qpos, dtype=np.float32)
        e, q = (e[None] if e.ndim == 1 else e), (q[None] if q.ndim == 1 else q)      # [B,E], [B,J]
        if e.ndim != 2 or e.shape[1] != m.embed_dim or q.ndim != 2 or q.shape[1] != m.action_dim \
                or e.shape[0] != q.shape[0]:
            raise InputError('bad_shape', f'policy inputs must be embedding [B,{m.embed_dim}] and qpos '
                                          f'[B,{m.action_dim}], got {e.shape} and {q.shape}')
        if not (np.isfinite(e).all() and np.isfinite(q).all()):
            raise InputError('non_finite', 'policy inputs contain NaN or inf')
        return self.session.run([POLICY_OUTPUT], {'embedding': e, 'qpos': q})[0]   # [B,K,J]

"""``ModelMetadata``: the ONNX file's ``metadata_props`` (docs/ARCHITECTURE.md), parsed and validated.

All values are strings in the file; structured ones are JSON. Required keys (a model without them cannot be run
correctly): ``labels``, ``input_height``, ``input_width``, ``patch_size``, ``normalization``, ``coord_mode``,
``encoding``, ``embedding_dim``, ``weights_sha256``, ``precision``. Optional keys (parsed and validated when present,
``None``/empty otherwise): ``output_layout``, ``package_version``, ``data_seed``, ``config_json``,
``score_threshold`` (the exporter's recommended operating score threshold, a float in [0, 1]; the node uses it when
its own ``score_threshold`` parameter is -1), ``quantization`` (JSON object, present on ``precision`` ``int8`` files
written by ``export.optimize``: format, which layers, weight / activation types, calibration frames, the fp32
source file's sha256; an ``int8`` file without it is refused).
Unknown keys are kept in ``extra``. The exporter can build the props with :meth:`ModelMetadata.to_props`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import onnx

from .errors import MetadataError

__all__ = ['ModelMetadata', 'REQUIRED_KEYS', 'OPTIONAL_KEYS', 'PRECISIONS']

REQUIRED_KEYS = ('labels', 'input_height', 'input_width', 'patch_size', 'normalization', 'coord_mode',
                 'encoding', 'embedding_dim', 'weights_sha256', 'precision')
OPTIONAL_KEYS = ('output_layout', 'package_version', 'data_seed', 'config_json', 'score_threshold', 'quantization')
PRECISIONS = ('fp32', 'fp16', 'int8')   # int8: static QDQ quantisation of an fp32 file (export.optimize)
_SHA256 = re.compile(r'^[0-9a-f]{64}$')
_MAX_SIDE = 16384


def _json(props: Mapping[str, str], key: str) -> Any:
    try:
        return json.loads(props[key])
    except (json.JSONDecodeError, TypeError) as e:
        raise MetadataError(f'metadata key {key!r} is not valid JSON ({e}): {props[key]!r:.200}', key=key) from None


def _positive_int(props: Mapping[str, str], key: str, maximum: int | None = None) -> int:
    raw = props[key]
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise MetadataError(f'metadata key {key!r} must be a positive integer, got {raw!r:.200}', key=key) from None
    if value <= 0 or (maximum is not None and value > maximum):
        raise MetadataError(f'metadata key {key!r} must be in [1, {maximum or "inf"}], got {value}', key=key)
    return value


def _nonempty_str(props: Mapping[str, str], key: str) -> str:
    value = str(props[key]).strip()
    if not value:
        raise MetadataError(f'metadata key {key!r} is empty', key=key)
    return value


@dataclass(frozen=True)
class ModelMetadata:
    """Parsed, validated ``metadata_props`` of a model file."""

    labels: tuple[str, ...]
    input_height: int
    input_width: int
    patch_size: int
    normalization_mean: tuple[float, float, float]
    normalization_std: tuple[float, float, float]
    coord_mode: str
    encoding: str
    embedding_dim: int
    weights_sha256: str
    precision: str                       # 'fp32' | 'fp16' | 'int8'
    output_layout: dict | None = None
    package_version: str | None = None
    data_seed: int | None = None
    config: dict | None = None           # the ViTDConfig as a dict (key config_json)
    score_threshold: float | None = None  # recommended operating threshold in [0, 1]
    quantization: dict | None = None     # int8 files: how they were quantised (key quantization)
    extra: dict = field(default_factory=dict)  # unknown keys, verbatim

    @property
    def input_hw(self) -> tuple[int, int]:
        return (self.input_height, self.input_width)

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> 'ModelMetadata':
        """From a ``{key: str}`` mapping; raises :class:`MetadataError` naming the first bad or missing key."""
        missing = [k for k in REQUIRED_KEYS if k not in props]
        if missing:
            raise MetadataError(f'model metadata_props lacks required key(s) {missing} (have {sorted(props)}); '
                                'was the file written by string-perception-export?', key=missing[0])

        labels = _json(props, 'labels')
        if (not isinstance(labels, list) or not labels
                or not all(isinstance(s, str) and s.strip() for s in labels)):
            raise MetadataError(f'metadata key \'labels\' must be a non-empty JSON list of non-empty strings, got '
                                f'{props["labels"]!r:.200}', key='labels')
        if len(set(labels)) != len(labels):
            raise MetadataError(f'metadata key \'labels\' has duplicates: {labels}', key='labels')

        height = _positive_int(props, 'input_height', _MAX_SIDE)
        width = _positive_int(props, 'input_width', _MAX_SIDE)
        patch = _positive_int(props, 'patch_size', _MAX_SIDE)
        if height % patch or width % patch:
            raise MetadataError(f'input size {height}x{width} is not a multiple of patch_size {patch}',
                                key='patch_size')

        norm = _json(props, 'normalization')
        try:
            mean = tuple(float(v) for v in norm['mean'])
            std = tuple(float(v) for v in norm['std'])
        except (TypeError, KeyError, ValueError):
            raise MetadataError('metadata key \'normalization\' must be JSON {"mean": [3 numbers], '
                                '"std": [3 numbers]}, '
                                f'got {props["normalization"]!r:.200}', key='normalization') from None
        if (len(mean) != 3 or len(std) != 3 or not all(math.isfinite(v) for v in mean + std)
                or not all(v > 0 for v in std)):
            raise MetadataError(f'normalization needs 3 finite means and 3 finite positive stds, got mean={mean} '
                                f'std={std}', key='normalization')

        sha = _nonempty_str(props, 'weights_sha256').lower()
        if not _SHA256.match(sha):
            raise MetadataError(f'metadata key \'weights_sha256\' must be 64 hex digits, got {sha!r:.100}',
                                key='weights_sha256')
        precision = _nonempty_str(props, 'precision').lower()
        if precision not in PRECISIONS:
            raise MetadataError(f'metadata key \'precision\' must be one of {PRECISIONS}, got {precision!r}',
                                key='precision')

        output_layout = None
        if 'output_layout' in props:
            output_layout = _json(props, 'output_layout')
            if not isinstance(output_layout, dict):
                raise MetadataError('metadata key \'output_layout\' must be a JSON object', key='output_layout')
        config = None
        if 'config_json' in props:
            config = _json(props, 'config_json')
            if not isinstance(config, dict):
                raise MetadataError('metadata key \'config_json\' must be a JSON object', key='config_json')
        data_seed = None
        if 'data_seed' in props and str(props['data_seed']).strip() not in ('', 'null', 'None'):
            try:
                data_seed = int(str(props['data_seed']).strip())
            except ValueError:
                raise MetadataError(f'metadata key \'data_seed\' must be an integer, got {props["data_seed"]!r:.100}',
                                    key='data_seed') from None
        score_threshold = None
        if 'score_threshold' in props and str(props['score_threshold']).strip() not in ('', 'null', 'None'):
            raw = str(props['score_threshold']).strip()
            try:
                score_threshold = float(raw)
            except ValueError:
                score_threshold = math.nan
            if not 0.0 <= score_threshold <= 1.0:  # NaN fails too
                raise MetadataError(f'metadata key \'score_threshold\' must be a number in [0, 1], got {raw!r:.100}',
                                    key='score_threshold')
        quantization = None
        if 'quantization' in props:
            quantization = _json(props, 'quantization')
            if not isinstance(quantization, dict):
                raise MetadataError('metadata key \'quantization\' must be a JSON object', key='quantization')
        if precision == 'int8' and quantization is None:
            raise MetadataError('an int8 model must say how it was quantised (metadata key \'quantization\')',
                                key='quantization')
        known = set(REQUIRED_KEYS) | set(OPTIONAL_KEYS)
        return cls(
            labels=tuple(labels), input_height=height, input_width=width, patch_size=patch,
            normalization_mean=mean, normalization_std=std,
            coord_mode=_nonempty_str(props, 'coord_mode'), encoding=_nonempty_str(props, 'encoding'),
            embedding_dim=_positive_int(props, 'embedding_dim'), weights_sha256=sha, precision=precision,
            output_layout=output_layout, package_version=props.get('package_version') or None,
            data_seed=data_seed, config=config, score_threshold=score_threshold, quantization=quantization,
            extra={k: v for k, v in props.items() if k not in known},
        )

    @classmethod
    def from_model(cls, model: onnx.ModelProto) -> 'ModelMetadata':
        """From ``model.metadata_props`` (a duplicated key is an error: it would be ambiguous)."""
        props: dict[str, str] = {}
        for p in model.metadata_props:
            if p.key in props:
                raise MetadataError(f'metadata key {p.key!r} appears more than once', key=p.key)
            props[p.key] = p.value
        return cls.from_props(props)

    # ------------------------------------------------------------------ writing
    def to_props(self) -> dict[str, str]:
        """The ``{key: str}`` mapping :meth:`from_props` reads (round trip), for the exporter."""
        props = {
            'labels': json.dumps(list(self.labels)),
            'input_height': str(self.input_height),
            'input_width': str(self.input_width),
            'patch_size': str(self.patch_size),
            'normalization': json.dumps({'mean': list(self.normalization_mean), 'std': list(self.normalization_std)}),
            'coord_mode': self.coord_mode,
            'encoding': self.encoding,
            'embedding_dim': str(self.embedding_dim),
            'weights_sha256': self.weights_sha256,
            'precision': self.precision,
        }
        if self.output_layout is not None:
            props['output_layout'] = json.dumps(self.output_layout)
        if self.package_version is not None:
            props['package_version'] = self.package_version
        if self.data_seed is not None:
            props['data_seed'] = str(self.data_seed)
        if self.config is not None:
            props['config_json'] = json.dumps(self.config)
        if self.score_threshold is not None:
            props['score_threshold'] = repr(float(self.score_threshold))
        if self.quantization is not None:
            props['quantization'] = json.dumps(self.quantization, sort_keys=True)
        props.update({str(k): str(v) for k, v in self.extra.items()})
        return props

    def write_to(self, model: onnx.ModelProto) -> None:
        """Replace ``model.metadata_props`` with :meth:`to_props` (helper for the exporter and tests)."""
        del model.metadata_props[:]
        onnx.helper.set_model_props(model, self.to_props())

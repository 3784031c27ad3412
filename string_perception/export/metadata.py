"""The exported file's ``metadata_props`` (docs/ARCHITECTURE.md, "The ONNX file"), built from a checkpoint.

Everything comes from the checkpoint written by ``model.save_checkpoint`` (``string_perception.training.checkpoint``
and ``release_checkpoint`` add ``train_config``, ``step`` and ``provenance``); the weights checksum is computed over
the finished ONNX graph (``runtime.checksum``), so it is the last thing set.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import onnx

import string_perception
from string_perception.model import ViTDConfig
from string_perception.runtime.checksum import weights_sha256
from string_perception.runtime.model_metadata import ModelMetadata

__all__ = ['OUTPUT_LAYOUT', 'tokens_layout', 'output_layout', 'data_seed_of', 'build_metadata', 'stamp_metadata']

# What the three outputs every file has hold (docs/ARCHITECTURE.md conventions), machine-readable.
OUTPUT_LAYOUT = {
    'boxes': {'shape': ['B', 'N', 12], 'fields': {'translation': [0, 3], 'rot6d': [3, 9], 'size': [9, 12]},
              'units': 'metres, camera optical frame (x right, y down, z forward)',
              'rot6d': 'first two columns of the rotation matrix; Gram-Schmidt recovers R'},
    'logits': {'shape': ['B', 'N', 'C'], 'activation': 'sigmoid', 'classes': 'labels'},
    'embedding': {'shape': ['B', 'E']},
}


def tokens_layout(config: ViTDConfig) -> dict:
    """The optional `tokens` output (export --tokens): ViTD.forward's 'tokens', D = the encoder width."""
    return {'shape': ['B', 'N', 'D'], 'D': config.width,
            'meaning': 'encoder tokens after the normal-map fusion (the heads\' input), one per box/logit row'}


def output_layout(config: ViTDConfig, tokens: bool) -> dict:
    """`output_layout` metadata for a file with (or without) the `tokens` output."""
    return {**OUTPUT_LAYOUT, **({'tokens': tokens_layout(config)} if tokens else {})}


def data_seed_of(checkpoint: Mapping[str, Any]) -> int | None:
    """The training run's seed (init + data order; training frames are scene seeds
    [train_offset, train_offset + num_train_frames))."""
    seed = (checkpoint.get('train_config') or {}).get('seed')
    return None if seed is None else int(seed)


def build_metadata(config: ViTDConfig, checkpoint: Mapping[str, Any], *, precision: str,
                   score_threshold: float | None = None, tokens: bool = False,
                   weights_sha256: str = '0' * 64) -> ModelMetadata:
    """Metadata for `config` exported at `precision` (with the `tokens` output when `tokens`); `weights_sha256` is
    a placeholder until `stamp_metadata`."""
    provenance = checkpoint.get('provenance') or {}
    extra = {'position_encoding_graph': 'rope_mixed_folded',
             'coord_dim': str(config.coord_dim), 'num_tokens': str(config.num_tokens)}
    if 'step' in checkpoint:
        extra['train_step'] = str(checkpoint['step'])
    if provenance.get('git_commit'):
        extra['train_git_commit'] = str(provenance['git_commit'])
    return ModelMetadata(
        labels=tuple(config.class_names), input_height=config.image_size[0], input_width=config.image_size[1],
        patch_size=config.patch_size, normalization_mean=tuple(config.mean), normalization_std=tuple(config.std),
        coord_mode=config.coord_mode if config.use_depth else 'grid', encoding=config.encoding,
        embedding_dim=config.embed_dim, weights_sha256=weights_sha256, precision=precision,
        output_layout=output_layout(config, tokens), package_version=string_perception.__version__,
        data_seed=data_seed_of(checkpoint), config=config.to_dict(), score_threshold=score_threshold,
        extra=extra)


def stamp_metadata(model: onnx.ModelProto, metadata: ModelMetadata) -> ModelMetadata:
    """Write `metadata` with the checksum of `model`'s initializers into `model`; returns what was written."""
    final = dataclasses.replace(metadata, weights_sha256=weights_sha256(model))
    final.write_to(model)
    return final

"""Checkpoint -> ONNX file(s) with compiled STRING, metadata and self-verification: ``export_checkpoint``, the work
of ``string-perception-export`` (``cli.py``) and of the policy exporter (``policy/export.py``).

Steps: load the checkpoint (``torch.load(weights_only=True)``; training, ``release_checkpoint`` and plain
``save_checkpoint`` files all work), compile the position encoding to folded RoPE-Mixed (``deployable.py``), trace
to ONNX with a dynamic batch (``to_onnx.py``), write the metadata (labels, input size, patch size, normalisation,
coordinate mode, encoding, embedding size, output layout, package version, training data seed, weights checksum,
precision, optional recommended score threshold), run ``onnx.checker``, refuse forbidden ops (FFT, solve, inverse,
matrix exponential, complex values: ``graph_checks.py``), then compare ONNX Runtime with the original PyTorch model
on random and generated test-split frames (``verify.py``) and print the max abs differences. ``fp16`` (``--fp16``)
also writes ``<out stem>_fp16.onnx`` (encoder in float16; RoPE angles, cos/sin, softmax, tokenizer and heads in
float32) and verifies it with its looser bound. ``tokens`` (``--tokens``) adds a fourth output ``tokens`` float32
[B,N,D] (the encoder tokens after fusion, ``ViTD.forward``'s 'tokens'; recorded in ``output_layout``, parity-checked
like the others) for the node's ``~/tokens``; without it the file has the three contract outputs. ``eval_frames=N``
(``--eval-frames N``) also scores PyTorch and every written file on N test-split frames (``accuracy.py``: avg best
3D IoU, AP3D) and prints fp16 − fp32. ``<out stem>.export.json`` records checksums, file hashes, the parity numbers
and those metrics.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from pathlib import Path

import onnx

from string_perception.model import load_checkpoint

from .deployable import DeployableViTD, output_names
from .graph_checks import complex_tensors, float16_violations, forbidden_ops
from .metadata import build_metadata
from .to_onnx import DEFAULT_OPSET, export_deployable
from .verify import random_frames, scene_frames, verify_export

__all__ = ['fp16_path', 'export_checkpoint']


def fp16_path(out: Path) -> Path:
    return out.with_name(f'{out.stem}_fp16{out.suffix}')


def _graph_problems(model: onnx.ModelProto, precision: str) -> list[str]:
    problems = [f'forbidden op {op} ({why}) at node {name!r}' for name, op, why in forbidden_ops(model)]
    problems += [f'complex-valued tensor {name!r}' for name in complex_tensors(model)]
    if precision == 'fp16':
        problems += [f'{op} node {name!r} runs in {dtype}, must be FLOAT' for name, op, dtype in
                     float16_violations(model)]
    return problems


def export_checkpoint(checkpoint: str | os.PathLike, out: str | os.PathLike, *, fp16: bool = False,
                      tokens: bool = False, score_threshold: float | None = None, opset: int = DEFAULT_OPSET,
                      verify_frames: int = 2, eval_frames: int = 0, threads: int = 1, log=print) -> dict:
    """Export (and verify) `checkpoint` to `out` (and its fp16 sibling), with the optional `tokens` output when
    `tokens`. Returns the record written to ``<out stem>.export.json``; ``record['ok']`` is False when a graph check
    or a parity bound failed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model, config, ckpt = load_checkpoint(checkpoint, map_location='cpu')
    log(f'{checkpoint}: {config.encoding} ViTD, input {config.image_size[0]}x{config.image_size[1]}, patch '
        f'{config.patch_size}, width {config.width}, {config.depth} layers, {model.num_parameters():,} parameters, '
        f'step {ckpt.get("step", "?")}')
    frames = {'random': random_frames(config, batch=verify_frames),
              'scenes': scene_frames(config, count=verify_frames)}
    record = {'checkpoint': str(checkpoint), 'encoding': config.encoding, 'opset': opset,
              'outputs': list(output_names(tokens)), 'files': {}, 'ok': True}
    targets = [('fp32', out)] + ([('fp16', fp16_path(out))] if fp16 else [])
    for precision, path in targets:
        deploy = DeployableViTD(model, precision, tokens=tokens)
        meta = build_metadata(config, ckpt, precision=precision, score_threshold=score_threshold, tokens=tokens)
        onnx_model, meta = export_deployable(deploy, str(path), meta, opset=opset)
        problems = _graph_problems(onnx_model, precision)
        ops = Counter(n.op_type for n in onnx_model.graph.node)
        log(f'wrote {path} ({path.stat().st_size / 1e6:.2f} MB, {precision}, opset {opset}, '
            f'{sum(ops.values())} nodes; Cos {ops["Cos"]}, Sin {ops["Sin"]}, Softmax {ops["Softmax"]}), '
            f'weights_sha256 {meta.weights_sha256}')
        for p in problems:
            log(f'  GRAPH CHECK FAILED: {p}')
        report = verify_export(str(path), model, precision=precision, frames=frames, threads=threads)
        log(report.table())
        record['files'][precision] = {
            'path': str(path), 'file_sha256': hashlib.sha256(path.read_bytes()).hexdigest(),
            'weights_sha256': meta.weights_sha256, 'metadata': meta.to_props(), 'graph_problems': problems,
            'parity_max_abs_diff': report.diffs, 'parity_bound': report.bounds, 'parity_ok': report.ok}
        record['ok'] = record['ok'] and report.ok and not problems
    if eval_frames > 0:
        record['accuracy'] = _accuracy(model, ckpt, targets, eval_frames, score_threshold, threads, log)
    record['seconds'] = round(time.perf_counter() - t0, 2)
    json_path = out.with_name(f'{out.stem}.export.json')
    json_path.write_text(json.dumps(record, indent=2) + '\n')
    log(f'wrote {json_path}; {"all checks passed" if record["ok"] else "CHECKS FAILED"} '
        f'({record["seconds"]:.1f} s)')
    return record


def _accuracy(model, ckpt, targets, eval_frames, score_threshold, threads, log) -> dict:
    from .accuracy import evaluate_exports
    t0 = time.perf_counter()
    results = evaluate_exports(model, ckpt, {f'onnx_{prec}': path for prec, path in targets},
                               num_frames=eval_frames, operating_threshold=score_threshold, threads=threads)
    keys = list(next(iter(results.values())))
    log(f'test split, {eval_frames} frames ({time.perf_counter() - t0:.0f} s):  ' + '  '.join(keys))
    for name, headline in results.items():
        log(f'  {name:<10} ' + '  '.join(f'{headline[k]:.4f}' for k in keys))
    if 'onnx_fp16' in results:
        delta = {k: results['onnx_fp16'][k] - results['onnx_fp32'][k] for k in keys}
        log('  fp16-fp32  ' + '  '.join(f'{delta[k]:+.4f}' for k in keys))
        results['fp16_minus_fp32'] = delta
    return results

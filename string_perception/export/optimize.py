"""Faster CPU variants of an exported fp32 file: static int8 QDQ quantisation of the encoder's Linear layers (issue 37).

    string-perception-optimize models/vitd_tiny_cayley.onnx --checkpoint models/vitd_tiny_cayley.pt
        -> models/vitd_tiny_cayley_int8.onnx (+ --eval-frames N: accuracy vs the fp32 file on the test split)

Contract of :func:`quantize_int8`:

* Input: a contract-conforming fp32 file (``precision`` fp32, written by ``string-perception-export``); it is never
  modified, and the fp32 export path is untouched (the shipped files still reproduce bit for bit).
* Quantised: only the encoder's weight MatMuls ``/encoder/blocks.*/{attn/qkv, attn/proj, mlp/fc1, mlp/fc2}``
  (:func:`quantizable_nodes`), QDQ format, weights int8 symmetric per output channel, their input activations uint8
  per tensor, their outputs left fp32 (ONNX Runtime then runs each as one ``MatMulIntegerToFloat``: VNNI / AMX u8s8
  GEMM with the dequantisation fused), MinMax calibration on generated **training-split** frames of the checkpoint's own scene source (never the test
  split the accuracy is scored on). Everything else stays fp32: the tokenizer (patch Conv), the STRING / RoPE angle
  MatMul ``coords @ freqs`` and its cos/sin, q·kᵀ, softmax, attention·v, LayerNorm, GELU and all heads.
* Output: the same inputs/outputs; ``metadata_props`` = the fp32 file's with ``precision`` ``int8``, a
  ``quantization`` JSON object (format, nodes, types, calibration split / seeds / scene source, fp32 source sha256)
  and ``weights_sha256`` recomputed over the new initializers, so ``runtime.OnnxModel``'s checks pass as for any file.

Which file a machine runs is ``runtime.model_variant``'s job (int8 only where the CPU has VNNI / AMX int8 kernels).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

from string_perception.runtime.model_metadata import ModelMetadata
from string_perception.runtime.model_variant import int8_path

from .metadata import stamp_metadata

__all__ = ['QUANTIZED_LAYERS', 'CALIBRATION_OFFSET', 'quantizable_nodes', 'calibration_feeds', 'FeedReader',
           'quantize_int8', 'build_parser', 'main']

QUANTIZED_LAYERS = ('/attn/qkv/', '/attn/proj/', '/mlp/fc1/', '/mlp/fc2/')
CALIBRATION_OFFSET = 500_000   # training seeds [5e5, 5e5 + n): inside the train range [0, 1e6), far from 0

Feed = dict[str, np.ndarray]   # {'image' uint8[1,H,W,3], 'depth' float32[1,H,W] m, 'intrinsics' float32[1,3,3]}


def quantizable_nodes(model: onnx.ModelProto, layers: Sequence[str] = QUANTIZED_LAYERS) -> list[str]:
    """Names of the encoder's weight MatMul/Gemm nodes (second input an initializer) in ``layers``, graph order."""
    inits = {t.name for t in model.graph.initializer}
    return [n.name for n in model.graph.node
            if n.op_type in ('MatMul', 'Gemm') and n.name.startswith('/encoder/blocks.')
            and len(n.input) > 1 and n.input[1] in inits and any(k in n.name for k in layers)]


def calibration_feeds(checkpoint: str | os.PathLike, count: int,
                      offset: int = CALIBRATION_OFFSET) -> tuple[list[Feed], dict]:
    """``count`` training-split frames (seeds ``offset + i``) of the checkpoint's scene source at its input size, one
    feed each, and a description of them for the metadata."""
    from string_perception.evaluation.evaluate import source_dataset_for
    from string_perception.model import load_checkpoint
    _, config, ckpt = load_checkpoint(checkpoint, map_location='cpu')
    dataset, scenes, _, note = source_dataset_for(config, ckpt, 'train', count, offset=offset)
    feeds = []
    for i in range(len(dataset)):
        s = dataset[i]
        feeds.append({'image': s['image'].numpy()[None].astype(np.uint8),                    # [1,H,W,3]
                      'depth': s['depth'].numpy()[None].astype(np.float32),                  # [1,H,W] m
                      'intrinsics': s['K'].numpy()[None].astype(np.float32)})                # [1,3,3]
    seeds = [int(dataset.seeds[0]), int(dataset.seeds[-1]) + 1] if len(dataset) else []
    return feeds, {'split': 'train', 'seeds': seeds, 'scenes': scenes, 'frames': len(feeds),
                   'checkpoint': Path(checkpoint).name, **({'note': note} if note else {})}


class FeedReader(CalibrationDataReader):
    """ONNX Runtime's calibration reader over a list of feeds (each read once)."""

    def __init__(self, feeds: Iterable[Feed]):
        self._it = iter(list(feeds))

    def get_next(self) -> Feed | None:
        return next(self._it, None)


def quantize_int8(fp32_path: str | os.PathLike, out_path: str | os.PathLike, feeds: Sequence[Feed],
                  calibration: dict, *, per_channel: bool = True, layers: Sequence[str] = QUANTIZED_LAYERS,
                  fp32_outputs: bool = True) -> ModelMetadata:
    """Write the int8 QDQ variant of ``fp32_path`` to ``out_path`` (module docstring); returns its metadata.
    ``fp32_outputs=False`` also quantises the MatMul outputs to uint8 (QLinearMatMul; slower and less accurate
    here, kept for the benchmark's comparison)."""
    fp32_path, out_path = Path(fp32_path), Path(out_path)
    src = onnx.load(str(fp32_path))
    meta = ModelMetadata.from_model(src)
    if meta.precision != 'fp32':
        raise ValueError(f'{fp32_path}: quantise an fp32 file, this one is {meta.precision}')
    nodes = quantizable_nodes(src, layers)
    if not nodes:
        raise ValueError(f'{fp32_path}: no encoder Linear MatMul matches {list(layers)}')
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / 'pre.onnx'
        # ONNX shape inference only (the symbolic one fails on this graph); keeps node names
        quant_pre_process(str(fp32_path), str(pre), skip_symbolic_shape=True, skip_optimization=True)
        quantize_static(str(pre), str(out_path), FeedReader(feeds), quant_format=QuantFormat.QDQ,
                        op_types_to_quantize=['MatMul', 'Gemm'], nodes_to_quantize=nodes,
                        per_channel=per_channel, weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8,
                        calibrate_method=CalibrationMethod.MinMax,
                        extra_options={'WeightSymmetric': True, 'ActivationSymmetric': False,
                                       # fp32 outputs: ORT fuses Q -> MatMul(DQ weights) into MatMulIntegerToFloat
                                       # (no uint8 round trip of the output: faster and closer to fp32)
                                       'OpTypesToExcludeOutputQuantization':
                                           ['MatMul', 'Gemm'] if fp32_outputs else []})
    model = onnx.load(str(out_path))
    quant = {'format': 'QDQ', 'tool': 'onnxruntime.quantization.quantize_static',
             'weights': f'int8 symmetric {"per-channel" if per_channel else "per-tensor"}',
             'activations': 'uint8 asymmetric per-tensor' + (' (inputs only; outputs fp32)' if fp32_outputs else ''),
             'calibration_method': 'MinMax',
             'layers': list(layers), 'quantized_nodes': len(nodes),
             'calibration': dict(calibration),
             'fp32_source': {'file': fp32_path.name,
                             'file_sha256': hashlib.sha256(fp32_path.read_bytes()).hexdigest(),
                             'weights_sha256': meta.weights_sha256}}
    final = stamp_metadata(model, dataclasses.replace(meta, precision='int8', quantization=quant))
    onnx.checker.check_model(model)
    onnx.save(model, str(out_path))
    return final


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-optimize', description=__doc__.split('\n\n')[0])
    p.add_argument('onnx', help='the fp32 file written by string-perception-export')
    p.add_argument('--checkpoint', default=None,
                   help='its checkpoint (scene source of the calibration frames; default <onnx stem>.pt)')
    p.add_argument('--out', default=None, help='default <onnx stem>_int8.onnx next to it')
    p.add_argument('--calibration-frames', type=int, default=64, help='training-split frames for calibration')
    p.add_argument('--per-tensor', action='store_true', help='per-tensor weight scales instead of per-channel')
    p.add_argument('--eval-frames', type=int, default=0,
                   help='also score fp32 and int8 on N test-split frames (avg best IoU, AP3D) and print int8 - fp32')
    p.add_argument('--threads', type=int, default=1)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    src = Path(args.onnx)
    ckpt = Path(args.checkpoint) if args.checkpoint else src.with_suffix('.pt')
    out = Path(args.out) if args.out else int8_path(src)
    t0 = time.perf_counter()
    feeds, calib = calibration_feeds(ckpt, args.calibration_frames)
    meta = quantize_int8(src, out, feeds, calib, per_channel=not args.per_tensor)
    print(f'wrote {out} ({out.stat().st_size / 1e6:.2f} MB, int8 QDQ, {meta.quantization["quantized_nodes"]} '
          f'MatMuls, calibrated on {calib["frames"]} {calib["scenes"]} training frames {calib["seeds"]}), '
          f'weights_sha256 {meta.weights_sha256} ({time.perf_counter() - t0:.0f} s)')
    if args.eval_frames > 0:
        from string_perception.model import load_checkpoint

        from .accuracy import evaluate_exports
        model, _, ck = load_checkpoint(ckpt, map_location='cpu')
        res = evaluate_exports(model, ck, {'onnx_fp32': src, 'onnx_int8': out}, num_frames=args.eval_frames,
                               threads=args.threads)
        keys = list(res['onnx_fp32'])
        print(f'test split, {args.eval_frames} frames:  ' + '  '.join(keys))
        for name in ('onnx_fp32', 'onnx_int8'):
            print(f'  {name:<10} ' + '  '.join(f'{res[name][k]:.4f}' for k in keys))
        print('  int8-fp32  ' + '  '.join(f'{res["onnx_int8"][k] - res["onnx_fp32"][k]:+.4f}' for k in keys))
    return 0


if __name__ == '__main__':
    sys.exit(main())

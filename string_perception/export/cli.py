"""``string-perception-export``: checkpoint -> ONNX file(s) with compiled STRING, metadata, self-verification.

    string-perception-export runs/wc_p8/best.pt --out models/vitd_tiny_cayley.onnx --score-threshold 0.2 --fp16
    string-perception-export runs/wc_p8/best.pt --out models/vitd_tiny_cayley_tokens.onnx --tokens

The work is ``pipeline.export_checkpoint`` (its docstring lists the steps and checks). Exit status 1 when a check
fails (the files are left in place for inspection), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from .pipeline import export_checkpoint
from .to_onnx import DEFAULT_OPSET, MIN_OPSET

__all__ = ['build_parser', 'main']


def _threshold(text: str) -> float:
    v = float(text)
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f'must be in [0, 1], got {text}')
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='string-perception-export', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('checkpoint', help='ViTD checkpoint (.pt) from string-perception-train or save_checkpoint')
    p.add_argument('--out', required=True, help='output ONNX file, e.g. models/vitd_tiny_cayley.onnx')
    p.add_argument('--fp16', action='store_true', help='also write and verify <out stem>_fp16.onnx')
    p.add_argument('--tokens', action='store_true',
                   help='add the optional output tokens float32 [B,N,D] (encoder tokens after fusion) for ~/tokens')
    p.add_argument('--score-threshold', type=_threshold, default=None,
                   help='recommended operating score threshold stored in the metadata (the node uses it when its '
                        'score_threshold parameter is -1)')
    p.add_argument('--opset', type=int, default=DEFAULT_OPSET, help=f'ONNX opset (>= {MIN_OPSET})')
    p.add_argument('--verify-frames', type=int, default=2, help='random and scene frames each for the parity check')
    p.add_argument('--eval-frames', type=int, default=0,
                   help='also score PyTorch and the exported files on this many test-split frames (0: skip)')
    p.add_argument('--threads', type=int, default=1, help='torch and ONNX Runtime CPU threads')
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.opset < MIN_OPSET:
        print(f'string-perception-export: --opset must be >= {MIN_OPSET}', file=sys.stderr)
        return 2
    if not Path(args.checkpoint).is_file():
        print(f'string-perception-export: checkpoint {args.checkpoint} does not exist', file=sys.stderr)
        return 2
    if args.verify_frames < 1:
        print('string-perception-export: --verify-frames must be >= 1', file=sys.stderr)
        return 2
    torch.set_num_threads(max(1, args.threads))
    record = export_checkpoint(args.checkpoint, args.out, fp16=args.fp16, tokens=args.tokens,
                               score_threshold=args.score_threshold, opset=args.opset, verify_frames=args.verify_frames,
                               eval_frames=max(0, args.eval_frames), threads=args.threads)
    return 0 if record['ok'] else 1


if __name__ == '__main__':
    sys.exit(main())

"""string-perception-generate: write N procedural RGB-D frames (PNG + JSON) to a directory.

    string-perception-generate --out data/train --count 10000 --seed 0 --size 128x128

Frame i uses seed S + i and is written as frame_<seed>_{rgb,depth,mask}.png + frame_<seed>.json; the scene
configuration goes to scene_config.json. Seed ranges by split (docs/ARCHITECTURE.md): train [0, 1e6),
validation [1e9, 1e9 + 1e4), test [2e9, ...).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
from tqdm import tqdm

from .config import SceneConfig
from .generator import generate_frame
from .io import save_frame
from .preview import preview_image


def parse_size(text: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'size must look like 128x128 (HxW), got {text!r}') from None
    if h < 8 or w < 8:
        raise argparse.ArgumentTypeError(f'size must be at least 8x8, got {text!r}')
    return h, w


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog='string-perception-generate', description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True, type=Path, help='output directory (created if needed)')
    ap.add_argument('--count', required=True, type=int, help='number of frames')
    ap.add_argument('--seed', type=int, default=0, help='seed of the first frame (frame i uses seed + i)')
    ap.add_argument('--size', type=parse_size, default=(128, 128), help='image size HxW (default 128x128)')
    ap.add_argument('--min-objects', type=int, default=None)
    ap.add_argument('--max-objects', type=int, default=None)
    ap.add_argument('--preview', action='store_true',
                    help='also write <stem>_preview.png (RGB with the boxes | colour-mapped depth)')
    ap.add_argument('--no-progress', action='store_true', help='no progress bar')
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.count < 0 or args.seed < 0:
        print('error: --count and --seed must be >= 0', file=sys.stderr)
        return 2
    changes = {'height': args.size[0], 'width': args.size[1]}
    if args.min_objects is not None:
        changes['min_objects'] = args.min_objects
    if args.max_objects is not None:
        changes['max_objects'] = args.max_objects
    try:
        cfg = SceneConfig(**changes)
    except ValueError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / 'scene_config.json').write_text(json.dumps(
        {'first_seed': args.seed, 'count': args.count, 'config': cfg.to_dict()}, indent=1))
    for seed in tqdm(range(args.seed, args.seed + args.count), desc='frames', unit='frame',
                     disable=args.no_progress):
        frame = generate_frame(seed, cfg)
        stem = f'frame_{seed:010d}'
        save_frame(frame, args.out, stem)
        if args.preview:
            cv2.imwrite(str(args.out / f'{stem}_preview.png'), preview_image(frame, scale=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())

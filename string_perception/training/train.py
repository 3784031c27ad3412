"""Train a ViT / ViTD 3D box detector on generated RGB-D scenes (``string-perception-train``): the command line.

One process::

    string-perception-train --preset tiny --steps 3000 --batch-size 32 --lr 2e-3 --out runs/tiny

From a recipe file (``config/recipes/*.yaml``: TrainConfig fields; the flags given override it)::

    string-perception-train --recipe config/recipes/vitd_tiny_cayley.yaml --out runs/tiny --steps 5000

Several (DDP; gloo on CPU, nccl on GPU; every rank trains on its own shard of the training seeds)::

    torchrun --nproc_per_node 2 -m string_perception.training.train --preset tiny --out runs/ddp

Simulated workcells or a mix as the frame source (``training/sources.py``; primitive-only frames here)::

    string-perception-train --preset tiny --scenes aloha --sim mesh_object_fraction=0 --out runs/aloha

Resume (model, optimiser, scheduler, step, RNG; the data order continues where it stopped)::

    string-perception-train --resume runs/tiny/last.pt          # or --resume auto --out runs/tiny

Writes to ``--out``: ``train_config.json``, ``log.csv`` (train rows) and ``val.csv`` (validation rows),
TensorBoard events when ``torch.utils.tensorboard`` imports, ``last.pt`` and ``best.pt`` (best validation
``--best-metric``). This module only turns flags into a :class:`~.config.TrainConfig` and calls
``engine.train``: the config and recipes are ``training/config.py``, the loop and validation ``training/engine.py``,
the checkpoint format (``release_checkpoint`` for shipping) ``training/checkpoint.py``, DDP
``training/distributed.py``, the learning-rate schedule ``training/schedule.py``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from string_perception.cli import parse_kv
from string_perception.training.checkpoint import load_training_checkpoint
from string_perception.training.config import TrainConfig, load_recipe
from string_perception.training.engine import train
from string_perception.training.sources import SCENE_SOURCES


def build_parser() -> argparse.ArgumentParser:
    """The ``string-perception-train`` options; an option left out keeps the base config's value."""
    p = argparse.ArgumentParser(prog='string-perception-train', description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    S = argparse.SUPPRESS  # options left out keep the TrainConfig default (or the resumed run's value)
    p.add_argument('--recipe', default=None, metavar='FILE',
                   help='start from this recipe (YAML of TrainConfig fields, config/recipes/); the other options '
                        'given override it; a resumed run keeps its checkpoint\'s config instead')
    p.add_argument('--preset', default=S, help='ViTDConfig preset (tiny | base)')
    m = p.add_argument_group('model overrides (ViTDConfig fields)')
    m.add_argument('--encoding', default=S, help='position encoding: none rope rope_mixed cayley circulant dense')
    m.add_argument('--coord-mode', default=S, help='grid_depth | camera_xyz')
    m.add_argument('--no-depth', action='store_true', default=S, help='RGB-only ViT (2D grid coordinates)')
    m.add_argument('--translation-mode', default=S, help='patch_offset | absolute')
    m.add_argument('--image-size', type=int, default=S, help='square input size')
    m.add_argument('--patch-size', type=int, default=S)
    m.add_argument('--width', type=int, default=S)
    m.add_argument('--layers', type=int, default=S, help='transformer depth')
    m.add_argument('--heads', type=int, default=S)
    m.add_argument('--model', type=parse_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='any other ViTDConfig field (JSON value)')
    o = p.add_argument_group('optimisation')
    o.add_argument('--steps', type=int, default=S)
    o.add_argument('--epochs', type=float, default=S, help='sets --steps from passes over --num-train-frames')
    o.add_argument('--batch-size', type=int, default=S, help='per rank')
    o.add_argument('--lr', type=float, default=S)
    o.add_argument('--min-lr-ratio', type=float, default=S)
    o.add_argument('--weight-decay', type=float, default=S)
    o.add_argument('--warmup-steps', type=int, default=S)
    o.add_argument('--grad-clip', type=float, default=S)
    o.add_argument('--seed', type=int, default=S)
    o.add_argument('--init-from', default=S, help='fine-tune: initialise from this checkpoint (matching weights; '
                   'class embeddings by class name)')
    o.add_argument('--loss', type=parse_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='SetCriterion keyword argument (JSON value), e.g. weights=\'{"corners": 10}\'')
    o.add_argument('--assignment', default=S, help='hungarian (one-to-one) | dense (one-to-many from masks)')
    o.add_argument('--matcher', type=parse_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='HungarianMatcher keyword argument (JSON value), e.g. cost_corners=10')
    d = p.add_argument_group('data')
    d.add_argument('--num-train-frames', type=int, default=S)
    d.add_argument('--train-offset', type=int, default=S, help='first training seed (fresh frames for a run that '
                   'continues another)')
    d.add_argument('--render-scale', type=int, default=S, help='render frames at this multiple of the input size and '
                   'downscale them as the node does (runtime.preprocess)')
    d.add_argument('--data-only', action='store_true', help='only render the training frames into --cache-file '
                   '(a later run with the same data settings loads them), then exit; --init-from need not exist yet')
    d.add_argument('--no-cache', action='store_true', default=S, help='generate frames on the fly in workers')
    d.add_argument('--cache-file', default=S, help='keep the training-frame cache in this .npz and reuse it')
    d.add_argument('--num-workers', type=int, default=S)
    d.add_argument('--scene', type=parse_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='SceneConfig field of procedural frames (JSON value)')
    d.add_argument('--scenes', choices=SCENE_SOURCES, default=S,
                   help='frame source: procedural ray caster, simulated aloha / kuka cell, or mix (an even split of '
                        'the three by seed %% 3); validation uses held-out seeds of the same source')
    d.add_argument('--sim', type=parse_kv, action='append', default=S, metavar='KEY=VALUE',
                   help='SimConfig field of simulated frames (JSON value); mesh_object_fraction=0 gives '
                        "primitive-only frames and the five-class model, else the classes add 'object'")
    r = p.add_argument_group('run')
    r.add_argument('--val-every', type=int, default=S)
    r.add_argument('--val-frames', type=int, default=S)
    r.add_argument('--keep-every', type=int, default=S, help='also keep ckpt_<step>.pt every N steps')
    r.add_argument('--best-metric', default=S)
    r.add_argument('--log-every', type=int, default=S)
    r.add_argument('--out', default=S, help='output directory')
    r.add_argument('--device', default=S, help='auto | cpu | cuda | cuda:N')
    r.add_argument('--threads', type=int, default=S, help='torch CPU threads per rank (0: default)')
    r.add_argument('--resume', default=None, help="checkpoint to continue, or 'auto' for OUT/last.pt if present")
    r.add_argument('--no-progress', action='store_true', help='no tqdm bar')
    return p


def config_from_args(args: argparse.Namespace, base: TrainConfig | None = None) -> TrainConfig:
    """Apply the options given on the command line over ``base`` (default: ``TrainConfig()``)."""
    given = vars(args)
    cfg = base if base is not None else TrainConfig()
    changes: dict[str, Any] = {}
    model = dict(cfg.model_overrides)
    for opt, key in (('encoding', 'encoding'), ('coord_mode', 'coord_mode'), ('translation_mode',
                     'translation_mode'), ('patch_size', 'patch_size'), ('width', 'width'), ('layers', 'depth'),
                     ('heads', 'num_heads')):
        if opt in given:
            model[key] = given[opt]
    if 'image_size' in given:
        model['image_size'] = [given['image_size'], given['image_size']]
    if given.get('no_depth'):
        model['use_depth'] = False
    model.update(dict(given.get('model', [])))
    changes['model_overrides'] = model
    changes['scene_overrides'] = {**cfg.scene_overrides, **dict(given.get('scene', []))}
    changes['sim_overrides'] = {**cfg.sim_overrides, **dict(given.get('sim', []))}
    changes['loss_overrides'] = {**cfg.loss_overrides, **dict(given.get('loss', []))}
    changes['matcher_overrides'] = {**cfg.matcher_overrides, **dict(given.get('matcher', []))}
    for name in ('preset', 'assignment', 'scenes', 'steps', 'batch_size', 'lr', 'min_lr_ratio', 'weight_decay',
                 'warmup_steps', 'grad_clip', 'seed', 'init_from', 'render_scale', 'num_train_frames', 'train_offset',
                 'cache_file', 'num_workers', 'val_every', 'keep_every', 'val_frames', 'best_metric', 'log_every',
                 'out', 'device', 'threads'):
        if name in given:
            changes[name] = given[name]
    if given.get('no_cache'):
        changes['cache'] = False
    cfg = dataclasses.replace(cfg, **changes)
    if 'epochs' in given:
        world = int(os.environ.get('WORLD_SIZE', '1'))
        cfg.steps = max(1, math.ceil(given['epochs'] * cfg.num_train_frames / (cfg.batch_size * world)))
    return cfg


def resolve_config(args: argparse.Namespace) -> tuple[TrainConfig, str | None]:
    """Parsed options -> ``(config, checkpoint to resume or None)``: the resumed checkpoint's config (``--resume
    PATH``, or ``auto`` when OUT/last.pt exists), else the ``--recipe`` file's, else ``TrainConfig()``'s defaults,
    with the options given on the command line over it."""
    recipe = load_recipe(args.recipe) if args.recipe else None
    resume = args.resume
    base = recipe
    if resume == 'auto':
        out = Path(getattr(args, 'out', recipe.out if recipe is not None else TrainConfig.out))
        resume = str(out / 'last.pt') if (out / 'last.pt').exists() else None
    if resume:
        base = TrainConfig.from_dict(load_training_checkpoint(resume)['train_config'])
    return config_from_args(args, base), resume


def main(argv: list[str] | None = None) -> int:
    """``string-perception-train``: train (or resume) with the config of :func:`resolve_config`; prints the summary."""
    args = build_parser().parse_args(argv)
    cfg, resume = resolve_config(args)
    summary = train(cfg, resume=resume, progress=not args.no_progress, data_only=args.data_only)
    if int(os.environ.get('RANK', '0')) == 0:
        print(json.dumps({k: v for k, v in summary.items()}, default=float))
    return 0

if __name__ == '__main__':
    sys.exit(main())

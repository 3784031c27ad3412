"""The Table-4 experiment runner ([STRING] §4.2.2 Table 4, App. F.4 Table 6; issue 8), shared by
``python -m benchmarks.paper_table4`` (the table), ``benchmarks.paper_table4_ablations`` (the contested cells rerun)
and ``benchmarks.aloha_finetune_study`` (a Table-4 run's detector scored on its test split).

Benchmark logic, not product: nothing in ``string_perception`` calls it, its outputs are ``docs/results`` pages.
What the product keeps of the paper table (summaries, the claims, Markdown, the default-model decision) is
``string_perception/evaluation/paper_table.py``.

A run is one ``ENCODER-ENCODING`` configuration and seed trained with the shared :class:`Budget` and evaluated
(best checkpoint, picked on validation) on the same held-out test split; :func:`run_benchmark` writes to
``--out``: ``table.md`` (best and mean ± std per cell next to the paper's numbers, which of the paper's claims
hold, and whether the best ViTD run beats the shipped model, ``--reference``, scored on the same test seeds),
``results.json`` and ``learning_curves.png``.

Configurations are ``ENCODER-ENCODING``: encoders ``vit`` (RGB only, 2D grid coordinates; the baseline ``none``
gets the learned absolute position embedding of a standard ViT, as the paper's baseline), ``vitd`` (RGB-D,
``grid_depth``: the paper's setting) and ``vitd_xyz`` (RGB-D, ``camera_xyz``); ``vitd_xyz-auto`` takes the ViTD
encoding with the best mean test IoU once the ViTD runs are done. ``--family`` adds the rest of the paper's family
(issue 10) as extra rows: ``vit_sincos-none`` (sin-cos APE), ``vit_nmap-none`` / ``vitd_nmap-cayley`` (normal-map
input), ``vitd_lie-cayley`` (Lie-group azimuth/polar coordinates) and ``vitd-tensor_product`` (⊗-STRING column).

Resumable: every run lives in ``OUT/runs/CONFIG/seedK``; a run with ``test.json`` is done and skipped, a run with
``last.pt`` continues from it. A finished run trained with another budget is an error (use another ``--out``).
On CPU ``--jobs`` runs (default 2, each with cores / jobs torch threads) train side by side as subprocesses
(``python -m benchmarks.common.table4 SPEC_JSON``, this module's worker entry); ``--jobs 1`` trains in this
process. Training and test frames are generated once into ``OUT/cache`` and shared by every run.

Default budget (:class:`Budget`) and how it was sized: ``--estimate`` builds every configuration, times
``--estimate-steps`` optimiser steps of each on real batches, round-robin across configurations so that load from
other processes hits them alike (one torch thread, as each job runs), then the evaluation per frame and the frame
generation rate, and projects ``seeds * sum over configs (steps * t_step + evaluated frames * t_frame + start-up) /
jobs + frame generation``, plus the steps per run that would fill ``--target-hours``. On the 2-core development
machine (tiny preset, batch 16, 20 steps, while another training run shared the cores, load average 2.5-3.4):
0.94-1.21 s per step (vit-none fastest, circulant/cayley slowest), 53-114 ms per evaluated frame, 154 frames/s
generated -> 6-7 min per run, 1.76 h projected for 11 configs x 3 seeds on 2 jobs; 347 steps would fill 2 h.
Scale with ``--budget-scale`` or set ``--steps`` directly.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from string_perception.evaluation.paper_table import (COLUMNS, ENCODER_TITLES, ENCODING_TITLES, ENCODINGS,
                                                      default_model_decision, render_cells, render_decision,
                                                      render_markdown, summarise)

REPO = Path(__file__).resolve().parents[2]

ENCODERS: dict[str, dict[str, Any]] = {          # ViTDConfig overrides per encoder
    'vit': {'use_depth': False},
    'vitd': {'use_depth': True, 'coord_mode': 'grid_depth'},
    'vitd_xyz': {'use_depth': True, 'coord_mode': 'camera_xyz'},
    # the paper's family beyond Table 4 (--family): APE baseline, normal-map input, Lie-group coordinates
    'vit_sincos': {'use_depth': False, 'abs_pos_embed': 'sincos'},
    'vit_nmap': {'use_depth': False, 'normal_map': True},
    'vitd_nmap': {'use_depth': True, 'coord_mode': 'grid_depth', 'normal_map': True},
    'vitd_lie': {'use_depth': True, 'coord_mode': 'camera_xyz', 'coord_transform': 'azimuth_polar'},
}
AUTO = 'auto'                                     # vitd_xyz-auto: the best ViTD encoding (mean test IoU)
DEFAULT_CONFIGS = tuple(f'{enc}-{e}' for enc in ('vit', 'vitd') for e in ENCODINGS) + (f'vitd_xyz-{AUTO}',)
FAMILY_CONFIGS = ('vit_sincos-none', 'vit_nmap-none', 'vitd_nmap-cayley', 'vitd_lie-cayley', 'vitd-tensor_product')
RESULT_FILE = 'test.json'
DEFAULT_REFERENCE = REPO / 'models' / 'vitd_tiny_cayley.pt'   # the node's default model (models/MODEL_CARD.md)
METRIC = 'avg_best_iou'       # the table's default headline: strict avg best 3D IoU (--metric)
STRICT_AND_SYM = ('avg_best_iou', 'avg_best_iou_sym')


@dataclass
class Budget:
    """The training budget every configuration and seed shares."""
    steps: int = 300
    batch_size: int = 16
    num_train_frames: int = 4000     # training seeds [0, n)
    warmup_fraction: float = 0.05    # linear warm-up over this fraction of the steps, then cosine
    val_points: int = 6              # validations per run: learning-curve points, best.pt picked on them
    val_frames: int = 64
    test_frames: int = 200           # held-out test seeds [2e9, 2e9 + n), the same for every run

    def scaled(self, scale: float) -> 'Budget':
        """Steps and training frames times ``scale`` (evaluation sizes kept)."""
        return dataclasses.replace(self, steps=max(1, round(self.steps * scale)),
                                   num_train_frames=max(self.batch_size, round(self.num_train_frames * scale)))

    @property
    def val_every(self) -> int:
        return max(1, math.ceil(self.steps / self.val_points))

    @property
    def warmup_steps(self) -> int:
        return max(1, round(self.steps * self.warmup_fraction))


@dataclass
class Settings:
    """Everything besides the budget that decides what a run computes or where it runs."""
    out: Path
    preset: str = 'tiny'
    seeds: int = 3
    model: dict[str, Any] = dataclasses.field(default_factory=dict)   # ViTDConfig overrides for every config
    depth_model: dict[str, Any] = dataclasses.field(default_factory=dict)  # ... for the RGB-D encoders only
    train: dict[str, Any] = dataclasses.field(default_factory=dict)   # TrainConfig overrides for every config
    device: str = 'cpu'
    jobs: int = 1
    threads: int = 1
    progress: bool = False
    cache: Path | None = None       # generated train/test frames; default OUT/cache (ablations share one)
    scenes: str = 'procedural'      # frame source of training and test frames (training/sources.py)
    sim: dict[str, Any] = dataclasses.field(default_factory=dict)     # SimConfig overrides of simulated frames
    metric: str = METRIC            # headline of the table, the claims, the curves and vitd_xyz-auto

    @property
    def cache_dir(self) -> Path:
        return self.cache if self.cache is not None else self.out / 'cache'


# ----------------------------------------------------------------------------------------------------------------
# Configurations -> run specs
# ----------------------------------------------------------------------------------------------------------------

def parse_config(name: str) -> tuple[str, str]:
    encoder, sep, encoding = name.partition('-')
    if not sep or encoder not in ENCODERS or encoding not in (*COLUMNS, AUTO):
        raise ValueError(f'bad configuration {name!r}: expected ENCODER-ENCODING with ENCODER in {tuple(ENCODERS)} '
                         f'and ENCODING in {COLUMNS + (AUTO,)}')
    return encoder, encoding


def scene_key(scene_cfg) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(scene_cfg), sort_keys=True, default=str).encode()
                          ).hexdigest()[:10]


def dataset_key(dataset) -> str:
    """Cache-file key of a dataset's frames: its SceneConfig's (procedural, as before --scenes), or for simulated
    sources the source name and a hash of both configs."""
    key = scene_key(dataset.scene_config)
    if getattr(dataset, 'scenes', 'procedural') == 'procedural':
        return key
    both = json.dumps([key, dataset.sim_cfg.to_dict()], sort_keys=True, default=str)
    return f'{dataset.scenes}_{hashlib.sha256(both.encode()).hexdigest()[:10]}'


def source_dataset(cfg, split: str, num_frames: int):
    """``num_frames`` frames of ``split`` from a ``TrainConfig``'s scene source (``cfg.scenes``)."""
    from string_perception.training.sources import make_dataset
    from string_perception.training.config import build_model_config, build_sim_config
    return make_dataset(split, num_frames, cfg.scenes, scene_config_of(cfg),
                        build_sim_config(cfg, build_model_config(cfg)))


def frames_key(cfg) -> str:
    return dataset_key(source_dataset(cfg, 'train', 0))


def scene_config_of(cfg):
    """The ``SceneConfig`` a ``TrainConfig`` renders its frames with."""
    from string_perception.training.config import build_model_config, build_scene_config
    return build_scene_config(cfg, build_model_config(cfg))


def train_config(encoder: str, encoding: str, seed: int, budget: Budget, settings: Settings):
    """The ``TrainConfig`` of one run (its output directory included)."""
    from string_perception.training.config import TrainConfig
    base = TrainConfig(**settings.train)
    base = dataclasses.replace(base, scenes=settings.scenes, sim_overrides={**base.sim_overrides, **settings.sim})
    depth = settings.depth_model if ENCODERS[encoder].get('use_depth') else {}
    model = {**base.model_overrides, **settings.model, **depth, **ENCODERS[encoder], 'encoding': encoding}
    run_dir = settings.out / 'runs' / f'{encoder}-{encoding}' / f'seed{seed}'
    cfg = dataclasses.replace(
        base, preset=settings.preset, model_overrides=model, steps=budget.steps, batch_size=budget.batch_size,
        num_train_frames=budget.num_train_frames, warmup_steps=budget.warmup_steps, val_every=budget.val_every,
        val_frames=budget.val_frames, seed=seed, out=str(run_dir), device=settings.device, threads=settings.threads,
        keep_every=0)
    cfg.cache_file = str(settings.cache_dir / f'train_{budget.num_train_frames}_{frames_key(cfg)}.npz')
    return cfg


def run_spec(encoder: str, encoding: str, seed: int, budget: Budget, settings: Settings) -> dict[str, Any]:
    cfg = train_config(encoder, encoding, seed, budget, settings)
    what = {k: v for k, v in cfg.to_dict().items() if k not in ('out', 'device', 'threads', 'num_workers',
                                                                 'cache_file')}
    if cfg.scenes == 'procedural' and not cfg.sim_overrides:   # runs recorded before --scenes keep their fingerprint
        del what['scenes'], what['sim_overrides']
    what['test_frames'] = budget.test_frames
    fingerprint = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
    return {'config': f'{encoder}-{encoding}', 'encoder': encoder, 'encoding': encoding, 'seed': seed,
            'train_config': cfg.to_dict(), 'test_frames': budget.test_frames, 'fingerprint': fingerprint,
            'test_cache': str(settings.cache_dir / f'test_{budget.test_frames}_{frames_key(cfg)}.npz'),
            'progress': settings.progress}


# ----------------------------------------------------------------------------------------------------------------
# One run: train (or resume, or skip) and evaluate the best checkpoint on the test split
# ----------------------------------------------------------------------------------------------------------------

def finished_record(spec: dict[str, Any]) -> dict[str, Any] | None:
    path = Path(spec['train_config']['out']) / RESULT_FILE
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    if rec.get('fingerprint') != spec['fingerprint']:
        raise RuntimeError(f'{path} was made with another budget or settings (fingerprint {rec.get("fingerprint")} '
                           f'!= {spec["fingerprint"]}); use another --out or delete that run')
    return rec


def test_dataset(spec: dict[str, Any]):
    """The held-out test frames (seeds [2e9, 2e9 + n)) of the run's source, generated once into
    ``spec['test_cache']``."""
    from string_perception.training.config import TrainConfig
    dataset = source_dataset(TrainConfig.from_dict(spec['train_config']), 'test', spec['test_frames'])
    dataset.build_cache(path=spec['test_cache'])
    return dataset


def evaluate_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Headline metrics and the error breakdown (``training/breakdown.py``: centre, scale, orientation, class,
    duplicates; at the operating threshold) of the run's best checkpoint (``last.pt`` when no validation ran) on
    the test split."""
    from string_perception.evaluation.evaluate import load_model
    from string_perception.training.inference import headline
    from string_perception.training.config import TrainConfig
    from string_perception.training.distributed import resolve_device
    cfg = TrainConfig.from_dict(spec['train_config'])
    run_dir = Path(cfg.out)
    ckpt_path = run_dir / 'best.pt' if (run_dir / 'best.pt').exists() else run_dir / 'last.pt'
    device = resolve_device(cfg.device)
    model, model_cfg, ckpt = load_model(ckpt_path, device)
    summary = test_summary(model, model_cfg, test_dataset(spec), cfg, device)
    return {'checkpoint': ckpt_path.name, 'checkpoint_step': int(ckpt['step']),
            'test': headline(summary), 'breakdown': summary['breakdown'],
            'abs_pos_embed': model_cfg.abs_pos_embed_kind}


def test_summary(model, model_cfg, dataset, cfg, device) -> dict[str, Any]:
    """``evaluate_predictions`` of ``model`` on ``dataset`` (headline metrics and the error breakdown), decoded
    with ``cfg``'s thresholds (the same for every run)."""
    from string_perception.training.inference import evaluate_predictions, predict
    res = predict(model, dataset, device=device, batch_size=cfg.batch_size,
                  decode={'score_threshold': cfg.score_threshold, 'nms_iou': cfg.nms_iou,
                          'max_detections': cfg.max_detections})
    return evaluate_predictions(res['preds'], res['gts'], model_cfg.class_names,
                                operating_threshold=cfg.operating_threshold)


def evaluate_reference(path: Path, budget: Budget, settings: Settings) -> dict[str, Any]:
    """The model we ship (``--reference``) on the same held-out seeds, decoded like every run, so that "ship the
    best ViTD if it beats the current model" compares like with like. Its frames come from the runs' source
    (``--scenes``), rendered with its own scene settings (simulated ones primitive-only when it has no ``object``
    class); ``same_scenes`` says whether they equal the runs'."""
    from string_perception.evaluation.evaluate import load_model, source_dataset_for
    from string_perception.training.inference import headline
    from string_perception.training.config import TrainConfig
    from string_perception.training.distributed import resolve_device
    cfg = dataclasses.replace(TrainConfig(**settings.train), device=settings.device)
    device = resolve_device(cfg.device)
    model, model_cfg, ckpt = load_model(path, device)
    dataset = source_dataset_for(model_cfg, ckpt, 'test', budget.test_frames, settings.scenes, settings.sim)[0]
    key = dataset_key(dataset)
    dataset.build_cache(path=settings.cache_dir / f'test_{budget.test_frames}_{key}.npz')
    runs_key = frames_key(train_config('vitd', 'cayley', 0, budget, settings))
    shown = path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path
    return {'path': str(shown), 'checkpoint_step': int(ckpt['step']), 'encoding': model_cfg.encoding,
            'same_scenes': key == runs_key,
            'test': headline(test_summary(model, model_cfg, dataset, cfg, device))}


def host_record() -> dict[str, Any]:
    """What a run's floating point depends on besides its code, seed and frames: the CPU (its model and the vector
    instructions torch's kernels chose), torch's version and its intra-op threads. A fixed seed reproduces a run bit
    for bit only where these match (two runs of one fingerprint on 2026-11-25 and 2026-11-27 diverged)."""
    import torch
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path('/proc/cpuinfo')
    if cpuinfo.exists():
        cpu = next((line.split(':', 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith('model name')), cpu)
    return {'cpu': cpu, 'cpu_capability': torch.backends.cpu.get_cpu_capability(), 'torch': torch.__version__,
            'threads': torch.get_num_threads()}


def execute_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Train (resuming from ``last.pt``) and evaluate one run; a finished run is returned as recorded."""
    rec = finished_record(spec)
    if rec is not None:
        return rec
    from string_perception.training.config import TrainConfig
    from string_perception.training.engine import train
    cfg = TrainConfig.from_dict(spec['train_config'])
    run_dir = Path(cfg.out)
    last = run_dir / 'last.pt'
    # train_seconds: the training loop's wall time (validations included), summed over the parts of a resumed run
    summary = train(cfg, resume=str(last) if last.exists() else None, progress=spec['progress'])
    t1 = time.perf_counter()
    rec = {k: spec[k] for k in ('config', 'encoder', 'encoding', 'seed', 'fingerprint')}
    rec.update(evaluate_run(spec))
    rec.update(train_seconds=summary['train_seconds'], eval_seconds=time.perf_counter() - t1, steps=cfg.steps,
               host=host_record())
    tmp = run_dir / f'{RESULT_FILE}.tmp'
    tmp.write_text(json.dumps(rec, indent=2) + '\n')
    os.replace(tmp, run_dir / RESULT_FILE)
    return rec


def run_all(specs: Sequence[dict[str, Any]], settings: Settings) -> tuple[list[dict], list[str]]:
    """Every spec: in this process one after the other (``jobs == 1``) or ``jobs`` subprocesses side by side.
    Returns (records of the runs that finished, error messages)."""
    records, errors = [], []
    if settings.jobs <= 1:
        for i, spec in enumerate(specs):
            print(f'[{i + 1}/{len(specs)}] {spec["config"]} seed {spec["seed"]}', flush=True)
            records.append(execute_run(spec))
        return records, errors
    pending, running = list(specs), []
    # the worker imports this checkout's benchmarks package whatever the working directory (runs keep it: --out
    # may be relative)
    env = {**os.environ, 'OMP_NUM_THREADS': str(settings.threads),
           'PYTHONPATH': os.pathsep.join(p for p in (str(REPO), os.environ.get('PYTHONPATH', '')) if p)}
    while pending or running:
        while pending and len(running) < settings.jobs:
            spec = pending.pop(0)
            if (rec := finished_record(spec)) is not None:
                records.append(rec)
                continue
            run_dir = Path(spec['train_config']['out'])
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / 'spec.json').write_text(json.dumps(spec, indent=2) + '\n')
            log = (run_dir / 'run.log').open('a')
            proc = subprocess.Popen([sys.executable, '-m', 'benchmarks.common.table4', str(run_dir / 'spec.json')],
                                    stdout=log, stderr=subprocess.STDOUT, env=env)
            running.append((proc, spec, log))
            print(f'started {spec["config"]} seed {spec["seed"]} (pid {proc.pid})', flush=True)
        time.sleep(0.2)
        for item in list(running):
            proc, spec, log = item
            if proc.poll() is None:
                continue
            running.remove(item)
            log.close()
            if proc.returncode == 0 and (rec := finished_record(spec)) is not None:
                records.append(rec)
                print(f'finished {spec["config"]} seed {spec["seed"]}: {METRIC}={rec["test"][METRIC]:.4f}',
                      flush=True)
            else:
                errors.append(f'{spec["config"]} seed {spec["seed"]} exited {proc.returncode}; see '
                              f'{Path(spec["train_config"]["out"]) / "run.log"}')
                print(errors[-1], flush=True)
    return records, errors


def prepare_caches(specs: Sequence[dict[str, Any]], processes: int) -> None:
    """Generate the shared training and test frames once, before any run starts (runs then only load them)."""
    from string_perception.training.config import TrainConfig
    seen = set()
    for spec in specs:
        cfg = TrainConfig.from_dict(spec['train_config'])
        for split, n, path in (('train', cfg.num_train_frames, cfg.cache_file),
                               ('test', spec['test_frames'], spec['test_cache'])):
            if path in seen:
                continue
            seen.add(path)
            t0 = time.perf_counter()
            source_dataset(cfg, split, n).build_cache(processes=processes, path=path)
            print(f'{split} frames: {n} in {path} ({time.perf_counter() - t0:.1f} s)', flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Learning curves, results, table
# ----------------------------------------------------------------------------------------------------------------

def read_val_curve(run_dir: Path, metric: str = METRIC) -> dict[int, float]:
    path = run_dir / 'val.csv'
    if not path.exists():
        return {}
    with path.open() as f:
        return {int(row['step']): float(row[metric]) for row in csv.DictReader(f)}


def learning_curves(records: Sequence[dict[str, Any]], settings: Settings) -> dict[str, dict[str, list[float]]]:
    """Per configuration: validation ``settings.metric`` mean and std over seeds at the steps all seeds share."""
    by_config: dict[str, list[dict[int, float]]] = {}
    for rec in records:
        run_dir = settings.out / 'runs' / rec['config'] / f'seed{rec["seed"]}'
        by_config.setdefault(rec['config'], []).append(read_val_curve(run_dir, settings.metric))
    curves = {}
    for config, runs in by_config.items():
        steps = sorted(set.intersection(*(set(r) for r in runs)))
        vals = [[r[s] for r in runs] for s in steps]
        curves[config] = {'step': steps, 'mean': [statistics.fmean(v) for v in vals],
                          'std': [statistics.stdev(v) if len(v) > 1 else 0.0 for v in vals]}
    return curves


def plot_curves(curves: dict[str, dict[str, list[float]]], path: Path) -> Path:
    from string_perception.evaluation.plots import plot_learning_curves
    panels: dict[str, dict[str, Any]] = {}
    for config, c in sorted(curves.items(), key=lambda kv: config_order(kv[0])):
        encoder, encoding = parse_config(config)
        panels.setdefault(ENCODER_TITLES[encoder], {})[ENCODING_TITLES[encoding]] = c
    colors = {ENCODING_TITLES[e]: f'C{i}' for i, e in enumerate(COLUMNS)}
    return plot_learning_curves(panels, path, title='Validation avg best 3D IoU (mean ± std over seeds)',
                                colors=colors)


def config_order(config: str) -> tuple[int, int]:
    encoder, encoding = parse_config(config)
    return list(ENCODERS).index(encoder), (COLUMNS + (AUTO,)).index(encoding)


def header_lines(budget: Budget, settings: Settings, records: Sequence[dict], wall_s: float) -> list[str]:
    from string_perception.training.checkpoint import provenance
    compute = sum(r.get('train_seconds', 0.0) + r.get('eval_seconds', 0.0) for r in records)
    p = provenance()
    frames = budget.steps * budget.batch_size
    scenes_note = f' with SimConfig overrides `{json.dumps(settings.sim)}`' if settings.sim else ''
    ape = sorted({(r['encoding'], str(r.get('abs_pos_embed'))) for r in records}, key=lambda x: COLUMNS.index(x[0]))
    ape_text = ', '.join(f'{ENCODING_TITLES[e]}: {k}' for e, k in ape)
    return [f'Budget per run (same for every configuration): preset `{settings.preset}`, {budget.steps} steps x '
            f'batch {budget.batch_size} = {frames} frames seen, {budget.num_train_frames} training frames, '
            f'validation on {budget.val_frames} frames every {budget.val_every} steps (best.pt picked there), '
            f'{settings.seeds} seed(s). Model overrides: `{json.dumps(settings.model)}`, train overrides: '
            f'`{json.dumps(settings.train)}`.',
            '',
            f'Test split: {budget.test_frames} held-out frames (seeds 2e9 ...), the same for every run; frames '
            f'from `--scenes {settings.scenes}`{scenes_note}. Runs: '
            f'{len(records)}; device `{settings.device}`, {settings.jobs} job(s) x {settings.threads} thread(s); '
            f'wall time of this invocation {wall_s / 60:.1f} min, train + eval time summed over runs '
            f'{compute / 60:.1f} min. Code {p["git_commit"]}, torch {p["torch"]}.',
            '',
            f'Absolute position embedding added to the tokens ({ape_text}): the baseline is a standard ViT with a '
            'learned one, as the paper\'s "no RoPE or STRING" baseline; the rotary encodings replace it.',
            '',
            'Our data is generated (procedural or simulated scenes, tiny model, minutes of CPU training) and theirs '
            'is 4M rendered images with pre-trained towers and 250k steps at batch 1024: only orderings and the ViT -> '
            'ViTD gain can carry over, not the absolute numbers.']


def write_outputs(records: list[dict], budget: Budget, settings: Settings, wall_s: float,
                  errors: Sequence[str], reference: dict[str, Any] | None = None,
                  pending: Sequence[str] = ()) -> dict[str, Any]:
    records = sorted(records, key=lambda r: (config_order(r['config']), r['seed']))
    summary = summarise(records, settings.metric)
    curves = learning_curves(records, settings)
    decision = default_model_decision(records, reference, settings.metric)
    results = {'budget': {**dataclasses.asdict(budget), 'val_every': budget.val_every,
                          'warmup_steps': budget.warmup_steps},
               'settings': {**dataclasses.asdict(settings), 'out': str(settings.out),
                            'cache': str(settings.cache_dir)},
               'runs': records, 'summary': summary, 'curves': curves, 'wall_seconds': wall_s,
               'errors': list(errors), 'pending': list(pending), 'reference': reference, 'default_model': decision}
    out = settings.out
    (out / 'results.json').write_text(json.dumps(results, indent=2) + '\n')
    header = header_lines(budget, settings, records, wall_s)
    if errors:
        header += ['', '**Runs that failed** (left out of the table):', *[f'- {e}' for e in errors]]
    if pending:
        header += ['', f'**Partial table**: {len(records)} runs finished, {len(pending)} still to run (resumable: '
                   'the same command continues): ' + '; '.join(pending) + '.']
    md = render_markdown(summary, header)
    for other in STRICT_AND_SYM:      # the other of strict / symmetry-aware, never instead of the headline
        if other != settings.metric and all(other in r['test'] for r in records):
            title = 'Symmetry-aware' if other.endswith('_sym') else 'Strict'
            md += '\n' + render_cells(summarise(records, other), f'{title} average 3D IoU (%), same runs')
    if any('breakdown' in r for r in records):
        md += '\n' + '\n'.join(breakdown_lines(records)) + '\n'
    if decision is not None:
        md += '\n' + '\n'.join(render_decision(decision)) + '\n'
    if curves:
        plot_curves(curves, out / 'learning_curves.png')
        md += f'\n## Learning curves\n\n![validation {settings.metric} vs step](learning_curves.png)\n'
    (out / 'table.md').write_text(md)
    return results


BREAKDOWN_COLUMNS = (   # (title, breakdown 'overall' key, statistic, scale)
    ('centre error (cm, median)', 'centre_3d_m', 'median', 100.0),
    ('xy / depth (cm, median)', ('centre_xy_m', 'centre_z_m'), 'median', 100.0),
    ('scale error (1 - aligned IoU, median)', 'scale_error', 'median', 1.0),
    ('orientation (deg, median, sym.)', 'orientation_deg', 'median', 1.0),
    ('volume ratio (median)', 'volume_ratio', 'median', 1.0),
    ('class accuracy', 'class_accuracy', None, 1.0),
    ('duplicates / object', 'duplicates_per_object', None, 1.0),
    ('precision / recall @ op, IoU 0.25', ('precision', 'recall'), None, 1.0),
)


def _breakdown_value(overall: dict[str, Any], key: str, stat: str | None) -> float | None:
    v = overall.get(key)
    return v.get(stat) if isinstance(v, dict) else v


def breakdown_lines(records: Sequence[dict]) -> list[str]:
    """Markdown: per configuration, the mean over its seeds of the error breakdown (``training/breakdown.py``,
    matched pairs at the operating threshold); runs recorded before the breakdown was stored are left out."""
    by_config: dict[str, list[dict]] = {}
    for r in records:
        if 'breakdown' in r:
            by_config.setdefault(r['config'], []).append(r['breakdown']['overall'])

    def cell(rows: list[dict], key: str, stat: str | None, scale: float) -> str:
        values = [v for v in (_breakdown_value(o, key, stat) for o in rows) if v is not None]
        return f'{statistics.fmean(values) * scale:.2f}' if values else '–'

    lines = ['## Error breakdown (test split, mean over the seeds that recorded it)', '',
             'Matched pairs (class-aware, best symmetry-aware IoU), predictions at the operating threshold '
             '(`training/breakdown.py`); runs finished before the breakdown was recorded have none.', '',
             '| config | seeds | ' + ' | '.join(c[0] for c in BREAKDOWN_COLUMNS) + ' |',
             '| --- | ---: |' + ' ---: |' * len(BREAKDOWN_COLUMNS)]
    for config in sorted(by_config, key=config_order):
        rows = by_config[config]
        cells = [' / '.join(cell(rows, k, stat, scale) for k in (key if isinstance(key, tuple) else (key,)))
                 for _, key, stat, scale in BREAKDOWN_COLUMNS]
        lines.append(f'| {config} | {len(rows)} | ' + ' | '.join(cells) + ' |')
    return lines


def resolve_auto(configs: Sequence[str], records: Sequence[dict], metric: str = METRIC) -> list[str]:
    """``ENCODER-auto`` -> ``ENCODER-<the ViTD encoding with the best mean test ``metric``>`` (dropped without
    ViTD runs)."""
    vitd = {}
    for r in records:
        if r['encoder'] == 'vitd':
            vitd.setdefault(r['encoding'], []).append(r['test'][metric])
    best = max(vitd, key=lambda e: statistics.fmean(vitd[e])) if vitd else None
    out = []
    for c in configs:
        encoder, encoding = parse_config(c)
        if encoding != AUTO:
            out.append(c)
        elif best is None:
            print(f'{c}: no ViTD results to pick the encoding from; skipped', flush=True)
        else:
            out.append(f'{encoder}-{best}')
    return out


def run_benchmark(configs: Sequence[str], budget: Budget, settings: Settings,
                  reference: Path | None = None, report_only: bool = False) -> dict[str, Any]:
    """Train and evaluate every configuration x seed (resumable), score ``reference`` (the shipped model) on the
    same test seeds, then write table.md / results.json / plot. ``report_only``: train nothing, write the table of
    the runs already finished (a partial table names the runs still to do)."""
    t0 = time.perf_counter()
    settings.out.mkdir(parents=True, exist_ok=True)
    for c in configs:
        parse_config(c)
    fixed = [c for c in configs if parse_config(c)[1] != AUTO]
    auto = [c for c in configs if parse_config(c)[1] == AUTO]

    def specs_for(names):   # seed-major: an interrupted benchmark has whole seeds (a 1-seed table) first
        return [run_spec(*parse_config(c), seed, budget, settings) for seed in range(settings.seeds) for c in names]

    specs = specs_for(fixed)
    if report_only:
        records = [r for r in map(finished_record, specs) if r is not None]
        extra = [c for c in resolve_auto(auto, records, settings.metric) if c not in fixed] if auto else []
        more = [r for r in map(finished_record, specs_for(extra)) if r is not None]
        done = {(r['config'], r['seed']) for r in records + more}
        pending = [f'{s["config"]} seed {s["seed"]}' for s in specs + specs_for(extra)
                   if (s['config'], s['seed']) not in done]
        pending += [f'{c} (all seeds; its encoding is picked once the ViTD runs are done)' for c in auto if not extra]
        records, errors = records + more, []
    else:
        if specs:
            prepare_caches(specs, max(1, settings.jobs * settings.threads))     # the cores the runs may use
        records, errors = run_all(specs, settings)
        if auto:
            extra = [c for c in resolve_auto(auto, records, settings.metric) if c not in fixed]
            more, more_errors = run_all(specs_for(extra), settings)
            records, errors = records + more, errors + more_errors
        pending = []
    ref = evaluate_reference(reference, budget, settings) if reference is not None else None
    results = write_outputs(records, budget, settings, time.perf_counter() - t0, errors, ref, pending)
    print(f'wrote {settings.out / "table.md"}, results.json and learning_curves.png', flush=True)
    return results


# ----------------------------------------------------------------------------------------------------------------
# Wall-time estimate from measured step times
# ----------------------------------------------------------------------------------------------------------------

class StepTimer:
    """One configuration's model, loss and optimiser on this process's threads: times one optimiser step on a
    given batch, and the evaluation (predict + decode + metrics) per frame of a dataset."""

    def __init__(self, cfg):
        import torch

        from string_perception.model import ViTD
        from string_perception.training.config import build_model_config
        from string_perception.training.engine import build_criterion, param_groups
        self.cfg = cfg
        self.model_cfg = build_model_config(cfg)
        torch.manual_seed(0)
        self.model = ViTD(self.model_cfg)
        self.criterion = build_criterion(self.model_cfg, cfg)
        self.optimizer = torch.optim.AdamW(param_groups(self.model, cfg.weight_decay), lr=cfg.lr)

    def step(self, batch: dict) -> float:
        import torch
        t = time.perf_counter()
        out = self.model(batch['image'], batch['depth'], batch['K'])
        loss = self.criterion(out, batch['targets'])['loss']
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        return time.perf_counter() - t

    def eval_frame_seconds(self, dataset) -> float:
        from string_perception.training.inference import evaluate_predictions, predict
        cfg = self.cfg
        t = time.perf_counter()
        res = predict(self.model, dataset, batch_size=cfg.batch_size, criterion=self.criterion,
                      decode={'score_threshold': cfg.score_threshold, 'nms_iou': cfg.nms_iou,
                              'max_detections': cfg.max_detections})
        evaluate_predictions(res['preds'], res['gts'], self.model_cfg.class_names,
                             operating_threshold=cfg.operating_threshold)
        return (time.perf_counter() - t) / len(dataset)


def estimate(configs: Sequence[str], budget: Budget, settings: Settings, steps: int, target_hours: float = 2.0,
             startup_s: float = 10.0) -> dict[str, Any]:
    """Time ``steps`` optimiser steps of every configuration, round-robin across configurations so that load from
    other processes hits them alike (median per configuration; 2 untimed warm-up rounds), then the evaluation per
    frame, and project the benchmark's wall time and the steps per run that would fill ``target_hours``. ``auto``
    is timed as cayley. ``startup_s``: interpreter, imports and cache load per run. Evaluation is timed on the
    barely trained model (its box count differs later)."""
    import torch

    from string_perception.training.data import collate, measure_generation
    torch.set_num_threads(settings.threads)
    load_start = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    timers, data = {}, {}
    for c in configs:
        encoder, encoding = parse_config(c)
        cfg = train_config(encoder, 'cayley' if encoding == AUTO else encoding, 0, budget, settings)
        key = frames_key(cfg)
        if key not in data:
            train_set = source_dataset(cfg, 'train', 2 * budget.batch_size)
            train_set.canonical_targets = True
            t_gen = time.perf_counter()
            if cfg.scenes != 'procedural':      # simulated frames: the generation rate is the cache's
                train_set.build_cache()
            t_gen = len(train_set) / (time.perf_counter() - t_gen)
            batches = [collate([train_set[i] for i in range(b * budget.batch_size, (b + 1) * budget.batch_size)])
                       for b in range(2)]
            val_set = source_dataset(cfg, 'val', min(budget.val_frames, 32))
            val_set.build_cache()
            gen_fps = measure_generation(scene_config_of(cfg), num=20) if cfg.scenes == 'procedural' else t_gen
            data[key] = (batches, val_set, gen_fps)
        timers[c] = (StepTimer(cfg), key)
    times: dict[str, list[float]] = {c: [] for c in configs}
    for i in range(steps + 2):
        for c, (timer, key) in timers.items():
            times[c].append(timer.step(data[key][0][i % 2]))
    rows = {}
    for c, (timer, key) in timers.items():
        _, val_set, gen_fps = data[key]
        m = {'step_s': statistics.median(times[c][2:]), 'eval_frame_s': timer.eval_frame_seconds(val_set)}
        eval_frames = budget.val_points * budget.val_frames + budget.test_frames
        m['fixed_s'] = eval_frames * m['eval_frame_s'] + startup_s + budget.val_frames / gen_fps
        m['run_s'] = budget.steps * m['step_s'] + m['fixed_s']
        rows[c] = m
        print(f'{c:22s} step {m["step_s"] * 1e3:7.1f} ms   eval {m["eval_frame_s"] * 1e3:6.1f} ms/frame   '
              f'run {m["run_s"] / 60:5.1f} min', flush=True)
    jobs = max(1, settings.jobs)
    gen_fps = statistics.fmean(v[2] for v in data.values())
    cache_s = (budget.num_train_frames + budget.test_frames) / (gen_fps * jobs)
    run_total = sum(m['run_s'] for m in rows.values()) * settings.seeds
    total = run_total / jobs + cache_s
    # steps per run that fill target_hours: target = seeds * sum(steps * step_s + fixed_s) / jobs + caches
    step_sum, fixed_sum = (sum(m[k] for m in rows.values()) for k in ('step_s', 'fixed_s'))
    fit = int(((target_hours * 3600 - cache_s) * jobs / settings.seeds - fixed_sum) / step_sum)
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    result = {'configs': rows, 'generation_fps': gen_fps, 'cache_seconds': cache_s, 'run_seconds_sum': run_total,
              'projected_wall_seconds': total, 'target_hours': target_hours, 'steps_for_target': fit,
              'jobs': jobs, 'threads': settings.threads, 'seeds': settings.seeds, 'timed_steps': steps,
              'load_average_1min': {'start': load_start, 'end': load}, 'budget': dataclasses.asdict(budget)}
    print(f'frame generation {gen_fps:.0f} frames/s; caches {cache_s / 60:.1f} min; runs {run_total / 60:.1f} min '
          f'of compute on {jobs} job(s) -> projected wall time {total / 3600:.2f} h for {budget.steps} steps; '
          f'{fit} steps would fill {target_hours:g} h (1-min load average {load_start:.1f} at the start, '
          f'{load:.1f} at the end)', flush=True)
    return result


# ----------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------

def _kv(text: str) -> tuple[str, Any]:
    from string_perception.cli import parse_kv as kv
    return kv(text)


def build_parser(description: str) -> argparse.ArgumentParser:
    """The table's command line (``benchmarks.paper_table4``; the ablations add to it)."""
    d = Budget()
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument('--out', default='runs/table4', help='output directory (resumable)')
    p.add_argument('--configs', nargs='+', default=list(DEFAULT_CONFIGS),
                   help='ENCODER-ENCODING names (default: all 10 + vitd_xyz-auto)')
    p.add_argument('--family', action='store_true',
                   help=f'also the paper-family rows (issue 10): {" ".join(FAMILY_CONFIGS)}')
    p.add_argument('--seeds', type=int, default=3, help='seeds 0 .. N-1 per configuration')
    p.add_argument('--preset', default='tiny', help='ViTDConfig preset')
    p.add_argument('--metric', default=METRIC, choices=STRICT_AND_SYM,
                   help='headline metric of the table, the claims, the learning curves and vitd_xyz-auto (the other '
                        'one is shown as a second table); avg_best_iou_sym = symmetry-aware, as Objectron scores '
                        'symmetric objects')
    p.add_argument('--reference', default=str(DEFAULT_REFERENCE),
                   help="the shipped model's checkpoint, scored on the same test seeds to decide whether the best "
                   "ViTD run should replace it; 'none' to skip")
    b = p.add_argument_group('budget (shared by every run)')
    b.add_argument('--budget-scale', type=float, default=1.0, help='multiply steps and training frames')
    b.add_argument('--steps', type=int, default=None, help=f'optimiser steps per run (default {d.steps} x scale)')
    b.add_argument('--batch-size', type=int, default=d.batch_size)
    b.add_argument('--train-frames', type=int, default=None,
                   help=f'training frames (default {d.num_train_frames} x scale)')
    b.add_argument('--val-points', type=int, default=d.val_points, help='validations per run')
    b.add_argument('--val-frames', type=int, default=d.val_frames)
    b.add_argument('--test-frames', type=int, default=d.test_frames)
    o = p.add_argument_group('overrides for every configuration')
    o.add_argument('--model', type=_kv, action='append', default=[], metavar='KEY=VALUE',
                   help='ViTDConfig field (JSON value), e.g. image_size=[64,64]')
    o.add_argument('--depth-model', type=_kv, action='append', default=[], metavar='KEY=VALUE',
                   help='ViTDConfig field for the RGB-D encoders only, e.g. patch_geometry=true (the issue-19 '
                        'recipe; an RGB ViT has no depth to take it from)')
    o.add_argument('--train', type=_kv, action='append', default=[], metavar='KEY=VALUE',
                   help='TrainConfig field (JSON value), e.g. lr=2e-3')
    o.add_argument('--scenes', default='procedural', choices=('procedural', 'aloha', 'kuka', 'mix'),
                   help='frame source of the training, validation and test frames (string-perception-train '
                        '--scenes); the reference is scored on test frames of the same source')
    o.add_argument('--sim', type=_kv, action='append', default=[], metavar='KEY=VALUE',
                   help='SimConfig field of simulated frames (JSON value), e.g. mesh_object_fraction=0')
    r = p.add_argument_group('where it runs')
    r.add_argument('--device', default='cpu', help='cpu | cuda | cuda:N')
    r.add_argument('--jobs', type=int, default=None, help='runs side by side (default: 2 on CPU, 1 on CUDA)')
    r.add_argument('--threads', type=int, default=None, help='torch threads per job (default: cores / jobs)')
    r.add_argument('--estimate', action='store_true', help='time steps per config, print the projected wall '
                   'time, write OUT/estimate.json; trains nothing')
    r.add_argument('--estimate-steps', type=int, default=20)
    r.add_argument('--target-hours', type=float, default=2.0, help='--estimate: the steps per run that fill this')
    r.add_argument('--progress', action='store_true', help='tqdm bars (in-process runs)')
    r.add_argument('--report-only', action='store_true',
                   help='train nothing: write the table of the runs already finished in --out (partial tables '
                        'name the runs still to do)')
    return p


def budget_from_args(args: argparse.Namespace) -> Budget:
    budget = dataclasses.replace(Budget(), batch_size=args.batch_size, val_points=args.val_points,
                                 val_frames=args.val_frames, test_frames=args.test_frames).scaled(args.budget_scale)
    if args.steps is not None:
        budget.steps = args.steps
    if args.train_frames is not None:
        budget.num_train_frames = args.train_frames
    return budget


def settings_from_args(args: argparse.Namespace) -> Settings:
    cpu = not args.device.startswith('cuda')
    jobs = args.jobs if args.jobs is not None else (2 if cpu else 1)
    threads = args.threads if args.threads is not None else max(1, (os.cpu_count() or 1) // jobs)
    return Settings(out=Path(args.out), preset=args.preset, seeds=args.seeds, model=dict(args.model),
                    depth_model=dict(args.depth_model), metric=args.metric,
                    train=dict(args.train), device=args.device, jobs=jobs, threads=threads, progress=args.progress,
                    scenes=args.scenes, sim=dict(args.sim))


def main(argv: list[str] | None = None) -> int:
    """Worker entry of a subprocess job (:func:`run_all`): ``python -m benchmarks.common.table4 SPEC_JSON``."""
    p = argparse.ArgumentParser(description='train and evaluate one Table-4 run (a job of run_all)')
    p.add_argument('spec', type=Path, help="the run's spec.json")
    execute_run(json.loads(p.parse_args(argv).spec.read_text()))
    return 0


if __name__ == '__main__':
    sys.exit(main())

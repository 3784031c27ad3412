"""What a training run depends on besides the model weights: :class:`TrainConfig`, the configs built from it, recipes.

``TrainConfig`` is saved as a plain dict in every checkpoint (``train_config``; ``training/checkpoint.py``) and as
``train_config.json`` in the run directory. A recipe (``config/recipes/*.yaml``) is a YAML mapping of TrainConfig
fields (:func:`load_recipe`); ``string-perception-train --recipe FILE`` starts from it and the other flags override
it. ``build_model_config`` / ``build_scene_config`` / ``build_sim_config`` turn a TrainConfig into the
``ViTDConfig`` / ``SceneConfig`` / ``SimConfig`` of the run (the evaluator rebuilds a checkpoint's scenes with them).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from string_perception.model import ViTDConfig
from string_perception.scenes import SceneConfig
from string_perception.training.sources import check_scenes, class_names_for, sim_config, sim_has_objects, uses_sim

ASSIGNMENTS = ('hungarian', 'dense')


@dataclass
class TrainConfig:
    """Everything a run depends on besides the model config (saved in every checkpoint as a plain dict)."""
    preset: str = 'tiny'
    model_overrides: dict[str, Any] = field(default_factory=dict)   # ViTDConfig fields over the preset
    scene_overrides: dict[str, Any] = field(default_factory=dict)   # SceneConfig fields (image size follows model)
    scenes: str = 'procedural'      # frame source (training/sources.py): procedural | aloha | kuka | mix
    sim_overrides: dict[str, Any] = field(default_factory=dict)     # SimConfig fields of simulated frames
    loss_overrides: dict[str, Any] = field(default_factory=dict)    # SetCriterion keyword arguments (e.g. weights)
    matcher_overrides: dict[str, Any] = field(default_factory=dict) # HungarianMatcher costs (default: = weights)
    assignment: str = 'hungarian'   # 'hungarian' (one-to-one, SetCriterion) | 'dense' (one-to-many, DenseCriterion)
    # optimisation
    steps: int = 2000
    batch_size: int = 32            # per rank
    lr: float = 1e-3
    min_lr_ratio: float = 0.02      # cosine decays to lr * min_lr_ratio
    warmup_steps: int = 100
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0          # max global grad norm; 0 disables
    seed: int = 0                   # init + data order
    init_from: str = ''             # fine-tune: start from this checkpoint's weights (init.load_matching_weights)
    render_scale: int = 1           # render frames at this multiple of the input size, then downscale them as the
                                    # node prepares a camera frame (data.downscale_frame); 1 = render at input size
    # data
    num_train_frames: int = 10_000  # training seeds [train_offset, train_offset + num_train_frames)
    train_offset: int = 0           # first training seed: fresh frames for a run that continues another's
    cache: bool = True              # generate this rank's frames once and keep them in memory
    cache_file: str = ''            # also keep that cache on disk (.npz; per rank) and reuse it across runs
    num_workers: int = 1            # DataLoader workers (uncached frames are generated there)
    canonical_targets: bool = True  # train on canonical box rotations (data.canonical_box); val/test never
    # validation / logging / checkpoints
    val_frames: int = 64            # validation seeds [1e9, 1e9 + val_frames)
    val_every: int = 250            # steps; also writes last.pt (and best.pt when the best metric improves)
    keep_every: int = 0             # also keep ckpt_<step>.pt every this many steps (0: only last + best)
    best_metric: str = 'avg_best_iou'
    score_threshold: float = 0.05   # validation decoding (runtime.postprocess): low, for AP
    operating_threshold: float = 0.3  # also report the numbers of boxes scoring at least this (the node's default)
    nms_iou: float = 0.3
    max_detections: int = 50
    log_every: int = 10
    out: str = 'runs/train'
    device: str = 'auto'            # auto | cpu | cuda | cuda:N
    threads: int = 0                # torch intra-op threads per rank on CPU; 0 leaves torch's default

    def __post_init__(self):
        self.betas = tuple(float(b) for b in self.betas)
        if self.assignment not in ASSIGNMENTS:
            raise ValueError(f'assignment must be one of {ASSIGNMENTS}, got {self.assignment!r}')
        check_scenes(self.scenes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d['betas'] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> 'TrainConfig':
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def build_model_config(cfg: TrainConfig) -> ViTDConfig:
    """The ``ViTDConfig`` of a run: preset + overrides, class names from the scene source
    (``sources.class_names_for``: the five primitives, plus ``object`` for simulated frames with mesh objects)."""
    overrides = {'class_names': class_names_for(cfg.scenes, cfg.sim_overrides), **cfg.model_overrides}
    return ViTDConfig.preset(cfg.preset, **overrides)


def build_scene_config(cfg: TrainConfig, model_cfg: ViTDConfig) -> SceneConfig:
    """``SceneConfig`` rendering at the model's input size (so no resize is needed)."""
    fields = {f.name for f in dataclasses.fields(SceneConfig)}
    size = {}
    h, w = (v * cfg.render_scale for v in model_cfg.image_size)
    if 'image_size' in fields:
        size['image_size'] = (h, w)
    else:
        size.update({k: v for k, v in (('height', h), ('width', w)) if k in fields})
    if cfg.render_scale > 1:      # the same labels as at the input size: visible pixels counted at render size
        size['min_visible_pixels'] = SceneConfig.min_visible_pixels * cfg.render_scale ** 2
    return SceneConfig(**{**size, **cfg.scene_overrides})


def build_sim_config(cfg: TrainConfig, model_cfg):
    """``SimConfig`` of the run's simulated frames at the model's input size (None for procedural scenes)."""
    if not uses_sim(cfg.scenes):
        return None
    overrides = dict(cfg.sim_overrides)
    if cfg.render_scale > 1:
        from string_perception.sim import SimConfig   # here: the simulator (mujoco) is an optional dependency
        overrides.setdefault('min_visible_pixels', SimConfig.min_visible_pixels * cfg.render_scale ** 2)
    return sim_config([v * cfg.render_scale for v in model_cfg.image_size], overrides)


def frame_out_hw(cfg: TrainConfig, model_cfg) -> tuple[int, int] | None:
    """The model's input size when frames are rendered larger (``render_scale`` > 1), else None."""
    return tuple(model_cfg.image_size) if cfg.render_scale > 1 else None


def check_source_classes(cfg: TrainConfig, model_cfg) -> None:
    """Simulated frames with mesh objects label class ``object``: the model must have it."""
    if uses_sim(cfg.scenes) and sim_has_objects(cfg.sim_overrides) and 'object' not in model_cfg.class_names:
        raise ValueError(f'--scenes {cfg.scenes} frames hold mesh objects (class "object") but the model classes are '
                         f'{list(model_cfg.class_names)}; train with --sim mesh_object_fraction=0 for primitives only')


def load_recipe(path: str | Path) -> TrainConfig:
    """The TrainConfig of a recipe file: a YAML mapping of TrainConfig fields (fields left out keep their defaults).
    An unknown key, or a value of another type than the field's default (``lr: 2e-4`` is a string in YAML 1.1:
    write ``2.0e-4``), is a ``ValueError``: a typo must not silently train something else."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f'{path}: a recipe is a mapping of TrainConfig fields, got {type(data).__name__}')
    defaults = TrainConfig().to_dict()
    unknown = sorted(set(data) - set(defaults))
    if unknown:
        raise ValueError(f'{path}: not TrainConfig fields: {unknown}')
    for key, value in data.items():      # YAML 1.1 reads 2e-4 (no dot) as a string: say so instead of training on it
        want = type(defaults[key])
        ok = isinstance(value, want) or (want is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise ValueError(f'{path}: {key} must be {want.__name__}, got {value!r} ({type(value).__name__})')
    return TrainConfig.from_dict(data)


__all__ = ['ASSIGNMENTS', 'TrainConfig', 'build_model_config', 'build_scene_config', 'build_sim_config',
           'frame_out_hw', 'check_source_classes', 'load_recipe']

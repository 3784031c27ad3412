"""SimConfig: every knob of the simulated workcell frames in one frozen dataclass (a frame = f(seed, config))."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from string_perception.scenes import SceneConfig

CELL_NAMES = ('aloha', 'kuka')
MAX_DISTRACTORS_PER_SCENE = 16
# fields added after simulated frames were first cached -> their value that leaves every frame unchanged
FIELDS_OFF = {'distractors': (0, 0)}


@dataclass(frozen=True)
class SimConfig:
    cell: str = 'aloha'                   # 'aloha' (two ViperX arms, table) | 'kuka' (iiwa, table, tray)
    height: int = 128
    width: int = 128
    # objects
    min_objects: int = 1
    max_objects: int = 12
    mesh_object_fraction: float = 0.25    # share of objects that are meshes (class 'object'); 0 = primitives only
    size_scale: float = 0.6               # primitive sizes = scenes.SIZE_RANGES draws x this (workcell objects)
    object_split: str = 'all'             # meshes drawn from: 'all' | 'train' | 'heldout' (sim/mesh_library.py)
    # camera: rig names of the cell (cells.py); () = every rig of the cell, drawn uniformly
    cameras: tuple = ()
    camera_position_jitter_m: float = 0.03
    camera_angle_jitter_deg: float = 3.0
    hfov_deg_range: tuple = (66.0, 72.0)  # D435 colour: 69 deg horizontal, square pixels
    principal_point_jitter: float = 0.015  # (cx, cy) = centre + whole pixels up to this fraction of (W, H)
    # physics
    settle_max_time_s: float = 2.0        # simulate the drop at most this long
    settle_speed_m_s: float = 0.005       # settled when every object moves slower (and spins slower x 1/0.05 m)
    # labels (as scenes.SceneConfig): objects with fewer visible pixels / a lower visible fraction are left out
    min_visible_pixels: int = 64
    min_visibility: float = 0.1
    # rendering
    rgb_noise_std: float = 2.0
    # domain randomisation (0 = the cell as modelled): surface / arm colours and lights (sim/appearance.py)
    appearance_randomization: float = 0.0
    # probability that an object is dark or shiny for the depth sensor: it loses 30-100 % of its depth pixels
    object_depth_dropout: float = 0.0
    # unlabelled clutter per scene, (min, max) items: sheets / cloth / tape patches and cables lying on the table or
    # tray floor (sim/distractors.py), drawn from their own random stream; (0, 0) = none, frames as without it
    distractors: tuple[int, int] = (0, 0)
    # depth sensor model: the noise fields of this SceneConfig (scenes/sensor_model.py) are applied to depth
    sensor: SceneConfig = field(default_factory=SceneConfig)

    def __post_init__(self):
        if self.cell not in CELL_NAMES:
            raise ValueError(f'unknown cell {self.cell!r}; expected one of {CELL_NAMES}')
        if self.height < 8 or self.width < 8:
            raise ValueError(f'image size must be at least 8x8, got {self.height}x{self.width}')
        if not 0 <= self.min_objects <= self.max_objects <= 12:
            raise ValueError(f'need 0 <= min_objects <= max_objects <= 12, got {self.min_objects}, '
                             f'{self.max_objects}')
        if not 0.0 <= self.mesh_object_fraction <= 1.0 or not 0.0 <= self.min_visibility <= 1.0:
            raise ValueError('mesh_object_fraction and min_visibility must lie in [0, 1]')
        if not 0 < self.hfov_deg_range[0] <= self.hfov_deg_range[1] < 150:
            raise ValueError('hfov_deg_range must lie in (0, 150)')
        if not 0.0 <= self.principal_point_jitter <= 0.2:
            raise ValueError('principal_point_jitter must lie in [0, 0.2]')
        from .mesh_library import MESH_SPLITS
        if self.object_split not in MESH_SPLITS:
            raise ValueError(f'object_split must be one of {MESH_SPLITS}, got {self.object_split!r}')
        if not 0.0 <= self.appearance_randomization <= 1.0 or not 0.0 <= self.object_depth_dropout <= 1.0:
            raise ValueError('appearance_randomization and object_depth_dropout must lie in [0, 1]')
        if self.size_scale <= 0 or self.settle_max_time_s <= 0 or self.settle_speed_m_s <= 0:
            raise ValueError('size_scale, settle_max_time_s and settle_speed_m_s must be positive')
        if (len(self.distractors) != 2 or any(isinstance(v, bool) or int(v) != v for v in self.distractors)
                or not 0 <= self.distractors[0] <= self.distractors[1] <= MAX_DISTRACTORS_PER_SCENE):
            raise ValueError(f'distractors must be (min, max) integers with 0 <= min <= max <= '
                             f'{MAX_DISTRACTORS_PER_SCENE}, got {self.distractors!r}')
        object.__setattr__(self, 'distractors', tuple(int(v) for v in self.distractors))
        object.__setattr__(self, 'cameras', tuple(self.cameras))
        object.__setattr__(self, 'hfov_deg_range', tuple(self.hfov_deg_range))

    def replace(self, **changes) -> 'SimConfig':
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key_dict(self) -> dict:
        """``to_dict`` for cache keys: a field added after frames were first cached is left out while it has the
        value that renders frames exactly as before it existed (``FIELDS_OFF``), so such keys stay valid."""
        return {k: v for k, v in self.to_dict().items() if not (k in FIELDS_OFF and FIELDS_OFF[k] == v)}

    @classmethod
    def noise_free(cls, **changes) -> 'SimConfig':
        """Exact depth and colour (geometry tests)."""
        base = dict(rgb_noise_std=0.0, sensor=SceneConfig.noise_free())
        base.update(changes)
        return cls(**base)

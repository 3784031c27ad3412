"""SceneConfig: every knob of the procedural RGB-D scene generator in one frozen dataclass.

Ranges are ``(low, high)`` tuples sampled uniformly per frame. Lengths are metres, angles degrees.
A frame is a pure function of ``(seed, config)``; the config is hashable so callers may cache per config.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class SceneConfig:
    # image
    height: int = 128
    width: int = 128
    # objects
    min_objects: int = 1
    max_objects: int = 12
    placement_attempts: int = 25          # rejection-sampling tries per object (footprint overlap)
    tilt_probability: float = 0.2         # a resting object is additionally tilted (a box leaning, ...)
    max_tilt_deg: float = 25.0
    # labels: objects with fewer visible pixels / a lower visible fraction are left out of the labels
    min_visible_pixels: int = 64          # ~8x8 px at 128x128: below that no 3D box can be estimated
    min_visibility: float = 0.1
    # supports
    table_probability: float = 0.6        # else a floor scene
    table_height_range: tuple = (0.55, 0.9)
    table_extent_range: tuple = (0.6, 1.6)  # full edge length of the table top (x and y drawn separately)
    wall_probability: float = 0.4
    # camera intrinsics (scale with the image size)
    hfov_deg_range: tuple = (50.0, 75.0)
    aspect_jitter: float = 0.03           # fy / fx in [1 - a, 1 + a]
    principal_point_jitter: float = 0.04  # (cx, cy) = centre + U(-j, j) * (W, H)
    # camera extrinsics: looks at a point near the objects from a workcell-like viewpoint
    # 0.45-1.0 m: a wrist / overhead workcell camera over a table. Farther views make the median object ~9 px
    # wide at 128x128 (measured), which the tiny CPU model cannot localise in 3D.
    camera_distance_range: tuple = (0.45, 1.0)
    camera_elevation_deg_range: tuple = (25.0, 75.0)  # pitch below the horizon
    camera_roll_deg: float = 5.0
    view_fill: float = 0.7                # objects are placed within this fraction of the half view width
    # lighting (Lambertian, one directional light + ambient)
    light_elevation_deg_range: tuple = (25.0, 85.0)
    ambient_range: tuple = (0.2, 0.45)
    diffuse_range: tuple = (0.55, 0.9)
    rgb_noise_std: float = 2.0            # grey levels, additive Gaussian
    # depth sensor model
    depth_noise_base_m: float = 0.001     # sigma(z) = base + quad * z**2   [m]
    depth_noise_quad_per_m: float = 0.0015
    min_range_m: float = 0.15
    max_range_m: float = 4.0
    edge_rel_threshold: float = 0.03      # a step > rel * z + abs between 4-neighbours is a depth edge
    edge_abs_threshold_m: float = 0.01
    edge_near_dropout: float = 0.3        # near-side edge pixels also dropped with this probability
    hole_blobs_mean: float = 1.5          # Poisson mean of elliptic holes per frame
    hole_radius_frac_range: tuple = (0.01, 0.06)  # ellipse radii as a fraction of min(H, W)
    speckle_dropout: float = 0.002        # isolated invalid pixels

    def __post_init__(self):
        if self.height < 8 or self.width < 8:
            raise ValueError(f'image size must be at least 8x8, got {self.height}x{self.width}')
        if not 0 <= self.min_objects <= self.max_objects:
            raise ValueError(f'need 0 <= min_objects <= max_objects, got {self.min_objects}, {self.max_objects}')
        for name in ('table_height_range', 'table_extent_range', 'hfov_deg_range', 'camera_distance_range',
                     'camera_elevation_deg_range', 'light_elevation_deg_range', 'ambient_range',
                     'diffuse_range', 'hole_radius_frac_range'):
            lo, hi = getattr(self, name)
            if not lo <= hi:
                raise ValueError(f'{name}: low > high ({lo}, {hi})')
        if not 0 < self.min_range_m < self.max_range_m <= 65.535:
            raise ValueError('need 0 < min_range_m < max_range_m <= 65.535 (16UC1 millimetres)')
        if self.camera_distance_range[0] <= self.min_range_m:
            raise ValueError('camera_distance_range must start beyond min_range_m')
        if not 0 < self.hfov_deg_range[0] <= self.hfov_deg_range[1] < 170:
            raise ValueError('hfov_deg_range must lie in (0, 170)')
        if not 5.0 <= self.max_tilt_deg <= 60.0:
            raise ValueError('max_tilt_deg must lie in [5, 60]')
        if not 0 < self.camera_elevation_deg_range[0] <= self.camera_elevation_deg_range[1] < 90:
            raise ValueError('camera_elevation_deg_range must lie in (0, 90): the camera looks down')
        for name in ('tilt_probability', 'table_probability', 'wall_probability', 'edge_near_dropout',
                     'speckle_dropout', 'min_visibility'):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f'{name} must lie in [0, 1]')

    def replace(self, **changes) -> 'SceneConfig':
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> 'SceneConfig':
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in fields}
        return cls(**kw)

    @classmethod
    def noise_free(cls, **changes) -> 'SceneConfig':
        """Exact sensor (no noise, holes or dropouts; edges kept valid) — for geometry tests and debugging."""
        base = dict(rgb_noise_std=0.0, depth_noise_base_m=0.0, depth_noise_quad_per_m=0.0,
                    edge_rel_threshold=float('inf'), edge_near_dropout=0.0, hole_blobs_mean=0.0,
                    speckle_dropout=0.0)
        base.update(changes)
        return cls(**base)

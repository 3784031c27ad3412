"""Procedural RGB-D tabletop / floor scenes with exact 3D box labels (numpy only, no torch).

    from string_perception.scenes import generate_frame, SceneConfig, CLASS_NAMES
    frame = generate_frame(seed=0, config=SceneConfig(height=128, width=128))

Conventions (docs/ARCHITECTURE.md): camera optical frame (x right, y down, z forward, metres); a box label is the
object's tight oriented bounding box: translation = centre, rotation columns = the object's axes, size = full
extents; for cylinder, cone and capsule the symmetry axis is box axis z (cone apex at +z). Pixel (u, v) = (column,
row) has its centre at image coordinates (u, v), i.e. it images the ray K^-1 [u, v, 1]. depth_mm is z-depth.
"""
from .config import SceneConfig
from .frame import Frame
from .generator import SceneTruth, generate_frame, render_scene
from .primitives import CLASS_NAMES, SIZE_RANGES, SYMMETRY_AXIS

__all__ = ['CLASS_NAMES', 'SIZE_RANGES', 'SYMMETRY_AXIS', 'SceneConfig', 'Frame', 'generate_frame',
           'render_scene', 'SceneTruth']

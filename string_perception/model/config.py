"""ViT / ViTD configuration: one dataclass, saved as a plain JSON-able dict in every checkpoint (nanoGPT style).

Presets:
    tiny  -- trains on a CPU: 128x128 input, 8x8 patches (16x16 = 256 tokens), width 128, 6 layers, 4 heads.
    base  -- ViT-B/16 shape for GPUs: 224x224 input, 16x16 patches, width 768, 12 layers, 12 heads.

Coordinates (docs/DESIGN.md §3), all in the units the position encoding sees:
    ViT  (use_depth=False): r = (row, col) in patch units                                   coord_dim 2
    ViTD coord_mode='grid_depth': r = (row, col, a * d)  with a learnable (init depth_scale_init
                                  patches per metre)                                         coord_dim 3
    ViTD coord_mode='camera_xyz': r = s * d * K^-1 [u, v, 1]  (metres in the camera optical frame) with s a
                                  learnable per-axis scale (init xyz_scale_init units per metre)   coord_dim 3
coord_transform='azimuth_polar' (Lie-group STRING, [STRING] §3.3 Ext. 2; camera_xyz only) maps the back-projected
point to canonical coordinates (polar θ, azimuth φ, ‖r‖) before the per-axis scale, so rotating the scene about
the camera axis translates φ only (encodings/lie.py).
normal_map=True ([STRING] §4.4.2) adds N surface-normal tokens (normals from depth through the same patch
embedding as RGB, at the same coordinates); the encoder runs on 2N tokens, then RGB and normal tokens are split and
fused back to N by a linear layer. Works for the RGB ViT ("alone") and the ViTD ("with STRING").
The paper's "+ b" offset is left out on purpose: every encoding we ship is exactly translation invariant, so a
constant added to all coordinates changes nothing and its gradient is identically zero.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

COORD_MODES = ('grid_depth', 'camera_xyz')
TRANSLATION_MODES = ('patch_offset', 'absolute')
POLICY_POOLS = ('attention', 'mean')
ABS_POS_EMBEDS = ('learned', 'sincos')     # abs_pos_embed kinds (True == 'learned')
DEFAULT_CLASS_NAMES = ('box', 'cylinder', 'sphere')
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class ViTDConfig:
    # --- input / tokenizer
    image_size: tuple[int, int] = (128, 128)    # (H, W) of the (resized) model input; K must match this size
    patch_size: int = 8
    mean: tuple[float, float, float] = IMAGENET_MEAN   # RGB normalisation of image/255, applied inside forward
    std: tuple[float, float, float] = IMAGENET_STD
    # --- transformer
    width: int = 128
    depth: int = 6
    num_heads: int = 4
    mlp_ratio: float = 4.0
    # absolute position embedding added to the tokens: 'learned' (or True) [1,N,D] parameter; 'sincos' fixed sin/cos
    # of the token coordinates (2D for the ViT, 3D for the ViTD); False: none. None = 'learned' only for 'none'
    abs_pos_embed: Optional[bool | str] = None
    # --- position encoding (string_perception.encodings)
    encoding: str = 'cayley'
    encoding_kwargs: dict[str, Any] = field(default_factory=dict)
    shared_across_heads: bool = False
    # --- depth / coordinates
    use_depth: bool = True                      # False: RGB ViT with 2D grid coordinates
    coord_mode: str = 'grid_depth'              # 'grid_depth' | 'camera_xyz' (ViTD only)
    coord_transform: str = 'identity'           # 'identity' | 'azimuth_polar' (Lie-group STRING; camera_xyz only)
    normal_map: bool = False                    # add surface-normal tokens from depth (paper §4.4.2)
    patch_geometry: bool = False                # ViTD: add a point encoding of each patch's 3D pixels (patch_geometry.py)
    depth_range: tuple[float, float] = (0.05, 10.0)   # metres; pixels outside (min, max) are invalid
    depth_fill: float = 1.0                     # metres; depth of patches when no patch in the frame is valid
    depth_scale_init: float = 4.0               # grid_depth: initial a (patch units per metre)
    xyz_scale_init: float = 8.0                 # camera_xyz: initial per-axis scale (units per metre)
    nominal_depth: float = 1.0                  # ViT (no depth) box prior: patch centre back-projected at this depth
    # --- heads
    translation_mode: str = 'patch_offset'      # 'patch_offset' (centre = patch point + offset) | 'absolute' (paper)
    class_names: tuple[str, ...] = DEFAULT_CLASS_NAMES
    class_embed_dim: int = 64                   # dimension of the learned class embeddings (OWL-ViT class head)
    class_prior_prob: float = 0.01              # initial sigmoid score of every (token, class)
    size_prior: float = 0.1                     # metres; box size output at initialisation
    embed_dim: int = 128                        # policy embedding dimension
    policy_pool: str = 'attention'              # 'attention' | 'mean'

    def __post_init__(self) -> None:
        # Normalise JSON types (lists) back to tuples so round trips compare equal.
        self.image_size = tuple(int(v) for v in _seq(self.image_size, 'image_size'))
        self.mean = tuple(float(v) for v in _seq(self.mean, 'mean'))
        self.std = tuple(float(v) for v in _seq(self.std, 'std'))
        self.depth_range = tuple(float(v) for v in _seq(self.depth_range, 'depth_range'))
        self.class_names = tuple(_seq(self.class_names, 'class_names'))
        self.encoding_kwargs = dict(self.encoding_kwargs or {})
        self.validate()

    # ------------------------------------------------------------------ derived
    @property
    def grid_size(self) -> tuple[int, int]:
        return (self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size)

    @property
    def num_tokens(self) -> int:
        gh, gw = self.grid_size
        return gh * gw

    @property
    def head_dim(self) -> int:
        return self.width // self.num_heads

    @property
    def coord_dim(self) -> int:
        return 3 if self.use_depth else 2

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def encoder_tokens(self) -> int:
        """Sequence length inside the encoder: N, or 2N with normal-map tokens."""
        return self.num_tokens * (2 if self.normal_map else 1)

    @property
    def abs_pos_embed_kind(self) -> Optional[str]:
        """'learned' | 'sincos' | None (no absolute position embedding)."""
        if self.abs_pos_embed is None:
            return 'learned' if self.encoding == 'none' else None
        if isinstance(self.abs_pos_embed, bool):
            return 'learned' if self.abs_pos_embed else None
        return self.abs_pos_embed

    @property
    def use_abs_pos_embed(self) -> bool:
        return self.abs_pos_embed_kind is not None

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        def bad(msg: str) -> None:
            raise ValueError(f'ViTDConfig: {msg}')

        if len(self.image_size) != 2 or min(self.image_size) <= 0:
            bad(f'image_size must be two positive ints (H, W), got {self.image_size}')
        if not isinstance(self.patch_size, int) or self.patch_size <= 0:
            bad(f'patch_size must be a positive int, got {self.patch_size!r}')
        for name, v in zip(('H', 'W'), self.image_size):
            if v % self.patch_size:
                bad(f'image {name}={v} is not a multiple of patch_size={self.patch_size}')
        for name in ('width', 'depth', 'num_heads', 'class_embed_dim', 'embed_dim'):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                bad(f'{name} must be a positive int, got {v!r}')
        if self.width % self.num_heads:
            bad(f'width={self.width} is not divisible by num_heads={self.num_heads}')
        if self.head_dim % 2:
            bad(f'head_dim = width/num_heads = {self.head_dim} must be even (rotations act on pairs)')
        if not (self.mlp_ratio > 0):
            bad(f'mlp_ratio must be > 0, got {self.mlp_ratio}')
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            bad(f'mean/std must be 3 numbers each with std > 0, got mean={self.mean} std={self.std}')
        if self.coord_mode not in COORD_MODES:
            bad(f'coord_mode must be one of {COORD_MODES}, got {self.coord_mode!r}')
        if self.translation_mode not in TRANSLATION_MODES:
            bad(f'translation_mode must be one of {TRANSLATION_MODES}, got {self.translation_mode!r}')
        if self.policy_pool not in POLICY_POOLS:
            bad(f'policy_pool must be one of {POLICY_POOLS}, got {self.policy_pool!r}')
        lo, hi = self.depth_range if len(self.depth_range) == 2 else (-1.0, -1.0)
        if len(self.depth_range) != 2 or not (0.0 <= lo < hi) or not math.isfinite(hi):
            bad(f'depth_range must be (min, max) metres with 0 <= min < max < inf, got {self.depth_range}')
        for name in ('depth_fill', 'nominal_depth', 'size_prior'):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                bad(f'{name} must be a positive finite number (metres), got {v!r}')
        for name in ('depth_scale_init', 'xyz_scale_init'):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v != 0):
                bad(f'{name} must be a finite non-zero number, got {v!r}')
        if not (0.0 < self.class_prior_prob < 1.0):
            bad(f'class_prior_prob must be in (0, 1), got {self.class_prior_prob}')
        if len(self.class_names) == 0 or not all(isinstance(c, str) and c for c in self.class_names):
            bad(f'class_names must be a non-empty tuple of non-empty strings, got {self.class_names}')
        if len(set(self.class_names)) != len(self.class_names):
            bad(f'class_names has duplicates: {self.class_names}')
        if not (self.abs_pos_embed is None or isinstance(self.abs_pos_embed, bool)
                or self.abs_pos_embed in ABS_POS_EMBEDS):
            bad(f'abs_pos_embed must be true, false, null or one of {ABS_POS_EMBEDS}, got {self.abs_pos_embed!r}')
        if not isinstance(self.normal_map, bool):
            bad(f'normal_map must be true or false, got {self.normal_map!r}')
        if not isinstance(self.patch_geometry, bool):
            bad(f'patch_geometry must be true or false, got {self.patch_geometry!r}')
        if self.patch_geometry and not self.use_depth:
            bad('patch_geometry needs depth (use_depth=True)')
        if not isinstance(self.encoding, str):
            bad(f'encoding must be a string, got {self.encoding!r}')
        try:  # the encodings library may be absent in runtime-only installs; the model cannot be built then anyway
            from string_perception.encodings import ALL_ENCODING_NAMES, COORDINATE_TRANSFORMS
        except ImportError:
            ALL_ENCODING_NAMES = COORDINATE_TRANSFORMS = None
        if ALL_ENCODING_NAMES is not None and self.encoding not in ALL_ENCODING_NAMES:
            bad(f'encoding must be one of {tuple(ALL_ENCODING_NAMES)}, got {self.encoding!r}')
        if COORDINATE_TRANSFORMS is not None and self.coord_transform not in COORDINATE_TRANSFORMS:
            bad(f'coord_transform must be one of {tuple(COORDINATE_TRANSFORMS)}, got {self.coord_transform!r}')
        if self.coord_transform != 'identity' and not (self.use_depth and self.coord_mode == 'camera_xyz'):
            bad(f'coord_transform={self.coord_transform!r} acts on 3D camera points: it needs use_depth=True and '
                f"coord_mode='camera_xyz'")

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types only (lists, not tuples), safe for torch.load(weights_only=True) and json.dumps."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = _plain(v)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> 'ViTDConfig':
        if not isinstance(d, dict):
            raise ValueError(f'ViTDConfig.from_dict: expected a dict, got {type(d).__name__}')
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f'ViTDConfig.from_dict: unknown keys {unknown}')
        return cls(**d)

    def replace(self, **changes: Any) -> 'ViTDConfig':
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> 'ViTDConfig':
        if name not in PRESETS:
            raise ValueError(f'unknown preset {name!r}; choose from {tuple(PRESETS)}')
        return cls(**{**PRESETS[name], **overrides})


PRESETS: dict[str, dict[str, Any]] = {
    'tiny': dict(image_size=(128, 128), patch_size=8, width=128, depth=6, num_heads=4, mlp_ratio=4.0,
                 class_embed_dim=64, embed_dim=128),
    'base': dict(image_size=(224, 224), patch_size=16, width=768, depth=12, num_heads=12, mlp_ratio=4.0,
                 class_embed_dim=512, embed_dim=512),
}


def _seq(v: Any, name: str) -> tuple:
    if isinstance(v, (str, bytes)) or not hasattr(v, '__iter__'):
        raise ValueError(f'ViTDConfig: {name} must be a sequence, got {v!r}')
    return tuple(v)


def _plain(v: Any) -> Any:
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError(f'ViTDConfig: value {v!r} of type {type(v).__name__} is not JSON-serialisable')

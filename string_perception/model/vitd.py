"""ViT / ViTD for 3D boxes, class scores and a policy embedding ([STRING] §4.2.2, App. F; docs/DESIGN.md §3-§4).

    model = build_model(ViTDConfig.preset('tiny', encoding='cayley'))
    out = model(image_uint8[B,H,W,3], depth_m[B,H,W], K[B,3,3])
    out['boxes'] [B,N,12]  [t(3) metres, rot6d(6) first two columns of R, size(3) metres > 0], camera frame
    out['logits'][B,N,C]   sigmoid -> class scores
    out['embedding'][B,E]  policy embedding
    out['tokens'][B,N,D]   encoder output (before the heads)

Box translation prior (translation_mode='patch_offset', default): each token predicts its box centre as an
offset from its patch point = pooled patch depth * K^-1 [u, v, 1] (the 3D analogue of OWL-ViT's per-patch box
bias). For the RGB-only ViT (use_depth=False) there is no depth, so the prior is the patch centre back-projected
at the constant `config.nominal_depth`: the ray direction is exact, the range must be learnt. In 'absolute' mode
(the paper's form) the prior is the constant (0, 0, nominal_depth) for every token, ViT and ViTD alike, and K is
not needed.

Decoding (Gram-Schmidt, quaternions, thresholds, NMS) is NOT done here: see box_ops.py / runtime/postprocess.py.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Optional

import torch
from torch import Tensor, nn

from . import depth_tokens as dt
from .abs_pos import sincos_position_embedding
from .config import ViTDConfig
from .normal_map import surface_normals
from .patch_geometry import PatchGeometryEmbed
from .heads import BoxHead, ClassHead, PolicyHead
from .vit import Encoder, init_weights

CHECKPOINT_FORMAT = 'string_perception.vitd'
CHECKPOINT_VERSION = 1


class ViTD(nn.Module):
    def __init__(self, config: ViTDConfig):
        super().__init__()
        from string_perception.encodings import build_position_encoding

        config.validate()
        self.config = config
        c = config
        D = c.width
        gh, gw = c.grid_size
        N = gh * gw

        self.patch_embed = nn.Conv2d(3, D, kernel_size=c.patch_size, stride=c.patch_size)
        learned_ape = c.abs_pos_embed_kind == 'learned'
        self.pos_embed = nn.Parameter(torch.zeros(1, N, D)) if learned_ape else None   # [1,N,D]
        # ViTD: the fraction of valid depth pixels of each patch is added to its embedding (w * f + b) so the
        # model can see where depth is missing / filled in.
        self.valid_embed = nn.Linear(1, D) if c.use_depth else None
        # ViTD with patch_geometry: a point encoding of the patch's back-projected pixels and its metric scale.
        self.geometry_embed = (PatchGeometryEmbed(D, c.patch_size, c.depth_range) if c.patch_geometry else None)

        # Normal-map tokens (paper §4.4.2): normals through the shared patch embedding, a learned type embedding
        # telling them from RGB tokens, and a [2D -> D] fuse after the encoder (init: the mean of the two).
        self.normal_type_embed = nn.Parameter(torch.zeros(1, 1, D)) if c.normal_map else None   # [1,1,D]
        self.normal_fuse = nn.Linear(2 * D, D) if c.normal_map else None

        # Learnable coordinate scales. Coordinates unused (encoding 'none' without sin-cos APE): keep them as buffers.
        learn = c.encoding != 'none' or c.abs_pos_embed_kind == 'sincos'
        if c.use_depth and c.coord_mode == 'grid_depth':
            self._coord_scale('depth_scale', torch.tensor(float(c.depth_scale_init)), learn)        # a, scalar
        elif c.use_depth and c.coord_mode == 'camera_xyz':
            self._coord_scale('xyz_scale', torch.full((3,), float(c.xyz_scale_init)), learn)        # [3]

        self.register_buffer('pixel_mean', torch.tensor(c.mean).view(1, 3, 1, 1) * 255.0, persistent=False)
        self.register_buffer('pixel_std', torch.tensor(c.std).view(1, 3, 1, 1) * 255.0, persistent=False)
        self.register_buffer('grid_rc', dt.grid_rows_cols((gh, gw)), persistent=False)             # [N,2]
        self.register_buffer('patch_uv', dt.patch_centres((gh, gw), c.patch_size), persistent=False)  # [N,2]

        def make_pe(_layer: int) -> nn.Module:
            return build_position_encoding(c.encoding, head_dim=c.head_dim, num_heads=c.num_heads,
                                           coord_dim=c.coord_dim, shared_across_heads=c.shared_across_heads,
                                           **c.encoding_kwargs)

        self.encoder = Encoder(D, c.depth, c.num_heads, c.mlp_ratio, make_pe=make_pe)
        self.box_head = BoxHead(D, size_prior=c.size_prior)
        self.class_head = ClassHead(D, c.class_embed_dim, c.num_classes, prior_prob=c.class_prior_prob)
        self.policy_head = PolicyHead(D, c.embed_dim, pool=c.policy_pool)
        self._init_weights()

    def _coord_scale(self, name: str, value: Tensor, learnable: bool) -> None:
        if learnable:
            setattr(self, name, nn.Parameter(value))
        else:
            self.register_buffer(name, value)

    def _init_weights(self) -> None:
        # timm init everywhere except inside position encodings (they own their init), then the head priors.
        for name, m in self.named_modules():
            if 'pe' not in name.split('.'):
                init_weights(m)
        w = self.patch_embed.weight
        nn.init.trunc_normal_(w.view(w.shape[0], -1), std=0.02)
        nn.init.zeros_(self.patch_embed.bias)
        if self.pos_embed is not None:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.box_head.reset_last_layer()
        self.class_head.reset_bias()
        if self.normal_fuse is not None:
            with torch.no_grad():
                eye = 0.5 * torch.eye(self.config.width)
                self.normal_fuse.weight.copy_(torch.cat([eye, eye], dim=1))   # [D, 2D]: (rgb + normal) / 2
                self.normal_fuse.bias.zero_()

    # ------------------------------------------------------------------ pieces (each usable on its own)
    def embed(self, image: Tensor) -> Tensor:
        """uint8[B,H,W,3] RGB -> normalised patch embeddings [B,N,D]."""
        x = image.permute(0, 3, 1, 2).to(self.pixel_mean.dtype)               # [B,3,H,W] 0..255
        x = (x - self.pixel_mean) / self.pixel_std
        return self._patchify(x)

    def _patchify(self, x: Tensor) -> Tensor:
        """[B,3,H,W] -> [B,N,D] through the (shared) patch embedding."""
        x = self.patch_embed(x)                                                # [B,D,gh,gw]
        D, N = dt.static_size(x, 1), dt.static_size(x, 2) * dt.static_size(x, 3)
        return x.reshape(-1, D, N).transpose(1, 2)                             # [B,N,D]

    def embed_normals(self, depth: Tensor, K: Tensor) -> Tensor:
        """Surface-normal tokens [B,N,D]: unit normals in [-1, 1] (0 in holes) through the RGB patch embedding."""
        normals = surface_normals(depth, K, self.config.depth_range)          # [B,3,H,W]
        return self._patchify(normals) + self.normal_type_embed

    def camera_coordinates(self, points: Tensor) -> Tensor:
        """'camera_xyz' token coordinates of camera points [B,N,3] (metres): the configured canonical-coordinate
        transform (Lie-group STRING; identity by default), then the learnable per-axis scale."""
        from string_perception.encodings import canonical_coordinates
        return dt.camera_xyz_coordinates(canonical_coordinates(self.config.coord_transform, points), self.xyz_scale)

    def fuse_tokens(self, tokens: Tensor) -> Tensor:
        """Encoder output [B,N,D] (or [B,2N,D] with normal tokens: split and fused) -> [B,N,D]."""
        if self.normal_fuse is None:
            return tokens
        rgb, normal = tokens.chunk(2, dim=1)                                   # [B,N,D] x2
        return self.normal_fuse(torch.cat([rgb, normal], dim=-1))              # [B,N,D]

    def tokenize(self, image: Tensor, depth: Optional[Tensor] = None, K: Optional[Tensor] = None
                 ) -> dict[str, Tensor]:
        """Token embeddings, coordinates and box priors before the encoder.

        Returns x[B,N,D], coords[B,N,dc], prior[B,N,3] (or [1,1,3] in absolute mode) and, for ViTD,
        depth[B,N] (filled pooled depth, metres), valid[B,N] (valid-pixel fraction), points[B,N,3].
        With normal_map, x and coords are [B,2N,D] / [B,2N,dc]: RGB tokens, then normal tokens at the same
        coordinates with the same per-patch additions (valid fraction, absolute position embedding).
        """

        c = self.config
        self._check_inputs(image, depth, K)
        x = self.embed(image)                                                  # [B,N,D]
        B = x.shape[0]
        out: dict[str, Tensor] = {}
        xn = self.embed_normals(depth.to(x.dtype), K.to(x.dtype)) if c.normal_map else None   # [B,N,D]
        if c.use_depth:
            tok = dt.tokens_from_depth(depth.to(x.dtype), K.to(x.dtype), c.patch_size, c.depth_range, c.depth_fill)
            valid_term = self.valid_embed(tok.valid.unsqueeze(-1))             # [B,N,D]
            if self.geometry_embed is not None:
                valid_term = valid_term + self.geometry_embed(depth.to(x.dtype), K.to(x.dtype), tok)   # [B,N,D]
            x = x + valid_term
            xn = None if xn is None else xn + valid_term
            if c.coord_mode == 'grid_depth':
                coords = dt.grid_depth_coordinates(self.grid_rc, tok.depth, self.depth_scale)   # [B,N,3]
            else:
                coords = self.camera_coordinates(tok.points)                                    # [B,N,3]
            out.update(depth=tok.depth, valid=tok.valid, points=tok.points)
            patch_prior = tok.points                                           # [B,N,3]
        else:
            coords = dt.grid_coordinates(self.grid_rc, B)                      # [B,N,2]
            patch_prior = None
        ape = self.pos_embed
        if c.abs_pos_embed_kind == 'sincos':
            ape = sincos_position_embedding(coords.to(x.dtype), c.width)       # [B,N,D]
        if ape is not None:
            x = x + ape
            xn = None if xn is None else xn + ape
        if xn is not None:
            x = torch.cat([x, xn], dim=1)                                      # [B,2N,D]
            coords = torch.cat([coords, coords], dim=1)                        # [B,2N,dc]
        if c.translation_mode == 'absolute':
            prior = x.new_tensor([0.0, 0.0, c.nominal_depth]).view(1, 1, 3)   # [1,1,3]
        elif patch_prior is not None:
            prior = patch_prior
        else:  # RGB ViT: patch centre ray at the nominal depth
            nominal = x.new_full((B, self.grid_rc.shape[0]), c.nominal_depth)  # [B,N]
            prior = dt.backproject(nominal, self.patch_uv.to(x.dtype), K.to(x.dtype))   # [B,N,3]
        out.update(x=x, coords=coords.to(x.dtype), prior=prior)
        return out

    def heads(self, tokens: Tensor, prior: Tensor) -> dict[str, Tensor]:
        return dict(boxes=self.box_head(tokens, prior),                        # [B,N,12]
                    logits=self.class_head(tokens),                            # [B,N,C]
                    embedding=self.policy_head(tokens))                        # [B,E]

    def forward(self, image: Tensor, depth: Optional[Tensor] = None, K: Optional[Tensor] = None,
                return_aux: bool = False) -> dict[str, Tensor]:
        """image uint8[B,H,W,3] RGB; depth float32[B,H,W] metres (0/NaN/inf/out-of-range invalid; ignored by
        the ViT); K float32[B,3,3] intrinsics of this H x W image (unused only by a ViT in 'absolute' mode).

        Returns boxes[B,N,12], logits[B,N,C], embedding[B,E], tokens[B,N,D]; with return_aux also
        coords[B,N,dc], prior[B,N,3] and (ViTD) depth[B,N], valid[B,N], points[B,N,3].
        """
        t = self.tokenize(image, depth, K)
        tokens = self.fuse_tokens(self.encoder(t['x'], t['coords']))           # [B,N,D]
        out = self.heads(tokens, t['prior'])
        out['tokens'] = tokens
        if return_aux:
            out.update({k: v for k, v in t.items() if k != 'x'})
        return out

    def _check_inputs(self, image: Tensor, depth: Optional[Tensor], K: Optional[Tensor]) -> None:
        # Static checks only (ranks, H, W, dtypes): nothing here depends on tensor values. Skipped while the
        # TorchScript tracer runs (shapes are symbolic there and the checks passed on the example inputs).
        if torch.jit.is_tracing():
            return
        c = self.config
        H, W = c.image_size
        if image.dim() != 4 or tuple(image.shape[1:]) != (H, W, 3):
            raise ValueError(f'image must be uint8 [B,{H},{W},3] RGB, got shape {tuple(image.shape)}')
        if image.dtype != torch.uint8:
            raise ValueError(f'image must be uint8 (0..255 RGB), got {image.dtype}')
        needs_k = c.use_depth or c.normal_map or c.translation_mode == 'patch_offset'
        if c.use_depth or c.normal_map:
            if depth is None or depth.dim() != 3 or tuple(depth.shape[1:]) != (H, W):
                got = None if depth is None else tuple(depth.shape)
                raise ValueError(f'depth must be float metres [B,{H},{W}], got {got}')
            if not depth.is_floating_point():
                raise ValueError(f'depth must be float metres (convert 16UC1 millimetres first), got {depth.dtype}')
        if needs_k and (K is None or K.dim() != 3 or tuple(K.shape[1:]) != (3, 3)):
            raise ValueError(f'K must be [B,3,3] (intrinsics of the {H}x{W} input), got '
                             f'{None if K is None else tuple(K.shape)}')

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(config: ViTDConfig | dict) -> ViTD:
    if isinstance(config, dict):
        config = ViTDConfig.from_dict(config)
    return ViTD(config)


def save_checkpoint(path: str | os.PathLike, model: ViTD, config: Optional[ViTDConfig] = None,
                    extra: Optional[dict[str, Any]] = None) -> None:
    """torch.save {'format', 'version', 'config': plain dict, 'model': state_dict, **extra}, atomically.

    `extra` (step, optimizer state, metrics, ...) must hold only tensors and plain Python types so the file loads
    with torch.load(weights_only=True).
    """
    config = config if config is not None else model.config
    ckpt: dict[str, Any] = {'format': CHECKPOINT_FORMAT, 'version': CHECKPOINT_VERSION,
                            'config': config.to_dict(), 'model': model.state_dict()}
    for k, v in (extra or {}).items():
        if k in ckpt:
            raise ValueError(f'save_checkpoint: extra key {k!r} would overwrite a reserved key')
        ckpt[k] = v
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    # torch's zip writer derives the archive name from the file name: keep it non-empty (no leading dot).
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + '.', suffix='.tmp', dir=d)
    os.close(fd)
    try:
        torch.save(ckpt, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = 'cpu'
                    ) -> tuple[ViTD, ViTDConfig, dict[str, Any]]:
    """Load with torch.load(weights_only=True) (no pickled classes). Returns (model in eval mode, config, raw dict)."""
    ckpt = torch.load(os.fspath(path), map_location=map_location, weights_only=True)
    if not isinstance(ckpt, dict) or 'config' not in ckpt or 'model' not in ckpt:
        raise ValueError(f'{path}: not a ViTD checkpoint (needs "config" and "model" keys)')
    if ckpt.get('format', CHECKPOINT_FORMAT) != CHECKPOINT_FORMAT:
        raise ValueError(f'{path}: checkpoint format {ckpt.get("format")!r}, expected {CHECKPOINT_FORMAT!r}')
    config = ViTDConfig.from_dict(ckpt['config'])
    model = ViTD(config)
    model.load_state_dict(ckpt['model'], strict=True)
    model.to(map_location).eval()
    return model, config, ckpt

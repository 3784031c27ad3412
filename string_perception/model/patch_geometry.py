"""What a ViTD token knows about its patch's 3D points beyond the mean depth (``ViTDConfig.patch_geometry``).

STRING (like RoPE) only sees coordinate DIFFERENCES between tokens, and the RGB patch embedding sees no depth, so
without this a token cannot tell how far away it is, how many metres its patch spans or how the surface bends
inside it -- and a metric box size is exactly pixel extent x depth / focal length. This module adds to every token:

* a tiny point encoder of the patch's back-projected pixels: the points ``d * K^-1 [u, v, 1]`` of the valid pixels,
  relative to the patch point (``depth_tokens.tokens_from_depth``), in units of ``1 / point_scale`` metres and
  clamped to +-``clamp``, plus the valid-pixel mask, through a ``p x p`` stride-``p`` convolution (the patch
  embedding of a 4-channel "geometry image");
* a linear embedding of two per-patch scalars: ``log`` of the pooled depth and ``log`` of the metric width of one
  patch at that depth (``p * d / fx``).

Only ops that export to ONNX (conv, interpolate, log, where, clamp).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import depth_tokens as dt


def pixel_grid(height: int, width: int, *, device=None, dtype=torch.float32) -> Tensor:
    """[H*W, 2] pixel coordinates (u, v) = (column, row), row-major."""
    v, u = torch.meshgrid(torch.arange(height, device=device, dtype=dtype),
                          torch.arange(width, device=device, dtype=dtype), indexing='ij')   # [H,W] x2
    return torch.stack([u.reshape(-1), v.reshape(-1)], dim=-1)                             # [HW,2]


def geometry_image(depth: Tensor, K: Tensor, patch_points: Tensor, patch_size: int,
                   depth_range: tuple[float, float], point_scale: float, clamp: float) -> Tensor:
    """``depth`` [B,H,W] metres, ``K`` [B,3,3], ``patch_points`` [B,N,3] -> [B,4,H,W]: per pixel its 3D point minus
    its patch's point (times ``point_scale``, clamped) and the valid mask; invalid pixels are all zero."""
    H, W = dt.static_size(depth, 1), dt.static_size(depth, 2)
    gh, gw = H // patch_size, W // patch_size
    valid = dt.valid_depth_mask(depth, depth_range)                                         # [B,H,W] bool
    d = torch.where(valid, depth, 0.0).reshape(-1, H * W)                                   # [B,HW]
    uv = pixel_grid(H, W, device=depth.device, dtype=depth.dtype)                          # [HW,2]
    pts = dt.backproject(d, uv, K).transpose(1, 2).reshape(-1, 3, H, W)                    # [B,3,H,W]
    centre = patch_points.transpose(1, 2).reshape(-1, 3, gh, gw)                            # [B,3,gh,gw]
    centre = F.interpolate(centre, scale_factor=float(patch_size), mode='nearest')         # [B,3,H,W]
    rel = ((pts - centre) * point_scale).clamp(-clamp, clamp)                               # [B,3,H,W]
    v = valid.unsqueeze(1).to(depth.dtype)                                                  # [B,1,H,W]
    return torch.cat([rel * v, v], dim=1)                                                   # [B,4,H,W]


class PatchGeometryEmbed(nn.Module):
    """``forward(depth[B,H,W], K[B,3,3], tokens: DepthTokens) -> [B,N,D]`` added to the token embeddings."""

    def __init__(self, dim: int, patch_size: int, depth_range: tuple[float, float], point_scale: float = 10.0,
                 clamp: float = 3.0):
        super().__init__()
        self.patch_size, self.depth_range = int(patch_size), tuple(depth_range)
        self.point_scale, self.clamp = float(point_scale), float(clamp)
        self.points = nn.Conv2d(4, dim, kernel_size=patch_size, stride=patch_size)
        self.scalars = nn.Linear(2, dim)

    def forward(self, depth: Tensor, K: Tensor, tok: dt.DepthTokens) -> Tensor:
        g = geometry_image(depth, K, tok.points, self.patch_size, self.depth_range, self.point_scale,
                           self.clamp)                                                      # [B,4,H,W]
        x = self.points(g)                                                                  # [B,D,gh,gw]
        x = x.reshape(-1, dt.static_size(x, 1), dt.static_size(x, 2) * dt.static_size(x, 3)).transpose(1, 2)  # [B,N,D]
        fx = K[:, 0, 0].unsqueeze(1)                                                        # [B,1]
        log_d = torch.log(tok.depth)                                                        # [B,N]
        log_w = log_d + torch.log(self.patch_size / fx)                                     # [B,N] metres per patch
        return x + self.scalars(torch.stack([log_d, log_w], dim=-1))                        # [B,N,D]


__all__ = ['pixel_grid', 'geometry_image', 'PatchGeometryEmbed']

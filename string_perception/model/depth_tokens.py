"""Depth -> per-patch depth, validity, 3D points and token coordinates (docs/DESIGN.md §3). Pure functions.

Everything here is written with ops that export to ONNX and run on the GPU inside the exported graph:
comparisons, where, avg_pool2d / conv2d, sort and gather -- no data-dependent Python control flow, no nonzero,
no boolean indexing, no matrix inverse (K^-1 is applied in closed form).

Conventions: patches are numbered row-major (token n = row * gw + col). Pixel (u, v) = (column, row) with
integer values at pixel centres, as ROS / OpenCV intrinsics use them, so the centre of patch (row, col) is
u = col * p + (p - 1) / 2, v = row * p + (p - 1) / 2. K is the 3x3 intrinsics of the image the patches are cut
from (i.e. already rescaled to the model input size). Depth is z-depth in metres.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor


class DepthTokens(NamedTuple):
    depth: Tensor      # [B, N] pooled z-depth per patch in metres, holes filled (always finite, > 0)
    valid: Tensor      # [B, N] fraction of valid pixels in the patch, in [0, 1]
    points: Tensor     # [B, N, 3] patch centre back-projected at `depth`, metres, camera optical frame


def valid_depth_mask(depth: Tensor, depth_range: tuple[float, float]) -> Tensor:
    """bool[B,H,W]: min < d < max. NaN, +-inf, 0 and negatives fail the comparisons (min >= 0)."""
    lo, hi = float(depth_range[0]), float(depth_range[1])
    return (depth > lo) & (depth < hi)


def pool_depth(depth: Tensor, patch_size: int, depth_range: tuple[float, float]) -> tuple[Tensor, Tensor]:
    """Mean depth over the VALID pixels of each patch.

    depth: float[B,H,W] metres (H, W multiples of patch_size).
    Returns (pooled[B,gh,gw], valid_frac[B,gh,gw]); pooled is 0 where a patch has no valid pixel.
    """
    valid = valid_depth_mask(depth, depth_range)                         # [B,H,W] bool
    d = torch.where(valid, depth, torch.zeros_like(depth))               # [B,H,W] invalid -> 0 (NaN removed)
    v = valid.to(depth.dtype)
    mean_d = F.avg_pool2d(d.unsqueeze(1), patch_size, patch_size)        # [B,1,gh,gw] sum(d valid) / p^2
    frac = F.avg_pool2d(v.unsqueeze(1), patch_size, patch_size)          # [B,1,gh,gw] count(valid) / p^2
    pooled = torch.where(frac > 0, mean_d / frac.clamp_min(1e-12), torch.zeros_like(mean_d))
    return pooled.squeeze(1), frac.squeeze(1)                            # [B,gh,gw] x2


def fill_missing(pooled: Tensor, has: Tensor, default: float) -> Tensor:
    """Fill patches without valid depth: masked 3x3 neighbour mean, else frame median of valid patches,
    else `default`.

    pooled: float[B,gh,gw]; has: bool[B,gh,gw] (patch has >= 1 valid pixel). Returns float[B,gh,gw].
    """
    B, gh, gw = pooled.shape
    hasf = has.to(pooled.dtype)
    ones = torch.ones(1, 1, 3, 3, dtype=pooled.dtype, device=pooled.device)
    num = F.conv2d((pooled * hasf).unsqueeze(1), ones, padding=1).squeeze(1)   # [B,gh,gw] sum of valid nbrs
    den = F.conv2d(hasf.unsqueeze(1), ones, padding=1).squeeze(1)              # [B,gh,gw] count of valid nbrs
    neighbour = num / den.clamp_min(1.0)
    # Frame median of valid patches (lower median): sort with invalid -> +inf, pick index (count-1)//2.
    flat = torch.where(has, pooled, torch.full_like(pooled, float('inf'))).reshape(B, gh * gw)   # [B,N]
    srt, _ = torch.sort(flat, dim=1)                                                             # [B,N]
    count = has.reshape(B, gh * gw).sum(dim=1, keepdim=True)                                     # [B,1] int
    k = torch.div((count - 1).clamp_min(0), 2, rounding_mode='floor')                            # [B,1]
    median = torch.gather(srt, 1, k)                                                             # [B,1]
    median = torch.where(count > 0, median, torch.full_like(median, float(default)))             # [B,1]
    fallback = median.reshape(B, 1, 1).expand(B, gh, gw)                                         # [B,gh,gw]
    out = torch.where(den > 0, neighbour, fallback)
    return torch.where(has, pooled, out)


def patch_centres(grid_size: tuple[int, int], patch_size: int, *, device=None, dtype=torch.float32) -> Tensor:
    """[N,2] pixel coordinates (u, v) of each patch centre, row-major."""
    gh, gw = grid_size
    rows, cols = grid_rows_cols(grid_size, device=device, dtype=dtype).unbind(-1)   # [N] x2
    half = (patch_size - 1) / 2.0
    return torch.stack([cols * patch_size + half, rows * patch_size + half], dim=-1)  # [N,2] (u, v)


def grid_rows_cols(grid_size: tuple[int, int], *, device=None, dtype=torch.float32) -> Tensor:
    """[N,2] (row, col) of each patch in patch units, row-major. The ViT's 2D token coordinates."""
    gh, gw = grid_size
    r = torch.arange(gh, device=device, dtype=dtype)
    c = torch.arange(gw, device=device, dtype=dtype)
    rr, cc = torch.meshgrid(r, c, indexing='ij')                           # [gh,gw] x2
    return torch.stack([rr.reshape(-1), cc.reshape(-1)], dim=-1)           # [N,2]


def backproject(depth: Tensor, uv: Tensor, K: Tensor) -> Tensor:
    """points = depth * K^-1 [u, v, 1]^T in closed form (K upper triangular, skew allowed).

    depth: [B,N] metres; uv: [N,2] or [B,N,2] pixels; K: [B,3,3]. Returns [B,N,3].
    """
    fx, s, cx = K[:, 0, 0:1], K[:, 0, 1:2], K[:, 0, 2:3]                  # [B,1] each
    fy, cy = K[:, 1, 1:2], K[:, 1, 2:3]
    u, v = uv[..., 0], uv[..., 1]                                          # [N] or [B,N]
    y = (v - cy) / fy                                                      # [B,N]
    x = (u - cx - s * y) / fx                                              # [B,N]
    return depth.unsqueeze(-1) * torch.stack([x, y, torch.ones_like(x)], dim=-1)   # [B,N,3]


def tokens_from_depth(depth: Tensor, K: Tensor, patch_size: int, depth_range: tuple[float, float],
                 fill: float) -> DepthTokens:
    """Pool depth per patch over valid pixels, fill holes, back-project patch centres.

    depth: float[B,H,W] metres; K: float[B,3,3] for this H x W.
    """
    B, H, W = depth.shape
    grid = (H // patch_size, W // patch_size)
    pooled, frac = pool_depth(depth, patch_size, depth_range)             # [B,gh,gw] x2
    filled = fill_missing(pooled, frac > 0, fill)                          # [B,gh,gw]
    d = filled.reshape(B, grid[0] * grid[1])                               # [B,N]
    uv = patch_centres(grid, patch_size, device=depth.device, dtype=depth.dtype)   # [N,2]
    points = backproject(d, uv, K.to(depth.dtype))                         # [B,N,3]
    return DepthTokens(d, frac.reshape(B, -1), points)


def grid_depth_coordinates(grid_rc: Tensor, depth: Tensor, scale: Tensor) -> Tensor:
    """'grid_depth' coordinates (row, col, a*d). grid_rc: [N,2]; depth: [B,N]; scale a: scalar tensor.

    Returns [B,N,3].
    """
    B, N = depth.shape
    rc = grid_rc.to(depth.dtype).unsqueeze(0).expand(B, N, 2)             # [B,N,2]
    return torch.cat([rc, (scale * depth).unsqueeze(-1)], dim=-1)         # [B,N,3]


def camera_xyz_coordinates(points: Tensor, scale: Tensor) -> Tensor:
    """'camera_xyz' coordinates: back-projected points [B,N,3] (metres) times a per-axis scale [3]."""
    return points * scale                                                  # [B,N,3]


def grid_coordinates(grid_rc: Tensor, batch: int) -> Tensor:
    """'grid' coordinates (row, col) for the RGB ViT: [N,2] -> [B,N,2]."""
    return grid_rc.unsqueeze(0).expand(batch, grid_rc.shape[0], 2)

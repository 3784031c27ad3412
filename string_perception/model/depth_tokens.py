"""Depth -> per-patch depth, validity, 3D points and token coordinates (docs/DESIGN.md §3). Pure functions.

Everything here is written with ops that export to ONNX and run on the GPU inside the exported graph:
comparisons, where, avg_pool2d / conv2d, sort and gather -- no data-dependent Python control flow, no nonzero,
no boolean indexing, no matrix inverse (K^-1 is applied in closed form). Only the batch size is dynamic in the exported graph: spatial
sizes are read as Python ints (``static_size``) and reshapes use -1 for the batch, so the exporter writes constant
shapes and no Shape/Gather/Concat chains.

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


def static_size(t: Tensor, dim: int) -> int:
    """``t.shape[dim]`` as a plain Python int, also while the ONNX tracer runs (where the exporter would otherwise
    record Shape -> Gather nodes); use it for every size except the (dynamic) batch."""
    return int(t.shape[dim])


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
    d = torch.where(valid, depth, 0.0)                                   # [B,H,W] invalid -> 0 (NaN removed)
    v = valid.to(depth.dtype)
    mean_d = F.avg_pool2d(d.unsqueeze(1), patch_size, patch_size)        # [B,1,gh,gw] sum(d valid) / p^2
    frac = F.avg_pool2d(v.unsqueeze(1), patch_size, patch_size)          # [B,1,gh,gw] count(valid) / p^2
    pooled = torch.where(frac > 0, mean_d / frac.clamp_min(1e-12), 0.0)
    return pooled.squeeze(1), frac.squeeze(1)                            # [B,gh,gw] x2


def fill_missing(pooled: Tensor, has: Tensor, default: float) -> Tensor:
    """Fill patches without valid depth: masked 3x3 neighbour mean, else frame median of valid patches,
    else `default`.

    pooled: float[B,gh,gw]; has: bool[B,gh,gw] (patch has >= 1 valid pixel). Returns float[B,gh,gw].
    """
    gh, gw = static_size(pooled, 1), static_size(pooled, 2)
    hasf = has.to(pooled.dtype)
    ones = torch.ones(1, 1, 3, 3, dtype=pooled.dtype, device=pooled.device)
    num = F.conv2d((pooled * hasf).unsqueeze(1), ones, padding=1).squeeze(1)   # [B,gh,gw] sum of valid nbrs
    den = F.conv2d(hasf.unsqueeze(1), ones, padding=1).squeeze(1)              # [B,gh,gw] count of valid nbrs
    neighbour = num / den.clamp_min(1.0)
    # Frame median of valid patches (lower median): sort with invalid -> +inf, pick index (count-1)//2.
    flat = torch.where(has, pooled, float('inf')).reshape(-1, gh * gw)                           # [B,N]
    # ascending sort as topk of all N (the same values; sort would export k as a Shape -> Gather of the batch)
    srt, _ = torch.topk(flat, gh * gw, dim=1, largest=False, sorted=True)                        # [B,N]
    count = has.reshape(-1, gh * gw).sum(dim=1, keepdim=True)                                     # [B,1] int
    k = torch.div((count - 1).clamp_min(0), 2, rounding_mode='floor')                            # [B,1]
    median = torch.gather(srt, 1, k)                                                             # [B,1]
    median = torch.where(count > 0, median, float(default))                                      # [B,1]
    fallback = median.reshape(-1, 1, 1)                                                          # [B,1,1]
    out = torch.where(den > 0, neighbour, fallback)                                              # [B,gh,gw]
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
    return torch.stack([depth * x, depth * y, depth], dim=-1)             # [B,N,3] = d * [x, y, 1]


def tokens_from_depth(depth: Tensor, K: Tensor, patch_size: int, depth_range: tuple[float, float],
                 fill: float) -> DepthTokens:
    """Pool depth per patch over valid pixels, fill holes, back-project patch centres.

    depth: float[B,H,W] metres; K: float[B,3,3] for this H x W.
    """
    grid = (static_size(depth, 1) // patch_size, static_size(depth, 2) // patch_size)
    pooled, frac = pool_depth(depth, patch_size, depth_range)             # [B,gh,gw] x2
    filled = fill_missing(pooled, frac > 0, fill)                          # [B,gh,gw]
    d = filled.reshape(-1, grid[0] * grid[1])                              # [B,N]
    uv = patch_centres(grid, patch_size, device=depth.device, dtype=depth.dtype)   # [N,2]
    points = backproject(d, uv, K.to(depth.dtype))                         # [B,N,3]
    return DepthTokens(d, frac.reshape(-1, grid[0] * grid[1]), points)


def grid_depth_coordinates(grid_rc: Tensor, depth: Tensor, scale: Tensor) -> Tensor:
    """'grid_depth' coordinates (row, col, a*d). grid_rc: [N,2]; depth: [B,N]; scale a: scalar tensor.

    Returns [B,N,3].
    """
    # (row, col, 0) + (0, 0, 1) * a*d: the same numbers as concatenating (exact: x + 0 = x, 0 * finite = 0) with
    # no batch-sized expand (a Shape -> Expand chain of the dynamic batch in the exported graph)
    rc0 = F.pad(grid_rc.to(depth.dtype), (0, 1))                           # [N,3] (row, col, 0)
    e_z = torch.tensor([0.0, 0.0, 1.0], dtype=depth.dtype, device=depth.device)   # [3]
    return rc0 + (scale * depth).unsqueeze(-1) * e_z                       # [B,N,3]


def camera_xyz_coordinates(points: Tensor, scale: Tensor) -> Tensor:
    """'camera_xyz' coordinates: back-projected points [B,N,3] (metres) times a per-axis scale [3]."""
    return points * scale                                                  # [B,N,3]


def grid_coordinates(grid_rc: Tensor, batch: int) -> Tensor:
    """'grid' coordinates (row, col) for the RGB ViT: [N,2] -> [B,N,2]."""
    return grid_rc.unsqueeze(0).expand(batch, grid_rc.shape[0], 2)

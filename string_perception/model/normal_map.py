"""Surface normals from a depth image ([STRING] §4.4.2, "implicit depth via normal maps"), in torch.

    surface_normals(depth[B,H,W] metres, K[B,3,3], depth_range) -> normals[B,3,H,W]

Every pixel is back-projected (P = d · K^-1 [u, v, 1], camera optical frame); the tangents along image columns
(u) and rows (v) are differences to the neighbours, and n = −(t_u × t_v) / ‖·‖ faces the camera (a
fronto-parallel plane gives (0, 0, −1)). Robust to holes and edges:
  - a difference is used only when both of its pixels have valid depth (depth_tokens.valid_depth_mask);
  - both sides valid: the central difference (second-order accurate) when the two one-sided depth changes are
    within a factor EDGE_RATIO of each other, else the side with the smaller depth change (at a depth step that
    is the side on the same surface); one side valid: that side;
  - a pixel with no valid difference along u or v (hole, or isolated) gets the zero vector, never NaN.
Only slicing, where, arithmetic and sqrt: exports to ONNX and runs on the GPU inside the graph.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .depth_tokens import backproject, static_size, valid_depth_mask

__all__ = ['EDGE_RATIO', 'pixel_points', 'surface_normals']

EDGE_RATIO = 2.0   # one-sided depth changes differing by more than this factor mark a depth edge


def pixel_points(depth: Tensor, K: Tensor) -> Tensor:
    """[B,3,H,W] back-projected point of every pixel (u = column, v = row, pixel centres at integers)."""
    H, W = static_size(depth, 1), static_size(depth, 2)
    v, u = torch.meshgrid(torch.arange(H, device=depth.device, dtype=depth.dtype),
                          torch.arange(W, device=depth.device, dtype=depth.dtype), indexing='ij')   # [H,W] x2
    uv = torch.stack([u.reshape(-1), v.reshape(-1)], dim=-1)                                         # [HW,2]
    points = backproject(depth.reshape(-1, H * W), uv, K.to(depth.dtype))                           # [B,HW,3]
    return points.transpose(1, 2).reshape(-1, 3, H, W)


def _tangent(points: Tensor, valid: Tensor, dim: int) -> Tensor:
    """Edge-aware one-sided difference of points [B,3,H,W] along `dim` (-1: u, -2: v); 0 where undefined."""
    n = points.shape[dim]
    diff = points.narrow(dim, 1, n - 1) - points.narrow(dim, 0, n - 1)              # P[i+1] - P[i]
    ok = valid.narrow(dim, 1, n - 1) & valid.narrow(dim, 0, n - 1)                  # [B,1,...]
    zeros, no = torch.zeros_like(points.narrow(dim, 0, 1)), torch.zeros_like(valid.narrow(dim, 0, 1))
    fwd, fwd_ok = torch.cat([diff, zeros], dim), torch.cat([ok, no], dim)           # P[i+1] - P[i]
    bwd, bwd_ok = torch.cat([zeros, diff], dim), torch.cat([no, ok], dim)           # P[i] - P[i-1]
    dz_f, dz_b = fwd[:, 2:3].abs(), bwd[:, 2:3].abs()                               # [B,1,...] depth changes
    smooth = (dz_f <= EDGE_RATIO * dz_b) & (dz_b <= EDGE_RATIO * dz_f)
    one_sided = torch.where((dz_f <= dz_b) & fwd_ok | ~bwd_ok, fwd, bwd)            # smaller change, or the valid one
    tangent = torch.where(fwd_ok & bwd_ok & smooth, 0.5 * (fwd + bwd), one_sided)
    return torch.where(fwd_ok | bwd_ok, tangent, torch.zeros_like(fwd))


def surface_normals(depth: Tensor, K: Tensor, depth_range: tuple[float, float]) -> Tensor:
    """Unit normals [B,3,H,W] (x, y, z in the camera optical frame, facing the camera), 0 where undefined.

    depth: float[B,H,W] metres (0 / NaN / inf / outside depth_range invalid); K: [B,3,3] for this H x W."""
    valid = valid_depth_mask(depth, depth_range).unsqueeze(1)                        # [B,1,H,W] bool
    d = torch.where(valid.squeeze(1), depth, torch.zeros_like(depth))                # NaN removed
    points = pixel_points(d, K)                                                      # [B,3,H,W]
    tu, tv = _tangent(points, valid, -1), _tangent(points, valid, -2)               # [B,3,H,W] x2
    ux, uy, uz = tu.unbind(1)
    vx, vy, vz = tv.unbind(1)
    n = -torch.stack([uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx], dim=1)   # −(t_u × t_v)
    norm = torch.sqrt((n * n).sum(dim=1, keepdim=True))                              # [B,1,H,W]
    return torch.where(norm > 0, n / norm.clamp_min(1e-30), torch.zeros_like(n))

"""Depth pooling over valid pixels, hole filling, back-projection (model/depth_tokens.py)."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.model import depth_tokens as dt  # noqa: E402

RANGE = (0.05, 10.0)


def test_invalid_pixels_do_not_change_pooled_depth():
    g = torch.Generator().manual_seed(0)
    depth = 0.5 + 2.0 * torch.rand(1, 8, 8, generator=g, dtype=torch.float64)   # 2x2 patches of 4x4
    ref, frac = dt.pool_depth(depth, 4, RANGE)
    assert torch.all(frac == 1)
    bad = depth.clone()
    invalid = [(0, 0, float('nan')), (0, 1, 0.0), (1, 0, float('inf')), (1, 1, -1.0),
               (2, 2, float('-inf')), (3, 3, 25.0), (2, 3, 0.01)]    # 25 m and 1 cm are out of range
    for r, c, v in invalid:
        bad[0, r, c] = v
    pooled, frac = dt.pool_depth(bad, 4, RANGE)
    keep = torch.ones(4, 4, dtype=torch.bool)
    for r, c, _ in invalid:
        keep[r, c] = False
    expect = depth[0, :4, :4][keep].mean()
    assert torch.allclose(pooled[0, 0, 0], expect, rtol=1e-12)
    assert frac[0, 0, 0].item() == pytest.approx(keep.sum().item() / 16)
    assert torch.equal(pooled[0].flatten()[1:], ref[0].flatten()[1:])    # other patches untouched
    # a constant patch stays exactly constant whatever invalid values are mixed in
    const = torch.full((1, 4, 4), 1.25)
    const[0, 0, :3] = torch.tensor([float('nan'), 0.0, float('inf')])
    p, f = dt.pool_depth(const, 4, RANGE)
    assert p.item() == pytest.approx(1.25, abs=1e-6) and f.item() == pytest.approx(13 / 16)


def test_all_invalid_patch_gets_neighbour_fill_and_zero_validity():
    depth = torch.ones(1, 12, 12)                 # 3x3 patches of 4x4
    depth[0, 0:4, :] = 1.0
    depth[0, 4:8, :] = 2.0
    depth[0, 8:12, :] = 3.0
    depth[0, 4:8, 4:8] = float('nan')            # centre patch fully invalid
    depth[0, 5, 5] = 0.0
    K = torch.tensor([[[10.0, 0, 5.5], [0, 10.0, 5.5], [0, 0, 1]]])
    tok = dt.tokens_from_depth(depth, K, 4, RANGE, fill=1.0)
    assert tok.valid.shape == (1, 9) and tok.depth.shape == (1, 9) and tok.points.shape == (1, 9, 3)
    assert tok.valid[0, 4].item() == 0.0
    assert torch.all(tok.valid[0, [0, 1, 2, 3, 5, 6, 7, 8]] == 1)
    # 3x3 masked mean of the 8 valid neighbours: (3*1 + 2*2 + 3*3) / 8 = 2.0
    assert tok.depth[0, 4].item() == pytest.approx(2.0)
    assert torch.isfinite(tok.points).all()


def test_isolated_holes_use_frame_median_then_constant():
    depth = torch.zeros(1, 20, 20)               # 5x5 patches of 4x4, all invalid
    depth[0, 0:4, 0:4] = 1.0                      # patch (0,0)
    depth[0, 0:4, 16:20] = 2.0                    # patch (0,4)
    depth[0, 16:20, 0:4] = 5.0                    # patch (4,0)
    pooled, frac = dt.pool_depth(depth, 4, RANGE)
    filled = dt.fill_missing(pooled, frac > 0, default=7.0)
    assert filled[0, 2, 2].item() == pytest.approx(2.0)          # no valid neighbour -> median of {1, 2, 5}
    assert filled[0, 1, 1].item() == pytest.approx(1.0)          # neighbour of (0,0) only
    assert filled[0, 0, 0].item() == 1.0 and filled[0, 4, 0].item() == 5.0
    # nothing valid at all (second frame of the batch) -> the constant, never NaN
    two = torch.stack([depth[0], torch.full((20, 20), float('nan'))])
    pooled, frac = dt.pool_depth(two, 4, RANGE)
    filled = dt.fill_missing(pooled, frac > 0, default=7.0)
    assert torch.all(filled[1] == 7.0) and torch.all(frac[1] == 0)
    assert filled[0, 2, 2].item() == pytest.approx(2.0)          # batch elements are independent


def test_backproject_matches_inverse_K_and_reprojects_to_patch_centre():
    g = torch.Generator().manual_seed(1)
    K = torch.tensor([[[55.0, 0.7, 30.2], [0, 48.0, 33.1], [0, 0, 1]],
                      [[90.0, 0.0, 31.5], [0, 91.0, 31.5], [0, 0, 1]]], dtype=torch.float64)
    uv = dt.patch_centres((8, 8), 8, dtype=torch.float64)         # [64,2]
    assert uv[0].tolist() == [3.5, 3.5] and uv[9].tolist() == [11.5, 11.5]
    d = 0.3 + 3 * torch.rand(2, 64, generator=g, dtype=torch.float64)
    pts = dt.backproject(d, uv, K)
    hom = torch.cat([uv, torch.ones(64, 1, dtype=torch.float64)], -1)             # [64,3]
    ref = d.unsqueeze(-1) * torch.einsum('bij,nj->bni', torch.linalg.inv(K), hom)
    assert torch.allclose(pts, ref, atol=1e-12)
    proj = torch.einsum('bij,bnj->bni', K, pts)
    assert torch.allclose(proj[..., :2] / proj[..., 2:], uv.expand(2, 64, 2), atol=1e-9)
    assert torch.allclose(pts[..., 2], d)


def test_coordinates():
    rc = dt.grid_rows_cols((2, 3))
    assert rc.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    depth = torch.tensor([[1.0, 2, 3, 4, 5, 6]])
    c = dt.grid_depth_coordinates(rc, depth, torch.tensor(2.0))
    assert c.shape == (1, 6, 3) and c[0, :, 2].tolist() == [2, 4, 6, 8, 10, 12]
    pts = torch.randn(2, 6, 3)
    assert torch.allclose(dt.camera_xyz_coordinates(pts, torch.tensor([1.0, 2, 3])), pts * torch.tensor([1.0, 2, 3]))
    assert dt.grid_coordinates(rc, 4).shape == (4, 6, 2)

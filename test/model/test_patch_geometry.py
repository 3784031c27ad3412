"""Patch geometry tokens (model/patch_geometry.py): known answers on planes, holes, batching and the model wiring."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.model import depth_tokens as dt  # noqa: E402
from string_perception.model.patch_geometry import PatchGeometryEmbed, geometry_image, pixel_grid  # noqa: E402

RANGE = (0.05, 10.0)
H, W, P = 16, 24, 8


def _K(fx=20.0, fy=22.0, cx=11.5, cy=7.5):
    return torch.tensor([[[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]]])


def test_pixel_grid_is_u_v_row_major():
    g = pixel_grid(2, 3)
    assert g.tolist() == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]


def test_fronto_parallel_plane_known_answer():
    d = 2.0
    depth = torch.full((1, H, W), d)
    K = _K()
    tok = dt.tokens_from_depth(depth, K, P, RANGE, 1.0)
    g = geometry_image(depth, K, tok.points, P, RANGE, point_scale=10.0, clamp=100.0)     # [1,4,H,W]
    assert g.shape == (1, 4, H, W)
    # z is constant on the plane; x offset = (u - patch centre u) * d / fx, in decimetres
    assert torch.allclose(g[0, 2], torch.zeros(H, W), atol=1e-5)
    u = torch.arange(W, dtype=torch.float32)
    centre_u = (u // P) * P + (P - 1) / 2
    expect_x = (u - centre_u) * d / 20.0 * 10.0                                          # [W]
    assert torch.allclose(g[0, 0], expect_x.expand(H, W), atol=1e-5)
    v = torch.arange(H, dtype=torch.float32)
    expect_y = (v - ((v // P) * P + (P - 1) / 2)) * d / 22.0 * 10.0
    assert torch.allclose(g[0, 1], expect_y[:, None].expand(H, W), atol=1e-5)
    assert torch.equal(g[0, 3], torch.ones(H, W))


def test_holes_are_zero_and_offsets_are_clamped():
    depth = torch.full((1, H, W), 1.0)
    depth[0, 0:3, 0:4] = 0.0
    depth[0, 5, 5] = float('nan')
    depth[0, 9, 20] = 9.0                                      # a far outlier inside a near patch
    K = _K()
    tok = dt.tokens_from_depth(depth, K, P, RANGE, 1.0)
    g = geometry_image(depth, K, tok.points, P, RANGE, point_scale=10.0, clamp=3.0)
    assert torch.equal(g[0, :, 0:3, 0:4], torch.zeros(4, 3, 4))
    assert torch.equal(g[0, :, 5, 5], torch.zeros(4))
    assert g[0, 2, 9, 20].item() == pytest.approx(3.0)        # 8 m behind the patch point -> clamp
    assert torch.isfinite(g).all()


def test_embed_batched_equals_single_and_depth_scale_reaches_tokens():
    torch.manual_seed(0)
    emb = PatchGeometryEmbed(16, P, RANGE)
    depth = 0.5 + torch.rand(3, H, W)
    K = _K().expand(3, 3, 3).contiguous()
    tok = dt.tokens_from_depth(depth, K, P, RANGE, 1.0)
    out = emb(depth, K, tok)                                                               # [3,N,16]
    for b in range(3):
        tb = dt.DepthTokens(*(x[b:b + 1] for x in tok))
        assert torch.allclose(out[b:b + 1], emb(depth[b:b + 1], K[b:b + 1], tb), atol=1e-6)
    far = dt.tokens_from_depth(2 * depth, K, P, RANGE, 1.0)
    assert (emb(2 * depth, K, far) - out).abs().max() > 1e-4   # absolute scale is visible to the token


def test_model_config_needs_depth_and_tokens_change():
    with pytest.raises(ValueError, match='patch_geometry'):
        ViTDConfig(image_size=(H, W), patch_size=P, width=16, depth=1, num_heads=2, use_depth=False,
                   patch_geometry=True, encoding='none')
    cfg = ViTDConfig(image_size=(H, W), patch_size=P, width=16, depth=1, num_heads=2, class_embed_dim=8,
                     embed_dim=8, patch_geometry=True)
    m = build_model(cfg).eval()
    assert 'geometry_embed.points.weight' in m.state_dict()
    image = torch.randint(0, 256, (1, H, W, 3), dtype=torch.uint8)
    depth = 0.5 + torch.rand(1, H, W)
    with torch.no_grad():
        a = m.tokenize(image, depth, _K())['x']
        b = m.tokenize(image, 1.5 * depth, _K())['x']
    assert (a - b).abs().max() > 1e-5

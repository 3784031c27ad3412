"""The paper's family in the ViTD: absolute-PE baselines (learned, sin-cos 2D/3D), ⊗-STRING, Lie-group STRING
(azimuth/polar canonical coordinates), normal-map depth input (paper §4.4.2) -- config, surface normals, invariance,
and export parity (compiled PyTorch and ONNX Runtime)."""
import math

import numpy as np
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.model.abs_pos import sincos_position_embedding  # noqa: E402
from string_perception.model.normal_map import surface_normals  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::DeprecationWarning')

SMALL = dict(image_size=(32, 48), patch_size=8, width=32, depth=2, num_heads=2, class_embed_dim=16, embed_dim=24)
RANGE = (0.05, 10.0)
FAMILY = {   # name -> config overrides: the rows this issue adds
    'ape_learned_vit': dict(encoding='none', use_depth=False, abs_pos_embed='learned'),
    'ape_sincos_2d': dict(encoding='none', use_depth=False, abs_pos_embed='sincos'),
    'ape_sincos_3d': dict(encoding='none', coord_mode='camera_xyz', abs_pos_embed='sincos'),
    'tensor_product': dict(encoding='tensor_product', encoding_kwargs=dict(num_features=2)),
    'lie_azimuth_polar': dict(encoding='cayley', coord_mode='camera_xyz', coord_transform='azimuth_polar'),
    'nmap_vit': dict(encoding='none', use_depth=False, normal_map=True),
    'nmap_string': dict(encoding='cayley', normal_map=True),
    'patch_geometry': dict(encoding='cayley', patch_geometry=True),
}


def _model(overrides, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    model = build_model(ViTDConfig(**SMALL, **overrides)).to(dtype).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=dtype))
    return model


def _frames(cfg, batch=2, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    H, W = cfg.image_size
    image = torch.randint(0, 256, (batch, H, W, 3), generator=g, dtype=torch.uint8)
    depth = (0.6 + torch.rand(batch, H, W, generator=g)).to(dtype)
    depth[0, 2:9, 3:13] = 0.0
    depth[-1, 20:, 30:] = float('nan')
    K = torch.tensor([[40.0, 0.0, (W - 1) / 2], [0.0, 42.0, (H - 1) / 2], [0.0, 0.0, 1.0]], dtype=dtype)
    return image, depth, K.expand(batch, 3, 3).contiguous()


# ------------------------------------------------------------------------------------------------ config
def test_new_fields_default_to_todays_model():
    """Defaults add no parameter and change no behaviour; a config dict saved before these fields existed loads."""
    cfg = ViTDConfig(**SMALL)
    assert (cfg.coord_transform, cfg.normal_map, cfg.abs_pos_embed) == ('identity', False, None)
    assert cfg.encoder_tokens == cfg.num_tokens
    old = {k: v for k, v in cfg.to_dict().items() if k not in ('coord_transform', 'normal_map')}
    assert ViTDConfig.from_dict(old) == cfg
    for overrides in (dict(encoding='cayley'), dict(encoding='none'), dict(encoding='none', abs_pos_embed=True)):
        names = set(build_model(ViTDConfig(**SMALL, **overrides)).state_dict())
        assert not any('normal' in n for n in names)
        assert ('pos_embed' in names) == (overrides['encoding'] == 'none')


def test_abs_pos_embed_kinds():
    assert ViTDConfig(encoding='none').abs_pos_embed_kind == 'learned'
    assert ViTDConfig(encoding='rope', abs_pos_embed=True).abs_pos_embed_kind == 'learned'
    assert ViTDConfig(encoding='none', abs_pos_embed=False).abs_pos_embed_kind is None
    assert ViTDConfig(encoding='rope').abs_pos_embed_kind is None
    sincos = ViTDConfig(**SMALL, encoding='none', abs_pos_embed='sincos')
    assert sincos.use_abs_pos_embed and ViTDConfig.from_dict(sincos.to_dict()) == sincos
    m = build_model(sincos)
    assert m.pos_embed is None and isinstance(m.depth_scale, torch.nn.Parameter)   # coordinates are used


@pytest.mark.parametrize('bad', [dict(abs_pos_embed='sinusoid'), dict(normal_map='yes'),
                                 dict(coord_transform='spherical', coord_mode='camera_xyz'),
                                 dict(coord_transform='azimuth_polar'),                       # grid_depth
                                 dict(coord_transform='azimuth_polar', use_depth=False),
                                 dict(encoding='tensor')])
def test_bad_family_config_raises(bad):
    with pytest.raises(ValueError):
        ViTDConfig(**bad)


# ------------------------------------------------------------------------------------------------ sin-cos APE
def test_sincos_embedding_values():
    coords = torch.tensor([[[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]], dtype=torch.float64)
    e = sincos_position_embedding(coords, 32)                      # F = 32 // 6 = 5 per axis, 2 zero dims
    assert e.shape == (1, 2, 32)
    assert torch.equal(e[0, 0, :30].reshape(3, 5, 2)[..., 0], torch.zeros(3, 5, dtype=torch.float64))   # sin 0
    assert torch.equal(e[0, 0, :30].reshape(3, 5, 2)[..., 1], torch.ones(3, 5, dtype=torch.float64))    # cos 0
    assert torch.equal(e[..., 30:], torch.zeros(1, 2, 2, dtype=torch.float64))
    axis2 = e[0, 1, 20:30].reshape(5, 2)                          # axis 2 (r = 3), frequency j: 10000^(-j/5)
    omega = 10_000.0 ** (-torch.arange(5, dtype=torch.float64) / 5)
    assert torch.allclose(axis2, torch.stack([(3 * omega).sin(), (3 * omega).cos()], -1))
    with pytest.raises(ValueError, match='dim'):
        sincos_position_embedding(coords, 5)


def test_sincos_3d_ape_follows_depth():
    """3D sin-cos APE is a function of the token coordinates: same image, other depth -> other tokens (the
    encoding is 'none', so this is the only way depth reaches the tokens besides the validity embedding)."""
    m = _model(FAMILY['ape_sincos_3d'])
    image, depth, K = _frames(m.config)
    with torch.no_grad():
        a = m.tokenize(image, depth, K)
        b = m.tokenize(image, depth * 1.5, K)
    ape = sincos_position_embedding(a['coords'], m.config.width)
    valid = m.valid_embed(a['valid'].unsqueeze(-1))
    assert torch.allclose(a['x'], m.embed(image) + valid + ape, atol=1e-6)
    assert (a['x'] - b['x']).abs().max() > 1e-2


# ------------------------------------------------------------------------------------------------ surface normals
def _intrinsics(H, W, f=60.0, dtype=torch.float64):
    return torch.tensor([[[f, 0.0, (W - 1) / 2], [0.0, f, (H - 1) / 2], [0.0, 0.0, 1.0]]], dtype=dtype)


def _ray_dirs(K, H, W):
    v, u = torch.meshgrid(torch.arange(H, dtype=K.dtype), torch.arange(W, dtype=K.dtype), indexing='ij')
    return torch.stack([(u - K[0, 0, 2]) / K[0, 0, 0], (v - K[0, 1, 2]) / K[0, 1, 1], torch.ones_like(u)], -1)


def test_normals_of_a_tilted_plane():
    """Plane n·P = c seen by the camera: every pixel's normal is n (oriented towards the camera)."""
    H, W = 24, 32
    K = _intrinsics(H, W)
    n = torch.tensor([0.3, -0.4, -1.0], dtype=torch.float64)
    n = n / n.norm()
    rays = _ray_dirs(K, H, W)                                       # P = z · ray, n·P = c  ->  z = c / (n·ray)
    depth = (-1.0 / (rays @ n)).unsqueeze(0)                         # c = -1 (plane in front)
    got = surface_normals(depth, K, RANGE)[0].permute(1, 2, 0)      # [H,W,3]
    assert torch.allclose(got, n.expand(H, W, 3), atol=1e-9)


def test_normals_of_a_sphere():
    """Sphere of radius R at c: normals (P − c)/R where it faces the camera: central differences (mean < 0.5°);
    near the apex the depth changes flip sign, the edge test picks one side (first order: < 1.5°)."""
    H, W, R = 48, 48, 0.3
    K = _intrinsics(H, W, f=80.0)
    c = torch.tensor([0.02, -0.01, 1.0], dtype=torch.float64)
    rays = _ray_dirs(K, H, W)                                        # hit: |z·ray − c|² = R² (nearest root)
    a, b, cc = (rays * rays).sum(-1), -2 * (rays @ c), c @ c - R * R
    disc = b * b - 4 * a * cc
    hit = disc > 0
    z = torch.where(hit, (-b - disc.clamp_min(0).sqrt()) / (2 * a), torch.zeros_like(a))
    got = surface_normals(z.unsqueeze(0), K, RANGE)[0].permute(1, 2, 0)
    expected = (z.unsqueeze(-1) * rays - c) / R
    facing = -(expected * rays).sum(-1) / rays.norm(dim=-1) > 0.5    # < 60° from the line of sight
    whole = torch.nn.functional.max_pool2d((~hit).double()[None, None], 3, 1, 1)[0, 0] == 0   # 3x3 all on it
    inner = hit & facing & whole
    cos = (got[inner] * expected[inner]).sum(-1).clamp(-1, 1)
    err = torch.rad2deg(torch.acos(cos))
    assert inner.sum() > 1000 and err.max() < 1.5 and err.mean() < 0.5
    assert torch.equal(got[~hit], torch.zeros_like(got[~hit]))       # background (depth 0) -> 0


def test_normals_with_holes_and_edges():
    """Holes (0, NaN, inf, negative, too far) give zero normals and finite output; a pixel next to a hole uses its
    other neighbour; at a depth step the side on the same surface is used, so both planes stay (0, 0, −1)."""
    H, W = 20, 24
    K = _intrinsics(H, W, dtype=torch.float32)
    depth = torch.full((1, H, W), 1.0)
    depth[0, :, 12:] = 1.6                                           # step edge between columns 11 and 12
    holes = torch.zeros(H, W, dtype=torch.bool)
    holes[3, 4], holes[5, 5:8], holes[10:13, 2:4], holes[15, 20], holes[17, 9] = True, True, True, True, True
    depth[0, 3, 4], depth[0, 5, 5:8], depth[0, 10:13, 2:4] = 0.0, float('nan'), float('inf')
    depth[0, 15, 20], depth[0, 17, 9] = -1.0, 50.0
    got = surface_normals(depth, K, RANGE)[0].permute(1, 2, 0)
    assert torch.isfinite(got).all()
    assert torch.equal(got[holes], torch.zeros_like(got[holes]))
    facing = torch.tensor([0.0, 0.0, -1.0])
    assert torch.allclose(got[~holes], facing.expand_as(got[~holes]), atol=1e-6)
    isolated = torch.zeros(1, H, W)
    isolated[0, 8, 8] = 1.0                                          # one valid pixel: no tangent -> 0
    assert torch.equal(surface_normals(isolated, K, RANGE), torch.zeros(1, 3, H, W))


# ------------------------------------------------------------------------------------------------ normal-map model
@pytest.mark.parametrize('name', ['nmap_vit', 'nmap_string'])
def test_normal_map_model(name):
    m = _model(FAMILY[name])
    cfg = m.config
    image, depth, K = _frames(cfg)
    with torch.no_grad():
        t = m.tokenize(image, depth, K)
        out = m(image, depth, K)
        pushed = m(image, depth + 0.3 * torch.rand(depth.shape, generator=torch.Generator().manual_seed(1)), K)
    N = cfg.num_tokens
    assert cfg.encoder_tokens == 2 * N and t['x'].shape == (2, 2 * N, cfg.width)
    assert torch.equal(t['coords'][:, :N], t['coords'][:, N:])      # normal tokens sit at their patch's coordinates
    assert out['tokens'].shape == (2, N, cfg.width) and out['boxes'].shape == (2, N, 12)
    assert all(torch.isfinite(out[k]).all() for k in ('boxes', 'logits', 'embedding'))
    assert (out['logits'] - pushed['logits']).abs().max() > 1e-5   # depth shape reaches the output via normals
    with pytest.raises(ValueError, match='depth'):
        m(image, None, K)


def test_normal_fuse_starts_as_the_mean():
    cfg = ViTDConfig(**SMALL, encoding='none', use_depth=False, normal_map=True)
    m = build_model(cfg)
    tokens = torch.randn(2, 2 * cfg.num_tokens, cfg.width)
    with torch.no_grad():
        fused = m.fuse_tokens(tokens)
    assert torch.allclose(fused, (tokens[:, :cfg.num_tokens] + tokens[:, cfg.num_tokens:]) / 2, atol=1e-6)


# ------------------------------------------------------------------------------------------------ Lie-group model
@pytest.mark.parametrize('encoding', ['rope_mixed', 'cayley', 'circulant', 'tensor_product'])
def test_lie_model_invariant_to_rotation_about_camera_axis(encoding):
    """camera_xyz + azimuth_polar: the encoder gives identical tokens when every patch point turns about the
    camera axis by one angle (points kept in x > 0, so φ does not wrap); with Cartesian coordinates it does not."""
    def encode(model, points):
        with torch.no_grad():
            return model.encoder(x, model.camera_coordinates(points))

    lie = _model(dict(encoding=encoding, coord_mode='camera_xyz', coord_transform='azimuth_polar',
                      abs_pos_embed=False), dtype=torch.float64)
    cart = _model(dict(encoding=encoding, coord_mode='camera_xyz', abs_pos_embed=False), dtype=torch.float64)
    image, depth, K = _frames(lie.config, dtype=torch.float64)
    K = K.clone()
    K[:, 0, 2] = -30.0                                              # optical axis left of the image: x > 0
    with torch.no_grad():
        t = lie.tokenize(image, depth, K)
    x, points = t['x'], t['points']
    assert (points[..., 0] > 0).all()
    c, s = math.cos(0.6), math.sin(0.6)
    turned = points @ torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64).T
    assert torch.allclose(encode(lie, points), encode(lie, turned), atol=1e-9)
    assert (encode(cart, points) - encode(cart, turned)).abs().max() > 1e-4


# ------------------------------------------------------------------------------------------------ export parity
@pytest.mark.parametrize('name', list(FAMILY))
def test_family_exports_to_onnx(tmp_path, name):
    """Compiled model == original, the ONNX graph passes the deployment checks and ONNX Runtime matches PyTorch."""
    from string_perception.export.deployable import DeployableViTD
    from string_perception.export.graph_checks import complex_tensors, forbidden_ops
    from string_perception.export.metadata import build_metadata
    from string_perception.export.to_onnx import export_deployable
    from string_perception.export.verify import FP32_ATOL
    from string_perception.runtime.onnx_runner import OnnxModel
    m = _model(FAMILY[name])
    frames = _frames(m.config, batch=3)
    deploy = DeployableViTD(m)
    with torch.no_grad():
        out = m(*frames)
        ref = {k: out[k].numpy() for k in ('boxes', 'logits', 'embedding')}
        compiled = dict(zip(('boxes', 'logits', 'embedding'), (v.numpy() for v in deploy(*frames))))
    path = tmp_path / 'm.onnx'
    onnx_model, _ = export_deployable(deploy, str(path), build_metadata(m.config, {}, precision='fp32'))
    assert not forbidden_ops(onnx_model) and not complex_tensors(onnx_model)
    got = OnnxModel(path, ('CPUExecutionProvider',), intra_op_threads=1).run(*(f.numpy() for f in frames))
    for k in ref:
        np.testing.assert_allclose(compiled[k], ref[k], atol=2e-5, rtol=0, err_msg=f'{name} {k} (compiled)')
        np.testing.assert_allclose(got[k], ref[k], atol=FP32_ATOL, rtol=0, err_msg=f'{name} {k} (onnx)')

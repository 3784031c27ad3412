"""ViT / ViTD forward, invariances, head priors, gradients, checkpoints, fold-ability."""
import copy
import json

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402
from torch import nn  # noqa: E402

from string_perception.encodings import ENCODING_NAMES, apply_rope_mixed, fold_basis_into_projection  # noqa: E402
from string_perception.model import ViTDConfig, build_model, load_checkpoint, save_checkpoint  # noqa: E402

MODES = [dict(use_depth=False), dict(use_depth=True, coord_mode='grid_depth'),
         dict(use_depth=True, coord_mode='camera_xyz')]
MODE_IDS = ['vit', 'grid_depth', 'camera_xyz']
# Every shipped encoding is an exact STRING (or the identity), hence translation invariant.
TRANSLATION_INVARIANT = ENCODING_NAMES


def small(encoding='rope_mixed', **kw):
    base = dict(image_size=(32, 48), patch_size=8, width=32, depth=2, num_heads=2, class_embed_dim=16,
                embed_dim=24, class_names=('box', 'cylinder', 'sphere', 'torus'), encoding=encoding)
    base.update(kw)
    return ViTDConfig(**base)


def inputs(cfg, B=2, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    H, W = cfg.image_size
    image = torch.randint(0, 256, (B, H, W, 3), generator=g, dtype=torch.uint8)
    depth = (0.5 + 2.0 * torch.rand(B, H, W, generator=g)).to(dtype)
    K = torch.tensor([[40.0, 0.0, (W - 1) / 2], [0.0, 42.0, (H - 1) / 2], [0.0, 0.0, 1.0]], dtype=dtype)
    return image, depth, K.expand(B, 3, 3).clone()


def model_for(cfg, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return build_model(cfg).to(dtype).eval()


@pytest.mark.parametrize('mode', MODES, ids=MODE_IDS)
@pytest.mark.parametrize('encoding', ENCODING_NAMES)
def test_output_shapes_every_encoding_and_mode(encoding, mode):
    cfg = small(encoding, **mode)
    m = model_for(cfg)
    image, depth, K = inputs(cfg, B=3)
    with torch.no_grad():
        out = m(image, depth, K, return_aux=True)
    N = cfg.num_tokens
    assert N == 4 * 6
    assert out['boxes'].shape == (3, N, 12)
    assert out['logits'].shape == (3, N, 4)
    assert out['embedding'].shape == (3, 24)
    assert out['tokens'].shape == (3, N, 32)
    assert out['coords'].shape == (3, N, cfg.coord_dim)
    for k in ('boxes', 'logits', 'embedding', 'tokens'):
        assert torch.isfinite(out[k]).all(), k
    assert (out['boxes'][..., 9:] > 0).all()


@pytest.mark.parametrize('coord_dim', [2, 3])
@pytest.mark.parametrize('encoding', TRANSLATION_INVARIANT)
def test_encoder_translation_invariance(encoding, coord_dim):
    """Same token inputs, all coordinates shifted by one vector t -> identical encoder outputs."""
    cfg = small(encoding, use_depth=coord_dim == 3, abs_pos_embed=False)
    m = model_for(cfg, dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, cfg.num_tokens, cfg.width, generator=g, dtype=torch.float64)
    coords = 4.0 * torch.randn(2, cfg.num_tokens, coord_dim, generator=g, dtype=torch.float64)
    t = 25.0 * torch.randn(coord_dim, generator=g, dtype=torch.float64)
    with torch.no_grad():
        a = m.encoder(x, coords)
        b = m.encoder(x, coords + t)
        moved = m.encoder(x, coords + torch.randn_like(coords))
    assert torch.allclose(a, b, atol=1e-9, rtol=0), (a - b).abs().max()
    if encoding != 'none':   # and the coordinates do matter
        assert (a - moved).abs().max() > 1e-4


def _perturb_box_head(m, seed=5):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        w = m.box_head.fc3.weight
        w.copy_(0.05 * torch.randn(w.shape, generator=g, dtype=w.dtype))


@pytest.mark.parametrize('encoding', ['rope_mixed', 'cayley', 'circulant'])
def test_camera_xyz_physical_translation(encoding):
    """camera_xyz: a fronto-parallel scene at depth z0 seen with the principal point moved by du pixels is
    the same 3D scene slid sideways by -z0*du/fx. Tokens, scores and embedding must not change; every box
    centre must move by exactly that vector; rotation and size must not change."""
    cfg = small(encoding, coord_mode='camera_xyz')
    m = model_for(cfg, dtype=torch.float64)
    _perturb_box_head(m)
    image, depth, K = inputs(cfg, dtype=torch.float64)
    depth = torch.full_like(depth, 1.7)
    depth[:, 3:9, 5:20] = float('nan')           # holes: same pixels in both views
    K2 = K.clone()
    du, dv = 3.25, -1.5
    K2[:, 0, 2] += du
    K2[:, 1, 2] += dv
    with torch.no_grad():
        a = m(image, depth, K, return_aux=True)
        b = m(image, depth, K2, return_aux=True)
    shift = torch.tensor([-1.7 * du / 40.0, -1.7 * dv / 42.0, 0.0], dtype=torch.float64)
    assert torch.allclose(b['points'] - a['points'], shift.expand_as(a['points']), atol=1e-12)
    for k in ('tokens', 'logits', 'embedding'):
        assert torch.allclose(a[k], b[k], atol=1e-9, rtol=0), k
    assert torch.allclose(b['boxes'][..., :3] - a['boxes'][..., :3], shift.expand_as(a['points']), atol=1e-9)
    assert torch.allclose(a['boxes'][..., 3:], b['boxes'][..., 3:], atol=1e-9)


@pytest.mark.parametrize('encoding', ['rope', 'cayley', 'dense'])
def test_grid_depth_scene_pushed_back(encoding):
    """grid_depth: adding dz to every valid depth pixel (the paper's table-height change) shifts only the third
    coordinate, so tokens are identical and every box keeps its offset from its patch point."""
    cfg = small(encoding, coord_mode='grid_depth')
    m = model_for(cfg, dtype=torch.float64)
    _perturb_box_head(m)
    image, depth, K = inputs(cfg, dtype=torch.float64)
    depth[0, 0:8, 0:8] = 0.0                       # a whole invalid patch (neighbour fill)
    depth[1, ::3, ::2] = float('nan')
    with torch.no_grad():
        a = m(image, depth, K, return_aux=True)
        b = m(image, torch.where(depth > 0, depth + 0.8, depth), K, return_aux=True)   # holes stay holes
    assert torch.allclose(b['depth'] - a['depth'], torch.full_like(a['depth'], 0.8), atol=1e-12)
    for k in ('tokens', 'logits', 'embedding'):
        assert torch.allclose(a[k], b[k], atol=1e-9, rtol=0), k
    off_a = a['boxes'][..., :3] - a['points']
    off_b = b['boxes'][..., :3] - b['points']
    assert torch.allclose(off_a, off_b, atol=1e-9)


@pytest.mark.parametrize('mode', MODES, ids=MODE_IDS)
def test_zero_init_box_head_gives_patch_prior(mode):
    cfg = small('cayley', size_prior=0.1, **mode)
    m = model_for(cfg)
    image, depth, K = inputs(cfg)
    with torch.no_grad():
        out = m(image, depth, K, return_aux=True)
    boxes = out['boxes']
    if cfg.use_depth:
        assert torch.equal(boxes[..., :3], out['points'])
        assert torch.allclose(out['points'][..., 2], out['depth'])
    else:   # the ViT's prior: patch-centre ray at the nominal depth
        assert torch.allclose(boxes[..., 2], torch.full_like(boxes[..., 2], cfg.nominal_depth))
        assert torch.allclose(boxes[:, 0, 0], torch.full((2,), (3.5 - (48 - 1) / 2) / 40.0))
    rot = boxes[..., 3:9]
    assert torch.equal(rot, torch.tensor([1.0, 0, 0, 0, 1, 0]).expand_as(rot))   # identity rotation
    assert torch.allclose(boxes[..., 9:], torch.full_like(boxes[..., 9:], 0.1), atol=1e-6)
    scores = out['logits'].sigmoid()
    assert scores.max() < 0.05                        # ~class_prior_prob at init


def test_absolute_mode_prior_and_vit_without_K():
    cfg = small('rope', use_depth=False, translation_mode='absolute')
    m = model_for(cfg)
    image, _, _ = inputs(cfg)
    with torch.no_grad():
        out = m(image)                               # the ViT in absolute mode needs neither depth nor K
    assert torch.allclose(out['boxes'][..., :3], torch.tensor([0.0, 0.0, cfg.nominal_depth]).expand(2, 24, 3))


@pytest.mark.parametrize('case', [
    ('vit', dict(use_depth=False), 'rope_mixed'),
    ('grid_depth', dict(coord_mode='grid_depth'), 'cayley'),
    ('camera_xyz', dict(coord_mode='camera_xyz'), 'circulant'),
    ('dense', dict(coord_mode='camera_xyz'), 'dense'),
    ('rope', dict(coord_mode='grid_depth'), 'rope'),
    ('none', dict(coord_mode='grid_depth', policy_pool='mean'), 'none'),
], ids=lambda c: c[0])
def test_gradients_reach_every_parameter(case):
    _, mode, encoding = case
    cfg = small(encoding, **mode)
    m = model_for(cfg).train()
    _perturb_box_head(m)    # the zero-init last layer blocks gradients to the earlier box layers at step 0
    image, depth, K = inputs(cfg)
    depth[0, :8, :8] = float('nan')
    out = m(image, depth, K)
    g = torch.Generator().manual_seed(9)
    loss = sum((out[k] * torch.randn(out[k].shape, generator=g)).sum() for k in ('boxes', 'logits', 'embedding'))
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_zero_init_layer_still_gets_gradient_at_step_zero():
    cfg = small('rope_mixed')
    m = model_for(cfg).train()
    out = m(*inputs(cfg))
    out['boxes'].square().sum().backward()
    assert m.box_head.fc3.weight.grad.abs().sum() > 0


def test_invalid_depth_gives_finite_outputs():
    cfg = small('cayley', coord_mode='camera_xyz')
    m = model_for(cfg)
    image, depth, K = inputs(cfg)
    depth[0] = float('nan')                          # a frame without any valid depth
    depth[1, ::2] = 0.0
    depth[1, :, ::5] = float('inf')
    with torch.no_grad():
        out = m(image, depth, K, return_aux=True)
    for k, v in out.items():
        assert torch.isfinite(v).all(), k
    assert torch.all(out['valid'][0] == 0)
    assert torch.allclose(out['depth'][0], torch.full((24,), cfg.depth_fill))


def test_checkpoint_round_trip_weights_only(tmp_path):
    cfg = small('cayley', coord_mode='camera_xyz', encoding_kwargs={'band': 3})
    m = model_for(cfg, seed=4)
    _perturb_box_head(m)
    with torch.no_grad():
        m.xyz_scale.mul_(1.3)   # a learnt coordinate scale must survive the round trip
    path = tmp_path / 'sub' / 'model.pt'
    save_checkpoint(path, m, extra={'step': 12, 'metrics': {'iou': 0.5}})
    raw = torch.load(path, weights_only=True)
    json.dumps(raw['config'])
    assert raw['step'] == 12 and raw['metrics'] == {'iou': 0.5}
    m2, cfg2, ckpt = load_checkpoint(path)
    assert cfg2 == cfg and not m2.training
    image, depth, K = inputs(cfg, seed=7)
    with torch.no_grad():
        a, b = m(image, depth, K), m2(image, depth, K)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    with pytest.raises(ValueError):
        save_checkpoint(path, m, extra={'model': 1})


def test_bad_inputs_raise():
    cfg = small('rope')
    m = model_for(cfg)
    image, depth, K = inputs(cfg)
    with pytest.raises(ValueError, match='uint8'):
        m(image.float(), depth, K)
    with pytest.raises(ValueError, match='image'):
        m(image[:, :16], depth, K)
    with pytest.raises(ValueError, match='depth'):
        m(image, None, K)
    with pytest.raises(ValueError, match='depth'):
        m(image, (depth * 1000).to(torch.int32), K)
    with pytest.raises(ValueError, match='K'):
        m(image, depth, None)


class _RopeMixed(nn.Module):
    def __init__(self, freqs):
        super().__init__()
        self.register_buffer('freqs', freqs)

    def forward(self, x, coords):
        return apply_rope_mixed(x, coords, self.freqs)


@pytest.mark.parametrize('encoding', ['rope_mixed', 'cayley', 'circulant', 'dense'])
def test_pe_swaps_for_folded_rope_mixed(encoding):
    """What the exporter will do: fold each layer's canonical basis into attn.q_proj / k_proj and swap Block.pe
    for plain RoPE-Mixed with the canonical frequencies; the model's outputs must not change."""
    cfg = small(encoding, coord_mode='camera_xyz')
    m = model_for(cfg, dtype=torch.float64)
    _perturb_box_head(m)
    folded = copy.deepcopy(m)
    for blk in folded.encoder.blocks:
        cf = blk.pe.canonical()
        for proj in (blk.attn.q_proj, blk.attn.k_proj):
            w, b = fold_basis_into_projection(proj.weight.data, proj.bias.data, cf.basis)
            proj.weight.data.copy_(w)
            proj.bias.data.copy_(b)
        blk.pe = _RopeMixed(cf.freqs.to(torch.float64))
    image, depth, K = inputs(cfg, dtype=torch.float64)
    with torch.no_grad():
        a, b = m(image, depth, K), folded(image, depth, K)
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-8, rtol=0), (k, (a[k] - b[k]).abs().max())

"""⊗-STRING ([STRING] §3.3 Ext. 1) and Lie-group STRING (Ext. 2): the logit formula, translation invariance,
the RoPE-Mixed lift that lets ⊗-STRING export, rotation invariance about the camera axis for every variant."""
import math

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.encodings import (ALL_ENCODING_NAMES, COORDINATE_TRANSFORMS, ENCODING_NAMES,  # noqa: E402
                                         EXPANDING_ENCODING_NAMES, apply_rope_mixed, azimuth_polar_coordinates,
                                         build_position_encoding, canonical_coordinates, fold_basis_into_projection)
from string_perception.model.vit import Attention  # noqa: E402

DH, H, N, M = 8, 2, 7, 3


def tensor_enc(dc=3, shared=False, seed=0, num_features=M):
    torch.manual_seed(seed)
    enc = build_position_encoding('tensor_product', head_dim=DH, num_heads=H, coord_dim=dc,
                                  shared_across_heads=shared, num_features=num_features).double()
    with torch.no_grad():
        enc.omega.normal_()   # away from the structured init
    return enc


def rand(*shape, seed=1, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def logits(enc, q, k, r):
    """[B,H,N,N] = enc(q)ᵀ enc(k) (no scale)."""
    return enc(q, r) @ enc(k, r).transpose(-1, -2)


# ------------------------------------------------------------------------------------------------ ⊗-STRING
def test_names():
    assert EXPANDING_ENCODING_NAMES == ('tensor_product',)
    assert ALL_ENCODING_NAMES == ENCODING_NAMES + EXPANDING_ENCODING_NAMES
    assert 'tensor_product' not in ENCODING_NAMES   # ENCODING_NAMES stays "rotations of the Dh head"


@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('dc', [2, 3])
def test_tensor_product_logits_formula(dc, shared):
    """vec(f(r_i)⊗q_i)ᵀ vec(f(r_j)⊗k_j) = q_iᵀk_j · (1/m) Σ_k cos(ω_kᵀ(r_i − r_j))  (paper eq. 13-14)."""
    enc = tensor_enc(dc, shared)
    q, k, r = rand(2, H, N, DH, seed=1), rand(2, H, N, DH, seed=2), rand(2, N, dc, seed=3, scale=2.0)
    assert enc(q, r).shape == (2, H, N, 2 * M * DH) == (2, H, N, enc.output_dim)
    omega = enc.omega.detach().expand(H, M, dc)                                  # [H,m,dc]
    diff = r[:, :, None, :] - r[:, None, :, :]                                   # [B,N,N,dc] r_i − r_j
    kernel = torch.cos(torch.einsum('bijc,hkc->bhijk', diff, omega)).mean(-1)  # [B,H,N,N]
    expected = (q @ k.transpose(-1, -2)) * kernel
    assert torch.allclose(logits(enc, q, k, r), expected, atol=1e-12)
    same = torch.diagonal(logits(enc, q, q, r), dim1=-2, dim2=-1)                # f(r)ᵀf(r) = 1: norms kept
    assert torch.allclose(same, (q * q).sum(-1), atol=1e-12)


def test_tensor_product_translation_invariance():
    enc = tensor_enc()
    q, k, r = rand(2, H, N, DH, seed=1), rand(2, H, N, DH, seed=2), rand(2, N, 3, seed=3, scale=2.0)
    t = rand(3, seed=4, scale=30.0)
    a, b = logits(enc, q, k, r), logits(enc, q, k, r + t)
    assert torch.allclose(a, b, atol=1e-10)
    assert (a - logits(enc, q, k, r + rand(2, N, 3, seed=5))).abs().max() > 1e-2   # positions do matter


def test_tensor_product_is_rope_mixed_on_a_lift():
    """enc(x, r) == apply_rope_mixed(B x, r, Λ) exactly (the half-split layout), BᵀB = I; folding B into a
    projection equals lifting its output -- what the exporter relies on."""
    enc = tensor_enc(shared=True)
    x, r = rand(2, H, N, DH, seed=1), rand(2, N, 3, seed=2, scale=3.0)
    can = enc.canonical()
    assert can.basis.shape == (H, 2 * M * DH, DH) and can.freqs.shape == (H, M * DH, 3)
    assert torch.allclose(can.basis.transpose(-1, -2) @ can.basis, torch.eye(DH, dtype=torch.float64).expand(H, -1, -1))
    lifted = x @ can.basis.transpose(-1, -2)                                     # [B,H,N,2m·Dh]
    assert torch.allclose(apply_rope_mixed(lifted, r, can.freqs), enc(x, r), atol=1e-12)
    w, b = rand(H * DH, 5, seed=6), rand(H * DH, seed=7)
    w2, b2 = fold_basis_into_projection(w, b, can.basis)
    assert w2.shape == (H * 2 * M * DH, 5) and b2.shape == (H * 2 * M * DH,)
    z = rand(4, 5, seed=8)
    per_head = (z @ w.T + b).reshape(4, H, DH)
    assert torch.allclose((z @ w2.T + b2).reshape(4, H, -1), (can.basis @ per_head.unsqueeze(-1)).squeeze(-1))


def test_attention_keeps_the_head_scale():
    """Attention with ⊗-STRING: softmax(qᵀk·(1/m)Σcos / √Dh) v, v un-expanded."""
    torch.manual_seed(0)
    attn = Attention(H * DH, H).double()
    enc = tensor_enc()
    x, r = rand(2, N, H * DH, seed=1), rand(2, N, 3, seed=2)
    got = attn(x, r, enc)
    q, k, v = (attn._heads(p(x)) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    weights = torch.softmax(logits(enc, q, k, r) / math.sqrt(DH), dim=-1)
    expected = attn.proj((weights @ v).transpose(1, 2).reshape(2, N, H * DH))
    assert torch.allclose(got, expected, atol=1e-12)


def test_tensor_product_api():
    enc = tensor_enc()
    with pytest.raises(NotImplementedError, match='generators'):
        enc.generators()
    with pytest.raises(ValueError, match='num_features'):
        build_position_encoding('tensor_product', head_dim=DH, num_heads=H, coord_dim=3, num_features=0)
    with pytest.raises(ValueError, match='valid'):
        build_position_encoding('tensor_product', head_dim=DH, num_heads=H, coord_dim=3, block_size=4)
    a, b = tensor_enc(seed=0), tensor_enc(seed=1)
    b.load_state_dict(a.state_dict())
    x, r = rand(1, H, N, DH), rand(1, N, 3)
    assert torch.equal(a(x, r), b(x, r))
    assert enc(x.float(), r.float()).dtype == torch.float32


# ------------------------------------------------------------------------------------------------ Lie-group STRING
def rotate_about_camera_axis(points, alpha):
    c, s = math.cos(alpha), math.sin(alpha)
    rz = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=points.dtype)
    return points @ rz.T


def sector_points(n=N, b=2, seed=3):
    """Points in front of the camera with azimuth φ ∈ (−1, 1) rad (x > 0), so φ + α (|α| < 1) never wraps."""
    g = torch.Generator().manual_seed(seed)
    phi = torch.rand(b, n, generator=g, dtype=torch.float64) * 2 - 1
    rho = 0.1 + torch.rand(b, n, generator=g, dtype=torch.float64)
    z = 0.3 + torch.rand(b, n, generator=g, dtype=torch.float64)
    return torch.stack([rho * phi.cos(), rho * phi.sin(), z], dim=-1)


def test_azimuth_polar_turns_rotations_into_translations():
    assert COORDINATE_TRANSFORMS == ('identity', 'azimuth_polar')
    p = sector_points()
    a = azimuth_polar_coordinates(p)
    b = azimuth_polar_coordinates(rotate_about_camera_axis(p, 0.7))
    assert torch.allclose(b - a, torch.tensor([0.0, 0.7, 0.0], dtype=torch.float64).expand_as(a), atol=1e-12)
    assert torch.allclose(a[..., 2], p.norm(dim=-1)) and (a[..., 0] >= 0).all() and (a[..., 0] <= math.pi).all()
    assert torch.equal(canonical_coordinates('identity', p), p)
    with pytest.raises(ValueError, match='azimuth_polar'):
        canonical_coordinates('spherical', p)


def test_azimuth_polar_on_the_camera_axis_is_finite():
    p = torch.tensor([[0.0, 0.0, 1.0], [1e-3, 0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    out = azimuth_polar_coordinates(p)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(p.grad).all()
    assert torch.allclose(out[0], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))


@pytest.mark.parametrize('name', ALL_ENCODING_NAMES)
def test_logits_invariant_to_rotation_about_camera_axis(name):
    """Lie-group STRING: every variant on canonical coordinates gives the same logits when all points turn about
    the camera axis by one angle; on Cartesian coordinates it does not."""
    torch.manual_seed(0)
    kw = dict(block_size=4) if name == 'circulant' else {}
    enc = build_position_encoding(name, head_dim=DH, num_heads=H, coord_dim=3, **kw).double()
    with torch.no_grad():
        for p in enc.parameters():
            p.normal_(0.0, 0.7)
    q, k, p = rand(2, H, N, DH, seed=1), rand(2, H, N, DH, seed=2), sector_points()
    turned = rotate_about_camera_axis(p, -0.8)
    lie = [logits(enc, q, k, 3.0 * azimuth_polar_coordinates(x)) for x in (p, turned)]
    assert torch.allclose(lie[0], lie[1], atol=1e-9)
    if name != 'none':
        assert (logits(enc, q, k, 3.0 * p) - logits(enc, q, k, 3.0 * turned)).abs().max() > 1e-3


def test_integer_azimuth_frequencies_are_invariant_across_the_cut():
    """φ wraps at ±π; with integer frequencies on the φ axis R(r) is 2π-periodic there, so any rotation (here by
    π, sending half the points across the cut) leaves the logits unchanged. Non-integer ones do not."""
    torch.manual_seed(0)
    enc = build_position_encoding('rope_mixed', head_dim=DH, num_heads=H, coord_dim=3).double()
    g = torch.Generator().manual_seed(4)
    p = torch.randn(2, N, 3, generator=g, dtype=torch.float64) + torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64)
    q, k = rand(2, H, N, DH, seed=1), rand(2, H, N, DH, seed=2)
    with torch.no_grad():
        enc.freqs[..., 1] = torch.randint(-3, 4, enc.freqs[..., 1].shape, generator=g).double()
    a, b = (logits(enc, q, k, azimuth_polar_coordinates(x)) for x in (p, rotate_about_camera_axis(p, math.pi)))
    assert torch.allclose(a, b, atol=1e-9)
    with torch.no_grad():
        enc.freqs[..., 1] += 0.37
    a, b = (logits(enc, q, k, azimuth_polar_coordinates(x)) for x in (p, rotate_about_camera_axis(p, math.pi)))
    assert (a - b).abs().max() > 1e-3

"""STRING invariants for every variant (docs/DESIGN.md §2): orthogonality, relativity, translation invariance,
equality with the dense expm oracle, the closed forms (RoPE blocks, circulant FFT, Cayley), gradients."""
import math

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.encodings import (ENCODING_NAMES, apply_rope_mixed, apply_string_expm,  # noqa: E402
                                         build_position_encoding, materialize_rotations)
from string_perception.encodings.rope import axial_rope_freqs  # noqa: E402

TOL = 1e-10
DH, H, N = 16, 2, 6


def make(name, coord_dim=3, head_dim=DH, num_heads=H, shared=False, seed=0, randomize=True, **kw):
    """A float64 encoding with random parameters (not the structured init, so identities can fail)."""
    if name == 'circulant':
        kw.setdefault('block_size', 8)
    torch.manual_seed(seed)
    enc = build_position_encoding(name, head_dim=head_dim, num_heads=num_heads, coord_dim=coord_dim,
                                  shared_across_heads=shared, **kw).double()
    if randomize:
        with torch.no_grad():
            for pname, p in enc.named_parameters():
                p.copy_(torch.randn_like(p) * (0.5 if pname == 'weight' else 1.0))
    return enc


def coords(n=N, dc=3, b=1, seed=1, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, dc, generator=g, dtype=torch.float64) * scale


def rand_x(b=1, h=H, n=N, dh=DH, seed=2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, n, dh, generator=g, dtype=torch.float64)


def rotations(enc, r):
    """R[H, N, Dh, Dh] for coords r [N, dc]."""
    return materialize_rotations(enc, r, enc.num_heads, enc.head_dim)


STRING = [n for n in ENCODING_NAMES if n != 'none']


@pytest.mark.parametrize('dc', [1, 2, 3])
@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_rotation_is_special_orthogonal(name, dc):
    rot = rotations(make(name, dc), coords(dc=dc)[0])  # [H, N, Dh, Dh]
    eye = torch.eye(DH, dtype=torch.float64)
    assert torch.allclose(rot.transpose(-1, -2) @ rot, eye.expand_as(rot), atol=TOL)
    assert torch.allclose(torch.linalg.det(rot), torch.ones(H, N, dtype=torch.float64), atol=1e-9)


@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_relative_property(name):
    """R(r)ᵀ R(s) = R(s − r)  ([STRING] eq. 2; [ESPR] Lemma 2)."""
    enc = make(name)
    r, s = coords(seed=3)[0], coords(seed=4)[0]
    lhs = rotations(enc, r).transpose(-1, -2) @ rotations(enc, s)
    assert torch.allclose(lhs, rotations(enc, s - r), atol=TOL)


@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_logits_invariant_to_translation(name, shared):
    enc = make(name, shared=shared)
    q, k, r = rand_x(seed=5), rand_x(seed=6), coords(b=1)
    t = torch.tensor([[[3.7, -1.2, 0.4]]], dtype=torch.float64)
    logits = enc(q, r) @ enc(k, r).transpose(-1, -2)
    moved = enc(q, r + t) @ enc(k, r + t).transpose(-1, -2)
    assert torch.allclose(logits, moved, atol=TOL)
    if name != 'none':  # and positions matter at all
        assert not torch.allclose(logits, q @ k.transpose(-1, -2), atol=1e-3)


@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_forward_equals_expm_of_its_generators(name):
    enc = make(name)
    x, r = rand_x(b=2), coords(b=2)
    assert torch.allclose(enc(x, r), apply_string_expm(x, r, enc.generators()), atol=TOL)


def _thm33_block_generators(freqs):
    """Paper 000 Thm 3.3 by hand: L_k = ⊕_u λ_{k,u} [[0, −1], [1, 0]] on plane (u, u + Dh/2)."""
    hh, half, dc = freqs.shape
    gen = torch.zeros(hh, dc, 2 * half, 2 * half, dtype=torch.float64)
    for u in range(half):
        gen[:, :, u + half, u] = freqs[:, u, :]
        gen[:, :, u, u + half] = -freqs[:, u, :]
    return gen


@pytest.mark.parametrize('name', ['rope', 'rope_mixed'])
def test_rope_equals_dense_string_with_block_generators(name):
    enc = make(name, randomize=False)
    x, r = rand_x(b=2), coords(b=2)
    freqs = enc.freqs.detach().double().expand(H, -1, -1)
    assert torch.allclose(enc(x, r), apply_string_expm(x, r, _thm33_block_generators(freqs)), atol=TOL)
    dense = make('dense', randomize=False)  # the dense variant with Q = I and the same λ is the same map
    with torch.no_grad():
        dense.weight.zero_()
        dense.freqs.copy_(freqs)
    assert torch.allclose(enc(x, r), dense(x, r), atol=TOL)


def test_axial_rope_frequencies():
    f1 = axial_rope_freqs(8, 1)[:, 0]  # 1D: θ_n = 10000^(−2(n−1)/d)
    assert torch.allclose(f1, 10_000.0 ** (-2 * torch.arange(4, dtype=torch.float64) / 8))
    f3 = axial_rope_freqs(64, 3)  # each pair rotates with exactly one axis, axes share pairs evenly
    assert ((f3 != 0).sum(dim=1) == 1).all()
    assert sorted((f3 != 0).sum(dim=0).tolist()) == [10, 11, 11]


def test_rope_mixed_init_max_wavelength():
    enc = build_position_encoding('rope_mixed', head_dim=64, num_heads=4, coord_dim=2)
    mag = enc.freqs.detach().norm(dim=-1)
    assert mag.max() == pytest.approx(1.0, rel=1e-6)
    assert mag.min() >= 1 / 100 - 1e-9 and mag.min() < 1 / 50  # max wavelength 2π·100
    assert not torch.allclose(enc.freqs[0], enc.freqs[1])  # random directions per head


def _circulant_generators_by_hand(c):
    """L = blockdiag(C − Cᵀ), C[i, j] = c[(j − i) mod b] built entry by entry."""
    hh, dc, nb, b = c.shape
    gen = torch.zeros(hh, dc, nb * b, nb * b, dtype=torch.float64)
    for beta in range(nb):
        for i in range(b):
            for j in range(b):
                gen[:, :, beta * b + i, beta * b + j] = c[:, :, beta, (j - i) % b]
    return gen - gen.transpose(-1, -2)


@pytest.mark.parametrize('block_size', [2, 4, 8, 16])
def test_circulant_fft_equals_dense_expm(block_size):
    enc = make('circulant', block_size=block_size)
    x, r = rand_x(b=2), coords(b=2)
    gen = _circulant_generators_by_hand(enc.weight.detach().double())
    assert torch.allclose(enc.generators(), gen, atol=1e-14)
    assert torch.allclose(enc(x, r), apply_string_expm(x, r, gen), atol=TOL)


def test_circulant_default_block_size_and_mixed_init():
    enc = build_position_encoding('circulant', head_dim=64, num_heads=2, coord_dim=3)
    assert enc.block_size == 16 and tuple(enc.weight.shape) == (2, 3, 4, 16)
    lam = enc.canonical().freqs.norm(dim=-1)  # spectra are the RoPE-Mixed magnitudes, 2 null dims per block
    assert lam.max() == pytest.approx(1.0, rel=1e-5) and int((lam < 1e-9).sum(dim=1)[0]) == 4


def test_cayley_is_rope_in_the_cayley_basis():
    """R(r) = Pᵀ RoPE(r) P, P = (I − S)(I + S)⁻¹; logits equal the paper's RoPE(r)·P form."""
    enc = make('cayley')
    x, r = rand_x(), coords()
    w = enc.weight.detach() * enc.mask
    s = w - w.transpose(-1, -2)
    eye = torch.eye(DH, dtype=torch.float64)
    p = (eye - s) @ torch.linalg.inv(eye + s)  # the explicit inverse is fine in a test
    freqs = enc.freqs.detach()
    expected = apply_rope_mixed(x @ p.transpose(-1, -2), r, freqs) @ p
    assert torch.allclose(enc(x, r), expected, atol=TOL)
    assert torch.allclose(enc.canonical().basis, p, atol=TOL)
    q, k = rand_x(seed=7), rand_x(seed=8)
    paper = apply_rope_mixed(q @ p.transpose(-1, -2), r, freqs) @ apply_rope_mixed(
        k @ p.transpose(-1, -2), r, freqs).transpose(-1, -2)
    assert torch.allclose(enc(q, r) @ enc(k, r).transpose(-1, -2), paper, atol=TOL)
    # the known bug: P applied after RoPE cancels in qᵀk, i.e. it equals plain RoPE-Mixed; ours does not
    buggy = (apply_rope_mixed(q, r, freqs) @ p.transpose(-1, -2)) @ (
        apply_rope_mixed(k, r, freqs) @ p.transpose(-1, -2)).transpose(-1, -2)
    plain = apply_rope_mixed(q, r, freqs) @ apply_rope_mixed(k, r, freqs).transpose(-1, -2)
    assert torch.allclose(buggy, plain, atol=TOL)
    assert not torch.allclose(paper, plain, atol=1e-3)


def test_cayley_starts_at_rope_and_band_is_sparse():
    enc = build_position_encoding('cayley', head_dim=DH, num_heads=H, coord_dim=2).double()
    x, r = rand_x(), coords(dc=2)
    assert torch.allclose(enc(x, r), apply_rope_mixed(x, r, enc.freqs.detach()), atol=TOL)  # S = 0 -> P = I
    banded = make('cayley', band=2)
    s = banded.skew().detach()
    i = torch.arange(DH)
    assert (s[:, (i[:, None] - i[None, :]).abs() > 2] == 0).all() and (s != 0).any()
    rot = rotations(banded, coords()[0])
    assert torch.allclose(rot.transpose(-1, -2) @ rot, torch.eye(DH, dtype=torch.float64).expand_as(rot), atol=TOL)


@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('name', STRING)
def test_every_parameter_gets_a_gradient(name, shared):
    enc = build_position_encoding(name, head_dim=DH, num_heads=H, coord_dim=3, shared_across_heads=shared,
                                  **({'block_size': 8} if name == 'circulant' else {}))  # the real init
    x, r = rand_x().float().requires_grad_(), coords().float()
    (enc(x, r) * torch.randn_like(x)).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    params = dict(enc.named_parameters())
    assert params or name == 'rope'
    for pname, p in params.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, f'{name}.{pname} gets no gradient'
        assert p.shape[0] == (1 if shared else H)


@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_shared_across_heads_gives_identical_heads(name):
    enc = make(name, shared=True)
    x = rand_x()[:, :1].expand(1, H, N, DH)
    out = enc(x, coords())
    assert torch.allclose(out[:, 0], out[:, 1], atol=TOL)
    can = enc.canonical()
    assert can.basis.shape == (H, DH, DH) and can.freqs.shape == (H, DH // 2, 3)
    if name in ('rope_mixed', 'cayley', 'circulant', 'dense'):
        assert not torch.allclose(make(name)(x, coords())[:, 0], make(name)(x, coords())[:, 1], atol=1e-3)


def test_batch_of_coords_and_rope_scale():
    """Per-sample coords are used per sample; RoPE angle is exactly λ·r (a 1D sanity value)."""
    enc = build_position_encoding('rope', head_dim=2, num_heads=1, coord_dim=1).double()
    x = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(2, 1, 1, 2)
    out = enc(x, torch.tensor([[[math.pi / 2]], [[math.pi]]], dtype=torch.float64))
    assert torch.allclose(out[:, 0, 0], torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64), atol=TOL)

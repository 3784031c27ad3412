"""Compilation to RoPE-Mixed ([ESPR] Lemma 1; [STRING] Thm 3.4), folding into q/k projections, defects."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.encodings import (ENCODING_NAMES, apply_rope_mixed, build_position_encoding,  # noqa: E402
                                         canonical_from_generators, fold_basis_into_projection,
                                         generator_defects, joint_block_diagonalize)
from string_perception.encodings.dense import basis_generators  # noqa: E402

TOL = 1e-10
DH, H, N = 16, 2, 7


def make(name, dc=3, shared=False, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    enc = build_position_encoding(name, head_dim=DH, num_heads=H, coord_dim=dc, shared_across_heads=shared,
                                  **({'block_size': 8} if name == 'circulant' else {})).to(dtype)
    with torch.no_grad():  # random parameters, not the structured init (S = 0 would make the Cayley test vacuous)
        for pname, p in enc.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if pname == 'weight' else 1.0))
    return enc


def canonical_apply(x, r, basis, freqs):
    """basisᵀ Rot(Λr) basis x, row-vector form."""
    return apply_rope_mixed(x @ basis.transpose(-1, -2), r, freqs) @ basis


def inputs(b=2, dc=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, H, N, DH, generator=g, dtype=torch.float64),
            torch.randn(b, N, dc, generator=g, dtype=torch.float64) * 2)


@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_canonical_reproduces_forward(name, shared):
    enc = make(name, shared=shared)
    x, r = inputs()
    can = enc.canonical()
    assert can.basis.shape == (H, DH, DH) and can.freqs.shape == (H, DH // 2, 3)
    assert can.basis.dtype == torch.float64 and not can.basis.requires_grad
    eye = torch.eye(DH, dtype=torch.float64).expand(H, -1, -1)
    assert torch.allclose(can.basis @ can.basis.transpose(-1, -2), eye, atol=TOL)
    assert torch.allclose(canonical_apply(x, r, can.basis, can.freqs), enc(x, r), atol=TOL)


@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_generic_joint_block_diagonalisation_reproduces_every_variant(name):
    enc = make(name)
    x, r = inputs()
    can = canonical_from_generators(enc.generators(), generator=torch.Generator().manual_seed(0))
    assert torch.allclose(canonical_apply(x, r, can.basis, can.freqs), enc(x, r), atol=1e-9)


@pytest.mark.parametrize('dc,n_null_pairs', [(1, 0), (2, 3), (3, 1)])
def test_joint_block_diagonalisation_of_random_commuting_generators(dc, n_null_pairs):
    g = torch.Generator().manual_seed(dc)
    q, _ = torch.linalg.qr(torch.randn(DH, DH, generator=g, dtype=torch.float64))  # random basis
    lam = torch.randn(DH // 2, dc, generator=g, dtype=torch.float64)
    lam[DH // 2 - n_null_pairs:] = 0  # null planes
    gen = basis_generators(q[None], lam[None])[0]  # [dc, Dh, Dh], commuting by construction
    can = joint_block_diagonalize(gen, generator=g)
    assert torch.allclose(can.basis @ can.basis.T, torch.eye(DH, dtype=torch.float64), atol=TOL)
    rebuilt = basis_generators(can.basis[None], can.freqs[None])[0]
    assert torch.allclose(rebuilt, gen, atol=TOL)
    assert int((can.freqs.norm(dim=-1) > 1e-9).sum()) == DH // 2 - n_null_pairs
    # the same planes up to order and orientation: sorted |λ| agree
    assert torch.allclose(can.freqs.norm(dim=-1).sort().values, lam.norm(dim=-1).sort().values, atol=TOL)


def _attention(x, coords, wq, bq, wk, bk, wv, encode_q, encode_k):
    """Single-layer multi-head attention output [B,H,N,Dh] with encoded queries and keys (float32)."""
    b, n, _ = x.shape
    q = (x @ wq.T + bq).view(b, n, H, DH).transpose(1, 2)  # [B,H,N,Dh]
    k = (x @ wk.T + bk).view(b, n, H, DH).transpose(1, 2)
    v = (x @ wv.T).view(b, n, H, DH).transpose(1, 2)
    logits = encode_q(q, coords) @ encode_k(k, coords).transpose(-1, -2) / DH ** 0.5  # [B,H,N,N]
    return logits, logits.softmax(-1) @ v


@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_folded_attention_equals_original_float32(name, shared):
    """Fold the canonical basis into W_q, W_k (and biases); apply_rope_mixed alone then gives the same attention."""
    enc = make(name, shared=shared, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    d_in, b = 24, 2
    x = torch.randn(b, N, d_in, generator=g)
    r = torch.randn(b, N, 3, generator=g) * 2
    wq, wk, wv = (torch.randn(H * DH, d_in, generator=g) / d_in ** 0.5 for _ in range(3))
    bq, bk = torch.randn(H * DH, generator=g), torch.randn(H * DH, generator=g)
    with torch.no_grad():
        logits, out = _attention(x, r, wq, bq, wk, bk, wv, enc, enc)
        can = enc.canonical()
        wq2, bq2 = fold_basis_into_projection(wq, bq, can.basis)
        wk2, bk2 = fold_basis_into_projection(wk, bk, can.basis)
        freqs = can.freqs.float()
        rope = lambda t, c: apply_rope_mixed(t, c, freqs)  # noqa: E731
        logits2, out2 = _attention(x, r, wq2, bq2, wk2, bk2, wv, rope, rope)
    assert wq2.dtype == torch.float32 and bk2.dtype == torch.float32
    assert (out - out2).abs().max() <= 1e-5
    assert (logits - logits2).abs().max() <= 1e-5 * max(1.0, float(logits.abs().max()))


def test_fold_without_bias_and_shared_basis():
    g = torch.Generator().manual_seed(2)
    w = torch.randn(H * DH, 5, generator=g, dtype=torch.float64)
    basis = torch.linalg.qr(torch.randn(1, DH, DH, generator=g, dtype=torch.float64))[0]
    w2, b2 = fold_basis_into_projection(w, None, basis)
    assert b2 is None
    assert torch.allclose(w2.view(H, DH, 5), basis @ w.view(H, DH, 5), atol=TOL)


@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_defects_vanish_for_builtin_variants(name):
    d = generator_defects(make(name).generators())
    assert d.epsilon <= TOL and d.eta_mix <= TOL


def test_defects_detect_non_commuting_generators_and_mixing_post_rotations():
    gen = make('circulant').generators()  # 2 null dims per 8-block: active dim 12 of 16
    d0 = generator_defects(gen)
    assert d0.active_dim == 12 and d0.epsilon <= TOL
    noise = torch.randn(gen.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 1e-2
    d1 = generator_defects(gen + noise - noise.transpose(-1, -2))
    assert d1.epsilon > 1e-4
    s = torch.randn(DH, DH, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    s = s - s.T
    eye = torch.eye(DH, dtype=torch.float64)
    p = torch.linalg.solve(eye + s, eye - s)  # a generic Cayley post-rotation mixes active and null
    assert generator_defects(gen, p).eta_mix > 1e-3
    # a post-rotation in [ESPR]'s family A (identity on the active subspace, any rotation on the null one)
    can = make('circulant').canonical()
    is_null = can.freqs[0].norm(dim=-1) < 1e-12  # [Dh/2] null pairs
    null_rows = torch.cat([can.basis[0][:DH // 2][is_null], can.basis[0][DH // 2:][is_null]])  # [4, Dh]
    rn = torch.linalg.qr(torch.randn(4, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64))[0]
    p_struct = eye + null_rows.T @ (rn - torch.eye(4, dtype=torch.float64)) @ null_rows
    assert torch.allclose(p_struct.T @ p_struct, eye, atol=TOL)
    assert generator_defects(gen, p_struct).eta_mix <= TOL

"""API contract of string_perception.encodings: names, argument checking, dtypes, shapes, devices."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.encodings import (  # noqa: E402
    ENCODING_NAMES, CanonicalForm, PositionEncoding, apply_rope_mixed,
    build_position_encoding, fold_basis_into_projection)

KW = dict(head_dim=16, num_heads=2, coord_dim=3)


def test_names_and_types():
    assert ENCODING_NAMES == ('none', 'rope', 'rope_mixed', 'cayley', 'circulant', 'dense')
    for name in ENCODING_NAMES:
        enc = build_position_encoding(name, **KW)
        assert isinstance(enc, PositionEncoding) and isinstance(enc.canonical(), CanonicalForm)


@pytest.mark.parametrize('name', ENCODING_NAMES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.bfloat16])
def test_dtypes_roundtrip_and_agree(name, dtype):
    torch.manual_seed(0)
    enc = build_position_encoding(name, **KW)
    x, r = torch.randn(2, 2, 5, 16), torch.randn(2, 5, 3)
    ref = enc(x.double(), r.double())
    out = enc(x.to(dtype), r.to(dtype))
    assert out.dtype == dtype and out.shape == x.shape
    tol = {torch.float32: 1e-5, torch.float64: 1e-5, torch.bfloat16: 0.1}[dtype]
    # bf16: the inputs themselves are rounded; the rotation is computed in float32
    assert torch.allclose(out.double(), enc(x.to(dtype).double(), r.to(dtype).double()), atol=tol)
    if dtype != torch.bfloat16:
        assert torch.allclose(out.double(), ref, atol=tol)


def test_float32_module_accepts_float64_inputs_and_vice_versa():
    enc = build_position_encoding('cayley', **KW)
    with torch.no_grad():
        enc.weight.normal_()
    x, r = torch.randn(1, 2, 4, 16, dtype=torch.float64), torch.randn(1, 4, 3, dtype=torch.float64)
    assert enc(x, r).dtype == torch.float64
    assert enc.double()(x.float(), r.float()).dtype == torch.float32


def test_coords_batch_of_one_broadcasts():
    enc = build_position_encoding('rope_mixed', **KW)
    x, r = torch.randn(3, 2, 4, 16), torch.randn(1, 4, 3)
    assert torch.allclose(enc(x, r), enc(x, r.expand(3, 4, 3)))


@pytest.mark.parametrize('name', ENCODING_NAMES)
def test_state_dict_roundtrip(name):
    a = build_position_encoding(name, **KW)
    with torch.no_grad():
        for p in a.parameters():
            p.normal_()
    b = build_position_encoding(name, **KW)
    b.load_state_dict(a.state_dict())
    x, r = torch.randn(1, 2, 4, 16), torch.randn(1, 4, 3)
    assert torch.equal(a(x, r), b(x, r))


@pytest.mark.parametrize('kwargs,match', [
    (dict(name='rope', head_dim=15, num_heads=2, coord_dim=2), 'head_dim must be a positive even'),
    (dict(name='circulant', head_dim=7, num_heads=2, coord_dim=2), 'even'),
    (dict(name='rope', head_dim=16, num_heads=0, coord_dim=2), 'num_heads'),
    (dict(name='rope', head_dim=16, num_heads=2, coord_dim=0), 'coord_dim'),
    (dict(name='string', head_dim=16, num_heads=2, coord_dim=2), "valid names: none, rope, rope_mixed, cayley"),
    (dict(name='rope', head_dim=16, num_heads=2, coord_dim=2, bsae=10.0), r"unknown argument.*bsae.*valid: \['base'\]"),
    (dict(name='circulant', head_dim=16, num_heads=2, coord_dim=2, block_size=6), 'block_size'),
    (dict(name='circulant', head_dim=16, num_heads=2, coord_dim=2, init='zeros'), 'init'),
    (dict(name='cayley', head_dim=16, num_heads=2, coord_dim=2, band=0), 'band'),
])
def test_bad_constructor_arguments(kwargs, match):
    kwargs = dict(kwargs)
    with pytest.raises(ValueError, match=match):
        build_position_encoding(kwargs.pop('name'), **kwargs)


@pytest.mark.parametrize('x_shape,r_shape,match', [
    ((2, 5, 16), (2, 5, 3), r'rank 4'),
    ((1, 2, 2, 5, 16), (2, 5, 3), r'rank 4'),
    ((2, 2, 5, 16), (2, 5, 2), 'coordinate dim mismatch.*coord_dim=3.*dc=2'),
    ((2, 2, 5, 16), (2, 4, 3), 'does not match'),
    ((2, 2, 5, 16), (5, 3), 'rank 3'),
    ((2, 3, 5, 16), (2, 5, 3), 'head count mismatch'),
    ((2, 2, 5, 8), (2, 5, 3), 'head dim mismatch'),
])
@pytest.mark.parametrize('name', ['none', 'rope', 'circulant'])
def test_bad_forward_inputs(name, x_shape, r_shape, match):
    enc = build_position_encoding(name, **KW)
    with pytest.raises(ValueError, match=match):
        enc(torch.randn(*x_shape), torch.randn(*r_shape))


def test_integer_inputs_rejected():
    enc = build_position_encoding('rope', **KW)
    with pytest.raises(ValueError, match='floating point'):
        enc(torch.randn(1, 2, 4, 16), torch.zeros(1, 4, 3, dtype=torch.long))


def test_apply_rope_mixed_checks_freqs_and_broadcasts_heads():
    x, r = torch.randn(1, 2, 4, 16), torch.randn(1, 4, 3)
    with pytest.raises(ValueError, match='freqs must have shape'):
        apply_rope_mixed(x, r, torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match='coordinate dim mismatch'):
        apply_rope_mixed(x, r, torch.randn(2, 8, 2))
    f = torch.randn(1, 8, 3)
    assert torch.allclose(apply_rope_mixed(x, r, f), apply_rope_mixed(x, r, f.expand(2, 8, 3)))


def test_fold_checks_shapes():
    basis = torch.eye(16).expand(2, 16, 16)
    with pytest.raises(ValueError, match=r'\[H\*Dh, D_in\]'):
        fold_basis_into_projection(torch.randn(30, 4), None, basis)
    with pytest.raises(ValueError, match='heads'):
        fold_basis_into_projection(torch.randn(48, 4), None, basis)
    with pytest.raises(ValueError, match='bias'):
        fold_basis_into_projection(torch.randn(32, 4), torch.randn(31), basis)
    with pytest.raises(ValueError, match='basis'):
        fold_basis_into_projection(torch.randn(32, 4), None, torch.eye(16))


@pytest.mark.parametrize('name', ['rope_mixed', 'cayley', 'circulant'])
def test_autocast_does_not_lower_rotation_precision(name):
    torch.manual_seed(0)
    enc = build_position_encoding(name, **KW)
    with torch.no_grad():
        for p in enc.parameters():
            p.normal_(0, 0.3)
    x, r = torch.randn(1, 2, 6, 16), torch.randn(1, 6, 3) * 20  # large angles: bf16 matmul would be off
    ref = enc(x, r)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = enc(x, r)
        out_op = apply_rope_mixed(x, r, enc.canonical().freqs.float())
    assert out.dtype == torch.float32 and torch.allclose(out, ref, atol=1e-4)
    assert torch.allclose(out_op, apply_rope_mixed(x, r, enc.canonical().freqs.float()), atol=1e-5)

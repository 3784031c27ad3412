"""Property-based checks over shapes (hypothesis): odd block counts, dc > Dh/2, Dh = 2, shared heads, etc."""
import pytest  # noqa: E402
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from string_perception.encodings import (ENCODING_NAMES, apply_rope_mixed, apply_string_expm,  # noqa: E402
                                         build_position_encoding, generator_defects)


@st.composite
def configs(draw):
    name = draw(st.sampled_from(ENCODING_NAMES))
    head_dim = 2 * draw(st.integers(1, 10))
    kw = {}
    if name == 'circulant':
        kw['block_size'] = draw(st.sampled_from([b for b in range(2, head_dim + 1, 2) if head_dim % b == 0]))
    if name == 'cayley':
        kw['band'] = draw(st.one_of(st.none(), st.integers(1, head_dim)))
    return dict(name=name, head_dim=head_dim, num_heads=draw(st.integers(1, 3)), coord_dim=draw(st.integers(1, 4)),
                shared_across_heads=draw(st.booleans()), seed=draw(st.integers(0, 2 ** 16)), **kw)


@settings(max_examples=40, deadline=None)
@given(configs())
def test_forward_equals_oracle_and_canonical_form(cfg):
    cfg = dict(cfg)
    seed = cfg.pop('seed')
    torch.manual_seed(seed)
    enc = build_position_encoding(cfg.pop('name'), **cfg).double()
    with torch.no_grad():
        for p in enc.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    h, dh, dc = enc.num_heads, enc.head_dim, enc.coord_dim
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, h, 3, dh, generator=g, dtype=torch.float64)
    r = torch.randn(2, 3, dc, generator=g, dtype=torch.float64) * 2
    out = enc(x, r)
    assert torch.allclose(out, apply_string_expm(x, r, enc.generators()), atol=1e-10)
    can = enc.canonical()
    assert torch.allclose(apply_rope_mixed(x @ can.basis.transpose(-1, -2), r, can.freqs) @ can.basis, out,
                          atol=1e-10)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-10)
    d = generator_defects(enc.generators())
    assert d.epsilon <= 1e-10 and d.eta_mix <= 1e-10

"""STRING position encodings (paper 000 §3; seed 001): R(r) ∈ SO(Dh) applied to queries and keys.

    ENCODING_NAMES
    build_position_encoding(name, *, head_dim, num_heads, coord_dim, shared_across_heads=False, **kw)
    PositionEncoding.forward(x[B,H,N,Dh], coords[B,N,dc]) -> R(r) x
    PositionEncoding.canonical() -> CanonicalForm(basis[H,Dh,Dh], freqs[H,Dh/2,dc])  (float64, detached)
    apply_rope_mixed(x, coords, freqs)                  # the only op of the exported graph
    fold_basis_into_projection(weight, bias, basis)     # W <- P W per head

Rot pairs are half-split: pair u = dims (u, u + Dh/2); see `base.py`.
"""
from __future__ import annotations

from .base import CanonicalForm, PositionEncoding, apply_rope_mixed
from .fold import fold_basis_into_projection
from .rope import IdentityEncoding, RoPEEncoding, RoPEMixedEncoding

__all__ = ['ENCODING_NAMES', 'build_position_encoding', 'apply_rope_mixed', 'fold_basis_into_projection',
           'CanonicalForm', 'PositionEncoding']

ENCODING_NAMES = ('none', 'rope', 'rope_mixed', 'cayley', 'circulant', 'dense')


def _registry() -> dict:
    reg = {'none': IdentityEncoding, 'rope': RoPEEncoding, 'rope_mixed': RoPEMixedEncoding}
    try:  # variants still being written land here as they are committed
        from .cayley import CayleyStringEncoding
        reg['cayley'] = CayleyStringEncoding
    except ImportError:
        pass
    try:
        from .circulant import CirculantStringEncoding
        reg['circulant'] = CirculantStringEncoding
    except ImportError:
        pass
    try:
        from .dense import DenseStringEncoding
        reg['dense'] = DenseStringEncoding
    except ImportError:
        pass
    return reg


def build_position_encoding(name: str, *, head_dim: int, num_heads: int, coord_dim: int,
                            shared_across_heads: bool = False, **variant_kwargs) -> PositionEncoding:
    """Build the position encoding `name` (one of ENCODING_NAMES); variant_kwargs go to its constructor."""
    if name not in ENCODING_NAMES:
        raise ValueError(f'unknown position encoding {name!r}; valid names: {", ".join(ENCODING_NAMES)}')
    reg = _registry()
    if name not in reg:
        raise NotImplementedError(f'position encoding {name!r} is not implemented yet')
    try:
        return reg[name](head_dim=head_dim, num_heads=num_heads, coord_dim=coord_dim,
                         shared_across_heads=shared_across_heads, **variant_kwargs)
    except TypeError as e:  # unexpected keyword for this variant
        raise ValueError(f'bad arguments for position encoding {name!r}: {e}') from e

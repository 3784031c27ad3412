"""STRING position encodings ([STRING] §3; [ESPR]): R(r) ∈ SO(Dh) applied to queries and keys.

    ENCODING_NAMES                      # rotations R(r) ∈ SO(Dh): q, k keep their size
    EXPANDING_ENCODING_NAMES            # ('tensor_product',): ⊗-STRING, q/k heads grow to 2m·Dh
    ALL_ENCODING_NAMES                  # every name the factory (and ViTDConfig.encoding) accepts
    build_position_encoding(name, *, head_dim, num_heads, coord_dim, shared_across_heads=False, **kw)
    PositionEncoding.forward(x[B,H,N,Dh], coords[B,N,dc]) -> R(r) x        (same dtype as x)
    PositionEncoding.canonical() -> CanonicalForm(basis[H,Dh,Dh], freqs[H,Dh/2,dc])   (float64, detached)
    PositionEncoding.generators() -> L[H,dc,Dh,Dh] (float64): R(r) = expm(Σ_k r_k L_k)
    apply_rope_mixed(x, coords, freqs)                  # the only op of the exported graph
    fold_basis_into_projection(weight, bias, basis)     # W <- P W per head

    canonical_coordinates(name, points) / COORDINATE_TRANSFORMS   # Lie-group STRING (lie.py)

Rot pairs are half-split: pair u = dims (u, u + Dh/2); see `base.py`.
shared_across_heads=True: parameters have a leading head axis of 1 (broadcast); canonical()/generators()
still return all H heads (identical), so export code never needs to special-case it.
"""
from __future__ import annotations

import inspect

from .base import CanonicalForm, PositionEncoding, apply_rope_mixed
from .canonical import canonical_from_generators, joint_block_diagonalize, materialize_rotations
from .cayley import CayleyStringEncoding
from .circulant import CirculantStringEncoding
from .defects import Defects, generator_defects
from .dense import DenseStringEncoding, apply_string_expm
from .fold import fold_basis_into_projection
from .lie import COORDINATE_TRANSFORMS, azimuth_polar_coordinates, canonical_coordinates
from .rope import IdentityEncoding, RoPEEncoding, RoPEMixedEncoding
from .tensor_product import TensorProductEncoding, fourier_features

__all__ = ['ENCODING_NAMES', 'EXPANDING_ENCODING_NAMES', 'ALL_ENCODING_NAMES', 'COORDINATE_TRANSFORMS',
           'build_position_encoding', 'apply_rope_mixed', 'fold_basis_into_projection', 'canonical_coordinates',
           'azimuth_polar_coordinates', 'TensorProductEncoding', 'fourier_features', 'CanonicalForm',
           'PositionEncoding', 'canonical_from_generators', 'joint_block_diagonalize', 'materialize_rotations',
           'generator_defects', 'Defects', 'apply_string_expm', 'IdentityEncoding', 'RoPEEncoding',
           'RoPEMixedEncoding', 'CayleyStringEncoding', 'CirculantStringEncoding', 'DenseStringEncoding']

ENCODING_NAMES = ('none', 'rope', 'rope_mixed', 'cayley', 'circulant', 'dense')
EXPANDING_ENCODING_NAMES = ('tensor_product',)
ALL_ENCODING_NAMES = ENCODING_NAMES + EXPANDING_ENCODING_NAMES

_CLASSES = {'none': IdentityEncoding, 'rope': RoPEEncoding, 'rope_mixed': RoPEMixedEncoding,
            'cayley': CayleyStringEncoding, 'circulant': CirculantStringEncoding, 'dense': DenseStringEncoding,
            'tensor_product': TensorProductEncoding}


def build_position_encoding(name: str, *, head_dim: int, num_heads: int, coord_dim: int,
                            shared_across_heads: bool = False, **variant_kwargs) -> PositionEncoding:
    """Build the position encoding `name` (one of ALL_ENCODING_NAMES); variant_kwargs go to its constructor.

    Variant kwargs: rope: base (10 000). rope_mixed: base (100), generator. cayley: band, base, generator.
    circulant: block_size, init, base, init_std, generator. dense: base, init_std, generator.
    tensor_product: num_features, base, generator.
    """
    if name not in _CLASSES:
        raise ValueError(f'unknown position encoding {name!r}; valid names: {", ".join(ALL_ENCODING_NAMES)}')
    cls = _CLASSES[name]
    allowed = {p.name for c in cls.__mro__ if issubclass(c, PositionEncoding) and '__init__' in vars(c)
               for p in inspect.signature(c.__init__).parameters.values()
               if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(variant_kwargs) - allowed)
    if unknown:
        valid = sorted(allowed - {'head_dim', 'num_heads', 'coord_dim', 'shared_across_heads'})
        raise ValueError(f'unknown argument(s) {unknown} for position encoding {name!r}; '
                         f'valid: {valid or "none"}')
    return cls(head_dim=head_dim, num_heads=num_heads, coord_dim=coord_dim,
               shared_across_heads=shared_across_heads, **variant_kwargs)

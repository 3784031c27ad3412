"""Cheap Gaussian noise: slices of one fixed bank of N(0,1) samples at a random offset per draw.

Drawing fresh Gaussians costs more than the whole ray cast of a 128x128 frame; a contiguous slice of i.i.d.
samples is itself i.i.d., and the offset comes from the frame's own generator, so frames stay deterministic per
(seed, config). Draws larger than a quarter of the bank fall back to fresh samples.
"""
from __future__ import annotations

import numpy as np

_BANK_SIZE = 1 << 21
_bank: np.ndarray | None = None


def _get_bank() -> np.ndarray:
    global _bank
    if _bank is None:
        _bank = np.random.default_rng(0x5CE7E5).standard_normal(_BANK_SIZE, dtype=np.float32)
        _bank.flags.writeable = False
    return _bank


def gaussian(rng: np.random.Generator, shape) -> np.ndarray:
    """float32 N(0,1) samples of `shape` (read-only view when taken from the bank)."""
    n = int(np.prod(shape))
    if n > _BANK_SIZE // 4:
        return rng.standard_normal(shape, dtype=np.float32)
    start = int(rng.integers(0, _BANK_SIZE - n + 1))
    return _get_bank()[start:start + n].reshape(shape)

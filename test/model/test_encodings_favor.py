"""Positive orthogonal random features: unbiased for the softmax kernel, and usable after STRING."""
import math

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.encodings import build_position_encoding  # noqa: E402
from string_perception.encodings.favor import (favor_attention, orthogonal_gaussian_features,  # noqa: E402
                                               positive_random_features, softmax_attention)

D, M = 8, 40_000


def _pairs(seed=0, n=6, scale=0.35):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, D, generator=g, dtype=torch.float64) * scale,
            torch.randn(n, D, generator=g, dtype=torch.float64) * scale)


def test_features_are_orthogonal_blocks_with_gaussian_norms():
    w = orthogonal_gaussian_features(3 * D, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    block = w[:D] / w[:D].norm(dim=1, keepdim=True)
    assert torch.allclose(block @ block.T, torch.eye(D, dtype=torch.float64), atol=1e-12)
    big = orthogonal_gaussian_features(M, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert (big.pow(2).sum(1).mean() - D).abs() < 0.1 * D  # E‖w‖² = d
    with pytest.raises(ValueError):
        orthogonal_gaussian_features(0, D)


def test_estimator_is_unbiased_for_the_softmax_kernel():
    """Mean relative error over 36 pairs ~ √((e^{‖x+y‖²}−1)/m) ≈ 0.01; 5 % fails a sign error by far."""
    x, y = _pairs()
    w = orthogonal_gaussian_features(M, D, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    est = positive_random_features(x, w) @ positive_random_features(y, w).T  # [6, 6]
    exact = torch.exp(x @ y.T)
    assert ((est - exact).abs() / exact).mean() < 0.05
    # [ESPR]'s φ(x) = exp(+‖x‖²/2) exp(wᵀx) is biased by exp(‖x‖² + ‖y‖²): this test would catch it
    wrong = torch.exp(x @ w.T + 0.5 * x.pow(2).sum(1, keepdim=True)) @ torch.exp(
        y @ w.T + 0.5 * y.pow(2).sum(1, keepdim=True)).T / M
    assert ((wrong - exact).abs() / exact).mean() > 0.3
    assert (est > 0).all()


def test_favor_attention_after_string_approximates_softmax_attention():
    torch.manual_seed(0)
    enc = build_position_encoding('circulant', head_dim=D, num_heads=2, coord_dim=3, block_size=4).double()
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(1, 2, 10, D, generator=g, dtype=torch.float64) * 0.6 for _ in range(2))
    v = torch.randn(1, 2, 10, 4, generator=g, dtype=torch.float64)
    r = torch.randn(1, 10, 3, generator=g, dtype=torch.float64) * 3
    with torch.no_grad():
        qe, ke = enc(q, r), enc(k, r)
    w = orthogonal_gaussian_features(M, D, generator=g, dtype=torch.float64)
    exact = softmax_attention(qe, ke, v)
    approx = favor_attention(qe, ke, v, w)
    assert approx.shape == exact.shape and approx.dtype == torch.float64
    assert (approx - exact).abs().max() < 0.05
    # translating every coordinate leaves the exact attention unchanged and the estimate within noise
    t = torch.tensor([[[5.0, -2.0, 1.0]]], dtype=torch.float64)
    with torch.no_grad():
        moved = favor_attention(enc(q, r + t), enc(k, r + t), v, w)
    assert (moved - exact).abs().max() < 0.05
    assert math.isfinite(float(favor_attention(qe * 4, ke * 4, v, w).abs().max()))  # stabilised

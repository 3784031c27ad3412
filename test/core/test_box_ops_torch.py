"""box_ops_torch equals the numpy reference and is differentiable."""
import numpy as np
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception import box_ops as bo  # noqa: E402
from string_perception import box_ops_torch as bt  # noqa: E402


@pytest.fixture
def params():
    rng = np.random.default_rng(0)
    p = rng.normal(size=(3, 4, 12))
    p[..., 9:] = rng.uniform(0.05, 2.0, size=(3, 4, 3))
    return p


def test_rotation_from_6d_matches_numpy(params):
    x6 = params[..., 3:9]
    np.testing.assert_allclose(bt.rotation_from_6d(torch.from_numpy(x6)).numpy(), bo.rotation_from_6d(x6),
                               atol=1e-12)
    np.testing.assert_allclose(bt.rotation_to_6d(torch.from_numpy(bo.rotation_from_6d(x6))).numpy(),
                               bo.rotation_to_6d(bo.rotation_from_6d(x6)))


def test_decode_and_corners_match_numpy(params):
    tp = torch.from_numpy(params)
    for a, b in zip(bt.decode_box_params(tp), bo.decode_box_params(params)):
        np.testing.assert_allclose(a.numpy(), b, atol=1e-12)
    np.testing.assert_allclose(bt.params_to_corners(tp).numpy(), bo.box_corners(*bo.decode_box_params(params)),
                               atol=1e-12)
    # float32 stays float32 and close
    c32 = bt.params_to_corners(tp.float())
    assert c32.dtype == torch.float32
    np.testing.assert_allclose(c32.numpy(), bo.box_corners(*bo.decode_box_params(params)), atol=1e-5)


def test_gradients_are_finite(params):
    tp = torch.from_numpy(params).requires_grad_(True)
    bt.params_to_corners(tp).sum().backward()
    assert torch.isfinite(tp.grad).all() and tp.grad.abs().sum() > 0
    z = torch.zeros(2, 6, requires_grad=True)          # degenerate: stays finite
    bt.rotation_from_6d(z).sum().backward()
    assert torch.isfinite(z.grad).all()


def test_bad_shape():
    with pytest.raises(ValueError):
        bt.decode_box_params(torch.zeros(2, 9))

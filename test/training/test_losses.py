"""SetCriterion: zero box losses for a perfect prediction, gradients flow, empty targets stay finite."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.matcher import HungarianMatcher  # noqa: E402
from string_perception.training.losses import SetCriterion, sigmoid_focal_loss  # noqa: E402

C = 4


def make_boxes(n, gen):
    t = torch.randn(n, 3, generator=gen) + torch.tensor([0.0, 0.0, 3.0])
    x6 = torch.randn(n, 6, generator=gen)
    return torch.cat([t, x6, torch.rand(n, 3, generator=gen) + 0.1], dim=-1)


def batch(sizes=(3, 2), N=8, seed=0, requires_grad=False):
    gen = torch.Generator().manual_seed(seed)
    B = len(sizes)
    outputs = {'logits': torch.randn(B, N, C, generator=gen), 'boxes': make_boxes(B * N, gen).view(B, N, 12)}
    targets = [{'labels': torch.randint(0, C, (m,), generator=gen), 'boxes': make_boxes(m, gen)} for m in sizes]
    if requires_grad:
        outputs = {k: v.requires_grad_(True) for k, v in outputs.items()}
    return outputs, targets


def perfect_outputs(targets, N=8):
    """Predictions that contain every target exactly, with confident right classes; the rest confidently empty."""
    B = len(targets)
    logits = torch.full((B, N, C), -20.0)
    boxes = torch.zeros(B, N, 12)
    boxes[..., 3] = boxes[..., 7] = 1.0
    boxes[..., 9:] = 0.5
    boxes[..., 2] = 50.0                          # far away from every target
    for b, t in enumerate(targets):
        m = len(t['labels'])
        boxes[b, 1:1 + m] = t['boxes']
        logits[b, torch.arange(1, 1 + m), t['labels']] = 20.0
    return {'logits': logits, 'boxes': boxes}


def test_perfect_prediction_has_zero_box_losses_and_tiny_class_loss():
    _, targets = batch()
    crit = SetCriterion(C)
    losses = crit(perfect_outputs(targets), targets)
    assert set(losses) == {'class', 'params', 'corners', 'loss'}
    assert losses['params'].item() == 0.0
    assert losses['corners'].item() == 0.0
    assert losses['class'].item() < 1e-6


def test_known_values_single_pair():
    gen = torch.Generator().manual_seed(3)
    tgt = make_boxes(1, gen)
    pred = tgt.clone()
    pred[0, 0] += 0.3                             # translation off by 0.3 m along x
    outputs = {'logits': torch.full((1, 1, C), -20.0), 'boxes': pred[None]}
    outputs['logits'][0, 0, 2] = 20.0
    losses = SetCriterion(C)(outputs, [{'labels': torch.tensor([2]), 'boxes': tgt}])
    assert losses['params'].item() == pytest.approx(0.3, abs=1e-6)
    assert losses['corners'].item() == pytest.approx(0.3, abs=1e-6)   # every corner moves by 0.3 (L1)
    w = SetCriterion(C).weights
    assert losses['loss'].item() == pytest.approx(w['params'] * 0.3 + w['corners'] * 0.3 + w['class'] *
                                                  losses['class'].item(), rel=1e-6)


def test_gradients_flow_to_logits_and_boxes():
    outputs, targets = batch(requires_grad=True)
    losses = SetCriterion(C)(outputs, targets)
    losses['loss'].backward()
    for k in ('logits', 'boxes'):
        g = outputs[k].grad
        assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0
    # Unmatched tokens get no box gradient.
    assert outputs['boxes'].grad.abs().sum(-1).eq(0).any()


def test_empty_targets_are_finite_and_push_scores_down():
    outputs, _ = batch(sizes=(0, 0), requires_grad=True)
    empty = {'labels': torch.zeros(0, dtype=torch.int64), 'boxes': torch.zeros(0, 12)}
    losses = SetCriterion(C)(outputs, [empty, empty])
    assert all(torch.isfinite(v) for v in losses.values())
    assert losses['params'].item() == 0.0 and losses['corners'].item() == 0.0
    losses['loss'].backward()
    assert (outputs['logits'].grad > 0).all()              # every score is pushed towards "no object"
    assert torch.isfinite(outputs['boxes'].grad).all()


def test_mixed_empty_and_non_empty_frames():
    outputs, targets = batch(sizes=(0, 4))
    losses = SetCriterion(C)(outputs, targets)
    assert all(torch.isfinite(v) for v in losses.values()) and losses['params'] > 0


def test_weights_and_custom_matcher():
    outputs, targets = batch()
    crit = SetCriterion(C, matcher=HungarianMatcher(cost_class=0.0), weights={'corners': 0.0})
    losses = crit(outputs, targets)
    assert losses['loss'].item() == pytest.approx(2.0 * losses['class'].item() + 5.0 * losses['params'].item(),
                                                  rel=1e-6)
    with pytest.raises(ValueError):
        SetCriterion(C, weights={'giou': 1.0})
    with pytest.raises(ValueError):
        SetCriterion(C + 1)(outputs, targets)


def test_focal_loss_reference_values():
    x = torch.tensor([0.0, 2.0, -2.0])
    t = torch.tensor([1.0, 0.0, 1.0])
    p = torch.sigmoid(x)
    expected = torch.stack([0.25 * 0.5 ** 2 * -torch.log(p[0]),
                            0.75 * p[1] ** 2 * -torch.log(1 - p[1]),
                            0.25 * (1 - p[2]) ** 2 * -torch.log(p[2])])
    torch.testing.assert_close(sigmoid_focal_loss(x, t), expected)

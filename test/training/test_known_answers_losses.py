"""SetCriterion on 2 frames x 2 boxes with every loss value computed by hand, and its DDP normalisation.

Hand values use the formulas of training/losses.py's docstring, written out here in float64 with ``math``:
class = sum of the sigmoid focal loss over all B*N*C logits / num_boxes; params = sum of |d| over the 12 numbers
of the matched pairs / num_boxes; corners = sum over pairs of the mean over 8 corners of the L1 corner error /
num_boxes; loss = 2 class + 5 params + 2 corners.
"""
import math

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from string_perception.training.losses import SetCriterion, sigmoid_focal_loss  # noqa: E402

C = 3
ALPHA, GAMMA = 0.25, 2.0


def axis_box(x=0.0, y=0.0, z=3.0, size=(1.0, 1.0, 1.0)):
    return torch.tensor([x, y, z, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, *size])


def focal_loss(x, target):
    """Sigmoid focal loss of one logit, by hand."""
    p = 1.0 / (1.0 + math.exp(-x))
    p_t = p if target else 1 - p
    a_t = ALPHA if target else 1 - ALPHA
    return a_t * (1 - p_t) ** GAMMA * -math.log(p_t)


# Frame 0: targets at x = -2 (class 0) and x = +2 (class 2); frame 1: targets at x = -2 (class 1), x = +2 (class 1).
TARGET_X = (-2.0, 2.0)
LABELS = ([0, 2], [1, 1])
# Predictions: tokens 0 and 1 near the targets, token 2 far away (unmatched). Offsets of the matched tokens:
#   frame 0 token 0: translation +0.1 in x            params 0.1, corners 0.1
#   frame 0 token 1: translation (0.2, -0.1, 0)        params 0.3, corners 0.3
#   frame 1 token 0: size x 1.0 -> 1.4                 params 0.4, corners 0.2 (each corner moves half of it)
#   frame 1 token 1: translation z +0.3, size z +0.2   params 0.5, corners 0.3 (top corners 0.4, bottom 0.2)
PRED_BOXES = [[axis_box(-1.9), axis_box(2.2, -0.1), axis_box(0.0, 0.0, 30.0)],
              [axis_box(-2.0, size=(1.4, 1.0, 1.0)), axis_box(2.0, 0.0, 3.3, size=(1.0, 1.0, 1.2)),
               axis_box(0.0, 0.0, 30.0)]]
PARAMS_SUM, CORNERS_SUM = 0.1 + 0.3 + 0.4 + 0.5, 0.1 + 0.3 + 0.2 + 0.3
LOGITS = [[[2.0, -1.0, -3.0], [-2.0, 0.5, 1.5], [-1.0, -2.0, 0.0]],
          [[-1.5, 1.0, -2.5], [0.3, 2.5, -0.7], [-3.0, -0.5, -1.2]]]


def batch():
    outputs = {'boxes': torch.stack([torch.stack(f) for f in PRED_BOXES]),                   # [2,3,12]
               'logits': torch.tensor(LOGITS)}                                                # [2,3,C]
    targets = [{'labels': torch.tensor(lab), 'boxes': torch.stack([axis_box(x) for x in TARGET_X])}
               for lab in LABELS]
    return outputs, targets


def class_loss_sum():
    """Focal loss summed over every logit: matched token i of frame b has target one-hot(LABELS[b][i])."""
    total = 0.0
    for b, frame in enumerate(LOGITS):
        for i, row in enumerate(frame):
            for c, x in enumerate(row):
                total += focal_loss(x, i < 2 and LABELS[b][i] == c)
    return total


def test_two_frames_two_boxes_hand_computed():
    outputs, targets = batch()
    crit = SetCriterion(C)
    for p, t in crit.matcher(outputs, targets):            # token i <-> target i (they are metres apart otherwise)
        assert p.tolist() == [0, 1] and t.tolist() == [0, 1]
    losses = crit(outputs, targets)
    num_boxes = 4
    assert losses['params'].item() == pytest.approx(PARAMS_SUM / num_boxes, rel=1e-5)        # 0.325
    assert losses['corners'].item() == pytest.approx(CORNERS_SUM / num_boxes, rel=1e-5)      # 0.225
    assert losses['class'].item() == pytest.approx(class_loss_sum() / num_boxes, rel=1e-5)   # sum / 4, not mean
    assert losses['loss'].item() == pytest.approx(
        2.0 * class_loss_sum() / 4 + 5.0 * PARAMS_SUM / 4 + 2.0 * CORNERS_SUM / 4, rel=1e-5)


def test_losses_are_per_box_so_adding_an_empty_frame_changes_nothing():
    outputs, targets = batch()
    full = SetCriterion(C)(outputs, targets)
    # a third frame with no target and confidently empty tokens: the per-box averages stay (class gains ~0)
    outputs3 = {'boxes': torch.cat([outputs['boxes'], outputs['boxes'][:1]]),
                'logits': torch.cat([outputs['logits'], torch.full((1, 3, C), -30.0)])}
    empty = {'labels': torch.zeros(0, dtype=torch.int64), 'boxes': torch.zeros(0, 12)}
    more = SetCriterion(C)(outputs3, targets + [empty])
    for k in ('params', 'corners', 'class'):
        assert more[k].item() == pytest.approx(full[k].item(), rel=1e-6), k


class FakeTwoRanks:
    """torch.distributed as seen by rank 0 of 2, the other rank holding ``other`` target boxes."""

    def __init__(self, other):
        self.other, self.reduced = other, 0

    def all_reduce(self, tensor, op=None):
        tensor += self.other                        # SUM, in place, as dist.all_reduce does
        self.reduced += 1


@pytest.mark.parametrize('other_rank_boxes,expected_num_boxes', [(8, 6.0), (0, 2.0)])
def test_ddp_divides_by_the_mean_box_count_over_ranks(monkeypatch, other_rank_boxes, expected_num_boxes):
    # this rank has 4 boxes, the other rank `other_rank_boxes`: every rank divides by their mean (DETR)
    fake = FakeTwoRanks(other_rank_boxes)
    monkeypatch.setattr(dist, 'is_available', lambda: True)
    monkeypatch.setattr(dist, 'is_initialized', lambda: True)
    monkeypatch.setattr(dist, 'get_world_size', lambda group=None: 2)
    monkeypatch.setattr(dist, 'all_reduce', fake.all_reduce)
    outputs, targets = batch()
    losses = SetCriterion(C)(outputs, targets)
    assert fake.reduced == 1
    assert losses['params'].item() == pytest.approx(PARAMS_SUM / expected_num_boxes, rel=1e-5)
    assert losses['corners'].item() == pytest.approx(CORNERS_SUM / expected_num_boxes, rel=1e-5)
    assert losses['class'].item() == pytest.approx(class_loss_sum() / expected_num_boxes, rel=1e-5)


def test_ddp_rank_without_boxes_divides_by_the_mean_not_by_one(monkeypatch):
    # a rank whose frames are all empty still divides by the mean over ranks (here (0 + 6) / 2 = 3)
    fake = FakeTwoRanks(6)
    monkeypatch.setattr(dist, 'is_available', lambda: True)
    monkeypatch.setattr(dist, 'is_initialized', lambda: True)
    monkeypatch.setattr(dist, 'get_world_size', lambda group=None: 2)
    monkeypatch.setattr(dist, 'all_reduce', fake.all_reduce)
    outputs, _ = batch()
    empty = {'labels': torch.zeros(0, dtype=torch.int64), 'boxes': torch.zeros(0, 12)}
    losses = SetCriterion(C)(outputs, [empty, empty])
    every_logit_negative = sum(focal_loss(x, False) for frame in LOGITS for row in frame for x in row)
    assert losses['class'].item() == pytest.approx(every_logit_negative / 3.0, rel=1e-5)


def test_empty_targets_divide_by_one():
    # no box anywhere: num_boxes is clamped to 1, so the class loss is the plain sum over every logit
    outputs, _ = batch()
    empty = {'labels': torch.zeros(0, dtype=torch.int64), 'boxes': torch.zeros(0, 12)}
    losses = SetCriterion(C)(outputs, [empty, empty])
    every_logit_negative = sum(focal_loss(x, False) for frame in LOGITS for row in frame for x in row)
    assert losses['class'].item() == pytest.approx(every_logit_negative, rel=1e-5)
    assert losses['params'].item() == 0.0 and losses['corners'].item() == 0.0
    assert losses['loss'].item() == pytest.approx(2.0 * every_logit_negative, rel=1e-5)


def test_the_built_matcher_uses_the_loss_weights_and_focal_parameters():
    crit = SetCriterion(C, weights={'class': 0.5, 'params': 3.0, 'corners': 7.0}, focal_alpha=0.4, focal_gamma=1.5)
    m = crit.matcher
    assert (m.cost_class, m.cost_params, m.cost_corners, m.focal_alpha, m.focal_gamma) == (0.5, 3.0, 7.0, 0.4, 1.5)
    assert crit.weights == {'class': 0.5, 'params': 3.0, 'corners': 7.0}


def test_a_given_matcher_decides_the_pairs():
    # a matcher that pairs token 2 (far away) with target 0 and token 0 with target 1: the box losses follow it
    class Fixed(torch.nn.Module):
        def forward(self, outputs, targets):
            return [(torch.tensor([0, 2]), torch.tensor([1, 0])) for _ in targets]

    outputs, targets = batch()
    losses = SetCriterion(C, matcher=Fixed())(outputs, targets)
    by_hand = SetCriterion(C)(outputs, targets)
    assert losses['params'].item() > by_hand['params'].item() + 10.0     # token 2 sits 27 m from any target


def test_float64_targets_give_float32_losses_of_the_same_value():
    outputs, targets = batch()
    as64 = [{'labels': t['labels'], 'boxes': t['boxes'].double()} for t in targets]
    losses = SetCriterion(C)(outputs, as64)
    assert all(v.dtype == torch.float32 for v in losses.values())
    assert losses['params'].item() == pytest.approx(PARAMS_SUM / 4, rel=1e-5)


def test_bad_weights_and_class_counts_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match=r"unknown loss weights \['giou'\]; expected \['class', 'corners', 'params'\]"):
        SetCriterion(C, weights={'giou': 1.0})
    outputs, targets = batch()
    two_classes = {'boxes': outputs['boxes'], 'logits': torch.zeros(2, 3, 2)}          # [B=2, N=3, 2 classes]
    with pytest.raises(ValueError, match='logits have 2 classes, criterion expects 3'):
        SetCriterion(C)(two_classes, targets)


def test_focal_parameters_reach_the_class_loss():
    outputs, targets = batch()
    losses = SetCriterion(C, focal_alpha=0.5, focal_gamma=1.0)(outputs, targets)
    total = 0.0
    for b, frame in enumerate(LOGITS):
        for i, row in enumerate(frame):
            for c, x in enumerate(row):
                p = 1.0 / (1.0 + math.exp(-x))
                p_t = p if (i < 2 and LABELS[b][i] == c) else 1 - p
                total += 0.5 * (1 - p_t) * -math.log(p_t)                   # alpha 0.5 either way, gamma 1
    assert losses['class'].item() == pytest.approx(total / 4, rel=1e-5)


def test_focal_alpha_zero_weights_positives_by_zero_and_negative_alpha_disables_it():
    # alpha = 0 is a weight (positives x 0, negatives x 1), not "no alpha"; alpha < 0 leaves both unweighted
    logits, targets = torch.tensor([1.0, -0.5]), torch.tensor([1.0, 0.0])
    p = 1.0 / (1.0 + math.exp(-1.0))                                # positive: p_t = sigmoid(1)
    q = 1.0 - 1.0 / (1.0 + math.exp(0.5))                           # negative: p_t = 1 - sigmoid(-0.5)
    positive, negative = (1 - p) ** 2 * -math.log(p), (1 - q) ** 2 * -math.log(q)
    zero = sigmoid_focal_loss(logits, targets, alpha=0.0, gamma=2.0)
    assert zero[0].item() == 0.0
    assert zero[1].item() == pytest.approx(negative, rel=1e-6)
    off = sigmoid_focal_loss(logits, targets, alpha=-1.0, gamma=2.0)
    assert off.tolist() == pytest.approx([positive, negative], rel=1e-6)

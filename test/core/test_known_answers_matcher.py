"""HungarianMatcher on hand-computed costs: each cost term's value, and decisions that hinge on one term.

The other matcher tests use targets that are exact copies of predictions, where every cost term agrees; here each
case is built so that one term alone decides the assignment, and cost values are computed by hand from the
formulas in matcher.py's docstring (focal cost, L1 over the 12 numbers, L1 over corners / 8).
"""
import math

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.matcher import HungarianMatcher, focal_class_cost  # noqa: E402

C = 3
ALPHA, GAMMA = 0.25, 2.0


def axis_box(x=0.0, y=0.0, z=3.0, size=(1.0, 1.0, 1.0)):
    """12 numbers of an axis-aligned box (6D = identity's first two columns)."""
    return torch.tensor([x, y, z, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, *size])


def focal(x):
    """Focal matching cost of one logit by hand: alpha (1-p)^2 (-log p) - (1-alpha) p^2 (-log(1-p))."""
    p = 1.0 / (1.0 + math.exp(-x))
    return ALPHA * (1 - p) ** GAMMA * -math.log(p) - (1 - ALPHA) * p ** GAMMA * -math.log(1 - p)


def one_target(label, box):
    return [{'labels': torch.tensor([label]), 'boxes': box[None]}]


def outputs_of(boxes, logits):
    return {'boxes': torch.stack(boxes)[None], 'logits': torch.tensor(logits, dtype=torch.float32)[None]}


def test_focal_cost_values_and_sign():
    x = torch.tensor([-4.0, 0.0, 4.0])
    got = focal_class_cost(x).tolist()
    assert got == pytest.approx([focal(-4.0), focal(0.0), focal(4.0)], rel=1e-5)
    assert got[2] < got[1] < got[0]                     # a confident right class is the cheapest
    # hand values: p = sigmoid(4) = 0.982014; 0.75 * p^2 * log(1 / (1 - p)) = 2.906180 (the positive term ~1.5e-6)
    assert got[2] == pytest.approx(-2.906178, abs=1e-5) and got[0] == pytest.approx(0.968722, abs=1e-5)


def test_cost_value_is_the_weighted_sum_of_the_three_terms():
    # translation off by (0.3, 0.4, 0): L1 0.7 (L2 would be 0.5); every corner moves by the same vector, so the
    # corner term is 8 x 0.7 / 8 = 0.7 (5.6 without the /8)
    target = axis_box()
    pred = axis_box(0.3, 0.4)
    logits = [[1.5, -2.0, 0.5]]
    cost = HungarianMatcher().cost_matrices(outputs_of([pred], logits), one_target(1, target))
    assert cost.shape == (1, 1, 1)
    expected = 2.0 * focal(-2.0) + 5.0 * 0.7 + 2.0 * 0.7
    assert cost[0, 0, 0].item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize('term,weights,value', [
    ('class', (1.0, 0.0, 0.0), focal(-2.0)),
    ('params', (0.0, 1.0, 0.0), 0.3 + 0.4 + 0.2),       # translation 0.3 + 0.4, size z +0.2
    ('corners', (0.0, 0.0, 1.0), 0.7 + 0.1),            # every corner: 0.7 from translation, 0.1 in z from size
])
def test_each_cost_term_alone(term, weights, value):
    target = axis_box()
    pred = axis_box(0.3, 0.4, size=(1.0, 1.0, 1.2))
    m = HungarianMatcher(cost_class=weights[0], cost_params=weights[1], cost_corners=weights[2])
    cost = m.cost_matrices(outputs_of([pred], [[1.5, -2.0, 0.5]]), one_target(1, target))
    assert cost[0, 0, 0].item() == pytest.approx(value, rel=1e-5), term


def test_prob_class_cost_is_minus_the_probability():
    m = HungarianMatcher(class_cost='prob', cost_class=1.0, cost_params=0.0, cost_corners=0.0)
    cost = m.cost_matrices(outputs_of([axis_box()], [[0.0, 2.0, -1.0]]), one_target(1, axis_box()))
    assert cost[0, 0, 0].item() == pytest.approx(-1.0 / (1.0 + math.exp(-2.0)), rel=1e-6)


def test_same_box_different_logits_goes_to_the_right_class():
    # Two predictions of the target's box: token 0 exactly on it but confident of class 0, token 1 a centimetre off
    # but confident of the target's class 2. The class cost must decide (a sign flip or no class term picks 0).
    target = axis_box()
    preds = [axis_box(), axis_box(0.01)]
    logits = [[4.0, -4.0, -4.0], [-4.0, -4.0, 4.0]]
    p, t = HungarianMatcher()(outputs_of(preds, logits), one_target(2, target))[0]
    assert p.tolist() == [1] and t.tolist() == [0]
    # two targets of different classes on the same spot, two predictions on it: each gets its class
    targets = [{'labels': torch.tensor([2, 0]), 'boxes': torch.stack([target, target])}]
    p, t = HungarianMatcher()(outputs_of(preds, logits), targets)[0]
    assert dict(zip(t.tolist(), p.tolist())) == {0: 1, 1: 0}


def test_parameter_cost_is_l1_not_l2():
    # Token 0 is off by (0.3, 0.3, 0): L1 0.6, L2 0.42. Token 1 is off by (0.5, 0, 0): L1 0.5, L2 0.5.
    # L1 (params and corners alike) picks token 1: 5*0.5 + 2*0.5 = 3.5 < 5*0.6 + 2*0.6 = 4.2.
    # With an L2 parameter cost token 0 would win: 5*0.424 + 2*0.6 = 3.32 < 3.5.
    preds = [axis_box(0.3, 0.3), axis_box(0.5)]
    logits = [[3.0, -3.0, -3.0]] * 2
    m = HungarianMatcher()
    p, _ = m(outputs_of(preds, logits), one_target(0, axis_box()))[0]
    assert p.tolist() == [1]
    cost = m.cost_matrices(outputs_of(preds, logits), one_target(0, axis_box()))[0, :, 0]
    class_part = 2.0 * focal(3.0)
    assert (cost - class_part).tolist() == pytest.approx([4.2, 3.5], rel=1e-5)


def test_corner_cost_is_averaged_over_the_eight_corners():
    # Token 0: the target cube turned 90 degrees about z (6D part off by L1 4; each corner moves by L1 1).
    # Token 1: the target with size z 1 -> 1.6 (params L1 0.6; each corner moves 0.3 in z).
    # Costs (params + corners/8): token 0 4 + 1 = 5, token 1 0.6 + 0.3 = 0.9; without the /8 the corner term is
    # 8 and 2.4 and the values below fail.
    target = axis_box()
    rot = torch.tensor([0.0, 0.0, 3.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 1.0, 1.0, 1.0])   # R = Rz(90)
    taller = axis_box(size=(1.0, 1.0, 1.6))
    m = HungarianMatcher(cost_class=0.0, cost_params=1.0, cost_corners=1.0)
    cost = m.cost_matrices(outputs_of([rot, taller], [[0.0] * 3] * 2), one_target(0, target))[0, :, 0]
    # Rz(90) maps corner signs (sx, sy, sz) to (-sy, sx, sz): |dx| + |dy| = |sx + sy| + |sy - sx| = 1 for a unit
    # cube -> each corner moves by L1 1.0; the 6D part differs by |0-1|+|1-0| + |-1-0|+|0-1| = 4
    assert cost.tolist() == pytest.approx([4.0 + 1.0, 0.6 + 0.3], rel=1e-5)
    p, _ = m(outputs_of([rot, taller], [[0.0] * 3] * 2), one_target(0, target))[0]
    assert p.tolist() == [1]


def test_batched_cost_pads_and_keeps_images_apart():
    # image 0: one target; image 1: two targets. Known values per image; padding columns are never assigned.
    t0 = [{'labels': torch.tensor([0]), 'boxes': axis_box()[None]},
          {'labels': torch.tensor([1, 1]), 'boxes': torch.stack([axis_box(-2.0), axis_box(2.0)])}]
    boxes = torch.stack([torch.stack([axis_box(0.1), axis_box(5.0)]),
                         torch.stack([axis_box(2.2), axis_box(-2.3)])])       # [2,2,12]
    logits = torch.zeros(2, 2, C)
    m = HungarianMatcher(cost_class=0.0, cost_params=1.0, cost_corners=0.0)
    cost = m.cost_matrices({'boxes': boxes, 'logits': logits}, t0)
    assert cost.shape == (2, 2, 2)
    assert cost[0, :, 0].tolist() == pytest.approx([0.1, 5.0], rel=1e-5)
    assert cost[1].flatten().tolist() == pytest.approx([4.2, 0.2, 0.3, 4.3], rel=1e-5)
    res = m({'boxes': boxes, 'logits': logits}, t0)
    assert res[0][0].tolist() == [0] and res[0][1].tolist() == [0]
    assert dict(zip(res[1][1].tolist(), res[1][0].tolist())) == {0: 1, 1: 0}


def test_unknown_class_cost_is_refused_with_its_name():
    with pytest.raises(ValueError, match=r"class_cost must be 'focal' or 'prob', got 'softmax'"):
        HungarianMatcher(class_cost='softmax')

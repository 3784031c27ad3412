"""DenseCriterion (training/dense_criterion.py): hand-computed losses on 2 frames x 2 objects, normalisers, weights."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.training.dense_criterion import DENSE_WEIGHTS, DenseCriterion  # noqa: E402
from string_perception.training.losses import sigmoid_focal_loss  # noqa: E402

C, P = 3, 4          # classes, patch size; 8x8 masks -> 4 tokens


def box(x, y, z, s=0.2):
    return torch.tensor([x, y, z, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, s, s, s])


def frames():
    """Frame 0: object 0 (class 1) on tokens 0, 1; object 1 (class 2) on token 3.
    Frame 1: object 0 (class 0) on token 2; object 1 (class 1) covers no pixel (no token)."""
    m0 = torch.full((8, 8), -1, dtype=torch.int8)
    m0[0:4, 0:8] = 0
    m0[4:8, 4:8] = 1
    m1 = torch.full((8, 8), -1, dtype=torch.int8)
    m1[4:8, 0:4] = 0
    t0 = {'labels': torch.tensor([1, 2]), 'boxes': torch.stack([box(0, 0, 1), box(1, 0, 1)]), 'mask': m0}
    t1 = {'labels': torch.tensor([0, 1]), 'boxes': torch.stack([box(0, 1, 2), box(5, 5, 5)]), 'mask': m1}
    return [t0, t1]


def perfect(targets):
    """Every positive token predicts its object's box exactly; all logits confident and right."""
    logits = torch.full((2, 4, C), -30.0)
    boxes = torch.stack([box(9, 9, 9)] * 8).view(2, 4, 12).clone()
    for b, (tok, obj) in enumerate([([0, 1, 3], [0, 0, 1]), ([2], [0])]):
        for n, m in zip(tok, obj):
            boxes[b, n] = targets[b]['boxes'][m]
            logits[b, n, targets[b]['labels'][m]] = 30.0
    return {'logits': logits, 'boxes': boxes}


def test_assignment_follows_the_masks():
    crit = DenseCriterion(C, P)
    (tok0, obj0), (tok1, obj1) = crit.assign(frames())
    assert tok0.tolist() == [0, 1, 3] and obj0.tolist() == [0, 0, 1]
    assert tok1.tolist() == [2] and obj1.tolist() == [0]


def test_perfect_prediction_has_zero_box_losses():
    t = frames()
    losses = DenseCriterion(C, P)(perfect(t), t)
    assert losses['params'].item() == 0.0 and losses['corners'].item() == 0.0
    assert losses['class'].item() < 1e-9
    assert losses['positives'].item() == 4


def test_box_losses_weight_each_object_once_known_values():
    t = frames()
    out = perfect(t)
    out['boxes'][0, 0, 0] += 0.3      # frame 0, object 0 (2 tokens): one token off by 0.3 m in x -> 0.3 / 2
    out['boxes'][0, 3, 2] += 0.1      # frame 0, object 1 (1 token): off by 0.1 m in z -> 0.1
    out['boxes'][1, 2, 1] -= 0.2      # frame 1, object 0 (1 token): 0.2 m in y -> 0.2
    losses = DenseCriterion(C, P)(out, t)
    # 3 objects got tokens (frame 1's object 1 has none): (0.15 + 0.1 + 0.2) / 3
    assert losses['params'].item() == pytest.approx(0.45 / 3, abs=1e-6)
    # a pure translation moves all 8 corners by the same vector: corner L1 = translation L1
    assert losses['corners'].item() == pytest.approx(0.45 / 3, abs=1e-6)


def test_class_weights_scale_the_rows_of_tokens_on_that_class_known_values():
    """class_weights {'b': 3, 'c': 0.5}: the focal rows of tokens on class-b objects count 3x, class c 0.5x;
    background tokens and class a keep 1; the normaliser is still the 4 positive tokens."""
    t = frames()
    out = perfect(t)
    out['logits'] = torch.linspace(-3, 3, 24).view(2, 4, C)
    names = ('a', 'b', 'c')
    losses = DenseCriterion(C, P, class_names=names, class_weights={'b': 3.0, 'c': 0.5})(out, t)
    target = torch.zeros(2, 4, C)
    target[0, 0, 1] = target[0, 1, 1] = target[0, 3, 2] = target[1, 2, 0] = 1.0
    row = torch.ones(2, 4)
    row[0, 0] = row[0, 1] = 3.0       # frame 0, object 0 is class b
    row[0, 3] = 0.5                   # frame 0, object 1 is class c
    expected = (sigmoid_focal_loss(out['logits'], target, 0.25, 2.0) * row[..., None]).sum() / 4
    assert losses['class'].item() == pytest.approx(expected.item(), rel=1e-6)
    plain = DenseCriterion(C, P)(out, t)['class']
    assert losses['class'].item() != pytest.approx(plain.item(), rel=1e-3)
    ones = DenseCriterion(C, P, class_names=names, class_weights={'a': 1.0})(out, t)['class']
    assert ones.item() == pytest.approx(plain.item(), rel=1e-6)


@pytest.mark.parametrize('kw, match', [
    ({'class_weights': {'b': 2.0}}, r'^class_weights needs class_names, one per class$'),
    ({'class_weights': {'d': 2.0}, 'class_names': ('a', 'b', 'c')}, "names 'd'"),
    ({'class_weights': {'b': 0.0}, 'class_names': ('a', 'b', 'c')}, 'finite number > 0'),
    ({'class_weights': {'b': float('nan')}, 'class_names': ('a', 'b', 'c')}, 'finite number > 0'),
])
def test_bad_class_weights_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        DenseCriterion(C, P, **kw)


def test_class_loss_is_focal_sum_over_positive_tokens():
    t = frames()
    out = perfect(t)
    out['logits'] = torch.linspace(-3, 3, 24).view(2, 4, C)
    losses = DenseCriterion(C, P, focal_alpha=0.25, focal_gamma=2.0)(out, t)
    target = torch.zeros(2, 4, C)
    target[0, 0, 1] = target[0, 1, 1] = target[0, 3, 2] = target[1, 2, 0] = 1.0
    expected = sigmoid_focal_loss(out['logits'], target, 0.25, 2.0).sum() / 4
    assert losses['class'].item() == pytest.approx(expected.item(), rel=1e-6)
    w = DENSE_WEIGHTS
    total = w['class'] * losses['class'] + w['params'] * losses['params'] + w['corners'] * losses['corners']
    assert losses['loss'].item() == pytest.approx(total.item(), rel=1e-6)


def test_gradients_reach_boxes_and_logits_and_missing_mask_is_refused():
    t = frames()
    out = {k: v.clone().requires_grad_(True) for k, v in perfect(t).items()}
    out['boxes'].data[0, 0, 0] += 0.1
    out['logits'].data.zero_()                       # unsaturated scores, so the focal loss has a gradient
    DenseCriterion(C, P)(out, t)['loss'].backward()
    assert out['boxes'].grad[0, 0].abs().sum() > 0 and out['boxes'].grad[0, 2].abs().sum() == 0
    assert out['logits'].grad.abs().sum() > 0
    with pytest.raises(ValueError, match='mask'):
        DenseCriterion(C, P)(perfect(t), [{k: v for k, v in x.items() if k != 'mask'} for x in t])
    with pytest.raises(ValueError):
        DenseCriterion(C, P, weights={'giou': 1.0})


def test_default_focal_parameters_are_alpha_quarter_gamma_two_and_gamma_reaches_the_loss():
    t = frames()
    out = perfect(t)
    out['logits'] = torch.linspace(-3, 3, 24).view(2, 4, C)
    target = torch.zeros(2, 4, C)
    target[0, 0, 1] = target[0, 1, 1] = target[0, 3, 2] = target[1, 2, 0] = 1.0
    default = DenseCriterion(C, P)(out, t)['class']
    assert default.item() == pytest.approx((sigmoid_focal_loss(out['logits'], target, 0.25, 2.0).sum() / 4).item(),
                                           rel=1e-6)
    gamma1 = DenseCriterion(C, P, focal_alpha=0.5, focal_gamma=1.0)(out, t)['class']
    assert gamma1.item() == pytest.approx((sigmoid_focal_loss(out['logits'], target, 0.5, 1.0).sum() / 4).item(),
                                          rel=1e-6)
    assert abs(gamma1.item() - default.item()) > 1e-3


def test_corner_loss_weights_each_token_by_one_over_its_objects_tokens():
    t = frames()
    out = perfect(t)
    out['boxes'][0, 0, 0] += 0.6      # one of object 0's 2 tokens, 0.6 m in x -> 0.6 / 2; other objects exact
    losses = DenseCriterion(C, P)(out, t)
    # (0.3 + 0 + 0) / 3 objects; an unweighted mean over the 4 tokens would give 0.15
    assert losses['params'].item() == pytest.approx(0.1, abs=1e-6)
    assert losses['corners'].item() == pytest.approx(0.1, abs=1e-6)


def test_one_positive_divides_by_exactly_one():
    m = torch.full((8, 8), -1, dtype=torch.int8)
    m[0:4, 0:4] = 0                                   # one object on token 0 only
    t = [{'labels': torch.tensor([2]), 'boxes': box(0, 0, 1).view(1, 12), 'mask': m}]
    logits = torch.linspace(-2, 2, 4 * C).view(1, 4, C)
    boxes = torch.stack([box(0, 0, 1)] * 4).view(1, 4, 12).clone()
    boxes[0, 0, 1] += 0.3
    losses = DenseCriterion(C, P)({'logits': logits, 'boxes': boxes}, t)
    target = torch.zeros(1, 4, C)
    target[0, 0, 2] = 1.0
    assert losses['class'].item() == pytest.approx(sigmoid_focal_loss(logits, target, 0.25, 2.0).sum().item(),
                                                   rel=1e-6)
    assert losses['params'].item() == pytest.approx(0.3, abs=1e-6)
    assert losses['corners'].item() == pytest.approx(0.3, abs=1e-6)


class _OtherRank:
    """Stands in for a second DDP rank: all_reduce (SUM, in place) adds that rank's counts, in call order."""

    def __init__(self, counts):
        self.counts = list(counts)

    def all_reduce(self, tensor, *args, **kwargs):
        tensor += self.counts.pop(0)


def test_ddp_divides_by_the_mean_counts_over_ranks(monkeypatch):
    import torch.distributed as dist
    monkeypatch.setattr(dist, 'is_available', lambda: True)
    monkeypatch.setattr(dist, 'is_initialized', lambda: True)
    monkeypatch.setattr(dist, 'get_world_size', lambda group=None: 2)
    other = _OtherRank([8.0, 1.0])                      # the other rank: 8 positive tokens on 1 object
    monkeypatch.setattr(dist, 'all_reduce', other.all_reduce)
    t = frames()
    out = perfect(t)
    out['logits'] = torch.linspace(-3, 3, 24).view(2, 4, C)
    out['boxes'][0, 0, 0] += 0.3
    out['boxes'][0, 3, 2] += 0.1
    out['boxes'][1, 2, 1] -= 0.2
    losses = DenseCriterion(C, P)(out, t)
    assert other.counts == []
    target = torch.zeros(2, 4, C)
    target[0, 0, 1] = target[0, 1, 1] = target[0, 3, 2] = target[1, 2, 0] = 1.0
    # positives (4 + 8) / 2 = 6, objects (3 + 1) / 2 = 2
    assert losses['class'].item() == pytest.approx((sigmoid_focal_loss(out['logits'], target, 0.25, 2.0).sum()
                                                    / 6).item(), rel=1e-6)
    assert losses['params'].item() == pytest.approx(0.45 / 2, abs=1e-6)
    assert losses['corners'].item() == pytest.approx(0.45 / 2, abs=1e-6)
    assert losses['positives'].item() == 4              # this rank's own count


def test_float64_targets_give_float32_losses_and_positives():
    t = frames()
    for x in t:
        x['boxes'] = x['boxes'].double()
    out = perfect(t)
    out['boxes'] = out['boxes'].float()
    out['boxes'][0, 3, 2] += 0.1
    losses = DenseCriterion(C, P)(out, t)
    for k in ('class', 'params', 'corners', 'loss', 'positives'):
        assert losses[k].dtype == torch.float32, k
    assert losses['params'].item() == pytest.approx(0.1 / 3, abs=1e-6)


def test_bad_arguments_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match=r'^symmetric=True needs class_names, one per class$'):
        DenseCriterion(C, P, symmetric=True)
    expected = r"^unknown loss weights \['giou'\]; expected \['class', 'corners', 'params'\]$"
    with pytest.raises(ValueError, match=expected):
        DenseCriterion(C, P, weights={'giou': 1.0})
    t = frames()
    with pytest.raises(ValueError, match=r'^logits have 3 classes, criterion expects 5$'):
        DenseCriterion(5, P)(perfect(t), t)          # logits [2, 4, 3]: N = 4 differs from C = 3


def test_object_weights_key_objects_per_image_whatever_their_count():
    from string_perception.training.dense_criterion import object_weights
    t = torch.tensor
    # image 0: object 1000 on two tokens; image 1: object 0 on three tokens. A fixed stride of 1000 would key
    # both as 1000 and weigh all five tokens 1/5.
    indices = [(t([3, 4]), t([1000, 1000])), (t([0, 1, 2]), t([0, 0, 0]))]
    w, counts = object_weights(indices, [1001, 1])
    assert w.tolist() == pytest.approx([1 / 2, 1 / 2, 1 / 3, 1 / 3, 1 / 3])
    assert sorted(counts.tolist()) == [2, 3]
    w, counts = object_weights([(t([5]), t([0])), (t([], dtype=torch.int64), t([], dtype=torch.int64))], [1, 0])
    assert w.tolist() == [1.0] and counts.tolist() == [1]

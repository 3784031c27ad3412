"""HungarianMatcher: batched == per image, empty targets, a known optimum, permutation equivariance."""
import itertools

import numpy as np
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.box_ops import encode_box_params  # noqa: E402
from string_perception.matcher import HungarianMatcher  # noqa: E402


def make_boxes(n, gen):
    t = torch.randn(n, 3, generator=gen) + torch.tensor([0.0, 0.0, 3.0])
    x6 = torch.randn(n, 6, generator=gen)
    size = torch.rand(n, 3, generator=gen) + 0.1
    return torch.cat([t, x6, size], dim=-1)


def make_batch(B=3, N=10, C=4, sizes=(3, 0, 5), seed=0):
    gen = torch.Generator().manual_seed(seed)
    outputs = {'logits': torch.randn(B, N, C, generator=gen), 'boxes': make_boxes(B * N, gen).view(B, N, 12)}
    targets = [{'labels': torch.randint(0, C, (m,), generator=gen), 'boxes': make_boxes(m, gen)} for m in sizes]
    return outputs, targets


@pytest.mark.parametrize('class_cost', ['focal', 'prob'])
def test_batched_equals_per_image(class_cost):
    matcher = HungarianMatcher(class_cost=class_cost)
    outputs, targets = make_batch()
    batched = matcher(outputs, targets)
    for b, t in enumerate(targets):
        single = matcher({k: v[b:b + 1] for k, v in outputs.items()}, [t])[0]
        assert torch.equal(batched[b][0], single[0]) and torch.equal(batched[b][1], single[1])
        assert batched[b][0].dtype == torch.int64 and batched[b][1].dtype == torch.int64
        assert len(batched[b][0]) == min(10, len(t['labels']))
        assert len(set(batched[b][0].tolist())) == len(batched[b][0])        # one-to-one


def test_empty_targets():
    matcher = HungarianMatcher()
    outputs, _ = make_batch(B=2)
    empty = {'labels': torch.zeros(0, dtype=torch.int64), 'boxes': torch.zeros(0, 12)}
    res = matcher(outputs, [empty, empty])
    assert all(len(p) == 0 and len(t) == 0 and p.dtype == torch.int64 for p, t in res)


def test_more_targets_than_predictions():
    outputs, targets = make_batch(B=1, N=2, sizes=(5,))
    p, t = HungarianMatcher()(outputs, targets)[0]
    assert len(p) == 2 and len(set(t.tolist())) == 2


def test_known_optimum_matches_brute_force_and_exact_copies():
    gen = torch.Generator().manual_seed(1)
    N, C, M = 6, 3, 4
    boxes = make_boxes(N, gen)
    logits = torch.full((1, N, C), -4.0)
    # Targets are exact copies of predictions 4, 1, 5, 2 with confident matching classes: that is the optimum.
    picks = [4, 1, 5, 2]
    labels = torch.tensor([0, 2, 1, 1])
    for j, i in enumerate(picks):
        logits[0, i, labels[j]] = 4.0
    targets = [{'labels': labels, 'boxes': boxes[picks].clone()}]
    outputs = {'logits': logits, 'boxes': boxes[None]}
    matcher = HungarianMatcher()
    pred_idx, tgt_idx = matcher(outputs, targets)[0]
    assert dict(zip(tgt_idx.tolist(), pred_idx.tolist())) == dict(enumerate(picks))
    # And it is the brute-force optimum of the cost matrix.
    C_ = matcher.cost_matrices(outputs, targets)[0].numpy()
    best = min(itertools.permutations(range(N), M), key=lambda rows: sum(C_[r, j] for j, r in enumerate(rows)))
    assert list(best) == picks


def test_permuting_targets_permutes_the_match():
    outputs, targets = make_batch(B=1, N=12, sizes=(6,), seed=3)
    matcher = HungarianMatcher()
    p, t = matcher(outputs, targets)[0]
    perm = torch.randperm(6, generator=torch.Generator().manual_seed(0))
    permuted = [{k: v[perm] for k, v in targets[0].items()}]
    p2, t2 = matcher(outputs, permuted)[0]
    original = dict(zip(p.tolist(), t.tolist()))
    assert dict(zip(p2.tolist(), perm[t2].tolist())) == original


def test_non_finite_predictions_do_not_crash():
    outputs, targets = make_batch(B=1, sizes=(3,))
    outputs['boxes'][0, 0] = float('nan')
    p, _ = HungarianMatcher()(outputs, targets)[0]
    assert len(p) == 3 and 0 not in p.tolist()


def test_numpy_targets_from_box_ops_work():
    t = np.array([[0.0, 0, 3]])
    params = torch.from_numpy(encode_box_params(t, np.eye(3)[None], np.ones((1, 3))))
    outputs, _ = make_batch(B=1, sizes=(1,))
    outputs['boxes'][0, 7] = params[0].float()
    p, _ = HungarianMatcher(cost_class=0.0)(outputs, [{'labels': torch.tensor([0]), 'boxes': params}])[0]
    assert p.tolist() == [7]

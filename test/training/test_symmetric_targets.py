"""Symmetry-aware targets (training/symmetric_targets.py): known group members cost nothing, other boxes still do."""
import math

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.box_ops_torch import params_to_corners, rotation_from_6d, rotation_to_6d  # noqa: E402
from string_perception.training.dense_criterion import DenseCriterion  # noqa: E402
from string_perception.training.symmetric_targets import align_targets, class_kinds, signed_permutations  # noqa: E402

NAMES = ('box', 'cylinder', 'sphere', 'cone', 'capsule')
KINDS = class_kinds(NAMES)


def rot(axis, angle):
    axis = torch.tensor(axis, dtype=torch.float64)
    axis = axis / axis.norm()
    Kx = torch.tensor([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], dtype=torch.float64)
    return torch.eye(3, dtype=torch.float64) + math.sin(angle) * Kx + (1 - math.cos(angle)) * Kx @ Kx


def params(t, R, size):
    return torch.cat([torch.tensor(t, dtype=torch.float64), rotation_to_6d(R), torch.tensor(size, dtype=torch.float64)])


BASE = rot([0.3, -0.5, 0.8], 0.9)


def test_group_has_24_proper_rotations():
    G = signed_permutations()
    assert G.shape == (24, 3, 3)
    assert torch.allclose(torch.linalg.det(G), torch.ones(24, dtype=torch.float64))
    assert len({tuple(g.flatten().tolist()) for g in G}) == 24


@pytest.mark.parametrize('label,turn,size', [
    (0, rot([0, 0, 1], math.pi / 2), [0.1, 0.2, 0.3]),        # box relabelled: 90 deg about z swaps x/y sizes
    (0, rot([1, 0, 0], math.pi), [0.1, 0.2, 0.3]),            # box turned 180 deg
    (1, rot([0, 0, 1], 0.7), [0.1, 0.1, 0.3]),                # cylinder: any turn about its axis
    (1, rot([1, 0, 0], math.pi) @ rot([0, 0, 1], 0.3), [0.1, 0.1, 0.3]),   # cylinder upside down and turned
    (3, rot([0, 0, 1], 2.1), [0.1, 0.1, 0.2]),                # cone: turn about the axis
    (4, rot([0, 1, 0], math.pi) @ rot([0, 0, 1], 1.3), [0.08, 0.08, 0.3]),  # capsule flipped and turned
    (2, rot([0.2, 0.9, -0.4], 1.7), [0.15, 0.15, 0.15]),      # sphere: any rotation
])
def test_known_group_members_align_exactly(label, turn, size):
    tgt = params([0.1, 0.0, 1.0], BASE, size)
    R_pred = BASE @ turn
    # the prediction describes the same box: sizes relabelled with the turn's axis permutation
    perm = turn.abs().round()
    pred_size = (perm.T @ torch.tensor(size, dtype=torch.float64)).tolist() if label == 0 else size
    pred = params([0.1, 0.0, 1.0], R_pred, pred_size)
    aligned = align_targets(pred[None], tgt[None], torch.tensor([label]), KINDS)[0]
    assert torch.allclose(params_to_corners(aligned).sort(0).values, params_to_corners(tgt).sort(0).values,
                          atol=1e-9) or label in (1, 2, 3, 4)          # symmetric shapes: the box itself turns
    assert torch.allclose(rotation_from_6d(aligned[3:9]), R_pred, atol=1e-9)
    assert torch.allclose(aligned[9:12], pred[9:12], atol=1e-9)
    assert torch.allclose(params_to_corners(aligned), params_to_corners(pred), atol=1e-9)


def test_cone_is_never_flipped_but_cylinder_is():
    flip = rot([1, 0, 0], math.pi)
    tgt = params([0, 0, 1.0], BASE, [0.1, 0.1, 0.2])
    pred = params([0, 0, 1.0], BASE @ flip, [0.1, 0.1, 0.2])
    cyl = align_targets(pred[None], tgt[None], torch.tensor([1]), KINDS)[0]
    cone = align_targets(pred[None], tgt[None], torch.tensor([3]), KINDS)[0]
    axis = BASE[:, 2]
    assert torch.allclose(rotation_from_6d(cyl[3:9])[:, 2], -axis, atol=1e-9)     # follows the prediction
    cols = rotation_from_6d(cone[3:9]).T                                           # [3 columns, 3]
    assert any(torch.allclose(c, axis, atol=1e-9) for c in cols)                  # keeps its apex direction
    assert not any(torch.allclose(c, -axis, atol=1e-6) for c in cols)


def test_a_box_is_not_turned_about_an_axis():
    tgt = params([0, 0, 1.0], BASE, [0.1, 0.2, 0.3])
    pred = params([0, 0, 1.0], BASE @ rot([0, 0, 1], 0.4), [0.1, 0.2, 0.3])
    aligned = align_targets(pred[None], tgt[None], torch.tensor([0]), KINDS)[0]
    assert torch.allclose(rotation_from_6d(aligned[3:9]), BASE, atol=1e-9)        # 0.4 rad is no symmetry of a box


def test_symmetric_dense_loss_is_zero_for_another_group_member_and_not_otherwise():
    mask = torch.full((8, 8), -1, dtype=torch.int8)
    mask[0:4, 0:4] = 0
    tgt = params([0, 0, 1.0], BASE, [0.1, 0.1, 0.3]).float()
    targets = [{'labels': torch.tensor([1]), 'boxes': tgt[None], 'mask': mask}]
    pred = torch.zeros(1, 4, 12)
    pred[0, :] = params([0, 0, 1.0], BASE @ rot([0, 0, 1], 1.1), [0.1, 0.1, 0.3]).float()
    out = {'logits': torch.zeros(1, 4, 5), 'boxes': pred}
    sym = DenseCriterion(5, 4, symmetric=True, class_names=NAMES)(out, targets)
    plain = DenseCriterion(5, 4)(out, targets)
    assert sym['params'].item() < 1e-5 and sym['corners'].item() < 1e-5
    assert plain['params'].item() > 0.1
    targets[0]['labels'] = torch.tensor([0])                       # the same numbers as a box: 1.1 rad is an error
    assert DenseCriterion(5, 4, symmetric=True, class_names=NAMES)(out, targets)['params'].item() > 0.1
    with pytest.raises(ValueError):
        DenseCriterion(5, 4, symmetric=True)

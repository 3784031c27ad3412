"""Dense one-to-many assignment (string_perception/assignment.py): known answers on hand-made instance masks."""
import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt
import torch  # noqa: E402

from string_perception.assignment import assign_from_mask, dense_assignment, patch_coverage  # noqa: E402


def _mask(h=8, w=8):
    return torch.full((h, w), -1, dtype=torch.int8)


def test_patch_coverage_counts_pixels_per_patch():
    # 8x8 image, 4x4 patches -> 2x2 = 4 tokens (row-major). Object 0 fills patch 0 and half of patch 1.
    m = _mask()
    m[0:4, 0:4] = 0
    m[0:4, 4:6] = 0
    m[4:8, 4:5] = 1                                      # object 1: a 4x1 column in patch 3 -> 4/16
    cov = patch_coverage(m, 2, 4)                        # [2,4]
    assert cov.shape == (2, 4)
    assert torch.equal(cov, torch.tensor([[1.0, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.25]]))


def test_token_goes_to_object_covering_at_least_min_coverage():
    cov = torch.tensor([[1.0, 0.5, 0.49, 0.0],
                        [0.0, 0.5, 0.51, 0.0]])
    tok, obj = dense_assignment(cov, 0.5)
    # token 0 -> 0 (1.0); token 1: tie 0.5/0.5 -> the first object (argmax); token 2 -> object 1 (0.51)
    assert tok.tolist() == [0, 1, 2]
    assert obj.tolist() == [0, 0, 1]


def test_object_without_a_covered_patch_gets_its_best_free_token():
    cov = torch.tensor([[0.9, 0.6, 0.0, 0.0],      # object 0 owns tokens 0, 1
                        [0.0, 0.3, 0.2, 0.0],      # object 1: best token 1 is taken -> its next best, token 2
                        [0.0, 0.0, 0.0, 0.0]])     # object 2: no pixel in any patch -> no token
    tok, obj = dense_assignment(cov, 0.5)
    assert tok.tolist() == [0, 1, 2]
    assert obj.tolist() == [0, 0, 1]


def test_min_coverage_threshold_is_inclusive_and_validated():
    cov = torch.tensor([[0.5, 0.4999]])
    tok, obj = dense_assignment(cov, 0.5)
    assert tok.tolist() == [0] and obj.tolist() == [0]
    with pytest.raises(ValueError):
        dense_assignment(cov, 0.0)


def test_no_objects_gives_no_positives():
    tok, obj = assign_from_mask(_mask(), 0, 4)
    assert tok.numel() == 0 and obj.numel() == 0


def test_assign_from_mask_end_to_end_and_each_token_once():
    m = _mask(16, 16)
    m[0:8, 0:8] = 0                                      # 4 full 4x4 patches: tokens 0, 1, 4, 5
    m[12:13, 12:13] = 1                                  # one pixel in token 15
    tok, obj = assign_from_mask(m, 2, 4)
    assert tok.tolist() == [0, 1, 4, 5, 15]
    assert obj.tolist() == [0, 0, 0, 0, 1]
    assert len(set(tok.tolist())) == tok.numel()


def test_mask_size_must_be_a_multiple_of_the_patch():
    with pytest.raises(ValueError):
        patch_coverage(_mask(8, 6), 1, 4)


def test_bad_input_messages_name_the_values():
    with pytest.raises(ValueError, match=r'^mask 8x6 is not a multiple of patch_size=4$'):
        patch_coverage(_mask(8, 6), 1, 4)
    for bad in (0.0, 1.5, 1.0001, -0.5):
        with pytest.raises(ValueError, match=rf'^min_coverage must be in \(0, 1\], got {bad}$'):
            dense_assignment(torch.tensor([[1.0]]), bad)


def test_default_min_coverage_is_one_half_and_one_is_allowed():
    cov = torch.tensor([[0.5, 0.4, 1.0, 0.0],
                        [0.0, 0.0, 0.0, 0.3]])
    tok, obj = dense_assignment(cov)                    # 0.5 default: tokens 0, 2; object 1 takes its best token 3
    assert tok.tolist() == [0, 2, 3] and obj.tolist() == [0, 0, 1]
    tok, obj = dense_assignment(cov, 1.0)               # only a fully covered patch counts; 0 has its token 2
    assert tok.tolist() == [2, 3] and obj.tolist() == [0, 1]


def test_results_are_int64_also_when_empty():
    for cov in (torch.zeros(0, 4), torch.tensor([[0.0, 0.7]])):
        tok, obj = dense_assignment(cov)
        assert tok.dtype == torch.int64 and obj.dtype == torch.int64
    tok, obj = assign_from_mask(_mask(), 0, 4)
    assert tok.dtype == torch.int64 and obj.dtype == torch.int64 and tok.tolist() == [] and obj.tolist() == []


def test_assign_from_mask_passes_min_coverage():
    m = _mask()
    m[0:4, 0:3] = 0                                      # object 0: 12/16 of token 0
    m[4:8, 4:8] = 0                                      # and all of token 3
    assert assign_from_mask(m, 1, 4)[0].tolist() == [0, 3]
    assert assign_from_mask(m, 1, 4, min_coverage=0.8)[0].tolist() == [3]
    assert assign_from_mask(m, 1, 4, min_coverage=1.0)[0].tolist() == [3]

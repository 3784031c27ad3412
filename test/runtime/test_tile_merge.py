"""runtime/tile_merge.py: the window-candidate merge rules of tiled inference, on hand-made candidate lists."""
import numpy as np
import pytest
from scipy.special import expit, logit

from string_perception.runtime.tile_merge import (MergeRule, candidate_scores, confirmed_by, merge_tiled,
                                                  shift_to_score)
from string_perception.runtime.tiling import DEFAULT_MERGE, TilingConfig, merge_candidates, parse_tiling


def _box(x, y=0.0, z=1.0, size=0.1):
    """A box row [t(3), rot6d(6), size(3)]: centre (x, y, z), identity rotation, a cube of ``size`` metres."""
    return np.array([x, y, z, 1, 0, 0, 0, 1, 0, size, size, size], np.float32)


def _passes(full, windows, n=3):
    """``boxes[P,n,12]``, ``logits[P,n,2]`` from per-pass lists of ``(box, score, class)``; unused token slots are
    far boxes scoring ~0."""
    P = 1 + len(windows)
    boxes = np.tile(_box(50.0), (P, n, 1))                                      # [P,n,12]
    logits = np.full((P, n, 2), -20.0, np.float32)                              # [P,n,2]
    for p, cands in enumerate([full, *windows]):
        for j, (b, s, c) in enumerate(cands):
            boxes[p, j] = b
            logits[p, j, c] = logit(s)
            logits[p, j, 1 - c] = logit(s) - 2.0                                # the other class scores lower
    return boxes, logits


def _rows(boxes, logits, index):
    """{token index: (score, best class)} of a merged list."""
    return {int(i): (float(s), int(c)) for i, s, c in zip(index, candidate_scores(logits), logits.argmax(axis=1))}


# A full-frame box at x=0 scoring 0.4; window 1 sees the same object (x=0.02, better placed) at 0.8 and a false box
# on the table (x=0.5) at 0.9; window 2 sees the table box too (x=0.51) at 0.6.
FULL = [(_box(0.0), 0.4, 0)]
WIN1 = [(_box(0.02), 0.8, 0), (_box(0.5), 0.9, 1)]
WIN2 = [(_box(0.51), 0.6, 1)]


def test_a_confirmed_window_box_is_kept_with_its_geometry_and_an_unconfirmed_one_dropped():
    boxes, logits = _passes(FULL, [WIN1, WIN2])
    b, lg, idx = merge_tiled(boxes, logits, [np.array([0]), np.array([0, 1]), np.array([0])], None,
                             MergeRule(confirm=0.2))
    assert idx.tolist() == [0, 3]                                               # full box + confirmed window box
    np.testing.assert_array_equal(b[1], boxes[1, 0])                            # the window's geometry, as it was
    np.testing.assert_array_equal(lg[1], logits[1, 0])                          # its score untouched
    np.testing.assert_array_equal(lg[0], logits[0, 0])


def test_the_confirming_score_threshold_and_radius():
    boxes, logits = _passes(FULL, [WIN1, WIN2])
    keeps = [np.array([0]), np.array([0, 1]), np.array([0])]
    assert merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.5))[2].tolist() == [0]   # 0.4 < 0.5
    # centre distance 0.02 m; the window box's half diagonal is 0.0866 m: radius 0.2 reaches 0.0173 m
    assert merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, radius=0.2))[2].tolist() == [0]
    assert merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, radius=0.25))[2].tolist() == [0, 3]


def test_a_full_frame_token_outside_the_frame_does_not_confirm():
    boxes, logits = _passes(FULL, [WIN1, WIN2])
    keeps = [np.zeros(0, np.int64), np.array([0, 1]), np.array([0])]           # full frame's boxes stay out
    assert merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2))[2].tolist() == [3]
    assert merge_tiled(boxes, logits, keeps, np.array([1, 2]), MergeRule(confirm=0.2))[2].size == 0


def test_cross_window_confirmation():
    boxes, logits = _passes(FULL, [WIN1, WIN2])
    keeps = [np.array([0]), np.array([0, 1]), np.array([0])]
    b, lg, idx = merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, cross=True))
    assert idx.tolist() == [0, 3, 4, 6]                                         # the table box is in both windows
    # a window's own candidates never confirm each other: window 1 alone keeps only the full-frame-confirmed box
    keeps = [np.array([0]), np.array([0, 1]), np.zeros(0, np.int64)]
    assert merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, cross=True))[2].tolist() == [0, 3]


def test_unconfirmed_boxes_down_weighted_instead_of_dropped():
    boxes, logits = _passes(FULL, [WIN1, WIN2])
    keeps = [np.array([0]), np.array([0, 1]), np.array([0])]
    rows = _rows(*merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, unconfirmed=0.25)))
    assert sorted(rows) == [0, 3, 4, 6]
    np.testing.assert_allclose([rows[0][0], rows[3][0], rows[4][0], rows[6][0]], [0.4, 0.8, 0.225, 0.15],
                               rtol=1e-6)
    assert [rows[i][1] for i in (0, 3, 4, 6)] == [0, 0, 1, 1]                   # classes kept


def test_window_scale():
    boxes, logits = _passes(FULL, [WIN1, WIN2])
    keeps = [np.array([0]), np.array([0, 1]), np.array([0])]
    rows = _rows(*merge_tiled(boxes, logits, keeps, None, MergeRule(window_scale=0.5)))
    np.testing.assert_allclose([rows[i][0] for i in (0, 3, 4, 6)], [0.4, 0.4, 0.45, 0.3], rtol=1e-6)
    assert [rows[i][1] for i in (0, 3, 4, 6)] == [0, 0, 1, 1]
    rows = _rows(*merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, window_scale=0.5, unconfirmed=0.5)))
    np.testing.assert_allclose([rows[i][0] for i in (0, 3, 4, 6)], [0.4, 0.4, 0.225, 0.15], rtol=1e-6)


def test_rules_that_change_nothing_give_the_plain_merge():
    rng = np.random.default_rng(0)
    boxes = rng.normal(size=(5, 7, 12)).astype(np.float32)
    boxes[..., 9:12] = np.abs(boxes[..., 9:12]) + 0.1
    logits = rng.normal(size=(5, 7, 3)).astype(np.float32)
    boxes[2, 3, 0] = np.nan                                                     # a bad row is passed on as it was
    keeps = [np.array([0, 2, 5]), None, np.array([1, 3, 4]), None, np.array([6])]
    ref = merge_candidates(boxes, logits, keeps)
    got = merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=1e-9, radius=1e9, unconfirmed=1.0))
    np.testing.assert_array_equal(got[2], ref[2])
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])                              # float32 -> float64, same values
    assert not MergeRule().active and MergeRule(confirm=0.1).active and MergeRule(window_scale=0.9).active


def test_shift_to_score_and_scores():
    lg = np.array([[1.0, -2.0, 0.5], [np.nan, 0.0, 0.0], [40.0, 0.0, 39.0]])
    np.testing.assert_allclose(candidate_scores(lg), [expit(1.0), np.nan, expit(40.0)])
    out = shift_to_score(lg, np.array([1.0, 0.0, -3.0]))
    np.testing.assert_array_equal(out[0], lg[0])                                # unchanged target: the same bits
    np.testing.assert_allclose(out[2], [-3.0, -43.0, -4.0])
    assert out[2].argmax() == 0


def test_confirmed_by_ignores_bad_rows():
    boxes = np.stack([_box(0.0), _box(0.0)]).astype(np.float64)
    boxes[1, 9] = 0.0                                                           # no size: never confirmed
    src = np.stack([_box(0.01), _box(0.0)]).astype(np.float64)
    src[1, 0] = np.nan                                                          # never confirms
    ok, best = confirmed_by(boxes, src, np.array([0.3, 0.9]), 1.0)
    assert ok.tolist() == [True, False]
    assert best[0] == 0.3 and np.isnan(best[1])


def test_parse_merge_options():
    cfg = parse_tiling('2x2,confirm=0.1,radius=0.5,cross=1,unconfirmed=0.25,wscale=0.8,replace=1')
    assert cfg.merge == MergeRule(confirm=0.1, radius=0.5, cross=True, unconfirmed=0.25, window_scale=0.8,
                                  replace=True)
    assert parse_tiling(cfg.spec) == cfg
    assert cfg.spec == '2x2,confirm=0.1,radius=0.5,cross=1,unconfirmed=0.25,wscale=0.8,replace=1'
    assert parse_tiling('2x2').merge == DEFAULT_MERGE == TilingConfig().merge                # the tiled mode's rule
    assert DEFAULT_MERGE.active and not MergeRule().active
    plain = parse_tiling('2x2,confirm=0')                                          # every window box, as before
    assert not plain.merge.active and plain.spec == '2x2,confirm=0' and parse_tiling(plain.spec) == plain
    assert parse_tiling('2x2,unconfirmed=0').merge == MergeRule(confirm=0.2, radius=0.4)  # options start from it
    for bad in ('2x2,confirm=1.5', '2x2,confirm=-0.1', '2x2,confirm=x', '2x2,radius=0', '2x2,wscale=0',
                '2x2,wscale=1.2', '2x2,confirm=0.1,unconfirmed=2', '2x2,unconfirmed=-1',
                '2x2,confirm=0.1,cross=2', '2x2,fuse=max', '2x2,confirm=0.1,replace=yes', '2x2,confirm'):
        with pytest.raises(ValueError):
            parse_tiling(bad)


def test_replace_drops_the_full_frame_candidate_a_window_box_confirms():
    far_full = (_box(-0.5), 0.5, 1)                                             # confirms nothing
    boxes, logits = _passes(FULL + [far_full], [WIN1, WIN2])
    keeps = [np.array([0, 1]), np.array([0, 1]), np.array([0])]
    assert merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2))[2].tolist() == [0, 1, 3]
    b, lg, idx = merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, replace=True))
    assert idx.tolist() == [1, 3]                                               # the window box stands for it
    np.testing.assert_array_equal(b[1], boxes[1, 0])
    # only confirming sources go: with a down-weighted unconfirmed box nothing else changes
    idx = merge_tiled(boxes, logits, keeps, None, MergeRule(confirm=0.2, replace=True, unconfirmed=0.5))[2]
    assert idx.tolist() == [1, 3, 4, 6]

"""runtime.draw: projected boxes change pixels where the box is, and only there."""
import numpy as np

from string_perception.box_ops import BOX_EDGES, box_corners, encode_box_params, project_points
from string_perception.runtime import draw

K = np.array([[300.0, 0, 160], [0, 300.0, 120], [0, 0, 1]])
H, W = 240, 320


def params(t, size=(0.5, 0.5, 0.5), R=np.eye(3)):
    return encode_box_params(np.asarray(t, float), R, np.asarray(size, float))[None]


def test_box_edges_are_drawn_in_colour_and_input_untouched():
    img = np.zeros((H, W, 3), np.uint8)
    p = params([0.0, 0.0, 3.0])
    out = draw.draw_boxes(img, K, p, color=(255, 0, 0), thickness=1)
    assert img.sum() == 0 and out.shape == img.shape and out.dtype == np.uint8
    uv = project_points(box_corners(np.array([0, 0, 3.0]), np.eye(3), np.array([0.5] * 3)), K)
    for i, j in BOX_EDGES:                       # midpoint of every edge is red
        u, v = np.round((uv[i] + uv[j]) / 2).astype(int)
        assert out[v - 1:v + 2, u - 1:u + 2, 0].max() > 100
    assert out[:, :, 1:].max() == 0              # only the red channel
    assert out[:20, :20].sum() == 0              # far from the box: untouched


def test_boxes_behind_camera_and_partly_behind_do_not_crash():
    img = np.zeros((H, W, 3), np.uint8)
    assert draw.draw_boxes(img, K, params([0, 0, -3.0])).sum() == 0
    partly = draw.draw_boxes(img, K, params([0, 0, 0.2], size=(1, 1, 1)))
    assert partly.sum() > 0
    assert draw.draw_boxes(img, K, np.zeros((0, 12))).sum() == 0


def test_predictions_vs_ground_truth_with_labels():
    img = np.full((H, W, 3), 30, np.uint8)
    gt = {'params': params([-0.6, 0, 3.0]), 'labels': np.array([1])}
    pred = {'params': np.concatenate([params([0.6, 0, 3.0]), params([0, 0.5, 3.0])]),
            'labels': np.array([0, 1]), 'scores': np.array([0.9, 0.1])}
    out = draw.draw_predictions(img, K, pred, gt, class_names=['mug', 'box'], score_threshold=0.5)
    left, right = out[:, : W // 2], out[:, W // 2:]
    assert (left[..., 1] > 150).any() and not (left[..., 0] > 150).any()     # green GT on the left
    assert (right[..., 0] > 150).any()                                          # red prediction on the right
    front_bottom_edge = int(round(120 + 300 * 0.75 / 2.75))                      # of the 0.1-score box: not drawn
    assert not (out[front_bottom_edge - 2:front_bottom_edge + 3, 150:170, 0] > 150).any()
    everything = draw.draw_predictions(img, K, pred, gt)
    assert (everything[front_bottom_edge - 2:front_bottom_edge + 3, 150:170, 0] > 150).any()
    assert out is not img and (img == 30).all()

"""evaluation.plots: PNG files are written, readable and non-trivial."""
import cv2
import numpy as np

from string_perception.evaluation import plots


def read_png(path):
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert img is not None and img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert img.std() > 5                                   # not a blank canvas
    return img


def test_iou_histogram(tmp_path):
    ious = np.random.default_rng(0).uniform(0, 1, 200)
    p = plots.plot_iou_histogram(ious, tmp_path / 'sub' / 'iou.png')
    assert p.exists() and p.stat().st_size > 1000
    read_png(p)
    assert plots.plot_iou_histogram([], tmp_path / 'empty.png').exists()


def test_pr_curves_accept_summary_dicts_and_tuples(tmp_path):
    curves = {'mug': {'precision': [1.0, 0.5, 0.67], 'recall': [0.5, 0.5, 1.0]},
              'box': ([1.0, 1.0], [0.5, 1.0]), 'empty': {'precision': [], 'recall': []}}
    p = plots.plot_pr_curves(curves, tmp_path / 'pr.png', ap={'mug': 0.83, 'box': 1.0, 'empty': None})
    read_png(p)
    assert plots.plot_pr_curves({}, tmp_path / 'none.png').exists()


def test_latency_histogram(tmp_path):
    lat = np.random.default_rng(1).gamma(4.0, 2.0, 500)
    p = plots.plot_latency_histogram(np.append(lat, np.nan), tmp_path / 'lat.png', budget_ms=33.3)
    read_png(p)
    assert plots.plot_latency_histogram([], tmp_path / 'lat0.png').exists()

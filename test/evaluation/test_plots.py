"""evaluation.plots: PNG files are written and readable, and the figures draw the data (counts, marks, envelope)."""
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


# ------------------------------------------------------------------- what is drawn, not only that a file exists
def _drawn(monkeypatch):
    """Keep every Figure the plot functions save (their axes hold exactly what is drawn)."""
    figures = []
    real_save = plots._save
    monkeypatch.setattr(plots, '_save', lambda fig, path, dpi: (figures.append(fig), real_save(fig, path, dpi))[1])
    return figures


def test_iou_histogram_draws_the_counts_and_the_mean(tmp_path, monkeypatch):
    figures = _drawn(monkeypatch)
    ious = [0.02, 0.07, 0.32, 0.32, 0.55, 0.99]               # bins of 0.05: 0, 1, 6 (x2), 11, 19
    plots.plot_iou_histogram(ious, tmp_path / 'iou.png')
    ax = figures[-1].axes[0]
    heights = [p.get_height() for p in ax.patches]
    expected = np.zeros(20)
    expected[[0, 1, 6, 11, 19]] = [1, 1, 2, 1, 1]
    np.testing.assert_array_equal(heights, expected)
    vlines = sorted(line.get_xdata()[0] for line in ax.lines)
    np.testing.assert_allclose(vlines, sorted([0.25, 0.5, np.mean(ious)]))
    assert ax.get_legend().get_texts()[0].get_text() == 'mean 0.378 (n=6)'


def test_pr_curve_draws_the_precision_envelope_and_the_ap(tmp_path, monkeypatch):
    figures = _drawn(monkeypatch)
    # FP, TP, TP against 2 ground truths: precision 0, 1/2, 2/3 -> envelope 2/3, 2/3, 2/3; AP 2/3
    plots.plot_pr_curves({'mug': {'precision': [0.0, 0.5, 2 / 3], 'recall': [0.0, 0.5, 1.0]}}, tmp_path / 'pr.png',
                         ap={'mug': 2 / 3})
    ax = figures[-1].axes[0]
    (line,) = ax.lines
    np.testing.assert_allclose(line.get_xdata(), [0.0, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(line.get_ydata(), [2 / 3] * 4)
    assert ax.get_legend().get_texts()[0].get_text() == 'mug (AP 0.667)'


def test_latency_histogram_marks_the_percentiles_and_the_budget(tmp_path, monkeypatch):
    figures = _drawn(monkeypatch)
    lat = np.arange(1.0, 101.0)                               # 1..100 ms: p50 50.5, p90 90.1, p99 99.01
    plots.plot_latency_histogram(np.append(lat, np.nan), tmp_path / 'lat.png', bins=10, budget_ms=33.3)
    ax = figures[-1].axes[0]
    assert [p.get_height() for p in ax.patches] == [10] * 10  # the NaN is left out
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ['p50 50.50 ms', 'p90 90.10 ms', 'p99 99.01 ms', 'budget 33.3 ms']
    assert ax.get_title() == 'Latency (n=100)'

"""The runtime looks at the whole camera frame (issue 38 item 1): an object at each image edge of a 640x480 and a
1280x720 frame is found by the shipped pipeline, where the centre crop used to cut it away.

Frames come from the procedural renderer (scenes/) at the camera's resolution: a floor scene, one object of each
kind moved along the floor until its centre projects 12 % of the image width (or height) from one edge, fully in
view. The shipped model runs through ``runtime.Pipeline`` as the node runs it (``resize_mode='pad'``, the default).
"""
import numpy as np
import pytest

from string_perception.runtime import Pipeline
from string_perception.scenes import SceneConfig
from string_perception.scenes.generator import render_layout_truth
from string_perception.scenes.layout import sample_layout
from string_perception.symmetry import pairwise_symmetric_iou

pytestmark = pytest.mark.slow

EDGES = ('left', 'right', 'top', 'bottom')
MARGIN = 0.12                          # object centre this fraction of the width / height from the edge


def _edge_frame(h: int, w: int, edge: str, seed: int):
    """A floor scene with ONE object whose centre projects MARGIN from ``edge``, wholly inside the image."""
    cfg = SceneConfig(height=h, width=w, min_objects=1, max_objects=1, table_probability=0.0,
                      wall_probability=0.0, camera_distance_range=(0.55, 0.7), camera_elevation_deg_range=(45, 60),
                      tilt_probability=0.0, min_visibility=0.9)
    target = {'left': (MARGIN * w, h / 2), 'right': ((1 - MARGIN) * w, h / 2),
              'top': (w / 2, MARGIN * h), 'bottom': (w / 2, (1 - MARGIN) * h)}[edge]
    rng = np.random.default_rng(seed)
    layout = sample_layout(rng, cfg)
    cam, obj = layout.camera, layout.objects[0]
    ray = cam.R_wc @ np.linalg.solve(cam.K, [target[0], target[1], 1.0])           # [3] world direction
    s = (obj.p_w[2] - cam.p_wc[2]) / ray[2]                                        # keep the resting height
    obj.p_w = cam.p_wc + s * ray
    obj.t_c, obj.R_c = cam.to_camera(obj.p_w), cam.R_wc.T @ obj.R_w
    layout.objects = [obj]
    return render_layout_truth(layout, rng, cfg, seed).frame


@pytest.fixture(scope='module')
def pipe(model_path):
    return Pipeline(model_path, ('CPUExecutionProvider',), intra_op_threads=1, score_threshold=0.05)


@pytest.mark.parametrize('hw', [(480, 640), (720, 1280)])
@pytest.mark.parametrize('edge', EDGES)
def test_an_object_at_each_image_edge_is_found(pipe, hw, edge):
    from string_perception.runtime.preprocess import center_crop_box
    h, w = hw
    found, cropped_away, frames = 0, 0, []
    for seed in range(3000, 3020):               # the first 3 draws whose object is labelled (>= 90 % in view)
        frame = _edge_frame(h, w, edge, seed)
        frames += [frame] if len(frame.labels) == 1 else []
        if len(frames) == 3:
            break
    assert len(frames) == 3
    for frame in frames:
        u, v = (frame.K @ frame.translations[0])[:2] / frame.translations[0, 2]
        x0, y0, cw, ch = center_crop_box(h, w, *pipe.input_hw)
        cropped_away += not (x0 <= u < x0 + cw and y0 <= v < y0 + ch)
        dets = pipe(frame.rgb, frame.depth_mm, frame.K).detections
        if len(dets):
            iou = pairwise_symmetric_iou((dets.translations, dets.rotations, dets.sizes),
                                         (frame.translations, frame.rotations, frame.sizes),
                                         [frame.class_names[0]])                  # [K,1]
            found += bool(iou.max() >= 0.25)
    assert found >= 2, f'{edge} edge of {w}x{h}: found {found} of {len(frames)}'
    if pipe.input_hw[0] == pipe.input_hw[1] and edge in ('left', 'right'):
        assert cropped_away == len(frames)     # what the centre crop of a square model never looked at

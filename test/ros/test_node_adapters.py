"""The node's parts without DDS: target_frame.TargetFrame, live_params (issue 35 item 5). The node itself over
DDS: test_node_outputs.py (target_frame, outputs), test_node_params_live.py (live parameters), test_node_params.py
(lifecycle, bad inputs)."""
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip('rclpy')

from std_msgs.msg import Header  # noqa: E402

from string_perception import node_params as P  # noqa: E402
from string_perception.ros.latency import FrameTiming  # noqa: E402
from string_perception.ros.live_params import on_parameter_updates, pipeline_settings, tiling_setting  # noqa: E402
from string_perception.ros.target_frame import TargetFrame  # noqa: E402
from string_perception.runtime.pipeline import PipelineResult  # noqa: E402
from string_perception.runtime.postprocess import Detections  # noqa: E402


def _result(translations):
    t = np.asarray(translations, np.float64).reshape(-1, 3)
    m = len(t)
    dets = Detections(translations=t, rotations=np.repeat(np.eye(3)[None], m, 0),
                      quaternions_xyzw=np.tile([0.0, 0.0, 0.0, 1.0], (m, 1)), sizes=np.full((m, 3), 0.1),
                      class_ids=np.zeros(m, np.int64), class_names=['cube'] * m, scores=np.full(m, 0.9))
    return PipelineResult(detections=dets, embedding=np.zeros(4, np.float32), timings={}, input_hw=(32, 32))


class StubTf:
    """TfLookup's contract: lookup(target, source, stamp) -> (R, t) | None, last_error, close()."""

    def __init__(self, moved):
        self.moved, self.calls, self.last_error, self.closed = moved, [], 'no such frame', False

    def lookup(self, target, source, stamp):
        self.calls.append((target, source, stamp.sec))
        return self.moved

    def close(self):
        self.closed = True


def _timing():
    return FrameTiming(0, None, 0, lambda: 0)


def test_target_frame_moves_boxes_into_the_target_and_names_it():
    R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])       # 90 deg about z
    target = TargetFrame(node=None)
    target.tf = StubTf((R, np.array([0.0, 0.0, 1.0])))
    header = Header(frame_id='cam_optical')
    header.stamp.sec = 7
    result = _result([[1.0, 2.0, 3.0]])
    timing = _timing()
    moved, moved_header = target.move('base_link', result, header, timing)
    assert target.tf.calls == [('base_link', 'cam_optical', 7)]
    assert moved_header.frame_id == 'base_link' and moved_header.stamp.sec == 7 and header.frame_id == 'cam_optical'
    np.testing.assert_allclose(moved.detections.translations, [[-2.0, 1.0, 4.0]])
    np.testing.assert_allclose(moved.detections.rotations[0], R)
    np.testing.assert_allclose(result.detections.translations, [[1.0, 2.0, 3.0]])    # the input is not changed
    assert moved.embedding is result.embedding and 'tf' in timing.ms


def test_target_frame_without_a_transform_gives_none_and_without_a_target_the_result():
    target = TargetFrame(node=None)
    header = Header(frame_id='cam_optical')
    result = _result([[1.0, 2.0, 3.0]])
    assert target.move('', result, header, _timing()) == (result, header)
    assert target.move('cam_optical', result, header, _timing()) == (result, header)
    assert target.last_error == ''
    target.tf = stub = StubTf(None)
    assert target.move('base_link', result, header, _timing()) is None
    assert target.last_error == 'no such frame'
    target.close()
    assert stub.closed and target.tf is None


class Log:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(('info', text))

    def warning(self, text):
        self.lines.append(('warning', text))


def _param(name, value):
    return SimpleNamespace(name=name, value=value)


def test_live_values_enter_the_running_configuration_and_the_others_wait_for_configure():
    cfg, log, applied = P.defaults(), Log(), []
    live, later = 'nms_iou', next(s.name for s in P.PARAMS if not s.live and s.type == 'int' and s.hi > s.default)
    new_later = P.SPECS[later].default + 1
    r = on_parameter_updates([_param(live, 0.5), _param(later, new_later)], cfg,
                             lambda merged, new: applied.append((merged[live], merged[later], dict(new))), log)
    assert r.successful
    assert applied == [(0.5, new_later, {live: 0.5, later: new_later})]
    assert cfg[live] == 0.5 and cfg[later] == P.defaults()[later]
    assert log.lines == [('info', f'{later} will apply at the next configure')]


def test_a_refused_update_changes_nothing_and_is_logged():
    cfg, log = P.defaults(), Log()
    r = on_parameter_updates([_param('nms_iou', 5.0)], cfg, lambda *a: pytest.fail('applied'), log)
    assert not r.successful and r.reason and cfg == P.defaults()
    assert log.lines == [('warning', f'rejected parameter update: {r.reason}')]

    def refuse(merged, new):
        raise ValueError('publish_tf needs tf2_ros or tf2_msgs')
    r = on_parameter_updates([_param('marker_alpha', 0.9)], cfg, refuse, log)
    assert not r.successful and r.reason == 'publish_tf needs tf2_ros or tf2_msgs' and cfg == P.defaults()
    r = on_parameter_updates([_param('nms_iou', 0.5)], None, lambda *a: pytest.fail('applied'), Log())
    assert r.successful            # not configured: only checked


def test_pipeline_settings_resolve_the_model_threshold_and_no_depth_limit():
    cfg = {**P.defaults(), 'score_threshold': -1.0, 'max_depth_m': 0.0}
    meta = SimpleNamespace(score_threshold=0.42)
    s = pipeline_settings(cfg, meta)
    assert s['score_threshold'] == P.effective_score_threshold(-1.0, meta)
    assert s['max_depth_m'] is None
    assert pipeline_settings({**cfg, 'score_threshold': 0.25}, meta)['score_threshold'] == 0.25
    assert set(s) == {'score_threshold', 'nms_iou', 'max_detections', 'pre_nms_top_k', 'max_depth_m',
                      'nms_class_agnostic', 'multi_label', 'resize_mode', 'flip_tta'}


def test_flip_tta_auto_is_on_with_a_gpu_provider_only():
    cfg, meta = P.defaults(), SimpleNamespace(score_threshold=None)
    assert cfg['flip_tta'] == 'auto'
    assert pipeline_settings(cfg, meta)['flip_tta'] is False                                   # CPU: 2x the time
    for gpu in ('CUDAExecutionProvider', 'TensorrtExecutionProvider'):
        assert pipeline_settings(cfg, meta, gpu)['flip_tta'] is True
    assert pipeline_settings({**cfg, 'flip_tta': 'on'}, meta)['flip_tta'] is True            # asked for: always
    assert pipeline_settings({**cfg, 'flip_tta': 'off'}, meta, 'CUDAExecutionProvider')['flip_tta'] is False
    with pytest.raises(ValueError, match='flip_tta'):
        P.flip_tta_on('true', 'CPUExecutionProvider')
    assert not P.check_updates([('flip_tta', 'yes')])[0] and P.check_updates([('flip_tta', 'off')])[0]


def test_the_tiling_parameter_maps_to_the_pipeline_tiling_and_refuses_other_grids():
    assert P.defaults()['tiling'] == 'none' and tiling_setting(P.defaults()) is None   # off unless asked for
    tiles = tiling_setting({**P.defaults(), 'tiling': '2x2'})
    assert tiles.grid == (2, 2) and tiles.full_frame_boxes         # whole frame + 4 windows, one merge
    assert tiling_setting({**P.defaults(), 'tiling': '3x3'}).grid == (3, 3)
    ok, reason = P.check_updates([('tiling', '4x4')])
    assert not ok and 'tiling' in reason
    assert P.SPECS['tiling'].live                                    # switched while the node runs

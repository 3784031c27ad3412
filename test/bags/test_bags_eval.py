"""The bag evaluator: the same numbers as evaluation/evaluate.py on the same frames, identical metrics on sqlite3
and mcap copies, every output of the CLI (metrics JSON, plots, annotated frames, output bag with the node's
detections and markers), bags without ground truth, and clear failures for unusable bags."""
import json

import numpy as np
import pytest

from test.support.bag_helpers import frames, ground_truth, write_bag
from string_perception.bags.eval_bag import evaluate_bag, main as eval_main
from string_perception.bags.output_bag import write_output_bag
from string_perception.bags.sample import default_sample_path
from string_perception.evaluation import evaluate as E
from string_perception.training.inference import detections_to_arrays, evaluate_predictions, headline
from string_perception.runtime import Pipeline
from string_perception.scenes import CLASS_NAMES

CPU = ('CPUExecutionProvider',)


@pytest.fixture(scope='module')
def model(tmp_path_factory):
    """A tiny contract model labelled with the scene classes (so ground-truth classes map onto its labels)."""
    from test.support.tiny_model import save_tiny_model
    return str(save_tiny_model(tmp_path_factory.mktemp('model') / 'tiny.onnx', labels=CLASS_NAMES))


def _pipeline(model):
    return Pipeline(model, CPU, score_threshold=E.build_parser().get_default('score_threshold'),
                    nms_iou=E.build_parser().get_default('nms_iou'),
                    max_detections=E.build_parser().get_default('max_detections'))


def test_bag_numbers_equal_the_evaluators_on_the_same_frames(tmp_path, model):
    fs = frames(6)
    bag = write_bag(tmp_path / 'bag', fs)
    pipe = _pipeline(model)
    res = evaluate_bag(bag, pipe, operating_threshold=0.3)
    preds = [detections_to_arrays(pipe(f.rgb, f.depth_mm, f.K, encoding='rgb8', depth_encoding='16UC1').detections)
             for f in fs]
    ref = evaluate_predictions(preds, [ground_truth(f) for f in fs], CLASS_NAMES, operating_threshold=0.3,
                               include_curves=True)
    assert ref['num_pred'] > 0 and ref['avg_best_iou_agnostic'] > 0       # not a comparison of empty sets
    assert res.summary['num_pred'] == ref['num_pred'] and res.summary['num_gt'] == ref['num_gt']
    for p, q in zip(res.preds, preds):
        for k in ('params', 'scores', 'labels'):
            np.testing.assert_array_equal(p[k], q[k])
    got, want = headline(res.summary), headline(ref)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], abs=1e-9, nan_ok=True), k
    for c in CLASS_NAMES:
        a, b = res.summary['ap3d']['0.25']['per_class'][c], ref['ap3d']['0.25']['per_class'][c]
        assert a == pytest.approx(b, abs=1e-9) if b is not None else a is None


def test_sqlite3_and_mcap_copies_give_identical_metrics_and_all_outputs(tmp_path, model):
    sample = default_sample_path()
    mcap = write_output_bag(sample, tmp_path / 'sample_mcap', [], 'mcap')
    outs = {}
    for name, bag in (('sqlite3', sample), ('mcap', mcap)):
        out = tmp_path / name
        argv = [str(bag), '--model', model, '--out', str(out), '--providers', *CPU, '--max-frames', '8',
                '--no-progress', '--num-draw', '2']
        if name == 'mcap':
            argv += ['--output-bag']
        assert eval_main(argv) == 0
        outs[name] = json.loads((out / 'metrics.json').read_text())
    a, b = outs['sqlite3'], outs['mcap']
    assert a['read']['storage'] == 'sqlite3' and b['read']['storage'] == 'mcap'
    assert a['metrics'] == b['metrics'] and a['headline'] == b['headline']
    assert a['frames_scored'] == 8 and a['num_objects'] > 0
    for key in ('avg_best_iou', 'ap3d_25', 'ap3d_50', 'op_avg_best_iou'):
        assert key in a['headline']
    assert set(a['metrics']['ap3d']['0.5']['per_class']) == set(CLASS_NAMES)
    assert {'p50', 'p90', 'p99'} <= set(a['latency_ms']['total_ms'])
    out = tmp_path / 'mcap'
    for f in ('iou_hist.png', 'pr_curve_25.png', 'pr_curve_50.png', 'latency_hist.png', 'frame_0.png',
              'frame_1.png'):
        assert (out / f).stat().st_size > 1000, f
    # the output bag: the input's messages plus one detections and one markers message per evaluated frame
    from rosbags.rosbag2 import Reader
    from string_perception.bags.typestore import make_typestore
    with Reader(b['output_bag']) as r:
        counts = {c.topic: c.msgcount for c in r.connections}
        store = make_typestore()
        dets = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in r.messages()
                if c.topic == '/string_perception/detections']
    assert counts['/string_perception/detections'] == counts['/string_perception/markers'] == 8
    assert counts['/camera/depth/image_raw'] == 24
    assert all(d.header.frame_id == 'camera_color_optical_frame' for d in dets)
    assert all(r.hypothesis.score >= b['operating_threshold'] for d in dets for x in d.detections
               for r in x.results)


def test_bag_without_ground_truth_draws_predictions_only(tmp_path, model, capsys):
    bag = write_bag(tmp_path / 'bag', frames(2), gt=False, colour='jpeg', depth='32FC1')
    assert eval_main([str(bag), '--model', model, '--out', str(tmp_path / 'out'), '--providers', *CPU,
                      '--no-progress']) == 0
    report = json.loads((tmp_path / 'out' / 'metrics.json').read_text())
    assert report['headline'] is None and report['frames_evaluated'] == 2
    assert (tmp_path / 'out' / 'frame_0.png').is_file() and not (tmp_path / 'out' / 'iou_hist.png').exists()
    assert 'no ground truth' in capsys.readouterr().out


def test_unusable_bags_fail_clearly(tmp_path, model, capsys):
    bag = write_bag(tmp_path / 'bag', frames(1))
    db = next(bag.glob('*.db3'))
    db.write_bytes(db.read_bytes()[:1000])
    assert eval_main([str(bag), '--model', model, '--out', str(tmp_path / 'o'), '--no-progress']) == 2
    err = capsys.readouterr().err
    assert str(bag) in err and ('cannot open the bag' in err or 'truncated or corrupt' in err)
    bad = write_bag(tmp_path / 'bad_enc', frames(2), colour_encoding='yuv422')
    assert eval_main([str(bad), '--model', model, '--out', str(tmp_path / 'o2'), '--no-progress']) == 1
    cap = capsys.readouterr()
    assert 'no frame of the bag could be evaluated' in cap.err and "'yuv422' is not one of" in cap.out

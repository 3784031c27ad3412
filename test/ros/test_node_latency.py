"""The node's per-stage latency budget (ros/latency.py, issue 22): known answers for the stage arithmetic and the
windows, and over DDS that every stage a frame goes through is measured, logged and reported in /diagnostics, and
that the benchmark reports each stage and skips unsubscribed outputs. No timed assertions: the figures live in
benchmarks/node_latency.py and docs/results/node_latency.md."""
import json
import math
import os

import numpy as np
import pytest

from benchmarks import node_latency
from test.support.ros_helpers import ros_skip_reason
from string_perception.ros.latency import (OUTPUTS, STAGES, TOTALS, ArrivalBook, FrameTiming, LatencyBudget,
                                           StageLog, pipeline_stages)

MS = 1_000_000   # ns


class FakeClock:
    def __init__(self, t_ns):
        self.t = t_ns

    def __call__(self):
        return self.t


# ------------------------------------------------------------------------------------------ ROS-free arithmetic
def test_frame_timing_splits_stamp_to_publish_into_stages():
    clock = FakeClock(0)
    stamp = 1_000 * MS
    t = FrameTiming(stamp, arrival_ns=stamp + 3 * MS, synced_ns=stamp + 5 * MS, now_ns=clock)
    clock.t = stamp + 12 * MS
    t.started()
    t.add('inference', 7.0)
    t.add('publish_markers', 0.5)
    t.add('publish_markers', 0.25)                    # two parts of one output add up
    clock.t = stamp + 30 * MS
    assert t.mark('stamp_to_detections') == 30.0
    clock.t = stamp + 31 * MS
    t.mark('stamp_to_done')
    assert t.ms == {'transport': 3.0, 'sync_wait': 2.0, 'queue_wait': 7.0, 'inference': 7.0,
                    'publish_markers': 0.75, 'stamp_to_detections': 30.0, 'stamp_to_done': 31.0}


def test_frame_timing_without_arrival_or_with_a_late_one_charges_transport():
    stamp = 50 * MS
    t = FrameTiming(stamp, arrival_ns=None, synced_ns=stamp + 4 * MS, now_ns=FakeClock(0))
    assert (t.ms['transport'], t.ms['sync_wait']) == (4.0, 0.0)
    t = FrameTiming(stamp, arrival_ns=stamp + 9 * MS, synced_ns=stamp + 4 * MS, now_ns=FakeClock(0))
    assert (t.ms['transport'], t.ms['sync_wait']) == (4.0, 0.0)     # never a negative wait


def test_stage_context_adds_time_even_when_the_block_raises():
    t = FrameTiming(0, 0, 0, FakeClock(0))
    with pytest.raises(ValueError):
        with t.stage('decode'):
            raise ValueError('bad frame')
    assert 'decode' in t.ms and t.ms['decode'] >= 0.0


def test_pipeline_stages_takes_every_stage_but_the_total():
    timings = {'preprocess_ms': 1.0, 'inference_ms': 2.0, 'postprocess_ms': 3.0, 'tracking_ms': 0.5,
               'total_ms': 6.5, 'batch_size': 1.0}
    assert pipeline_stages(timings) == {'preprocess': 1.0, 'inference': 2.0, 'postprocess': 3.0, 'tracking': 0.5}


def test_budget_percentiles_means_shares_and_window():
    b = LatencyBudget(window=50)
    for i in range(1, 101):                           # 1..100 ms; the window keeps 51..100
        b.record({'inference': float(i), 'stamp_to_done': 2.0 * i})
    snap = b.snapshot()
    inf = snap['inference']
    assert inf['count'] == 100 and inf['mean'] == pytest.approx(50.5)          # mean over every frame
    assert inf['p50'] == pytest.approx(np.percentile(np.arange(51, 101), 50))  # percentiles over the window
    assert inf['p99'] == pytest.approx(np.percentile(np.arange(51, 101), 99))
    assert inf['share'] == pytest.approx(0.5)
    assert set(snap) == {*STAGES, *TOTALS}
    assert snap['decode']['count'] == 0 and math.isnan(snap['decode']['p50'])
    b.record({'custom_stage': 1.0})
    assert 'custom_stage' in b.snapshot()             # a stage the pipeline adds later is reported too


def test_budget_diagnostic_values_name_every_stage():
    b = LatencyBudget()
    b.record({'transport': 1.0, 'stamp_to_done': 4.0})
    values = b.diagnostic_values()
    for stage in (*STAGES, *TOTALS):
        for key in ('count', 'p50_ms', 'p99_ms', 'mean_ms'):
            assert f'{stage}.{key}' in values
    assert values['transport.count'] == 1 and values['transport.p50_ms'] == 1.0
    assert values['decode.count'] == 0
    b.skipped('markers')
    b.skipped('markers')
    assert b.skips == {'markers': 2}


def test_arrival_book_is_bounded_and_forgets_what_it_gave():
    book = ArrivalBook(size=3)
    for s in range(5):
        book.arrived(s, 100 + s)
    assert book.take(0) is None and book.take(1) is None       # pushed out
    assert book.take(4) == 104 and book.take(4) is None


def test_stage_log_round_trip(tmp_path):
    log = StageLog(str(tmp_path / 'stages.jsonl'))
    log.write(7, {'decode': 0.123456, 'inference': 12.0})
    log.write(8, {'decode': 0.5})
    log.close()
    log.write(9, {'decode': 1.0})                     # after close: ignored, no error
    assert StageLog.read(str(tmp_path / 'stages.jsonl')) == [{'stamp_ns': 7, 'decode': 0.1235, 'inference': 12.0},
                                                             {'stamp_ns': 8, 'decode': 0.5}]


# ------------------------------------------------------------------------------------------ over DDS
ros = pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                         reason='rclpy / vision_msgs not importable')


@pytest.fixture(scope='module')
def tokens_model(tmp_path_factory):
    from test.support.tiny_model import save_tiny_model
    return str(save_tiny_model(tmp_path_factory.mktemp('latency_model') / 'tiny_tokens.onnx', tokens=True))


@ros
@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize('mode', [{}, {'raw_image_input': True, 'inline_processing': True}],
                         ids=['worker', 'raw_inline'])
def test_node_measures_and_reports_every_stage(tmp_path, tokens_model, mode):
    from test.support.ros_helpers import HELPERS, ProcessGroup, reserved_domain_id, ros_test_env
    from string_perception.ros.node import READY_LINE, node_command

    peers = HELPERS.parent / 'node_peers.py'
    prefix = f'/sp_lat_{os.getpid()}'
    pub_json, lis_json, ready, stage_log = (tmp_path / n for n in ('pub.json', 'lis.json', 'ready', 'stages.jsonl'))
    # every output on and built whether or not anyone listens, so every stage runs
    cmd = node_command(tokens_model, params={'providers': ['CPUExecutionProvider'], 'publish_tokens': True,
                                             'publish_debug_image': True, 'skip_unsubscribed_outputs': False,
                                             'latency_log': str(stage_log), 'diagnostics_period': 0.2, **mode},
                       remaps={'image': f'{prefix}/color/image_raw', 'depth': f'{prefix}/depth/image_raw',
                               'camera_info': f'{prefix}/color/camera_info'})
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        lis = pg.start_python('listener', [str(peers), 'output-listener', '--out', str(lis_json), '--ready',
                                           str(ready), '--publisher-done', str(pub_json), '--timeout', '50'])
        node = pg.start_python('node', cmd[1:])
        pub = pg.start_python('publisher', [str(peers), 'frame-publisher', '--prefix', prefix, '--out',
                                            str(pub_json), '--listener-ready', str(ready), '--frames', '12',
                                            '--rate', '10'])
        assert pub.wait(timeout=60) == 0, pg.logs()
        assert lis.wait(timeout=30) == 0, pg.logs()
        assert node.popen.poll() is None, pg.logs()
        assert node.stop() == 0, pg.logs()
        logs = pg.logs()
    assert READY_LINE in logs
    got = json.loads(lis_json.read_text())
    records = [json.loads(line) for line in stage_log.read_text().splitlines()]
    assert records, logs
    diag = got['diagnostics'][-1]['values']
    for stage in (*STAGES, *TOTALS):
        measured = sum(stage in r for r in records)
        assert int(diag[f'stage.{stage}.count']) == measured, stage          # /diagnostics counts what was logged
        for key in ('p50_ms', 'p99_ms', 'mean_ms'):
            assert f'stage.{stage}.{key}' in diag
        if stage not in ('tf', 'tracking'):       # tf: no target_frame; tracking: only when the pipeline has it
            assert measured == len(records), f'{stage} measured in {measured} of {len(records)} frames'
            assert all(r[stage] >= 0.0 or stage == 'transport' for r in records)
    assert int(diag['published']) == len(records)
    for r in records:                             # the totals bound the in-node stages
        inside = sum(r[s] for s in ('decode', 'preprocess', 'inference', 'postprocess', 'publish_detections'))
        assert r['stamp_to_detections'] >= inside and r['stamp_to_done'] >= r['stamp_to_detections']
    assert {f'outputs_skipped.{o}' for o in OUTPUTS[1:]} <= set(diag)
    assert all(int(diag[f'outputs_skipped.{o}']) == 0 for o in OUTPUTS[1:])


@ros
@pytest.mark.ros
@pytest.mark.slow
def test_benchmark_reports_every_stage_and_skips_unsubscribed_outputs(tmp_path, capsys):
    from test.support.tiny_model import save_tiny_model
    model = save_tiny_model(tmp_path / 'tiny.onnx')
    out = tmp_path / 'res.json'
    rc = node_latency.main(['--variants', 'new', 'old', '--duration', '3', '--rate', '10', '--bare-seconds', '1',
                     '--warmup', '0', '--model', str(model), '--json', str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    res = {r['variant']: r for r in json.loads(out.read_text())['results']}
    for name in ('new', 'old'):
        r = res[name]
        assert 0 < r['answered'] <= r['sent']
        st = r['stages']
        for stage in ('transport', 'sync_wait', 'queue_wait', 'decode', 'preprocess', 'inference', 'postprocess',
                      'publish_detections', 'stamp_to_detections', 'stamp_to_done'):
            assert st[stage]['count'] == r['answered'], (name, stage)
        assert r['bare_ms']['frames'] == 10 and r['ratio_p50'] > 0
        assert f"== {name} " in text
    # nobody subscribes to markers / embedding: the new node builds none, the old one builds them every frame
    assert res['new']['stages']['publish_markers']['count'] == 0
    assert res['new']['stages']['publish_embedding']['count'] == 0
    assert res['old']['stages']['publish_markers']['count'] == res['old']['answered']
    assert res['old']['stages']['publish_embedding']['count'] == res['old']['answered']
    assert 'variant' in text and 'answered' in text

"""benchmarks/aloha_encoding_level.py (issue 39 item 3): one detector run = the encoding study's frozen probe + the
fine-tune study's trained arm, and the report over detectors (known answers from synthetic result files)."""
import json
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import pytest  # noqa: E402
pytest.importorskip('mujoco')  # optional: requirements/sim.txt (the studies import the simulated cell)

from benchmarks import aloha_encoding_level as level  # noqa: E402
from benchmarks import aloha_encoding_study, aloha_finetune_study  # noqa: E402


def test_run_chains_the_two_studies_on_the_same_probe(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(aloha_encoding_study, 'main', lambda argv: calls.append(('frozen', argv)) or 0)
    monkeypatch.setattr(aloha_finetune_study, 'main', lambda argv: calls.append(('trained', argv)) or 0)
    run = tmp_path / 'runs' / 'vitd-rope' / 'seed2'
    assert level.main(['run', '--detector-run', str(run), '--privileged', 'head.pt', '--frames', 'f.npz',
                       '--out', str(tmp_path / 'out'), '--probe-steps', '60']) == 0
    (k1, a1), (k2, a2) = calls
    assert (k1, k2) == ('frozen', 'trained')
    assert a1[a1.index('--detector') + 1] == str(run / 'best.pt')
    assert a1[a1.index('--probe-seeds') + 1] == '0' and a1[a1.index('--save-at') + 1] == '--privileged'
    assert a1[a1.index('--train-size') + 1] == '1000'
    probe = a2[a2.index('--localiser') + 1]                       # the file the encoding study writes
    assert probe.startswith(str(tmp_path / 'out' / 'frozen' / 'probe'))
    assert aloha_encoding_study.PROBE_NAME.search(probe).groups() == ('1000', '0', '60')
    assert a2[a2.index('--arms') + 1] == 'finetuned' and a2[a2.index('--steps') + 1] == '1000'
    assert a2[a2.index('--detector-run') + 1] == str(run)
    for argv in (a1, a2):
        assert argv[argv.index('--privileged') + 1] == 'head.pt'
        assert argv[argv.index('--eval-seeds') + 1] == '1000:1050'


def _eval_file(path, success_max):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({'summary': {'success_max': success_max}}))


def _write_run(d, config, seed, iou, frozen, trained):
    """Result files as the two studies write them; max-reward successes = last-step successes + 1."""
    (d / 'frozen').mkdir(parents=True)
    (d / 'trained').mkdir()
    _eval_file(d / 'frozen' / 'eval' / 'seed0_step6000.json', frozen[0] + 1)
    for st, k, _ in trained:
        _eval_file(d / 'trained' / 'finetuned' / 'eval' / f'step{st}.json', k + 1)
    (d / 'frozen' / 'study.json').write_text(json.dumps({
        'detector': {'table4_config': config, 'detector_seed': seed, 'detector_test': {'avg_best_iou_sym': iou}},
        'rows': [dict(probe_seed=0, step=6000, success=frozen[0], episodes=50, probe_test_median_cm=frozen[1])]}))
    (d / 'trained' / 'finetune.json').write_text(json.dumps({'rows': [
        dict(arm='finetuned', step=st, success=k, episodes=50, test_median_cm=e, test_p90_cm=2 * e,
             detection_test={'avg_best_iou_sym': iou - 0.01} if st == 1000 else None)
        for st, k, e in trained]}))


def test_report_pools_detectors_per_encoding(tmp_path):
    _write_run(tmp_path / 'a', 'vitd-cayley', 0, 0.44, (20, 1.8), [(500, 40, 1.0), (1000, 45, 0.8)])
    _write_run(tmp_path / 'b', 'vitd-cayley', 1, 0.42, (10, 2.2), [(500, 30, 1.4), (1000, 35, 1.2)])
    _write_run(tmp_path / 'c', 'vitd-none', 0, 0.36, (5, 6.0), [(500, 8, 5.0), (1000, 10, 4.0)])
    (tmp_path / 'unfinished' / 'frozen').mkdir(parents=True)               # no result files yet: left out
    runs = [r for r in map(level.load_run, [tmp_path / n for n in ('a', 'b', 'c', 'unfinished')]) if r]
    assert len(runs) == 3
    summary = level.summary_lines(runs)
    assert summary[2] == '| vitd-none | 1 (0) | 36.0 % | **12 %** ± 0 | **22 %** ± 0 | 6.00 | 4.00 |'
    assert summary[3] == '| vitd-cayley | 2 (0, 1) | 43.0 % | **32 %** ± 14 | **82 %** ± 14 | 2.00 | 1.00 |'
    detail = level.detail_lines(runs)
    assert detail[2] == ('| vitd-none seed 0 | 36.0 % | 6/50 (5; 6.00 cm) | 9/50 (8; 5.00 cm) | 11/50 (10; 4.00 cm) '
                         '| 35.0 % |')
    assert level.main(['report', *(str(tmp_path / n) for n in 'abc'), '--out', str(tmp_path / 'rep')]) == 0
    assert (tmp_path / 'rep' / 'success_vs_step.png').stat().st_size > 0

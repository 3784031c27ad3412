"""The cube localiser (policy/train_localiser.py, issue 23) on real step-0 frames of the simulated cell (micro run,
tiny encoder), its checkpoint as a cube estimator in benchmarks.aloha_policy, the privileged actor's noisy or
estimated cube position, and the encoding and fine-tune studies built on them."""
import json
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import pytest  # noqa: E402
pytest.importorskip('torch')  # optional: requirements/train.txt
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import torch  # noqa: E402

from benchmarks import aloha_encoding_study, aloha_finetune_study, aloha_policy  # noqa: E402
from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.model.vitd import save_checkpoint  # noqa: E402
from string_perception.policy import train_localiser  # noqa: E402
from string_perception.policy.config import PolicyConfig  # noqa: E402
from string_perception.policy.data import BOX_SCALE, privileged_state  # noqa: E402
from string_perception.policy.train_bc import train  # noqa: E402
from string_perception.sim.demos.rollout import Observation  # noqa: E402

pytestmark = pytest.mark.slow
TINY = dict(image_size=(16, 24), patch_size=8, width=32, depth=1, num_heads=2, class_embed_dim=8, embed_dim=16,
            encoding='cayley')


@pytest.fixture(scope='module')
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp('probe')
    torch.manual_seed(0)
    save_checkpoint(d / 'enc.pt', build_model(ViTDConfig(**TINY)))
    assert train_localiser.main(['--encoder-checkpoint', str(d / 'enc.pt'), '--train-seeds', '0:6',
                                 '--test-seeds', '1000000:1000003', '--sizes', '3', '6', '--steps', '3', '--out',
                                 str(d / 'out')]) == 0
    return d


def test_probe_scores_each_training_size_on_held_out_seeds(probe):
    d = probe
    res = json.loads((d / 'out' / 'probe.json').read_text())
    assert [r['train_seeds'] for r in res['rows']] == [3, 6]
    for r in res['rows']:
        assert all(np.isfinite(v) and v >= 0 for k, v in r.items() if k.endswith('_cm'))
        # the cube lies within gym-aloha's 20 x 20 cm range: no estimate can be a metre off
        assert r['mean_position_median_cm'] < 30


def test_probe_checkpoint_estimates_the_cube_from_a_frame(probe):
    d = probe
    est = aloha_policy.CubeEstimator(str(d / 'out' / 'probe.pt'))
    color, depth, K, cube = train_localiser.start_frame(1000000)
    obs = Observation(0, color, depth, K, np.zeros(14), cube)
    a, b = est(obs), est(obs)
    assert a.shape == (3,) and np.all(np.isfinite(a)) and np.array_equal(a, b)     # deterministic, eval mode


def test_privileged_actor_noise_and_estimator(probe, tmp_path):
    d = probe
    ckpt = _privileged_checkpoint(tmp_path)
    color, depth, K, cube = train_localiser.start_frame(1000001)
    obs = Observation(0, color, depth, K, np.zeros(14), cube)
    exact, noisy, again = (aloha_policy.PrivilegedActor(ckpt, noise) for noise in (0.0, 0.02, 0.02))
    for actor in (exact, noisy, again):
        assert actor(obs).shape == (8, 14)
    assert np.allclose(exact.state[0].numpy(), privileged_state(cube))
    offset = (noisy.state[0] - exact.state[0]).numpy() * BOX_SCALE                     # metres
    assert 0 < np.abs(offset).max() < 0.2 and torch.equal(noisy.state, again.state)  # the episode's own noise
    est = aloha_policy.PrivilegedActor(ckpt, estimator=str(d / 'out' / 'probe.pt'))
    est(obs)
    assert len(est.errors_m) == 1 and est.errors_m[0] == pytest.approx(
        float(np.linalg.norm(est.state[0].numpy() - privileged_state(cube)) * BOX_SCALE), rel=1e-5)


def _privileged_checkpoint(tmp_path) -> str:
    demos = tmp_path / 'demos'
    demos.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for s in range(3):
        q = rng.normal(size=(20, 14)).astype(np.float32)
        np.savez(demos / f'demo_{s:06d}.npz', qpos=q, action=q, reward=np.zeros(20, np.int8),
                 frame_steps=np.arange(0, 20, 10), color=np.zeros((2, 16, 24, 3), np.uint8),
                 depth=np.full((2, 16, 24), 800, np.uint16), K=np.eye(3), object_xyz=np.array([0.1, 0.5, 0.05]),
                 seed=np.int64(s), success=np.bool_(True))
    cfg = PolicyConfig(demos=str(demos), observation='privileged', out=str(tmp_path / 'priv'), val_episodes=1,
                       chunk_size=8, query_every=4, hidden=16, layers=2, steps=2, batch_size=4, warmup_steps=1,
                       val_every=2)
    train(cfg, progress=False)
    return str(tmp_path / 'priv' / 'last.pt')


def test_two_stage_export_runs_the_localiser_and_the_privileged_head(probe, tmp_path):
    """The deployable two-stage pair: perception ONNX = the localiser's ViTD, policy ONNX = aux o privileged chunk
    head on its embedding; the ONNX pair equals the PyTorch composition on a real cell frame."""
    from string_perception.policy.export import export_two_stage
    from string_perception.policy.localiser import EstimatedStateHead, load_localiser
    from string_perception.policy.train_bc import load_policy
    from string_perception.runtime import OnnxModel, prepare_inputs
    from string_perception.runtime.policy_model import PolicyModel
    d = probe
    priv = _privileged_checkpoint(tmp_path)
    with pytest.raises(ValueError, match='not a cube_probe checkpoint'):   # a BC checkpoint is no localiser
        load_localiser(priv)
    with pytest.raises(ValueError, match='pool-points false'):          # the pooled point is not published
        export_two_stage(priv, d / 'out' / 'probe.pt', tmp_path / 'refused', log=lambda *_: None)
    assert train_localiser.main(['--encoder-checkpoint', str(d / 'enc.pt'), '--train-seeds', '0:6',
                                 '--test-seeds', '1000000:1000003', '--sizes', '6', '--steps', '3',
                                 '--pool-points', 'false', '--out', str(tmp_path / 'emb')]) == 0
    r = export_two_stage(priv, tmp_path / 'emb' / 'probe.pt', tmp_path / 'onnx', log=lambda *_: None)
    assert r['perception_ok'] and r['policy_parity_max_abs_diff'] < 1e-4
    perception, policy_file = OnnxModel(r['perception_onnx']), PolicyModel(r['policy_onnx'])
    assert perception.metadata.extra['embedding_source'] == 'cube_localiser'
    assert policy_file.metadata.embed_dim == TINY['embed_dim'] and policy_file.metadata.chunk_size == 8
    assert policy_file.metadata.perception_model_sha256 == r['perception_weights_sha256']
    color, depth, K, _ = train_localiser.start_frame(1000002)
    inp = prepare_inputs(color, depth, K, TINY['image_size'], resize_mode='crop')   # as the policy data
    emb = perception.run(**inp.feed())['embedding']                                # [1,E]
    qpos = np.linspace(-0.5, 0.5, 14, dtype=np.float32)[None]
    localiser, aux, _ = load_localiser(tmp_path / 'emb' / 'probe.pt')
    _, head, _, _ = load_policy(priv)
    with torch.no_grad():
        tokens = localiser.tokens(*(torch.as_tensor(v) for v in inp.feed().values()))
        ref_emb = localiser.embedding_from_tokens(tokens)
        ref = EstimatedStateHead(aux, head)(ref_emb, torch.as_tensor(qpos)).numpy()          # [1,K,J]
        composed = head(aux(ref_emb), torch.as_tensor(qpos)).numpy()
    assert np.array_equal(ref, composed)                                            # aux, then the chunk head
    assert np.abs(emb - ref_emb.numpy()).max() < 1e-4
    assert np.abs(policy_file.predict(emb, qpos) - ref).max() < 1e-3
    # the privileged head acts on where the cube started: every query of an episode gets its first embedding
    from string_perception.sim.demos.rollout import OnnxActor
    assert policy_file.metadata.embedding_latch == 'episode_start'
    actor = OnnxActor(r['perception_onnx'], r['policy_onnx'])
    other = train_localiser.start_frame(1000001)
    first = actor(Observation(0, color, depth, K, qpos[0], np.zeros(3)))
    later = actor(Observation(10, other[0], other[1], other[2], qpos[0], np.zeros(3)))
    assert np.array_equal(first, later)                              # same qpos, the latched embedding
    fresh = actor(Observation(0, other[0], other[1], other[2], qpos[0], np.zeros(3)))   # a new episode
    assert np.allclose(fresh, policy_file.predict(actor.embedding(Observation(0, *other[:3], qpos[0], np.zeros(3))),
                                                  qpos)[0], atol=1e-6)


def test_encoding_study_probes_each_seed_along_its_run_and_evaluates_every_saved_localiser(probe, tmp_path):
    """benchmarks.aloha_encoding_study run: per probe seed, localisers saved before step 2 and at the end, each
    exported as the ONNX pair and run closed loop; a second run reuses every result; report tabulates them."""
    d = probe
    study = aloha_encoding_study
    priv = _privileged_checkpoint(tmp_path)
    out = tmp_path / 'study'
    argv = ['run', '--detector', str(d / 'enc.pt'), '--privileged', priv, '--out', str(out), '--probe-seeds', '0',
            '1', '--steps', '3', '--save-at', '2', '--train-seeds', '0:6', '--train-size', '6',
            '--test-seeds', '1000000:1000003', '--eval-seeds', '1000:1001']
    assert study.main(argv) == 0
    res = json.loads((out / 'study.json').read_text())
    assert res['detector']['encoding'] == 'cayley'
    assert sorted((r['probe_seed'], r['step']) for r in res['rows']) == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert all(r['episodes'] == 1 and r['success'] in (0, 1) and r['probe_test_median_cm'] >= 0 for r in res['rows'])
    probe_rows = {r['probe_seed']: r for r in json.loads((out / 'probe' / 'probe.json').read_text())['rows']}
    for r in res['rows']:                          # the error the probe measured when it saved that checkpoint
        pr = probe_rows[r['probe_seed']]
        expected = pr['test_median_cm'] if r['step'] == 3 else pr['along'][0]['test_median_cm']
        assert r['probe_test_median_cm'] == expected
    aux = [torch.load(out / 'probe' / f'probe_n6_seed{s}_step3.pt', weights_only=True)['aux']['weight'] for s in (0, 1)]
    assert not torch.equal(*aux)                                                   # the seed changes the probe
    evals = sorted((out / 'eval').glob('*.json'))
    for f in evals:                                # each evaluation ran its own exported pair
        assert json.loads(f.read_text())['summary']['spec']['policy'] == str(out / 'onnx' / f.stem / 'policy.onnx')
    stamps = [f.stat().st_mtime_ns for f in evals]
    assert len(evals) == 4 and study.main(argv) == 0                               # resumable: nothing rerun
    assert [f.stat().st_mtime_ns for f in evals] == stamps
    assert study.main(['report', str(out), '--out', str(tmp_path / 'report')]) == 0
    table = (tmp_path / 'report' / 'table.md').read_text()
    assert 'mean ± sd' in table and (tmp_path / 'report' / 'success_vs_step.png').stat().st_size > 0


def test_encoding_study_table_means_and_spreads_over_probe_seeds():
    rows = [dict(config='vitd-cayley', detector_seed=1, detector_iou_sym=0.4, probe_seed=s, step=6000,
                 success=k, episodes=50, probe_test_median_cm=1.5) for s, k in ((0, 20), (1, 30))]
    lines = aloha_encoding_study.table_lines(rows)
    assert lines[2] == '| vitd-cayley seed 1 | 40.0 % | 0 | 20/50 | 1.50 |'
    assert lines[-1] == '| vitd-cayley seed 1 | | mean ± sd | **50 %** ± 14 | |'             # sample sd


def test_each_eval_spec_gets_its_own_actor_in_one_process(tmp_path):
    """Several `eval` calls in one process (the encoding study) must not reuse the first call's model: one actor
    per spec, reused across that spec's seeds."""
    ckpt = _privileged_checkpoint(tmp_path)
    spec = dict(perception=None, policy=None, privileged=ckpt, torch=None, query_every=None, cube_noise_m=0.01,
                cube_estimator=None)
    first = aloha_policy.actor_for(spec)
    assert aloha_policy.actor_for(dict(spec)) is first
    other = aloha_policy.actor_for(dict(spec, cube_noise_m=0.03))
    assert other is not first and other.cube_noise_m == 0.03


def test_encoding_study_summary_pools_detector_and_probe_seeds_at_the_last_step():
    rows = [dict(config='vitd-rope', detector_seed=d, detector_iou_sym=0.4, probe_seed=0, step=st, success=k,
                 episodes=50, probe_test_median_cm=e) for d, st, k, e in
            ((1, 3000, 50, 9.0), (1, 6000, 5, 6.0), (2, 6000, 15, 4.0))]
    lines = aloha_encoding_study.summary_lines(rows)
    assert lines[0].startswith('| detector config | detectors (seeds) | probes | success at step 6000')
    assert lines[2] == '| vitd-rope | 2 (1, 2) | 2 | **20 %** ± 14 | 10-30 % | 20 % ± 14 | 5.00 |'
    rows.append(dict(rows[-1], probe_seed=1, success=5, probe_test_median_cm=6.0))   # detector 2: 30 and 10 %
    assert aloha_encoding_study.summary_lines(rows)[2] == \
        '| vitd-rope | 2 (1, 2) | 3 | **17 %** ± 12 | 10-30 % | 15 % ± 7 | 5.33 |'


@pytest.fixture(scope='module')
def deployable_probe(probe, tmp_path_factory):
    """A localiser without the pooled point (the deployable kind) and the start frames it saw, tiny size."""
    d = probe
    out = tmp_path_factory.mktemp('deployable')
    assert train_localiser.main(['--encoder-checkpoint', str(d / 'enc.pt'), '--train-seeds', '0:6',
                                 '--test-seeds', '1000000:1000003', '--sizes', '6', '--steps', '3',
                                 '--pool-points', 'false', '--out', str(out)]) == 0
    return out / 'probe.pt', out


def test_finetune_arms_see_the_same_embedding_and_differ_only_in_the_encoder(deployable_probe):
    """At zero learning rates both arms keep the probe's held-out error (the frozen arm's cached fp16 tokens and
    the fine-tuned arm's encoder pass give the same embedding); with a rate, only the fine-tuned arm's encoder
    moves, and the frozen arm's non-head weights stay bit-identical."""
    from string_perception.policy.localiser import load_localiser
    study = aloha_finetune_study
    localiser, d = deployable_probe
    frames = study.start_frames(d / 'frames.npz', '0:6', '1000000:1000003', TINY['image_size'], 1)
    assert frames['image'].shape == (9, *TINY['image_size'], 3) and int(frames['n_train']) == 6
    assert study.start_frames(d / 'frames.npz', '0:6', '1000000:1000003', TINY['image_size'], 1)['seeds'].tolist() \
        == [*range(6), 1000000, 1000001, 1000002]                                   # the cache answers
    policy, aux, _ = load_localiser(localiser)
    start = study.heldout_error_cm(policy, aux, frames, None)
    still = {arm: study.train_arm(localiser, frames, arm, steps=2, batch_size=4, head_lr=0.0, encoder_lr=0.0,
                                  seed=0, warmup=1)[2] for arm in study.ARMS}
    for arm in study.ARMS:
        assert still[arm]['test_median_cm'] == pytest.approx(start['test_median_cm'], abs=0.05)
        assert still[arm]['encoder_relative_change'] == 0
    moved = {arm: study.train_arm(localiser, frames, arm, steps=3, batch_size=4, head_lr=1e-3, encoder_lr=1e-3,
                                  seed=0, warmup=1) for arm in study.ARMS}
    assert moved['frozen'][2]['encoder_relative_change'] == 0
    assert moved['finetuned'][2]['encoder_relative_change'] > 0
    before = policy.vitd.state_dict()
    after = moved['frozen'][0].vitd.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if not k.startswith('policy_head.'))
    assert not all(torch.equal(before[k], after[k]) for k in before if k.startswith('policy_head.'))


def test_finetune_study_exports_and_evaluates_each_arm_and_says_which_encoder_trained(deployable_probe, tmp_path):
    """run: both arms saved along the way, each saved localiser exported as the ONNX pair (its metadata says
    whether the encoder was trained) and run closed loop; a second run reuses everything; report tabulates."""
    from string_perception.runtime import OnnxModel
    from string_perception.runtime.policy_model import PolicyModel
    study = aloha_finetune_study
    localiser, d = deployable_probe
    out = tmp_path / 'ft'
    argv = ['run', '--localiser', str(localiser), '--privileged', _privileged_checkpoint(tmp_path), '--frames',
            str(d / 'frames.npz'), '--out', str(out), '--steps', '3', '--save-at', '1', '--warmup', '1',
            '--train-seeds', '0:6', '--test-seeds', '1000000:1000003', '--eval-seeds', '1000:1001']
    assert study.main(argv) == 0
    res = json.loads((out / 'finetune.json').read_text())
    assert sorted((r['arm'], r['step']) for r in res['rows']) == [('finetuned', 1), ('finetuned', 3), ('frozen', 1),
                                                                   ('frozen', 3)]
    assert all(r['episodes'] == 1 and r['success'] in (0, 1) for r in res['rows'])
    for arm, frozen in (('frozen', 'true'), ('finetuned', 'false')):
        onnx_dir = out / arm / 'onnx' / 'step3'
        assert OnnxModel(str(onnx_dir / 'perception.onnx')).metadata.extra['policy_encoder_frozen'] == frozen
        assert PolicyModel(str(onnx_dir / 'policy.onnx')).metadata.extra['encoder_frozen'] == (frozen == 'true')
        assert json.loads((out / arm / 'eval' / 'step3.json').read_text())['summary']['spec']['perception'] == str(
            onnx_dir / 'perception.onnx')
    evals = sorted(out.glob('*/eval/*.json'))
    stamps = [f.stat().st_mtime_ns for f in evals]
    assert len(evals) == 4 and study.main(argv) == 0                              # resumable: nothing rerun
    assert [f.stat().st_mtime_ns for f in evals] == stamps
    assert study.main(['report', str(out), '--out', str(tmp_path / 'report')]) == 0
    table = (tmp_path / 'report' / 'table.md').read_text().splitlines()
    assert len(table) == 3 + 1 + 2 + 1 + 4 and '| finetuned | 3 |' in table[-1]     # summary, blank, per step


def test_finetune_summary_pools_localisers_at_each_arms_last_step():
    def study(probe_seed, frozen, finetuned):
        rows = [dict(arm=arm, step=st, success=k, episodes=50, test_median_cm=e) for arm, st, k, e in
                (('frozen', 500, 49, 9.0), ('frozen', 1000, *frozen), ('finetuned', 1000, *finetuned))]
        return dict(localiser='p.pt', localiser_row=dict(probe_seed=probe_seed), rows=rows,
                    detector=dict(config='vitd-cayley', seed=1))
    lines = aloha_finetune_study.summary_lines([study(0, (20, 1.5), (24, 1.0)), study(1, (10, 2.5), (30, 2.0))])
    assert lines[2] == '| vitd-cayley | 2 | **30 %** ± 14 | **54 %** ± 8 | 2.00 | 1.50 |'   # sample sd


def test_finetune_summary_of_runs_that_trained_one_arm():
    rows = [dict(arm='finetuned', step=1000, success=40, episodes=50, test_median_cm=0.9)]
    study = dict(localiser='p.pt', localiser_row=dict(probe_seed=0), rows=rows, detector=dict(config='vitd-rope', seed=0))
    assert aloha_finetune_study.summary_lines([study])[2] == '| vitd-rope | 1 |  | **80 %** ± 0 |  | 0.90 |'

"""One policy pipeline for both gym-aloha tasks (sim/demos/tasks.py, issue 39 item 5): the privileged state of the
insertion task is the peg's and the socket's start positions (6 numbers), demos carry their task, training,
the privileged actor, the localiser and the exported pair follow it, and former transfer-cube demos still load."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip('torch')  # optional: requirements/train.txt
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import torch  # noqa: E402

from string_perception.policy.config import PolicyConfig  # noqa: E402
from string_perception.policy.data import (BOX_SCALE, build_samples, load_demos, object_errors_m,  # noqa: E402
                                           privileged_state)
from string_perception.policy.privileged import PrivilegedActor  # noqa: E402
from string_perception.policy.train_bc import load_policy, train  # noqa: E402
from string_perception.sim.demos.insertion import PEG_RANGE, SOCKET_RANGE, sample_insertion_pose  # noqa: E402
from string_perception.sim.demos.rollout import Observation, RolloutConfig, record_demonstration  # noqa: E402
from string_perception.sim.demos.tasks import TASKS, get_task  # noqa: E402
from string_perception.sim.demos.transfer_cube import BOX_RANGE  # noqa: E402

T, EVERY = 40, 4


def test_scaled_state_is_zero_mid_range_and_within_one_at_the_corners():
    for task, ranges in (('transfer_cube', [BOX_RANGE]), ('insertion', [PEG_RANGE, SOCKET_RANGE])):
        t = get_task(task)
        assert t.state_dim == 3 * len(ranges)
        np.testing.assert_allclose(t.scaled_state(t.state_centre), 0.0, atol=1e-7)
        low = np.concatenate([r[:, 0] for r in ranges])
        high = np.concatenate([r[:, 1] for r in ranges])
        assert np.abs(t.scaled_state(low)).max() <= 1.0 and np.abs(t.scaled_state(high)).max() <= 1.0
        assert np.isclose(np.abs(t.scaled_state(high)).max(), 1.0)               # y spans 0.2 m: exactly +-1
    with pytest.raises(ValueError, match='expected 6'):
        get_task('insertion').scaled_state(np.zeros(3))
    with pytest.raises(ValueError, match='unknown task'):
        get_task('stacking')
    with pytest.raises(ValueError, match='task'):
        RolloutConfig(task='stacking').validate()
    with pytest.raises(ValueError, match='task'):
        PolicyConfig(task='stacking')


def test_object_xyz_after_reset_is_the_sampled_pose_peg_first():
    t = TASKS['insertion']
    scene = t.make_scene()
    scene.reset(7)
    peg, socket = sample_insertion_pose(7)
    np.testing.assert_allclose(t.object_xyz(scene), np.r_[peg[:3], socket[:3]], atol=1e-9)
    cube = TASKS['transfer_cube']
    scene = cube.make_scene()
    box = scene.reset(7)
    np.testing.assert_allclose(cube.object_xyz(scene), box[:3], atol=1e-9)


def test_recorded_insertion_demo_carries_its_task_and_both_objects():
    demo = record_demonstration(0, frame_every=EVERY, config=RolloutConfig(task='insertion', render=False))
    peg, socket = sample_insertion_pose(0)
    assert str(demo['task']) == 'insertion' and demo['object_xyz'].shape == (6,)
    np.testing.assert_allclose(demo['object_xyz'], np.r_[peg[:3], socket[:3]], atol=1e-9)
    assert demo['reward'].max() == 4 and bool(demo['success'])             # the scripted demonstrator inserts
    assert demo['color'].shape == (100, 0, 0, 3)                            # physics only


def test_object_errors_known_answer():
    state = torch.zeros(2, 6)
    pred = state.clone()
    pred[0, 0] = 0.1 / BOX_SCALE                                            # seed 0: peg 10 cm off along x
    pred[1, 3:] = torch.tensor([0.03, 0.04, 0.0]) / BOX_SCALE               # seed 1: socket 5 cm off (3-4-5)
    np.testing.assert_allclose(object_errors_m(pred, state).numpy(), [[0.1, 0.0], [0.0, 0.05]], atol=1e-6)
    np.testing.assert_allclose(object_errors_m(pred.numpy(), state.numpy()), [[0.1, 0.0], [0.0, 0.05]], atol=1e-6)


def fake_demo(seed: int, task: str | None) -> dict:
    rng = np.random.default_rng(seed)
    f = np.arange(0, T, EVERY)
    qpos = rng.normal(size=(T, 14)).astype(np.float32)
    d = dict(qpos=qpos, action=(qpos + 0.1).astype(np.float32), reward=np.zeros(T, np.int8), frame_steps=f,
             color=np.zeros((len(f), 0, 0, 3), np.uint8), depth=np.zeros((len(f), 0, 0), np.uint16), K=np.eye(3),
             seed=np.int64(seed), success=np.bool_(True))
    if task is None:                                                        # the layout before tasks.py
        d['cube_xyz'] = np.array([0.1, 0.5, 0.05]) + 0.05 * rng.normal(size=3)
    else:
        d['object_xyz'] = get_task(task).state_centre + 0.05 * rng.normal(size=get_task(task).state_dim)
        d['task'] = np.str_(task)
    return d


def write_demos(directory, task, seeds=range(4)):
    directory.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        np.savez(directory / f'demo_{s:06d}.npz', **fake_demo(s, task))
    return directory


def test_demos_of_the_former_layout_read_as_transfer_cube_and_tasks_do_not_mix(tmp_path):
    legacy = load_demos(write_demos(tmp_path / 'legacy', None))
    assert all(str(d['task']) == 'transfer_cube' and d['object_xyz'].shape == (3,) for d in legacy)
    s = build_samples(legacy, chunk_size=8)
    np.testing.assert_allclose(s.state[0], privileged_state(legacy[0]['object_xyz']))
    ins = load_demos(write_demos(tmp_path / 'ins', 'insertion'))
    assert build_samples(ins, chunk_size=8).state.shape == (len(ins) * T // EVERY, 6)
    write_demos(tmp_path / 'ins', None, seeds=[9])
    with pytest.raises(ValueError, match='several tasks'):
        load_demos(tmp_path / 'ins')


def test_privileged_insertion_policy_acts_on_both_objects(tmp_path):
    demos = write_demos(tmp_path / 'ins', 'insertion')
    base = dict(demos=str(demos), observation='privileged', val_episodes=1, chunk_size=8, query_every=4, hidden=32,
                layers=2, steps=3, batch_size=4, warmup_steps=1, val_every=3, log_every=1)
    with pytest.raises(ValueError, match='holds insertion demos'):
        train(PolicyConfig(**base, out=str(tmp_path / 'wrong')), progress=False)      # task defaults to the cube
    train(PolicyConfig(**base, task='insertion', out=str(tmp_path / 'run')), progress=False)
    _, head, cfg, _ = load_policy(tmp_path / 'run' / 'last.pt')
    assert cfg.task == 'insertion' and head.embed_dim == 6
    actor = PrivilegedActor(tmp_path / 'run' / 'last.pt')
    assert actor.rollout_config().task == 'insertion'
    xyz0 = get_task('insertion').state_centre + 0.01
    q = np.linspace(-1, 1, 14)
    empty = (np.zeros((0, 0, 3), np.uint8), np.zeros((0, 0), np.float32), np.eye(3))
    a0 = actor(Observation(0, *empty, q, xyz0))
    a1 = actor(Observation(4, *empty, q, xyz0 + 0.05))                          # latched at step 0
    with torch.no_grad():
        ref = head(torch.as_tensor(privileged_state(xyz0, 'insertion'))[None],
                   torch.as_tensor(q, dtype=torch.float32)[None])[0].numpy()
    np.testing.assert_allclose(a0, ref, atol=1e-6)
    np.testing.assert_array_equal(a0, a1)
    moved = actor(Observation(0, *empty, q, xyz0 + np.r_[np.zeros(3), 0.05, 0, 0]))   # only the socket moves
    assert not np.allclose(moved, a0)


@pytest.mark.slow
def test_insertion_localiser_and_its_exported_pair_follow_the_task(tmp_path):
    """Micro run on real insertion step-0 frames: the localiser maps to 6 numbers and says its task; the two-stage
    export refuses a transfer-cube head, and the insertion pair runs the insertion cell in the offline loop."""
    from string_perception.model import ViTDConfig, build_model
    from string_perception.model.vitd import save_checkpoint
    from string_perception.policy import train_localiser
    from string_perception.policy.export import export_two_stage
    from string_perception.policy.localiser import load_localiser
    from string_perception.runtime.model_metadata import ModelMetadata
    from string_perception.runtime.policy_model import PolicyModel
    from string_perception.sim.demos.rollout import OnnxActor, run_episode
    import onnx
    torch.manual_seed(0)
    save_checkpoint(tmp_path / 'enc.pt', build_model(ViTDConfig(
        image_size=(16, 24), patch_size=8, width=32, depth=1, num_heads=2, class_embed_dim=8, embed_dim=16,
        encoding='cayley')))
    assert train_localiser.main(['--task', 'insertion', '--encoder-checkpoint', str(tmp_path / 'enc.pt'),
                                 '--train-seeds', '0:4', '--test-seeds', '1000000:1000002', '--sizes', '4',
                                 '--steps', '2', '--pool-points', 'false', '--out', str(tmp_path / 'probe')]) == 0
    _, aux, ck = load_localiser(tmp_path / 'probe' / 'probe.pt')
    assert aux.out_features == 6 and ck['task'] == 'insertion'
    small = dict(observation='privileged', val_episodes=1, chunk_size=8, query_every=4, hidden=32, layers=2,
                 steps=2, batch_size=4, warmup_steps=1, val_every=2, log_every=1)
    for task in ('insertion', 'transfer_cube'):
        train(PolicyConfig(**small, task=task, demos=str(write_demos(tmp_path / f'demos_{task}', task)),
                           out=str(tmp_path / f'priv_{task}')), progress=False)
    with pytest.raises(ValueError, match='localises for insertion'):
        export_two_stage(tmp_path / 'priv_transfer_cube' / 'best.pt', tmp_path / 'probe' / 'probe.pt',
                         tmp_path / 'refused', log=lambda *_: None)
    r = export_two_stage(tmp_path / 'priv_insertion' / 'best.pt', tmp_path / 'probe' / 'probe.pt',
                         tmp_path / 'onnx', log=lambda *_: None)
    assert r['perception_ok'] and r['policy_parity_max_abs_diff'] < 1e-4
    assert PolicyModel(r['policy_onnx']).metadata.task == 'aloha_insertion'
    extra = ModelMetadata.from_model(onnx.load(r['perception_onnx'])).extra
    assert extra['policy_task'] == 'aloha_insertion' and extra['embedding_source'] == 'object_localiser'
    actor = OnnxActor(r['perception_onnx'], r['policy_onnx'])
    cfg = actor.rollout_config(steps=8)
    assert cfg.task == 'insertion'
    result = run_episode(1000, actor, cfg)
    peg, socket = sample_insertion_pose(1000)
    assert result.rewards.shape == (8,) and result.queries == 2
    np.testing.assert_allclose(result.object_xyz, np.r_[peg[:3], socket[:3]], atol=1e-9)


def test_file_task_strings_round_trip():
    from string_perception.sim.demos.tasks import file_task, task_of_file
    for task in TASKS:
        assert task_of_file(file_task(task)) == task
    assert file_task('insertion') == 'aloha_insertion'
    assert task_of_file('aloha_transfer_cube (linear TEST policy)') == 'transfer_cube'
    assert task_of_file('pick_place', default='transfer_cube') == 'transfer_cube'
    with pytest.raises(ValueError, match='names no ALOHA task'):
        task_of_file('aloha_stacking')

"""The privileged policy's training options and actor (issue 39): demos limited to the first N by seed
(PolicyConfig.episodes), samples at every n-th control step instead of the recorded frames (sample_every), and
policy/privileged.PrivilegedActor (cube position latched at step 0 + qpos -> the chunk head's chunk)."""
import numpy as np
import pytest

pytest.importorskip('torch')  # optional: requirements/train.txt
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import torch  # noqa: E402

from string_perception.policy.config import PolicyConfig
from string_perception.policy.data import build_samples, load_demos, privileged_state, sample_steps
from string_perception.policy.privileged import PrivilegedActor
from string_perception.policy.train_bc import load_policy, train
from string_perception.sim.demos.rollout import Observation

T, EVERY = 40, 4


def fake_demo(seed: int) -> dict:
    """A physics-only demo: every step's qpos / action, frames at every 4th step but no pixels."""
    rng = np.random.default_rng(seed)
    f = np.arange(0, T, EVERY)
    qpos = rng.normal(size=(T, 14)).astype(np.float32)
    return dict(qpos=qpos, action=(qpos + 0.1).astype(np.float32), reward=np.zeros(T, np.int8), frame_steps=f,
                color=np.zeros((len(f), 0, 0, 3), np.uint8), depth=np.zeros((len(f), 0, 0), np.uint16),
                K=np.eye(3), object_xyz=np.array([0.1, 0.5, 0.02]) + 0.05 * rng.normal(size=3), seed=np.int64(seed),
                success=np.bool_(True))


@pytest.fixture(scope='module')
def demos_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp('priv')
    for s in range(5):
        np.savez(d / f'demo_{s:06d}.npz', **fake_demo(s))
    return d


def cfg(demos_dir, out, **kw) -> PolicyConfig:
    base = dict(demos=str(demos_dir), out=str(out), observation='privileged', val_episodes=1, chunk_size=8,
                query_every=4, hidden=32, layers=2, steps=4, batch_size=4, warmup_steps=1, val_every=2, log_every=1)
    return PolicyConfig(**{**base, **kw})


def test_sample_every_takes_every_nth_step(demos_dir):
    demos = load_demos(demos_dir)
    np.testing.assert_array_equal(sample_steps(demos[0]), np.arange(0, T, EVERY))       # default: the frames
    np.testing.assert_array_equal(sample_steps(demos[0], 1), np.arange(T))
    s = build_samples(demos[:2], chunk_size=8, sample_every=1)
    assert len(s) == 2 * T and s.target.shape == (2 * T, 8, 14)
    np.testing.assert_array_equal(s.qpos[T + 7], demos[1]['qpos'][7])                    # demo 1, step 7
    np.testing.assert_array_equal(s.target[T + 7, 0], demos[1]['action'][7])
    np.testing.assert_array_equal(s.mask[T - 1], np.arange(8) == 0)                       # last step: 1 valid
    default = build_samples(demos[:2], chunk_size=8)
    np.testing.assert_array_equal(default.step, np.tile(np.arange(0, T, EVERY), 2))
    with pytest.raises(ValueError):
        sample_steps(demos[0], -1)


def test_options_are_validated():
    with pytest.raises(ValueError, match='sample_every'):
        PolicyConfig(observation='vision', sample_every=1)
    with pytest.raises(ValueError):
        PolicyConfig(observation='privileged', episodes=-1)


def test_episodes_limits_the_demos(demos_dir, tmp_path):
    heads = {}
    for name, kw in (('all', {}), ('five', {'episodes': 5}), ('three', {'episodes': 3})):
        train(cfg(demos_dir, tmp_path / name, **kw), progress=False)
        heads[name] = load_policy(tmp_path / name / 'last.pt')[1].state_dict()
    for k, v in heads['all'].items():                     # episodes = all of them: the default run, bit for bit
        torch.testing.assert_close(v, heads['five'][k], atol=0, rtol=0)
    # 3 demos: other normalisation statistics (2 train demos) and other samples
    assert not torch.equal(heads['all']['qpos_mean'], heads['three']['qpos_mean'])
    with pytest.raises(ValueError, match='episodes'):
        train(cfg(demos_dir, tmp_path / 'many', episodes=6), progress=False)


def test_sample_every_changes_training_and_actor_runs_the_head(demos_dir, tmp_path):
    train(cfg(demos_dir, tmp_path / 'a'), progress=False)
    train(cfg(demos_dir, tmp_path / 'b', sample_every=1), progress=False)
    ha, hb = (load_policy(tmp_path / n / 'last.pt')[1] for n in 'ab')
    assert not torch.equal(ha.mlp[0].weight, hb.mlp[0].weight)
    actor = PrivilegedActor(tmp_path / 'b' / 'last.pt')
    rc = actor.rollout_config()
    assert (rc.chunk_size, rc.query_every, rc.render) == (8, 4, False)
    assert actor.rollout_config(query_every=1).query_every == 1
    empty = (np.zeros((0, 0, 3), np.uint8), np.zeros((0, 0), np.float32), np.eye(3))
    cube0, cube1 = np.array([0.1, 0.5, 0.02]), np.array([0.0, 0.6, 0.2])
    q = np.linspace(-1, 1, 14)
    a0 = actor(Observation(0, *empty, q, cube0))
    assert a0.shape == (8, 14) and a0.dtype == np.float32
    with torch.no_grad():
        ref = hb(torch.as_tensor(privileged_state(cube0))[None], torch.as_tensor(q, dtype=torch.float32)[None])[0]
    np.testing.assert_allclose(a0, ref.numpy(), atol=1e-6)
    # later steps keep the step-0 cube position (the cube moves once grasped), a new episode takes the new one
    np.testing.assert_allclose(actor(Observation(4, *empty, q, cube1)), a0, atol=1e-6)
    assert not np.allclose(actor(Observation(0, *empty, q, cube1)), a0)

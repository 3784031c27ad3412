"""Behaviour-cloning policy (string_perception/policy/) on synthetic demos and a tiny Cayley ViTD: chunk targets
and the padding mask at the episode end, the masked L1, the normalisation, shapes, batched == single, the frozen
encoder gets no gradient while its PolicyHead does, determinism with a seed, resume == straight run, the
privileged baseline and the end-to-end (finetune) option train, and the exported perception + policy ONNX files
match PyTorch, carry their metadata and drive sim/demos/rollout.OnnxActor."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import pytest  # noqa: E402
pytest.importorskip('torch')  # optional: requirements/train.txt
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import torch  # noqa: E402

from string_perception.model import ViTDConfig, build_model  # noqa: E402
from string_perception.model.vitd import save_checkpoint  # noqa: E402
from string_perception.policy.config import PolicyConfig  # noqa: E402
from string_perception.policy.data import (build_samples, chunk_target, load_demos, masked_l1,  # noqa: E402
                                           model_frames)
from string_perception.policy.model import ChunkHead  # noqa: E402
from string_perception.policy.train_bc import build_policy, load_policy, train  # noqa: E402
from string_perception.runtime import OnnxModel, prepare_inputs  # noqa: E402
from string_perception.runtime.policy_model import PolicyModel  # noqa: E402

TINY = dict(image_size=(16, 24), patch_size=8, width=32, depth=1, num_heads=2, class_embed_dim=8, embed_dim=16,
            encoding='cayley')
T, EVERY, H, W = 40, 10, 24, 32


def _fake_demo(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    f = np.arange(0, T, EVERY)
    K = np.array([[30.0, 0, (W - 1) / 2], [0, 30.0, (H - 1) / 2], [0, 0, 1]])
    qpos = rng.normal(size=(T, 14)).astype(np.float32)
    return dict(qpos=qpos, action=(qpos + 0.1).astype(np.float32), reward=np.zeros(T, np.int8), frame_steps=f,
                color=rng.integers(0, 256, (len(f), H, W, 3), dtype=np.uint8),
                depth=rng.integers(400, 1500, (len(f), H, W)).astype(np.uint16), K=K,
                object_xyz=np.array([0.1, 0.5, 0.02]) + 0.05 * rng.normal(size=3), seed=np.int64(seed),
                success=np.bool_(True))


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp('bc')
    torch.manual_seed(0)
    save_checkpoint(d / 'enc.pt', build_model(ViTDConfig(**TINY)))
    (d / 'demos').mkdir()
    for s in range(4):
        np.savez(d / 'demos' / f'demo_{s:06d}.npz', **_fake_demo(s))
    return d


def _cfg(workdir, out, **kw) -> PolicyConfig:
    base = dict(demos=str(workdir / 'demos'), encoder_checkpoint=str(workdir / 'enc.pt'), out=str(workdir / out),
                val_episodes=1, chunk_size=8, query_every=4, hidden=32, layers=2, steps=6, batch_size=4,
                warmup_steps=2, val_every=3, log_every=1)
    return PolicyConfig(**{**base, **kw})


def test_chunk_target_pads_and_masks_the_episode_end():
    actions = np.arange(10, dtype=np.float32)[:, None].repeat(2, 1)       # [10,2], action t = t
    tgt, mask = chunk_target(actions, 7, 5)
    np.testing.assert_array_equal(tgt[:, 0], [7, 8, 9, 9, 9])
    np.testing.assert_array_equal(mask, [True, True, True, False, False])
    tgt, mask = chunk_target(actions, 0, 3)
    np.testing.assert_array_equal(tgt[:, 1], [0, 1, 2]) and mask.all()


def test_masked_l1_known_answer():
    pred = torch.zeros(1, 3, 2)
    target = torch.tensor([[[1.0, 3.0], [2.0, 2.0], [100.0, 100.0]]])     # step errors 2, 2, (100 masked)
    assert masked_l1(pred, target, torch.tensor([[True, True, False]])).item() == pytest.approx(2.0)
    assert masked_l1(pred, target, torch.tensor([[True, False, False]])).item() == pytest.approx(2.0)


def test_chunk_head_denormalises():
    head = ChunkHead(4, 14, 3, hidden=8, layers=2).eval()
    torch.nn.init.zeros_(head.mlp[-1].weight)
    torch.nn.init.zeros_(head.mlp[-1].bias)
    mean, std = np.arange(14.0), np.full(14, 2.0)
    head.set_statistics(np.zeros(14), np.ones(14), mean, std)
    out = head(torch.randn(2, 4), torch.randn(2, 14))                       # normalised output 0 -> the mean
    assert out.shape == (2, 3, 14)
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(mean, (2, 3, 14)), atol=1e-6)


def test_samples_one_per_frame(workdir):
    demos = load_demos(workdir / 'demos')
    s = build_samples(demos[:2], chunk_size=8)
    assert len(s) == 8 and s.target.shape == (8, 8, 14) and s.mask.shape == (8, 8)
    np.testing.assert_array_equal(s.frame, np.arange(8))
    np.testing.assert_array_equal(s.qpos[5], demos[1]['qpos'][10])             # demo 1, frame 1 = step 10
    np.testing.assert_array_equal(s.step[:5], [0, 10, 20, 30, 0])
    np.testing.assert_array_equal(s.mask[3], np.arange(30, 38) < T)           # step 30: 8 steps, all inside
    frames = model_frames(demos[:1], TINY['image_size'])
    ref = prepare_inputs(demos[0]['color'][2], demos[0]['depth'][2], demos[0]['K'], TINY['image_size'],
                         resize_mode='crop')                 # the policy's perception files saw centre crops
    np.testing.assert_array_equal(frames['image'][2], ref.image[0])            # the runtime's preprocessing
    np.testing.assert_array_equal(frames['depth'][2], ref.depth[0])


def test_shapes_batched_equals_single_and_frozen_encoder(workdir):
    policy, head = build_policy(_cfg(workdir, 'unused'))
    policy.eval()
    frames = model_frames(load_demos(workdir / 'demos')[:1], TINY['image_size'])
    img, dep, K = (torch.as_tensor(frames[k]) for k in ('image', 'depth', 'intrinsics'))
    q = torch.randn(4, 14)
    with torch.no_grad():
        out = policy(img, dep, K, q)
        single = torch.cat([policy(img[i:i + 1], dep[i:i + 1], K[i:i + 1], q[i:i + 1]) for i in range(4)])
    assert out.shape == (4, 8, 14)
    torch.testing.assert_close(out, single, atol=1e-5, rtol=1e-5)
    policy.freeze_encoder()
    policy.train()
    policy(img, dep, K, q).abs().mean().backward()
    for name, p in policy.vitd.named_parameters():
        if name.startswith('policy_head.'):
            assert p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0, name
        else:
            assert not p.requires_grad and p.grad is None, name
    assert all(p.grad is not None for p in head.parameters())


def _head_state(path):
    return load_policy(path)[1].state_dict()


def test_training_is_deterministic_and_resumes(workdir):
    a = train(_cfg(workdir, 'a'), progress=False)
    train(_cfg(workdir, 'b'), progress=False)
    assert a['step'] == 6 and np.isfinite(a['last_val_l1'])
    for k, v in _head_state(workdir / 'a' / 'last.pt').items():
        torch.testing.assert_close(v, _head_state(workdir / 'b' / 'last.pt')[k], atol=0, rtol=0)
    train(_cfg(workdir, 'c', steps=3), progress=False)                        # 3 steps, then resume to 6
    train(_cfg(workdir, 'c', steps=6), resume=str(workdir / 'c' / 'last.pt'), progress=False)
    for k, v in _head_state(workdir / 'a' / 'last.pt').items():
        torch.testing.assert_close(v, _head_state(workdir / 'c' / 'last.pt')[k], atol=0, rtol=0)
    pa, pc = load_policy(workdir / 'a' / 'last.pt')[0], load_policy(workdir / 'c' / 'last.pt')[0]
    torch.testing.assert_close(pa.vitd.state_dict(), pc.vitd.state_dict(), atol=0, rtol=0)
    # the frozen encoder is the checkpoint's, the PolicyHead moved
    enc = torch.load(workdir / 'enc.pt', weights_only=True)['model']
    torch.testing.assert_close(pa.vitd.encoder.state_dict(), {k[8:]: v for k, v in enc.items()
                                                              if k.startswith('encoder.')}, atol=0, rtol=0)
    assert not torch.equal(pa.vitd.policy_head.out.weight, enc['policy_head.out.weight'])
    log = (workdir / 'a' / 'log.csv').read_text().splitlines()
    assert log[0].startswith('step,train_l1,val_l1') and len(log) == 7


def test_privileged_and_finetune_train(workdir):
    r = train(_cfg(workdir, 'priv', observation='privileged', steps=3), progress=False)
    policy, head, _, ck = load_policy(workdir / 'priv' / 'last.pt')
    assert r['step'] == 3 and policy is None and head.embed_dim == 3 and ck['vitd'] is None
    train(_cfg(workdir, 'aux', aux_cube_weight=1.0, aux_until_step=15, steps=3), progress=False)
    ck = torch.load(workdir / 'aux' / 'last.pt', weights_only=True)
    assert ck['aux']['weight'].shape == (3, TINY['embed_dim'])                # embedding -> cube position
    log = (workdir / 'aux' / 'log.csv').read_text().splitlines()
    assert 'aux_l1' in log[0] and 'nan' not in log[-1]
    train(_cfg(workdir, 'ft', finetune=True, steps=2, val_every=2), progress=False)
    ft = load_policy(workdir / 'ft' / 'last.pt')[0]
    enc = torch.load(workdir / 'enc.pt', weights_only=True)['model']
    assert not torch.equal(ft.vitd.encoder.state_dict()['blocks.0.mlp.fc1.weight'], enc['encoder.blocks.0.mlp.fc1.weight'])


@pytest.mark.slow
def test_exported_files_match_torch_and_drive_the_rollout_actor(workdir, tmp_path):
    from string_perception.policy.export import EMBEDDING_SOURCE, export_policy
    from string_perception.sim.demos.rollout import OnnxActor, Observation
    train(_cfg(workdir, 'x'), progress=False)
    r = export_policy(workdir / 'x' / 'last.pt', tmp_path, log=lambda *a: None)
    assert r['perception_ok'] and r['policy_parity_max_abs_diff'] < 1e-4
    perception = OnnxModel(r['perception_onnx'], ('CPUExecutionProvider',), warmup=False)
    assert perception.metadata.extra['embedding_source'] == EMBEDDING_SOURCE
    pm = PolicyModel(r['policy_onnx'])
    assert pm.metadata.perception_model_sha256 == perception.metadata.weights_sha256
    assert (pm.metadata.chunk_size, pm.metadata.query_every, pm.metadata.embed_dim) == (8, 4, 16)
    assert {p.key for p in onnx.load(r['policy_onnx']).metadata_props} == {'string_perception_policy',
                                                                           'weights_sha256'}
    demo = load_demos(workdir / 'demos')[0]
    obs = Observation(10, demo['color'][1], demo['depth'][1].astype(np.float32) / 1000.0, demo['K'],
                      demo['qpos'][10].astype(np.float64), demo['object_xyz'])
    actor = OnnxActor(r['perception_onnx'], r['policy_onnx'])
    inp = prepare_inputs(obs.color, obs.depth, obs.K, TINY['image_size'], resize_mode='crop')
    policy = load_policy(workdir / 'x' / 'last.pt')[0]
    with torch.no_grad():
        e = policy.vitd(*(torch.as_tensor(v) for v in inp.feed().values()))['embedding']
        ref = policy.chunk_head(e, torch.as_tensor(obs.qpos, dtype=torch.float32)[None])[0].numpy()
    np.testing.assert_allclose(actor.embedding(obs), e.numpy(), atol=1e-4)
    np.testing.assert_allclose(actor(obs), ref, atol=1e-4)
    assert actor.rollout_config().query_every == 4


def test_pool_points_appends_the_attended_point(workdir):
    policy, head = build_policy(_cfg(workdir, 'unused', pool_points=True))
    policy.eval()
    frames = model_frames(load_demos(workdir / 'demos')[:1], TINY['image_size'])
    img, dep, K = (torch.as_tensor(frames[k]) for k in ('image', 'depth', 'intrinsics'))
    with torch.no_grad():
        tokens, points = policy.tokens(img, dep, K), policy.points(img, dep, K)
        e = policy.embedding_from_tokens(tokens, points)
        assert e.shape == (4, TINY['embed_dim'] + 3) and head.embed_dim == TINY['embed_dim'] + 3
        torch.testing.assert_close(e[:, :-3], policy.vitd.policy_head(tokens))
        # a key of zeros scores every token the same: the pooled point is the mean patch point
        torch.nn.init.zeros_(policy.vitd.policy_head.key.weight)
        torch.nn.init.zeros_(policy.vitd.policy_head.key.bias)
        torch.testing.assert_close(policy.embedding_from_tokens(tokens, points)[:, -3:], points.mean(1))

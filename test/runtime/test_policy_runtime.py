"""The policy's torch-free runtime (issue 23): ACT temporal ensembling with known answers, and the policy ONNX
contract (metadata, shapes, checksum, bad inputs) on a linear policy whose outputs are known."""
import json

import numpy as np
import onnx
import pytest

from string_perception.runtime.action_chunks import TemporalEnsemble
from string_perception.runtime.errors import InputError, ModelLoadError
from string_perception.runtime.policy_model import POLICY_METADATA_KEY, PolicyMetadata, PolicyModel
from string_perception.runtime.linear_policy import linear_policy_actions, make_linear_policy

JOINTS = tuple(f'j{i}' for i in range(3))
META = PolicyMetadata(chunk_size=4, embed_dim=5, joint_names=JOINTS, control_rate_hz=50.0,
                      temporal_ensemble_m=0.01, query_every=1, task='test')


# --- temporal ensembling ---------------------------------------------------------------------------------------

def test_single_chunk_is_executed_verbatim_then_runs_out():
    ens = TemporalEnsemble(chunk_size=3, action_dim=2)
    chunk = np.arange(6.0).reshape(3, 2)
    ens.add(10, chunk)
    assert ens.action(9) is None                           # predicted at 10: nothing for step 9
    for k in range(3):
        np.testing.assert_array_equal(ens.action(10 + k), chunk[k])
    assert ens.action(13) is None and len(ens) == 0          # the chunk ended and was dropped


def test_overlapping_chunks_use_act_weights_oldest_first():
    m = 0.5
    ens = TemporalEnsemble(chunk_size=3, action_dim=1, m=m)
    ens.add(0, [[0.0], [1.0], [2.0]])                        # predicts 1.0 for step 1
    ens.add(1, [[10.0], [11.0], [12.0]])                     # predicts 10.0 for step 1
    w_old, w_new = 1.0, np.exp(-m)
    assert ens.action(1)[0] == pytest.approx((w_old * 1.0 + w_new * 10.0) / (w_old + w_new))
    ens.add(2, [[20.0], [21.0], [22.0]])                     # step 2: 2.0 (oldest), 11.0, 20.0 (newest)
    w = np.exp(-m * np.arange(3))
    assert ens.action(2)[0] == pytest.approx((w @ [2.0, 11.0, 20.0]) / w.sum())


def test_m_zero_is_the_plain_mean_and_sparse_queries_cover_their_span():
    ens = TemporalEnsemble(chunk_size=4, action_dim=1, m=0.0)
    ens.add(0, np.full((4, 1), 1.0))
    ens.add(2, np.full((4, 1), 3.0))                          # query every 2 steps
    assert ens.action(1)[0] == 1.0 and ens.action(2)[0] == 2.0 and ens.action(3)[0] == 2.0
    assert ens.action(4)[0] == 3.0 and ens.action(5)[0] == 3.0 and ens.action(6) is None


def test_ensemble_rejects_bad_chunks_and_time_going_back():
    ens = TemporalEnsemble(chunk_size=2, action_dim=2)
    with pytest.raises(ValueError, match='chunk must be'):
        ens.add(0, np.zeros((3, 2)))
    with pytest.raises(ValueError, match='non-finite'):
        ens.add(0, np.array([[0.0, np.nan], [0.0, 0.0]]))
    ens.add(5, np.zeros((2, 2)))
    with pytest.raises(ValueError, match='after one for step 5'):
        ens.add(4, np.zeros((2, 2)))
    ens.action(6)
    with pytest.raises(ValueError, match='requested after'):
        ens.action(5)
    for bad in (dict(chunk_size=0, action_dim=1), dict(chunk_size=2, action_dim=0),
                dict(chunk_size=2, action_dim=1, m=-1.0), dict(chunk_size=2, action_dim=1, m=float('nan'))):
        with pytest.raises(ValueError):
            TemporalEnsemble(**bad)
    ens.reset()
    assert len(ens) == 0 and ens.action(0) is None


# --- the policy file -------------------------------------------------------------------------------------------

def _save(tmp_path, model, name='policy.onnx'):
    path = tmp_path / name
    onnx.save(model, path)
    return path


def test_policy_model_runs_the_known_linear_map_batched_and_single(tmp_path):
    model = make_linear_policy(META, seed=3)
    policy = PolicyModel(_save(tmp_path, model))
    assert policy.metadata == META and policy.metadata.action_dim == 3
    rng = np.random.default_rng(0)
    emb, q = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    out = policy.predict(emb, q)
    assert out.shape == (4, 4, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, linear_policy_actions(model, emb, q), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(policy.predict(emb[1], q[1])[0], out[1], rtol=1e-6, atol=1e-6)   # batched == single


def test_metadata_round_trips_and_rejects_garbage():
    assert PolicyMetadata.from_json(META.to_json()) == META
    base = json.loads(META.to_json())
    extra = PolicyMetadata.from_json(json.dumps({**base, 'trained_steps': 7}))
    assert extra.extra == {'trained_steps': 7} and json.loads(extra.to_json())['trained_steps'] == 7
    for bad in ({**base, 'chunk_size': 0}, {**base, 'query_every': 5}, {**base, 'joint_names': ['a', 'a']},
                {**base, 'joint_names': []}, {**base, 'control_rate_hz': 0}, {**base, 'temporal_ensemble_m': 'x'},
                {k: v for k, v in base.items() if k != 'task'}, {**base, 'embed_dim': True}):
        with pytest.raises(ModelLoadError) as err:
            PolicyMetadata.from_json(json.dumps(bad))
        assert err.value.kind == 'bad_metadata'
    for text in ('{', '[1, 2]'):
        with pytest.raises(ModelLoadError):
            PolicyMetadata.from_json(text)


def test_policy_model_load_errors_have_kinds(tmp_path):
    def kind(path):
        with pytest.raises(ModelLoadError) as err:
            PolicyModel(path)
        return err.value.kind
    assert kind(tmp_path / 'nope.onnx') == 'missing_file'
    garbage = tmp_path / 'garbage.onnx'
    garbage.write_bytes(b'\x08\x07not a protobuf at all' * 10)
    assert kind(garbage) == 'corrupt_file'
    assert kind(_save(tmp_path, make_linear_policy(META, tamper=True), 't.onnx')) == 'checksum_mismatch'
    no_meta = make_linear_policy(META)
    del no_meta.metadata_props[:]
    assert kind(_save(tmp_path, no_meta, 'n.onnx')) == 'bad_metadata'
    # metadata that disagrees with the graph: a 6-step chunk declared for a 4-step graph
    lying = make_linear_policy(META)
    for p in lying.metadata_props:
        if p.key == POLICY_METADATA_KEY:
            p.value = json.dumps({**json.loads(p.value), 'chunk_size': 6})
    assert kind(_save(tmp_path, lying, 'l.onnx')) == 'contract_mismatch'
    wrong_dim = make_linear_policy(PolicyMetadata(**{**META.__dict__, 'embed_dim': 7}))
    for p in wrong_dim.metadata_props:
        if p.key == POLICY_METADATA_KEY:
            p.value = META.to_json()                        # says E = 5, the graph takes 7
    assert kind(_save(tmp_path, wrong_dim, 'w.onnx')) == 'contract_mismatch'


def test_policy_predict_rejects_bad_inputs(tmp_path):
    policy = PolicyModel(_save(tmp_path, make_linear_policy(META)))
    for emb, q in ((np.zeros(4), np.zeros(3)), (np.zeros(5), np.zeros(2)), (np.zeros((2, 5)), np.zeros((3, 3)))):
        with pytest.raises(InputError) as err:
            policy.predict(emb, q)
        assert err.value.kind == 'bad_shape'
    with pytest.raises(InputError) as err:
        policy.predict(np.full(5, np.nan), np.zeros(3))
    assert err.value.kind == 'non_finite'

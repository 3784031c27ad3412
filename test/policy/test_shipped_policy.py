"""The shipped controllers (models/MODEL_CARD_policy.md): transfer-cube (models/aloha_policy_perception.onnx +
models/aloha_policy.onnx) and insertion (models/aloha_insertion_perception.onnx + models/aloha_insertion_policy.onnx):
for each pair both files load under the runtime contracts, the policy file names the perception file
it was trained on, and a camera frame goes through the pair to an action chunk. ONNX Runtime only (no torch, no
simulator)."""
from pathlib import Path

import numpy as np
import pytest

from string_perception.paths import SHIPPED_POLICY, SHIPPED_POLICY_PAIRS, SHIPPED_POLICY_PERCEPTION, shipped_policy_pair
from string_perception.runtime.onnx_runner import OnnxModel
from string_perception.runtime.policy_model import PolicyModel
from string_perception.runtime.preprocess import prepare_inputs

REPO = Path(__file__).resolve().parents[2]
CARD = REPO / 'models' / 'MODEL_CARD_policy.md'
# the cell's joints in command order (sim/demos/rollout.JOINT_NAMES, written here to avoid importing MuJoCo)
SIDES_JOINTS = ('waist', 'shoulder', 'elbow', 'forearm_roll', 'wrist_angle', 'wrist_rotate', 'gripper')
EMBEDDING_SOURCE = {'transfer_cube': 'cube_localiser', 'insertion': 'object_localiser'}


@pytest.fixture(scope='module', params=sorted(SHIPPED_POLICY_PAIRS))
def task(request):
    return request.param


@pytest.fixture(scope='module')
def pair(task):
    perception_path, policy_path = shipped_policy_pair(task)
    perception = OnnxModel(perception_path, ('CPUExecutionProvider',), warmup=False)   # checksum verified at load
    policy = PolicyModel(policy_path)                                                  # checksum + contract
    return perception, policy


def test_the_pair_resolves_to_models():
    perception, policy = shipped_policy_pair()
    assert (perception, policy) == (REPO / 'models' / SHIPPED_POLICY_PERCEPTION, REPO / 'models' / SHIPPED_POLICY)
    with pytest.raises(ValueError, match='no shipped controller'):
        shipped_policy_pair('stacking')


def test_the_policy_file_belongs_to_the_perception_file(pair, task):
    perception, policy = pair
    pm, m = policy.metadata, perception.metadata
    assert pm.perception_model_sha256 == m.weights_sha256
    assert pm.embed_dim == m.embedding_dim
    assert m.extra['embedding_source'] == EMBEDDING_SOURCE[task]    # not the detector's default embedding
    assert pm.task == m.extra['policy_task'] == 'aloha_' + task
    assert pm.embedding_latch == 'episode_start'
    assert [n.split('_', 1)[1] for n in pm.joint_names] == list(SIDES_JOINTS) * 2
    assert (pm.chunk_size, pm.query_every, pm.temporal_ensemble_m, pm.control_rate_hz) == (50, 10, 0.01, 50.0)


def test_the_card_quotes_both_files_checksums(pair, task):
    perception, policy = pair
    text = CARD.read_text()
    assert perception.metadata.weights_sha256 in text
    assert policy.metadata.perception_model_sha256 in text
    for name in SHIPPED_POLICY_PAIRS[task]:
        assert name in text


def test_a_frame_goes_through_the_pair_to_an_action_chunk(pair):
    perception, policy = pair
    rng = np.random.default_rng(0)
    color = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    depth = rng.uniform(0.5, 1.5, (120, 160)).astype(np.float32)
    K = np.array([[140.0, 0, 80], [0, 140.0, 60], [0, 0, 1]])
    inputs = prepare_inputs(color, depth, K, perception.input_hw, resize_mode='crop')
    embedding = perception.run(**inputs.feed())['embedding']                          # [1,E]
    qpos = np.zeros((1, 14), np.float32)
    actions = policy.predict(embedding, qpos)                                          # [1,K,14]
    assert actions.shape == (1, policy.metadata.chunk_size, 14) and np.isfinite(actions).all()
    # the chunk depends on the image: another frame, another chunk (the localiser reads the camera)
    other = prepare_inputs(color[:, ::-1].copy(), depth[:, ::-1].copy(), K, perception.input_hw, resize_mode='crop')
    assert not np.allclose(policy.predict(perception.run(**other.feed())['embedding'], qpos), actions)


def test_every_task_has_a_shipped_pair():
    """The task names parsers and launch files offer (aloha_tasks.py) are the tasks with a shipped controller."""
    from string_perception.aloha_tasks import ALOHA_TASK_NAMES
    assert tuple(SHIPPED_POLICY_PAIRS) == ALOHA_TASK_NAMES

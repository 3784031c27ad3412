"""The shipped ONNX files are the exports of the shipped checkpoints: ONNX Runtime on each .onnx matches PyTorch on
its .pt within the export's parity bounds, and each export record describes that very file.

Three pairs ship: ``vitd_tiny_cayley`` (trained on procedural scenes), ``vitd_workcell`` (the workcell model:
procedural + simulated ALOHA / KUKA cells, 4:3 input 120x160; the node's default on a CPU) and ``vitd_workcell_hr``
(its accurate variant at 240x320; the node's default on a GPU provider). Whatever
pair is shipped under these names is checked; a missing file fails (they are part of the package)."""
import hashlib
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ('vitd_tiny_cayley', 'vitd_workcell', 'vitd_workcell_hr')


def _files(name):
    models = REPO / 'models'
    return models / f'{name}.onnx', models / f'{name}.pt', models / f'{name}.export.json'


@pytest.mark.parametrize('name', SHIPPED)
def test_the_shipped_files_exist(name):
    missing = [str(p.relative_to(REPO)) for p in _files(name) if not p.is_file()]
    assert not missing, f'shipped model files missing: {missing}'


@pytest.mark.slow
@pytest.mark.parametrize('name', SHIPPED)
def test_shipped_onnx_matches_the_shipped_checkpoint(name):
    torch = pytest.importorskip('torch')
    from string_perception.export.verify import verify_export
    from string_perception.model import load_checkpoint
    from string_perception.runtime import OnnxModel
    onnx, checkpoint, _ = _files(name)
    torch.set_num_threads(1)
    model, config, _ = load_checkpoint(checkpoint)
    meta = OnnxModel(onnx, ('CPUExecutionProvider',), warmup=False).metadata
    assert (meta.input_height, meta.input_width) == tuple(config.image_size)
    assert meta.encoding == config.encoding and list(meta.labels) == list(config.class_names)
    report = verify_export(str(onnx), model, precision=meta.precision)
    assert report.ok, report.table()
    assert {o for d in report.diffs.values() for o in d} >= {'boxes', 'logits', 'embedding'}


@pytest.mark.parametrize('name', SHIPPED)
def test_export_record_describes_the_shipped_onnx(name):
    onnx, _, record_path = _files(name)
    record = json.loads(record_path.read_text())
    entry = record['files']['fp32']
    assert entry['path'] == f'models/{name}.onnx'
    assert entry['file_sha256'] == hashlib.sha256(onnx.read_bytes()).hexdigest()


@pytest.mark.parametrize('name, hw', [('vitd_workcell', (120, 160)), ('vitd_workcell_hr', (240, 320))])
def test_the_workcell_models_see_the_camera_aspect_ratio_and_meshes(name, hw):
    from string_perception.runtime import OnnxModel
    meta = OnnxModel(_files(name)[0], ('CPUExecutionProvider',), warmup=False).metadata
    assert meta.input_hw == hw                               # 4:3: a 640x480 camera frame is only resized
    assert list(meta.labels) == ['box', 'cylinder', 'sphere', 'cone', 'capsule', 'object']
    assert meta.score_threshold == pytest.approx(0.5)


@pytest.mark.parametrize('card, name', [('MODEL_CARD.md', 'vitd_tiny_cayley'),
                                        ('MODEL_CARD_workcell.md', 'vitd_workcell'),
                                        ('MODEL_CARD_workcell.md', 'vitd_workcell_hr')])
def test_each_model_card_names_the_weights_it_describes(card, name):
    """A card's figures are about the weights it names: after a re-ship, a card still naming the old checksums fails
    here (the fp32 weights checksum in full, the int8 sibling's by its first 8 hex digits, as the cards write it)."""
    import onnx
    from string_perception.runtime.model_metadata import ModelMetadata
    text = (REPO / 'models' / card).read_text()
    fp32 = ModelMetadata.from_model(onnx.load(str(REPO / 'models' / f'{name}.onnx'))).weights_sha256
    assert fp32 in text, f'{card} does not name {name}.onnx weights_sha256 {fp32}'
    if (REPO / 'models' / f'{name}_int8.onnx').exists():     # the accurate variant ships fp32 only (GPU providers)
        int8 = ModelMetadata.from_model(onnx.load(str(REPO / 'models' / f'{name}_int8.onnx'))).weights_sha256
        assert f'`{int8[:8]}' in text, f'{card} does not name {name}_int8.onnx weights_sha256 {int8[:8]}…'

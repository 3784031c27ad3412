"""The shipped ONNX file is the export of the shipped checkpoint: ONNX Runtime on the .onnx matches PyTorch on the
.pt within the export's parity bounds, and the export record describes this very file.

Whatever pair is shipped under these names is checked; a missing file fails (it is part of the package)."""
import hashlib
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ONNX = REPO / 'models' / 'vitd_tiny_cayley.onnx'
CHECKPOINT = REPO / 'models' / 'vitd_tiny_cayley.pt'
RECORD = REPO / 'models' / 'vitd_tiny_cayley.export.json'


def test_the_shipped_files_exist():
    missing = [str(p.relative_to(REPO)) for p in (ONNX, CHECKPOINT, RECORD) if not p.is_file()]
    assert not missing, f'shipped model files missing: {missing}'


@pytest.mark.slow
def test_shipped_onnx_matches_the_shipped_checkpoint():
    torch = pytest.importorskip('torch')
    from string_perception.export.verify import verify_export
    from string_perception.model import load_checkpoint
    from string_perception.runtime import OnnxModel
    torch.set_num_threads(1)
    model, config, _ = load_checkpoint(CHECKPOINT)
    meta = OnnxModel(ONNX, ('CPUExecutionProvider',), warmup=False).metadata
    assert (meta.input_height, meta.input_width) == tuple(config.image_size)
    assert meta.encoding == config.encoding
    report = verify_export(str(ONNX), model, precision=meta.precision)
    assert report.ok, report.table()
    assert {o for d in report.diffs.values() for o in d} >= {'boxes', 'logits', 'embedding'}


def test_export_record_describes_the_shipped_onnx():
    record = json.loads(RECORD.read_text())
    entry = record['files']['fp32']
    assert entry['path'] == 'models/vitd_tiny_cayley.onnx'
    assert entry['file_sha256'] == hashlib.sha256(ONNX.read_bytes()).hexdigest()

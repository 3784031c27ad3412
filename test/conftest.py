"""Shared pytest set-up: keep torch to one thread so tests are steady on 2-core machines."""
import os

os.environ.setdefault('OMP_NUM_THREADS', '1')

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # runtime-only installs
    pass


import pytest  # noqa: E402

REAL_MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'models',
                          'vitd_tiny_cayley.onnx')


@pytest.fixture(scope='session')
def model_path(tmp_path_factory):
    """The shipped model (models/vitd_tiny_cayley.onnx) when it exists, else a tiny contract-conforming model."""
    if os.path.isfile(REAL_MODEL):
        return REAL_MODEL
    from string_perception.runtime.testing import save_tiny_model
    return str(save_tiny_model(tmp_path_factory.mktemp('model') / 'tiny.onnx'))

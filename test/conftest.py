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
def model_path():
    """The shipped model (models/vitd_tiny_cayley.onnx): the node and demo tests run what the package ships, and
    fail (never fall back to a stand-in) when it is missing. Tests that need a tiny model make their own."""
    if not os.path.isfile(REAL_MODEL):
        pytest.fail(f'the shipped model {REAL_MODEL} is missing (it is part of the package)')
    return REAL_MODEL

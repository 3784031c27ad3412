"""Shared pytest set-up: keep torch to one thread so tests are steady on 2-core machines."""
import os

os.environ.setdefault('OMP_NUM_THREADS', '1')

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # runtime-only installs
    pass

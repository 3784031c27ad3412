#!/usr/bin/env python3
"""Regenerate the bundled recording data/sample_recording bit for bit (see string_perception/bags/sample.py).

    .venv/bin/python scripts/make_sample_recording.py                 # rewrite data/sample_recording
    .venv/bin/python scripts/make_sample_recording.py --check         # regenerate and compare, message by message
    .venv/bin/python scripts/make_sample_recording.py --out /tmp/rec --frames 90 --colour rgb8 --storage mcap

Bit for bit needs the same floating-point rounding as the machine that wrote the recording: numpy's matrix
products go through the OpenBLAS kernel picked for the CPU, and its AVX-512 kernels (SkylakeX, Sapphire Rapids)
round 1 ulp away from its AVX2 (Haswell) kernel, enough to move a rendered pixel by one grey level in 3 of the 24
frames. The recording was written with the Haswell kernel, so on x86-64 with AVX2 this script re-executes itself
with ``OPENBLAS_CORETYPE=Haswell`` unless the variable is already set (which then wins).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import sys
from pathlib import Path

BLAS_KERNEL = {'OPENBLAS_CORETYPE': 'Haswell'}     # the OpenBLAS kernel data/sample_recording was generated with


def _has_avx2() -> bool:
    try:
        return ' avx2 ' in Path('/proc/cpuinfo').read_text().replace('\n', ' ')
    except OSError:
        return False


if platform.machine() in ('x86_64', 'AMD64') and 'OPENBLAS_CORETYPE' not in os.environ and _has_avx2():
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **BLAS_KERNEL})   # before numpy loads

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from string_perception.bags.sample import (SampleRecordingConfig, compare_with_recording,  # noqa: E402
                                           write_sample_recording, messages_digest)

DEFAULT_OUT = REPO / 'data' / 'sample_recording'


def main(argv=None) -> int:
    defaults = SampleRecordingConfig()
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--out', type=Path, default=DEFAULT_OUT, help='bag folder (replaced)')
    for f in dataclasses.fields(SampleRecordingConfig):
        p.add_argument(f'--{f.name.replace("_", "-")}', type=type(getattr(defaults, f.name)),
                       default=getattr(defaults, f.name))
    p.add_argument('--check', action='store_true', help='regenerate into a temp dir and compare with --out')
    a = p.parse_args(argv)
    cfg = SampleRecordingConfig(**{f.name: getattr(a, f.name) for f in dataclasses.fields(SampleRecordingConfig)})
    if a.check:
        cmp = compare_with_recording(a.out, cfg)
        print(f'{a.out} (OpenBLAS kernel {os.environ.get("OPENBLAS_CORETYPE", "auto")}): {cmp.summary()}')
        return 0 if cmp.ok and cmp.byte_identical == cmp.messages else 1
    if a.out.exists():
        shutil.rmtree(a.out)
    write_sample_recording(a.out, cfg)
    size = sum(f.stat().st_size for f in a.out.iterdir())
    print(f'wrote {a.out} ({size / 1e6:.2f} MB, {cfg.frames} frames, seeds {cfg.seed}..{cfg.seed + cfg.frames - 1}); '
          f'messages sha256 {messages_digest(a.out)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env python3
"""Regenerate the bundled recording data/sample_recording bit for bit (see string_perception/bags/sample.py).

    .venv/bin/python scripts/make_sample_recording.py                 # rewrite data/sample_recording
    .venv/bin/python scripts/make_sample_recording.py --check         # regenerate into a temp dir and compare
    .venv/bin/python scripts/make_sample_recording.py --out /tmp/rec --frames 90 --colour rgb8 --storage mcap
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from string_perception.bags.sample import (SampleRecordingConfig, messages_digest,  # noqa: E402
                                           write_sample_recording)

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
        with tempfile.TemporaryDirectory() as tmp:
            fresh = messages_digest(write_sample_recording(Path(tmp) / 'bag', cfg))
        have = messages_digest(a.out)
        print(f'{a.out}: {have}\nregenerated: {fresh}\n{"identical" if fresh == have else "DIFFERENT"}')
        return 0 if fresh == have else 1
    if a.out.exists():
        shutil.rmtree(a.out)
    write_sample_recording(a.out, cfg)
    size = sum(f.stat().st_size for f in a.out.iterdir())
    print(f'wrote {a.out} ({size / 1e6:.2f} MB, {cfg.frames} frames, seeds {cfg.seed}..{cfg.seed + cfg.frames - 1}); '
          f'messages sha256 {messages_digest(a.out)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

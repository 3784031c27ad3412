"""The rosbags typestore for bag IO: ROS 2 Kilted's standard types plus vision_msgs, registered from the very
``.msg`` files the node's interfaces are built from (``third_party/vision_msgs/msg`` in a checkout, the
installed ``share/vision_msgs/msg`` otherwise), so bags we write carry the same definitions and RIHS01 hashes
as the node's topics.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

__all__ = ['STORE', 'VISION_MSGS', 'vision_msgs_dir', 'make_typestore']

STORE = Stores.ROS2_KILTED
VISION_MSGS = 'vision_msgs'


def vision_msgs_dir() -> Path:
    """The folder holding vision_msgs' ``*.msg`` files (source tree first, then installed share dirs)."""
    repo = Path(__file__).resolve().parents[2]
    candidates = [repo / 'third_party' / VISION_MSGS / 'msg', Path(sys.prefix) / 'share' / VISION_MSGS / 'msg']
    try:
        from ament_index_python.packages import get_package_share_directory
        candidates.append(Path(get_package_share_directory(VISION_MSGS)) / 'msg')
    except Exception:  # not a ROS install / package not indexed
        pass
    for c in candidates:
        if any(c.glob('*.msg')):
            return c
    raise FileNotFoundError(f'vision_msgs .msg definitions not found; looked in {", ".join(map(str, candidates))}')


@functools.lru_cache(maxsize=1)
def make_typestore() -> Typestore:
    """ROS 2 Kilted types + every vision_msgs message (cached: one store per process)."""
    store = get_typestore(STORE)
    types = {}
    for path in sorted(vision_msgs_dir().glob('*.msg')):
        types.update(get_types_from_msg(path.read_text(), f'{VISION_MSGS}/msg/{path.stem}'))
    store.register(types)
    return store

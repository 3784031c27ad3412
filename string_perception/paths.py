"""Locate the package's share files (``config/``, ``models/``, ``launch/``) wherever it runs from.

Search order, first hit wins:

1. ``$STRING_PERCEPTION_SHARE`` (explicit override);
2. the ament index (``ament_index_python``), i.e. a colcon/apt install on a ROS machine;
3. the source tree this module was imported from (editable/pip-``-e`` installs, running from a checkout);
4. ``<sys.prefix>/share/string_perception`` (a plain ``pip install .`` puts ``data_files`` there).

Nothing here imports rclpy.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .aloha_tasks import DEFAULT_ALOHA_TASK

PACKAGE = 'string_perception'
ENV_OVERRIDE = 'STRING_PERCEPTION_SHARE'

# The shipped transfer-cube controller (models/MODEL_CARD_policy.md): a perception file whose ``embedding`` is the
# cube localiser's, and the policy file that acts on it. The perception node's own default model stays the
# detector's (ros/node.DEFAULT_MODEL); aloha_policy.launch.py and the offline rollout default to this pair.
SHIPPED_POLICY_PERCEPTION = 'aloha_policy_perception.onnx'
SHIPPED_POLICY = 'aloha_policy.onnx'
# The shipped insertion controller (models/MODEL_CARD_policy.md, issue 39 item 5): the same two-file contract.
SHIPPED_INSERTION_PERCEPTION = 'aloha_insertion_perception.onnx'
SHIPPED_INSERTION_POLICY = 'aloha_insertion_policy.onnx'
SHIPPED_POLICY_PAIRS = {'transfer_cube': (SHIPPED_POLICY_PERCEPTION, SHIPPED_POLICY),
                        'insertion': (SHIPPED_INSERTION_PERCEPTION, SHIPPED_INSERTION_POLICY)}


def _ament_share() -> Path | None:
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(PACKAGE))
    except (LookupError, OSError, ValueError):  # PackageNotFoundError is a KeyError; unset AMENT_PREFIX_PATH: OSError
        return None


def _source_root() -> Path | None:
    root = Path(__file__).resolve().parent.parent
    if (root / 'package.xml').is_file() and (root / 'setup.py').is_file():
        return root
    return None


def share_dirs() -> list[Path]:
    """Candidate share directories, most specific first (only those that exist)."""
    found: list[Path] = []
    override = os.environ.get(ENV_OVERRIDE)
    for cand in (Path(override) if override else None, _ament_share(), _source_root(),
                 Path(sys.prefix) / 'share' / PACKAGE):
        if cand is not None and cand.is_dir() and cand.resolve() not in [f.resolve() for f in found]:
            found.append(cand)
    return found


def share_file(*parts: str) -> Path:
    """Absolute path of a share file, e.g. ``share_file('config', 'default.yaml')``.

    Raises FileNotFoundError naming every place searched.
    """
    rel = Path(*parts)
    dirs = share_dirs()
    for d in dirs:
        p = d / rel
        if p.exists():
            return p.resolve()
    searched = ', '.join(str(d) for d in dirs) or '(no share directory found)'
    raise FileNotFoundError(f'{PACKAGE}: {rel} not found; searched {searched} '
                            f'(set ${ENV_OVERRIDE} to the folder holding config/ and models/)')


def config_file(name: str) -> Path:
    """A file from ``config/`` (e.g. ``default.yaml``, ``fastdds_loopback.xml``)."""
    return share_file('config', name)


def model_file(name: str) -> Path:
    """A file from ``models/`` (e.g. the shipped ONNX model)."""
    return share_file('models', name)


def shipped_policy_pair(task: str = DEFAULT_ALOHA_TASK) -> tuple[Path, Path]:
    """(perception ONNX, policy ONNX) of the shipped controller of a gym-aloha task (transfer_cube, insertion),
    from ``models/``."""
    if task not in SHIPPED_POLICY_PAIRS:
        raise ValueError(f'no shipped controller for task {task!r}; tasks: {sorted(SHIPPED_POLICY_PAIRS)}')
    perception, policy = SHIPPED_POLICY_PAIRS[task]
    return model_file(perception), model_file(policy)

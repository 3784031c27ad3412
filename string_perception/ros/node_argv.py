"""The argv that starts one of the package's nodes in a subprocess (tests, benchmarks, the demos).

``python -m MODULE --ros-args [--params-file FILE] [-p name:=value ...] [-r from:=to ...]``: values are written as
JSON, which rcl reads as YAML (``true``, ``0.5``, ``"text"``, ``[1, 2]`` keep their types). The caller passes the
DDS environment (``string_perception.dds_env.merged_dds_env(domain)``) to ``subprocess``.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ['ros_node_argv']


def ros_node_argv(module: str, *, model_path: str | Path | None = None, params: Mapping[str, Any] | None = None,
                  params_file: str | Path | None = None, remaps: Mapping[str, str] | None = None,
                  python: str = sys.executable) -> list[str]:
    """argv of ``python -m module`` as a ROS node; ``model_path`` is the ``model_path`` parameter (wins over
    ``params``), applied after ``params_file`` as rcl applies ``-p`` after files."""
    cmd = [python, '-m', module, '--ros-args']
    if params_file is not None:
        cmd += ['--params-file', str(params_file)]
    values = dict(params or {})
    if model_path is not None:
        values['model_path'] = str(model_path)
    for k, v in values.items():
        cmd += ['-p', f'{k}:={json.dumps(v)}']
    for src, dst in (remaps or {}).items():
        cmd += ['-r', f'{src}:={dst}']
    return cmd

"""Where the workcell assets live: gym-aloha's MuJoCo XML and meshes, pybullet_data's KUKA iiwa / objects.

Both packages are only read for their files (gym-aloha is installed with --no-deps: importing it would need
gymnasium and dm_control), so they are located with importlib, never imported.
"""
from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path


class SimAssetsMissing(RuntimeError):
    """A package with workcell assets is not installed."""


def _package_dir(name: str, pip_hint: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SimAssetsMissing(f'{name} is not installed; install it with: {pip_hint} (see requirements/sim.txt)')
    return Path(list(spec.submodule_search_locations)[0])


def aloha_assets_dir() -> Path:
    """gym_aloha/assets: bimanual_viperx_*.xml, scene.xml, ViperX meshes, tabletop.stl."""
    return _package_dir('gym_aloha', 'pip install --no-deps gym-aloha==0.1.5') / 'assets'


def pybullet_data_dir() -> Path:
    """pybullet_data: kuka_iiwa/, table/, tray/, objects/mug.obj, random_urdfs/000..999."""
    return _package_dir('pybullet_data', 'pip install pybullet==3.2.7')


_URDF_MESH = re.compile(r'<visual>.*?<mesh\s+filename="([^"]+)"(?:\s+scale="([^"]+)")?', re.S)


@lru_cache(maxsize=None)
def urdf_visual_mesh(urdf: Path) -> tuple[Path, float]:
    """(mesh file, uniform scale) of the first visual mesh of a one-link object URDF (random_urdfs, mug)."""
    m = _URDF_MESH.search(Path(urdf).read_text())
    if m is None:
        raise ValueError(f'{urdf}: no visual mesh')
    scale = float(m.group(2).split()[0]) if m.group(2) else 1.0
    return Path(urdf).parent / m.group(1), scale

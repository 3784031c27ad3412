"""The mesh half of the object library (class 'object'): which entries exist, which are usable, which are held out.

Entries: 0..999 are pybullet_data's ``random_urdfs/NNN`` blobs, 1000 is ``objects/mug.urdf``
(``objects.mesh_library_entry``). Splits, so that "objects the detector never saw" is a measured column:

- ``'train'``: random_urdfs 000..799 -- the only meshes a training (or validation) frame may contain;
- ``'heldout'``: random_urdfs 800..999 plus the mug -- never drawn by a training frame, drawn by held-out test
  frames (``SimConfig(object_split='heldout')``);
- ``'all'``: every usable entry (the simulated cells' default, as before the split existed).

Validation: an entry is usable when its OBJ file has at least four vertices and every vertex, scaled by the URDF's
scale, is finite. ``random_urdfs/168`` (scale 0.015) holds ``v nan nan nan`` lines: MuJoCo refuses to compile it,
so every seed that drew it failed to build its frame. Unusable entries are left out of every split (never drawn).
"""
from __future__ import annotations

import functools

import numpy as np

from .obj_mesh import read_obj_mesh
from .objects import NUM_RANDOM_URDFS, mesh_library_entry

MESH_SPLITS = ('all', 'train', 'heldout')
HELDOUT_FIRST_RANDOM_URDF = 800        # random_urdfs ids >= this are held out from training
MUG = NUM_RANDOM_URDFS                 # library index of the mug (held out too: a named mesh nobody trains on)

__all__ = ['MESH_SPLITS', 'HELDOUT_FIRST_RANDOM_URDF', 'MUG', 'mesh_problem', 'library_problems',
           'mesh_indices', 'split_of']


def mesh_problem(index: int) -> str | None:
    """Why library entry ``index`` cannot be used (a short sentence), or None when it can."""
    path, scale = mesh_library_entry(int(index))
    if not path.is_file():
        return f'{path.name}: file missing'
    try:
        v = read_obj_mesh(str(path))[0] * scale                              # [V,3] metres, as MuJoCo gets them
    except ValueError as e:                                                  # a malformed vertex or face
        return str(e)
    if len(v) < 4:
        return f'{path.name}: {len(v)} readable vertices (need 4)'
    if not np.isfinite(v).all():
        return f'{path.name}: {int((~np.isfinite(v)).any(axis=1).sum())} non-finite vertices (scale {scale})'
    if np.ptp(v, axis=0).min() <= 0:
        return f'{path.name}: flat (zero extent along an axis)'
    return None


@functools.lru_cache(maxsize=None)
def library_problems() -> dict[int, str]:
    """``{index: problem}`` over the whole library (read once per process, ~1 s)."""
    return {i: p for i in range(NUM_RANDOM_URDFS + 1) if (p := mesh_problem(i)) is not None}


def split_of(index: int) -> str:
    """'train' or 'heldout': the split library entry ``index`` belongs to."""
    return 'heldout' if index == MUG or index >= HELDOUT_FIRST_RANDOM_URDF else 'train'


@functools.lru_cache(maxsize=None)
def mesh_indices(split: str = 'all') -> tuple[int, ...]:
    """The usable library indices of ``split`` (ascending)."""
    if split not in MESH_SPLITS:
        raise ValueError(f'unknown object split {split!r}; expected one of {MESH_SPLITS}')
    bad = library_problems()
    return tuple(i for i in range(NUM_RANDOM_URDFS + 1)
                 if i not in bad and (split == 'all' or split_of(i) == split))

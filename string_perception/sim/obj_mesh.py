"""A Wavefront OBJ file as one triangle mesh, every object in it (the library's meshes are convex decompositions:
random_urdfs ``000.obj`` holds five objects, ``o convex_0`` ... ``o convex_4``).

MuJoCo 3.8's own OBJ reader keeps every vertex of such a file but the faces of its first object only, so it drew a
fraction of each mesh while the label (the box of every vertex) boxed all of it (docs/results/workcell.md). Reading
the file here and handing MuJoCo ``uservert`` / ``userface`` makes what is drawn, what is labelled and what collides
the same object.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ['read_obj_mesh']


@lru_cache(maxsize=256)
def read_obj_mesh(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(vertices float64 [V,3], triangles int32 [F,3], 0-based) of every ``f`` line of the file: polygons fanned
    into triangles, ``v/vt/vn`` and negative (relative) indices understood, texture and normal data ignored.
    ``ValueError`` when a vertex is not three numbers, a face names a vertex that is not an integer or does not exist,
    or there is no face (non-finite coordinates are read as such: the library check refuses them). Do not modify the
    arrays (cached)."""
    verts, faces = [], []
    with open(path, encoding='utf-8', errors='replace') as fh:
        for number, line in enumerate(fh, 1):
            t = line.split()
            if not t:
                continue
            if t[0] == 'v':
                try:
                    verts.append([float(x) for x in t[1:4]])
                except ValueError:
                    raise ValueError(f'{path}: vertex {len(verts) + 1} is not a number: {line.strip()!r}') from None
                if len(verts[-1]) != 3:
                    raise ValueError(f'{path}: vertex {len(verts)} has {len(verts[-1])} coordinates')
            elif t[0] == 'f':
                try:
                    idx = [int(w.split('/')[0]) for w in t[1:]]
                except ValueError:
                    raise ValueError(f'{path}: line {number}: a face names a vertex that is not an integer: '
                                     f'{line.strip()!r}') from None
                idx = [i - 1 if i > 0 else len(verts) + i for i in idx]         # 1-based, or relative when < 0
                faces += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
    v = np.asarray(verts, np.float64).reshape(-1, 3)                             # [V,3]
    f = np.asarray(faces, np.int32).reshape(-1, 3)                               # [F,3]
    if not len(f):
        raise ValueError(f'{path}: no faces')
    if f.min() < 0 or f.max() >= len(v):
        raise ValueError(f'{path}: a face names vertex {int(f.max()) + 1} of {len(v)}')
    return v, f

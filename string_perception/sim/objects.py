"""Object library: the five primitive classes as MuJoCo geoms plus pybullet_data's mesh objects (class 'object').

Representation (body frame = the label's box frame, scenes/primitives.py conventions):
    box       geom box, half sizes = size / 2
    cylinder  geom cylinder (radius, half length), symmetry axis z
    sphere    geom sphere
    capsule   geom capsule (radius, half length of the straight part = size_z / 2 - radius), axis z
    cone      a convex mesh made here: 32-gon base disc at z = -h/2, apex at +h/2 (MuJoCo has no cone
              primitive; a mesh renders and collides as the cone's convex hull, which is the cone itself)
    object    a random_urdfs blob (000..999) or the mug, at its URDF scale, collided as its convex hull
Boxes: primitives from their sizes, cones tight in the body frame, library meshes the tightest box around their
compiled vertices in any orientation (see `body_boxes`, mesh_box.py).
"""
from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from string_perception.scenes.primitives import BOX, CAPSULE, CONE, CYLINDER, SPHERE, sample_size

from .assets import pybullet_data_dir, urdf_visual_mesh
from .classes import OBJECT
from .mesh_box import body_frame_box, mesh_label_box
from .obj_mesh import read_obj_mesh

NUM_RANDOM_URDFS = 1000
_CONE_SEGMENTS = 32


@dataclass(frozen=True)
class ObjectSpec:
    label: int
    size: tuple                # full extents (primitives); () for meshes (measured after compiling)
    mesh_file: str = ''        # meshes only
    mesh_scale: float = 1.0
    rgba: tuple = (0.5, 0.5, 0.5, 1.0)


def mesh_library_entry(index: int) -> tuple[Path, float]:
    """Mesh file and scale of library entry `index`: 0..999 random_urdfs, 1000 the mug."""
    root = pybullet_data_dir()
    if index == NUM_RANDOM_URDFS:
        return urdf_visual_mesh(root / 'objects' / 'mug.urdf')
    return urdf_visual_mesh(root / 'random_urdfs' / f'{index:03d}' / f'{index:03d}.urdf')


def sample_objects(rng: np.random.Generator, count: int, mesh_fraction: float, size_scale: float,
                   mesh_indices: tuple | None = None, unusable: frozenset = frozenset()) -> list:
    """`count` ObjectSpecs: a mesh with probability `mesh_fraction`, else a uniformly drawn primitive class.

    Meshes are drawn uniformly from `mesh_indices` (a split of the library, sim/mesh_library.py); None draws from
    the whole library, redrawing an index in `unusable` (so frames of seeds that never drew one stay the same)."""
    out = []
    for _ in range(count):
        u = rng.random(6)
        hue, sat, val = u[3], 0.35 + 0.6 * u[4], 0.35 + 0.6 * u[5]
        rgba = (*colorsys.hsv_to_rgb(hue, sat, val), 1.0)
        if u[0] < mesh_fraction:
            if mesh_indices is not None:
                index = int(mesh_indices[int(rng.integers(0, len(mesh_indices)))])
            else:
                index = int(rng.integers(0, NUM_RANDOM_URDFS + 1))
                while index in unusable:
                    index = int(rng.integers(0, NUM_RANDOM_URDFS + 1))
            path, scale = mesh_library_entry(index)
            out.append(ObjectSpec(OBJECT, (), str(path), scale, rgba))
        else:
            label = int(u[1] * 5)
            size = sample_size(label, rng.random(3)) * size_scale
            out.append(ObjectSpec(label, tuple(float(s) for s in size), rgba=rgba))
    return out


def cone_vertices(radius: float, height: float) -> np.ndarray:
    """[33,3] base ring (a vertex on +-x and +-y, so the tight box is exactly 2r x 2r x h) and the apex."""
    a = np.arange(_CONE_SEGMENTS) * (2 * math.pi / _CONE_SEGMENTS)                  # [S]
    ring = np.stack([radius * np.cos(a), radius * np.sin(a), np.full_like(a, -height / 2)], axis=1)
    return np.concatenate([ring, [[0.0, 0.0, height / 2]]])


MAX_OBJECTS = 12
_PLACEHOLDER = [0.0, 0.0, 0.0, 1e-3, 0.0, 0.0, 0.0, 1e-3, 0.0, 0.0, 0.0, 1e-3]   # a tiny tetrahedron


def add_library_mesh(spec: mujoco.MjSpec, name: str, mesh_file, scale: float):
    """Mesh asset ``name`` of a library OBJ file at ``scale``, built from every object of the file (obj_mesh.py:
    MuJoCo's own reader draws the first only), so that what is drawn is what the label boxes and what collides."""
    v, f = read_obj_mesh(str(mesh_file))                                                # [V,3] [F,3]
    return spec.add_mesh(name=name, uservert=(v * scale).ravel().tolist(), userface=f.ravel().tolist())


def add_object_meshes(spec: mujoco.MjSpec, objects) -> None:
    """Mesh assets ``obj<i>/mesh`` for i < MAX_OBJECTS, a placeholder where object i is a primitive or absent:
    every model of a cell then has the same meshes in the same order up to these slots, so one render context
    serves all frames and only the slots are uploaded again (render.SceneRenderer)."""
    for i in range(MAX_OBJECTS):
        obj = objects[i] if i < len(objects) else None
        name = f'obj{i}/mesh'
        if obj is not None and obj.label == CONE:
            hx, hz = 0.5 * obj.size[0], 0.5 * obj.size[2]
            mesh = spec.add_mesh(name=name, uservert=cone_vertices(hx, 2 * hz).ravel().tolist())
        elif obj is not None and obj.label == OBJECT:
            mesh = add_library_mesh(spec, name, obj.mesh_file, obj.mesh_scale)
        else:
            mesh = spec.add_mesh(name=name, uservert=_PLACEHOLDER)
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX   # blob meshes need not be watertight


def add_object(spec: mujoco.MjSpec, index: int, obj: ObjectSpec) -> None:
    """A free body ``obj<index>`` with one geom ``obj<index>/geom`` (parked at the origin; placed later); meshes
    come from add_object_meshes."""
    body = spec.worldbody.add_body(name=f'obj{index}')
    body.add_freejoint(name=f'obj{index}/free').damping = [0.002, 0, 0]   # stops slow rolling / spinning
    geom = dict(name=f'obj{index}/geom', rgba=list(obj.rgba), friction=[0.9, 0.005, 0.0005], condim=6)
    hx, hy, hz = (0.5 * np.asarray(obj.size)).tolist() if obj.size else (0.0, 0.0, 0.0)
    if obj.label == BOX:
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[hx, hy, hz], **geom)
    elif obj.label == CYLINDER:
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[hx, hz, 0], **geom)
    elif obj.label == SPHERE:
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[hx, 0, 0], **geom)
    elif obj.label == CAPSULE:
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[hx, max(hz - hx, 1e-4), 0], **geom)
    else:
        density = 1000 if obj.label == CONE else 400
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f'obj{index}/mesh', density=density, **geom)


def geom_vertices_in_body(model: mujoco.MjModel, geom_id: int) -> np.ndarray:
    """[V,3] a mesh geom's vertices in its body frame (MuJoCo re-centres meshes; geom_pos/quat undo that)."""
    mid = model.geom_dataid[geom_id]
    adr, num = model.mesh_vertadr[mid], model.mesh_vertnum[mid]
    v = model.mesh_vert[adr:adr + num].astype(np.float64)                             # [V,3] geom frame
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, model.geom_quat[geom_id])
    return v @ R.reshape(3, 3).T + model.geom_pos[geom_id]


def body_boxes(model: mujoco.MjModel, geom_ids, objects) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre [O,3], axes [O,3,3], size [O,3]) of each object's label box in its body frame: primitives from their
    sizes and cones around their vertices, along the body axes (axes = I); library meshes (class ``object``) the
    tightest box around their vertices (mesh_box.py), whose axes need not be the body's."""
    centres, axes, sizes = [], [], []
    for gid, obj in zip(geom_ids, objects):
        if obj.label in (BOX, CYLINDER, SPHERE, CAPSULE):
            c, R, size = np.zeros(3), np.eye(3), np.asarray(obj.size, np.float64)
        elif obj.label == OBJECT:
            c, R, size = mesh_label_box(geom_vertices_in_body(model, gid))
        else:
            c, R, size = body_frame_box(geom_vertices_in_body(model, gid))
        centres.append(c)
        axes.append(R)
        sizes.append(size)
    return np.array(centres).reshape(-1, 3), np.array(axes).reshape(-1, 3, 3), np.array(sizes).reshape(-1, 3)

"""How tight are the mesh objects' box labels? (issue 38 item 5: is the mesh gap a label problem?)

    python -m benchmarks.mesh_labels --meshes 80

A mesh object's label (``sim/objects.body_boxes``) is the axis-aligned box of its vertices in the object's body
frame (the URDF's mesh frame). Its orientation is therefore the mesh author's choice, not something the image shows.
This compares that box with the box in the mesh's principal-axes frame (MuJoCo's geom frame after it re-orients a
mesh to its inertia), for a random sample of the library: the volume ratio (> 1: the label is looser than the
principal-axes box) and the rotation between the two frames.

And whether the label boxes what is drawn: MuJoCo draws a mesh's faces (``mesh_face``), and the label takes every
vertex (``mesh_vert``); ``drawn / label`` is the volume of the face vertices' box in the body frame over the label
box's (1 when they agree). MuJoCo 3.8's own OBJ reader kept the faces of a file's first object only (median 0.05
here before sim/obj_mesh.py); the meshes are now built from every object of the file, as the generator builds them.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from string_perception.sim.mesh_library import mesh_indices, mesh_problem  # noqa: E402
from string_perception.sim.objects import add_library_mesh, mesh_library_entry  # noqa: E402


def box_frames(index: int) -> tuple[float, float, float]:
    """(label box volume / principal-axes box volume, rotation between the two frames in degrees, drawn / label box
    volume) of one mesh."""
    path, scale = mesh_library_entry(index)
    spec = mujoco.MjSpec()
    mesh = add_library_mesh(spec, 'm', path, scale)                              # as the generator builds it
    mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX                 # as sim/objects.add_object_meshes
    body = spec.worldbody.add_body(name='b')
    body.add_freejoint()
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname='m')
    model = spec.compile()
    adr, num = model.mesh_vertadr[0], model.mesh_vertnum[0]
    v_geom = model.mesh_vert[adr:adr + num].astype(np.float64)                   # [V,3] principal-axes frame
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, model.geom_quat[0])
    R = R.reshape(3, 3)
    v_body = v_geom @ R.T + model.geom_pos[0]                                    # [V,3] body frame (the label's)
    ratio = np.prod(np.ptp(v_body, axis=0)) / np.prod(np.ptp(v_geom, axis=0))
    angle = np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1)))
    faces = model.mesh_face[model.mesh_faceadr[0]:model.mesh_faceadr[0] + model.mesh_facenum[0]]   # [F,3] local
    drawn = v_body[np.unique(faces)]                                              # [V',3] vertices of drawn faces
    drawn_ratio = np.prod(np.ptp(drawn, axis=0)) / np.prod(np.ptp(v_body, axis=0))
    return float(ratio), float(angle), float(drawn_ratio)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--meshes', type=int, default=80, help='library entries sampled')
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    pool = [i for i in mesh_indices('all') if mesh_problem(i) is None]
    picked = np.random.default_rng(args.seed).choice(pool, min(args.meshes, len(pool)), replace=False)
    ratio, angle, drawn = np.array([box_frames(int(i)) for i in picked]).T
    print(f'{len(picked)} meshes: label box / principal-axes box volume median {np.median(ratio):.2f} '
          f'(p25 {np.percentile(ratio, 25):.2f}, p75 {np.percentile(ratio, 75):.2f}, max {ratio.max():.2f}); '
          f'label looser by > 1.5x: {np.mean(ratio > 1.5):.0%}; principal-axes box the larger: {np.mean(ratio < 1):.0%}; '
          f'frames differ by > 20 deg: {np.mean(angle > 20):.0%} (median {np.median(angle):.0f} deg)')
    print(f'drawn / label box volume: median {np.median(drawn):.2f} (p25 {np.percentile(drawn, 25):.2f}, '
          f'p75 {np.percentile(drawn, 75):.2f}); labels boxing what is drawn (> 0.9): {np.mean(drawn > 0.9):.0%}, '
          f'drawn under half the label: {np.mean(drawn < 0.5):.0%}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

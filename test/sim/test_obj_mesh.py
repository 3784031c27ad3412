"""sim/obj_mesh.py: every object of an OBJ file becomes part of the one mesh MuJoCo draws, so the drawn object, its
label (the box of every vertex) and its collision hull agree (MuJoCo 3.8's own reader drew the first object only)."""
import numpy as np
import pytest

mujoco = pytest.importorskip('mujoco')   # string_perception.sim imports it

from string_perception.sim.obj_mesh import read_obj_mesh  # noqa: E402

TWO_OBJECTS = """# two unit squares, the second as a quad with relative indices
o first
v 0 0 0
v 1 0 0
v 1 1 0
v 0 1 0
f 1/1/1 2/2/2 3/3/3
f 1 3 4
o second
v 0 0 2
v 1 0 2
v 1 1 2
v 0 1 2
f -4 -3 -2 -1
"""


def test_reads_every_object_fans_polygons_and_relative_indices(tmp_path):
    path = tmp_path / 'two.obj'
    path.write_text(TWO_OBJECTS)
    v, f = read_obj_mesh(str(path))
    assert v.shape == (8, 3) and f.dtype == np.int32
    np.testing.assert_array_equal(f, [[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]])


def test_refuses_a_face_past_the_vertices(tmp_path):
    path = tmp_path / 'bad.obj'
    path.write_text('v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 4\n')
    with pytest.raises(ValueError, match='vertex 4 of 3'):
        read_obj_mesh(str(path))


def test_refuses_a_face_that_is_not_integers(tmp_path):
    path = tmp_path / 'bad.obj'
    path.write_text('v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 x/1\n')
    with pytest.raises(ValueError, match='bad.obj: line 4: a face names a vertex that is not an integer'):
        read_obj_mesh(str(path))


@pytest.mark.parametrize('row, message', [('v 0 x 0', 'vertex 2 is not a number'),
                                          ('v 0 0', 'vertex 2 has 2 coordinates')])
def test_refuses_a_vertex_that_is_not_three_numbers(tmp_path, row, message):
    path = tmp_path / 'bad.obj'
    path.write_text(f'v 0 0 0\n{row}\nv 0 1 0\nf 1 2 3\n')
    with pytest.raises(ValueError, match=message):
        read_obj_mesh(str(path))


def test_the_generator_draws_every_object_of_a_library_mesh():
    pytest.importorskip('pybullet_data')
    from string_perception.sim.classes import OBJECT
    from string_perception.sim.objects import ObjectSpec, add_object, add_object_meshes, mesh_library_entry
    path, scale = mesh_library_entry(0)                  # random_urdfs 000.obj: five convex objects, 474 faces
    obj = ObjectSpec(OBJECT, (), str(path), scale)
    spec = mujoco.MjSpec()
    add_object_meshes(spec, [obj])                       # as a cell builds them: slot 0 this mesh, placeholders after
    add_object(spec, 0, obj)
    model = spec.compile()
    v, f = read_obj_mesh(str(path))
    assert model.mesh_facenum[0] == len(f) == 474        # MuJoCo's own reader kept 124 (the first object)
    vert = model.mesh_vert[:model.mesh_vertnum[0]]
    drawn = vert[np.unique(model.mesh_face[:model.mesh_facenum[0]])]
    np.testing.assert_allclose(np.ptp(drawn, axis=0), np.ptp(vert, axis=0))   # the label's box is the drawn one

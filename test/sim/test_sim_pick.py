"""Scripted pick-and-place in the live cell (sim/live.py + sim/pick.py), ROS-free: while carried an object keeps
its pose in the gripper's frame, after the release it lies elsewhere on the support (lowest point on it, not in
it), the ground-truth boxes of LiveCell.view() follow it, and a run is deterministic per seed."""
import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import pytest  # noqa: E402
pytest.importorskip('mujoco')  # optional: requirements/sim.txt
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from string_perception.scenes.primitives import CONE, support_distance  # noqa: E402
from string_perception.sim import OBJECT, SimConfig  # noqa: E402
from string_perception.sim.live import LiveCell, LiveConfig  # noqa: E402
from string_perception.sim.objects import geom_vertices_in_body  # noqa: E402

CASES = {'aloha': (0, 'top'), 'kuka': (1, 'front')}             # cell: (seed, camera)
SUPPORTS = {'aloha': {'table_box': 0.0}, 'kuka': {'tray_base': 0.64}}
DT = 0.05

pytestmark = pytest.mark.slow                                      # ~30 s: two cells through a pick


def _cell(cell: str) -> LiveCell:
    seed, rig = CASES[cell]
    cfg = SimConfig.noise_free(cell=cell, height=48, width=64, min_visible_pixels=4, min_visibility=0.0)
    return LiveCell(cfg, seed=seed, rig=rig, live=LiveConfig(respawn_period_s=0.0))


def _object_pose(live: LiveCell, o: int):
    d, m = live.state.data, live.state.model
    b = m.geom_bodyid[live.state.index.obj_geom[o]]
    return d.xpos[b].copy(), d.xmat[b].reshape(3, 3).copy()


def _lowest_z(live: LiveCell, o: int) -> float:
    st = live.state
    p, R = _object_pose(live, o)
    obj = st.objects[o]
    if obj.label in (OBJECT, CONE):                                   # meshes
        v = geom_vertices_in_body(st.model, st.index.obj_geom[o])     # [V,3] body frame
        return float((p + v @ R.T)[:, 2].min())
    return float(p[2] - support_distance(obj.label, np.asarray(obj.size), R.T @ np.array([0.0, 0.0, -1.0])))


def _view(live: LiveCell):
    """(View, every object's box centre [O,3] in its camera frame, from the objects' world poses now)."""
    view = live.view()
    centres = []
    for o in range(len(live.state.objects)):
        p, R = _object_pose(live, o)
        centres.append(view.camera.R_wc.T @ (p + R @ live.picker.box_centre[o] - view.camera.p_wc))
    return view, np.array(centres)


def _labelled(view, centres: np.ndarray) -> set:
    """Objects whose box is among the view's labels; asserts every label is some object's box."""
    dist = np.linalg.norm(view.frame.translations[:, None] - centres[None], axis=2)      # [M,O]
    assert np.all(dist.min(1) < 1e-6), 'a ground-truth box that no object has'
    return set(np.flatnonzero(dist.min(0) < 1e-6).tolist())


@pytest.fixture(scope='module', params=sorted(CASES))
def first_pick(request):
    """Run a cell through its first completed pick and 1 s of settling; what the tests look at."""
    live = _cell(request.param)
    rel, carried_views, start_view, obj = [], [], None, -1
    while not any(r.done for r in live.picker.records) and live.time_s < 30.0:
        picker = live.picker
        if picker.phase == 'approach' and start_view is None:
            obj, start_view = picker.obj, _view(live)
            start_pose = _object_pose(live, obj)
        live.advance(DT)
        if picker.attached:
            tool = picker.arm[1].body
            R_t = live.state.data.xmat[tool].reshape(3, 3)
            p, R = _object_pose(live, picker.obj)
            rel.append(np.concatenate([R_t.T @ (p - live.state.data.xpos[tool]), (R_t.T @ R).ravel()]))
            if len(rel) % 5 == 2:
                carried_views.append(_view(live))
    live.advance(1.0)
    return dict(cell=request.param, live=live, obj=obj, rel=np.array(rel), start_pose=start_pose,
                start_view=start_view, carried_views=carried_views, end_view=_view(live))


def test_the_carried_object_keeps_its_pose_in_the_gripper(first_pick):
    rel = first_pick['rel']                                           # [T,12] per step while attached
    assert len(rel) >= 10
    assert np.abs(rel - rel[0]).max() < 1e-9
    record = [r for r in first_pick['live'].picker.records if r.done][0]
    assert record.obj == first_pick['obj']


def test_the_placed_object_moved_and_rests_on_the_support(first_pick):
    live, o, cell = first_pick['live'], first_pick['obj'], first_pick['cell']
    p_end, _ = _object_pose(live, o)
    assert np.linalg.norm(p_end[:2] - first_pick['start_pose'][0][:2]) > 0.05
    d, m = live.state.data, live.state.model
    touching = set()
    for c in d.contact[:d.ncon]:
        if live.state.index.geom_obj[c.geom1] == o or live.state.index.geom_obj[c.geom2] == o:
            assert c.dist > -0.003, f'{-c.dist * 1e3:.1f} mm interpenetration'
            other = c.geom2 if live.state.index.geom_obj[c.geom1] == o else c.geom1
            touching.add(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, other))
    (support, z), = SUPPORTS[cell].items()
    assert support in touching
    assert abs(_lowest_z(live, o) - z) < 0.004
    dof = live.state.index.obj_dof[o]
    assert np.abs(d.qvel[dof:dof + 3]).max() < 0.02                  # at rest


def test_ground_truth_boxes_follow_the_moved_object(first_pick):
    o = first_pick['obj']
    (start, start_c), (end, end_c) = first_pick['start_view'], first_pick['end_view']
    assert o in _labelled(start, start_c) and o in _labelled(end, end_c)
    assert np.linalg.norm(end_c[o] - start_c[o]) > 0.05
    carried = [o in _labelled(v, c) for v, c in first_pick['carried_views']]      # (the arm may hide it)
    assert any(carried)


def test_pick_runs_are_deterministic_per_seed():
    a, b = _cell('aloha'), _cell('aloha')
    for live in (a, b):
        live.advance(2.5)
    assert a.picker.phase != 'idle'                                   # the first pick is under way
    assert np.array_equal(a.state.data.qpos, b.state.data.qpos)
    assert np.array_equal(a.view().frame.rgb, b.view().frame.rgb)


def test_unknown_motion_is_rejected():
    with pytest.raises(ValueError, match='motion'):
        LiveConfig(motion='dance')


def test_sweep_motion_moves_the_arms_without_picking():
    cfg = SimConfig.noise_free(cell='kuka', height=24, width=32)
    live = LiveCell(cfg, seed=1, live=LiveConfig(motion='sweep', respawn_period_s=0.0))
    q0 = live.q.copy()
    live.advance(0.5)
    assert live.picker is None and np.abs(live.q - q0).max() > 0.05    # 0.5 rad/s for 0.5 s on the largest joint

"""ROS-free parts of the node: message conversion, markers, diagnostics, latest-frame worker (no rclpy context)."""
import threading
import time

import numpy as np
import pytest

from test.support.ros_helpers import ros_skip_reason
from string_perception.box_ops import quaternion_to_rotation, rotation_to_quaternion
from string_perception.ros.diagnostics import NodeStats, diagnostic_array, status_name
from string_perception.ros.latest import LatestWorker
from string_perception.runtime.postprocess import Detections

needs_msgs = pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None, reason='message packages missing')


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    x, y, z = axis * np.sin(angle / 2)
    return quaternion_to_rotation([x, y, z, np.cos(angle / 2)])


def _dets(n=3, seed=0) -> Detections:
    rng = np.random.default_rng(seed)
    R = np.stack([_rot(rng.normal(size=3), rng.uniform(0, np.pi)) for _ in range(n)]).reshape(n, 3, 3)
    return Detections(translations=rng.normal(size=(n, 3)) + [0, 0, 1], rotations=R,
                      quaternions_xyzw=rotation_to_quaternion(R).reshape(n, 4), sizes=rng.uniform(0.05, 0.3, (n, 3)),
                      class_ids=np.arange(n, dtype=np.int64) % 2, class_names=[['mug', 'box'][i % 2] for i in range(n)],
                      scores=np.linspace(0.9, 0.4, n), token_indices=np.arange(n, dtype=np.int64))


def _header(sec=12, nanosec=345, frame='cam_optical'):
    from std_msgs.msg import Header
    h = Header(frame_id=frame)
    h.stamp.sec, h.stamp.nanosec = sec, nanosec
    return h


# ---------------------------------------------------------------------------------------------- messages
@needs_msgs
def test_detections_round_trip_with_header_pose_and_results():
    from string_perception.codec.detection_msgs import detections_from_msg, detections_to_msg
    d = _dets(4)
    msg = detections_to_msg(d, _header())
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (12, 345, 'cam_optical')
    assert len(msg.detections) == 4
    first = msg.detections[0]
    assert first.header.frame_id == 'cam_optical' and first.header.stamp.nanosec == 345
    o = first.bbox.center.orientation
    np.testing.assert_allclose([o.x, o.y, o.z, o.w], d.quaternions_xyzw[0])      # x, y, z, w order
    # vision_msgs' convention: class_id = the integer id as a string; LabelInfo maps it to the name
    assert [x.results[0].hypothesis.class_id for x in msg.detections] == ['0', '1', '0', '1']
    assert first.results[0].hypothesis.score == pytest.approx(0.9)
    assert first.results[0].pose.pose.position.z == pytest.approx(d.translations[0, 2])
    back = detections_from_msg(msg, labels=['mug', 'box'])
    np.testing.assert_allclose(back['params'][:, :3], d.translations)
    np.testing.assert_allclose(back['params'][:, 3:6], d.rotations[:, :, 0], atol=1e-12)
    np.testing.assert_allclose(back['params'][:, 9:], d.sizes)
    assert back['labels'].tolist() == [0, 1, 0, 1] and back['class_names'] == d.class_names
    named = detections_from_msg(msg, labels=['box', 'mug'], id_names={0: 'mug', 1: 'box'})   # LabelInfo decides
    assert named['class_names'] == d.class_names and named['labels'].tolist() == [1, 0, 1, 0]
    assert detections_from_msg(msg)['class_names'] == ['0', '1', '0', '1']          # no labels: the id itself
    empty = detections_to_msg(Detections.empty(), _header())
    assert empty.detections == [] and detections_from_msg(empty)['params'].shape == (0, 12)


def test_resolve_class_reads_both_conventions():
    from string_perception.codec.detection_msgs import class_id_string, resolve_class
    labels = ['box', 'cylinder', 'sphere']
    assert class_id_string(np.int64(2)) == '2'
    assert resolve_class('2', labels) == (2, 'sphere')                     # new: id indexes the labels
    assert resolve_class('sphere', labels) == (2, 'sphere')                # old: the class name
    assert resolve_class('7', labels) == (-1, '7') and resolve_class('cone', labels) == (-1, 'cone')
    assert resolve_class('1', labels, {1: 'sphere'}) == (2, 'sphere')      # LabelInfo names the id
    assert resolve_class('1', labels, {1: 'mug'}) == (-1, 'mug')


@needs_msgs
def test_label_info_and_tensor_images():
    from string_perception.codec.detection_msgs import image_to_tensor, label_info_msg, tensor_to_image
    info = label_info_msg(['mug', 'box'], 0.25, _header())
    assert [(c.class_id, c.class_name) for c in info.class_map] == [(0, 'mug'), (1, 'box')]
    assert info.threshold == pytest.approx(0.25)
    emb = np.linspace(-1, 1, 7, dtype=np.float32)
    img = tensor_to_image(emb, _header())
    assert (img.encoding, img.height, img.width, img.step) == ('32FC1', 1, 7, 28)
    assert img.header.frame_id == 'cam_optical' and img.header.stamp.sec == 12
    np.testing.assert_array_equal(image_to_tensor(img), emb[None])
    tokens = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(image_to_tensor(tensor_to_image(tokens)), tokens)
    with pytest.raises(ValueError):
        tensor_to_image(np.zeros((2, 2, 2)))


@needs_msgs
def test_camera_info_to_k():
    from sensor_msgs.msg import CameraInfo
    from string_perception.codec.detection_msgs import camera_info_to_k
    info = CameraInfo(height=480, width=640)
    info.k = [500.0, 0.0, 320.0, 0.0, 505.0, 240.0, 0.0, 0.0, 1.0]
    K, hw = camera_info_to_k(info)
    assert hw == (480, 640) and K[1, 1] == 505.0 and K[0, 2] == 320.0 and K.shape == (3, 3)
    assert camera_info_to_k(CameraInfo())[1] is None


@needs_msgs
def test_camera_info_to_k_applies_roi_and_binning():
    """A binned (or ROI) camera's K and size are those of the image it publishes: a point projects to the binned
    pixel that covers its full-resolution pixel."""
    from sensor_msgs.msg import CameraInfo
    from string_perception.codec.detection_msgs import camera_info_to_k
    info = CameraInfo(height=480, width=640, binning_x=2, binning_y=2)
    info.k = [500.0, 0.0, 319.5, 0.0, 505.0, 239.5, 0.0, 0.0, 1.0]
    K, hw = camera_info_to_k(info)
    assert hw == (240, 320)
    p = np.array([0.1, -0.05, 1.0])
    full, binned = np.array(info.k).reshape(3, 3) @ p, K @ p
    np.testing.assert_allclose(binned[:2], (full[:2] - 0.5) / 2, atol=1e-12)     # pixel-centre mapping, b = 2
    roi = CameraInfo(height=480, width=640)
    roi.k = info.k
    roi.roi.x_offset, roi.roi.y_offset, roi.roi.width, roi.roi.height = 100, 40, 320, 200
    K, hw = camera_info_to_k(roi)
    assert hw == (200, 320) and (K[0, 2], K[1, 2]) == (219.5, 199.5) and K[0, 0] == 500.0


def test_transform_detections_moves_boxes_rigidly():
    from string_perception.codec.detection_msgs import transform_detections
    d = _dets(3, seed=1)
    R, t = _rot([0.3, -1, 0.2], 0.8), np.array([0.5, -0.2, 1.0])
    moved = transform_detections(d, R, t)
    np.testing.assert_allclose(moved.translations, d.translations @ R.T + t)
    np.testing.assert_allclose(quaternion_to_rotation(moved.quaternions_xyzw), R @ d.rotations, atol=1e-12)
    np.testing.assert_array_equal(moved.sizes, d.sizes)
    back = transform_detections(moved, R.T, -R.T @ t)
    np.testing.assert_allclose(back.translations, d.translations, atol=1e-12)
    assert len(transform_detections(Detections.empty(), R, t)) == 0


# ---------------------------------------------------------------------------------------------- markers
@needs_msgs
def test_markers_replace_by_id_and_delete_leftovers():
    from visualization_msgs.msg import Marker
    from string_perception.codec.markers import BOX_NS, TEXT_NS, MarkerBuilder
    b = MarkerBuilder(alpha=0.3)
    d = _dets(3)
    m1 = b.build(d, _header())
    kinds = ((BOX_NS, Marker.CUBE), (TEXT_NS, Marker.TEXT_VIEW_FACING))
    assert [(m.ns, m.id, m.type, m.action) for m in m1.markers] == [
        (ns, i, t, Marker.ADD) for i in range(3) for ns, t in kinds]
    cube = m1.markers[0]
    assert (cube.scale.x, cube.scale.y, cube.scale.z) == tuple(d.sizes[0])
    assert cube.color.a == pytest.approx(0.3) and cube.header.frame_id == 'cam_optical'
    assert (cube.lifetime.sec, cube.lifetime.nanosec) == (1, 0)              # the default marker_lifetime
    # class 0: hue 0.08, saturation 0.85, value 0.95 -> (v, v(1 - s(1 - f)), v(1 - s)) with f = 6 * 0.08 = 0.48
    assert (cube.color.r, cube.color.g, cube.color.b) == pytest.approx((0.95, 0.95 * (1 - 0.85 * 0.52), 0.95 * 0.15))
    assert (m1.markers[2].color.r, m1.markers[2].color.g, m1.markers[2].color.b) != \
        pytest.approx((cube.color.r, cube.color.g, cube.color.b))                # class 1 looks different
    assert (m1.markers[4].color.r, m1.markers[4].color.g) == (cube.color.r, cube.color.g)   # class 0 again
    assert m1.markers[1].text == 'mug 0.90'
    m2 = b.build(_dets(1), _header(13))
    actions = {(m.ns, m.id): m.action for m in m2.markers}
    assert actions == {(BOX_NS, 0): Marker.ADD, (TEXT_NS, 0): Marker.ADD, (BOX_NS, 1): Marker.DELETE,
                       (TEXT_NS, 1): Marker.DELETE, (BOX_NS, 2): Marker.DELETE, (TEXT_NS, 2): Marker.DELETE}
    assert not any(m.action == Marker.DELETEALL for m in m2.markers)          # no flicker
    assert len(b.build(_dets(1), _header(14)).markers) == 2                   # nothing left to delete
    clear = b.clear(_header())
    assert [m.action for m in clear.markers] == [Marker.DELETEALL]
    assert b.build(Detections.empty(), _header()).markers == []              # after DELETEALL: nothing to delete


def test_class_colours_are_distinct_and_stable():
    from string_perception.codec.markers import class_colour
    cols = [class_colour(i) for i in range(8)]
    assert cols[0] == pytest.approx((0.95, 0.5301, 0.1425))          # hand-computed HSV (0.08, 0.85, 0.95)
    # class 1: hue 0.08 + 0.618034 = 0.698034 -> sector 4, f = 0.188: (v(1 - s(1 - f)), v(1 - s), v)
    assert cols[1] == pytest.approx((0.95 * (1 - 0.85 * 0.811796), 0.1425, 0.95), abs=1e-6)
    assert min(np.linalg.norm(np.subtract(a, b)) for i, a in enumerate(cols) for b in cols[i + 1:]) > 0.1
    assert all(0 <= c <= 1 for col in cols for c in col)


# ---------------------------------------------------------------------------------------------- diagnostics
def test_node_stats_rates_percentiles_and_drops():
    now = [100.0]
    s = NodeStats(window=100, clock=lambda: now[0])
    for _ in range(30):
        s.count_input('image')
    for _ in range(25):
        s.count_input('depth')
        s.count_synced()
    for i in range(20):
        s.frame_done(latency_ms=float(i + 1), inference_ms=2.0)
    s.drop('stale', 5)
    s.bad_input('bad_intrinsics')
    now[0] += 2.0
    snap = s.snapshot()
    assert snap['input_rate_hz[image]'] == pytest.approx(15.0) and snap['synced_rate_hz'] == pytest.approx(12.5)
    assert snap['output_rate_hz'] == pytest.approx(10.0)
    assert snap['latency_ms_p50'] == pytest.approx(10.5) and snap['latency_ms_p95'] == pytest.approx(19.05)
    assert snap['inference_ms_p95'] == pytest.approx(2.0)
    assert snap['drops'] == {'stale': 5, 'unsynchronised': 5, 'tf': 0, 'not_received': 0}
    assert snap['bad_inputs'] == {'bad_intrinsics': 1}
    now[0] += 1.0
    assert s.snapshot()['output_rate_hz'] == 0.0           # rates are per period


def test_node_stats_is_thread_safe():
    s = NodeStats()
    threads = [threading.Thread(target=lambda: [s.count_input('image') for _ in range(2000)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.snapshot()['inputs'] == {'image': 8000}


@needs_msgs
def test_diagnostic_array_levels_and_keys():
    from builtin_interfaces.msg import Time
    s = NodeStats()
    s.count_input('image')
    s.count_synced()
    s.frame_done(12.0, 3.0)
    arr = diagnostic_array(s.snapshot(), Time(sec=5), node_name='string_perception', hardware_id='/string_perception',
                           provider='CPUExecutionProvider')
    st = arr.status[0]
    assert st.name == status_name('string_perception') and st.level == b'\x00' and arr.header.stamp.sec == 5
    kv = {v.key: v.value for v in st.values}
    assert kv['execution_provider'] == 'CPUExecutionProvider' and kv['latency_ms_p50'] == '12.000'
    assert kv['drops.stale'] == '0' and 'drops.unsynchronised' in kv
    s.bad_input('size_mismatch')
    assert diagnostic_array(s.snapshot(), Time(), node_name='n', hardware_id='x', provider='p').status[0].level == b'\x01'
    s.error('runtime_failure')
    st = diagnostic_array(s.snapshot(), Time(), node_name='n', hardware_id='x', provider='p').status[0]
    assert st.level == b'\x02' and 'runtime_failure' in st.message
    assert diagnostic_array(NodeStats().snapshot(), Time(), node_name='n', hardware_id='x', provider='p',
                            active=False).status[0].message == 'inactive'


# ---------------------------------------------------------------------------------------------- worker
def test_latest_worker_keeps_only_the_newest_frame_and_survives_errors():
    gate, done, dropped, errors = threading.Event(), [], [], []

    def process(item):
        if item == 'boom':
            raise RuntimeError('bad frame')
        if item == 0:
            gate.wait(5)
        done.append(item)

    w = LatestWorker(process, on_drop=dropped.append, on_error=errors.append)
    w.start()
    assert w.submit(0)
    time.sleep(0.05)                   # 0 is being processed (blocked)
    assert w.submit(1) and not w.submit(2) and not w.submit(3)   # 1 and 2 replaced while waiting
    gate.set()
    deadline = time.monotonic() + 5
    while not w.idle() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done == [0, 3] and dropped == [1, 2]
    w.submit('boom')
    deadline = time.monotonic() + 5
    while (not w.idle() or not errors) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    w.submit(5)
    deadline = time.monotonic() + 5
    while 5 not in done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done[-1] == 5               # still working after the error
    w.stop()
    w.submit(6)
    time.sleep(0.05)
    assert 6 not in done

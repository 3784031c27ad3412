"""codec/image_cdr.py (serialized sensor_msgs/Image -> views) against rclpy's own serialization, and its errors;
ros/raw_input.py's subscriber passes what the reader gives and reports what it rejects."""
import struct

import numpy as np
import pytest

from string_perception.codec.image_cdr import ImageCdrError, RawImage, read_image
from string_perception.codec.image_conversion import imgmsg_to_array

serialization = pytest.importorskip('rclpy.serialization')
sensor_msgs = pytest.importorskip('sensor_msgs.msg')

# encoding -> (dtype, channels)
ENCODINGS = {'rgb8': (np.uint8, 3), 'bgr8': (np.uint8, 3), 'rgba8': (np.uint8, 4), 'mono8': (np.uint8, 1),
             'mono16': (np.uint16, 1), '16UC1': (np.uint16, 1), '32FC1': (np.float32, 1)}


def image_msg(encoding, h, w, *, frame_id='camera_color_optical_frame', pad=0, sec=1_700_000_000, nanosec=123,
              seed=0, big=False):
    dtype, ch = ENCODINGS[encoding]
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (h, w * ch * np.dtype(dtype).itemsize + pad), dtype=np.uint8)   # [h, step]
    m = sensor_msgs.Image(height=h, width=w, encoding=encoding, is_bigendian=int(big),
                          step=pixels.shape[1], data=pixels.tobytes())
    m.header.frame_id, m.header.stamp.sec, m.header.stamp.nanosec = frame_id, sec, nanosec
    return m


CASES = [('rgb8', 480, 640, {}), ('bgr8', 3, 5, {'frame_id': ''}), ('rgba8', 2, 7, {'frame_id': 'a'}),
         ('mono8', 5, 3, {'frame_id': 'ab', 'pad': 3}), ('mono16', 4, 3, {'frame_id': 'abc', 'pad': 2}),
         ('16UC1', 480, 640, {'frame_id': 'abcd'}), ('32FC1', 6, 2, {'frame_id': 'frame_' * 9, 'pad': 4}),
         ('16UC1', 3, 4, {'big': True, 'sec': -5, 'nanosec': 999_999_999}), ('mono8', 0, 0, {})]


@pytest.mark.parametrize('encoding,h,w,kw', CASES)
def test_reader_equals_rclpy_deserialisation(encoding, h, w, kw):
    msg = image_msg(encoding, h, w, **kw)
    raw = serialization.serialize_message(msg)
    got = read_image(raw)
    ref = serialization.deserialize_message(raw, sensor_msgs.Image)
    assert isinstance(got, RawImage)
    assert (got.header.stamp.sec, got.header.stamp.nanosec, got.header.frame_id) == \
        (ref.header.stamp.sec, ref.header.stamp.nanosec, ref.header.frame_id) == \
        (kw.get('sec', 1_700_000_000), kw.get('nanosec', 123), kw.get('frame_id', 'camera_color_optical_frame'))
    assert (got.height, got.width, got.encoding, got.is_bigendian, got.step) == \
        (ref.height, ref.width, ref.encoding, ref.is_bigendian, ref.step)
    assert got.data.dtype == np.uint8 and got.data.tobytes() == bytes(ref.data) == bytes(msg.data)
    if h and w:
        np.testing.assert_array_equal(imgmsg_to_array(got, copy=False), imgmsg_to_array(ref))


def test_data_is_a_view_over_the_serialized_bytes():
    raw = bytearray(serialization.serialize_message(image_msg('rgb8', 2, 3)))
    got = read_image(raw)
    before = int(got.data[-1])
    raw[-1] = (before + 1) % 256                     # the last serialized byte is the last pixel byte
    assert int(got.data[-1]) == (before + 1) % 256
    view = imgmsg_to_array(got, copy=False)
    assert view.shape == (2, 3, 3) and np.shares_memory(view, got.data)


def test_every_truncation_is_a_clear_error():
    raw = serialization.serialize_message(image_msg('mono16', 2, 3, frame_id='cam'))
    for n in range(len(raw)):
        with pytest.raises(ImageCdrError, match='serialized Image'):
            read_image(raw[:n])


@pytest.mark.parametrize('mutate,needle', [
    (lambda b: b'\x00\x0a' + b[2:], 'encapsulation 0x000a'),
    (lambda b: b[:12] + struct.pack('<I', 10 ** 6) + b[16:], 'not plausible'),       # frame_id length
    (lambda b: b[:16] + b'c\xff\xfe\x00' + b[20:], 'not UTF-8'),
    (lambda b: b[:19] + b'X' + b[20:], 'not NUL-terminated'),
])
def test_corrupt_buffers_are_rejected_with_their_reason(mutate, needle):
    raw = serialization.serialize_message(image_msg('mono8', 2, 2, frame_id='cam'))   # frame_id at bytes 12..19
    assert raw[12:20] == struct.pack('<I', 4) + b'cam\x00'
    with pytest.raises(ImageCdrError, match=needle):
        read_image(mutate(raw))


def test_a_readable_image_with_a_wrong_encoding_or_layout_fails_the_node_checks():
    from string_perception.codec.frame_checks import check_image_layout
    from string_perception.runtime.errors import InputError
    msg = image_msg('rgb8', 4, 4)
    msg.encoding = 'yuv422'
    with pytest.raises(InputError) as e:
        check_image_layout(read_image(serialization.serialize_message(msg)), 'colour')
    assert e.value.kind == 'bad_encoding'
    msg = image_msg('16UC1', 4, 4)
    msg.step = 4                                     # a row of 4 uint16 needs 8 bytes
    with pytest.raises(InputError) as e:
        check_image_layout(read_image(serialization.serialize_message(msg)), 'depth')
    assert e.value.kind == 'bad_layout'


class FakeNode:
    def create_subscription(self, msg_type, topic, callback, qos, **kwargs):
        self.callback, self.kwargs = callback, kwargs
        return object()


def test_raw_subscriber_passes_images_and_reports_bad_buffers():
    from string_perception.ros.raw_input import RawImageSubscriber
    node, got, bad, infos = FakeNode(), [], [], []
    sub = RawImageSubscriber(node, sensor_msgs.Image, 'image', qos_profile=5, on_bad=bad.append,
                             on_info=infos.append)
    sub.registerCallback(got.append)
    assert node.kwargs['raw'] is True                # rclpy hands over the serialized bytes
    raw = serialization.serialize_message(image_msg('rgb8', 2, 2))
    node.callback(raw, {'publication_sequence_number': 1})
    node.callback(raw[:30], {'publication_sequence_number': 2})
    assert len(got) == 1 and got[0].encoding == 'rgb8' and got[0].data.tobytes() == raw[-12:]
    assert len(bad) == 1 and isinstance(bad[0], ImageCdrError) and 'ends inside' in str(bad[0])
    # every received buffer's MessageInfo reaches on_info, readable or not (a lost frame is not a bad one)
    assert [i['publication_sequence_number'] for i in infos] == [1, 2]


@pytest.mark.ros
@pytest.mark.slow
def test_node_counts_and_logs_unreadable_raw_images(tmp_path, monkeypatch):
    """raw_image_input:=true: truncated serialized images published on ``image`` are counted as ``bad_cdr`` (and
    a valid one with an unknown encoding as ``bad_encoding`` once synchronised); the node keeps spinning."""
    import time
    rclpy = pytest.importorskip('rclpy')
    from test.support.ros_helpers import reserved_domain_id, ros_skip_reason
    if ros_skip_reason('vision_msgs'):
        pytest.skip(ros_skip_reason('vision_msgs'))
    from rclpy.executors import SingleThreadedExecutor
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import SUCCESS, StringPerceptionNode
    from test.support.tiny_model import save_tiny_model
    model = save_tiny_model(tmp_path / 'tiny.onnx')
    args = ['-p', 'autostart:=false', '-p', f'model_path:={model}', '-p', 'raw_image_input:=true',
            '-p', 'providers:=["CPUExecutionProvider"]', '-p', 'log_throttle:=0.0']
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(args=['x', '--ros-args', *args], context=ctx)
        node = StringPerceptionNode(context=ctx)
        peer = rclpy.create_node('cdr_peer', context=ctx)
        executor = SingleThreadedExecutor(context=ctx)
        try:
            assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
            executor.add_node(node)
            executor.add_node(peer)
            pubs = {n: peer.create_publisher(t, n, 10) for n, t in (('image', sensor_msgs.Image),
                                                                      ('depth', sensor_msgs.Image),
                                                                      ('camera_info', sensor_msgs.CameraInfo))}
            good = serialization.serialize_message(image_msg('rgb8', 4, 4))
            odd = image_msg('rgb8', 4, 4)
            odd.encoding = 'yuv422'
            depth = image_msg('16UC1', 4, 4)
            info = sensor_msgs.CameraInfo(height=4, width=4, k=[2.0, 0, 2, 0, 2.0, 2, 0, 0, 1])
            info.header = depth.header = odd.header
            deadline = time.monotonic() + 60

            def spin_until(counted, send):
                while time.monotonic() < deadline and not counted(node.stats.snapshot()['bad_inputs']):
                    if all(p.get_subscription_count() for p in pubs.values()):
                        send()
                    for _ in range(5):
                        executor.spin_once(timeout_sec=0.02)

            spin_until(lambda bad: bad.get('bad_cdr', 0) >= 3,                # bytes: rclpy publishes them as is
                       lambda: pubs['image'].publish(good[:len(good) // 2]))
            spin_until(lambda bad: bad.get('bad_encoding', 0) >= 1,
                       lambda: [pubs[n].publish(m) for n, m in (('depth', depth), ('camera_info', info),
                                                                ('image', odd))])
            bad = node.stats.snapshot()['bad_inputs']
            assert bad.get('bad_cdr', 0) >= 3 and bad.get('bad_encoding', 0) >= 1, bad
            assert set(bad) <= {'bad_cdr', 'bad_encoding', 'missing_depth', 'missing_camera_info'}, bad
        finally:
            executor.shutdown()
            peer.destroy_node()
            node.destroy_node()
            rclpy.shutdown(context=ctx)

"""The colour input on the compressed transport (ros/compressed_input.py): image_transport's contract (decoded
sensor_msgs/Image, the publisher's encoding) from the fallback, and the image_transport_py adapter on both binding
signatures, driven by a stand-in module (image_transport_py is not on PyPI)."""
import sys
import threading
import types
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip('rclpy')
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402

from string_perception.ros import compressed_input as ci  # noqa: E402
from string_perception.codec.image_conversion import ImageEncodingError, array_to_compressed_imgmsg  # noqa: E402


def _rgb():
    y, x = np.mgrid[0:24, 0:32]
    return np.dstack([x * 8, y * 10, (x + y) * 4]).astype(np.uint8)


def _compressed(array, fmt, encoding, stamp=(5, 6)):
    msg = array_to_compressed_imgmsg(array, fmt, encoding=encoding, msg_type=CompressedImage)
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    msg.header.frame_id = 'cam'
    return msg


@pytest.mark.parametrize('encoding, fmt', [('rgb8', 'png'), ('bgr8', 'png'), ('mono8', 'png'), ('16UC1', 'png'),
                                           ('mono16', 'png'), ('rgb8', 'jpeg')])
def test_decoded_as_image_transport_does(encoding, fmt):
    """The publisher's encoding comes back (OpenCV's BGR converted), header copied, a real sensor_msgs/Image."""
    rgb = _rgb()
    src = {'rgb8': rgb, 'bgr8': rgb[:, :, ::-1].copy(), 'mono8': rgb[:, :, 0].copy(),
           '16UC1': rgb[:, :, 0].astype(np.uint16) * 100, 'mono16': rgb[:, :, 1].astype(np.uint16) * 50}[encoding]
    out = ci.decode_compressed_image(_compressed(src, fmt, encoding))
    assert isinstance(out, Image) and out.encoding == encoding
    assert (out.header.stamp.sec, out.header.stamp.nanosec, out.header.frame_id) == (5, 6, 'cam')
    from string_perception.codec.image_conversion import imgmsg_to_array
    got = imgmsg_to_array(out)
    if fmt == 'png':
        np.testing.assert_array_equal(got, src)
    else:
        assert got.shape == src.shape and np.abs(got.astype(int) - src).mean() < 3


def test_format_without_encoding_gives_what_opencv_decoded():
    msg = _compressed(_rgb(), 'png', 'rgb8')
    msg.format = 'png'
    out = ci.decode_compressed_image(msg)
    assert out.encoding == 'bgr8'
    with pytest.raises(ImageEncodingError):
        ci.decode_compressed_image(CompressedImage(format='rgb8; jpeg compressed bgr8', data=b'garbage'))


class FakeNode:
    def __init__(self):
        self.subs, self.guards = [], []

    def get_name(self):
        return 'sp'

    def create_subscription(self, msg_type, topic, callback, qos, **kwargs):
        sub = SimpleNamespace(msg_type=msg_type, topic=topic, callback=callback, qos=qos, kwargs=kwargs)
        self.subs.append(sub)
        return sub

    def create_guard_condition(self, callback, callback_group=None):
        guard = SimpleNamespace(callback=callback, group=callback_group, triggered=0)
        guard.trigger = lambda: setattr(guard, 'triggered', guard.triggered + 1)
        self.guards.append(guard)
        return guard

    def destroy_guard_condition(self, guard):
        self.guards.remove(guard)


def test_fallback_input_subscribes_compressed_and_passes_decoded_images(monkeypatch):
    monkeypatch.setitem(sys.modules, 'image_transport_py', None)        # not importable
    node, got, bad, stamps = FakeNode(), [], [], []
    inp = ci.make_compressed_input(node, '/cam/image', 'qos', 3, callback_group='g', on_bad=bad.append,
                                   on_bad_stamp=stamps.append)
    assert isinstance(inp, ci.CompressedImageInput) and inp.implementation == 'string_perception.ros.compressed_input'
    (sub,) = node.subs
    assert (sub.msg_type, sub.topic, sub.qos, sub.kwargs) == (CompressedImage, '/cam/image/compressed', 'qos',
                                                               {'callback_group': 'g'})
    inp.registerCallback(got.append)
    sub.callback(_compressed(_rgb(), 'png', 'rgb8'), {})
    sub.callback(CompressedImage(format='rgb8; jpeg compressed bgr8', data=b'garbage'), {})
    negative = _compressed(_rgb(), 'png', 'rgb8', stamp=(-3, 0))
    sub.callback(negative, {})
    assert len(got) == 1 and got[0].encoding == 'rgb8' and len(bad) == 1 and len(stamps) == 1


def _fake_module(newer: bool):
    """image_transport_py's two published binding signatures; the subscriber calls back on its own thread."""
    calls = {}

    class Sub:
        def __init__(self):
            self.shut = False

        def shutdown(self):
            self.shut = True

    class ImageTransport:
        def __init__(self, *args, image_transport=''):
            if newer and len(args) != 2 or not newer and len(args) != 1:
                raise TypeError('incompatible constructor arguments')
            calls['init'] = (args, image_transport)

        def subscribe(self, *args):
            if newer and len(args) != 4 or not newer and len(args) != 3:
                raise TypeError('incompatible function arguments')
            calls['subscribe'] = args[:-1]
            calls['callback'] = args[-1]
            calls['sub'] = Sub()
            return calls['sub']

    return types.SimpleNamespace(ImageTransport=ImageTransport), calls


@pytest.mark.parametrize('newer', [False, True], ids=['kilted_signature', 'node_first_signature'])
def test_image_transport_adapter_hands_images_to_the_executor(newer):
    module, calls = _fake_module(newer)
    node, got, stamps = FakeNode(), [], []
    inp = ci.ImageTransportInput(node, '/ns/cam/image', depth=2, callback_group='g', module=module,
                                 on_bad_stamp=stamps.append)
    assert calls['init'][1] == 'compressed'
    assert calls['subscribe'][-2:] == ('/ns/cam/image', 2)               # the node's resolved topic
    if newer:
        assert calls['init'][0][0] is node and calls['subscribe'][0] is node
    inp.registerCallback(got.append)
    (guard,) = node.guards
    assert guard.group == 'g'
    images = [Image(encoding='rgb8') for _ in range(3)]
    for k, im in enumerate(images):
        im.header.stamp.sec = k + 1
    bad = Image(encoding='rgb8')
    bad.header.stamp.sec = -1
    t = threading.Thread(target=lambda: [calls['callback'](m) for m in images + [bad]])
    t.start()
    t.join()
    assert got == [] and guard.triggered == 4            # nothing runs on image_transport's thread
    guard.callback()                                     # the executor: the newest `depth` images, oldest first
    assert [m.header.stamp.sec for m in got] == [3] and len(stamps) == 1   # depth 2: images[2] and bad
    inp.destroy_input()
    assert calls['sub'].shut and node.guards == []

"""codec/frame_decode.decode_image, the one decode of the node and the bag reader: each branch gives the pixels it
was given, and the error kinds the node counts and the bag reader skips on."""
import struct
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from string_perception.codec import compressed_depth as cd
from string_perception.codec import image_conversion as ic
from string_perception.codec.frame_decode import decode_image
from string_perception.codec.image_conversion import ImageEncodingError
from string_perception.runtime.errors import InputError

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8)                       # [H,W,3]
DEPTH = RNG.integers(1, 5000, (6, 8), dtype=np.uint16)                      # [H,W] mm


def _image(array, encoding):
    return ic.array_to_imgmsg(array, encoding, msg_type=ic.ImageData)


def test_raw_images_decode_to_their_pixels_and_encoding():
    rgb, enc = decode_image(_image(RGB, 'rgb8'), 'colour', check_layout=True)
    assert enc == 'rgb8'
    np.testing.assert_array_equal(rgb, RGB)
    depth, enc = decode_image(_image(DEPTH, '16UC1'), 'depth', check_layout=True)
    assert enc == '16UC1' and depth.dtype == np.uint16
    np.testing.assert_array_equal(depth, DEPTH)


def test_copy_false_is_a_read_only_view_over_the_message_buffer():
    msg = _image(DEPTH, '16UC1')
    view, _ = decode_image(msg, 'depth', copy=False)
    copied, _ = decode_image(msg, 'depth')
    assert not view.flags.writeable and copied.flags.writeable
    np.testing.assert_array_equal(view, copied)


def test_a_bridge_is_used_when_given():
    calls = []

    class Bridge:
        def imgmsg_to_cv2(self, msg, desired_encoding):
            calls.append(desired_encoding)
            return np.zeros((1, 1), np.uint16)

    out, enc = decode_image(_image(DEPTH, '16UC1'), 'depth', bridge=Bridge())
    assert calls == ['passthrough'] and enc == '16UC1' and out.shape == (1, 1)


def test_compressed_colour_is_rgb8_and_compressed_depth_is_exact():
    ok, png = cv2.imencode('.png', cv2.cvtColor(RGB, cv2.COLOR_RGB2BGR))
    assert ok
    rgb, enc = decode_image(ic.CompressedImageData(format='png', data=png.tobytes()), 'colour', compressed=True)
    assert enc == 'rgb8'
    np.testing.assert_array_equal(rgb, RGB)
    msg = cd.encode_compressed_depth(DEPTH, '16UC1', msg_type=ic.CompressedImageData)
    depth, enc = decode_image(msg, 'depth', compressed=True)
    assert enc == '16UC1'
    np.testing.assert_array_equal(depth, DEPTH)


def test_a_corrupt_compressed_depth_png_is_an_input_error_before_its_format_is_parsed():
    garbage = SimpleNamespace(format='not a depth format', data=struct.pack('<iff', 0, 0, 0) + b'\x89PNG\r\n\x1a\nxx')
    with pytest.raises(InputError) as e:
        decode_image(garbage, 'depth', compressed=True)
    assert e.value.kind == 'corrupt_image'


def test_layout_errors_keep_their_kinds():
    bad = _image(DEPTH, '16UC1')
    bad.step = 3                                   # shorter than a row
    with pytest.raises(InputError) as e:
        decode_image(bad, 'depth', check_layout=True)
    assert e.value.kind == 'bad_layout'
    with pytest.raises(ImageEncodingError):        # without the header check: the converter's own error
        decode_image(bad, 'depth')
    with pytest.raises(InputError) as e:
        decode_image(_image(DEPTH, '16UC1'), 'colour', check_layout=True)
    assert e.value.kind == 'bad_encoding'
    with pytest.raises(ValueError, match='role'):
        decode_image(_image(DEPTH, '16UC1'), 'infrared')

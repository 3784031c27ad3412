"""compressedDepth and compressed colour against image_transport's conventions (compressed_depth_image_transport
and compressed_image_transport publishers): 12-byte header + PNG, inverse-depth quantisation, ``format`` strings."""
import struct
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from string_perception.codec import compressed_depth as cd
from string_perception.codec import image_conversion as ic
from string_perception.codec.image_conversion import ImageEncodingError

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def _publisher_message(encoding, png_array, a=0.0, b=0.0):
    """What the C++ publisher sends: struct {int32 format = INV_DEPTH (0); float depthParam[2]} then the PNG."""
    ok, png = cv2.imencode('.png', png_array)
    assert ok
    return SimpleNamespace(format=f'{encoding}; compressedDepth png', data=struct.pack('<iff', 0, a, b) + png.tobytes())


def test_header_is_twelve_bytes_then_png():
    msg = cd.encode_compressed_depth(np.full((4, 5), 1500, np.uint16), '16UC1', msg_type=ic.CompressedImageData)
    assert cd.HEADER.size == 12 and msg.format == '16UC1; compressedDepth png'
    assert struct.unpack('<i', msg.data[:4]) == (cd.INV_DEPTH,) and msg.data[12:20] == PNG_SIGNATURE


def test_16uc1_from_a_publisher_decodes_exactly():
    depth = np.arange(12, dtype=np.uint16).reshape(3, 4) * 700                   # 0 .. 7.7 m in mm
    out, enc = cd.decode_compressed_depth(_publisher_message('16UC1', depth))
    assert enc == '16UC1' and out.dtype == np.uint16
    np.testing.assert_array_equal(out, depth)
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(_publisher_message('16UC1', depth)), depth)


def test_32fc1_inverse_depth_known_answers():
    # depth_quantization z0 = 100, depth_max = 10 m: A = 100 * 101 = 10100, B = 1 - 10100 / 10 = -1009;
    # q = A / d + B: 1 m -> 9091, 2.5 m -> 3031, 0 -> invalid (NaN)
    a, b = 10100.0, -1009.0
    q = np.array([[9091, 3031, 0]], np.uint16)
    out, enc = cd.decode_compressed_depth(_publisher_message('32FC1', q, a, b))
    assert enc == '32FC1' and out.dtype == np.float32
    np.testing.assert_allclose(out[0, :2], [1.0, 2.5], rtol=1e-6)
    assert np.isnan(out[0, 2])
    ours = cd.encode_compressed_depth(np.array([[1.0, 2.5, np.nan]], np.float32), '32FC1',
                                      msg_type=ic.CompressedImageData)
    assert struct.unpack('<iff', ours.data[:12]) == (0, a, b)
    np.testing.assert_array_equal(cv2.imdecode(np.frombuffer(ours.data[12:], np.uint8), cv2.IMREAD_UNCHANGED), q)


def test_round_trips():
    rng = np.random.default_rng(0)
    mm = rng.integers(1, 12000, (24, 32)).astype(np.uint16)
    back, _ = cd.decode_compressed_depth(cd.encode_compressed_depth(mm, '16UC1', msg_type=ic.CompressedImageData))
    np.testing.assert_array_equal(back, np.where(mm > 10000, 0, mm))            # beyond depth_max -> invalid
    m = rng.uniform(0.2, 9.0, (24, 32)).astype(np.float32)
    m[0, 0], m[0, 1], m[0, 2] = 0.0, np.inf, 12.0
    back, _ = cd.decode_compressed_depth(cd.encode_compressed_depth(m, '32FC1', msg_type=ic.CompressedImageData))
    assert np.isnan(back[0, :3]).all()
    ok = np.isfinite(back)
    rel = np.abs(back[ok] - m[ok]) / m[ok]
    assert ok.sum() == m.size - 3 and rel.max() < m[ok].max() / 10100 * 1.01      # one quantisation step of 1/d


@pytest.mark.parametrize('fmt, data, needle', [
    ('16UC1; compressedDepth rvl', b'\0' * 40, 'rvl'),
    ('8UC3; compressedDepth png', b'\0' * 40, '8UC3'),
    ('16UC1; compressedDepth png', b'\0' * 12, 'no room'),
    ('16UC1; compressedDepth png', b'\0' * 12 + b'garbage', 'undecodable'),
])
def test_bad_compressed_depth_is_a_typed_error(fmt, data, needle):
    with pytest.raises(ImageEncodingError, match=needle):
        cd.decode_compressed_depth(SimpleNamespace(format=fmt, data=data))


def test_rgb8_png_as_compressed_depth_is_refused():
    msg = _publisher_message('16UC1', np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ImageEncodingError, match='16-bit one-channel'):
        cd.decode_compressed_depth(msg)


@pytest.mark.parametrize('encoding, compression, expected', [
    ('rgb8', 'jpeg', 'rgb8; jpeg compressed bgr8'), ('bgr8', 'jpg', 'bgr8; jpeg compressed bgr8'),
    ('rgba8', 'png', 'rgba8; png compressed bgr8'), ('bgr16', 'png', 'bgr16; png compressed bgr16'),
    ('mono8', 'jpeg', 'mono8; jpeg compressed '), ('mono8', 'png', 'mono8; png compressed '),
    ('mono16', 'png', 'mono16; png compressed '), ('16UC1', 'png', '16UC1; png compressed '),
])
def test_compressed_format_follows_image_transport(encoding, compression, expected):
    assert ic.compressed_format(encoding, compression) == expected


def test_single_channel_and_16_bit_pngs_get_their_own_format():
    depth = (np.arange(20, dtype=np.uint16).reshape(4, 5) * 3001)
    msg = ic.array_to_compressed_imgmsg(depth, 'png', msg_type=ic.CompressedImageData)   # was 'mono8; ... mono8'
    assert msg.format == '16UC1; png compressed '
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(msg), depth)
    mono = ic.array_to_compressed_imgmsg(np.zeros((4, 5), np.uint8), 'png', msg_type=ic.CompressedImageData)
    assert mono.format == 'mono8; png compressed '
    rgba = np.dstack([np.full((4, 5), v, np.uint8) for v in (10, 20, 30, 255)])
    msg = ic.array_to_compressed_imgmsg(rgba, 'png', encoding='rgba8', msg_type=ic.CompressedImageData)
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(msg, 'rgb8'), rgba[..., :3])   # BGR, no alpha
    with pytest.raises(ImageEncodingError, match='png'):
        ic.array_to_compressed_imgmsg(depth, 'jpeg')
    with pytest.raises(ImageEncodingError, match='needs'):
        ic.array_to_compressed_imgmsg(depth, 'png', encoding='mono8')

"""Image / CompressedImage <-> numpy fallback (ROS-free), checked against rosbags-image's decoder."""
import array
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from string_perception.codec import image_conversion as ic
from string_perception.codec.image_conversion import ImageEncodingError

rosbags_image = pytest.importorskip('rosbags.image')

ENCODINGS = ['rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8', 'mono16', '16UC1', '32FC1']
DTYPES = {'rgb8': (np.uint8, 3), 'bgr8': (np.uint8, 3), 'rgba8': (np.uint8, 4), 'bgra8': (np.uint8, 4),
          'mono8': (np.uint8, 1), 'mono16': (np.uint16, 1), '16UC1': (np.uint16, 1), '32FC1': (np.float32, 1)}


def sample(encoding, h=7, w=5, seed=0):
    rng = np.random.default_rng(seed)
    dtype, ch = DTYPES[encoding]
    shape = (h, w) if ch == 1 else (h, w, ch)
    if dtype == np.float32:
        a = rng.uniform(0.2, 4.0, shape).astype(np.float32)
        a.flat[0], a.flat[1], a.flat[2] = np.nan, 0.0, np.inf     # invalid depth values survive
        return a
    return rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)


def raw_msg(arr, encoding, *, pad=0, big=False, data_type=bytes):
    """A plain Image-like object built by hand (independent of array_to_imgmsg)."""
    h, w = arr.shape[:2]
    dt = arr.dtype.newbyteorder('>' if big else '<')
    rows = np.ascontiguousarray(arr, dtype=dt).reshape(h, -1).view(np.uint8)
    if pad:
        rows = np.concatenate([rows, np.full((h, pad), 0xAB, np.uint8)], axis=1)
    data = rows.tobytes()
    if data_type is array.array:
        data = array.array('B', data)
    elif data_type is list:
        data = list(data)
    return SimpleNamespace(height=h, width=w, encoding=encoding, is_bigendian=int(big), step=rows.shape[1],
                           data=data)


@pytest.mark.parametrize('encoding', ENCODINGS)
def test_round_trip_every_encoding(encoding):
    a = sample(encoding)
    msg = ic.array_to_imgmsg(a, encoding)
    assert (msg.height, msg.width, msg.encoding) == (7, 5, encoding)
    assert msg.step == a.shape[1] * a.dtype.itemsize * (a.shape[2] if a.ndim == 3 else 1)
    assert msg.is_bigendian == int(sys.byteorder == 'big')
    back = ic.imgmsg_to_array(msg)
    assert back.dtype == a.dtype and back.shape == a.shape and back.flags.c_contiguous
    np.testing.assert_array_equal(back, a)   # NaN == NaN for array_equal on float via assert_array_equal


@pytest.mark.parametrize('encoding', ENCODINGS)
@pytest.mark.parametrize('big', [False, True])
def test_identical_to_rosbags_image(encoding, big):
    a = sample(encoding, h=12, w=9, seed=1)
    msg = raw_msg(a, encoding, big=big)
    ours = ic.imgmsg_to_array(msg)
    ref = rosbags_image.message_to_cvimage(msg)
    assert ours.dtype == ref.dtype.newbyteorder('=') and ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)
    np.testing.assert_array_equal(ours, a)


@pytest.mark.parametrize('encoding', ENCODINGS)
@pytest.mark.parametrize('pad', [1, 3, 64])
def test_padded_rows(encoding, pad):
    """step > width * bpp: padding is skipped (rosbags-image ignores step, so compare with the tight message)."""
    a = sample(encoding, h=6, w=11, seed=2)
    for big in (False, True):
        padded = raw_msg(a, encoding, pad=pad, big=big)
        tight = raw_msg(a, encoding, big=big)
        assert padded.step > tight.step
        np.testing.assert_array_equal(ic.imgmsg_to_array(padded), rosbags_image.message_to_cvimage(tight))
        np.testing.assert_array_equal(ic.imgmsg_to_array(padded), a)


@pytest.mark.parametrize('data_type', [bytes, array.array, list])
def test_data_field_types(data_type):
    a = sample('16UC1')
    np.testing.assert_array_equal(ic.imgmsg_to_array(raw_msg(a, '16UC1', data_type=data_type, pad=2)), a)


def test_result_owns_its_memory():
    a = sample('rgb8')
    buf = bytearray(raw_msg(a, 'rgb8').data)
    msg = SimpleNamespace(height=7, width=5, encoding='rgb8', is_bigendian=0, step=15, data=buf)
    out = ic.imgmsg_to_array(msg)
    buf[:] = bytes(len(buf))
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize('encoding,pad', [('rgb8', 0), ('rgb8', 3), ('16UC1', 2), ('32FC1', 0), ('mono8', 1)])
def test_no_copy_is_a_view_over_the_message_buffer(encoding, pad):
    a = sample(encoding)
    msg = raw_msg(a, encoding, pad=pad, data_type=array.array)
    view = ic.imgmsg_to_array(msg, copy=False)
    np.testing.assert_array_equal(view, a)                     # same pixels, row padding skipped
    assert view.shape == a.shape and view.dtype == a.dtype
    assert np.shares_memory(view, np.frombuffer(msg.data, np.uint8))
    msg.data[0] ^= 0xFF                                        # a change to the message shows through the view
    assert view.reshape(-1).view(np.uint8)[0] == msg.data[0]


def test_no_copy_still_converts_big_endian_data():
    a = sample('16UC1')
    msg = raw_msg(a, '16UC1', big=True, data_type=array.array)
    out = ic.imgmsg_to_array(msg, copy=False)
    np.testing.assert_array_equal(out, a)
    assert out.dtype.isnative and not np.shares_memory(out, np.frombuffer(msg.data, np.uint8))


def test_rclpy_image_message_round_trip():
    pytest.importorskip('sensor_msgs.msg')
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header
    a = sample('rgb8', h=48, w=64)
    hdr = Header(frame_id='cam')
    msg = ic.array_to_imgmsg(a, 'rgb8', header=hdr)
    assert isinstance(msg, Image) and msg.header.frame_id == 'cam'
    np.testing.assert_array_equal(ic.imgmsg_to_array(msg), a)
    np.testing.assert_array_equal(rosbags_image.message_to_cvimage(msg), a)


def test_generic_and_single_channel_3d_input():
    a = sample('16UC1')
    np.testing.assert_array_equal(ic.imgmsg_to_array(ic.array_to_imgmsg(a[:, :, None], '16UC1')), a)
    b = np.arange(2 * 3 * 2, dtype=np.int16).reshape(2, 3, 2) - 5
    np.testing.assert_array_equal(ic.imgmsg_to_array(ic.array_to_imgmsg(b, '16SC2')), b)
    c = np.linspace(0, 1, 6).reshape(2, 3)
    np.testing.assert_array_equal(ic.imgmsg_to_array(ic.array_to_imgmsg(c, '64FC1')), c)


def test_empty_image():
    msg = SimpleNamespace(height=0, width=0, encoding='rgb8', is_bigendian=0, step=0, data=b'')
    assert ic.imgmsg_to_array(msg).shape == (0, 0, 3)


# ---- garbage in -> typed error ---------------------------------------------------------------------------

def good(**over):
    a = sample('rgb8')
    m = raw_msg(a, 'rgb8')
    for k, v in over.items():
        setattr(m, k, v)
    return m


@pytest.mark.parametrize('msg, match', [
    (good(encoding='yuv422'), 'unsupported image encoding'),
    (good(encoding='bayer_rggb8'), 'unsupported image encoding'),
    (good(encoding=''), 'unsupported image encoding'),
    (good(encoding=None), 'must be a string'),
    (good(step=14), 'step 14 < width'),
    (good(step=16), 'expected step x height'),
    (good(height=8), 'expected step x height'),
    (good(data=b'\x00' * 104), 'data has 104 bytes'),
    (good(data=b''), 'data has 0 bytes'),
    (good(width=-1), 'non-negative integer'),
    (good(step=15.0), 'non-negative integer'),
    (good(data=object()), 'not a byte buffer'),
    (good(data=[1, 2, 300] * 35), 'byte sequence'),
    (SimpleNamespace(encoding='rgb8'), 'no field'),
])
def test_garbage_raises_typed_error(msg, match):
    with pytest.raises(ImageEncodingError, match=match):
        ic.imgmsg_to_array(msg)


def test_error_type_is_a_value_error():
    assert issubclass(ImageEncodingError, ValueError)


@pytest.mark.parametrize('arr, enc, match', [
    (np.zeros((4, 4, 3), np.uint16), 'rgb8', 'needs dtype uint8'),
    (np.zeros((4, 4), np.uint8), 'rgb8', 'has 3 channel'),
    (np.zeros((4, 4, 4), np.uint8), 'rgb8', 'has 3 channel'),
    (np.zeros((4, 4), np.float64), '32FC1', 'needs dtype float32'),
    (np.zeros(4, np.uint8), 'mono8', '2-D or 3-D'),
    ([[1, 2]], 'mono8', 'numpy array'),
    (np.zeros((4, 4), np.uint8), 'jpeg', 'unsupported image encoding'),
])
def test_array_to_imgmsg_rejects_mismatches(arr, enc, match):
    with pytest.raises(ImageEncodingError, match=match):
        ic.array_to_imgmsg(arr, enc)


# ---- compressed --------------------------------------------------------------------------------------

def smooth_rgb(h=32, w=48):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 5, y * 7, (x + y) * 3], axis=-1).astype(np.uint8)


def test_compressed_png_round_trip_is_lossless_and_matches_rosbags():
    rgb = smooth_rgb()
    msg = ic.array_to_compressed_imgmsg(rgb, 'png', encoding='rgb8')
    assert msg.format == 'rgb8; png compressed bgr8'
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(msg, 'rgb8'), rgb)
    bgr = ic.compressed_imgmsg_to_array(msg)            # passthrough: OpenCV's BGR, like cv_bridge
    np.testing.assert_array_equal(bgr, rgb[:, :, ::-1])
    np.testing.assert_array_equal(bgr, rosbags_image.message_to_cvimage(msg))
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(msg, 'mono8'),
                                  rosbags_image.message_to_cvimage(msg, 'mono8'))


def test_compressed_jpeg_round_trip_is_close():
    rgb = smooth_rgb()
    msg = ic.array_to_compressed_imgmsg(rgb, 'jpeg', encoding='rgb8')
    assert 'jpeg' in msg.format
    back = ic.compressed_imgmsg_to_array(msg, 'rgb8')
    assert back.shape == rgb.shape and np.abs(back.astype(int) - rgb).mean() < 4
    np.testing.assert_array_equal(back, rosbags_image.message_to_cvimage(msg, 'rgb8'))


def test_compressed_mono16_png_and_compressed_depth():
    depth = (np.arange(20 * 30, dtype=np.uint16).reshape(20, 30) * 97) % 65535
    msg = ic.array_to_compressed_imgmsg(depth, 'png', encoding='16UC1')
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(msg), depth)
    # image_transport compressedDepth: 12-byte config header, then a 16-bit PNG
    cd = SimpleNamespace(format='16UC1; compressedDepth png', data=b'\x00' * 12 + bytes(msg.data))
    np.testing.assert_array_equal(ic.compressed_imgmsg_to_array(cd), depth)
    bad = SimpleNamespace(format='16UC1; compressedDepth rvl', data=cd.data)
    with pytest.raises(ImageEncodingError, match='rvl'):
        ic.compressed_imgmsg_to_array(bad)


@pytest.mark.parametrize('msg, match', [
    (SimpleNamespace(format='jpeg', data=b''), 'no data'),
    (SimpleNamespace(format='jpeg', data=b'not an image at all'), 'could not decode'),
    (SimpleNamespace(format='jpeg', data=None), 'not a byte buffer'),
])
def test_compressed_garbage_raises_typed_error(msg, match):
    with pytest.raises(ImageEncodingError, match=match):
        ic.compressed_imgmsg_to_array(msg)


def test_compressed_encode_rejects_bad_format():
    with pytest.raises(ImageEncodingError, match='not supported'):
        ic.array_to_compressed_imgmsg(smooth_rgb(), 'webp2')


# ---- the bridge ----------------------------------------------------------------------------------------

def test_bridge_interface_and_selection():
    bridge = ic.make_bridge()
    if ic.real_cv_bridge_available():
        assert type(bridge).__name__ == 'CvBridge'
    else:
        assert isinstance(bridge, ic.FallbackBridge)
    fb = ic.FallbackBridge()
    rgb = smooth_rgb()
    msg = fb.cv2_to_imgmsg(rgb, 'rgb8')
    np.testing.assert_array_equal(fb.imgmsg_to_cv2(msg), rgb)
    np.testing.assert_array_equal(fb.imgmsg_to_cv2(msg, 'bgr8'), rgb[:, :, ::-1])
    assert fb.imgmsg_to_cv2(msg, 'mono8').shape == rgb.shape[:2]
    assert fb.cv2_to_imgmsg(np.zeros((2, 3), np.float32)).encoding == '32FC1'
    assert fb.cv2_to_imgmsg(np.zeros((2, 3, 3), np.uint8)).encoding == '8UC3'
    with pytest.raises(ImageEncodingError, match='not supported'):
        fb.imgmsg_to_cv2(fb.cv2_to_imgmsg(np.zeros((2, 3), np.uint16), '16UC1'), 'rgb8')
    cm = fb.cv2_to_compressed_imgmsg(rgb[:, :, ::-1], 'png')
    np.testing.assert_array_equal(fb.compressed_imgmsg_to_cv2(cm, 'rgb8'), rgb)
    assert ImageEncodingError in ic.CONVERSION_ERRORS


BRIDGES = [pytest.param(ic.FallbackBridge, id='fallback')]
if ic.real_cv_bridge_available():
    from cv_bridge import CvBridge as _RealBridge
    BRIDGES.append(pytest.param(_RealBridge, id='cv_bridge'))


def _png(array):
    import cv2
    ok, enc = cv2.imencode('.png', array)
    assert ok
    return SimpleNamespace(format='png', data=enc.tobytes())


@pytest.fixture(params=BRIDGES)
def bridge(request):
    return request.param()


def test_bridge_compressed_conversions_it_accepts(bridge):
    """What the real cv_bridge makes of a decoded image (taken as bgr8): colour converts, bgr8 is as decoded."""
    bgr = smooth_rgb()[:, :, ::-1].copy()
    np.testing.assert_array_equal(bridge.compressed_imgmsg_to_cv2(_png(bgr), 'rgb8'), bgr[:, :, ::-1])
    bgra = np.dstack([bgr, np.full(bgr.shape[:2], 200, np.uint8)])
    assert bridge.compressed_imgmsg_to_cv2(_png(bgra), 'rgb8').shape == bgr.shape      # alpha dropped
    np.testing.assert_array_equal(bridge.compressed_imgmsg_to_cv2(_png(bgra), 'bgr8'), bgra)   # as decoded
    mono = bgr[:, :, 0].copy()
    np.testing.assert_array_equal(bridge.compressed_imgmsg_to_cv2(_png(mono)), mono)  # passthrough


@pytest.mark.parametrize('case', ['mono_to_rgb8', 'mono16_to_rgb8', 'garbage_to_rgb8'])
def test_bridge_refuses_what_the_real_one_refuses_with_a_type_error(bridge, case):
    """A one-channel or 16-bit compressed image, or undecodable bytes, converted to rgb8: the real cv_bridge
    raises CvBridgeError (a TypeError); the fallback raises BridgeError (a TypeError and in CONVERSION_ERRORS)."""
    bgr = smooth_rgb()
    msg = {'mono_to_rgb8': lambda: _png(bgr[:, :, 0].copy()),
           'mono16_to_rgb8': lambda: _png(bgr[:, :, 0].astype(np.uint16) * 200),
           'garbage_to_rgb8': lambda: SimpleNamespace(format='jpeg', data=b'not an image at all')}[case]()
    with pytest.raises(TypeError) as e:
        bridge.compressed_imgmsg_to_cv2(msg, 'rgb8')
    assert isinstance(e.value, ic.CONVERSION_ERRORS)
    if case == 'garbage_to_rgb8':
        assert bridge.compressed_imgmsg_to_cv2(msg) is None      # passthrough: OpenCV's None, as is


def test_bridge_refuses_bad_arrays_and_encodings_with_a_type_error(bridge):
    with pytest.raises(TypeError):
        bridge.cv2_to_imgmsg([[1, 2], [3, 4]], 'mono8')                  # not a numpy array
    with pytest.raises(TypeError):
        bridge.cv2_to_imgmsg(np.zeros((2, 3), np.uint16), 'rgb8')       # encoding and array disagree
    with pytest.raises(TypeError):
        bridge.cv2_to_compressed_imgmsg([[1]], 'png')
    with pytest.raises(TypeError):
        bridge.cv2_to_compressed_imgmsg(np.zeros((2, 2), np.uint8), 'png', header=None)   # no such argument
    msg = ic.FallbackBridge().cv2_to_imgmsg(np.zeros((2, 3), np.uint8), 'mono8')
    msg.encoding = 'no_such_encoding'
    with pytest.raises(TypeError):
        bridge.imgmsg_to_cv2(msg)


def test_pypi_cv_bridge_port_is_never_taken_for_the_real_one(monkeypatch):
    """A module called cv_bridge without the compiled boost part (the PyPI ROS 1 port) is ignored."""
    import types
    fake = types.ModuleType('cv_bridge')
    fake.CvBridge = object
    monkeypatch.setitem(sys.modules, 'cv_bridge', fake)
    monkeypatch.setitem(sys.modules, 'cv_bridge.boost', None)
    assert not ic.real_cv_bridge_available()
    assert isinstance(ic.make_bridge(), ic.FallbackBridge)

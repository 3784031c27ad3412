"""Header-level input checks of the node (codec/frame_checks.py), without ROS: layout, frame ids, stamps, silence."""
import numpy as np
import pytest

from types import SimpleNamespace

from string_perception.codec.frame_checks import (FRAME_CHECK_KINDS, FRAME_CHECK_WARNINGS, InputWatch, StampGate,
                                                  check_camera_info, check_frame_ids, check_image_layout,
                                                  check_stamp_fields)
from string_perception.codec.image_conversion import ImageData, array_to_imgmsg
from string_perception.runtime.errors import InputError

S = 1_000_000_000


def _img(h=4, w=6, enc='rgb8', step=None, n=None):
    bpp = {'rgb8': 3, 'bgra8': 4, 'mono8': 1, '16UC1': 2, '32FC1': 4, 'yuv422': 2, 'mono16': 2}[enc]
    step = w * bpp if step is None else step
    return ImageData(height=h, width=w, encoding=enc, step=step, data=bytes(step * h if n is None else n))


@pytest.mark.parametrize('msg,role', [
    (_img(), 'colour'), (_img(enc='bgra8'), 'colour'), (_img(enc='mono8'), 'colour'),
    (_img(enc='16UC1'), 'depth'), (_img(enc='32FC1'), 'depth'), (_img(enc='mono16'), 'depth'),
    (_img(step=6 * 3 + 2), 'colour'),                                      # padded rows are fine
])
def test_good_layouts_pass(msg, role):
    check_image_layout(msg, role)


def test_real_messages_pass():
    pytest.importorskip('sensor_msgs')
    check_image_layout(array_to_imgmsg(np.zeros((5, 7, 3), np.uint8), 'rgb8'), 'colour')
    check_image_layout(array_to_imgmsg(np.zeros((5, 7), np.uint16), '16UC1'), 'depth')


@pytest.mark.parametrize('msg,role,kind', [
    (_img(enc='yuv422'), 'colour', 'bad_encoding'),
    (_img(enc='16UC1'), 'colour', 'bad_encoding'),       # depth encoding on the colour topic
    (_img(enc='rgb8'), 'depth', 'bad_encoding'),
    (_img(h=0, w=0), 'colour', 'empty_image'),
    (_img(h=4, w=0, enc='16UC1', step=0), 'depth', 'empty_image'),
    (_img(step=10), 'colour', 'bad_layout'),             # step shorter than a row (6 px x 3 B)
    (_img(n=4 * 18 - 1), 'colour', 'bad_layout'),         # one byte short
    (_img(n=4 * 18 + 5), 'colour', 'bad_layout'),         # trailing bytes
    (_img(enc='16UC1', w=8000, h=8000, n=100), 'depth', 'bad_layout'),   # claims 8000x8000, carries 100 B
])
def test_bad_layouts_are_typed(msg, role, kind):
    with pytest.raises(InputError) as e:
        check_image_layout(msg, role)
    assert e.value.kind == kind and e.value.kind in FRAME_CHECK_KINDS
    assert role in e.value.message


def test_frame_ids():
    check_frame_ids('cam', 'cam')
    check_frame_ids('cam', '')            # a driver that leaves frame_id empty is not refused
    with pytest.raises(InputError, match='registered') as e:
        check_frame_ids('camera_color_optical_frame', 'camera_depth_optical_frame')
    assert e.value.kind == 'frame_id_mismatch'


def test_stamp_gate_zero_future_out_of_order_and_reset():
    gate = StampGate(max_future_s=2.0, reset_jump_s=1.0)
    now = 1000 * S

    def kind(stamp, at=now):
        with pytest.raises(InputError) as e:
            gate.check(stamp, at)
        return e.value.kind

    assert kind(0) == 'zero_stamp'
    assert kind(now + 3 * S) == 'future_stamp'
    assert gate.check(now + S, now) == ()                    # 1 s ahead: within the limit
    assert gate.last_ns == now + S                           # refused frames never moved the reference
    assert kind(now + S) == 'out_of_order_stamp'             # duplicate
    assert kind(now + S - S // 2) == 'out_of_order_stamp'    # 0.5 s back
    assert gate.check(now + S + 1, now) == ()
    assert gate.check(now - 5 * S, now) == ('stamp_reset',)  # a bag loop: accepted, reported
    assert gate.check(now - 5 * S + S // 30, now) == ()      # and the stream goes on from there
    assert gate.check(now + 50 * S, 0) == ()                 # clock at 0 (sim time, no /clock yet): no future check
    gate.max_future_s = 0.0                                  # 0 disables the future check
    assert gate.check(10 ** 6 * S, now) == ()


def test_input_watch_reports_partners_silent_while_colour_keeps_coming():
    w = InputWatch('image', ('depth', 'camera_info'), timeout_s=0.5)
    assert w.missing(10 * S) == []                             # nothing arrived yet: nothing is missing
    w.seen('image', S)
    assert w.missing(S + S // 4) == []                         # partners may lag a little
    w.seen('depth', S + 1)
    assert w.missing(2 * S) == ['camera_info']                 # 1 s of colour without camera_info
    w.seen('image', 2 * S)                                     # depth not seen since this image: its clock starts
    assert w.missing(2 * S + S // 4) == ['camera_info']
    assert w.missing(3 * S) == ['depth', 'camera_info']
    w.seen('camera_info', 3 * S)
    w.seen('depth', 3 * S)
    assert w.missing(60 * S) == []                             # a paused stream is not missing anything
    w.seen('image', 60 * S)                                    # it resumes: the first image starts the clock,
    w.seen('depth', 60 * S + 1000)                             # its partners stop it
    w.seen('camera_info', 60 * S + 2000)
    assert w.missing(60 * S + S) == []
    w.timeout_s = 10.0
    w.seen('image', 61 * S)
    assert w.missing(62 * S) == []


def test_input_watch_a_partner_just_ahead_of_its_colour_image_is_not_missing():
    # a 100 MB colour image lands after its camera_info; the next colour image comes seconds later
    w = InputWatch('image', ('depth', 'camera_info'), timeout_s=0.3)
    w.seen('camera_info', 10 * S)
    w.seen('image', 10 * S + S // 10)                          # 0.1 s after its camera_info: answered
    w.seen('depth', 10 * S + S // 5)
    w.seen('image', 13 * S)                                    # the next frame's colour image, 3 s later: it
    assert w.missing(13 * S) == []                             # starts the clocks (partners silent > 0.3 s)...
    w.seen('depth', 13 * S + 1000)                             # ...and only depth answers
    assert w.missing(13 * S + S // 2) == ['camera_info']


def _kind(fn, *args):
    with pytest.raises(InputError) as e:
        fn(*args)
    assert e.value.kind in FRAME_CHECK_KINDS
    return e.value.kind


def test_big_endian_multi_byte_data_is_refused_never_misread():
    msg = _img(enc='16UC1')
    msg.is_bigendian = 1
    assert _kind(check_image_layout, msg, 'depth') == 'big_endian'
    msg32 = _img(enc='32FC1')
    msg32.is_bigendian = 1
    assert _kind(check_image_layout, msg32, 'depth') == 'big_endian'
    rgb = _img()
    rgb.is_bigendian = 1                                       # one byte per channel: byte order is meaningless
    check_image_layout(rgb, 'colour')
    check_image_layout(_img(enc='16UC1'), 'depth')             # ImageData: is_bigendian 0


def test_camera_info_frame_id_and_empty_frame_ids():
    assert check_frame_ids('cam', 'cam', 'cam') == ()
    assert check_frame_ids('cam', 'cam', '') == ()             # an empty CameraInfo frame id is not compared
    with pytest.raises(InputError, match='camera_info topic') as e:
        check_frame_ids('camera_color_optical_frame', 'camera_color_optical_frame', 'camera_depth_optical_frame')
    assert e.value.kind == 'frame_id_mismatch'
    assert check_frame_ids('', '', '') == ('empty_frame_id',)
    assert _kind(check_frame_ids, '', 'a', 'b') == 'frame_id_mismatch'


@pytest.mark.parametrize('sec, nanosec', [(5, 1_500_000_000), (5, 2 ** 32 - 1), (5, 1_000_000_000), (-5, 0)])
def test_invalid_stamp_fields_are_refused(sec, nanosec):
    assert _kind(check_stamp_fields, SimpleNamespace(sec=sec, nanosec=nanosec), 'colour') == 'bad_stamp'


def test_valid_stamp_fields_pass():
    for sec, nanosec in ((0, 0), (1, 999_999_999), (2 ** 31 - 1, 0)):
        check_stamp_fields(SimpleNamespace(sec=sec, nanosec=nanosec), 'depth')


def _info(model='plumb_bob', d=(0.0,) * 5, h=480, w=640):
    return SimpleNamespace(distortion_model=model, d=list(d), height=h, width=w)


@pytest.mark.parametrize('info, warnings', [
    (_info(), ()),
    (_info(d=(0.1, -0.2, 0.0, 0.001, 0.05)), ()),                                  # pinhole + small correction
    (_info('rational_polynomial', (0.3,) * 14), ()),                               # depthai's 14 coefficients
    (_info('plumb_bob', ()), ()),                                                  # uncalibrated: no D
    (_info('equidistant', (0.1, 0.01, -0.002, 0.0)), ('distortion_ignored',)),     # a fisheye
    (_info('kannala_brandt_x', (0.1,) * 20), ('distortion_ignored',)),             # unknown model, long D
    (_info('equidistant', (0.0,) * 4), ()),                                        # all zero: a pinhole after all
    (_info(h=0, w=0), ('camera_info_no_size',)),
])
def test_camera_info_warnings(info, warnings):
    assert check_camera_info(info) == warnings
    assert set(warnings) <= set(FRAME_CHECK_WARNINGS)


def test_camera_info_nan_distortion_is_refused():
    assert _kind(check_camera_info, _info(d=(0.1, float('nan'), 0.0, 0.0, 0.0))) == 'bad_distortion'
    assert _kind(check_camera_info, _info('equidistant', (float('inf'),) * 4)) == 'bad_distortion'


def test_stamp_gate_warns_a_stamp_ahead_within_the_limit():
    gate = StampGate(max_future_s=2.0, reset_jump_s=0.25, warn_future_s=0.1)
    now = 100 * S
    assert gate.check(now + S // 5, now) == ('stamp_ahead',)       # 0.2 s in the future: processed, said
    assert gate.check(now + S // 5 + S // 30, now + S // 5) == ()  # clocks agree again
    assert gate.check(now + 50 * S, 0) == ()                       # clock at 0: no judgement


def test_input_watch_names_zero_stamped_partners():
    w = InputWatch('image', ('depth', 'camera_info'), timeout_s=0.5)
    w.seen('image', S, 7 * S)
    w.seen('depth', S + 1, 7 * S)
    w.seen('camera_info', S + 2, 0)                               # camera_info stamped 0: cannot be paired
    w.seen('image', 2 * S, 8 * S)
    w.seen('depth', 2 * S + 1, 8 * S)
    w.seen('camera_info', 2 * S + 2, 0)
    assert w.problems(2 * S) == [('zero_stamp_camera_info', 'camera_info')]
    w.seen('camera_info', 3 * S, 9 * S)                           # it stamps again: answered
    assert w.problems(10 * S) == []


def test_input_watch_with_depth_as_primary_reports_missing_colour():
    w = InputWatch('depth', ('image',), timeout_s=0.5)
    for k in range(4):                                             # 2 s of depth, no colour image
        w.seen('depth', k * S // 2, (k + 1) * S)
        w.seen('camera_info', k * S // 2 + 1, (k + 1) * S)        # not a partner of this watch: ignored
    assert w.problems(2 * S) == [('missing_image', 'image')]

"""Peer process for test_node_bad_input.py (``python test/support/reliability_peers.py catalogue ...``).

``catalogue``: waits until the node (remapped to ``<prefix>/{image,depth,camera_info}``) and its outputs are
matched, then for every item of :data:`ITEMS`: publishes the bad frame 3 times (~30 ms apart), then one good
frame, waits for the good frame's Detection3DArray and for a /diagnostics message sent after it, and records
the item's wall-clock window and the node's counters before and after. Writes everything as JSON.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run as a script: the repository's `test` package
from test.support.ros_helpers import _qos, _write_json  # noqa: E402

import numpy as np  # noqa: E402

FRAME_ID = 'camera_color_optical_frame'
H, W = 240, 320
S = 1_000_000_000

# name -> (diagnostics counter that must grow, log needle, whether the bad frame itself is processed)
ITEMS = {
    'unknown_colour_encoding': ('bad_inputs.bad_encoding', 'bad input (bad_encoding)', False),
    'unknown_depth_encoding': ('bad_inputs.bad_encoding', 'bad input (bad_encoding)', False),
    'step_shorter_than_row': ('bad_inputs.bad_layout', 'bad input (bad_layout)', False),
    'data_length_mismatch': ('bad_inputs.bad_layout', 'bad input (bad_layout)', False),
    'size_claims_8k_data_small': ('bad_inputs.bad_layout', 'bad input (bad_layout)', False),
    'rgb_depth_size_mismatch': ('bad_inputs.size_mismatch', 'bad input (size_mismatch)', False),
    'depth_all_nan': ('warnings.no_valid_depth', 'input warning (no_valid_depth)', True),
    'depth_all_zero': ('warnings.no_valid_depth', 'input warning (no_valid_depth)', True),
    'depth_all_inf': ('warnings.no_valid_depth', 'input warning (no_valid_depth)', True),
    'depth_all_negative': ('warnings.no_valid_depth', 'input warning (no_valid_depth)', True),
    'camera_info_missing': ('bad_inputs.missing_camera_info', 'bad input (missing_camera_info)', False),
    'camera_info_k_all_zero': ('bad_inputs.bad_intrinsics', 'bad input (bad_intrinsics)', False),
    'camera_info_for_another_size': ('bad_inputs.bad_intrinsics', 'bad input (bad_intrinsics)', False),
    'zero_size_image': ('bad_inputs.empty_image', 'bad input (empty_image)', False),
    'image_too_large': ('bad_inputs.image_too_large', 'bad input (image_too_large)', False),
    'stamp_zero': ('bad_inputs.zero_stamp', 'bad input (zero_stamp)', False),
    'stamp_out_of_order': ('bad_inputs.out_of_order_stamp', 'bad input (out_of_order_stamp)', False),
    'stamp_far_future': ('bad_inputs.future_stamp', 'bad input (future_stamp)', False),
    'stamp_jump_back_clock_reset': ('warnings.stamp_reset', 'input warning (stamp_reset)', True),
    'colour_depth_frame_ids_differ': ('bad_inputs.frame_id_mismatch', 'bad input (frame_id_mismatch)', False),
    'image_8k': ('processed', None, True),
    # issue 36: well-formed nonsense (runtime/plausibility.py, frame_checks.py)
    'depth_mm_as_32fc1': ('bad_inputs.implausible_depth', 'bad input (implausible_depth)', False),
    'depth_tenth_mm_16uc1': ('bad_inputs.implausible_depth', 'bad input (implausible_depth)', False),
    'depth_16uc1_all_65535': ('bad_inputs.implausible_depth', 'bad input (implausible_depth)', False),
    'depth_16uc1_random': ('bad_inputs.implausible_depth', 'bad input (implausible_depth)', False),
    'intrinsics_fx_2px': ('bad_inputs.implausible_intrinsics', 'bad input (implausible_intrinsics)', False),
    'intrinsics_fx_1e7': ('bad_inputs.implausible_intrinsics', 'bad input (implausible_intrinsics)', False),
    'intrinsics_of_half_size_no_size': ('bad_inputs.implausible_intrinsics', 'bad input (implausible_intrinsics)',
                                        False),
    'camera_info_size_zero': ('warnings.camera_info_no_size', 'input warning (camera_info_no_size)', True),
    'camera_info_binning_ignored': ('bad_inputs.bad_intrinsics', 'bad input (bad_intrinsics)', False),
    'distortion_unknown_long_d': ('warnings.distortion_ignored', 'input warning (distortion_ignored)', True),
    'distortion_fisheye': ('warnings.distortion_ignored', 'input warning (distortion_ignored)', True),
    'distortion_nan': ('bad_inputs.bad_distortion', 'bad input (bad_distortion)', False),
    'camera_info_frame_id_differs': ('bad_inputs.frame_id_mismatch', 'bad input (frame_id_mismatch)', False),
    'frame_ids_empty': ('warnings.empty_frame_id', 'input warning (empty_frame_id)', True),
    'image_1x1': ('bad_inputs.image_too_small', 'bad input (image_too_small)', False),
    'depth_big_endian_flag': ('bad_inputs.big_endian', 'bad input (big_endian)', False),
    'stamp_0_2s_ahead': ('warnings.stamp_ahead', 'input warning (stamp_ahead)', True),
    'stamp_nanosec_1_5e9': ('bad_inputs.bad_stamp', 'bad input (bad_stamp)', False),
    'stamp_nanosec_max': ('bad_inputs.bad_stamp', 'bad input (bad_stamp)', False),
    'stamp_negative_sec': ('bad_inputs.bad_stamp', 'bad input (bad_stamp)', False),
    'colour_missing': ('bad_inputs.missing_image', 'bad input (missing_image)', False),
    'camera_info_stamped_zero': ('bad_inputs.zero_stamp_camera_info', 'bad input (zero_stamp_camera_info)', False),
}
# the node with image_transport:=compressed (colour as sensor_msgs/CompressedImage on <prefix>/image/compressed)
COMPRESSED_ITEMS = {
    'jpeg_corrupted_in_its_middle': ('bad_inputs.corrupt_image', 'bad input (corrupt_image)', False),
    'png_tiny_claiming_50000_squared': ('bad_inputs.image_too_large', 'bad input (image_too_large)', False),
    'png_249_kb_of_16000_squared': ('bad_inputs.image_too_large', 'bad input (image_too_large)', False),
}
# sent as a stream for longer than input_timeout (the node notices a silent or unpairable input over time)
STREAMS = {'camera_info_missing', 'colour_missing', 'camera_info_stamped_zero'}
# checked in the synchroniser callback: every copy is counted (the pixel checks run in the worker, which keeps
# only the newest frame, so there 1..3 of the copies are counted)
HEADER_LEVEL = {'unknown_colour_encoding', 'unknown_depth_encoding', 'step_shorter_than_row', 'data_length_mismatch',
                'size_claims_8k_data_small', 'zero_size_image', 'stamp_zero', 'stamp_out_of_order',
                'stamp_far_future', 'colour_depth_frame_ids_differ', 'distortion_nan', 'camera_info_frame_id_differs',
                'depth_big_endian_flag', 'stamp_nanosec_1_5e9', 'stamp_nanosec_max', 'stamp_negative_sec'}
# refused at the input, per MESSAGE, before the synchroniser (rclpy's Time.from_msg refuses a negative stamp, as the
# real message_filters would): colour, depth and CameraInfo of every copy are counted
PER_MESSAGE = {'stamp_negative_sec'}


def _good_frame():
    from string_perception.scenes import SceneConfig, generate_frame
    f = generate_frame(2_000_000_123, SceneConfig(height=H, width=W))
    return f.rgb, f.depth_mm, f.K


def _k(fx, fy, cx, cy):
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _msgs(rgb, depth, depth_enc, K, info_hw=None):
    from sensor_msgs.msg import CameraInfo

    from string_perception.codec.image_conversion import array_to_imgmsg
    img = array_to_imgmsg(rgb, 'rgb8')
    dep = array_to_imgmsg(depth, depth_enc)
    h, w = info_hw or rgb.shape[:2]
    info = CameraInfo(height=int(h), width=int(w), distortion_model='plumb_bob')
    info.k = [float(v) for v in np.asarray(K, np.float64).reshape(-1)]
    for m in (img, dep, info):
        m.header.frame_id = FRAME_ID
    return img, dep, info


def _png(w: int, h: int, rows: int = 0) -> bytes:
    """A grey PNG whose header says ``w x h``, with ``rows`` rows of pixel data (all of them: a real image)."""
    import struct
    import zlib

    def chunk(ctype, data):
        return struct.pack('>I', len(data)) + ctype + data + struct.pack('>I', zlib.crc32(ctype + data))
    z, row = zlib.compressobj(9), bytes(1 + w)
    idat = b''.join(z.compress(row) for _ in range(rows)) + z.flush()
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 0, 0, 0, 0))
            + chunk(b'IDAT', idat) + chunk(b'IEND', b''))


def compressed_colour(rgb, data: bytes | None = None, fmt: str = 'jpeg'):
    """A CompressedImage of ``rgb`` (JPEG), or carrying ``data`` as is."""
    from sensor_msgs.msg import CompressedImage

    from string_perception.codec.image_conversion import array_to_compressed_imgmsg
    if data is None:
        msg = array_to_compressed_imgmsg(rgb, 'jpeg', encoding='rgb8', msg_type=CompressedImage)
    else:
        msg = CompressedImage(format=f'rgb8; {fmt} compressed bgr8', data=data)
    msg.header.frame_id = FRAME_ID
    return msg


def bad_frames(name: str, good, now_ns: int, last_good_ns: int):
    """[(image or None, depth, camera_info or None, stamp_ns or (sec, nanosec))] x 3 for catalogue item ``name``."""
    rgb, dmm, K = good
    out = []
    for k in range(3):
        stamp = now_ns + k * 30_000_000
        img, dep, info = _msgs(rgb, dmm, '16UC1', K)
        if name == 'unknown_colour_encoding':
            img.encoding, img.step = 'yuv422', W * 2
            img.data = bytes(W * 2 * H)
        elif name == 'unknown_depth_encoding':
            dep = _msgs(rgb, dmm.astype(np.int32), '32SC1', K)[1]
        elif name == 'step_shorter_than_row':
            img.step = W * 3 - 3
        elif name == 'data_length_mismatch':
            img.data = bytes(img.data)[: len(img.data) // 2]
        elif name == 'size_claims_8k_data_small':
            img.height, img.width, img.step = 4320, 7680, 7680 * 3
        elif name == 'rgb_depth_size_mismatch':
            dep = _msgs(rgb, dmm[:, :H], '16UC1', K)[1]                  # 240x240 depth for 320x240 colour
        elif name.startswith('depth_all_'):
            value = {'nan': np.nan, 'zero': 0.0, 'inf': np.inf, 'negative': -1.5}[name[len('depth_all_'):]]
            dep = _msgs(rgb, np.full((H, W), value, np.float32), '32FC1', K)[1]
        elif name == 'camera_info_missing':
            info = None
        elif name == 'camera_info_k_all_zero':
            info.k = [0.0] * 9
        elif name == 'camera_info_for_another_size':
            info.height, info.width = 480, 640
            info.k = [float(v) for v in (np.diag([2.0, 2.0, 1.0]) @ K).reshape(-1)]
        elif name == 'zero_size_image':
            img.height = img.width = img.step = 0
            img.data = b''
        elif name == 'image_too_large':                                  # 20000 px wide: above the side limit
            big = np.zeros((2, 20000, 3), np.uint8)
            img, dep, info = _msgs(big, np.full((2, 20000), 800, np.uint16), '16UC1',
                                   [[100.0, 0, 10000.0], [0, 100.0, 1.0], [0, 0, 1]])
        elif name == 'stamp_zero':
            stamp = 0
        elif name == 'stamp_out_of_order':
            stamp = last_good_ns - 200_000_000 + k * 10_000_000
        elif name == 'stamp_far_future':
            stamp = now_ns + 3600 * S + k
        elif name == 'stamp_jump_back_clock_reset':
            stamp = now_ns - 30 * S + k * 30_000_000
        elif name == 'colour_depth_frame_ids_differ':
            dep.header.frame_id = 'camera_depth_optical_frame'
        elif name == 'depth_mm_as_32fc1':
            dep = _msgs(rgb, dmm.astype(np.float32), '32FC1', K)[1]       # millimetres in a metres encoding
        elif name == 'depth_tenth_mm_16uc1':                             # the scene 1 m further back, in 0.1 mm
            dep = _msgs(rgb, np.where(dmm > 0, np.minimum((dmm.astype(np.int64) + 1000) * 10, 65535), 0)
                        .astype(np.uint16), '16UC1', K)[1]
        elif name == 'depth_16uc1_all_65535':
            dep = _msgs(rgb, np.full((H, W), 65535, np.uint16), '16UC1', K)[1]
        elif name == 'depth_16uc1_random':
            dep = _msgs(rgb, np.random.default_rng(k).integers(0, 65536, (H, W)).astype(np.uint16), '16UC1', K)[1]
        elif name == 'intrinsics_fx_2px':
            info.k = [float(v) for v in _k(2.0, 2.0, K[0, 2], K[1, 2]).reshape(-1)]
        elif name == 'intrinsics_fx_1e7':
            info.k = [float(v) for v in _k(1e7, 1e7, K[0, 2], K[1, 2]).reshape(-1)]
        elif name == 'intrinsics_of_half_size_no_size':                 # K of a 160x120 camera, size 0 in the info
            info.k = [float(v) for v in (np.diag([0.5, 0.5, 1.0]) @ K).reshape(-1)]
            info.height = info.width = 0
        elif name == 'camera_info_size_zero':
            info.height = info.width = 0
        elif name == 'camera_info_binning_ignored':                     # binning_x = 2 on full-size images
            info.binning_x = 2
        elif name == 'distortion_unknown_long_d':
            info.distortion_model, info.d = 'kannala_brandt_x', [0.05] * 20
        elif name == 'distortion_fisheye':
            info.distortion_model, info.d = 'equidistant', [0.12, -0.03, 0.004, -0.001]
        elif name == 'distortion_nan':
            info.d = [0.1, float('nan'), 0.0, 0.0, 0.0]
        elif name == 'camera_info_frame_id_differs':
            info.header.frame_id = 'camera_depth_optical_frame'
        elif name == 'frame_ids_empty':
            for m in (img, dep, info):
                m.header.frame_id = ''
        elif name == 'image_1x1':
            img, dep, info = _msgs(rgb[:1, :1], dmm[:1, :1], '16UC1', _k(1.0, 1.0, 0.5, 0.5))
        elif name == 'depth_big_endian_flag':
            dep.is_bigendian = 1                                         # little-endian bytes, flag set
        elif name == 'stamp_0_2s_ahead':
            stamp = now_ns + 200_000_000 + k * 30_000_000
        elif name == 'stamp_nanosec_1_5e9':
            stamp = (now_ns // S, 1_500_000_000)
        elif name == 'stamp_nanosec_max':
            stamp = (now_ns // S, 2 ** 32 - 1)
        elif name == 'stamp_negative_sec':
            stamp = (-5, k * 30_000_000)
        elif name == 'colour_missing':
            img = None
        elif name == 'camera_info_stamped_zero':
            pass                                                         # the loop stamps camera_info 0
        elif name == 'jpeg_corrupted_in_its_middle':                   # libjpeg decodes it, with a printed warning
            jpg = bytearray(compressed_colour(rgb).data)
            jpg[len(jpg) // 2:len(jpg) // 2 + 512] = np.random.default_rng(k).integers(0, 256, 512, np.uint8).tobytes()
            img = compressed_colour(rgb, bytes(jpg))
        elif name == 'png_tiny_claiming_50000_squared':
            img = compressed_colour(rgb, _png(50000, 50000), 'png')
        elif name == 'png_249_kb_of_16000_squared':
            img = compressed_colour(rgb, _png(16000, 16000, 16000) if k == 0 else out[0][0].data, 'png')
        elif name == 'image_8k':
            big = np.ascontiguousarray(np.broadcast_to(rgb[:1, :1], (4320, 7680, 3)))
            small = np.full((1080, 1920), 700, np.uint16)               # registered depth at a quarter
            Kb = np.diag([24.0, 18.0, 1.0]) @ K
            Kb[0, 2], Kb[1, 2] = 3839.5, 2159.5
            img, dep, info = _msgs(big, small, '16UC1', Kb)
            out.append((img, dep, info, stamp))
            return out                                                   # one is enough (100 MB)
        else:
            raise KeyError(name)
        out.append((img, dep, info, stamp))
    return out


def catalogue(a) -> int:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import CameraInfo, Image
    from vision_msgs.msg import Detection3DArray

    from string_perception.codec.detection_msgs import stamp_to_ns

    rclpy.init()
    node = rclpy.create_node('sp_test_catalogue')
    from sensor_msgs.msg import CompressedImage
    topics = {'image': f'{a.prefix}/image' + ('/compressed' if a.compressed else ''), 'depth': f'{a.prefix}/depth',
              'info': f'{a.prefix}/camera_info'}
    types = {'image': CompressedImage if a.compressed else Image, 'depth': Image, 'info': CameraInfo}
    pubs = {k: node.create_publisher(types[k], t, _qos('reliable', 10)) for k, t in topics.items()}
    catalogue_items = COMPRESSED_ITEMS if a.compressed else ITEMS
    got = {'dets': {}, 'diag': []}                       # stamp_ns -> receive time; [(receive time, values)]
    node.create_subscription(Detection3DArray, f'{a.node_ns}/detections',
                             lambda m: got['dets'].__setitem__(stamp_to_ns(m.header.stamp), time.time()),
                             _qos('reliable', 50))

    def on_diag(msg):
        for st in msg.status:
            if st.name.startswith('string_perception'):
                got['diag'].append((time.time(), {kv.key: kv.value for kv in st.values}))
    node.create_subscription(DiagnosticArray, '/diagnostics', on_diag, _qos('reliable', 10))
    ex = SingleThreadedExecutor()
    ex.add_node(node)

    def spin_until(pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
            if pred():
                return True
        return False

    def publish(img, dep, info, stamp, info_stamp=None):
        if a.compressed and img is not None and not hasattr(img, 'format'):    # a good frame: its JPEG
            img = compressed_colour(good[0])
        for m in (img, dep, info):
            if m is not None:
                st = stamp if m is not info or info_stamp is None else info_stamp
                m.header.stamp.sec, m.header.stamp.nanosec = st if isinstance(st, tuple) else divmod(int(st), S)
        if img is not None:
            pubs['image'].publish(img)
        pubs['depth'].publish(dep)
        if info is not None:
            pubs['info'].publish(info)

    def diag_after(t, timeout=5.0):
        spin_until(lambda: got['diag'] and got['diag'][-1][0] > t + 0.25, timeout)
        return got['diag'][-1][1] if got['diag'] else {}

    def good_frame_through(timeout=15.0):
        stamp = node.get_clock().now().nanoseconds
        publish(*_msgs(*good[:2], '16UC1', good[2]), stamp)
        ok = spin_until(lambda: stamp in got['dets'], timeout)
        return stamp, ok

    out = {'items': [], 'error': None}
    try:
        good = _good_frame()
        ready = spin_until(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values())
                           and node.count_publishers(f'{a.node_ns}/detections') >= 1
                           and node.count_publishers('/diagnostics') >= 1, a.wait)
        if not ready:
            out['error'] = 'node not matched'
            return 2
        spin_until(lambda: False, 0.5)
        last_good, ok = good_frame_through()             # warm start: the first good frame goes through
        out['warm_ok'] = ok
        names = a.items.split(',') if a.items else list(catalogue_items)
        for name in names:
            before = diag_after(time.time())
            t0 = time.time()
            frames = bad_frames(name, good, node.get_clock().now().nanoseconds, last_good)
            if name in STREAMS:     # one input absent or unpairable for two input_timeouts and a margin: the node's
                # InputWatch starts its clock only at a colour image that finds the partner silent for input_timeout
                # (codec/frame_checks.py), then reports after input_timeout more; one timeout was enough only when a
                # loaded machine slowed this loop (a quiet run sent the last frame before the node could report)
                # ... and stops once the node has counted it (diagnostics every 0.1 s), so that the one throttled
                # warning line stays the only one in the item's window
                frames = [frames[0]] * int((2 * a.input_timeout + 0.5) / 0.03)
            key = catalogue_items[name][0]
            for img, dep, info, stamp in frames:
                if name in STREAMS:
                    if got['diag'] and int(got['diag'][-1][1].get(key, 0)) > int(before.get(key, 0)):
                        break
                    stamp = node.get_clock().now().nanoseconds
                publish(img, dep, info, stamp, 0 if name == 'camera_info_stamped_zero' else None)
                spin_until(lambda: False, 0.03)
            bad_stamps = [s for *_, s in frames]
            if catalogue_items[name][2]:     # processed anyway: let it through before the good frame can replace it
                spin_until(lambda: any(s in got['dets'] for s in bad_stamps), 30.0)
                late = max(s for s in bad_stamps if isinstance(s, int))      # the good frame must be newer
                spin_until(lambda: node.get_clock().now().nanoseconds > late + 50_000_000, 5.0)
            spin_until(lambda: False, 0.05)
            last_good, ok = good_frame_through(timeout=30.0 if name == 'image_8k' else 15.0)
            after = diag_after(time.time())
            out['items'].append({'name': name, 't0': t0, 't1': time.time(), 'good_frame_detected': ok,
                                 'bad_frames_detected': sum(s in got['dets'] for s in bad_stamps),
                                 'before': before, 'after': after})
            spin_until(lambda: False, max(0.0, t0 + a.throttle + 0.15 - time.time()))   # next throttle window
        return 0
    finally:
        _write_json(a.out, out)
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='role', required=True)
    cat = sub.add_parser('catalogue')
    cat.add_argument('--prefix', required=True)
    cat.add_argument('--node-ns', default='/string_perception')
    cat.add_argument('--out', required=True)
    cat.add_argument('--items', default='', help='comma-separated subset of ITEMS (default all)')
    cat.add_argument('--throttle', type=float, required=True, help="the node's log_throttle (s)")
    cat.add_argument('--input-timeout', type=float, required=True, help="the node's input_timeout (s)")
    cat.add_argument('--wait', type=float, default=30.0)
    cat.add_argument('--compressed', action='store_true', help='colour as CompressedImage: COMPRESSED_ITEMS')
    a = ap.parse_args(argv)
    return {'catalogue': catalogue}[a.role](a)


if __name__ == '__main__':
    sys.exit(main())

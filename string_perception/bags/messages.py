"""rosbags message objects for what a bag holds: Image, CompressedImage, CameraInfo and the ground-truth
vision_msgs/Detection3DArray. ROS-free (the rosbags typestore's dataclasses); the field layout of a
Detection3DArray is the node's (``codec/detection_msgs.detections_to_msg``), so
``codec.detection_msgs.detections_from_msg`` reads both.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..box_ops import rotation_to_quaternion
from ..codec.compressed_depth import encode_compressed_depth
from ..codec.image_conversion import CompressedImageData, array_to_compressed_imgmsg, array_to_imgmsg
from .typestore import make_typestore

__all__ = ['header', 'image_msg', 'compressed_image_msg', 'compressed_depth_msg', 'camera_info_msg', 'detections_msg',
           'label_info_msg', 'msg_type']

NS = 1_000_000_000


def msg_type(name: str):
    """The rosbags class of ``pkg/msg/Name``."""
    return make_typestore().types[name]


def header(stamp_ns: int, frame_id: str):
    """std_msgs/Header with ``stamp_ns`` (integer nanoseconds)."""
    Time, Header = msg_type('builtin_interfaces/msg/Time'), msg_type('std_msgs/msg/Header')
    return Header(stamp=Time(sec=int(stamp_ns // NS), nanosec=int(stamp_ns % NS)), frame_id=frame_id)


def _uint8(data) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=np.uint8)


def image_msg(array: np.ndarray, encoding: str, stamp_ns: int, frame_id: str):
    """sensor_msgs/Image (tightly packed, little endian) from an array matching ``encoding``."""
    ref = array_to_imgmsg(array, encoding)          # ImageData or sensor_msgs Image: the same checks as the node
    return msg_type('sensor_msgs/msg/Image')(header=header(stamp_ns, frame_id), height=ref.height, width=ref.width,
                                             encoding=ref.encoding, is_bigendian=ref.is_bigendian, step=ref.step,
                                             data=_uint8(ref.data))


def compressed_image_msg(rgb: np.ndarray, fmt: str, stamp_ns: int, frame_id: str):
    """sensor_msgs/CompressedImage of an RGB uint8 [H,W,3] frame (``fmt``: jpeg or png; image_transport's
    ``format`` string). JPEG quality is OpenCV's default (95)."""
    ref = array_to_compressed_imgmsg(rgb, fmt, encoding='rgb8')
    return msg_type('sensor_msgs/msg/CompressedImage')(header=header(stamp_ns, frame_id), format=ref.format,
                                                       data=_uint8(ref.data))


def compressed_depth_msg(depth: np.ndarray, encoding: str, stamp_ns: int, frame_id: str):
    """sensor_msgs/CompressedImage in image_transport's compressedDepth format (``codec/compressed_depth.py``) of a
    uint16 mm (16UC1) or float32 m (32FC1) depth image."""
    ref = encode_compressed_depth(depth, encoding, msg_type=CompressedImageData)
    return msg_type('sensor_msgs/msg/CompressedImage')(header=header(stamp_ns, frame_id), format=ref.format,
                                                       data=_uint8(ref.data))


def camera_info_msg(K: np.ndarray, height: int, width: int, stamp_ns: int, frame_id: str):
    """sensor_msgs/CameraInfo of an undistorted pinhole camera (plumb_bob, zero distortion, P = [K | 0])."""
    K = np.asarray(K, np.float64).reshape(3, 3)
    P = np.zeros((3, 4))
    P[:, :3] = K
    Roi = msg_type('sensor_msgs/msg/RegionOfInterest')
    return msg_type('sensor_msgs/msg/CameraInfo')(
        header=header(stamp_ns, frame_id), height=int(height), width=int(width), distortion_model='plumb_bob',
        d=np.zeros(5), k=K.reshape(-1).copy(), r=np.eye(3).reshape(-1), p=P.reshape(-1), binning_x=0, binning_y=0,
        roi=Roi(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))


def label_info_msg(names: Sequence[str], stamp_ns: int, frame_id: str, threshold: float = 0.0):
    """vision_msgs/LabelInfo: class id i -> ``names[i]`` (what a Detection3DArray with integer class ids needs)."""
    VisionClass = msg_type('vision_msgs/msg/VisionClass')
    return msg_type('vision_msgs/msg/LabelInfo')(
        header=header(stamp_ns, frame_id), class_map=[VisionClass(class_id=i, class_name=str(n))
                                                      for i, n in enumerate(names)], threshold=float(threshold))


def detections_msg(translations: np.ndarray, rotations: np.ndarray, sizes: np.ndarray, class_names: Sequence[str],
                   scores: Sequence[float] | None, stamp_ns: int, frame_id: str) -> Any:
    """vision_msgs/Detection3DArray: one Detection3D per box (``translations[M,3]``, ``rotations[M,3,3]``,
    ``sizes[M,3]``; score 1 when ``scores`` is None, as for ground truth), laid out like the node's output.
    ``class_names[i]`` is written as the class_id: pass integer ids as strings (the node's and vision_msgs'
    convention, with a :func:`label_info_msg`) or names (the bundled recording's older convention)."""
    t = np.asarray(translations, np.float64).reshape(-1, 3)
    R = np.asarray(rotations, np.float64).reshape(-1, 3, 3)
    s = np.asarray(sizes, np.float64).reshape(-1, 3)
    q = rotation_to_quaternion(R).reshape(-1, 4) if len(t) else np.zeros((0, 4))     # [M,4] x, y, z, w
    scores = np.ones(len(t)) if scores is None else np.asarray(scores, np.float64).reshape(-1)
    T = {n: msg_type(f'{p}/msg/{n}') for p, n in (
        ('geometry_msgs', 'Point'), ('geometry_msgs', 'Quaternion'), ('geometry_msgs', 'Pose'),
        ('geometry_msgs', 'Vector3'), ('geometry_msgs', 'PoseWithCovariance'), ('vision_msgs', 'BoundingBox3D'),
        ('vision_msgs', 'ObjectHypothesis'), ('vision_msgs', 'ObjectHypothesisWithPose'),
        ('vision_msgs', 'Detection3D'), ('vision_msgs', 'Detection3DArray'))}
    dets = []
    for i in range(len(t)):
        pose = T['Pose'](position=T['Point'](*(float(v) for v in t[i])),
                         orientation=T['Quaternion'](*(float(v) for v in q[i])))
        hyp = T['ObjectHypothesisWithPose'](
            hypothesis=T['ObjectHypothesis'](class_id=str(class_names[i]), score=float(scores[i])),
            pose=T['PoseWithCovariance'](pose=pose, covariance=np.zeros(36)))
        dets.append(T['Detection3D'](header=header(stamp_ns, frame_id), results=[hyp],
                                     bbox=T['BoundingBox3D'](center=pose, size=T['Vector3'](*(float(v) for v in s[i]))),
                                     id=str(i)))
    return T['Detection3DArray'](header=header(stamp_ns, frame_id), detections=dets)

"""One image message of an RGB-D frame -> (array, encoding): the single decode the node (``ros/node.py``) and the
bag reader (``bags/reader.py``) share.

:func:`decode_image` ``(msg, role)`` with ``role`` 'colour' or 'depth':

- ``compressed=True``: a sensor_msgs/CompressedImage(-like). Colour: jpeg / png decoded to rgb8 (cv2,
  :func:`.image_conversion.compressed_imgmsg_to_array`). Depth: image_transport's compressedDepth; the PNG after
  its 12-byte configuration header is checked from its own header first (:func:`.compressed_header.check_compressed`:
  InputError ``corrupt_image`` / ``image_too_large`` before any byte is decoded), then
  :func:`.compressed_depth.decode_compressed_depth` gives uint16 mm (16UC1) or float32 m (32FC1).
- otherwise a sensor_msgs/Image(-like) (an rclpy message, a rosbags object, ``image_cdr.RawImage``): with
  ``bridge`` (cv_bridge's ``CvBridge`` or ``FallbackBridge``) ``bridge.imgmsg_to_cv2(msg, 'passthrough')``, else
  :func:`.image_conversion.imgmsg_to_array` (``copy=False``: a read-only view over the message's buffer); the
  encoding is the message's. ``check_layout=True`` runs the node's header check
  (:func:`.frame_checks.check_image_layout`: encoding, step, data length) first, for callers that have not.

Errors: ImageEncodingError for what cannot be converted and InputError for a malformed header or compressed data
(both ValueErrors), and whatever the bridge raises (``image_conversion.CONVERSION_ERRORS``). ROS-free, torch-free.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .compressed_depth import HEADER as DEPTH_HEADER, decode_compressed_depth
from .compressed_header import check_compressed
from .frame_checks import check_image_layout
from .image_conversion import compressed_imgmsg_to_array, imgmsg_to_array

__all__ = ['decode_image', 'ROLES']

ROLES = ('colour', 'depth')


def decode_image(msg: Any, role: str, *, compressed: bool = False, bridge: Any = None, copy: bool = True,
                 check_layout: bool = False) -> tuple[np.ndarray, str]:
    """``msg`` of ``role`` ('colour' | 'depth') -> (array, encoding): colour [H,W] or [H,W,C], depth [H,W]
    (uint16 mm or float32 m); compressed colour is always rgb8. See the module docstring for the branches."""
    if role not in ROLES:
        raise ValueError(f'role must be one of {ROLES}, got {role!r}')
    if compressed:
        if role == 'colour':
            return compressed_imgmsg_to_array(msg, 'rgb8'), 'rgb8'
        check_compressed(memoryview(msg.data).cast('B')[DEPTH_HEADER.size:], 'compressedDepth PNG')
        return decode_compressed_depth(msg)
    if check_layout:
        check_image_layout(msg, role)
    if bridge is not None:
        return bridge.imgmsg_to_cv2(msg, 'passthrough'), msg.encoding
    return imgmsg_to_array(msg, copy=copy), msg.encoding

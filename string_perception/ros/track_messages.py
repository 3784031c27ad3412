"""Tracks (``runtime.tracking.Tracks``) -> ROS messages, without a node; and a TF broadcaster for object frames.

- :func:`tracks_to_msg`: vision_msgs/Detection3DArray on ``~/tracks``: one Detection3D per published track, in id
  order: ``id`` = track id, bbox = the filtered centre and size with the track's rotation, one hypothesis (voted
  class as ``~/detections`` writes it: the integer class id as a string, named by ``~/label_info``; last matched
  score).
- :func:`track_velocities_image`: ``~/track_velocities``, a 32FC1 Image of T rows x 4 columns ``(track id, vx,
  vy, vz)``, m/s in the header's frame; row i belongs to ``~/tracks``' detection i (same header). vision_msgs has
  no velocity field, and a float tensor as an Image is this package's convention (see ``~/embedding``); track ids
  are exact in float32 up to 2^24.
- :func:`tracks_to_transforms`: geometry_msgs/TransformStamped per track, parent = the header's frame, child =
  ``<prefix><id>``, stamp = the header's (the image stamp), as DOPE / FoundationPose broadcast object frames.
- :func:`transform_tracks`: tracks into another frame (``p' = R p + t``; velocities rotated), for target_frame.
- :func:`make_transform_broadcaster`: ``tf2_ros.TransformBroadcaster`` when importable, else
  :class:`TfMessagePublisher`, which takes and does what upstream's does (geometry2 ``transform_broadcaster.py``):
  ``(node, qos=None)`` with ``qos`` a QoSProfile or a history depth (default depth 100, reliable, volatile), the
  publisher as ``pub_tf``, and ``sendTransform`` of one TransformStamped, a list or any iterable of them (anything
  else fails when the TFMessage is published, as upstream's does).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from ..box_ops import rotation_to_quaternion
from ..runtime.tracking import Tracks
from ..codec.detection_msgs import copy_header, detection3d, tensor_to_image

__all__ = ['tracks_to_msg', 'track_velocities_image', 'tracks_to_transforms', 'transform_tracks',
           'TfMessagePublisher', 'make_transform_broadcaster', 'TF_TOPIC']

TF_TOPIC = '/tf'
TF_QOS_DEPTH = 100          # tf2_ros.DynamicBroadcasterQoS: reliable, volatile, keep last 100


def tracks_to_msg(tracks: Tracks, header: Any):
    """vision_msgs/Detection3DArray of the published tracks (id = track id)."""
    from vision_msgs.msg import Detection3DArray
    arr = Detection3DArray()
    arr.header = copy_header(header)
    for i in range(len(tracks)):
        det = detection3d(header, str(int(tracks.ids[i])), tracks.translations[i], tracks.quaternions_xyzw[i],
                          tracks.sizes[i], tracks.class_ids[i], tracks.scores[i])
        arr.detections.append(det)
    return arr


def track_velocities_image(tracks: Tracks, header: Any):
    """32FC1 Image, T x 4 rows ``(id, vx, vy, vz)`` (an empty 0 x 4 image when no track is published)."""
    rows = np.concatenate([tracks.ids[:, None].astype(np.float64), tracks.velocities], axis=1)   # [T,4]
    return tensor_to_image(rows.reshape(-1, 4), header)


def tracks_to_transforms(tracks: Tracks, header: Any, prefix: str) -> list:
    """One geometry_msgs/TransformStamped per track: ``header.frame_id`` -> ``<prefix><id>`` at the header stamp."""
    from geometry_msgs.msg import TransformStamped
    out = []
    for i in range(len(tracks)):
        tf = TransformStamped()
        tf.header = copy_header(header)
        tf.child_frame_id = f'{prefix}{int(tracks.ids[i])}'
        tr, q = tf.transform.translation, tf.transform.rotation
        tr.x, tr.y, tr.z = (float(v) for v in tracks.translations[i])
        q.x, q.y, q.z, q.w = (float(v) for v in tracks.quaternions_xyzw[i])
        out.append(tf)
    return out


def transform_tracks(tracks: Tracks, R: np.ndarray, t: np.ndarray) -> Tracks:
    """Tracks expressed in a frame where ``p_new = R @ p + t`` (velocities: ``R @ v``)."""
    R = np.asarray(R, np.float64).reshape(3, 3)
    t = np.asarray(t, np.float64).reshape(3)
    rots = np.einsum('ij,mjk->mik', R, tracks.rotations)                     # [T,3,3]
    quats = rotation_to_quaternion(rots).reshape(-1, 4) if len(tracks) else np.zeros((0, 4))
    return dataclasses.replace(tracks, translations=tracks.translations @ R.T + t,
                               velocities=tracks.velocities @ R.T, rotations=rots, quaternions_xyzw=quats)


class TfMessagePublisher:
    """``tf2_ros.TransformBroadcaster`` for machines without tf2_ros (the same constructor, ``pub_tf`` and
    ``sendTransform``): publishes a tf2_msgs/TFMessage on ``/tf`` with the QoS tf2_ros uses, so tf2 listeners
    receive it."""

    def __init__(self, node, qos: Any = None):
        from rclpy.qos import QoSProfile
        from tf2_msgs.msg import TFMessage
        if qos is None:      # upstream's default: depth 100 (reliable, volatile, keep last: QoSProfile's defaults)
            qos = QoSProfile(depth=TF_QOS_DEPTH)
        self._msg_type = TFMessage
        self.pub_tf = node.create_publisher(TFMessage, TF_TOPIC, qos)

    def sendTransform(self, transform: Any | Sequence[Any]) -> None:  # noqa: N802 (tf2_ros' name)
        """Publish one TransformStamped, a list, or any iterable of them, as one TFMessage."""
        if not isinstance(transform, list):
            transform = list(transform) if hasattr(transform, '__iter__') else [transform]
        self.pub_tf.publish(self._msg_type(transforms=transform))


def make_transform_broadcaster(node):
    """(broadcaster, implementation name): tf2_ros' when importable, else :class:`TfMessagePublisher`; either way
    ``node.destroy_publisher(broadcaster.pub_tf)`` removes it. Raises ImportError when neither tf2_ros nor
    tf2_msgs is importable (scripts/build_interfaces.sh builds it)."""
    try:
        import tf2_ros
    except ImportError:
        return TfMessagePublisher(node), 'tf2_msgs_fallback'
    return tf2_ros.TransformBroadcaster(node), 'tf2_ros'

"""Pipeline results <-> ROS messages, without a node: testable with the message packages alone (no rclpy context).

- :func:`detections_to_msg`: ``Detections`` -> vision_msgs/Detection3DArray (bbox centre pose in metres,
  quaternion x, y, z, w; size = full edge lengths; id = track id or empty; one result per box: class_id = the
  integer class id as a string (vision_msgs' convention), score in [0, 1]);
  :func:`detections_from_msg` is the inverse used by listeners, the demo, the bag tools and the tests; it also
  reads older messages whose class_id is the class name.
- :class:`Detection3DArrayBuilder`: the same message as :func:`detections_to_msg` (also for tracks), built by
  refilling the previous frame's message objects: constructing rosidl messages (nested Python objects and
  imports per Detection3D) was most of the node's publish time; reuse is safe because rclpy serialises a
  message inside ``publish()``.
- :func:`label_info_msg`: vision_msgs/LabelInfo mapping each class id (index into the model's labels) to its
  name, published once (transient local) on ``~/label_info``.
- :func:`tensor_to_image` / :func:`image_to_tensor`: the policy embedding ([D] -> 32FC1 Image, height 1,
  width D) and the token grid ([N, D] -> height N, width D). Tensor-as-image keeps the header, records in bags and
  needs no custom message.
- :func:`camera_info_to_k`: CameraInfo -> (K[3,3], (height, width)).
- :func:`transform_detections`: boxes into another frame (rotation R[3,3], translation t[3]), for target_frame.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from ..box_ops import rotation_to_6d, rotation_to_quaternion, quaternion_to_rotation
from ..runtime.postprocess import Detections
from .image_conversion import array_to_imgmsg, imgmsg_to_array

__all__ = ['copy_header', 'stamp_to_ns', 'detections_to_msg', 'detections_from_msg', 'detection3d', 'class_id_string',
           'Detection3DArrayBuilder',
           'resolve_class', 'label_map', 'label_info_msg',
           'tensor_to_image', 'image_to_tensor', 'camera_info_to_k', 'transform_detections']


def stamp_to_ns(stamp: Any) -> int:
    """builtin_interfaces/Time -> integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def copy_header(header: Any, frame_id: str | None = None):
    """A new std_msgs/Header with ``header``'s stamp and frame_id (or ``frame_id`` when given)."""
    from std_msgs.msg import Header
    out = Header()
    out.stamp.sec, out.stamp.nanosec = int(header.stamp.sec), int(header.stamp.nanosec)
    out.frame_id = header.frame_id if frame_id is None else frame_id
    return out


def detections_to_msg(dets: Detections, header: Any, ids: Sequence[int] | None = None):
    """vision_msgs/Detection3DArray for one frame; every Detection3D carries the same header. ``ids[M]``: the
    track id of each detection (``Tracks.detection_ids``), -1 or None = none yet: ``Detection3D.id`` is then
    empty, as vision_msgs allows (an id names one object across messages, never a rank in the frame)."""
    from vision_msgs.msg import Detection3DArray
    arr = Detection3DArray()
    arr.header = copy_header(header)
    for i in range(len(dets)):
        det_id = str(int(ids[i])) if ids is not None and ids[i] >= 0 else ''
        det = detection3d(header, det_id, dets.translations[i], dets.quaternions_xyzw[i], dets.sizes[i],
                          dets.class_ids[i], dets.scores[i])
        arr.detections.append(det)
    return arr


def detection3d(header: Any, det_id: str, t, q_xyzw, size, class_id: int, score: float):
    """One vision_msgs/Detection3D: box centre ``t[3]``, orientation ``q_xyzw[4]``, ``size[3]``, one hypothesis
    (``class_id`` as :func:`class_id_string`, ``score``) whose pose is the box's."""
    from vision_msgs.msg import Detection3D, ObjectHypothesisWithPose
    det = Detection3D()
    det.results.append(ObjectHypothesisWithPose())
    _fill_detection3d(det, copy_header(header), det_id, t, q_xyzw, size, class_id, score)
    return det


def _fill_detection3d(det: Any, header: Any, det_id: str, t, q_xyzw, size, class_id: int, score: float) -> None:
    """Set every field :func:`detection3d` sets on ``det`` (which has exactly one result)."""
    det.header = header
    det.id = det_id
    c = det.bbox.center
    c.position.x, c.position.y, c.position.z = (float(v) for v in t)
    c.orientation.x, c.orientation.y, c.orientation.z, c.orientation.w = (float(v) for v in q_xyzw)
    det.bbox.size.x, det.bbox.size.y, det.bbox.size.z = (float(v) for v in size)
    hyp = det.results[0]
    hyp.hypothesis.class_id = class_id_string(class_id)
    hyp.hypothesis.score = float(score)
    hyp.pose.pose = c


class Detection3DArrayBuilder:
    """``build(boxes, header, ids=None)`` -> a Detection3DArray equal to ``detections_to_msg(boxes, header, ids)``
    (``boxes``: Detections or Tracks), made of the objects of the previous call (see the module docstring): publish
    or copy the message before the next ``build``. One builder per output topic."""

    def __init__(self) -> None:
        self._arr: Any = None
        self._pool: list[Any] = []        # Detection3D objects, each with one result, reused in order

    def build(self, boxes: Any, header: Any, ids: Sequence[int] | None = None):
        from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose
        if self._arr is None:
            self._arr = Detection3DArray()
        m = len(boxes)
        while len(self._pool) < m:
            det = Detection3D()
            det.results.append(ObjectHypothesisWithPose())
            self._pool.append(det)
        hdr = copy_header(header)        # one Header object shared by the array and every detection
        t, q, size = boxes.translations, boxes.quaternions_xyzw, boxes.sizes
        for i in range(m):
            det_id = str(int(ids[i])) if ids is not None and ids[i] >= 0 else ''
            _fill_detection3d(self._pool[i], hdr, det_id, t[i], q[i], size[i], boxes.class_ids[i], boxes.scores[i])
        self._arr.header = hdr
        self._arr.detections = self._pool[:m]
        return self._arr


def class_id_string(class_id: int) -> str:
    """``ObjectHypothesis.class_id`` as vision_msgs means it: the integer class id as a string, the key of
    LabelInfo's ``class_map`` (which gives the name)."""
    return str(int(class_id))


def resolve_class(class_id: str, labels: Sequence[str] | None = None,
                  id_names: Mapping[int, str] | None = None) -> tuple[int, str]:
    """(index into ``labels`` or -1, class name) of a ``class_id`` from a new message (an integer id, named by
    ``id_names`` = a LabelInfo's map when given, else by position in ``labels``) or an old one (the class name)."""
    labels = list(labels or ())
    text = str(class_id).strip()
    if text.isdigit():
        k = int(text)
        if id_names is not None:
            name = id_names.get(k, text)
            return (labels.index(name) if name in labels else -1), name
        if k < len(labels):
            return k, labels[k]
        return -1, text
    return (labels.index(text) if text in labels else -1), text       # old messages: class_id = class name


def label_map(info: Any) -> dict[int, str]:
    """vision_msgs/LabelInfo -> {class id: class name}."""
    return {int(c.class_id): str(c.class_name) for c in info.class_map}


def detections_from_msg(msg: Any, labels: Sequence[str] | None = None,
                        id_names: Mapping[int, str] | None = None) -> dict[str, Any]:
    """Detection3DArray -> ``{'params': [M,12], 'labels': [M] (index into ``labels``, -1 if unknown),
    'class_names': [M], 'scores': [M], 'quaternions_xyzw': [M,4]}`` (the metrics' prediction format). Reads both
    conventions of ``class_id`` (:func:`resolve_class`): integer ids (``id_names`` from the publisher's LabelInfo,
    else ids index ``labels``) and, from older recordings, class names."""
    params, names, indices, scores, quats = [], [], [], [], []
    for det in msg.detections:
        p, o, s = det.bbox.center.position, det.bbox.center.orientation, det.bbox.size
        q = np.array([o.x, o.y, o.z, o.w], np.float64)
        R = quaternion_to_rotation(q)                                         # [3,3]
        params.append(np.concatenate([[p.x, p.y, p.z], rotation_to_6d(R), [s.x, s.y, s.z]]))   # [12]
        hyp = det.results[0].hypothesis if det.results else None
        k, name = resolve_class(hyp.class_id, labels, id_names) if hyp else (-1, '')
        indices.append(k)
        names.append(name)
        scores.append(hyp.score if hyp else 0.0)
        quats.append(q)
    return {'params': np.array(params, np.float64).reshape(-1, 12),
            'labels': np.array(indices, np.int64),
            'class_names': names, 'scores': np.array(scores, np.float64),
            'quaternions_xyzw': np.array(quats, np.float64).reshape(-1, 4)}


def label_info_msg(labels: Sequence[str], threshold: float, header: Any = None):
    """vision_msgs/LabelInfo (class_id = index into ``labels``), or None if this vision_msgs has no LabelInfo."""
    try:
        from vision_msgs.msg import LabelInfo, VisionClass
    except ImportError:
        return None
    info = LabelInfo()
    if header is not None:
        info.header = copy_header(header)
    info.class_map = [VisionClass(class_id=i, class_name=str(n)) for i, n in enumerate(labels)]
    info.threshold = float(threshold)
    return info


def tensor_to_image(tensor: np.ndarray, header: Any = None):
    """float32 [D] (-> 1 x D) or [N, D] as a 32FC1 sensor_msgs/Image with ``header``."""
    a = np.asarray(tensor, dtype=np.float32)
    if a.ndim == 1:
        a = a[None, :]                                                        # [D] -> [1,D]
    if a.ndim != 2:
        raise ValueError(f'tensor_to_image needs a [D] or [N,D] array, got shape {a.shape}')
    return array_to_imgmsg(np.ascontiguousarray(a), '32FC1', header=None if header is None else copy_header(header))


def image_to_tensor(msg: Any) -> np.ndarray:
    """The inverse of :func:`tensor_to_image`: a 32FC1 Image -> float32 [height, width]."""
    if msg.encoding != '32FC1':
        raise ValueError(f'tensor images are 32FC1, got {msg.encoding!r}')
    return imgmsg_to_array(msg)


def camera_info_to_k(msg: Any) -> tuple[np.ndarray, tuple[int, int] | None]:
    """CameraInfo -> (K float64 [3,3], (height, width) or None when the driver left them 0), for the image the
    camera publishes: a region of interest (``roi`` with a non-zero size) and ``binning_x`` / ``binning_y`` (> 1)
    are applied to K and the size as REP 104 defines them (pixel centres: binned pixel ``u'`` covers source
    pixels ``b u' .. b u' + b - 1``, so ``cx' = (cx - x_offset - (b - 1) / 2) / b``). Not validated here: the
    pipeline checks K (``InputError('bad_intrinsics')``) against the colour image it is used with."""
    K = np.asarray(msg.k, dtype=np.float64).reshape(3, 3).copy()
    h, w = int(msg.height), int(msg.width)
    roi = getattr(msg, 'roi', None)
    if roi is not None and int(roi.width) > 0 and int(roi.height) > 0:
        K[0, 2] -= int(roi.x_offset)
        K[1, 2] -= int(roi.y_offset)
        h, w = int(roi.height), int(roi.width)
    bx, by = max(1, int(getattr(msg, 'binning_x', 0) or 0)), max(1, int(getattr(msg, 'binning_y', 0) or 0))
    if bx > 1 or by > 1:
        K[0, :] = (K[0, :] - [0.0, 0.0, 0.5 * (bx - 1)]) / bx
        K[1, :] = (K[1, :] - [0.0, 0.0, 0.5 * (by - 1)]) / by
        h, w = h // by, w // bx
    return K, ((h, w) if h > 0 and w > 0 else None)


def transform_detections(dets: Detections, R: np.ndarray, t: np.ndarray) -> Detections:
    """Boxes expressed in a frame where ``p_new = R @ p + t`` (R [3,3] rotation, t [3] metres)."""
    R = np.asarray(R, np.float64).reshape(3, 3)
    t = np.asarray(t, np.float64).reshape(3)
    rots = np.einsum('ij,mjk->mik', R, dets.rotations)                        # [M,3,3]
    trans = dets.translations @ R.T + t                                       # [M,3]
    quats = rotation_to_quaternion(rots) if len(dets) else np.zeros((0, 4))   # [M,4]
    return dataclasses.replace(dets, translations=trans, rotations=rots, quaternions_xyzw=quats)

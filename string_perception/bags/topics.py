"""The topic layout of an RGB-D camera driver (as recorded by ``ros2 bag record``) and how a bag's topics are
mapped onto it: the defaults first, else the one topic of the right type whose name says colour / depth / info.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

__all__ = ['CameraTopics', 'DEFAULT_TOPICS', 'IMAGE', 'COMPRESSED', 'CAMERA_INFO', 'DETECTIONS', 'MARKERS',
           'LABEL_INFO', 'resolve_topics']

IMAGE = 'sensor_msgs/msg/Image'
COMPRESSED = 'sensor_msgs/msg/CompressedImage'
CAMERA_INFO = 'sensor_msgs/msg/CameraInfo'
DETECTIONS = 'vision_msgs/msg/Detection3DArray'
MARKERS = 'visualization_msgs/msg/MarkerArray'
LABEL_INFO = 'vision_msgs/msg/LabelInfo'


@dataclass(frozen=True)
class CameraTopics:
    """Topic names; ``image`` may be a raw Image or a CompressedImage topic (``.../compressed``)."""

    image: str = '/camera/color/image_raw'
    depth: str = '/camera/depth/image_raw'
    camera_info: str = '/camera/color/camera_info'
    ground_truth: str = '/ground_truth/detections'

    @property
    def compressed_image(self) -> str:
        return self.image.rstrip('/') + '/compressed'

    @property
    def compressed_depth(self) -> str:
        return self.depth.rstrip('/') + '/compressedDepth'


DEFAULT_TOPICS = CameraTopics()

def _candidates(kind: str, types: Mapping[str, str], allowed: tuple[str, ...]) -> list[str]:
    """Topics of an allowed type that may be ``kind``, best first (one best candidate or none)."""
    cands = [t for t, ty in sorted(types.items()) if ty in allowed]
    if kind == 'depth':
        return [t for t in cands if 'depth' in t.lower()]
    if kind == 'image':
        cands = [t for t in cands if 'depth' not in t.lower()]
        raw = [t for t in cands if types[t] == IMAGE]
        return raw or cands                                # raw colour before compressed when both were recorded
    if kind == 'camera_info' and len(cands) > 1:
        colour = [t for t in cands if any(h in t.lower() for h in ('color', 'colour', 'rgb'))]
        return colour or cands
    return cands


def _pick(kind: str, wanted: str, types: Mapping[str, str], allowed: tuple[str, ...], notes: list[str]) -> str | None:
    if wanted in types:
        if types[wanted] in allowed:
            return wanted
        notes.append(f'{kind} topic {wanted} has type {types[wanted]}, expected {" or ".join(allowed)}')
        return None
    cands = _candidates(kind, types, allowed)
    if len(cands) == 1:
        notes.append(f'{kind} topic {wanted} is not in the bag; using {cands[0]}')
        return cands[0]
    notes.append(f'no {kind} topic: {wanted} is not in the bag and {"none" if not cands else "more than one"} of '
                 f'its {" / ".join(allowed)} topics fits ({", ".join(cands) or "-"}); '
                 f'pass --{kind.replace("_", "-")}-topic')
    return None


def resolve_topics(types: Mapping[str, str],
                   wanted: CameraTopics = DEFAULT_TOPICS) -> tuple[dict[str, str | None], list[str]]:
    """``{topic: msgtype}`` of a bag -> ``({'image', 'depth', 'camera_info', 'ground_truth'}: topic or None,
    notes)``. A wanted raw colour topic falls back to its ``/compressed`` sibling, a raw depth topic to its
    ``/compressedDepth`` sibling (image_transport's compressed_depth_image_transport)."""
    notes: list[str] = []
    image_wanted = wanted.image
    if image_wanted not in types and wanted.compressed_image in types:
        image_wanted = wanted.compressed_image
    depth_wanted = wanted.depth
    if depth_wanted not in types and wanted.compressed_depth in types:
        depth_wanted = wanted.compressed_depth
    out = {
        'image': _pick('image', image_wanted, types, (IMAGE, COMPRESSED), notes),
        'depth': _pick('depth', depth_wanted, types, (IMAGE, COMPRESSED), notes),
        'camera_info': _pick('camera_info', wanted.camera_info, types, (CAMERA_INFO,), notes),
    }
    gt = wanted.ground_truth
    out['ground_truth'] = gt if types.get(gt) == DETECTIONS else None
    labels = gt.rsplit('/', 1)[0] + '/label_info'      # class id -> name of ground truth with integer class ids
    out['label_info'] = labels if out['ground_truth'] and types.get(labels) == LABEL_INFO else None
    if out['ground_truth'] is None:
        notes.append(f'no ground truth ({gt}, {DETECTIONS}) in the bag: metrics are skipped')
    return out, notes

"""The evaluator's output bag: every message of the input bag plus the node's outputs for each evaluated frame
(``/string_perception/detections`` vision_msgs/Detection3DArray and ``/string_perception/markers``
visualization_msgs/MarkerArray, built by the node's own ``detections_to_msg`` and ``MarkerBuilder`` and
serialised with rclpy), so the run replays in RViz like a live one. Needs the ROS message packages (rclpy,
vision_msgs, visualization_msgs): ``NodeOutputs`` raises ImportError with the reason when they are missing.
"""
from __future__ import annotations

import heapq
from pathlib import Path
from types import SimpleNamespace

from ..codec.detection_msgs import detections_to_msg
from ..codec.markers import MarkerBuilder
from ..node_params import defaults
from .reader import open_bag
from .topics import DETECTIONS, MARKERS
from .writer import BagWriter

__all__ = ['NodeOutputs', 'write_output_bag', 'DETECTIONS_TOPIC', 'MARKERS_TOPIC']

DETECTIONS_TOPIC = '/string_perception/detections'   # the node's ~/detections and ~/markers
MARKERS_TOPIC = '/string_perception/markers'


class NodeOutputs:
    """Collects (log_time_ns, topic, msgtype, CDR bytes) of the node's outputs, frame by frame."""

    def __init__(self, marker_alpha: float | None = None):
        try:
            from rclpy.serialization import serialize_message    # rclpy: only for --output-bag
        except ImportError as e:
            raise ImportError(f'--output-bag needs the ROS 2 message packages (rclpy, vision_msgs, '
                              f'visualization_msgs): {e}') from e
        self._serialize, self._to_msg = serialize_message, detections_to_msg
        self._markers = MarkerBuilder(defaults()['marker_alpha'] if marker_alpha is None else marker_alpha)
        self.messages: list[tuple[int, str, str, bytes]] = []

    def add(self, detections, stamp_ns: int, frame_id: str, log_time_ns: int, ids=None) -> None:
        """One frame's published detections (``ids``: their track ids, -1 = none, as the node sets them)."""
        header = SimpleNamespace(stamp=SimpleNamespace(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000),
                                 frame_id=frame_id)
        self.messages.append((log_time_ns, DETECTIONS_TOPIC, DETECTIONS,
                              self._serialize(self._to_msg(detections, header, ids))))
        self.messages.append((log_time_ns, MARKERS_TOPIC, MARKERS, self._serialize(self._markers.build(detections,
                                                                                                        header))))


def write_output_bag(src: str | Path, dst: str | Path, added: list[tuple[int, str, str, bytes]],
                     storage: str) -> Path:
    """Copy ``src`` into the new bag ``dst`` (same message definitions) with ``added`` merged in by log time."""
    reader = open_bag(src)
    try:
        with BagWriter(dst, storage=storage) as bag:
            for conn in reader.connections:
                bag.connection(conn.topic, conn.msgtype, msgdef=conn.msgdef.data or None, rihs01=conn.digest or None,
                               offered_qos=getattr(conn.ext, 'offered_qos_profiles', ()))
            copied = ((t, conn.topic, conn.msgtype, raw) for conn, t, raw in reader.messages())
            for t, topic, msgtype, raw in heapq.merge(copied, sorted(added, key=lambda m: m[0]), key=lambda m: m[0]):
                bag.write_cdr(topic, msgtype, raw, t)
    finally:
        reader.close()
    return Path(dst)

"""Detections -> visualization_msgs/MarkerArray for RViz, without flicker.

Per box ``i`` (score order): a CUBE (namespace ``boxes``, id ``i``: pose, size, class colour, alpha) and a
TEXT_VIEW_FACING label (namespace ``labels``, id ``i``: "<class> <score>", above the box). Given tracks
(``runtime.tracking.Tracks``, which have ``ids``) instead of detections, the colour is the track's
(:func:`track_colour`, stable per id) and the label reads "<class> #<id>". Ids are stable
slots, so every frame REPLACES the previous markers by (namespace, id) with ADD/MODIFY, and the slots used by
the previous frame but not this one get a DELETE in the same array: RViz never shows an empty frame in between
(no DELETEALL per frame) and nothing lingers. Every marker has ``lifetime_s`` (parameter ``marker_lifetime``,
1 s by default; 0 = kept until replaced/deleted), so the boxes vanish from RViz when the input stops instead of
staying forever; on deactivate the node also sends one DELETEALL (:meth:`MarkerBuilder.clear`).

The label sits above the box along the "up" axis of the header's frame (:func:`up_axis`): ``-y`` in a camera
optical frame (REP 103: x right, y down, z forward), ``+z`` in any other frame (REP 103 body / world frames are
z-up), e.g. a ``target_frame`` such as ``base_link``.
"""
from __future__ import annotations

import colorsys
from typing import Any, Sequence

import numpy as np

from ..runtime.postprocess import Detections
from .detection_msgs import copy_header

__all__ = ['class_colour', 'track_colour', 'up_axis', 'MarkerBuilder', 'BOX_NS', 'TEXT_NS']

BOX_NS, TEXT_NS = 'boxes', 'labels'
TEXT_HEIGHT_M = 0.03
OPTICAL_UP, Z_UP = np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, 1.0])


def up_axis(frame_id: str, image_frame_id: str | None = None) -> np.ndarray:
    """Unit "up" vector of ``frame_id``: ``-y`` for a camera optical frame (the colour image's own frame
    ``image_frame_id``, or a name containing ``optical`` as in ``camera_color_optical_frame``), else ``+z``."""
    optical = frame_id == image_frame_id or 'optical' in frame_id.lower()
    return (OPTICAL_UP if optical else Z_UP).copy()


def class_colour(class_id: int) -> tuple[float, float, float]:
    """A distinct, deterministic RGB colour (0..1) per class index (golden-ratio hue steps)."""
    hue = (0.08 + 0.618033988749895 * int(class_id)) % 1.0
    return colorsys.hsv_to_rgb(hue, 0.85, 0.95)


def track_colour(track_id: int) -> tuple[float, float, float]:
    """A deterministic RGB colour (0..1) per track id; neighbouring ids differ (golden-ratio hue steps)."""
    hue = (0.33 + 0.618033988749895 * int(track_id)) % 1.0
    return colorsys.hsv_to_rgb(hue, 0.75, 1.0)


def _colour(dets: Any, i: int) -> tuple[float, float, float]:
    ids = getattr(dets, 'ids', None)
    return track_colour(int(ids[i])) if ids is not None else class_colour(int(dets.class_ids[i]))


class MarkerBuilder:
    """Builds each frame's MarkerArray and remembers how many slots the last one used (one per output topic)."""

    def __init__(self, alpha: float = 0.4, lifetime_s: float = 1.0):
        self.alpha = float(alpha)
        self.lifetime_s = float(lifetime_s)
        self._last_count = 0

    def build(self, dets: Detections, header: Any, image_frame_id: str | None = None):
        """MarkerArray: ADD for this frame's boxes (``Detections`` or ``Tracks``), DELETE for the previous frame's
        extra slots. ``image_frame_id``: the colour image's frame when ``header`` names another (target_frame);
        None = ``header`` is the image's (optical) frame."""
        from visualization_msgs.msg import Marker, MarkerArray
        out = MarkerArray()
        n = len(dets)
        up = up_axis(header.frame_id, header.frame_id if image_frame_id is None else image_frame_id)
        for i in range(n):
            out.markers.append(self._cube(Marker, dets, i, header))
            out.markers.append(self._text(Marker, dets, i, header, up))
        for i in range(n, self._last_count):
            for ns in (BOX_NS, TEXT_NS):
                m = Marker(ns=ns, id=i, action=Marker.DELETE)
                m.header = copy_header(header)
                out.markers.append(m)
        self._last_count = n
        return out

    def clear(self, header: Any):
        """One DELETEALL marker (on deactivate), after which the next frame starts from empty."""
        from visualization_msgs.msg import Marker, MarkerArray
        m = Marker(action=Marker.DELETEALL)
        m.header = copy_header(header)
        self._last_count = 0
        return MarkerArray(markers=[m])

    def _stamp(self, m, header: Any) -> None:
        m.header = copy_header(header)
        m.lifetime.sec, m.lifetime.nanosec = divmod(int(round(self.lifetime_s * 1e9)), 1_000_000_000)

    def _pose(self, m, dets: Detections, i: int) -> None:
        p = m.pose
        p.position.x, p.position.y, p.position.z = (float(v) for v in dets.translations[i])
        q = dets.quaternions_xyzw[i]
        p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = (float(v) for v in q)

    def _cube(self, Marker, dets: Detections, i: int, header: Any):
        m = Marker(ns=BOX_NS, id=i, type=Marker.CUBE, action=Marker.ADD)
        self._stamp(m, header)
        self._pose(m, dets, i)
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in dets.sizes[i])
        m.color.r, m.color.g, m.color.b = _colour(dets, i)
        m.color.a = self.alpha
        return m

    def _text(self, Marker, dets: Detections, i: int, header: Any, up: np.ndarray):
        m = Marker(ns=TEXT_NS, id=i, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        self._stamp(m, header)
        # above the box along the frame's "up", by half its largest extent and 2 cm
        p = np.asarray(dets.translations[i], np.float64) + (0.5 * float(max(dets.sizes[i])) + 0.02) * up
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in p)
        m.pose.orientation.w = 1.0
        m.scale.z = TEXT_HEIGHT_M
        m.color.r, m.color.g, m.color.b = _colour(dets, i)
        m.color.a = 1.0
        ids = getattr(dets, 'ids', None)
        m.text = f'{dets.class_names[i]} #{int(ids[i])}' if ids is not None else \
            f'{dets.class_names[i]} {float(dets.scores[i]):.2f}'
        return m


def marker_slots(markers: Sequence[Any]) -> dict[tuple[str, int], int]:
    """(namespace, id) -> action of a MarkerArray's markers (for checks in tests and listeners)."""
    return {(m.ns, m.id): m.action for m in markers}

"""Detections -> visualization_msgs/MarkerArray for RViz, without flicker.

Per box ``i`` (score order): a CUBE (namespace ``boxes``, id ``i``: pose, size, class colour, alpha) and a
TEXT_VIEW_FACING label (namespace ``labels``, id ``i``: "<class> <score>", above the box). Given tracks
(``runtime.tracking.Tracks``, which have ``ids``) instead of detections, the colour is the track's
(:func:`track_colour`, stable per id) and the label reads "<class> #<id>". Ids are stable
slots, so every frame REPLACES the previous markers by (namespace, id) with ADD/MODIFY, and the slots used by
the previous frame but not this one get a DELETE in the same array: RViz never shows an empty frame in between
(no DELETEALL per frame) and nothing lingers. Lifetime is 0 (kept until replaced/deleted).
"""
from __future__ import annotations

import colorsys
from typing import Any, Sequence

from ..runtime.postprocess import Detections
from .messages import copy_header

__all__ = ['class_colour', 'track_colour', 'MarkerBuilder', 'BOX_NS', 'TEXT_NS']

BOX_NS, TEXT_NS = 'boxes', 'labels'
TEXT_HEIGHT_M = 0.03


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

    def __init__(self, alpha: float = 0.4):
        self.alpha = float(alpha)
        self._last_count = 0

    def build(self, dets: Detections, header: Any):
        """MarkerArray: ADD for this frame's boxes (``Detections`` or ``Tracks``), DELETE for the previous frame's
        extra slots."""
        from visualization_msgs.msg import Marker, MarkerArray
        out = MarkerArray()
        n = len(dets)
        for i in range(n):
            out.markers.append(self._cube(Marker, dets, i, header))
            out.markers.append(self._text(Marker, dets, i, header))
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

    def _pose(self, m, dets: Detections, i: int) -> None:
        p = m.pose
        p.position.x, p.position.y, p.position.z = (float(v) for v in dets.translations[i])
        q = dets.quaternions_xyzw[i]
        p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = (float(v) for v in q)

    def _cube(self, Marker, dets: Detections, i: int, header: Any):
        m = Marker(ns=BOX_NS, id=i, type=Marker.CUBE, action=Marker.ADD)
        m.header = copy_header(header)
        self._pose(m, dets, i)
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in dets.sizes[i])
        m.color.r, m.color.g, m.color.b = _colour(dets, i)
        m.color.a = self.alpha
        return m

    def _text(self, Marker, dets: Detections, i: int, header: Any):
        m = Marker(ns=TEXT_NS, id=i, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        m.header = copy_header(header)
        # above the box in the camera's "up" (-y in an optical frame), by half its largest extent
        t = dets.translations[i]
        m.pose.position.x, m.pose.position.y = float(t[0]), float(t[1] - 0.5 * float(max(dets.sizes[i])) - 0.02)
        m.pose.position.z = float(t[2])
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

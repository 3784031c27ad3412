"""The node's outputs in ``target_frame``: one processed frame's boxes and tracks moved out of the camera frame.

:class:`TargetFrame` is the node's use of :class:`tf_lookup.TfLookup`: :meth:`TargetFrame.set_live` creates the
lookup (its listener node and thread) the first time ``target_frame`` is set and passes ``tf_timeout`` on;
:meth:`TargetFrame.move` looks the transform up at the image stamp (timed as the ``tf`` stage) and returns the
result with its detections and tracks transformed (``p' = R p + t``) and a copy of the header naming
``target_frame``, or None when the buffer has no transform (the caller drops the frame, ``drops.tf``; the reason
is in :attr:`TargetFrame.last_error`). An empty ``target_frame``, or the image's own frame, leaves the result as
it is. :meth:`TargetFrame.close` (cleanup) stops the listener.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..runtime.pipeline import PipelineResult
from .latency import FrameTiming
from ..codec.detection_msgs import copy_header, transform_detections
from .tf_lookup import TfLookup
from .track_messages import transform_tracks

__all__ = ['TargetFrame']


class TargetFrame:
    """``TargetFrame(node)``; ``tf``: the :class:`TfLookup` once ``target_frame`` has been set, else None."""

    def __init__(self, node) -> None:
        self._node = node
        self.tf: TfLookup | None = None

    def set_live(self, cfg: Mapping[str, Any]) -> None:
        """``target_frame`` (params.validate accepts a non-empty one only where tf2_ros works), ``tf_timeout``."""
        if cfg['target_frame'] and self.tf is None:
            self.tf = TfLookup(self._node)
        if self.tf is not None:
            self.tf.wait_s = cfg['tf_timeout']

    @property
    def last_error(self) -> str:
        """Why the latest lookup failed."""
        return self.tf.last_error if self.tf is not None else ''

    def move(self, target: str, result: PipelineResult, header: Any,
             timing: FrameTiming) -> tuple[PipelineResult, Any] | None:
        """``(result, header)`` in ``target`` (unchanged when ``target`` is empty or ``header``'s frame), or None
        when no transform ``header.frame_id -> target`` at ``header.stamp`` is in the buffer (never waited for
        beyond ``tf_timeout``)."""
        if not target or target == header.frame_id:
            return result, header
        with timing.stage('tf'):
            moved = self.tf.lookup(target, header.frame_id, header.stamp)
        if moved is None:
            return None
        R, t = moved
        tracks = None if result.tracks is None else transform_tracks(result.tracks, R, t)
        return (dataclasses.replace(result, detections=transform_detections(result.detections, R, t), tracks=tracks),
                copy_header(header, target))

    def close(self) -> None:
        """Cleanup: stop the listener thread and its node (a new one is made at the next configure)."""
        if self.tf is not None:
            self.tf.close()
            self.tf = None

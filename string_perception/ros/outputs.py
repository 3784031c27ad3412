"""What the perception node publishes, and the publishers it publishes on (``node.py`` builds one per node).

:class:`NodeOutputs` owns every output of a processed frame and nothing of the inputs:

- :meth:`NodeOutputs.open` (configure) creates the publishers, all with the ``output_qos_*`` profile:
  ``~/detections`` and ``~/tracks`` (vision_msgs/Detection3DArray), ``~/markers`` (visualization_msgs/MarkerArray),
  ``~/embedding`` (32FC1, 1 x D), ``~/tokens`` (32FC1, N x D), ``~/debug_image`` (rgb8), ``~/track_velocities``
  (32FC1, T x 4); :meth:`NodeOutputs.publish_label_info` latches ``~/label_info`` (reliable, depth 1, transient
  local; created on first use, so a vision_msgs without LabelInfo has none);
- :meth:`NodeOutputs.set_live` takes the live output parameters (marker opacity and lifetime; ``publish_tf``
  creates the broadcaster of the tracks' object frames on /tf: tf2_ros', else the tf2_msgs fallback);
- :meth:`NodeOutputs.debug_image` draws the camera-frame boxes on the colour image (before any ``target_frame``
  transform); :meth:`NodeOutputs.publish` publishes one frame whose detections and tracks are already in the
  header's frame, in this order: detections (then the ``stamp_to_detections`` latency mark), markers, tracks +
  track velocities + /tf, embedding, tokens, debug image, each timed as a ``publish_<output>`` stage;
  optional outputs nobody subscribes to are not built (``skip_unsubscribed_outputs``, counted as skipped in the
  latency budget); with ``reuse_output_messages`` the detections / tracks messages are refilled, not rebuilt;
- :meth:`NodeOutputs.clear_markers` (deactivate) publishes one DELETEALL; :meth:`NodeOutputs.close` (cleanup)
  destroys every publisher and the broadcaster.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from rclpy.qos import DurabilityPolicy
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from ..box_ops import Box3D
from ..runtime.draw import draw_boxes
from ..runtime.pipeline import PipelineResult
from ..runtime.postprocess import Detections
from ..runtime.preprocess import to_rgb
from .latency import OUTPUTS, FrameTiming, LatencyBudget
from ..qos import qos_profile
from ..codec.markers import MarkerBuilder
from ..codec.detection_msgs import Detection3DArrayBuilder, copy_header, detections_to_msg, label_info_msg, tensor_to_image
from .track_messages import make_transform_broadcaster, track_velocities_image, tracks_to_msg, tracks_to_transforms

__all__ = ['NodeOutputs', 'OUTPUT_TOPICS']

# publisher key -> topic, in the order they are created (message types: NodeOutputs.open)
OUTPUT_TOPICS = {key: f'~/{key}' for key in (*OUTPUTS, 'tracks', 'track_velocities')}


class NodeOutputs:
    """``NodeOutputs(node, bridge)``: the outputs of ``node`` (an rclpy node); ``bridge`` encodes the debug image
    (``image_conversion.make_bridge()``). ``publishers``: key -> publisher while configured (:data:`OUTPUT_TOPICS`'
    keys, plus ``label_info`` once latched)."""

    def __init__(self, node, bridge) -> None:
        self._node = node
        self.bridge = bridge
        self.markers = MarkerBuilder()
        self.publishers: dict[str, Any] = {}
        self.tf_broadcaster = None                  # publish_tf: tf2_ros' or the tf2_msgs fallback
        self._budget = LatencyBudget()
        self._det_msgs, self._track_msgs = Detection3DArrayBuilder(), Detection3DArrayBuilder()  # reused messages

    def open(self, cfg: Mapping[str, Any], budget: LatencyBudget) -> None:
        """Configure: create the output publishers; ``budget`` counts the outputs skipped for want of readers."""
        # vision_msgs comes from scripts/build_interfaces.sh, not PyPI: needed from configure on, not to import this
        from vision_msgs.msg import Detection3DArray
        types = {'detections': Detection3DArray, 'markers': MarkerArray, 'tracks': Detection3DArray}
        out_qos = qos_profile(cfg['output_qos_reliability'], cfg['output_qos_depth'])
        self.publishers = {key: self._node.create_publisher(types.get(key, Image), topic, out_qos)
                           for key, topic in OUTPUT_TOPICS.items()}
        self._budget = budget

    def set_live(self, cfg: Mapping[str, Any]) -> None:
        """The live output parameters; ValueError when ``publish_tf`` has no broadcaster to use."""
        self.markers.alpha, self.markers.lifetime_s = cfg['marker_alpha'], cfg['marker_lifetime']
        if cfg['publish_tf'] and self.tf_broadcaster is None:
            try:
                self.tf_broadcaster, impl = make_transform_broadcaster(self._node)
            except ImportError as e:
                raise ValueError(f'publish_tf needs tf2_ros or tf2_msgs (scripts/build_interfaces.sh): {e}') from None
            self._node.get_logger().info(f'object frames on /tf via {impl}')

    def publish_label_info(self, labels: Sequence[str], score_threshold: float) -> None:
        """``~/label_info`` (transient local): the class names and the effective ``score_threshold``."""
        info = label_info_msg(labels, score_threshold)
        if info is None:
            return
        if 'label_info' not in self.publishers:
            latched = qos_profile('reliable', 1, DurabilityPolicy.TRANSIENT_LOCAL)
            self.publishers['label_info'] = self._node.create_publisher(type(info), '~/label_info', latched)
        info.header.stamp = self._node.get_clock().now().to_msg()
        self.publishers['label_info'].publish(info)

    def wanted(self, output: str, cfg: Mapping[str, Any]) -> bool:
        """Build this optional output? Not while nobody subscribes (``skip_unsubscribed_outputs``)."""
        if not cfg['skip_unsubscribed_outputs'] or self.publishers[output].get_subscription_count() > 0:
            return True
        self._budget.skipped(output)
        return False

    def debug_image(self, rgb: np.ndarray, enc: str, K: np.ndarray, dets: Detections, labels: Sequence[str],
                    cfg: Mapping[str, Any], timing: FrameTiming) -> np.ndarray | None:
        """rgb8 [h,w,3] with the camera-frame boxes projected through ``K``, or None when not published."""
        if not (cfg['publish_debug_image'] and self.wanted('debug_image', cfg)):
            return None
        with timing.stage('publish_debug_image'):
            return draw_boxes(to_rgb(rgb, enc), K, Box3D(dets.translations, dets.rotations, dets.sizes),
                              dets.class_ids, dets.scores, list(labels))

    def publish(self, result: PipelineResult, header: Any, cfg: Mapping[str, Any], timing: FrameTiming, *,
                image_header: Any, debug: np.ndarray | None = None) -> float:
        """Publish one frame: ``result``'s detections / tracks in ``header``'s frame (``header``: the colour
        image's, or a copy naming ``target_frame``); ``image_header``: the colour image's own (markers keep label
        offsets in its frame, the debug image carries it). Returns the ``stamp_to_detections`` latency (ms)."""
        pubs, dets, tracks = self.publishers, result.detections, result.tracks
        reuse = cfg['reuse_output_messages']
        with timing.stage('publish_detections'):
            ids = None if tracks is None else tracks.detection_ids
            pubs['detections'].publish(self._det_msgs.build(dets, header, ids) if reuse
                                       else detections_to_msg(dets, header, ids))
        latency_ms = timing.mark('stamp_to_detections')
        if cfg['publish_markers'] and self.wanted('markers', cfg):
            with timing.stage('publish_markers'):
                pubs['markers'].publish(self.markers.build(dets if tracks is None else tracks, header,
                                                           image_header.frame_id))
        if tracks is not None:
            with timing.stage('publish_tracks'):
                pubs['tracks'].publish(self._track_msgs.build(tracks, header, tracks.ids) if reuse
                                       else tracks_to_msg(tracks, header))
                pubs['track_velocities'].publish(track_velocities_image(tracks, header))
                if cfg['publish_tf'] and self.tf_broadcaster is not None and len(tracks):
                    self.tf_broadcaster.sendTransform(tracks_to_transforms(tracks, header, cfg['tf_prefix']))
        if cfg['publish_embedding'] and self.wanted('embedding', cfg):
            with timing.stage('publish_embedding'):
                pubs['embedding'].publish(tensor_to_image(result.embedding, header))
        if cfg['publish_tokens'] and result.tokens is not None and self.wanted('tokens', cfg):   # [N,D] -> N x D
            with timing.stage('publish_tokens'):
                pubs['tokens'].publish(tensor_to_image(result.tokens, header))
        if debug is not None:
            with timing.stage('publish_debug_image'):
                pubs['debug_image'].publish(self.bridge.cv2_to_imgmsg(debug, 'rgb8', header=copy_header(image_header)))
        return latency_ms

    def clear_markers(self, frame_id: str) -> None:
        """Deactivate: one DELETEALL on ``~/markers`` (stamped now, in ``frame_id``), when configured."""
        if 'markers' in self.publishers:
            header = Header(frame_id=frame_id)
            header.stamp = self._node.get_clock().now().to_msg()
            self.publishers['markers'].publish(self.markers.clear(header))

    def close(self) -> None:
        """Cleanup: destroy every publisher and the /tf broadcaster."""
        for pub in self.publishers.values():
            self._node.destroy_publisher(pub)
        self.publishers = {}
        if self.tf_broadcaster is not None:     # tf2_ros' and the fallback both keep their publisher as pub_tf
            self._node.destroy_publisher(self.tf_broadcaster.pub_tf)
            self.tf_broadcaster = None

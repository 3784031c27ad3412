"""The node's ROS interface as data, and the docs tables generated from it (and from ``params.PARAMS``).

:data:`TOPICS` lists every topic the node subscribes or publishes: name (relative names are remapped, ``~/``
is the node's namespace), message type, QoS and when messages flow. ``test/docs/test_readme_tables.py`` checks the list
against a running node and the tables in ``docs/node.md`` against :func:`parameter_table` / :func:`topic_table`;
``scripts/readme_tables.py`` rewrites every page of :data:`TABLE_PAGES` between its markers. ROS-free.
:data:`POLICY_TOPICS` and ``policy_params.PARAMS`` are the policy node's (``ros/policy_node.py``), written into
``docs/policy.md``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .. import node_params as P
from . import policy_params as PP

__all__ = ['Topic', 'TOPICS', 'POLICY_TOPICS', 'parameter_table', 'topic_table', 'replace_between_markers', 'MARKERS',
           'TABLE_PAGES', 'render_tables']


@dataclass(frozen=True)
class Topic:
    direction: str          # 'in' | 'out'
    name: str
    type: str
    qos: str
    when: str


def _qos(prefix: str, specs=P.SPECS) -> str:
    """'<prefix>_qos_* (default <reliability>, keep last <depth>)' from the declared parameter defaults."""
    reliability = specs[f'{prefix}_qos_reliability'].default.replace('_', ' ')
    return f'{prefix}_qos_* (default {reliability}, keep last {specs[f"{prefix}_qos_depth"].default})'


_OUT_QOS = _qos('output')
TOPICS: tuple[Topic, ...] = (
    Topic('in', 'image', 'sensor_msgs/msg/Image', _qos('image'),
          'while active, with image_transport raw (the default)'),
    Topic('in', 'image/compressed', 'sensor_msgs/msg/CompressedImage',
          'image_qos_* (through image_transport_py where installed: its default QoS, keep last image_qos_depth)',
          'while active, with image_transport compressed (JPEG / PNG, image_transport format)'),
    Topic('in', 'depth', 'sensor_msgs/msg/Image', _qos('depth'),
          'while active, with depth_transport raw: 16UC1 mm or 32FC1 m, registered to colour'),
    Topic('in', 'depth/compressedDepth', 'sensor_msgs/msg/CompressedImage', 'depth_qos_*',
          "while active, with depth_transport compressedDepth (image_transport's compressed_depth format)"),
    Topic('in', 'camera_info', 'sensor_msgs/msg/CameraInfo', _qos('camera_info'),
          'while active'),
    Topic('out', '~/detections', 'vision_msgs/msg/Detection3DArray', _OUT_QOS,
          'every processed frame (an empty array when nothing scores above the threshold); class_id = class id, '
          'id = track id'),
    Topic('out', '~/markers', 'visualization_msgs/msg/MarkerArray', _OUT_QOS,
          'every processed frame with publish_markers, while subscribed (cube + label per box, DELETE for stale ids, '
          'lifetime marker_lifetime)'),
    Topic('out', '~/embedding', 'sensor_msgs/msg/Image', _OUT_QOS,
          'every processed frame with publish_embedding, while subscribed (32FC1, 1 x E policy embedding)'),
    Topic('out', '~/tokens', 'sensor_msgs/msg/Image', _OUT_QOS,
          'with publish_tokens and a model exported with --tokens (32FC1, N x D encoder tokens)'),
    Topic('out', '~/debug_image', 'sensor_msgs/msg/Image', _OUT_QOS,
          'with publish_debug_image, while subscribed (rgb8, boxes drawn)'),
    Topic('out', '~/tracks', 'vision_msgs/msg/Detection3DArray', _OUT_QOS,
          'every processed frame with tracking: the confirmed tracks (id = track id)'),
    Topic('out', '~/track_velocities', 'sensor_msgs/msg/Image', _OUT_QOS,
          'with tracking: 32FC1, T x 4 rows (track id, vx, vy, vz) in m/s'),
    Topic('out', '~/label_info', 'vision_msgs/msg/LabelInfo', 'reliable, transient local, keep last 1',
          'at configure and when score_threshold changes: class id -> class name, and the score threshold'),
    Topic('out', '/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', 'reliable, keep last 10',
          'every diagnostics_period seconds while configured; status "<node name>: pipeline"'),
    Topic('out', '/tf', 'tf2_msgs/msg/TFMessage', "tf2's broadcaster QoS",
          'with publish_tf: each published track as frame <tf_prefix><id>, parent = the detections\' frame'),
)

_POLICY_QOS = _qos('input', PP.SPECS)
POLICY_TOPICS: tuple[Topic, ...] = (     # the policy node (ros/policy_node.py)
    Topic('in', 'embedding', 'sensor_msgs/msg/Image', _POLICY_QOS,
          "while active: 32FC1, 1 x E policy embedding (remap to the perception node's ~/embedding)"),
    Topic('in', 'joint_states', 'sensor_msgs/msg/JointState', _POLICY_QOS,
          "while active: the policy's joint_names by name (grippers normalised 0..1), paired with embedding by stamp"),
    Topic('out', '~/joint_command', 'sensor_msgs/msg/JointState', _qos('output', PP.SPECS),
          'one per answered pair: stamp = the embedding\'s, name = the policy\'s joint_names, position = targets'),
    Topic('out', '/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', 'reliable, keep last 10',
          'every diagnostics_period seconds while configured'),
)

MARKERS = {'parameters': ('<!-- parameters:begin (scripts/readme_tables.py) -->', '<!-- parameters:end -->'),
           'topics': ('<!-- topics:begin (scripts/readme_tables.py) -->', '<!-- topics:end -->'),
           'policy_parameters': ('<!-- policy_parameters:begin (scripts/readme_tables.py) -->',
                                 '<!-- policy_parameters:end -->'),
           'policy_topics': ('<!-- policy_topics:begin (scripts/readme_tables.py) -->', '<!-- policy_topics:end -->')}
# Which generated tables each docs page holds (paths relative to the repository root).
TABLE_PAGES = {'docs/node.md': ('parameters', 'topics'), 'docs/policy.md': ('policy_parameters', 'policy_topics')}


def _cell(text: str) -> str:
    return str(text).replace('|', '\\|').replace('\n', ' ')


def _default(p: P.ParamSpec) -> str:
    if p.type == 'bool':
        return 'true' if p.default else 'false'
    return json.dumps(p.default)


def parameter_table(params: tuple[P.ParamSpec, ...] = P.PARAMS) -> str:
    """Markdown table of every parameter in ``params`` (default the perception node's; declaration order)."""
    rows = ['| parameter | type | default | range | applies | description |', '| --- | --- | --- | --- | --- | --- |']
    for p in params:
        rows.append(f'| `{p.name}` | {p.type} | `{_cell(_default(p))}` | {_cell(p.range_text())} | '
                    f'{"at once" if p.live else "at configure"} | {_cell(p.description)} |')
    return '\n'.join(rows)


def topic_table(topics: tuple[Topic, ...] = TOPICS) -> str:
    """Markdown table of ``topics`` (default :data:`TOPICS`)."""
    rows = ['| | topic | type | QoS | when |', '| --- | --- | --- | --- | --- |']
    for t in topics:
        rows.append(f'| {t.direction} | `{t.name}` | `{t.type}` | {_cell(t.qos)} | {_cell(t.when)} |')
    return '\n'.join(rows)


def replace_between_markers(text: str, key: str, body: str) -> str:
    """``text`` with the lines between the two markers of ``key`` replaced by ``body``; ValueError if absent."""
    begin, end = MARKERS[key]
    pattern = re.compile(re.escape(begin) + r'\n.*?' + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f'the page has no {begin} ... {end} block')
    return pattern.sub(lambda _m: f'{begin}\n{body}\n{end}', text, count=1)


def _table(key: str) -> str:
    if key == 'parameters':
        return parameter_table()
    if key == 'topics':
        return topic_table()
    if key == 'policy_parameters':
        return parameter_table(PP.PARAMS)
    if key == 'policy_topics':
        return topic_table(POLICY_TOPICS)
    raise KeyError(key)


def render_tables(text: str, keys: tuple[str, ...]) -> str:
    """``text`` (a docs page) with the generated tables of ``keys`` (keys of :data:`MARKERS`) brought up to date;
    ValueError if the page lacks the markers of one of them."""
    for key in keys:
        text = replace_between_markers(text, key, _table(key))
    return text

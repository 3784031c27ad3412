"""Every parameter of the policy node (``string_perception_policy``), declared once with description and range.

Same :class:`~string_perception.node_params.ParamSpec` rules, validation and ROS descriptors as the perception node
(``params.py``); nothing here imports rclpy at module level.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from .. import node_params as P
from ..node_params import ParamSpec

__all__ = ['NODE_NAME', 'PARAMS', 'SPECS', 'MISS_POLICIES', 'defaults', 'validate', 'validate_all', 'check_updates',
           'declare_all', 'read_all']

NODE_NAME = 'string_perception_policy'
MISS_POLICIES = ('hold', 'skip')

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec('autostart', 'bool', True,
              'configure and activate at start-up (false: wait for lifecycle transitions)'),
    ParamSpec('model_path', 'string', '',
              'policy ONNX file (runtime/policy_model.py contract: embedding [B,E] + qpos [B,J] -> actions [B,K,J]); '
              'required'),
    ParamSpec('providers', 'string_array', [P.AUTO_PROVIDERS],
              'ONNX Runtime execution providers, best first; [auto] = those this host can run',
              choices=(P.AUTO_PROVIDERS, *P.PROVIDER_NAMES)),
    ParamSpec('intra_op_threads', 'int', 1, 'ONNX Runtime intra-op threads (the policy is small: 1 leaves the '
              'cores to perception and DDS); 0 = its default', 0, 256),
    ParamSpec('query_every', 'int', 0,
              "control steps between two policy queries; 0 = the policy's metadata (must be <= chunk_size)", 0, 10000),
    ParamSpec('temporal_ensemble_m', 'double', -1.0,
              "ACT's ensembling weight exp(-m i) over overlapping chunks; -1 = the policy's metadata", -1.0, 100.0),
    ParamSpec('stamp_tolerance', 'double', 0.001,
              'embedding and joint_states are paired when their header stamps differ by less than this (seconds)',
              1e-6, 1.0),
    ParamSpec('pair_queue_size', 'int', 10,
              'unpaired messages kept per input; older ones are pushed out and counted (drops.unpaired)', 1, 1000),
    ParamSpec('episode_gap', 'double', 0.5,
              'a stamp before the last answered one, or more than this many seconds after it, starts a new episode '
              '(the action-chunk ensemble restarts)', 0.001, 86400.0),
    ParamSpec('on_miss', 'string', 'hold',
              'a paired step that cannot be answered (bad input): hold = republish the last command with the new '
              'stamp (nothing before the first command), skip = publish nothing', choices=MISS_POLICIES, live=True),
    ParamSpec('input_qos_reliability', 'string', 'reliable',
              'QoS reliability of the embedding and joint_states subscriptions', choices=P.RELIABILITY),
    ParamSpec('input_qos_depth', 'int', 10, 'QoS history depth of the input subscriptions', 1, 100),
    ParamSpec('output_qos_reliability', 'string', 'reliable', 'QoS reliability of ~/joint_command',
              choices=P.RELIABILITY),
    ParamSpec('output_qos_depth', 'int', 10, 'QoS history depth of ~/joint_command', 1, 100),
    ParamSpec('diagnostics_period', 'double', 1.0, 'seconds between /diagnostics messages', 0.1, 60.0),
    ParamSpec('log_throttle', 'double', 5.0, 'seconds between repeated warnings of one kind', 0.0, 3600.0,
              live=True),
)
SPECS: dict[str, ParamSpec] = {p.name: p for p in PARAMS}
assert len(SPECS) == len(PARAMS), 'duplicate parameter name'


# The perception node's functions (params.py) over this node's table.
def defaults() -> dict[str, Any]:
    return P.defaults(PARAMS)


def validate(name: str, value: Any) -> Any:
    return P.validate(name, value, specs=SPECS)


def validate_all(values: Mapping[str, Any]) -> dict[str, Any]:
    """A full set (missing names take defaults); ``ValueError`` lists every problem at once."""
    return P.validate_all(values, params=PARAMS, required={'model_path': 'the policy ONNX file'})


def check_updates(updates: Iterable[tuple[str, Any]]) -> tuple[bool, str]:
    """For the set-parameters callback: (ok, reason); all updates are accepted or none."""
    return P.check_updates(updates, params=PARAMS)


def declare_all(node) -> None:
    P.declare_all(node, PARAMS)


def read_all(node) -> dict[str, Any]:
    return P.read_all(node, PARAMS)

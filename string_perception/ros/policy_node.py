"""The ROS 2 node ``string_perception_policy``: policy embedding + joint states in, joint command out (no torch).

A thin rclpy lifecycle adapter around :class:`~string_perception.runtime.policy_stepper.PolicyStepper`
(:class:`~string_perception.runtime.policy_model.PolicyModel` + ACT's :class:`TemporalEnsemble`):

- configure: validate the parameters (``policy_params.py``), load and check the policy ONNX, create publishers;
- activate: subscribe ``embedding`` (sensor_msgs/Image 32FC1 1 x E: remap it to the perception node's
  ``~/embedding``) and ``joint_states`` (sensor_msgs/JointState), paired by header stamp (approximate-time
  synchroniser, ``stamp_tolerance``); deactivate / cleanup undo that.

For every pair the node reads the policy's ``joint_names`` BY NAME from the joint state (any order, extra joints
ignored; grippers normalised 0..1 as gym-aloha's qpos) and publishes ``~/joint_command``:
sensor_msgs/JointState with ``header.stamp`` = the answered embedding's stamp (so the image frame it answers is
known), ``name`` = the policy's joint names and ``position`` = the joint targets. JointState is the position-command
type of Isaac Sim's ROS 2 joint-state subscriber and of topic_based_ros2_control: it names every joint (no order
contract between processes) and carries a header stamp; Float64MultiArray (forward_command_controller) has
neither, and a JointTrajectory would add timing semantics a per-step target does not have.

Bad input (wrong encoding or size of the embedding, NaN, a missing joint, a repeated stamp) is counted by kind in
/diagnostics (``bad_inputs.<kind>``), logged throttled per kind, and answered by ``on_miss`` (hold the last command
or skip); the node keeps going. Unpaired messages show as ``drops.unsynchronised``.

    python -m string_perception.ros.policy_node --ros-args -p model_path:=policy.onnx \\
        -r embedding:=/string_perception/embedding -r joint_states:=/joint_states
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import policy_params as PP
from ..node_params import AUTO_PROVIDERS
from ..codec.detection_msgs import copy_header, stamp_to_ns

__all__ = ['PolicyNode', 'main', 'policy_node_command', 'READY_LINE', 'STATUS_NAME']

READY_LINE = 'string_perception_policy ready'
STATUS_NAME = 'string_perception_policy: policy'   # the default node name's; a renamed node: '<name>: policy'

from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402

from .lifecycle_node import FAILURE, SUCCESS, ManagedNode, make_executor, run_lifecycle_node  # noqa: E402
from .node_argv import ros_node_argv  # noqa: E402
from ..qos import qos_profile  # noqa: E402


def policy_node_command(model_path: str | Path | None = None, *, remaps: Mapping[str, str] | None = None,
                        params: Mapping[str, Any] | None = None, python: str = sys.executable) -> list[str]:
    """argv to start the node in a subprocess (pass ``env=merged_dds_env(domain)``)."""
    return ros_node_argv('string_perception.ros.policy_node', model_path=model_path, params=params,
                         remaps=remaps, python=python)


def embedding_from_image(msg) -> np.ndarray:
    """A 32FC1 1 x E Image -> float32 [E]; InputError ``bad_encoding`` / ``bad_shape`` otherwise."""
    from ..runtime.errors import InputError
    if msg.encoding != '32FC1':
        raise InputError('bad_encoding', f'the embedding must be a 32FC1 image, got {msg.encoding!r}')
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    data = memoryview(msg.data).cast('B') if not isinstance(msg.data, (bytes, bytearray)) else msg.data
    if h != 1 or step < 4 * w or len(data) != step * h:
        raise InputError('bad_shape', f'the embedding must be 1 x E with step x height = data size, got {h} x {w}, '
                                      f'step {step}, {len(data)} bytes')
    return np.frombuffer(data, '>f4' if msg.is_bigendian else '<f4', count=w).astype(np.float32)   # [E]


def qpos_from_joint_state(msg, names: Sequence[str]) -> np.ndarray:
    """JointState -> float64 [J] in ``names`` order; InputError ``missing_joint`` / ``bad_joint_state``."""
    from ..runtime.errors import InputError
    if len(msg.position) != len(msg.name):
        raise InputError('bad_joint_state', f'joint_states has {len(msg.name)} names but {len(msg.position)} '
                                            'positions')
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        raise InputError('missing_joint', f'joint_states lacks {missing[:3]}{"..." if len(missing) > 3 else ""} '
                                          f'({len(missing)} of the policy\'s {len(names)} joints)')
    pos = np.asarray(msg.position, np.float64)
    return pos[[index[n] for n in names]]                                                       # [J]


class PolicyNode(ManagedNode):
    """See the module docstring. ``cfg``: the validated parameters of the current configuration."""

    def __init__(self, node_name: str = PP.NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        PP.declare_all(self)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.model = None
        self.stepper = None
        self._last_command: np.ndarray | None = None

    # ------------------------------------------------------------------ parameters
    def _on_set_parameters(self, updates):
        from rcl_interfaces.msg import SetParametersResult
        ok, reason = PP.check_updates([(p.name, p.value) for p in updates])
        if ok and self.cfg:
            for p in updates:
                if p.name in PP.SPECS and PP.SPECS[p.name].live:
                    self.cfg[p.name] = PP.validate(p.name, p.value)
        if not ok:
            self.get_logger().warning(f'rejected parameter update: {reason}')
        return SetParametersResult(successful=ok, reason=reason)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        from ..runtime.errors import ModelLoadError
        from ..runtime.onnx_runner import usable_providers
        from ..runtime.policy_model import PolicyModel
        from ..runtime.policy_stepper import PolicyStepper
        try:
            cfg = PP.validate_all(PP.read_all(self))
            providers = usable_providers() if cfg['providers'] == [AUTO_PROVIDERS] else cfg['providers']
            self.model = PolicyModel(Path(cfg['model_path']).expanduser(), providers=tuple(providers),
                                     intra_op_threads=cfg['intra_op_threads'])
            self.stepper = PolicyStepper(self.model, query_every=cfg['query_every'],
                                         temporal_ensemble_m=cfg['temporal_ensemble_m'],
                                         episode_gap_s=cfg['episode_gap'])
        except (ValueError, ModelLoadError) as e:
            self.get_logger().error(f'configure failed: {e}')
            self.model = self.stepper = None
            return FAILURE
        self.cfg = cfg
        from sensor_msgs.msg import JointState
        out_qos = qos_profile(cfg['output_qos_reliability'], cfg['output_qos_depth'])
        self._pubs = {'joint_command': self.create_publisher(JointState, '~/joint_command', out_qos)}
        self._last_command = None
        self._start_diagnostics(cfg['diagnostics_period'], self._publish_diagnostics)
        m = self.model.metadata
        self.get_logger().info(f'configured: policy {self.model.path} (task {m.task}, E={m.embed_dim}, '
                               f'{m.action_dim} joints, chunk {m.chunk_size}, query every '
                               f'{self.stepper.query_every}, m={self.stepper.m:g}, {m.control_rate_hz:g} Hz)')
        return SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        from sensor_msgs.msg import Image, JointState
        from .synchronizer import ApproximateTimeSynchronizer, Subscriber
        cfg = self.cfg
        qos = qos_profile(cfg['input_qos_reliability'], cfg['input_qos_depth'])
        self._subs = []
        for name, msg_type in (('embedding', Image), ('joint_states', JointState)):
            sub = Subscriber(self, msg_type, name, qos_profile=qos)
            sub.registerCallback(lambda _msg, n=name: self.stats.count_input(n))
            self._subs.append(sub)
        self._sync = ApproximateTimeSynchronizer(self._subs, queue_size=cfg['pair_queue_size'],
                                                 slop=cfg['stamp_tolerance'])
        self._sync.registerCallback(self._on_pair)
        self.stepper.reset()
        self._last_command = None
        self._active = True
        self.get_logger().info('active: pairing ' + ' + '.join(self.resolve_topic_name(n)
                                                               for n in ('embedding', 'joint_states')))
        return SUCCESS

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._stop_inputs()
        return SUCCESS

    def _release_outputs(self) -> None:
        super()._release_outputs()
        self.model, self.stepper, self.cfg = None, None, {}

    # ------------------------------------------------------------------ pairs
    def _on_pair(self, image, joint_state) -> None:
        """Executor thread: one (embedding, joint_states) pair -> one ~/joint_command (or a counted miss)."""
        from ..runtime.errors import InputError
        t0 = time.perf_counter()
        self.stats.count_synced()
        if not self._active or self.stepper is None:
            return
        try:
            embedding = embedding_from_image(image)
            qpos = qpos_from_joint_state(joint_state, self.model.metadata.joint_names)
            t_inf = time.perf_counter()
            result = self.stepper(stamp_to_ns(image.header.stamp), embedding, qpos)
            inference_ms = (time.perf_counter() - t_inf) * 1e3
        except InputError as e:
            self.stats.bad_input(e.kind)
            self._warn(f'bad input ({e.kind})', e.message)
            self._on_miss(image.header)
            return
        self._last_command = result.action
        self._publish(image.header, result.action)
        self.stats.frame_done((time.perf_counter() - t0) * 1e3, inference_ms)

    def _on_miss(self, header) -> None:
        if self.cfg.get('on_miss') == 'hold' and self._last_command is not None:
            self.stats.warning('held_last_command')
            self._publish(header, self._last_command)

    def _publish(self, header, action: np.ndarray) -> None:
        from sensor_msgs.msg import JointState
        msg = JointState(header=copy_header(header), name=list(self.model.metadata.joint_names),
                         position=[float(v) for v in action])
        self._pubs['joint_command'].publish(msg)

    # ------------------------------------------------------------------ diagnostics
    def _publish_diagnostics(self) -> None:
        pub = self._diagnostics_publisher()
        if pub is None or self.model is None:
            return
        snap = self.stats.snapshot(image_topic='embedding')
        pub.publish(self._diagnostics_message(snap, self.model.session.get_providers()[0],
                                              {'queries': self.stepper.queries if self.stepper else 0}, task='policy'))


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``string_perception_policy`` / ``python -m string_perception.ros.policy_node``."""
    return run_lifecycle_node(PolicyNode, 'string_perception_policy', argv, lambda _node: make_executor(),
                              lambda _node: READY_LINE)


if __name__ == '__main__':
    sys.exit(main())

"""What ``launch/aloha_policy.launch.py`` starts: the simulated ALOHA cell in lockstep (string-perception-sim-aloha),
the perception node and the policy node, remapped together (computed at launch time from the launch arguments).

    sim  --/camera/color/image_raw, /camera/depth/image_raw, /camera/color/camera_info-->  perception node
    perception node  --~/embedding (32FC1 1 x E)-->  policy node (embedding)
    sim  --/joint_states-->  policy node (joint_states)
    policy node  --~/joint_command (JointState, stamp = the image's)-->  sim (--command-topic)

The perception node's parameters are ``[config, {...}]``: the dict holds what the loop needs (autostart,
``use_sim_time``, reliable inputs) and ``model_path`` (launch_setup.node_parameters explains the order). Empty
``model_path`` / ``policy_model_path`` launch the shipped controller (paths.shipped_policy_pair,
models/MODEL_CARD_policy.md) of the launch argument ``task`` (transfer_cube, insertion; the simulator runs that
task): the perception node then runs the policy's perception file, whose ``~/embedding`` is the object
localiser's, not the node's own default (the detector). Give both to run another pair (trained for ``task``).
``launch`` / ``launch_ros`` are imported only inside :func:`aloha_policy_actions`.
"""
from __future__ import annotations

from typing import Mapping

from ..aloha_tasks import ALOHA_TASK_NAMES, DEFAULT_ALOHA_TASK
from ..paths import shipped_policy_pair
from . import policy_params as PP
from .launch_setup import PACKAGE, node_fqn, parse_bool

__all__ = ['TASKS', 'DEFAULT_POLICY_NODE_NAME', 'SIM_TOPICS', 'SIM_EXECUTABLE', 'POLICY_EXECUTABLE',
           'PERCEPTION_EXECUTABLE', 'aloha_policy_actions']

SIM_EXECUTABLE = 'string-perception-sim-aloha'
PERCEPTION_EXECUTABLE = 'string_perception_node'
POLICY_EXECUTABLE = 'string_perception_policy'
DEFAULT_POLICY_NODE_NAME = PP.NODE_NAME
TASKS = ALOHA_TASK_NAMES                        # the simulator's --task choices (sim/demos/tasks.py)
SIM_TOPICS = {'image': '/camera/color/image_raw', 'depth': '/camera/depth/image_raw',
              'camera_info': '/camera/color/camera_info', 'joint_states': '/joint_states'}


def _task(cfg: Mapping[str, str]) -> str:
    task = cfg.get('task', DEFAULT_ALOHA_TASK)
    if task not in TASKS:
        raise ValueError(f'launch argument task:={task!r} must be one of {TASKS}')
    return task


def _sim_arguments(cfg: Mapping[str, str], command_topic: str) -> list[str]:
    seeds = cfg['seeds'].replace(',', ' ').split()
    if not seeds or not all(s.lstrip('-').isdigit() for s in seeds):
        raise ValueError(f"launch argument seeds:={cfg['seeds']!r} must list integers")
    args = ['--task', _task(cfg), '--seeds', *seeds, '--steps', str(int(cfg['steps'])),
            '--command-topic', command_topic,
            '--image-topic', SIM_TOPICS['image'], '--depth-topic', SIM_TOPICS['depth'],
            '--info-topic', SIM_TOPICS['camera_info'], '--depth-encoding', cfg['depth_encoding']]
    if cfg['results']:
        args += ['--out', cfg['results']]
    return args


def aloha_policy_actions(context, *_args, **_kwargs) -> list:
    """``OpaqueFunction`` body of ``aloha_policy.launch.py``."""
    from launch_ros.actions import LifecycleNode, Node
    cfg = context.launch_configurations
    shipped = shipped_policy_pair(_task(cfg))
    model_path = cfg['model_path'].strip() or str(shipped[0])
    policy_model_path = cfg['policy_model_path'].strip() or str(shipped[1])
    ns, sim_time = cfg['namespace'], parse_bool(cfg['use_sim_time'], 'use_sim_time')
    perception_name, policy_name = cfg['perception_node_name'], cfg['policy_node_name']
    log = ['--ros-args', '--log-level', cfg['log_level']]
    reliable = {f'{k}_qos_reliability': 'reliable' for k in ('image', 'depth', 'camera_info')}  # lockstep: no loss
    perception = LifecycleNode(
        package=PACKAGE, executable=PERCEPTION_EXECUTABLE, name=perception_name, namespace=ns, output='screen',
        parameters=[cfg['config'], {'model_path': model_path, 'autostart': True, 'use_sim_time': sim_time,
                                    'resize_mode': 'crop',   # the policy's perception file saw centre crops
                                    **reliable}],
        remappings=[(k, SIM_TOPICS[k]) for k in ('image', 'depth', 'camera_info')], arguments=log)
    policy = LifecycleNode(
        package=PACKAGE, executable=POLICY_EXECUTABLE, name=policy_name, namespace=ns, output='screen',
        parameters=[{'model_path': policy_model_path, 'autostart': True, 'use_sim_time': sim_time}],
        remappings=[('embedding', node_fqn(ns, perception_name) + '/embedding'),
                    ('joint_states', SIM_TOPICS['joint_states'])], arguments=log)
    sim = Node(package=PACKAGE, executable=SIM_EXECUTABLE, name='string_perception_sim_aloha', output='screen',
               arguments=_sim_arguments(cfg, node_fqn(ns, policy_name) + '/joint_command'))
    return [perception, policy, sim]



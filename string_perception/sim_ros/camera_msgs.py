"""What a live simulated RGB-D camera publishes, as rosbags messages (rclpy-free; ``sim_camera.py`` serialises and
publishes them, a bag writer could store them): the realsense2_camera-like layout of the bundled recording
(bags/topics.DEFAULT_TOPICS: rgb8 colour, 16UC1 depth registered to colour, CameraInfo, ground-truth
Detection3DArray with class names as class ids), plus /clock (simulated time), /tf (world -> camera optical frame
and world -> every robot link) and /joint_states.
"""
from __future__ import annotations

import numpy as np

from ..bags import messages as M
from ..bags.topics import DEFAULT_TOPICS
from ..box_ops import rotation_to_quaternion
from ..sim.classes import SIM_CLASS_NAMES

CLOCK = '/clock'
TF = '/tf'
JOINT_STATES = '/joint_states'
WORLD_FRAME = 'world'
CAMERA_FRAME = 'camera_color_optical_frame'

TOPIC_TYPES = {
    DEFAULT_TOPICS.image: 'sensor_msgs/msg/Image',
    DEFAULT_TOPICS.depth: 'sensor_msgs/msg/Image',
    DEFAULT_TOPICS.camera_info: 'sensor_msgs/msg/CameraInfo',
    DEFAULT_TOPICS.ground_truth: 'vision_msgs/msg/Detection3DArray',
    CLOCK: 'rosgraph_msgs/msg/Clock',
    TF: 'tf2_msgs/msg/TFMessage',
    JOINT_STATES: 'sensor_msgs/msg/JointState',
}


def _time(stamp_ns: int):
    return M.msg_type('builtin_interfaces/msg/Time')(sec=int(stamp_ns // M.NS), nanosec=int(stamp_ns % M.NS))


def _transform(stamp_ns: int, child: str, p, q_xyzw):
    T = {n: M.msg_type(f'geometry_msgs/msg/{n}') for n in ('Vector3', 'Quaternion', 'Transform', 'TransformStamped')}
    return T['TransformStamped'](
        header=M.header(stamp_ns, WORLD_FRAME), child_frame_id=child,
        transform=T['Transform'](translation=T['Vector3'](*(float(v) for v in p)),
                                 rotation=T['Quaternion'](*(float(v) for v in q_xyzw))))


def view_messages(view, stamp_ns: int) -> list[tuple[str, object]]:
    """(topic, message) for one live.View stamped `stamp_ns` (the simulated time): /clock first."""
    f = view.frame
    h, w = f.depth_mm.shape
    names = [SIM_CLASS_NAMES[int(k)] for k in f.labels]
    tf = [_transform(stamp_ns, CAMERA_FRAME, view.camera.p_wc, rotation_to_quaternion(view.camera.R_wc))]
    tf += [_transform(stamp_ns, name, p, (q[1], q[2], q[3], q[0])) for name, p, q in view.links]   # MuJoCo: w x y z
    joints = M.msg_type('sensor_msgs/msg/JointState')(
        header=M.header(stamp_ns, ''), name=list(view.joint_names),
        position=np.asarray(view.joint_positions, np.float64), velocity=np.asarray(view.joint_velocities, np.float64),
        effort=np.zeros(0))
    return [
        (CLOCK, M.msg_type('rosgraph_msgs/msg/Clock')(clock=_time(stamp_ns))),
        (TF, M.msg_type('tf2_msgs/msg/TFMessage')(transforms=tf)),
        (JOINT_STATES, joints),
        (DEFAULT_TOPICS.image, M.image_msg(f.rgb, 'rgb8', stamp_ns, CAMERA_FRAME)),
        (DEFAULT_TOPICS.depth, M.image_msg(f.depth_mm, '16UC1', stamp_ns, CAMERA_FRAME)),
        (DEFAULT_TOPICS.camera_info, M.camera_info_msg(f.K, h, w, stamp_ns, CAMERA_FRAME)),
        (DEFAULT_TOPICS.ground_truth, M.detections_msg(f.translations, f.rotations, f.sizes, names, None, stamp_ns,
                                                       CAMERA_FRAME)),
    ]

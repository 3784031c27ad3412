"""rosbag2 play / record / evaluate with the ``rosbags`` library (no ``ros2 bag`` needed).

- ``typestore``  rosbags typestore (ROS 2 Kilted types + vision_msgs from the same .msg files the node uses)
- ``topics``     the camera-driver topic layout and topic auto-detection
- ``messages``   rosbags message builders (Image, CompressedImage, CameraInfo, ground-truth Detection3DArray)
- ``writer``     ``BagWriter``: write messages (rosbags objects or CDR bytes) to sqlite3 or mcap
- ``splitting``  when a recording starts its next storage file, and the split bag's metadata
- ``reader``     ``read_frames``: synchronised RGB-D frames (+ ground truth) from a bag, with a report of
                 what could not be used
- ``sample``     the bundled recording ``data/sample_recording`` (regenerated bit for bit from a seed)
- ``play``       ``string-perception-play``: publish a bag over DDS with its original timing (rclpy)
- ``record``     ``string-perception-record``: subscribe and write rosbag2 (rclpy)
- ``eval_bag``   ``string-perception-eval-bag``: the node's pipeline on every frame of a bag -> metrics, plots

Importing this package imports neither rclpy nor onnxruntime.
"""

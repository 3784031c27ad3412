"""ROS 2 bridges to the simulator: the layer above ``ros/`` (the node) and ``sim/`` (MuJoCo cells).

- ``sim_camera``     ``string-perception-sim``: a live simulated workcell published as an RGB-D camera driver does
- ``sim_aloha_loop`` ``string-perception-sim-aloha``: ALOHA transfer-cube episodes in lockstep with the policy node
- ``camera_msgs``    what ``sim_camera`` publishes, as rosbags messages (a cell's view -> topic, message)
- ``sim_demo``       ``python -m string_perception.sim_ros.sim_demo``: sim camera -> the node -> scored detections

Importing this package imports neither rclpy nor mujoco (each script imports them when it runs).
"""

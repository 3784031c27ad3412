"""ROS 2 adapter layer: node, synchronisation and DDS set-up (message conversion: ``string_perception.codec``).

Import-light on purpose: importing ``string_perception.ros`` never imports rclpy, cv2 or message
packages, so ROS-free code (tests, the offline evaluator) can use the pure helpers in its submodules:

- ``dds_env``          environment for loopback-only Fast DDS (profile, domain id, discovery range)
- ``approx_sync``      approximate-time synchroniser with message_filters' semantics and contract (rclpy's Time)
- ``sync``             ``ApproximateTimeSynchronizer`` / ``Subscriber``: real message_filters first
- ``sync_watchdog``    ROS-free: unblocks a synchroniser stuck on future / stale / stuck stamps
- ``compressed_input`` compressed colour input: image_transport_py first, our decoder behind it
"""

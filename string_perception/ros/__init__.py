"""ROS 2 adapter layer: node, message conversion, synchronisation and DDS set-up.

Import-light on purpose: importing ``string_perception.ros`` never imports rclpy, cv2 or message
packages, so ROS-free code (tests, the offline evaluator) can use the pure helpers in its submodules:

- ``dds_env``          environment for loopback-only Fast DDS (profile, domain id, discovery range)
- ``approx_sync``      ROS-free approximate-time synchroniser (message_filters semantics)
- ``sync``             ``ApproximateTimeSynchronizer`` / ``Subscriber``: real message_filters first
- ``image_conversion`` Image / CompressedImage <-> numpy: real cv_bridge first, tested fallback
"""

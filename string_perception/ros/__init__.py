"""ROS 2 adapter layer: the perception and policy nodes, synchronisation, inputs, diagnostics, launch set-up.

Below it: ``codec`` (message conversion), ``node_params`` (the parameter table), ``dds_env`` / ``qos`` (DDS set-up);
above it: ``sim_ros`` (simulator bridges). It imports no ``bags`` module.

Import-light on purpose: importing ``string_perception.ros`` never imports rclpy, cv2 or message
packages, so ROS-free code (tests, the offline evaluator) can use the pure helpers in its submodules:

- ``message_filters_fallback``  our message_filters: approximate-time synchroniser, same semantics and contract
- ``synchronizer``     ``ApproximateTimeSynchronizer`` / ``Subscriber`` the nodes use: real message_filters first
- ``sync_watchdog``    ROS-free: unblocks a synchroniser stuck on future / stale / stuck stamps
- ``compressed_input`` compressed colour input: image_transport_py first, our decoder behind it
"""

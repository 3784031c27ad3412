"""The approximate-time synchroniser the nodes use: the real ``message_filters`` first, else ours
(``message_filters_fallback``).

    from string_perception.ros.synchronizer import ApproximateTimeSynchronizer, Subscriber, IMPLEMENTATION

    subs = [Subscriber(node, Image, 'image', qos_profile=qos), Subscriber(node, Image, 'depth', qos_profile=qos),
            Subscriber(node, CameraInfo, 'camera_info', qos_profile=qos)]
    sync = ApproximateTimeSynchronizer(subs, queue_size=10, slop=0.05)
    sync.registerCallback(on_frame)          # on_frame(image, depth, camera_info)

Pass ``qos_profile`` and the synchroniser's options by keyword (upstream's positional order changed between
releases) and no other keyword to ``Subscriber`` (some releases refuse them; the node's own inputs,
``sequence_gaps.SequencedSubscriber``, subscribe themselves). Stamps must be builtin_interfaces/Time (both
implementations convert them with ``rclpy.time.Time.from_msg``). ``IMPLEMENTATION`` names what was loaded
(reported in diagnostics). Importing this module imports rclpy (the fallback uses rclpy's Time and Duration).
"""
try:
    from message_filters import ApproximateTimeSynchronizer, Subscriber  # ROS install (apt / rosdep)
    IMPLEMENTATION = 'message_filters'
except ImportError:  # PyPI set-up: message_filters is not on PyPI
    from string_perception.ros.message_filters_fallback import ApproximateTimeSynchronizer, Subscriber
    IMPLEMENTATION = 'string_perception.ros.message_filters_fallback'

__all__ = ['ApproximateTimeSynchronizer', 'Subscriber', 'IMPLEMENTATION']

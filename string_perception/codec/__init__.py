"""Message / codec layer: ROS message fields <-> numpy and pipeline results, with neither rclpy nor torch.

``bags/`` (rosbags objects) and ``ros/`` (rclpy messages) both use it; it imports neither (only ``runtime/``,
``box_ops`` and numpy below it). Every function works on any object with the message's fields (duck typing); the
ROS message packages (sensor_msgs, vision_msgs, visualization_msgs, std_msgs) are imported only inside the
builders that construct them, so no module here imports rclpy, torch or a message package at import time.

- ``image_data``       the error type, the Image / CompressedImage stand-ins and the guarded decoder both codecs share
- ``image_conversion`` Image / CompressedImage <-> numpy: real cv_bridge first, tested fallback (same contract)
- ``compressed_depth`` image_transport's compressedDepth format (16UC1 PNG, 32FC1 quantised inverse depth)
- ``compressed_header`` size and structure of a compressed image checked from its header, before decoding
- ``image_cdr``        serialized sensor_msgs/Image -> numpy views, without deserialising
- ``frame_checks``     header-level input checks (layout, frame ids, stamps, CameraInfo, input silence)
- ``frame_decode``     one RGB-D frame (colour + depth messages) -> arrays, for the node and the bag reader
- ``detection_msgs``   pipeline results <-> vision_msgs (Detection3DArray, LabelInfo), tensors as images, CameraInfo
- ``markers``          detections / tracks -> visualization_msgs/MarkerArray
"""

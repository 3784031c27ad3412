"""Test helpers (no tests here): ROS peers and loopback set-up, bag writers, the tiny ONNX model, the import check.

    ros_helpers         loopback DDS environment, domain ids, ProcessGroup, vision_msgs payloads; peer roles
    node_peers          peer processes of the node tests (``python test/support/node_peers.py <role> ...``)
    reliability_peers   the bad-input catalogue and its publisher (``python test/support/reliability_peers.py``)
    bag_helpers         small recordings written in tests
    tf2_stand_in        a tf2_ros stand-in for the node's target-frame tests
    tiny_model          tiny contract-conforming perception ONNX models (and their broken variants)
    optional_deps       which test modules import an optional dependency without ``pytest.importorskip`` first
"""

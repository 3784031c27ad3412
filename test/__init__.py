"""The test suite, one folder per part of the package (``python -m pytest -q test`` from the repository root).

    runtime/     string_perception.runtime (ONNX runner, pre/post-processing, tracking, policy runtime)
    codec/       string_perception.codec (ROS message <-> arrays, without a node)
    ros/         string_perception.ros: the perception and policy nodes, synchronisation, inputs, launch, DDS
    bags/        string_perception.bags (record, play, read, split, evaluate recordings)
    model/       string_perception.model and string_perception.encodings
    training/    string_perception.training
    evaluation/  string_perception.evaluation
    export/      string_perception.export and the shipped ONNX files
    sim/         string_perception.sim and string_perception.sim_ros
    policy/      string_perception.policy
    scenes/      string_perception.scenes
    core/        the package's top-level modules (box_ops, iou3d, matcher, metrics, child_process, demo, ...)
    benchmarks/  the benchmarks package's scoring code
    docs/        README / docs pages, package.xml, install (colcon, runtime-only), self-contained and security checks
    support/     helpers, never collected: ``from test.support.ros_helpers import ...``

Every folder is a package (``__init__.py``), so test modules are imported as ``test.<folder>.<module>`` and the
helpers as ``test.support.<module>``; pytest.ini's ``pythonpath = .`` puts the repository root first on
``sys.path``, ahead of the standard library's own ``test`` package.
"""

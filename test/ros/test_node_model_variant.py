"""The node runs the file runtime.model_variant chooses: the fp32 model_path unless an int8 sibling exists and is
chosen (auto on a VNNI / AMX CPU, or STRING_PERCEPTION_MODEL_PRECISION=int8). The sibling here is deliberately not an
ONNX file, so a configure that picked it fails: which file was loaded is visible without building an int8 model."""
import shutil

import pytest

from string_perception.runtime.model_variant import PRECISION_ENV, int8_path, int8_kernels


@pytest.mark.parametrize('precision, picks_int8', [
    ('fp32', False), ('int8', True), ('auto', int8_kernels()[0]), ('bogus', None)])
def test_node_loads_the_chosen_file(tmp_path, model_path, monkeypatch, precision, picks_int8):
    rclpy = pytest.importorskip('rclpy')
    from test.support.ros_helpers import reserved_domain_id
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import FAILURE, SUCCESS, StringPerceptionNode
    fp32 = tmp_path / 'vitd_x.onnx'
    shutil.copyfile(model_path, fp32)
    int8_path(fp32).write_bytes(b'not an onnx file')
    monkeypatch.setenv(PRECISION_ENV, precision)
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', f'model_path:={fp32}',
                         '-p', 'providers:=["CPUExecutionProvider"]'], context=ctx)
        node = StringPerceptionNode(context=ctx)
        try:
            result = node.trigger_configure()
            if picks_int8 is False:
                assert result == SUCCESS and node.pipeline.model.path == fp32
                assert node.pipeline.model.metadata.precision == 'fp32'
            else:   # the corrupt int8 sibling was chosen, or the precision request is refused
                assert result == FAILURE and node.pipeline is None
        finally:
            node.destroy_node()
            rclpy.shutdown(context=ctx)

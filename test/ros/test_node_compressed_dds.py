"""The node on image_transport's compressed inputs over DDS: JPEG colour on image/compressed and compressedDepth
(16UC1 PNG after the 12-byte header) on depth/compressedDepth, played from a bag; every answer equals the offline
pipeline on the same decoded frames."""
import time

import numpy as np
import pytest

from test.support.bag_helpers import frames, write_bag
from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs')))]

IMAGE, DEPTH, INFO = '/camera/color/image_raw', '/camera/depth/image_raw', '/camera/color/camera_info'
DETECTIONS = '/string_perception/detections'


def test_node_answers_compressed_colour_and_compressed_depth(tmp_path, model_path):
    from string_perception.bags.reader import BagFrameReader, open_bag
    from string_perception.bags.record import RECORDING_LINE
    from string_perception.bags.typestore import make_typestore
    from string_perception.ros.node import READY_LINE, node_command
    from string_perception.node_params import effective_score_threshold
    from string_perception.runtime import Pipeline
    from string_perception.runtime.model_variant import node_model_choice

    bag = write_bag(tmp_path / 'in', frames(6), colour='jpeg', depth='16UC1', depth_transport='compressedDepth')
    out = tmp_path / 'out'
    cmd = node_command(model_path, params={'providers': ['CPUExecutionProvider'], 'image_transport': 'compressed',
                                           'depth_transport': 'compressedDepth'},
                       remaps={'image': IMAGE, 'depth': DEPTH, 'camera_info': INFO})
    with reserved_domain_id() as domain, ProcessGroup(tmp_path / 'logs', ros_test_env(domain)) as pg:
        node = pg.start_python('node', cmd[1:])
        assert node.wait_for_line(READY_LINE, 60), pg.logs()
        assert f'{DEPTH}/compressedDepth' in node.log(), pg.logs()      # 'active: subscribed to ...'
        rec = pg.start_python('record', ['-m', 'string_perception.bags.record', DETECTIONS, '-o', str(out)])
        assert rec.wait_for_line(f'{RECORDING_LINE} {DETECTIONS}', 30), pg.logs()
        play = pg.start_python('play', ['-m', 'string_perception.bags.play', str(bag), '--rate', '0.3',
                                        '--wait-for-subscribers', '1',
                                        '--wait-topics', f'{IMAGE}/compressed', f'{DEPTH}/compressedDepth', INFO])
        assert play.wait(timeout=60) == 0, pg.logs()
        time.sleep(2.0)
        assert rec.stop() == 0 and node.popen.poll() is None, pg.logs()
        assert 'bad input' not in node.log(), pg.logs()

    pipe = Pipeline(node_model_choice(model_path).path, ('CPUExecutionProvider',))   # the file the node ran
    pipe.set_params(score_threshold=effective_score_threshold(-1.0, pipe.model.metadata))
    offline = {f.stamp_ns: pipe(f.rgb, f.depth, f.K, encoding=f.encoding, depth_encoding=f.depth_encoding,
                                intrinsics_hw=f.info_hw).detections for f in BagFrameReader(bag)}
    store, reader = make_typestore(), open_bag(out)
    try:
        got = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages(reader.connections)]
    finally:
        reader.close()
    assert got, 'no detections'
    for d in got:
        ref = offline[d.header.stamp.sec * 10**9 + d.header.stamp.nanosec]
        np.testing.assert_allclose([[x.bbox.center.position.x, x.bbox.center.position.y, x.bbox.center.position.z]
                                    for x in d.detections], ref.translations.reshape(-1, 3), atol=1e-6)
        np.testing.assert_allclose([x.results[0].hypothesis.score for x in d.detections], ref.scores, atol=1e-6)

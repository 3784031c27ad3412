"""Real DDS between separate processes over loopback, with the shipped Fast DDS profile.

A publisher process sends 640x480 rgb8 + 16UC1 Images at 30 Hz for 3 s (best effort, as camera drivers
and the node's default input QoS do), then a vision_msgs Detection3DArray and LabelInfo (reliable,
transient local); a listener process receives everything. Own ROS_DOMAIN_ID, loopback only.
"""
import json
import os

import pytest

from test.support.ros_helpers import ProcessGroup, percentile, reserved_domain_id, ros_skip_reason, ros_test_env

pytestmark = [pytest.mark.ros,
              pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs')))]

FRAMES, RATE = 90, 30.0
DETECTION3DARRAY_HASH = 'RIHS01_793f5eab9595ac1c0da07873cc859db42eae51f0ee76056db8562515d830e018'
LABELINFO_HASH = 'RIHS01_3d37df4015cdf660cc851c51897f2acd957e1ca6205ba0a99aebffb9406b0783'


def test_images_and_detections_between_processes(tmp_path, record_property):
    prefix = f'/sp_transport_{os.getpid()}'
    pub_json, lis_json = tmp_path / 'published.json', tmp_path / 'received.json'
    common = ['--prefix', prefix, '--depth', '--qos', 'sensor']
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        lis = pg.start_peer('listener', 'listener', '--out', str(lis_json), '--timeout', '40', *common)
        pub = pg.start_peer('publisher', 'image-publisher', '--out', str(pub_json), '--frames', str(FRAMES),
                            '--rate', str(RATE), '--wait', '20', *common)
        rc_pub = pub.wait(timeout=40)
        rc_lis = lis.wait(timeout=10)
        logs = pg.logs()
    assert rc_pub == 0 and rc_lis == 0, logs
    assert 'XMLPARSER' not in logs, f'Fast DDS rejected the profile:\n{logs}'
    sent, got = json.loads(pub_json.read_text()), json.loads(lis_json.read_text())
    assert sent['frames'] == FRAMES

    summary = {}
    for stream in ('image', 'depth'):
        lat = list(got['frames'][stream].values())
        summary[stream] = (len(lat), percentile(lat, 50), percentile(lat, 95))
        record_property(f'{stream}_received', len(lat))
        record_property(f'{stream}_latency_ms_p50', round(summary[stream][1], 2))
    print(f"\n[transport] domain {domain}, {FRAMES} frames at {RATE:.0f} Hz in {sent['publish_s']} s; "
          + '; '.join(f'{k}: {n}/{FRAMES} received, latency p50 {p50:.1f} ms p95 {p95:.1f} ms'
                      for k, (n, p50, p95) in summary.items()))
    for stream, (n, _, _) in summary.items():
        assert n >= 0.95 * FRAMES, f'{stream}: only {n}/{FRAMES} frames received\n{logs}'
    assert got['bad_payload'] == []

    assert not got['timed_out']
    assert got['detections'] == sent['detections']       # every field, bit-exact floats (JSON repr)
    assert got['label_info'] == sent['label_info']
    det = got['detections']
    assert [d['results'][0]['hypothesis']['class_id'] for d in det['detections']] == ['mug', 'screwdriver']
    assert det['detections'][0]['bbox']['center']['orientation']['w'] == pytest.approx(0.9238795325112867)
    assert got['type_hashes'] == {'detections': [DETECTION3DARRAY_HASH], 'label_info': [LABELINFO_HASH]}

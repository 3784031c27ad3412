"""The node end to end over real DDS: three separate processes on loopback, own ROS_DOMAIN_ID, shipped profile.

A publisher process plays 60 generated test-split frames (seeds >= 2e9, 640x480 rgb8 + 16UC1 + CameraInfo) at
30 Hz under /sp_cam_<pid>/...; the node process (``python -m string_perception.ros.node``, remapped to them)
runs the ``model_path`` fixture's model; a listener process records every output. The test then runs the
offline Pipeline on the same frames and checks the node gave the same answer.
"""
import json
import os

import numpy as np
import pytest

from test.support.node_peers import FRAME_ID
from test.support.ros_helpers import HELPERS, ProcessGroup, percentile, reserved_domain_id, ros_skip_reason, ros_test_env

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs')))]

PEERS = HELPERS.parent / 'node_peers.py'
FRAMES, RATE, FIRST_SEED, H, W = 60, 30.0, 2_000_000_000, 480, 640


def _offline(model_path):
    """Offline pipeline results and ground truth for the frames the publisher plays."""
    from string_perception.node_params import effective_score_threshold
    from string_perception.runtime import Pipeline
    from string_perception.runtime.model_variant import node_model_choice
    from string_perception.scenes import SceneConfig, generate_frame
    pipe = Pipeline(node_model_choice(model_path).path, providers=('CPUExecutionProvider',))   # the node's file
    pipe.set_params(score_threshold=effective_score_threshold(-1.0, pipe.model.metadata))
    results, gts = {}, {}
    for seed in range(FIRST_SEED, FIRST_SEED + FRAMES):
        f = generate_frame(seed, SceneConfig(height=H, width=W))
        results[seed] = pipe(f.rgb, f.depth_mm, f.K, encoding='rgb8', depth_encoding='16UC1', intrinsics_hw=(H, W))
        gts[seed] = {'params': np.concatenate([f.translations, f.rotations[:, :, 0], f.rotations[:, :, 1],
                                               f.sizes], axis=1).reshape(-1, 12), 'labels': f.labels}
    return pipe, results, gts


def test_node_over_dds_matches_offline_pipeline(tmp_path, model_path, record_property):
    from string_perception.box_ops import quaternion_to_rotation, rotation_to_6d
    from string_perception.metrics import average_best_iou
    from string_perception.ros.node import READY_LINE, node_command

    pipe, offline, gts = _offline(model_path)
    total_ms = percentile([r.timings['total_ms'] for r in offline.values()], 95)
    # the node must keep up for ">= 95 % of frames" to be meaningful: the player leaves the node 2.5x the offline p95
    # per frame (DDS, decoding, checks and publishing come on top; a clean-clone CI run at 30 Hz with a 17-19 ms
    # pipeline lost 4 of 60 to input-queue overwrites). Throughput is measured by benchmarks/, not here.
    rate = min(RATE, 1000.0 / (2.5 * total_ms))
    prefix = f'/sp_cam_{os.getpid()}'
    pub_json, lis_json, ready = tmp_path / 'published.json', tmp_path / 'received.json', tmp_path / 'ready'
    # every frame is another scene: per-frame markers (tracking off; test_node_tracking.py covers tracking)
    cmd = node_command(model_path, params={'providers': ['CPUExecutionProvider'], 'sync_slop': 0.02, 'tracking': False},
                       remaps={'image': f'{prefix}/color/image_raw', 'depth': f'{prefix}/depth/image_raw',
                               'camera_info': f'{prefix}/color/camera_info'})
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        lis = pg.start_python('listener', [str(PEERS), 'output-listener', '--out', str(lis_json), '--ready',
                                           str(ready), '--publisher-done', str(pub_json), '--timeout', '55'])
        node = pg.start_python('node', cmd[1:])
        pub = pg.start_python('publisher', [str(PEERS), 'frame-publisher', '--prefix', prefix, '--out',
                                            str(pub_json), '--listener-ready', str(ready), '--frames', str(FRAMES),
                                            '--rate', str(rate), '--first-seed', str(FIRST_SEED)])
        rc_pub = pub.wait(timeout=60)
        rc_lis = lis.wait(timeout=20)
        node_alive = node.popen.poll() is None
        rc_node = node.stop()
        logs = pg.logs()
    assert rc_pub == 0 and rc_lis == 0 and node_alive, logs
    assert rc_node == 0, f'node did not exit cleanly on SIGINT\n{logs}'
    assert READY_LINE in node.log(20000), logs
    sent, got = json.loads(pub_json.read_text()), json.loads(lis_json.read_text())
    assert not got['timed_out'], logs

    # >= 95 % of frames give a Detection3DArray whose stamp and frame id are the frame's
    stamp_to_seed = {int(s): int(seed) for seed, s in sent['stamps'].items()}
    dets = {int(s): d for s, d in got['detections'].items()}
    assert set(dets) <= set(stamp_to_seed), 'a Detection3DArray carries a stamp no input had'
    n = len(dets)
    lat = [d['latency_ms'] for d in dets.values()]
    diag = got['diagnostics'][-1]['values'] if got['diagnostics'] else {}
    print(f'\n[node dds] {n}/{FRAMES} frames -> detections at {rate:.1f} Hz; stamp->listener latency p50 '
          f'{percentile(lat, 50):.1f} ms p95 {percentile(lat, 95):.1f} ms; node-reported stamp->publish p50 '
          f'{diag.get("latency_ms_p50")} ms p95 {diag.get("latency_ms_p95")} ms, inference p50 '
          f'{diag.get("inference_ms_p50")} ms; provider {diag.get("execution_provider")}; offline total p95 '
          f'{total_ms:.1f} ms')
    record_property('frames_with_detections', n)
    record_property('latency_ms_p50', round(percentile(lat, 50), 2))
    record_property('latency_ms_p95', round(percentile(lat, 95), 2))
    assert n >= 0.95 * FRAMES, f'only {n}/{FRAMES} frames gave detections\n{logs}'
    for s, d in dets.items():
        assert d['frame_id'] == FRAME_ID
        assert set(d['det_frame_ids']) <= {FRAME_ID} and set(d['det_stamps']) <= {s}

    # boxes, classes, scores equal the offline pipeline's for the same frame
    total_boxes = 0
    preds, truths, offline_preds = [], [], []
    for s, d in sorted(dets.items()):
        ref = offline[stamp_to_seed[s]].detections
        total_boxes += len(ref)
        assert d['class_ids'] == [str(int(k)) for k in ref.class_ids]      # vision_msgs: the id as a string
        np.testing.assert_allclose(np.array(d['scores']).reshape(-1), ref.scores, atol=1e-6)
        np.testing.assert_allclose(np.array(d['translations']).reshape(-1, 3), ref.translations, atol=1e-6)
        np.testing.assert_allclose(np.array(d['sizes']).reshape(-1, 3), ref.sizes, atol=1e-6)
        np.testing.assert_allclose(np.array(d['quaternions']).reshape(-1, 4), ref.quaternions_xyzw, atol=1e-6)
        q = np.array(d['quaternions']).reshape(-1, 4)
        R = quaternion_to_rotation(q) if len(q) else np.zeros((0, 3, 3))
        params = np.concatenate([np.array(d['translations']).reshape(-1, 3), rotation_to_6d(R).reshape(-1, 6),
                                 np.array(d['sizes']).reshape(-1, 3)], axis=1)
        labels = [int(c) for c in d['class_ids']]
        preds.append({'params': params, 'labels': labels})
        offline_preds.append({'params': np.concatenate([ref.translations, rotation_to_6d(ref.rotations).reshape(-1, 6),
                                                        ref.sizes], axis=1), 'labels': labels})
        truths.append(gts[stamp_to_seed[s]])
    assert total_boxes > 0, 'the model detected nothing: the comparison would be vacuous'
    iou_node, iou_offline = average_best_iou(preds, truths), average_best_iou(offline_preds, truths)
    print(f'[node dds] {total_boxes} boxes; average best 3D IoU vs ground truth: node {iou_node:.4f}, '
          f'offline {iou_offline:.4f}')
    assert iou_node >= iou_offline - 1e-6

    # markers: CUBE + TEXT per box with stable ids, DELETE for leftovers; embedding 32FC1 1 x E, same values
    labels = list(pipe.labels)
    assert got['label_info'] == {'names': labels, 'threshold': pytest.approx(pipe.params['score_threshold'])}
    assert len(got['markers']) >= 0.95 * FRAMES
    prev = 0
    for s, d in sorted(dets.items()):
        m = got['markers'].get(str(s))
        if m is None:
            continue
        k = len(d['class_ids'])
        adds = [x for x in m if x['action'] == 0]
        assert sorted((x['ns'], x['id']) for x in adds) == sorted([('boxes', i) for i in range(k)]
                                                                   + [('labels', i) for i in range(k)])
        assert all(x['type'] == 1 for x in adds if x['ns'] == 'boxes')          # CUBE
        assert all(x['type'] == 9 and x['text'] for x in adds if x['ns'] == 'labels')   # TEXT_VIEW_FACING
        for x in adds:
            if x['ns'] == 'boxes':
                np.testing.assert_allclose(x['scale'], d['sizes'][x['id']], atol=1e-6)
        deletes = sorted(x['id'] for x in m if x['action'] == 2 and x['ns'] == 'boxes')
        assert deletes == list(range(k, max(k, prev))), (k, prev, deletes)     # leftovers of the previous frame
        prev = k
    emb = {int(s): e for s, e in got['embedding'].items()}
    assert len(emb) >= 0.95 * FRAMES
    for s, e in emb.items():
        ref = offline[stamp_to_seed[s]].embedding
        assert (e['encoding'], e['height'], e['width'], e['frame_id']) == ('32FC1', 1, ref.shape[0], FRAME_ID)
        np.testing.assert_allclose(e['values'], ref, rtol=1e-5, atol=1e-6)

    # diagnostics published (1 Hz) with the promised keys
    assert got['diagnostics'], logs
    for key in ('latency_ms_p50', 'latency_ms_p95', 'inference_ms_p50', 'inference_ms_p95', 'output_rate_hz',
                'drops.stale', 'drops.unsynchronised', 'execution_provider', 'input_rate_hz[image]'):
        assert key in diag, key
    assert diag['execution_provider'] == 'CPUExecutionProvider'
    assert int(diag['published']) == n

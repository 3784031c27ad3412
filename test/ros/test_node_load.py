"""Load on the running node over loopback DDS (issue 7), through benchmarks/soak.py: a 200 Hz burst, a publisher
restart (with the node's socket footprint under load) and a 60 s soak at 30 Hz. The documented long runs are
``python -m benchmarks.soak --rate 200 --duration 10`` and ``--rate 30 --duration 600``."""
import json
import subprocess
import sys

import pytest

from test.support.ros_helpers import REPO, reserved_domain_id, ros_skip_reason

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(ros_skip_reason('vision_msgs') is not None,
                                 reason=str(ros_skip_reason('vision_msgs')))]

RTPS_BASE, RTPS_DOMAIN_GAIN = 7400, 250


def _soak(tmp_path, model_path, *args, timeout=240):
    out = tmp_path / 'figures.json'
    with reserved_domain_id() as domain:
        p = subprocess.run([sys.executable, '-m', 'benchmarks.soak', '--model', model_path, '--domain', str(domain),
                            '--json', str(out), '--workdir', str(tmp_path / 'work'), *args], cwd=REPO,
                           capture_output=True, text=True, timeout=timeout)
    logs = p.stdout[-3000:] + p.stderr[-3000:]
    assert p.returncode == 0, logs
    print('\n' + p.stdout.strip().splitlines()[-1])
    return json.loads(out.read_text()), logs


def _accounted(res):
    """The node's counters add up: every synchronised frame was processed or dropped as stale (1 may be in flight)."""
    node = {k: int(v) for k, v in res['node'].items() if k in ('synced', 'processed', 'drops.stale')}
    bad = sum(int(v) for v in res['bad_inputs'].values())
    return node['synced'] - node['processed'] - node['drops.stale'] - bad


def test_burst_200hz_latency_stays_bounded_and_drops_are_counted(tmp_path, model_path):
    res, logs = _soak(tmp_path, model_path, '--rate', '200', '--duration', '3', '--warmup', '0', '--sample', '0.25')
    assert res['crashes'] == 0 and res['node_rc'] == 0, logs
    assert res['sent_rate_hz'] > 120, res['sent_rate_hz']          # the publisher really offered a burst
    assert res['outputs'] > 0 and not res['bad_inputs'], res
    assert 0 <= _accounted(res) <= 1, res['node']                   # no frame lost without being counted
    # the burst exceeded the node: drops counted, as stale (worker hand-off) or as frames that never reached the
    # node (overwritten in the depth-1 input queue while the pipeline ran in the callback: the default)
    node = res['node']
    assert int(node['drops.stale']) + int(node['drops.not_received']) > 0, node
    # and every frame the publisher sent is accounted for: received or counted as not received (the first
    # frames, sent before discovery completed, are not the node's to count)
    assert int(node['inputs.image']) + int(node['drops.not_received']) <= res['sent'], (node, res['sent'])
    assert int(node['inputs.image']) + int(node['drops.not_received']) >= 0.8 * res['sent'], (node, res['sent'])
    lat = res['latency_ms']
    # newest frame wins, so no queue: latency bounded and not growing through the burst
    assert lat['p95'] < 1000 and lat['max'] < 2000, lat
    assert lat['p95_by_third'][-1] < 3 * lat['p95_by_third'][0] + 150, lat


def test_publisher_restart_resumes_and_the_node_opens_only_loopback_dds_sockets(tmp_path, model_path):
    # 10 Hz: within what the node sustains on 2 cores; on a loaded machine it answers fewer frames in BOTH phases,
    # so the restart is judged by phase 2 against phase 1 (a node that did not resume answers ~0 after it)
    res, logs = _soak(tmp_path, model_path, '--rate', '10', '--duration', '8', '--restart-at', '3.5',
                      '--restart-gap', '1.5', '--sample', '0.5')   # the DDS environment every test and the demo use
    assert res['crashes'] == 0 and res['node_rc'] == 0, logs
    first, second = res['outputs_per_phase']
    sent = [p['sent'] for p in res['phases']]
    assert first >= 0.5 * sent[0], (res['outputs_per_phase'], sent)
    assert second >= 0.8 * sent[1] * min(1.0, first / sent[0]), (res['outputs_per_phase'], sent)
    # sockets while frames flow: UDP only, bound to loopback, none connected, no TCP listener
    socks = res['sockets']
    inet = [s for s in socks if s['proto'] in ('tcp', 'tcp6', 'udp', 'udp6')]
    assert inet and all(s['proto'] == 'udp' for s in inet), socks
    assert all(s['local'][0] == '127.0.0.1' and s['remote'] == ['0.0.0.0', 0] for s in inet), socks
    base = RTPS_BASE + RTPS_DOMAIN_GAIN * res['domain']
    assert any(base <= s['local'][1] < base + RTPS_DOMAIN_GAIN for s in inet), socks   # the RTPS ports


def test_soak_60s_at_30hz_no_growth_no_crash_every_frame_answered_or_counted(tmp_path, model_path):
    res, logs = _soak(tmp_path, model_path, '--rate', '30', '--duration', '60', '--warmup', '15', timeout=300)
    assert res['crashes'] == 0 and res['node_rc'] == 0, logs
    assert abs(res['rss_mb']['growth_pct']) < 5.0, res['rss_mb']
    # How many frames the node keeps up with depends on the machine's load (benchmarks/soak.py reports it); what
    # must hold everywhere: every processed frame reached the listener (reliable output, 1 may be in flight) and
    # every synchronised frame was processed or counted as a stale drop
    assert res['outputs'] > 0 and abs(res['outputs'] - int(res['node']['processed'])) <= 1, (res['outputs'],
                                                                                           res['node'])
    assert 0 <= _accounted(res) <= 1, res['node']

"""Load on the running node over loopback DDS: burst, soak and publisher restart, with figures (issue 7).

    python -m benchmarks.soak --rate 30 --duration 600 --json soak.json          # 10-minute soak
    python -m benchmarks.soak --rate 200 --duration 10 --json burst.json         # 200 Hz burst
    python -m benchmarks.soak --rate 30 --duration 12 --restart-at 5 --restart-gap 2   # camera restarts

Three processes on their own ROS_DOMAIN_ID with the shipped loopback Fast DDS profile (``dds_env``): the node
(``python -m string_perception.ros.node``, CPU provider unless --providers), a publisher playing generated
640x480 rgb8 + 16UC1 + CameraInfo frames (best effort, stamped at publish time) at --rate, and a listener
recording every Detection3DArray (receive time - header stamp = end-to-end latency) and the node's /diagnostics.
With --restart-at the publisher process exits after that many seconds and a new one starts --restart-gap later.
This process samples the node's RSS (/proc) every --sample seconds and its sockets once under load.

Printed and written (--json): frames sent and achieved rate, outputs and output/input ratio, latency p50/p95/max
(and p95 per third of the run: growth would show a queue), the node's own counters (synced, processed, drops by
reason, bad inputs), RSS after --warmup seconds vs at the end (growth %), crashes, per-phase outputs.
Nothing here asserts; test/ros/test_node_load.py runs it briefly and checks the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

S = 1_000_000_000
PREFIX = '/sp_load'
NODE_NS = '/string_perception'


# ------------------------------------------------------------------------------------------------ /proc readers
def rss_bytes(pid: int) -> int:
    """Resident set size of a process (bytes) from /proc/<pid>/status; 0 when it is gone."""
    try:
        for line in Path(f'/proc/{pid}/status').read_text().splitlines():
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _hex_addr(text: str) -> tuple[str, int]:
    """'0100007F:1CE8' (/proc/net/udp) -> ('127.0.0.1', 7400); IPv6 as its 32 hex digits."""
    host, port = text.split(':')
    if len(host) == 8:
        host = '.'.join(str(b) for b in bytes.fromhex(host)[::-1])
    return host, int(port, 16)


def process_sockets(pid: int) -> list[dict]:
    """Every socket the process holds: {'proto': tcp|tcp6|udp|udp6|unix|other, 'local', 'remote', 'state'}."""
    inodes = set()
    fd_dir = Path(f'/proc/{pid}/fd')
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(int(target[8:-1]))
    found = []
    for proto in ('tcp', 'tcp6', 'udp', 'udp6', 'unix'):
        try:
            rows = Path(f'/proc/{pid}/net/{proto}').read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if proto == 'unix':
                if len(f) >= 7 and int(f[6]) in inodes:
                    inodes.discard(int(f[6]))
                    found.append({'proto': 'unix', 'local': f[7] if len(f) > 7 else '', 'remote': '', 'state': f[5]})
                continue
            if int(f[9]) in inodes:
                inodes.discard(int(f[9]))
                found.append({'proto': proto, 'local': _hex_addr(f[1]), 'remote': _hex_addr(f[2]), 'state': f[3]})
    found += [{'proto': 'other', 'local': '', 'remote': '', 'state': str(i)} for i in sorted(inodes)]
    return found


def _pct(values, q):
    return float(np.percentile(values, q)) if len(values) else float('nan')


# ------------------------------------------------------------------------------------------------ peer roles
def _qos(best_effort: bool, depth: int):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.VOLATILE,
                      reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE)


def role_publish(a) -> int:
    import rclpy
    from sensor_msgs.msg import CameraInfo, Image

    from string_perception.codec.image_conversion import array_to_imgmsg
    from string_perception.scenes import SceneConfig, generate_frame

    rclpy.init()
    node = rclpy.create_node('sp_load_publisher')
    pubs = [node.create_publisher(t, f'{PREFIX}/{n}', _qos(True, 5))
            for n, t in (('image', Image), ('depth', Image), ('camera_info', CameraInfo))]
    frames = []
    for seed in range(2_000_000_000, 2_000_000_000 + a.distinct):
        f = generate_frame(seed, SceneConfig(height=480, width=640))
        info = CameraInfo(height=480, width=640, distortion_model='plumb_bob', k=[float(v) for v in f.K.reshape(-1)])
        msgs = (array_to_imgmsg(f.rgb, 'rgb8'), array_to_imgmsg(f.depth_mm, '16UC1'), info)
        for m in msgs:
            m.header.frame_id = 'camera_color_optical_frame'
        frames.append(msgs)
    out = {'sent': 0, 'first_stamp': None, 'last_stamp': None}
    try:
        t0 = time.monotonic()
        while any(p.get_subscription_count() < 1 for p in pubs):
            if time.monotonic() - t0 > 60:
                print('node not subscribed after 60 s', flush=True)
                return 2
            time.sleep(0.02)
        time.sleep(0.3)
        start, period = time.monotonic(), 1.0 / a.rate
        while True:
            due = start + out['sent'] * period
            if due - start >= a.seconds:
                break
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            msgs = frames[out['sent'] % len(frames)]
            stamp = node.get_clock().now().to_msg()
            for p, m in zip(pubs, msgs):
                m.header.stamp = stamp
                p.publish(m)
            out['sent'] += 1
            ns = stamp.sec * S + stamp.nanosec
            out['first_stamp'] = out['first_stamp'] or ns
            out['last_stamp'] = ns
        out['publish_s'] = time.monotonic() - start
        return 0
    finally:
        Path(a.out).write_text(json.dumps(out))
        node.destroy_node()
        rclpy.try_shutdown()


def role_listen(a) -> int:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from vision_msgs.msg import Detection3DArray

    rclpy.init()
    node = rclpy.create_node('sp_load_listener')
    stamps, recv, diag = [], [], {}

    def on_det(msg):
        recv.append(time.time_ns())
        stamps.append(msg.header.stamp.sec * S + msg.header.stamp.nanosec)

    def on_diag(msg):
        for st in msg.status:
            if st.name.startswith('string_perception'):
                diag.clear()
                diag.update({kv.key: kv.value for kv in st.values})

    node.create_subscription(Detection3DArray, f'{NODE_NS}/detections', on_det, _qos(False, 100))
    node.create_subscription(DiagnosticArray, '/diagnostics', on_diag, _qos(False, 10))
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    try:
        while not os.path.exists(a.stop):
            ex.spin_once(timeout_sec=0.05)
            if node.count_publishers(f'{NODE_NS}/detections') and not os.path.exists(a.ready):
                Path(a.ready).write_text('ready')
        end = time.monotonic() + 1.5                       # one more diagnostics period
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.05)
        Path(a.out).write_text(json.dumps({'stamps': stamps, 'recv': recv, 'diagnostics': diag}))
        return 0
    finally:
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


# ------------------------------------------------------------------------------------------------ orchestrator
def _env(domain: int, localhost_range: bool | None = None) -> dict:
    from string_perception.dds_env import merged_dds_env
    env = merged_dds_env(domain, localhost_only=localhost_range)
    env['PYTHONUNBUFFERED'] = '1'
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(REPO), env.get('PYTHONPATH', '')) if p)
    env.setdefault('OMP_NUM_THREADS', '1')
    return env


def _start(args, env, log_path):
    with open(log_path, 'wb') as log:
        return subprocess.Popen([sys.executable, *args], env=env, cwd=str(REPO), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(p: subprocess.Popen, grace: float = 5.0):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if p.poll() is not None:
            break
        try:
            os.killpg(p.pid, sig)
            p.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue
    return p.poll()


def run(a) -> dict:
    from string_perception.ros.node import DEFAULT_MODEL, READY_LINE, node_command
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    env = _env(a.domain, {'default': None, 'localhost': True, 'subnet': False}[a.discovery_range])
    model = a.model
    if not model:
        from string_perception.paths import model_file
        model = str(model_file(DEFAULT_MODEL))
    me = ['-m', 'benchmarks.soak']           # this module's roles, in the children (cwd and PYTHONPATH: REPO)
    cmd = node_command(model, params={'providers': a.providers, 'diagnostics_period': 1.0},
                       remaps={n: f'{PREFIX}/{n}' for n in ('image', 'depth', 'camera_info')})
    stop, ready = work / 'stop', work / 'listener_ready'
    for f in (stop, ready):
        f.unlink(missing_ok=True)
    procs = {'node': _start(cmd[1:], env, work / 'node.log')}
    procs['listener'] = _start([*me, '--role', 'listen', '--out', str(work / 'listener.json'), '--stop', str(stop),
                                '--ready', str(ready)], env, work / 'listener.log')
    res = {'rate_hz': a.rate, 'duration_s': a.duration, 'model': model, 'crashes': 0, 'rss': [], 'phases': []}
    try:
        t0 = time.monotonic()
        while READY_LINE not in (work / 'node.log').read_text(errors='replace') or not ready.exists():
            if procs['node'].poll() is not None or time.monotonic() - t0 > 90:
                raise RuntimeError('node did not start:\n' + (work / 'node.log').read_text(errors='replace')[-3000:])
            time.sleep(0.1)
        phases = [(0.0, a.restart_at or a.duration)]
        if a.restart_at:
            phases.append((a.restart_at + a.restart_gap, a.duration))
        start = time.monotonic()
        for k, (begin, end) in enumerate(phases):
            while time.monotonic() - start < begin:
                time.sleep(0.05)
            out = work / f'publisher{k}.json'
            pub = _start([*me, '--role', 'publish', '--rate', str(a.rate), '--seconds', str(end - begin),
                          '--out', str(out), '--distinct', str(a.distinct)], env, work / f'publisher{k}.log')
            next_sample, socket_check = time.monotonic(), begin + (end - begin) / 2
            while pub.poll() is None:
                now = time.monotonic()
                if now >= next_sample:
                    res['rss'].append((round(now - start, 2), rss_bytes(procs['node'].pid)))
                    next_sample += a.sample
                if 'sockets' not in res and now - start >= socket_check:
                    res['sockets'] = process_sockets(procs['node'].pid)
                if procs['node'].poll() is not None:
                    res['crashes'] += 1
                    break
                time.sleep(0.02)
            pub.wait(timeout=30)
            res['phases'].append({'publisher_rc': pub.returncode, **json.loads(out.read_text())})
        time.sleep(1.0)                                      # drain
        res['node_alive'] = procs['node'].poll() is None
        res['crashes'] += 0 if res['node_alive'] else 1
    finally:
        stop.write_text('stop')
        try:
            procs['listener'].wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        res['node_rc'] = _stop(procs['node'])
        _stop(procs['listener'])
    lis = json.loads((work / 'listener.json').read_text())
    res['domain'] = a.domain
    return summarise(res, lis, a)


def rss_figures(rss: list[int]) -> dict:
    """MiB: median of the first and of the last tenth of the samples after warm-up (single samples jitter by a few
    MiB as the allocator breathes), their growth in %, and the maximum."""
    if not rss:
        return {'after_warmup': None, 'end': None, 'max': None, 'growth_pct': None}
    k = max(1, len(rss) // 10)
    first, last = float(np.median(rss[:k])), float(np.median(rss[-k:]))
    return {'after_warmup': first / 2**20, 'end': last / 2**20, 'max': max(rss) / 2**20,
            'growth_pct': 100.0 * (last - first) / first}


def summarise(res: dict, lis: dict, a) -> dict:
    stamps, recv = np.array(lis['stamps'], np.int64), np.array(lis['recv'], np.int64)
    lat = (recv - stamps) / 1e6                                       # ms, stamp -> listener
    sent = sum(p['sent'] for p in res['phases'])
    seconds = sum(p.get('publish_s', 0.0) for p in res['phases'])
    thirds = np.array_split(lat, 3) if len(lat) >= 3 else [lat]
    rss = [b for t, b in res['rss'] if t >= a.warmup] or [b for _, b in res['rss']]
    diag = lis['diagnostics']
    per_phase = [int(np.sum((stamps >= p['first_stamp']) & (stamps <= p['last_stamp'])))
                 if p['first_stamp'] else 0 for p in res['phases']]
    res.update({
        'sent': sent, 'sent_rate_hz': sent / seconds if seconds else 0.0, 'outputs': int(len(stamps)),
        'output_ratio': len(stamps) / sent if sent else 0.0,
        'latency_ms': {'p50': _pct(lat, 50), 'p95': _pct(lat, 95), 'max': float(lat.max()) if len(lat) else None,
                       'p95_by_third': [_pct(t, 95) for t in thirds]},
        'node': {k: diag.get(k) for k in ('inputs.image', 'synced', 'processed', 'drops.stale',
                                          'drops.not_received', 'drops.unsynchronised', 'latency_ms_p95',
                                          'inference_ms_p50', 'execution_provider')},
        'bad_inputs': {k: v for k, v in diag.items() if k.startswith('bad_inputs.')},
        'rss_mb': rss_figures(rss),
        'outputs_per_phase': per_phase,
    })
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--role', choices=('run', 'publish', 'listen'), default='run', help=argparse.SUPPRESS)
    ap.add_argument('--rate', type=float, default=30.0, help='frames per second offered to the node')
    ap.add_argument('--duration', type=float, default=60.0, help='seconds of publishing (all phases)')
    ap.add_argument('--restart-at', type=float, default=0.0, help='stop the publisher after this many s (0: never)')
    ap.add_argument('--restart-gap', type=float, default=2.0, help='seconds before the new publisher starts')
    ap.add_argument('--model', default='', help='ONNX model (default: the shipped one)')
    ap.add_argument('--providers', nargs='+', default=['CPUExecutionProvider'])
    ap.add_argument('--domain', type=int, default=1 + os.getpid() % 101, help='ROS_DOMAIN_ID (1..101)')
    ap.add_argument('--warmup', type=float, default=10.0, help='seconds before the RSS reference sample')
    ap.add_argument('--sample', type=float, default=1.0, help='seconds between RSS samples')
    ap.add_argument('--distinct', type=int, default=4, help='distinct scenes the publisher cycles through')
    ap.add_argument('--discovery-range', choices=('default', 'localhost', 'subnet'), default='default',
                    help='ROS_AUTOMATIC_DISCOVERY_RANGE (default: as dds_env.py sets it: SUBNET with the profile)')
    ap.add_argument('--workdir', default='', help='logs and intermediate files (default: a temporary dir)')
    ap.add_argument('--json', default='', help='write the figures here')
    # roles
    ap.add_argument('--seconds', type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument('--out', default='', help=argparse.SUPPRESS)
    ap.add_argument('--stop', default='', help=argparse.SUPPRESS)
    ap.add_argument('--ready', default='', help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.role == 'publish':
        return role_publish(a)
    if a.role == 'listen':
        return role_listen(a)
    import tempfile
    with tempfile.TemporaryDirectory(prefix='sp_soak_') as tmp:
        a.workdir = a.workdir or tmp
        res = run(a)
    text = json.dumps(res, indent=1, default=str)
    if a.json:
        Path(a.json).write_text(text)
    lat, rss, node = res['latency_ms'], res['rss_mb'], res['node']
    print(f"sent {res['sent']} frames at {res['sent_rate_hz']:.1f} Hz; outputs {res['outputs']} "
          f"({100 * res['output_ratio']:.1f} %, per phase {res['outputs_per_phase']}); latency p50 {lat['p50']:.1f} "
          f"p95 {lat['p95']:.1f} max {lat['max']} ms, p95 by third {[round(v, 1) for v in lat['p95_by_third']]}; "
          f"node: synced {node['synced']} processed {node['processed']} stale {node['drops.stale']} "
          f"not received {node['drops.not_received']} "
          f"unsynchronised {node['drops.unsynchronised']} inference p50 {node['inference_ms_p50']} ms; "
          f"RSS {rss['after_warmup']:.1f} -> {rss['end']:.1f} MiB ({rss['growth_pct']:+.2f} %); "
          f"crashes {res['crashes']}; node rc {res['node_rc']}")
    return 0


if __name__ == '__main__':
    sys.exit(main())

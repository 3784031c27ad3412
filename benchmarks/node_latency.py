"""The node's latency budget at camera rate, side by side for node settings, against the bare pipeline (issue 22).

    python -m benchmarks.node_latency --rate 30 --duration 20                          # old vs new, 20 s each
    python -m benchmarks.node_latency --variants old zero_copy skip_unsubscribed threads1 no_spin events new
    python -m benchmarks.node_latency --variants new --duration 600 --json soak.json  # the 10-minute goal run
    python -m benchmarks.node_latency --variants new intra_op_threads=2,executor=events   # ad-hoc settings

Per variant (a named set of node parameters, :data:`VARIANTS`, or ``key=value,...`` over the defaults): the bare
pipeline (``runtime.Pipeline`` in this process, same ORT thread settings) on the same generated 640x480 frames at
the same rate for ``--bare-seconds`` (half before the node runs, half after, so a drifting machine load hits both),
then two processes on their own ROS_DOMAIN_ID with the shipped loopback Fast DDS profile: the node and a camera
publisher (``benchmarks/soak.py``'s, rgb8 + 16UC1 + CameraInfo, best effort, stamped at publish time). Nothing else
subscribes (``--listen`` adds a detections listener). The node writes each frame's stage latencies to its
``latency_log``; this process samples the node's RSS every second.

Printed per variant: each stage's p50 / p99 / mean and share of stamp -> done, frames answered (detections
published / frames sent), RSS growth after ``--warmup``, the bare pipeline's p50 / p99 and the ratios node / bare
(stamp -> detections published); then one line per variant side by side; the machine load (1-min load average,
cores) with every figure. Nothing asserts; test/ros/test_node_latency.py runs it briefly and checks the report.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.soak import PREFIX, rss_bytes, rss_figures  # the soak's publisher and RSS figures
from string_perception.domain_reservation import reserved_domain_id
from string_perception.runtime.model_variant import node_model_choice

REPO = Path(__file__).resolve().parent.parent
SOAK = ['-m', 'benchmarks.soak']       # its publisher and listener roles, in the children (cwd and PYTHONPATH: REPO)
FIRST_SEED, H, W = 2_000_000_000, 480, 640
INPUT_DEPTH_5 = {f'{i}_qos_depth': 5 for i in ('image', 'depth', 'camera_info')}   # the input queues before 3rd round
BEFORE_CUTS = {'raw_image_input': False, 'reuse_output_messages': False, 'inline_processing': False, **INPUT_DEPTH_5}
INPUT_DEPTH_1 = {f'{i}_qos_depth': 1 for i in ('image', 'depth', 'camera_info')}
# the node before issue 22 (copying decode, every output built, ORT defaults, single-threaded executor)
OLD = {'zero_copy_input': False, 'skip_unsubscribed_outputs': False, 'intra_op_threads': 0,
       'intra_op_spinning': True, 'executor': 'single_threaded', **BEFORE_CUTS}
VARIANTS = {
    'old': OLD,
    'zero_copy': {**OLD, 'zero_copy_input': True},
    'skip_unsubscribed': {**OLD, 'skip_unsubscribed_outputs': True},
    'no_spin': {**OLD, 'intra_op_spinning': False},
    'threads1': {**OLD, 'intra_op_threads': 1},
    'threads2': {**OLD, 'intra_op_threads': 2},
    'events': {**OLD, 'executor': 'events'},
    'multi_threaded': {**OLD, 'executor': 'multi_threaded'},
    'new': {},                                 # the node's defaults (node_params.py)
    # issue 22, second round: the defaults before it (rclpy-converted images, new output messages per frame, worker
    # hand-off), each cut on its own over those, then together
    'before_cuts': BEFORE_CUTS,
    'raw_input': {**BEFORE_CUTS, 'raw_image_input': True},   # serialized Image read by codec/image_cdr.py
    # pipeline in the synchroniser callback (no worker hand-off); input queues of 1 so that DDS keeps only the
    # newest frame while the model runs (latest wins, as the worker's hand-off does)
    'inline': {**BEFORE_CUTS, 'inline_processing': True, **INPUT_DEPTH_1},
    'raw_inline': {**BEFORE_CUTS, 'raw_image_input': True, 'inline_processing': True, **INPUT_DEPTH_1},
    'reuse_msgs': {**BEFORE_CUTS, 'reuse_output_messages': True},   # Detection3DArray refilled, not constructed
    'all_cuts': {'raw_image_input': True, 'inline_processing': True, **INPUT_DEPTH_1, 'reuse_output_messages': True},
    # third round: the defaults of the second round (worker hand-off, input queues of 5), against 'new' (inline)
    'worker': {'inline_processing': False, **INPUT_DEPTH_5},
}


def variant_params(spec: str) -> dict:
    """A :data:`VARIANTS` name, or ``key=value,...`` (JSON values, else strings) over the node's defaults."""
    if spec in VARIANTS:
        return dict(VARIANTS[spec])
    out = {}
    for item in spec.split(','):
        key, sep, value = item.partition('=')
        if not sep:
            raise SystemExit(f'variant {spec!r}: not one of {", ".join(VARIANTS)} nor key=value,...')
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def load() -> str:
    la = os.getloadavg()
    return f'load avg {la[0]:.2f}/{la[1]:.2f} (1/5 min) on {os.cpu_count()} cores'


def _pct(values, q):
    return float(np.percentile(values, q)) if len(values) else float('nan')


# ------------------------------------------------------------------------------------------------ bare pipeline
def make_frames(distinct: int):
    from string_perception.scenes import SceneConfig, generate_frame
    return [generate_frame(FIRST_SEED + i, SceneConfig(height=H, width=W)) for i in range(distinct)]


def bare_pipeline(model: str, frames, rate: float, seconds: float, params: dict) -> list[float]:
    """``runtime.Pipeline`` total ms per frame (preprocess + inference + postprocess + tracking), paced at ``rate``,
    on the file the node runs for ``model`` (``runtime.model_variant.node_model_choice``)."""
    from string_perception import node_params as P
    from string_perception.runtime import Pipeline
    cfg = {**P.defaults(), **params}
    # the file the node runs (its int8 sibling on VNNI / AMX CPUs), so node / bare compares like with like
    pipe = Pipeline(node_model_choice(model).path, providers=('CPUExecutionProvider',),
                    intra_op_threads=cfg['intra_op_threads'] or None,
                    intra_op_spinning=cfg['intra_op_spinning'])
    pipe.set_params(score_threshold=P.effective_score_threshold(-1.0, pipe.model.metadata))
    pipe.set_tracking(P.tracker_config(cfg))                  # the node's tracking stage, as configured
    totals, start, n = [], time.monotonic(), int(round(seconds * rate))
    for i in range(n):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        f = frames[i % len(frames)]
        r = pipe(f.rgb, f.depth_mm, f.K, encoding='rgb8', depth_encoding='16UC1', intrinsics_hw=(H, W),
                 stamp_s=i / rate)
        totals.append(r.timings['total_ms'])
    return totals


# ------------------------------------------------------------------------------------------------ node run
def run_node(a, model: str, params: dict, work: Path, domain: int) -> dict:
    """Node + camera publisher for ``a.duration`` s; the per-frame stage records, frames sent, RSS samples."""
    from string_perception.child_process import ChildProcess
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import READY_LINE, node_command
    env = merged_dds_env(domain)
    env['PYTHONUNBUFFERED'] = '1'
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(REPO), env.get('PYTHONPATH', '')) if p)
    log = work / 'stages.jsonl'
    log.unlink(missing_ok=True)
    cmd = node_command(model, params={'providers': ['CPUExecutionProvider'], 'diagnostics_period': 1.0,
                                       'latency_log': str(log), **params},
                       remaps={n: f'{PREFIX}/{n}' for n in ('image', 'depth', 'camera_info')})
    procs = [ChildProcess('node', cmd, env, work / 'node.log', cwd=REPO)]
    out = {'rss': [], 'node_alive': False}
    try:
        if not procs[0].wait_for_line(READY_LINE, 300):
            raise RuntimeError(f'node did not start:\n{procs[0].log()}')
        if a.listen:
            procs.append(ChildProcess('listener', [sys.executable, *SOAK, '--role', 'listen', '--out',
                                                   str(work / 'listener.json'), '--stop', str(work / 'stop'),
                                                   '--ready', str(work / 'ready')], env, work / 'listener.log',
                                      cwd=REPO))
        pub_out = work / 'publisher.json'
        pub = ChildProcess('publisher', [sys.executable, *SOAK, '--role', 'publish', '--rate', str(a.rate),
                                         '--seconds', str(a.duration), '--out', str(pub_out), '--distinct',
                                         str(a.distinct)], env, work / 'publisher.log', cwd=REPO)
        procs.append(pub)
        start, next_sample = time.monotonic(), time.monotonic()
        out['load_start'] = load()
        while pub.popen.poll() is None:
            now = time.monotonic()
            if now >= next_sample:
                out['rss'].append((now - start, rss_bytes(procs[0].pid)))
                next_sample += 1.0
            if procs[0].popen.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(1.0)                                        # the last frames
        out['load_end'] = load()
        out['node_alive'] = procs[0].popen.poll() is None
        out['publisher'] = json.loads(pub_out.read_text()) if pub_out.exists() else {'sent': 0}
    finally:
        (work / 'stop').write_text('stop')
        for p in reversed(procs):
            p.stop()
    out['node_rc'] = procs[0].popen.poll()
    from string_perception.ros.latency import StageLog
    out['records'] = StageLog.read(str(log)) if log.exists() else []
    return out


# ------------------------------------------------------------------------------------------------ figures
def stage_table(records: list[dict]) -> dict[str, dict]:
    """{stage: {count, p50, p99, mean, share}} over every record (share = mean / mean stamp_to_done)."""
    from string_perception.ros.latency import STAGES, TOTALS
    names = [*STAGES, *TOTALS, *sorted({k for r in records for k in r} - set(STAGES) - set(TOTALS) - {'stamp_ns'})]
    done = [r['stamp_to_done'] for r in records if 'stamp_to_done' in r]
    done_mean = float(np.mean(done)) if done else float('nan')
    table = {}
    for s in names:
        v = np.array([r[s] for r in records if s in r], np.float64)
        table[s] = {'count': int(v.size), 'p50': _pct(v, 50), 'p99': _pct(v, 99),
                    'mean': float(v.mean()) if v.size else float('nan'),
                    'share': float(v.mean()) / done_mean if v.size else float('nan')}
    return table


def _answered(run: dict) -> list[dict]:
    """The stage records of the frames this run's publisher sent."""
    first, last = run['publisher'].get('first_stamp'), run['publisher'].get('last_stamp')
    return [r for r in run['records'] if first is not None and first <= r['stamp_ns'] <= last]


def summarise(name: str, params: dict, runs: list[dict], bare: list[float], a) -> dict:
    """Figures over one or more runs (``--rounds``) of a variant; RSS growth: the largest of a run's."""
    sent = sum(run['publisher'].get('sent', 0) for run in runs)
    recs = [r for run in runs for r in _answered(run)]
    table = stage_table(recs)
    det, bare_p50, bare_p99 = table['stamp_to_detections'], _pct(bare, 50), _pct(bare, 99)
    # load-robust companion: the same frame's pipeline stages inside the node (no run-to-run load drift)
    inner = np.array([sum(r.get(s, 0.0) for s in ('preprocess', 'inference', 'postprocess', 'tracking'))
                      for r in recs])
    outer = np.array([r['stamp_to_detections'] for r in recs])
    growth = [rss_figures([b for t, b in run['rss'] if t >= a.warmup] or [b for _, b in run['rss']])
              for run in runs]
    run = runs[-1]
    return {'variant': name, 'params': params, 'rate_hz': a.rate, 'duration_s': a.duration, 'sent': sent,
            'answered': len(recs), 'answered_pct': 100.0 * len(recs) / sent if sent else 0.0,
            'stages': table, 'bare_ms': {'p50': bare_p50, 'p99': bare_p99, 'frames': len(bare)},
            'ratio_p50': det['p50'] / bare_p50, 'ratio_p99': det['p99'] / bare_p99,
            'in_node_pipeline_ms': {'p50': _pct(inner, 50), 'p99': _pct(inner, 99)},
            'ratio_in_node_p50': _pct(outer, 50) / _pct(inner, 50) if len(recs) else float('nan'),
            'ratio_in_node_p99': _pct(outer, 99) / _pct(inner, 99) if len(recs) else float('nan'),
            'overhead_ms': {'p50': _pct(outer - inner, 50), 'p99': _pct(outer - inner, 99)},
            'rss_mb': max(growth, key=lambda g: g['growth_pct'] or 0.0), 'rounds': len(runs),
            'rss_series_mb': [(round(t, 1), round(b / 2**20, 2)) for t, b in run['rss'][::10]],   # every 10 s
            'node_alive': all(r['node_alive'] for r in runs), 'node_rc': [r['node_rc'] for r in runs],
            'load': {'start': runs[0].get('load_start'), 'end': run.get('load_end'), 'bare': runs[0].get('load_bare')}}


def print_variant(res: dict) -> None:
    print(f"\n== {res['variant']} {json.dumps(res['params'])}: {res['rate_hz']:g} Hz for {res['rounds']} x "
          f"{res['duration_s']:g} s; "
          f"{res['load']['start']} at start, {res['load']['end']} at end")
    print(f"{'stage':22s} {'count':>6s} {'p50 ms':>8s} {'p99 ms':>8s} {'mean ms':>8s} {'share':>7s}")
    for s, f in res['stages'].items():
        if f['count']:
            print(f"{s:22s} {f['count']:6d} {f['p50']:8.2f} {f['p99']:8.2f} {f['mean']:8.2f} {100 * f['share']:6.1f}%")
        else:
            print(f"{s:22s} {0:6d} {'-':>8s} {'-':>8s} {'-':>8s} {'-':>7s}")
    rss, b = res['rss_mb'], res['bare_ms']
    print(f"answered {res['answered']}/{res['sent']} frames ({res['answered_pct']:.1f} %); RSS "
          f"{rss['after_warmup'] or 0:.1f} -> {rss['end'] or 0:.1f} MiB ({(rss['growth_pct'] or 0):+.2f} %); bare "
          f"pipeline p50 {b['p50']:.2f} p99 {b['p99']:.2f} ms ({b['frames']} frames, {res['load']['bare']}); "
          f"node/bare p50 {res['ratio_p50']:.2f}x p99 {res['ratio_p99']:.2f}x; node / its own pipeline stages "
          f"(same frames) p50 {res['ratio_in_node_p50']:.2f}x p99 {res['ratio_in_node_p99']:.2f}x, overhead p50 "
          f"{res['overhead_ms']['p50']:.2f} p99 {res['overhead_ms']['p99']:.2f} ms; node rc {res['node_rc']}")


def print_side_by_side(results: list[dict]) -> None:
    print(f"\n{'variant':18s} {'answered':>9s} {'det p50':>8s} {'det p99':>8s} {'bare p50':>8s} {'bare p99':>8s} "
          f"{'x p50':>6s} {'x p99':>6s} {'xin50':>6s} {'ovh50':>6s} {'transp':>7s} {'sync':>6s} {'queue':>6s} "
          f"{'decode':>7s} {'infer':>6s} "
          f"{'pub all':>7s} {'RSS %':>6s}  load (1 min, start/end)")
    for r in results:
        st = r['stages']
        pub = sum(st[s]['mean'] for s in st if s.startswith('publish_') and st[s]['count'])
        print(f"{r['variant'][:18]:18s} {r['answered_pct']:8.1f}% {st['stamp_to_detections']['p50']:8.2f} "
              f"{st['stamp_to_detections']['p99']:8.2f} {r['bare_ms']['p50']:8.2f} {r['bare_ms']['p99']:8.2f} "
              f"{r['ratio_p50']:6.2f} {r['ratio_p99']:6.2f} {r['ratio_in_node_p50']:6.2f} "
              f"{r['overhead_ms']['p50']:6.2f} {st['transport']['p50']:7.2f} {st['sync_wait']['p50']:6.2f} "
              f"{st['queue_wait']['p50']:6.2f} {st['decode']['p50']:7.3f} {st['inference']['p50']:6.2f} {pub:7.2f} "
              f"{(r['rss_mb']['growth_pct'] or 0):+6.2f}  {r['load']['start'].split(' (')[0][9:]} / "
              f"{r['load']['end'].split(' (')[0][9:]}")
    print('(ms; det = header stamp -> detections published in the node; x = node / bare pipeline; xin50 = p50 node / '
          'its own preprocess+inference+postprocess+tracking on the same frames; ovh50 = p50 of det minus '
          'those; pub all = '
          'mean build+publish of every output; transp/sync/queue/decode/infer = p50)')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--variants', nargs='+', default=['old', 'new'],
                    help=f'named ({", ".join(VARIANTS)}) or key=value,... node parameter sets, run in this order')
    ap.add_argument('--rate', type=float, default=30.0, help='frames per second offered to the node')
    ap.add_argument('--duration', type=float, default=20.0, help='seconds of publishing per variant')
    ap.add_argument('--rounds', type=int, default=1,
                    help='cycle through the variants this many times (interleaved, against load drift) and pool')
    ap.add_argument('--bare-seconds', type=float, default=10.0, help='seconds of bare pipeline per variant')
    ap.add_argument('--warmup', type=float, default=5.0, help='seconds before the RSS reference sample')
    ap.add_argument('--distinct', type=int, default=4, help='distinct generated scenes cycled through')
    ap.add_argument('--model', default='', help='ONNX model (default: the shipped one)')
    ap.add_argument('--listen', action='store_true', help='also run a detections listener process')
    ap.add_argument('--domain', type=int, default=0, help='ROS_DOMAIN_ID (default: a free one in 1..101)')
    ap.add_argument('--workdir', default='', help='keep logs and stage records here (default: a temporary dir)')
    ap.add_argument('--json', default='', help='write every figure here')
    a = ap.parse_args(argv)
    specs = [(v, variant_params(v)) for v in a.variants]
    model = a.model
    if not model:
        from string_perception.paths import model_file
        from string_perception.ros.node import DEFAULT_MODEL
        model = str(model_file(DEFAULT_MODEL))
    frames = make_frames(a.distinct)
    results = []
    with tempfile.TemporaryDirectory(prefix='sp_node_latency_') as tmp, \
            reserved_domain_id(a.domain or None) as domain:
        root = Path(a.workdir or tmp)
        print(f'[node_latency] model {model} (runs {node_model_choice(model).path.name}); {a.rate:g} Hz, '
              f'{a.duration:g} s per variant; ROS_DOMAIN_ID {domain}; '
              f'{load()}', flush=True)
        pooled = {name: ([], []) for name, _ in specs}          # variant -> (runs, bare ms)
        for k in range(a.rounds):
            for name, params in specs:
                work = root / f"{name.replace('/', '_').replace(',', '_')}_{k}"
                work.mkdir(parents=True, exist_ok=True)
                bare_load = load()
                bare = bare_pipeline(model, frames, a.rate, a.bare_seconds / 2, params)
                run = run_node(a, model, params, work, domain)
                bare += bare_pipeline(model, frames, a.rate, a.bare_seconds / 2, params)
                run['load_bare'] = bare_load
                pooled[name][0].append(run)
                pooled[name][1].extend(bare)
                if a.rounds > 1:
                    print(f'[node_latency] round {k + 1}/{a.rounds} {name}: answered {len(_answered(run))}/'
                          f"{run['publisher'].get('sent', 0)}; {run.get('load_end')}", flush=True)
        for name, params in specs:
            res = summarise(name, params, *pooled[name], a)
            print_variant(res)
            sys.stdout.flush()
            results.append(res)
    print_side_by_side(results)
    if a.json:
        Path(a.json).write_text(json.dumps({'machine': {'cores': os.cpu_count()}, 'model': model,
                                            'results': results}, indent=1, default=str))
    return 0 if all(r['node_alive'] and r['answered'] for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())

"""An ALOHA policy over ROS vs offline, side by side (issue 23 item 4): the same seeds, the same ONNX files; the
task (transfer-cube or insertion) is the policy file's.

    python -m benchmarks.aloha_ros_loop --seeds 1000:1005 --policy runs/aloha_policy/bc/policy.onnx \
        --perception runs/aloha_policy/bc/perception.onnx --json runs/aloha_ros_loop/result.json
    python -m benchmarks.aloha_ros_loop --seeds 0:3 --steps 100          # linear TEST policy: plumbing only

ROS: string-perception-sim-aloha (lockstep: every control step publishes the top camera, /joint_states, /clock and
waits for the command with that stamp) -> perception node -> policy node, three processes on loopback DDS (own
ROS_DOMAIN_ID). Offline: sim/demos/rollout.run_episode with OnnxActor (the same perception + policy files, runtime
classes, in one process; renders only query steps). Reported per loop: success rate, mean max reward stage,
control steps per wall second, and for ROS the image-stamp -> command latency p50 / p99 and misses (timeouts).

Without ``--policy`` a linear test policy (runtime/linear_policy.make_linear_policy, random weights, the perception
model's embedding size, chunk 50 / query every 10 / m 0.01 like the BC policy) is used: it cannot solve the task,
so only the plumbing, rate and latency are measured. The CPU is shared; the load average is printed and stored.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402

from string_perception.cli import parse_seed_range  # noqa: E402
from string_perception.domain_reservation import reserved_domain_id  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def load() -> str:
    return 'load average ' + ' '.join(f'{x:.2f}' for x in os.getloadavg())


def parse_seeds(text: str) -> list[int]:
    if ':' in text:
        return list(parse_seed_range(text))
    return [int(s) for s in text.split(',')]


def linear_test_policy(path: Path, embed_dim: int) -> Path:
    import onnx

    from string_perception.runtime.policy_model import PolicyMetadata
    from string_perception.runtime.linear_policy import make_linear_policy
    from string_perception.sim.demos.rollout import JOINT_NAMES
    meta = PolicyMetadata(chunk_size=50, embed_dim=embed_dim, joint_names=JOINT_NAMES, control_rate_hz=50.0,
                          temporal_ensemble_m=0.01, query_every=10, task='aloha_transfer_cube (linear TEST policy)')
    onnx.save(make_linear_policy(meta, seed=0), str(path))
    return path


def policy_task(policy: str) -> str:
    """The sim task a policy file was trained for (its metadata task 'aloha_<task>'; the linear TEST policy and
    unknown tasks: transfer_cube)."""
    from string_perception.runtime.policy_model import PolicyModel
    from string_perception.sim.demos.tasks import task_of_file
    return task_of_file(PolicyModel(policy).metadata.task, default='transfer_cube')


def run_offline(perception: str, policy: str, seeds: list[int], steps: int, trace: Path | None = None) -> dict:
    """rollout.run_episode per seed; with ``trace`` (the ROS loop's --trace-dir) also the largest |qpos| difference
    between the two loops at the query steps (the same files and inputs give the same trajectory)."""
    from string_perception.sim.demos.rollout import OnnxActor, run_episode
    actor = OnnxActor(perception, policy)
    config = actor.rollout_config(steps=steps)
    episodes = []
    for seed in seeds:
        seen = {}                                                     # query step -> qpos [14]

        def act(obs):
            seen[obs.step] = obs.qpos
            return actor(obs)
        w0 = time.monotonic()
        r = run_episode(seed, act, config)
        wall = time.monotonic() - w0
        ep = {'seed': seed, 'success': r.success, 'max_reward': r.max_reward, 'wall_s': wall,
              'steps_per_s': steps / wall, 'queries': r.queries}
        if trace is not None and (trace / f'episode_{seed:06d}.npz').is_file():
            ros_qpos = np.load(trace / f'episode_{seed:06d}.npz')['qpos']                  # [T,14]
            ep['max_qpos_diff_vs_ros'] = float(max(np.abs(ros_qpos[t] - q).max() for t, q in seen.items()))
            ep['reward_trace_equal_to_ros'] = bool(np.array_equal(
                np.load(trace / f'episode_{seed:06d}.npz')['rewards'], r.rewards))
        episodes.append(ep)
        print(f'[offline] seed {seed}: success {r.success}, max reward {r.max_reward}, {steps / wall:.1f} steps/s'
              + (f", max |qpos - ROS qpos| {ep['max_qpos_diff_vs_ros']:.2e} rad, same rewards "
                 f"{ep['reward_trace_equal_to_ros']}" if 'max_qpos_diff_vs_ros' in ep else ''), flush=True)
    wall = sum(e['wall_s'] for e in episodes)
    return {'episodes': episodes, 'summary': {
        'episodes': len(episodes), 'success_rate': float(np.mean([e['success'] for e in episodes])),
        'mean_max_reward': float(np.mean([e['max_reward'] for e in episodes])),
        'steps_per_s': steps * len(episodes) / wall}}


def run_ros(perception: str, policy: str, seeds: list[int], steps: int, work: Path, domain: int,
            depth_encoding: str, trace: Path | None = None) -> dict:
    from string_perception.child_process import ChildProcess
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import READY_LINE as NODE_READY, node_command
    from string_perception.ros.policy_node import READY_LINE as POLICY_READY, policy_node_command
    env = merged_dds_env(domain)
    env.update(PYTHONUNBUFFERED='1', PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get('PYTHONPATH')) if p))
    cam = {'image': '/camera/color/image_raw', 'depth': '/camera/depth/image_raw',
           'camera_info': '/camera/color/camera_info'}
    node_params = {'providers': ['CPUExecutionProvider'], 'resize_mode': 'crop',   # as the policy was trained
                   **{f'{k}_qos_reliability': 'reliable' for k in cam}}
    out = work / 'ros_loop.json'
    procs = [ChildProcess('perception', node_command(perception, params=node_params, remaps=cam), env,
                          work / 'perception.log', cwd=REPO),
             ChildProcess('policy', policy_node_command(policy, params={'providers': ['CPUExecutionProvider']},
                                                        remaps={'embedding': '/string_perception/embedding',
                                                                'joint_states': '/joint_states'}),
                          env, work / 'policy.log', cwd=REPO)]
    try:
        if not (procs[0].wait_for_line(NODE_READY, 180) and procs[1].wait_for_line(POLICY_READY, 180)):
            raise RuntimeError('nodes did not start:\n' + '\n'.join(p.log() for p in procs))
        sim = ChildProcess('sim', [sys.executable, '-m', 'string_perception.sim_ros.sim_aloha_loop',
                                   '--task', policy_task(policy), '--seeds', *map(str, seeds),
                                   '--steps', str(steps), '--out', str(out),
                                   '--depth-encoding', depth_encoding,
                                   *(['--trace-dir', str(trace)] if trace else [])], env, work / 'sim.log', cwd=REPO)
        procs.append(sim)
        rc = sim.wait(timeout=24 * 3600)
        if rc != 0:
            raise RuntimeError(f'sim exited {rc}:\n{sim.log()}')
    finally:
        for p in reversed(procs):
            p.stop()
    return json.loads(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--perception', default='', help='perception ONNX (default: the shipped model)')
    ap.add_argument('--policy', default='', help='policy ONNX (default: a linear TEST policy: plumbing only)')
    ap.add_argument('--seeds', default='0:3', help='a:b (range) or a,b,c')
    ap.add_argument('--steps', type=int, default=400)
    ap.add_argument('--depth-encoding', default='32FC1', choices=('16UC1', '32FC1'),
                    help='depth the sim publishes: 32FC1 m is exactly what the offline loop feeds the model (the '
                         'loops then run the same trajectory); 16UC1 mm is what RGB-D drivers send (rounding '
                         'changes the embedding by ~4e-4 relative, and closed loop the trajectories drift apart)')
    ap.add_argument('--compare-trajectories', action='store_true',
                    help='keep the ROS trace (frames, qpos, commands) in the workdir and compare the offline qpos at '
                         'every query step with it')
    ap.add_argument('--skip-offline', action='store_true')
    ap.add_argument('--skip-ros', action='store_true')
    ap.add_argument('--domain', type=int, default=0, help='ROS_DOMAIN_ID (default: a free one in 1..101)')
    ap.add_argument('--workdir', default='', help='keep logs and the generated policy here')
    ap.add_argument('--json', default='', help='write every figure here')
    a = ap.parse_args(argv)
    seeds = parse_seeds(a.seeds)
    perception = a.perception
    if not perception:
        from string_perception.paths import model_file
        from string_perception.ros.node import DEFAULT_MODEL
        perception = str(model_file(DEFAULT_MODEL))
    with tempfile.TemporaryDirectory(prefix='sp_aloha_loop_') as tmp, reserved_domain_id(a.domain or None) as dom:
        work = Path(a.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        policy = a.policy
        if not policy:
            from string_perception.runtime.onnx_runner import OnnxModel
            dim = OnnxModel(perception, ('CPUExecutionProvider',), warmup=False).metadata.embedding_dim
            policy = str(linear_test_policy(work / 'linear_test_policy.onnx', dim))
        result = {'perception': perception, 'policy': a.policy or 'linear TEST policy', 'seeds': seeds,
                  'steps': a.steps, 'depth_encoding': a.depth_encoding, 'load_start': load()}
        print(f'[aloha_ros_loop] {len(seeds)} seeds x {a.steps} steps; perception {perception}; policy '
              f'{result["policy"]}; ROS_DOMAIN_ID {dom}; {load()}', flush=True)
        trace = work / 'trace' if a.compare_trajectories else None
        if not a.skip_ros:
            result['ros'] = run_ros(perception, policy, seeds, a.steps, work, dom, a.depth_encoding, trace)
            result['load_after_ros'] = load()
        if not a.skip_offline:
            result['offline'] = run_offline(perception, policy, seeds, a.steps, trace)
            result['load_after_offline'] = load()
    print('| loop | episodes | success | mean max reward | control steps/s | latency p50 / p99 ms | misses |')
    print('| --- | --- | --- | --- | --- | --- | --- |')
    for name in ('ros', 'offline'):
        if name in result:
            s = result[name]['summary']
            lat = f"{s['latency_ms_p50']:.1f} / {s['latency_ms_p99']:.1f}" if 'latency_ms_p50' in s else '-'
            print(f"| {name} | {s['episodes']} | {s['success_rate']:.2f} | {s['mean_max_reward']:.2f} | "
                  f"{s['steps_per_s']:.1f} | {lat} | {s.get('misses', '-')} |")
    if 'ros' in result and 'offline' in result:
        same = [r['max_reward'] == o['max_reward'] and r['success'] == o['success']
                for r, o in zip(result['ros']['episodes'], result['offline']['episodes'])]
        result['same_outcome_per_seed'] = same
        print(f'same outcome (success, max reward) per seed: {sum(same)}/{len(same)}')
    print(load())
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())

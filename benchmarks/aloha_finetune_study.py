"""Does training the encoder with the policy help? Issue 23 item 2: frozen vs fine-tuned localiser, equal steps.

    python -m benchmarks.aloha_finetune_study run \
        --localiser runs/aloha_encoding/vitd-cayley-seed1/probe/probe_n1000_seed0_step6000.pt \
        --privileged runs/aloha_policy/privileged/best.pt --frames runs/aloha_finetune/frames.npz \
        --detector-run runs/table4_recipe/runs/vitd-cayley/seed1 --out runs/aloha_finetune/vitd-cayley-seed1
    python -m benchmarks.aloha_finetune_study report runs/aloha_finetune/vitd-* --out docs/results/aloha_finetune

The two-stage policy sees the cell only through the localiser (policy/localiser.py): the ViTD whose PolicyHead
and a linear map were trained to the cube's start position on frozen encoder tokens (policy/train_localiser.py,
through benchmarks/aloha_encoding_study.py).
``run`` continues one such localiser for ``--steps`` more steps in two arms that differ in one thing, whether the
encoder trains:

* ``frozen``: PolicyHead + linear map only, on the encoder's cached tokens (as the probe trained them);
* ``finetuned``: the whole ViTD too (encoder at ``--encoder-lr``, run on every batch), PolicyHead + map at
  ``--head-lr``.

Same batches (one seeded generator), same schedule (``--warmup`` linear steps, then cosine to 0: the localiser
starts converged, and Adam's first, sign-like steps at full rate knock it off: 2 steps at encoder lr 3e-5 took the
held-out error of a Cayley localiser from 1.5 to 23 cm), same loss (L1 to the cube's scaled start
position), same frames: the top camera at step 0 of the training reset seeds, the error on held-out seeds. Each
arm's localiser (at ``--save-at`` and at the end) is exported with the privileged chunk head as the deployable
ONNX pair and run closed loop on the evaluation seeds, as in the encoding study. With ``--detector-run`` (the
Table-4 run the localiser's detector came from) each arm's ViTD is also scored as a detector on that run's test
split: the published boxes come from the same network, so a fine-tune that forgets the boxes costs the node.
Resumable: finished arms, exports and evaluations are skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import numpy as np  # noqa: E402

from benchmarks import aloha_policy  # noqa: E402
from benchmarks.aloha_encoding_study import sample_sd  # noqa: E402
from benchmarks.common import table4  # noqa: E402
from benchmarks.common.study_report import write_study_report  # noqa: E402
from string_perception.aloha_tasks import DEFAULT_ALOHA_TASK, LEGACY_TASK  # noqa: E402
from string_perception.cli import parse_seed_range  # noqa: E402
from string_perception.policy import train_localiser  # noqa: E402
from string_perception.training.schedule import lr_factor  # noqa: E402

RESULT_FILE = 'finetune.json'
ARMS = ('frozen', 'finetuned')


def start_frames(path: Path, train_seeds: str, test_seeds: str, model_hw, processes: int,
                 task: str = DEFAULT_ALOHA_TASK) -> dict[str, np.ndarray]:
    """Step-0 frames of the training and held-out reset seeds of ``task`` at the model's input size, rendered once
    into ``path`` (npz): image uint8 [S,H,W,3], depth float32 [S,H,W], intrinsics [S,3,3], state float32 [S,D]
    (data.privileged_state of the task's objects), seeds int64 [S], n_train, task."""
    from string_perception.policy.data import privileged_state
    from string_perception.runtime.preprocess import prepare_inputs
    train_range, test_range = parse_seed_range(train_seeds), parse_seed_range(test_seeds)
    seeds = list(train_range) + list(test_range)
    if path.exists():
        cached = dict(np.load(path))
        if (list(cached['seeds']) == seeds and tuple(cached['image'].shape[1:3]) == tuple(model_hw)
                and str(cached.get('task', LEGACY_TASK)) == task):
            return cached
    frames = {'image': [], 'depth': [], 'intrinsics': [], 'state': []}
    for color, depth, K, xyz in train_localiser.start_frames(seeds, processes, task):
        for k, v in prepare_inputs(color, depth, K, model_hw, resize_mode='crop').feed().items():
            frames[k].append(v[0])
        frames['state'].append(privileged_state(xyz, task))
    out = {k: np.stack(v) for k, v in frames.items()}
    out.update(seeds=np.asarray(seeds, np.int64), n_train=np.int64(len(train_range)), task=np.str_(task))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **out)
    return out


def _embed(policy, frames, idx, tokens):
    """The policy embedding [B,E] of frames ``idx``: from cached tokens (frozen) or through the encoder."""
    import torch
    if tokens is not None:
        return policy.embedding_from_tokens(tokens[idx].float())
    img, dep, K = (torch.as_tensor(frames[k][idx]) for k in ('image', 'depth', 'intrinsics'))
    return policy.embedding(img, dep, K)


def heldout_error_cm(policy, aux, frames, tokens, batch: int = 50) -> dict[str, float]:
    """Median / mean / p90 distance (cm) between the localised and the true object starts on the held-out seeds
    (over seeds x objects), and the median of each seed's worse object."""
    import torch
    from string_perception.policy.data import object_errors_m
    n_train = int(frames['n_train'])
    test = np.arange(n_train, len(frames['seeds']))
    was = policy.vitd.policy_head.training
    policy.vitd.policy_head.eval()
    with torch.no_grad():
        pred = torch.cat([aux(_embed(policy, frames, test[i:i + batch], tokens)) for i in range(0, len(test), batch)])
    policy.vitd.policy_head.train(was)
    per_object = object_errors_m(pred, torch.as_tensor(frames['state'][test])).numpy() * 100     # [S,O] cm
    err = per_object.ravel()
    return dict(test_median_cm=float(np.median(err)), test_mean_cm=float(err.mean()),
                test_p90_cm=float(np.percentile(err, 90)), test_worst_object_median_cm=float(np.median(
                    per_object.max(axis=1))))


def train_arm(localiser: Path, frames: dict, arm: str, *, steps: int, batch_size: int, head_lr: float,
              encoder_lr: float, seed: int, warmup: int = 100, save_at=(), on_save=None):
    """Continue ``localiser`` for ``steps`` steps in ``arm`` (see the module doc); ``on_save(step, policy, aux,
    row)`` at each of ``save_at`` and at the end. Returns (policy, aux, row of the last step)."""
    import torch
    from string_perception.policy.data import encode_tokens
    from string_perception.policy.localiser import load_localiser
    if arm not in ARMS:
        raise ValueError(f'arm {arm!r}: one of {ARMS}')
    policy, aux, _ = load_localiser(localiser)
    if policy.pool_points:
        raise ValueError(f'{localiser}: a pooled-point probe is not deployable (train it with --pool-points false)')
    n_train = int(frames['n_train'])
    start = {k: v.detach().clone() for k, v in policy.vitd.state_dict().items()}
    head_params = list(policy.vitd.policy_head.parameters()) + list(aux.parameters())
    groups = [{'params': head_params, 'base_lr': head_lr}]
    tokens = None
    if arm == 'frozen':
        policy.freeze_encoder()
        tokens = encode_tokens(policy, {k: frames[k] for k in ('image', 'depth', 'intrinsics')},
                               progress=False)                              # [S,N,D] fp16, training + held out
    else:
        enc = [p for n, p in policy.vitd.named_parameters() if not n.startswith('policy_head.')]
        groups.append({'params': enc, 'base_lr': encoder_lr})
    opt = torch.optim.AdamW(groups, lr=head_lr, weight_decay=1e-4)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    state = torch.as_tensor(frames['state'])
    policy.vitd.eval()                        # no dropout in the encoder: the arms differ only in what trains
    policy.vitd.policy_head.train()
    aux.train()
    c0 = time.process_time()

    def row(step):
        moved = sum(float((v.float() - start[k].float()).norm() ** 2) for k, v in policy.vitd.state_dict().items()
                    if not k.startswith('policy_head.')) ** 0.5
        scale = sum(float(v.float().norm() ** 2) for k, v in start.items() if not k.startswith('policy_head.')) ** 0.5
        return dict(arm=arm, step=step, **heldout_error_cm(policy, aux, frames, tokens),
                    encoder_relative_change=moved / scale, train_cpu_s=time.process_time() - c0)

    for step in range(steps):
        if step in save_at and on_save:
            on_save(step, policy, aux, row(step))
        for g in opt.param_groups:
            g['lr'] = g['base_lr'] * lr_factor(step, warmup, steps)      # warm-up, cosine to 0
        idx = rng.integers(0, n_train, batch_size)                                        # [B]
        loss = (aux(_embed(policy, frames, idx, tokens)) - state[idx]).abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    last = row(steps)
    if on_save:
        on_save(steps, policy, aux, last)
    return policy, aux, last


def detection_test(vitd, detector_run: Path) -> dict:
    """``vitd`` as a detector on the Table-4 run's test split (its headline metrics, as that run's test.json)."""
    from string_perception.training.inference import headline
    from string_perception.training.config import TrainConfig
    spec = json.loads((detector_run / 'spec.json').read_text())
    cfg = TrainConfig.from_dict(spec['train_config'])
    summary = table4.test_summary(vitd.eval(), vitd.config, table4.test_dataset(spec), cfg, 'cpu')
    return headline(summary)


def cmd_run(args) -> int:
    import torch
    from string_perception.policy.export import export_two_stage
    from string_perception.policy.localiser import load_localiser, save_localiser
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe, probe_aux, probe_ck = load_localiser(args.localiser)
    task = str(probe_ck.get('task', LEGACY_TASK))
    frames = start_frames(Path(args.frames), args.train_seeds, args.test_seeds, probe.vitd.config.image_size,
                          args.processes, task)
    start_error = heldout_error_cm(probe, probe_aux, frames, None)
    rows = []
    for arm in args.arms:
        arm_dir = out / arm
        done = arm_dir / 'arm.json'
        if not done.exists():
            arm_dir.mkdir(parents=True, exist_ok=True)
            saved = []

            def on_save(step, policy, aux, row, arm_dir=arm_dir, saved=saved):
                save_localiser(arm_dir / f'step{step}.pt', policy, aux, row, encoder_frozen=row['arm'] == 'frozen',
                               task=task)
                saved.append(row)
                print(json.dumps(row), flush=True)
            train_arm(Path(args.localiser), frames, arm, steps=args.steps, batch_size=args.batch_size,
                      head_lr=args.head_lr, encoder_lr=args.encoder_lr, seed=args.seed, warmup=args.warmup,
                      save_at=set(args.save_at), on_save=on_save)
            done.write_text(json.dumps({'saved': saved}, indent=1))
        arm_result = json.loads(done.read_text())
        detection_file = arm_dir / 'detection_test.json'
        if args.detector_run and not detection_file.exists():
            localiser, _, _ = load_localiser(arm_dir / f'step{args.steps}.pt')
            detection_file.write_text(json.dumps(detection_test(localiser.vitd, Path(args.detector_run)), indent=1))
        detection = json.loads(detection_file.read_text()) if detection_file.exists() else None
        for saved in arm_result['saved']:
            tag = f'step{saved["step"]}'
            result = arm_dir / 'eval' / f'{tag}.json'
            if not result.exists():
                onnx_dir = arm_dir / 'onnx' / tag
                export_two_stage(args.privileged, arm_dir / f'{tag}.pt', onnx_dir, log=lambda *_: None)
                result.parent.mkdir(parents=True, exist_ok=True)
                aloha_policy.main(['eval', '--perception', str(onnx_dir / 'perception.onnx'),
                                   '--policy', str(onnx_dir / 'policy.onnx'), '--seeds', args.eval_seeds,
                                   '--processes', str(args.processes), '--out', str(result)])
            summary = json.loads(result.read_text())['summary']
            rows.append(dict(saved, success=summary['success'], episodes=summary['episodes'],
                             reached=summary['reached'],
                             detection_test=detection if saved['step'] == args.steps else None))
    detector = None
    if args.detector_run:
        run = Path(args.detector_run)
        test = json.loads((run / 'test.json').read_text()) if (run / 'test.json').exists() else {}
        detector = {'run': str(run), 'config': run.parent.name, 'seed': test.get('seed'),
                    'test': test.get('test')}
    study = {'localiser': str(args.localiser), 'localiser_row': probe_ck.get('row'), 'start_error': start_error,
             'detector': detector, 'rows': rows, 'load_avg': os.getloadavg()[0],
             'args': {k: str(v) for k, v in vars(args).items()}}
    (out / RESULT_FILE).write_text(json.dumps(study, indent=1))
    print(json.dumps({k: v for k, v in study.items() if k != 'rows'}), flush=True)
    return 0


def table_lines(studies: list[dict]) -> list[str]:
    """Markdown: per localiser (detector run, probe seed), each arm's held-out error, success and detection IoU at
    each saved step."""
    lines = ['| encoder (Table-4 run) | arm | step | held-out error (cm, median / p90) | success | encoder change '
             '| detector test IoU sym / strict after | train CPU min |',
             '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |']
    for s in studies:
        det = s.get('detector') or {}
        name = f'{det.get("config")} seed {det.get("seed")}' if det else Path(s['localiser']).name
        probe_seed = (s.get('localiser_row') or {}).get('probe_seed')
        name += '' if probe_seed is None else f', probe seed {probe_seed}'
        e0 = s['start_error']
        before = (det.get('test') or {})
        lines.append(f'| {name} | start (probe) | 0 | {e0["test_median_cm"]:.2f} / {e0["test_p90_cm"]:.2f} | | 0 | '
                     + (f'{100 * before["avg_best_iou_sym"]:.1f} / {100 * before["avg_best_iou"]:.1f} %'
                        if before else '') + ' | |')
        for r in s['rows']:
            dt = r.get('detection_test')
            lines.append(f'| {name} | {r["arm"]} | {r["step"]} | {r["test_median_cm"]:.2f} / {r["test_p90_cm"]:.2f} '
                         f'| {r["success"]}/{r["episodes"]} | {r["encoder_relative_change"]:.4f} | '
                         + (f'{100 * dt["avg_best_iou_sym"]:.1f} / {100 * dt["avg_best_iou"]:.1f} %' if dt else '')
                         + f' | {r["train_cpu_s"] / 60:.1f} |')
    return lines


def summary_lines(studies: list[dict]) -> list[str]:
    """Markdown: per detector config, each arm at its last step over every localiser run (mean ± sample sd)."""
    lines = ['| encoder (Table-4 config) | localisers | frozen: success | fine-tuned: success | frozen: held-out error '
             '(cm) | fine-tuned: held-out error (cm) |', '| --- | ---: | ---: | ---: | ---: | ---: |']
    configs = sorted({(s.get('detector') or {}).get('config') or Path(s['localiser']).name for s in studies})
    for config in configs:
        group = [s for s in studies if ((s.get('detector') or {}).get('config') or Path(s['localiser']).name) == config]
        cells = {}
        for arm in ARMS:
            last = [max(rows, key=lambda r: r['step']) for rows in
                    ([r for r in s['rows'] if r['arm'] == arm] for s in group) if rows]   # runs may train one arm
            if not last:
                cells[arm] = ('', '')
                continue
            rates = [100 * r['success'] / r['episodes'] for r in last]
            cells[arm] = (f'**{np.mean(rates):.0f} %** ± {sample_sd(rates):.0f}',
                          f'{np.mean([r["test_median_cm"] for r in last]):.2f}')
        lines.append(f'| {config} | {len(group)} | {cells["frozen"][0]} | {cells["finetuned"][0]} | '
                     f'{cells["frozen"][1]} | {cells["finetuned"][1]} |')
    return lines


def cmd_report(args) -> int:
    studies = [json.loads((Path(d) / RESULT_FILE).read_text()) for d in args.dirs if (Path(d) / RESULT_FILE).exists()]
    if not studies:
        raise SystemExit(f'no {RESULT_FILE} in {args.dirs}')
    return write_study_report(args.out, summary_lines(studies) + [''] + table_lines(studies), studies, 'studies.json')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('run', help='frozen and fine-tuned continuations of one localiser, exported and evaluated')
    r.add_argument('--localiser', required=True, help='a probe (aloha_encoding_study run DIR/probe/probe_n*.pt)')
    r.add_argument('--frames', required=True, help='npz cache of the rendered start frames (made on first use)')
    r.add_argument('--out', required=True)
    r.add_argument('--detector-run', help='the Table-4 run directory of the localiser\'s detector (spec.json)')
    r.add_argument('--arms', nargs='+', choices=ARMS, default=list(ARMS))
    r.add_argument('--steps', type=int, default=1000)
    r.add_argument('--save-at', type=int, nargs='*', default=[])
    r.add_argument('--batch-size', type=int, default=16)
    r.add_argument('--head-lr', type=float, default=1e-4)
    r.add_argument('--encoder-lr', type=float, default=3e-5)
    r.add_argument('--warmup', type=int, default=100, help='linear warm-up steps (both arms)')
    r.add_argument('--seed', type=int, default=0)
    aloha_policy.add_study_arguments(r)
    p = sub.add_parser('report', help='table over run directories')
    p.add_argument('dirs', nargs='+')
    p.add_argument('--out', required=True)
    args = ap.parse_args(argv)
    return {'run': cmd_run, 'report': cmd_report}[args.cmd](args)


if __name__ == '__main__':
    raise SystemExit(main())

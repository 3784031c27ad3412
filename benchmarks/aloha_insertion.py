"""How often the scripted insertion demonstrator succeeds (issue 39, item 5): gym-aloha's insertion task
(sim/demos/insertion.py) driven by InsertionDemonstrator (sim/demos/insertion_script.py), physics only.

    nice -n 10 python -m benchmarks.aloha_insertion demos --seeds 0:50
    nice -n 10 python -m benchmarks.aloha_insertion demos --seeds 0:50 --set plan_steps=270, t_meet=270

`--set field=value` overrides an InsertionScript field (a Python literal; tuples as `a,b,`). Prints one JSON line:
success by both rules (sim/demos/outcomes.py), the insertion failure categories, the seeds that failed and the
CPU time. Results: docs/results/aloha_insertion.md.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import time

from string_perception.cli import parse_seed_range
from string_perception.sim.demos.insertion_script import InsertionScript, run_demonstration
from string_perception.sim.demos.outcomes import (INSERTION_OUTCOMES, insertion_outcome, outcome_counts,
                                                  success_last_step, success_max_reward)


def parse_script(assignments: list[str]) -> InsertionScript:
    """InsertionScript with `field=literal` overrides."""
    fields = {f.name for f in dataclasses.fields(InsertionScript)}
    over = {}
    for item in assignments:
        key, value = item.split('=', 1)
        if key not in fields:
            raise SystemExit(f'unknown InsertionScript field {key!r}')
        over[key] = ast.literal_eval(value)
    return InsertionScript(**over)


def cmd_demos(args) -> int:
    script = parse_script(args.set)
    c0 = time.process_time()
    traces = {seed: run_demonstration(seed, script) for seed in parse_seed_range(args.seeds)}
    outcomes = {seed: insertion_outcome(r) for seed, r in traces.items()}
    n = len(traces)
    print(json.dumps(dict(
        episodes=n, overrides=args.set,
        success_max_reward=sum(success_max_reward(r) for r in traces.values()) / n,
        success_last_step=sum(success_last_step(r) for r in traces.values()) / n,
        outcomes=outcome_counts(outcomes.values(), INSERTION_OUTCOMES),
        failed_seeds={s: o for s, o in outcomes.items() if o != 'success'},
        cpu_s=round(time.process_time() - c0, 1))))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    d = sub.add_parser('demos', help='scripted demonstrator success on a seed range (physics only)')
    d.add_argument('--seeds', default='0:50', help='first:end (end excluded)')
    d.add_argument('--set', nargs='*', default=[], help='InsertionScript overrides field=literal')
    d.set_defaults(func=cmd_demos)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    raise SystemExit(main())

"""Mutation testing of the modules that decide what the model learns and what numbers we publish (mutmut 3).

    .venv/bin/python scripts/mutation_test.py                      # every module below, one after the other
    .venv/bin/python scripts/mutation_test.py losses matcher       # some of them
    .venv/bin/python scripts/mutation_test.py --list               # the modules and their tests

Not part of CI (slow: each mutant reruns the module's tests; about 2 minutes for the matcher, longer for the
others on 2 cores). For each module, the tracked and untracked (not ignored) files are copied to
``<workdir>/<module>`` (default ``/tmp/string_perception_mutation``), a ``[mutmut]`` section naming the module and
its fast tests is appended to that copy's ``setup.cfg``, and ``mutmut run`` runs there, so the working tree never
sees a mutant nor mutmut's ``mutants/`` folder. Survivors are written with their diffs to
``<workdir>/<module>/survivors.txt`` and summed up at the end. Each survivor must be killed by a new test or be
explained as equivalent in docs/results/mutation_testing.md.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# module -> (source file mutated, the fast tests that cover it). Tests marked `ros` (they start ROS processes) are
# deselected: mutmut only sees calls made in its own process, and they take seconds per mutant.
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    'losses': ('string_perception/training/losses.py',
               ('test/training/test_losses.py', 'test/training/test_known_answers_losses.py')),
    'matcher': ('string_perception/matcher.py',
                ('test/core/test_matcher.py', 'test/core/test_known_answers_matcher.py')),
    'postprocess': ('string_perception/runtime/postprocess.py',
                    ('test/runtime/test_postprocess.py', 'test/runtime/test_known_answers_postprocess.py')),
    'metrics': ('string_perception/metrics.py',
                ('test/core/test_metrics.py', 'test/core/test_known_answers_ap3d.py')),
    'iou3d': ('string_perception/iou3d.py',
              ('test/core/test_iou3d.py', 'test/core/test_known_answers_iou3d.py')),
    'params': ('string_perception/node_params.py',
               ('test/ros/test_node_params.py', 'test/ros/test_node_params_live.py')),
    'assignment': ('string_perception/assignment.py', ('test/core/test_assignment.py',)),
    'dense_criterion': ('string_perception/training/dense_criterion.py',
                        ('test/training/test_dense_criterion.py', 'test/training/test_symmetric_targets.py')),
}
# Slow tests left out per mutant (--fast): randomised property tests, which cost most of a module's test time and
# assert no known answer that the module's known-answer tests do not also assert.
SLOW_TESTS: dict[str, tuple[str, ...]] = {
    'postprocess': ('test/runtime/test_postprocess.py::test_property_decode_never_raises_on_any_model_output',),
    'iou3d': ('test/core/test_iou3d.py::test_property_bounded_symmetric_consistent',),
}


def copy_tree(dst: Path) -> None:
    """The repository's tracked and untracked-but-not-ignored files -> ``dst`` (fresh)."""
    shutil.rmtree(dst, ignore_errors=True)
    files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split('\0')
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def mutmut_section(source: str, tests: tuple[str, ...], timeout_multiplier: float,
                   extra: tuple[str, ...] = ()) -> str:
    # list values: one item per line (mutmut passes each line as one pytest argument)
    lines = ['', '[mutmut]', 'source_paths = string_perception', f'only_mutate = {source}',
             f'timeout_multiplier = {timeout_multiplier}',   # wall limit = (test time + 1 s) x this
             'pytest_add_cli_args_test_selection =', *[f'    {t}' for t in tests],
             'pytest_add_cli_args =', '    -p', '    no:cacheprovider', '    -m', '    not ros',
             *[f'    {x}' for x in extra],
             'process_isolation = forkserver']          # torch and rclpy are not fork-safe after use
    return '\n'.join(lines) + '\n'


def run_module(name: str, workdir: Path, mutmut: str, max_children: int,
               timeout_multiplier: float, fast: bool) -> dict[str, list[str]]:
    source, tests = MODULES[name]
    # --fast: no conftest (it imports torch, seconds of CPU per test process; these tests need none of its
    # fixtures) and no slow property tests
    extra = ('--noconftest', *[f'--deselect={t}' for t in SLOW_TESTS.get(name, ())]) if fast else ()
    dst = workdir / name
    copy_tree(dst)
    with open(dst / 'setup.cfg', 'a') as f:
        f.write(mutmut_section(source, tests, timeout_multiplier, extra))
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    print(f'[mutation] {name}: mutating {source} against {", ".join(tests)} in {dst}', flush=True)
    with open(dst / 'mutmut_run.log', 'w') as log:
        subprocess.run([mutmut, 'run', '--max-children', str(max_children)], cwd=dst, env=env, stdout=log,
                       stderr=subprocess.STDOUT)
    out = subprocess.run([mutmut, 'results', '--all', 'true'], cwd=dst, env=env, capture_output=True,
                         text=True).stdout
    by_status: dict[str, list[str]] = {}
    for line in out.splitlines():
        m = re.match(r'\s*(\S+): (.+)$', line)
        if m:
            by_status.setdefault(m.group(2).strip(), []).append(m.group(1))
    with open(dst / 'survivors.txt', 'w') as f:
        for mutant in by_status.get('survived', []) + by_status.get('no tests', []):
            f.write(subprocess.run([mutmut, 'show', mutant], cwd=dst, env=env, capture_output=True,
                                   text=True).stdout + '\n')
    counts = ', '.join(f'{k} {len(v)}' for k, v in sorted(by_status.items()))
    print(f'[mutation] {name}: {counts}; survivors with diffs in {dst / "survivors.txt"}', flush=True)
    return by_status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('modules', nargs='*', metavar='MODULE', help=f'any of {", ".join(MODULES)} (default: all)')
    ap.add_argument('--workdir', type=Path, default=Path('/tmp/string_perception_mutation'))
    ap.add_argument('--max-children', type=int, default=1, help='mutants tested in parallel')
    ap.add_argument('--timeout-multiplier', type=float, default=200.0,
                    help="mutmut's wall-clock limit per mutant is (test time + 1 s) x this; mutmut's default 15 "
                         'turns survivors into timeouts when a niced run gets little CPU on a busy machine')
    ap.add_argument('--fast', action='store_true',
                    help='cheaper per mutant: skip conftest.py (torch import) and the slow property tests')
    ap.add_argument('--list', action='store_true', help='print the modules and their tests, then exit')
    a = ap.parse_args(argv)
    unknown = sorted(set(a.modules) - set(MODULES))
    if unknown:
        ap.error(f'unknown modules {unknown}; choose from {", ".join(MODULES)}')
    if a.list:
        for name, (source, tests) in MODULES.items():
            print(f'{name:<12} {source:<42} {" ".join(tests)}')
            for t in SLOW_TESTS.get(name, ()):
                print(f'{"":<12} {"(--fast leaves out)":<42} {t}')
        return 0
    mutmut = shutil.which('mutmut', path=str(Path(sys.executable).parent)) or shutil.which('mutmut')
    if mutmut is None:
        print('mutmut is not installed: pip install -r requirements/dev.txt', file=sys.stderr)
        return 2
    survived = unchecked = 0
    for name in a.modules or list(MODULES):
        by_status = run_module(name, a.workdir, mutmut, a.max_children, a.timeout_multiplier, a.fast)
        survived += len(by_status.get('survived', [])) + len(by_status.get('no tests', []))
        unchecked += len(by_status.get('not checked', []))
    print(f'[mutation] {survived} survivors (each must be killed by a test or explained as equivalent in '
          'docs/results/mutation_testing.md)')
    if unchecked:       # e.g. mutmut's stats run failed (a failing test in the copy): nothing was tested
        print(f'[mutation] {unchecked} mutants NOT CHECKED: see mutmut_run.log in the module folders',
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""mutmut's mutants, tested in one process: for machines too busy for ``mutation_test.py`` (issue 24 item 3).

    .venv/bin/python scripts/mutation_inprocess.py postprocess          # any module of mutation_test.MODULES
    .venv/bin/python scripts/mutation_inprocess.py dense_criterion      # (also assignment, losses, matcher, ...)

``mutmut run`` forks a process per mutant and, on a 2-core machine shared with a training run, spent most of an
hour generating mutants and collecting statistics before testing the first. This script uses mutmut 3.8.1's own
mutation operators (``create_mutations``, the same mutant list as ``mutmut run``) on the module's source file, and
for each mutant swaps the mutated functions' code objects into the live functions (so references the tests hold
see the mutant), then runs the module's already-collected pytest items in this process, stopping at the first
failure. Each mutant costs about the time of its tests. Survivors, with their diffs, go to
``<workdir>/<module>/inprocess_survivors.txt``; the labels (``function#k``, k-th mutant in that function) are
stable for one version of the source.

Limits: functions that run only at import (e.g. building a module-level table) cannot be mutated after import, so
their mutants are tested by calling them directly in a test. Tests marked ``ros`` are deselected, as in
``mutation_test.py``. A mutant that runs longer than ``--timeout`` seconds counts as a timeout (killed).
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import signal
import sys
import tempfile
import time
import types
from pathlib import Path

import libcst as cst
import pytest
from _pytest.runner import runtestprotocol

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / 'scripts')]     # this tree's package, also in a copy of the repository
from mutation_test import MODULES, SLOW_TESTS  # noqa: E402


def mutations_of(source: Path) -> tuple[cst.Module, list[tuple[str, object]]]:
    """mutmut's mutants of ``source`` inside functions and methods -> (parsed module, [(label, mutation)])."""
    with tempfile.TemporaryDirectory() as d:      # mutmut's config() wants a [mutmut] section in the cwd
        Path(d, 'setup.cfg').write_text('[mutmut]\nsource_paths = .\n')
        cwd = os.getcwd()
        os.chdir(d)
        try:
            from mutmut.mutation.file_mutation import create_mutations
            module, mutations, _, _ = create_mutations(str(source), source.read_text())
        finally:
            os.chdir(cwd)
    labelled, counts = [], {}
    for m in mutations:
        owner = m.contained_by_top_level_function
        if not isinstance(owner, (cst.FunctionDef, cst.ClassDef)):
            continue                                  # module-level statements: mutmut does not test them either
        name = owner.name.value
        counts[name] = counts.get(name, 0) + 1
        labelled.append((f'{name}#{counts[name]}', m))
    return module, labelled


def live_functions(mod: types.ModuleType) -> dict[str, types.FunctionType]:
    """'f' / 'Class.method' -> the function object the module defines."""
    out = {}
    for k, v in vars(mod).items():
        if isinstance(v, types.FunctionType) and v.__module__ == mod.__name__:
            out[k] = v
        elif isinstance(v, type) and v.__module__ == mod.__name__:
            for a, f in vars(v).items():
                f = getattr(f, '__func__', f)
                if isinstance(f, types.FunctionType):
                    out[f'{k}.{a}'] = f
    return out


class _Timeout(Exception):
    pass


def _on_alarm(*_):
    raise _Timeout()


class MutationLoop:
    """pytest plugin: after collection, test every mutant against the collected items."""

    def __init__(self, name: str, source: Path, out: Path, timeout_s: int, only: set[str] | None = None):
        self.name, self.source, self.out, self.timeout_s, self.only = name, source, out, timeout_s, only
        self.items: list = []

    def run_items(self) -> str | None:
        """The first failing test's id, or None when all pass."""
        for item in self.items:
            if any(r.failed for r in runtestprotocol(item, nextitem=None, log=False)):
                return item.nodeid
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        self.items = list(session.items)
        modname = str(self.source.relative_to(REPO))[:-3].replace('/', '.')
        live = live_functions(importlib.import_module(modname))
        original = {k: (f.__code__, f.__defaults__, f.__kwdefaults__) for k, f in live.items()}
        module, mutants = mutations_of(self.source)
        if self.only:
            mutants = [(label, m) for label, m in mutants if label in self.only]
        lines = module.code.splitlines()
        t0 = time.process_time()
        failing = self.run_items()
        print(f'[inprocess] {self.name}: {len(self.items)} tests, baseline {time.process_time() - t0:.2f} s CPU',
              flush=True)
        if failing:
            raise SystemExit(f'[inprocess] the tests fail without a mutant: {failing}')
        signal.signal(signal.SIGALRM, _on_alarm)
        status_of: dict[str, list[str]] = {}
        survivors = []
        self.out.parent.mkdir(parents=True, exist_ok=True)
        progress = open(self.out.with_suffix('.progress'), 'w')     # one line per mutant: a cut-short run says
        for label, m in mutants:                                    # how far it got
            mutated = module.deep_replace(m.original_node, m.mutated_node).code
            ns = {'__name__': modname, '__package__': modname.rpartition('.')[0]}
            try:
                exec(compile(mutated, str(self.source), 'exec'), ns)
            except Exception:       # the module no longer imports (e.g. a mutant of code run at import): killed
                status_of.setdefault('killed', []).append(label)
                progress.write(f'{label} killed (import)\n')
                continue
            patched = []
            for k, f in live.items():
                cls, _, attr = k.rpartition('.')
                nf = (vars(ns[cls]).get(attr) if cls in ns else None) if cls else ns.get(k)
                nf = getattr(nf, '__func__', nf)
                if isinstance(nf, types.FunctionType) and (nf.__code__ != f.__code__ or nf.__defaults__ !=
                                                           f.__defaults__ or nf.__kwdefaults__ != f.__kwdefaults__):
                    f.__code__, f.__defaults__, f.__kwdefaults__ = nf.__code__, nf.__defaults__, nf.__kwdefaults__
                    patched.append(k)
            try:
                signal.alarm(self.timeout_s)
                failing = self.run_items()
                status = 'survived' if failing is None else 'killed'
            except _Timeout:
                status = 'timeout'
            finally:
                signal.alarm(0)
                for k in patched:
                    live[k].__code__, live[k].__defaults__, live[k].__kwdefaults__ = original[k]
            status_of.setdefault(status, []).append(label)
            progress.write(f'{label} {status}\n')
            progress.flush()
            if status == 'survived':
                diff = [x.strip() for x in difflib.unified_diff(lines, mutated.splitlines(), lineterm='', n=0)
                        if x[:1] in '+-' and x[:3] not in ('---', '+++')]
                survivors.append(f'{label}:\n    ' + '\n    '.join(diff))
        progress.close()
        counts = ', '.join(f'{k} {len(v)}' for k, v in sorted(status_of.items()))
        self.out.write_text(f'# {self.source.relative_to(REPO)}: {len(mutants)} mutants: {counts}\n'
                            + '\n'.join(survivors) + '\n')
        print(f'[inprocess] {self.name}: {len(mutants)} mutants: {counts}; survivors in {self.out}', flush=True)
        return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('module', choices=sorted(MODULES))
    ap.add_argument('--workdir', type=Path, default=Path('/tmp/string_perception_mutation'))
    ap.add_argument('--timeout', type=int, default=120, help='seconds of wall time per mutant')
    ap.add_argument('--only', nargs='+', metavar='LABEL', help='test only these mutants (e.g. earlier survivors)')
    ap.add_argument('--all-tests', action='store_true', help='also run the slow property tests per mutant')
    a = ap.parse_args(argv)
    source, tests = MODULES[a.module]
    deselect = [] if a.all_tests else [f'--deselect={t}' for t in SLOW_TESTS.get(a.module, ())]
    os.chdir(REPO)
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    loop = MutationLoop(a.module, REPO / source, a.workdir / a.module / 'inprocess_survivors.txt', a.timeout,
                        set(a.only or ()))
    # --noconftest: conftest.py only imports torch and offers the shipped-model fixture, which these tests skip
    rc = pytest.main(['-q', '-p', 'no:cacheprovider', '--noconftest', '-m', 'not ros', *deselect, *tests],
                     plugins=[loop])
    return 0 if rc == pytest.ExitCode.NO_TESTS_COLLECTED else rc     # the loop ran them, pytest reports none


if __name__ == '__main__':
    sys.exit(main())

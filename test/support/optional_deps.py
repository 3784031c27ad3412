"""Which optional (non-runtime) dependencies a module needs at import time, found from the source (no import).

The node, the bag tools and the evaluator run with ``requirements/runtime.txt`` + ROS only; training / export
(torch), the simulated workcells (mujoco, pybullet, gym-aloha) and some dev tools are optional. A test module that
imports one of them at module level, directly or through a package module or a test helper that does, must call
``pytest.importorskip(<name>)`` before that import, so that a runtime-only install skips it instead of stopping
at a collection error (``scripts/runtime_only_tests.sh`` shows it with a real venv).

    module_needs('string_perception.training.train')   # {'torch', ...}
    missing_skips(Path('test/training/test_training.py'))       # [(line, {'torch'})] for imports not guarded yet

Only statements at a module's top level count: an import inside a function, an ``if`` or a ``try`` (the
``except ImportError`` fallback pattern) does not run at import time or is guarded already.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = 'string_perception'
TEST_DIR = REPO / 'test'

# import name -> (the requirements file that installs it, the distribution); none is in runtime.txt or ros.txt
OPTIONAL = {
    'torch': ('train.txt', 'torch'), 'onnxscript': ('train.txt', 'onnxscript'),
    'mujoco': ('sim.txt', 'mujoco'), 'pybullet': ('sim.txt', 'pybullet'), 'pybullet_data': ('sim.txt', 'pybullet'),
    'gym_aloha': ('sim-nodeps.txt', 'gym-aloha'),
    'motmetrics': ('dev.txt', 'motmetrics'), 'colcon_core': ('dev.txt', 'colcon-common-extensions'),
    'mutmut': ('dev.txt', 'mutmut'),
}


def _source_file(module: str) -> Path | None:
    """The file of a package module or test module / helper (``string_perception.a.b`` /
    ``test.support.bag_helpers``), else None."""
    parts = module.split('.')
    if parts[0] not in (PACKAGE, TEST_DIR.name):
        return None
    base = REPO.joinpath(*parts)
    for f in (base.with_suffix('.py'), base / '__init__.py'):
        if f.is_file():
            return f
    return None


def _module_name(path: Path) -> str:
    path = path.resolve()
    if not path.is_relative_to(REPO):     # a file outside the repository (the check's own tests): by its stem
        return path.stem
    rel = path.relative_to(REPO).with_suffix('')
    parts = rel.parts[:-1] if rel.name == '__init__' else rel.parts
    return '.'.join(parts)


def imported_modules(node: ast.stmt, module: str, is_package: bool) -> list[str]:
    """Every module an ``import`` / ``from ... import`` statement in ``module`` loads (parents included; a name
    imported from a package counts as its submodule too, when there is one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split('.') if is_package else module.split('.')[:-1]
            base = base[:len(base) - (node.level - 1)]
            origin = '.'.join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ''
        names = [origin] + [f'{origin}.{a.name}' for a in node.names if _source_file(f'{origin}.{a.name}')]
    else:
        return []
    out = []
    for name in names:
        parts = name.split('.')
        out += ['.'.join(parts[:i]) for i in range(1, len(parts) + 1)]
    return out


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text('utf8'), str(path))


_IN_PROGRESS: set[str] = set()     # modules being analysed (an import cycle adds nothing new)


def _statement_needs(node: ast.stmt, module: str, is_package: bool) -> set[str]:
    needs = set()
    for name in imported_modules(node, module, is_package):
        if name in OPTIONAL:
            needs.add(name)
        elif name != module and _source_file(name) is not None:
            needs |= module_needs(name)
    return needs


@functools.lru_cache(maxsize=None)
def module_needs(module: str) -> frozenset[str]:
    """The optional dependencies importing ``module`` (a package module or a test helper) needs."""
    path = _source_file(module)
    if path is None or module in _IN_PROGRESS:
        return frozenset()
    _IN_PROGRESS.add(module)
    try:
        is_package = path.name == '__init__.py'
        return frozenset(set().union(*(_statement_needs(node, module, is_package) for node in _tree(path).body)))
    finally:
        _IN_PROGRESS.discard(module)


def _importorskip_name(node: ast.stmt) -> str | None:
    """``X`` for a top-level ``pytest.importorskip('X')`` (bare or assigned), else None."""
    value = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == 'importorskip'
            and value.args and isinstance(value.args[0], ast.Constant)):
        return value.args[0].value
    return None


def missing_skips(path: Path) -> list[tuple[int, set[str]]]:
    """``(line, deps)`` for each top-level import of the test file ``path`` that needs optional dependencies not
    importorskip-ped above it."""
    module = _module_name(path)
    skipped, out = set(), []
    for node in _tree(path.resolve()).body:
        name = _importorskip_name(node)
        if name is not None:
            skipped.add(name)
            continue
        needs = _statement_needs(node, module, False)
        if needs - skipped:
            out.append((node.lineno, needs - skipped))
    return out

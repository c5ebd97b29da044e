#!/usr/bin/env bash
# Builds and installs the Python package (incrementally: build/python is reused, ccache when
# present), then runs the Python tests. Usage: scripts/python-test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
fi
"$PY" -m pip install --no-build-isolation --no-deps -q .
# Run from the tests folder so `import tessel` picks the installed package, not python/tessel.
"$PY" -m pytest tests/python -q "$@"

#!/usr/bin/env bash
# Builds the C++ examples of the docs (docs/examples/cpp) against an install of the build tree,
# through find_package(tessel) as a user's project does, and runs each one. Part of `make test`.
# Usage: docs/examples/run_cpp_examples.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
WORK="$BUILD_DIR/doc-examples"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  echo "run_cpp_examples: $BUILD_DIR is not a configured build folder (run make build first)" >&2
  exit 1
fi
cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" >/dev/null
GENERATOR=$(command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$WORK/build/CMakeCache.txt" ]; then
  cmake -S docs/examples/cpp -B "$WORK/build" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$PWD/$WORK/prefix" "${LAUNCHER[@]}" >/dev/null
fi
cmake --build "$WORK/build" -j "${JOBS:-$(nproc)}"
failed=0 passed=0
for source in docs/examples/cpp/*.cpp; do
  example=$(basename "$source" .cpp)
  if "$WORK/build/$example" > "$WORK/$example.log" 2>&1; then
    passed=$((passed + 1))
    echo "doc example $example: ok"
  else
    failed=$((failed + 1))
    echo "doc example $example: FAILED" >&2
    cat "$WORK/$example.log" >&2
  fi
done
echo "doc-examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU. In one call it:
#   1. builds in Release;
#   2. runs every test binary on the GPU;
#   3. runs compute-sanitizer memcheck over every test binary (allocator in direct mode, so the
#      sanitizer sees each allocation) and racecheck over the binaries that launch kernels;
# then prints a summary table. Logs go to $GPU_CHECK_LOGS (default build/gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
LOGS=${GPU_CHECK_LOGS:-$BUILD_DIR/gpu-check}
JOBS=${JOBS:-$(nproc)}
STEP_TIMEOUT=${STEP_TIMEOUT:-1800}  # seconds per step; a step that runs longer counts as failed
mkdir -p "$LOGS"

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU visible (nvidia-smi -L failed); run it on a GPU machine" >&2
  exit 2
fi

summary=()
failed=0
step() {  # step NAME COMMAND...: runs it, logs to $LOGS/NAME.log, records the outcome
  local name=$1; shift
  local start=$SECONDS
  echo "== $name"
  if timeout "$STEP_TIMEOUT" "$@" >"$LOGS/$name.log" 2>&1; then
    summary+=("$(printf '%-34s %-6s %5ds' "$name" ok $((SECONDS - start)))")
  else
    summary+=("$(printf '%-34s %-6s %5ds  (see %s)' "$name" FAILED $((SECONDS - start)) "$LOGS/$name.log")")
    failed=1
    tail -n 30 "$LOGS/$name.log"
  fi
}

step build make build BUILD_DIR="$BUILD_DIR" BUILD_TYPE=Release JOBS="$JOBS"
[ $failed -eq 0 ] || { printf '%s\n' "${summary[@]}"; exit 1; }

tests=$(ls "$BUILD_DIR"/tests/cpp/tessel_*_tests)
for t in $tests; do
  step "test:$(basename "$t")" "$t" --gtest_color=no
done

# Left out of the sanitizer runs: tests that fill the GPU on purpose (they would only time out),
# death tests that fault on purpose, and NVRTC compile-only tests (no GPU work to check).
# TESSEL_UNDER_SANITIZER=1 makes exhaustive tests run a rotating subset (tests/cpp/ops/sanitizer.hpp).
SANITIZER_FILTER=${SANITIZER_FILTER:--*OutOfMemory*:*Huge*:*Stress*:StickyError.*:*CudaSource.*:FuseSource.*}
export TESSEL_UNDER_SANITIZER=1
for t in $tests; do
  step "memcheck:$(basename "$t")" env TESSEL_ALLOCATOR=direct compute-sanitizer --tool memcheck \
    --error-exitcode 1 --leak-check full "$t" --gtest_filter="$SANITIZER_FILTER" --gtest_color=no
done
for t in $tests; do
  case $(basename "$t") in tessel_core_tests|tessel_memory_tests) continue ;; esac
  step "racecheck:$(basename "$t")" compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$t" --gtest_filter="$SANITIZER_FILTER" --gtest_color=no
done

echo
echo "gpu-check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
printf '%s\n' "${summary[@]}"
for f in "$LOGS"/test:*.log; do grep -hE '^\[  (PASSED|FAILED|SKIPPED) ' "$f" | sed "s|^|$(basename "$f" .log): |"; done
exit $failed

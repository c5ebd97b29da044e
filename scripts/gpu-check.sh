#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU. In one call it:
#   1. builds in Release;
#   2. runs every test binary on the GPU (tests over "each device" run on every GPU present);
#   3. runs compute-sanitizer memcheck over every test binary (allocator in direct mode, so the
#      sanitizer sees each allocation) and racecheck over the binaries that launch kernels;
#   4. with two or more GPUs: every test binary again with cuda:1 as the only test device
#      (TESSEL_TEST_DEVICES=1), the copies between GPUs without peer access (TESSEL_PEER_ACCESS=0,
#      staged through host memory), and memcheck on cuda:1;
# then prints a summary table. Logs go to $GPU_CHECK_LOGS (default build/gpu-check).
# GPU_CHECK_STEPS picks steps (default: all): build tests memcheck racecheck device1 device1-memcheck.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
LOGS=${GPU_CHECK_LOGS:-$BUILD_DIR/gpu-check}
JOBS=${JOBS:-$(nproc)}
STEP_TIMEOUT=${STEP_TIMEOUT:-1800}  # seconds per step; a step that runs longer counts as failed
STEPS=" ${GPU_CHECK_STEPS:-build tests memcheck racecheck device1 device1-memcheck} "
mkdir -p "$LOGS"
wants() { [[ $STEPS == *" $1 "* ]]; }

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

if wants build; then
  step build make build BUILD_DIR="$BUILD_DIR" BUILD_TYPE=Release JOBS="$JOBS"
  [ $failed -eq 0 ] || { printf '%s\n' "${summary[@]}"; exit 1; }
fi

tests=$(ls "$BUILD_DIR"/tests/cpp/tessel_*_tests)
gpus=$(nvidia-smi -L | grep -c '^GPU')
if wants tests; then
  for t in $tests; do
    step "test:$(basename "$t")" "$t" --gtest_color=no
  done
fi
if { wants device1 || wants device1-memcheck; } && [ "$gpus" -lt 2 ]; then
  summary+=("$(printf '%-34s %-6s' "cuda:1 steps" skipped)  (needs two GPUs, found $gpus)")
fi
if wants device1 && [ "$gpus" -ge 2 ]; then
  for t in $tests; do
    step "test-cuda1:$(basename "$t")" env TESSEL_TEST_DEVICES=1 "$t" --gtest_color=no
  done
  step "test-staged:tessel_array_tests" env TESSEL_PEER_ACCESS=0 TESSEL_MULTI_GPU_SECONDS=5 \
    "$BUILD_DIR"/tests/cpp/tessel_array_tests --gtest_filter='MultiGpu.*:*Transfers*' --gtest_color=no
fi

# Left out of the sanitizer runs: tests that fill the GPU on purpose (they would only time out),
# death tests that fault on purpose, and NVRTC compile-only tests (no GPU work to check).
# TESSEL_UNDER_SANITIZER=1 makes exhaustive tests run a rotating subset (tests/cpp/ops/sanitizer.hpp).
SANITIZER_FILTER=${SANITIZER_FILTER:--*OutOfMemory*:*Huge*:*Stress*:StickyError.*:*CudaSource.*:FuseSource.*}
export TESSEL_UNDER_SANITIZER=1
# memcheck DEVICES NAME: every test binary on the test devices DEVICES (empty: the default ones).
memcheck() {
  for t in $tests; do
    step "$2:$(basename "$t")" env TESSEL_TEST_DEVICES="$1" TESSEL_MULTI_GPU_SECONDS=5 TESSEL_ALLOCATOR=direct \
      compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check full "$t" --gtest_filter="$SANITIZER_FILTER" \
      --gtest_color=no
  done
}
if wants memcheck; then memcheck "${TESSEL_TEST_DEVICES:-0}" memcheck; fi
# cuda:1 alone (CUDA_VISIBLE_DEVICES would renumber it as 0): the cross-device tests still use both.
if wants device1-memcheck && [ "$gpus" -ge 2 ]; then memcheck 1 memcheck-cuda1; fi
if wants racecheck; then
  for t in $tests; do
    case $(basename "$t") in tessel_core_tests|tessel_memory_tests) continue ;; esac
    step "racecheck:$(basename "$t")" compute-sanitizer --tool racecheck --error-exitcode 1 \
      "$t" --gtest_filter="$SANITIZER_FILTER" --gtest_color=no
  done
fi

echo
echo "gpu-check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
printf '%s\n' "${summary[@]}"
for f in "$LOGS"/test*:*.log; do grep -hE '^\[  (PASSED|FAILED|SKIPPED) ' "$f" | sed "s|^|$(basename "$f" .log): |"; done
exit $failed

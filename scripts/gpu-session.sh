#!/usr/bin/env bash
# One batched GPU-machine session for developers: build in Release, then run the steps named in
# STEPS (space-separated), each with a timeout, logging to $LOGS/<step>.log, then pack the logs
# and bench/results into $OUT/logs.tgz. Steps:
#   test:NAME[:FILTER]        build/tests/cpp/tessel_NAME_tests --gtest_filter=FILTER
#   memcheck:NAME[:FILTER]    compute-sanitizer memcheck of that binary (allocator in direct mode)
#   memcheck-caching:NAME[:FILTER]  the same with the caching allocator (graph capture needs its reservation)
#   racecheck:NAME[:FILTER]   compute-sanitizer racecheck
#   bench:NAME                build/bench/NAME_bench
#   py:SCRIPT[,ARGS]          python3 SCRIPT ARGS (commas become spaces; installs the package first)
#   cli:ARGS                  build/cli/tessel ARGS (commas become spaces)
#   pytest                    pip install the package, then pytest tests/python
#   sh:COMMAND                bash -c COMMAND (commas become spaces)
# TARGETS (optional) limits the build to those targets; SKIP_BUILD=1 skips it (py: and pytest steps
# need only the package that PY_INSTALL builds). SESSION_BUDGET (seconds, default 540) caps
# the whole call: no step starts after it, and each step's limit is cut to what is left, so the
# logs are packed before the device tool's 600 s limit kills the call (a call killed there returns
# no logs.tgz: the first call of 2026-12-01 lost all 600 s of its output that way).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
LOGS=${LOGS:-/tmp/gpu-session-logs}  # outside $OUT: only logs.tgz comes back
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
SESSION_BUDGET=${SESSION_BUDGET:-540}
# The build has its own limit: a short STEP_TIMEOUT for the tests must not cut it off (a cold
# Release build of tessel_ops_tests beside the pip install took 177-198 s on the H100 machine).
BUILD_TIMEOUT=${BUILD_TIMEOUT:-600}
rm -rf "$LOGS"; mkdir -p "$LOGS"  # fresh per call: a warm machine keeps /tmp
summary=()
step_index=0
step() {
  local name=$1; shift
  step_index=$((step_index + 1))  # in the name: steps whose first 100 characters agree get their own logs
  local log="$LOGS/$(printf '%02d' "$step_index")_$(echo "$name" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-100).log"
  local start=$SECONDS limit=$STEP_TIMEOUT
  [ "$name" = build ] && limit=$BUILD_TIMEOUT
  local left=$((SESSION_BUDGET - SECONDS))
  if [ "$left" -le 5 ]; then
    summary+=("$(printf '%-44s SKIPPED (session budget spent)' "$name")")
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name ($(date +%T), limit ${limit}s)"
  if timeout "$limit" "$@" >"$log" 2>&1; then
    summary+=("$(printf '%-44s ok     %4ds' "$name" $((SECONDS - start)))")
  else
    summary+=("$(printf '%-44s FAILED %4ds' "$name" $((SECONDS - start)))")
    tail -n 25 "$log"
  fi
  grep -hE '^\[  (PASSED|FAILED) |^[0-9]+ (passed|failed)|FAILED TEST|ERROR SUMMARY|RACECHECK SUMMARY' "$log" | head -12
}
pack() {
  [ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" -C "$LOGS" . -C "$PWD" bench/results 2>/dev/null
  echo; echo "gpu-session summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  printf '%s\n' "${summary[@]}"
}
trap pack EXIT

export CCACHE_DISABLE=1
# PY_INSTALL=1: pip-install the Python package in the background, beside the C++ build.
pip_pid=
if [ -n "${PY_INSTALL:-}" ]; then
  (timeout "$SESSION_BUDGET" python3 -m pip install -q --no-build-isolation --no-deps . >"$LOGS/pip_install.log" 2>&1
   echo $? >"$LOGS/pip_install.rc") &
  pip_pid=$!
fi
# The package must be installed before a py: or pytest step: wait for the background install, or
# install now (once).
wait_pip() {
  if [ -n "$pip_pid" ]; then wait "$pip_pid"; pip_pid=; tail -5 "$LOGS/pip_install.log"
  elif [ ! -f "$LOGS/pip_install.rc" ]; then
    timeout $((SESSION_BUDGET - SECONDS)) python3 -m pip install -q --no-build-isolation --no-deps . \
      >"$LOGS/pip_install.log" 2>&1; echo $? >"$LOGS/pip_install.rc"
  fi
}
[ -z "${SKIP_BUILD:-}" ] && step build bash -c "cmake -S . -B $BUILD_DIR -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null && cmake --build $BUILD_DIR -j ${JOBS:-16} ${TARGETS:+--target $TARGETS}"
for s in ${STEPS:-}; do
  kind=${s%%:*}; rest=${s#*:}
  name=${rest%%:*}; filter=${rest#*:}; [ "$filter" = "$rest" ] && filter='*'
  bin=$BUILD_DIR/tests/cpp/tessel_${name}_tests
  case $kind in
    test) step "$s" "$bin" --gtest_color=no --gtest_filter="$filter" ;;
    memcheck) step "$s" env TESSEL_ALLOCATOR=direct TESSEL_UNDER_SANITIZER=1 compute-sanitizer --tool memcheck \
                --error-exitcode 1 "$bin" --gtest_color=no --gtest_filter="$filter" ;;
    memcheck-caching) step "$s" env TESSEL_UNDER_SANITIZER=1 compute-sanitizer --tool memcheck \
                --error-exitcode 1 "$bin" --gtest_color=no --gtest_filter="$filter" ;;
    racecheck) step "$s" env TESSEL_UNDER_SANITIZER=1 compute-sanitizer --tool racecheck --error-exitcode 1 \
                 "$bin" --gtest_color=no --gtest_filter="$filter" ;;
    bench) step "$s" "$BUILD_DIR/bench/${rest}_bench" ;;
    py) wait_pip; step "$s" env PYTHONUNBUFFERED=1 python3 ${rest//,/ } ;;
    cli) step "$s" "$BUILD_DIR/cli/tessel" ${rest//,/ } ;;
    pytest)
      wait_pip
      step "$s" bash -c "[ \"\$(cat $LOGS/pip_install.rc)\" = 0 ] && python3 -m pytest -q -rs --timeout 600 tests/python ${rest#pytest}" ;;
    sh) [ -n "$pip_pid" ] && wait_pip  # a command may import the package: not before its install ends
        step "$s" bash -c "${rest//,/ }" ;;
    *) echo "gpu-session: unknown step $s" ;;
  esac
done

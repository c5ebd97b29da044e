#!/usr/bin/env bash
# Before and after, on a GPU machine, for a change that must not slow anything down. Builds the
# baseline tree BASE_DIR (an unpacked `git archive` of the base commit) and this tree, C++ and
# Python, then runs the host-overhead and elementwise benchmarks alternately, baseline first,
# ROUNDS times: the same machine and the same minutes for both, so hosts that vary from minute
# to minute vary for both.
#   scripts/ab-bench.sh build         builds both trees' C++ (the baseline without its tests)
#   scripts/ab-bench.sh build-python  starts both trees' Python builds in the background
#   scripts/ab-bench.sh cpp      C++ rounds: overhead_bench, `tessel bench` vector_add and fused_chain,
#                                and (first round) elementwise_bench
#   scripts/ab-bench.sh python   Python rounds: bench/peers/python_overhead.py, summarized by
#                                scripts/ab_summary.py into $LOGS/ab-python.json
#   scripts/ab-bench.sh profile-ab  this tree's Python built twice, with the op ranges compiled out
#                                (-DTESSEL_NVTX=OFF, /tmp/site-noranges) and as usual (/tmp/site-ranges),
#                                then bench/peers/profile_overhead.py alternating the two (issue 21)
# Logs go to $LOGS/<phase>-<round>-<tree>.log; each tree's benchmarks write its own bench/results.
set -uo pipefail
cd "$(dirname "$0")/.."
BASE_DIR=${BASE_DIR:-.baseline}
ROUNDS=${ROUNDS:-3}
LOGS=${LOGS:-${OUT:-/tmp}/ab}
JOBS=${JOBS:-8}
mkdir -p "$LOGS"
trees=("$BASE_DIR" ".")
name_of() { [ "$1" = "." ] && echo new || echo base; }

build_cpp() {  # build_cpp TREE EXTRA_CMAKE_ARGS...
  local tree=$1; shift
  cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null &&
    cmake --build "$tree/build" -j "$JOBS"
}

case ${1:-} in
  build-python)
    for tree in "${trees[@]}"; do
      name=$(name_of "$tree")
      # The Python builds outlive this command (setsid), so a later call on the warm machine finds them.
      setsid bash -c "CMAKE_BUILD_PARALLEL_LEVEL=$JOBS python3 -m pip install -q --no-build-isolation --no-deps \
        --target /tmp/site-$name $tree >$LOGS/pip-$name.log 2>&1; echo \$? >$LOGS/pip-$name.rc" </dev/null &
    done
    ;;
  build)
    build_cpp "$BASE_DIR" -DTESSEL_TESTS=OFF >"$LOGS/build-base.log" 2>&1 &
    base_pid=$!
    build_cpp . >"$LOGS/build-new.log" 2>&1
    echo "build new: $?"
    wait "$base_pid"
    echo "build base: $?"
    ;;
  cpp)
    for r in $(seq "$ROUNDS"); do
      for tree in "${trees[@]}"; do
        name=$(name_of "$tree")
        "$tree/build/bench/overhead_bench" >"$LOGS/overhead-$r-$name.log" 2>&1
        for w in vector_add fused_chain; do  # --only takes one workload
          TESSEL_PROGRESS=0 "$tree/build/cli/tessel" bench --only "$w" --no-record >>"$LOGS/suite-$r-$name.log" 2>&1
        done
        # The launch-shape sweep makes it long: the first round only.
        [ "$r" = 1 ] && "$tree/build/bench/elementwise_bench" >"$LOGS/elementwise-$r-$name.log" 2>&1
        echo "round $r $name: overhead $?"
      done
    done
    ;;
  python)
    for tree in "${trees[@]}"; do
      name=$(name_of "$tree")
      while [ ! -f "$LOGS/pip-$name.rc" ]; do sleep 5; done
      echo "pip $name: rc $(cat "$LOGS/pip-$name.rc")"
    done
    for r in $(seq "$ROUNDS"); do
      for tree in "${trees[@]}"; do
        name=$(name_of "$tree")
        (cd "$tree/bench/peers" && PYTHONPATH=/tmp/site-$name PYTHONUNBUFFERED=1 \
          python3 python_overhead.py >"$LOGS/python-$r-$name.log" 2>&1)
        echo "round $r $name: python_overhead $?"
      done
    done
    python3 scripts/ab_summary.py "$LOGS" "$LOGS/ab-python.json"
    ;;
  profile-ab)
    for variant in noranges ranges; do
      flag=ON
      [ "$variant" = noranges ] && flag=OFF
      # Separate build dirs so the two configurations do not overwrite each other.
      CMAKE_ARGS="-DTESSEL_NVTX=$flag" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS python3 -m pip install -q --no-build-isolation \
        --no-deps --target /tmp/site-$variant --config-settings=build-dir=/tmp/build-$variant . \
        >"$LOGS/pip-$variant.log" 2>&1 || { echo "pip $variant failed: $LOGS/pip-$variant.log"; exit 1; }
    done
    (cd bench/peers && TESSEL_AB_SITES=/tmp/site-noranges:/tmp/site-ranges PYTHONPATH=/tmp/site-ranges \
      PYTHONUNBUFFERED=1 python3 profile_overhead.py) 2>&1 | tee "$LOGS/profile-ab.log"
    ;;
  *) echo "usage: scripts/ab-bench.sh build|build-python|cpp|python|profile-ab" >&2; exit 2 ;;
esac

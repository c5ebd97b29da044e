#!/usr/bin/env bash
# Tests the binary wheel itself (`make wheel-test`), not the source tree: installs it into a fresh
# virtual environment, hides the CUDA toolkit (PATH, LD_LIBRARY_PATH, CUDA_HOME/CUDA_PATH, and the
# loader's cache where a private mount namespace can cover /usr/local/cuda*), then checks from
# outside the source tree:
#   - `tessel info`: every CUDA library the extension needs was loaded from NVIDIA's wheels, none
#     from the toolkit (also checked in /proc/self/maps after the tests), and no libmpi at import;
#   - `import tessel` opens no cuBLAS, cuSOLVER or cuFFT (the first op that needs one does);
#   - ldd of the installed extension: no libmpi, no toolkit path;
#   - `import tessel` time (warm file cache, best of 5; target 0.3 s) and that it compiles nothing;
#   - without a GPU: exactly one "CUDA unavailable" warning, then the CPU backend;
#   - bad environments: NVIDIA's wheels hidden gives an ImportError naming the wheel, not a crash;
#   - a subset of tests/python (WHEEL_TESTS), including the README's and getting-started's examples
#     (tests/python/test_docs.py), with the CUDA cases when a GPU is there.
#
# Options:
#   --wheel PATH          the wheel to test (default: the newest dist/tessel-*.whl; built if none)
#   --build               build it first (scripts/build-wheel.sh; TESSEL_WHEEL_CUDA_ARCHS=86-real for a quick one)
#   --python PY           the Python of the venv (default python3); must match the wheel's tag
#   --venv DIR            where the venv goes (default build/wheel-venv; recreated)
#   --find-links DIR      a folder of wheels to install from (NVIDIA's, scipy-openblas32, pytest...)
#   --offline             no package index: only --find-links and --site-packages
#   --site-packages DIR   an existing site-packages (a .pth in the venv, after its own) for what is
#                         already installed elsewhere: NVIDIA's CUDA 13 wheels, numpy, pytest. tessel
#                         itself installs with --no-deps; its copy in the venv comes first on sys.path.
#   --cuda-libs-from-toolkit DIR   where neither the venv nor --site-packages has CUDA 13's wheels
#                         (nvidia/cu13/lib), copy the libraries of the toolkit at DIR into the venv
#                         in the wheels' layout (a stand-in for NVIDIA's wheels, said so in the log),
#                         before the toolkit is hidden
#   --no-hide-toolkit     leave PATH/LD_LIBRARY_PATH/CUDA_HOME alone
# Environment: WHEEL_TESTS (test files of tests/python), WHEEL_TEST_TIMEOUT (s per pytest run, 1800).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

WHEEL="" BUILD=0 PY=${PYTHON:-python3} VENV=build/wheel-venv FIND_LINKS="" OFFLINE=0 SITE="" HIDE=1 TOOLKIT_LIBS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) WHEEL=$2; shift 2 ;;
    --build) BUILD=1; shift ;;
    --python) PY=$2; shift 2 ;;
    --venv) VENV=$2; shift 2 ;;
    --find-links) FIND_LINKS=$2; shift 2 ;;
    --offline) OFFLINE=1; shift ;;
    --site-packages) SITE=$2; shift 2 ;;
    --cuda-libs-from-toolkit) TOOLKIT_LIBS=$2; shift 2 ;;
    --no-hide-toolkit) HIDE=0; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "test-wheel: unknown option $1" >&2; exit 2 ;;
  esac
done

if [ "$BUILD" = 1 ] || { [ -z "$WHEEL" ] && ! ls dist/tessel-*.whl >/dev/null 2>&1; }; then
  PYTHON=$PY bash scripts/build-wheel.sh
fi
[ -z "$WHEEL" ] && WHEEL=$(ls -t dist/tessel-*.whl | head -1)
WHEEL=$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")
echo "test-wheel: $WHEEL ($(du -h "$WHEEL" | cut -f1), $(stat -c %s "$WHEEL") bytes)"

fail=0
check() { # check MESSAGE COMMAND...
  local msg=$1; shift
  if "$@"; then echo "  ok: $msg"; else echo "  FAILED: $msg"; fail=1; fi
}

# 1. A fresh venv with the wheel.
rm -rf "$VENV"
"$PY" -m venv "$VENV"
VENV=$(cd "$VENV" && pwd)
VPY="$VENV/bin/python"
VSITE=$("$VPY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
pipargs=(-q --disable-pip-version-check)
[ -n "$FIND_LINKS" ] && pipargs+=(--find-links "$FIND_LINKS")
[ "$OFFLINE" = 1 ] && pipargs+=(--no-index)
if [ -n "$SITE" ]; then
  echo "$SITE" > "$VSITE/zz-wheel-test-site.pth"    # after the venv's own site-packages
  # --ignore-installed: a tessel in SITE (a source build installed there) must not stand in for the wheel
  "$VPY" -m pip install "${pipargs[@]}" --no-deps --ignore-installed "$WHEEL"
  for spec in numpy:numpy scipy_openblas32:scipy-openblas32 pytest:pytest hypothesis:hypothesis; do
    "$VPY" -c "import ${spec%%:*}" >/dev/null 2>&1 || "$VPY" -m pip install "${pipargs[@]}" "${spec##*:}"
  done
else
  "$VPY" -m pip install "${pipargs[@]}" "$WHEEL" pytest hypothesis
fi

if [ -n "$TOOLKIT_LIBS" ] && [ ! -e "$VSITE/nvidia/cu13/lib/libcublas.so.13" ] \
   && { [ -z "$SITE" ] || [ ! -e "$SITE/nvidia/cu13/lib/libcublas.so.13" ]; }; then
  echo "test-wheel: no CUDA 13 wheels here: copying the toolkit's libraries from $TOOLKIT_LIBS into $VSITE/nvidia/cu13/lib (a stand-in for NVIDIA's wheels)"
  mkdir -p "$VSITE/nvidia/cu13/lib"
  for lib in libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcusolver.so.12 libcusparse.so.12 libnvrtc.so.13 \
             'libnvrtc-builtins.so.13.*' libnvJitLink.so.13 libcupti.so.13 libnccl.so.2; do
    for f in "$TOOLKIT_LIBS"/lib64/$lib "$TOOLKIT_LIBS"/lib/$lib "$TOOLKIT_LIBS"/extras/CUPTI/lib64/$lib \
             /usr/lib/x86_64-linux-gnu/$lib; do
      [ -e "$f" ] && { cp -L "$f" "$VSITE/nvidia/cu13/lib/$(basename "$f")"; break; }
    done
  done
  ls "$VSITE/nvidia/cu13/lib" | sed 's/^/    /'
fi

# 2. The environment with the toolkit hidden.
RUN=(env)
if [ "$HIDE" = 1 ]; then
  strip_cuda() { tr ':' '\n' <<<"$1" | grep -v -i cuda | paste -sd: -; }
  RUN=(env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT -u TESSEL_CUPTI_LIBRARY -u TESSEL_NCCL_LIBRARY
       "PATH=$VENV/bin:$(strip_cuda "$PATH")" "LD_LIBRARY_PATH=$(strip_cuda "${LD_LIBRARY_PATH:-}")"
       TESSEL_CUDA_LIBRARY_SEARCH=wheels)
  # The loader's cache may list the toolkit (ld.so.conf.d): cover /usr/local/cuda* in a private mount
  # namespace where that is allowed (root, or user namespaces), else rely on the maps check below.
  if command -v unshare >/dev/null 2>&1 && unshare -m --map-root-user true 2>/dev/null || unshare -m true 2>/dev/null; then
    HIDE_MOUNTS=1
  else
    HIDE_MOUNTS=0
    echo "test-wheel: no private mount namespace here: the toolkit stays in the loader's cache; /proc/self/maps is checked instead"
  fi
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
inenv() { # runs a command in the wheel's environment, from outside the source tree
  if [ "$HIDE" = 1 ] && [ "$HIDE_MOUNTS" = 1 ]; then
    local script="$WORK/hidden.sh"
    {
      echo 'set -e'
      echo 'for d in /usr/local/cuda /usr/local/cuda-*; do [ -d "$d" ] && [ ! -L "$d" ] && mount -t tmpfs none "$d" 2>/dev/null || true; done'
      printf 'cd %q\n' "$WORK"
      printf 'exec'; printf ' %q' "${RUN[@]}" "$@"; echo
    } > "$script"
    if [ "$(id -u)" = 0 ]; then unshare -m bash "$script"; else unshare -m --map-root-user bash "$script"; fi
  else
    (cd "$WORK" && "${RUN[@]}" "$@")
  fi
}

echo "test-wheel: checks"
INSTALLED=$("${RUN[@]}" "$VPY" -c "import importlib.util as u; print(u.find_spec('tessel').submodule_search_locations[0])")
check "tessel imports from the venv ($INSTALLED)" test "${INSTALLED#"$VENV"}" != "$INSTALLED"
EXT=$(ls "$INSTALLED"/_tessel*.so)
# In the wheel's environment (toolkit hidden): where --site-packages holds NVIDIA's wheels and
# scipy-openblas32, the run path misses them ("not found"): tessel/_cuda_libs.py loads them first.
LDD=$(inenv ldd "$EXT" 2>&1 || true)
echo "$LDD" | sed 's/^/    ldd: /'
check "the extension does not link libmpi (ts.distributed opens it)" bash -c "! grep -q libmpi <<<'$LDD'"
check "ldd resolves nothing from the toolkit" bash -c "! grep -q '/usr/local/cuda' <<<'$LDD' || [ $HIDE = 0 ]"

inenv "$VENV/bin/tessel" info | tee "$WORK/info.txt" | sed 's/^/    /'
inenv "$VENV/bin/tessel" info --json > "$WORK/info.json"
check "every CUDA library the extension needs came from NVIDIA's wheels" "$VPY" - "$WORK/info.json" <<'EOF'
import json, sys
facts = json.load(open(sys.argv[1]))
rows = [r for r in facts["libraries"] if r["loaded"] and r["library"] != "libmpi.so.40"]
bad = [r for r in rows if r["source"] != "wheel"]
print("    loaded:", ", ".join(f"{r['library']} ({r['package']})" for r in rows))
sys.exit(1 if bad or not rows or any(r["library"] == "libmpi.so.40" and r["loaded"] for r in facts["libraries"]) else 0)
EOF
check "import tessel opens no cuBLAS, cuSOLVER or cuFFT (the first op that needs one does)" inenv "$VPY" -c "
import os, sys, tessel
names = [os.path.basename(l.split()[-1]) for l in open('/proc/self/maps') if '/' in l]
opened = sorted({n for n in names if n.startswith(('libcublas', 'libcusolver', 'libcusparse', 'libcufft'))})
print('    opened at import:', opened or 'none')
sys.exit(1 if opened else 0)
"

inenv "$VPY" - > "$WORK/import.txt" 2>&1 <<'EOF' || true
import subprocess, sys, time
times = []
for _ in range(5):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import tessel"], check=True, capture_output=True)
    times.append(time.perf_counter() - t)
base = []
for _ in range(5):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    base.append(time.perf_counter() - t)
print(f"import_s {min(times) - min(base):.3f} (process with import {min(times):.3f} s, bare interpreter {min(base):.3f} s)")
EOF
cat "$WORK/import.txt" | sed 's/^/    /'
check "import tessel within 0.3 s" "$VPY" -c "import sys; s=float(open('$WORK/import.txt').read().split()[1]); sys.exit(s > 0.3)"

inenv env TESSEL_CACHE_DIR="$WORK/kernel-cache" "$VPY" -c "import tessel" 2>/dev/null || true
check "import tessel compiles nothing (its kernel cache stays empty)" test -z "$(find "$WORK/kernel-cache" -type f 2>/dev/null)"

inenv "$VPY" -c "
import os, tessel as ts
x = ts.arange(6, dtype=ts.float32) * 2 + 1
assert x.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0], x
print('device', x.device, 'cuda', ts.cuda.is_available())
" > "$WORK/first.txt" 2>&1 || true
sed 's/^/    /' "$WORK/first.txt"
if grep -q "cuda True" "$WORK/first.txt"; then
  check "a first array on the GPU" grep -q "device cuda:0" "$WORK/first.txt"
else
  check "no GPU: one warning, then the CPU backend" test "$(grep -c 'CUDA unavailable' "$WORK/first.txt")" = 1
  check "a first array on the CPU backend" grep -q "device cpu" "$WORK/first.txt"
fi

# Bad environment: NVIDIA's wheels missing, and only CUDA 12's NVRTC there (the -cu12 wheels'
# layout): the package alone on sys.path, with numpy and scipy-openblas32 linked in.
NUMPY_SITE=$("$VPY" -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
mkdir -p "$WORK/only-tessel/nvidia/cuda_nvrtc/lib"
: > "$WORK/only-tessel/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
cp -r "$INSTALLED" "$WORK/only-tessel/tessel"
for d in numpy numpy.libs scipy_openblas32; do [ -e "$NUMPY_SITE/$d" ] && ln -s "$NUMPY_SITE/$d" "$WORK/only-tessel/$d"; done
inenv env TESSEL_CUDA_LIBRARY_SEARCH=wheels "$VPY" -S -c "
import sys
sys.path = [p for p in sys.path if 'site-packages' not in p] + ['$WORK/only-tessel']
try:
    import tessel
except ImportError as e:
    print('ImportError:', e); sys.exit(0)
print('imported without the NVIDIA wheels'); sys.exit(0)
" > "$WORK/missing.txt" 2>&1 || true
sed 's/^/    /' "$WORK/missing.txt"
check "NVIDIA wheels missing: an ImportError naming the wheel to install" grep -q "pip install 'nvidia-" "$WORK/missing.txt"
check "a CUDA 12 library in its place: the message says so" grep -q "another CUDA major version" "$WORK/missing.txt"

# 3. A subset of tests/python, run against the installed wheel (tests/python's conftest only).
TESTS=${WHEEL_TESTS:-test_array.py test_cpu_backend.py test_errors_streams_kernels.py test_fft.py test_linalg.py test_distributed.py}
mkdir -p "$WORK/tests"
cp -r tests/python "$WORK/tests/python"
ln -s "$ROOT/docs" "$WORK/docs"; ln -s "$ROOT/README.md" "$WORK/README.md"; ln -s "$ROOT/CONTRIBUTING.md" "$WORK/CONTRIBUTING.md"
ln -s "$ROOT/bench" "$WORK/bench"; ln -s "$ROOT/scripts" "$WORK/scripts"
PYTEST=(timeout "${WHEEL_TEST_TIMEOUT:-1800}" "$VPY" -m pytest -q -p no:cacheprovider --rootdir "$WORK")
echo "test-wheel: the quick starts (tests/python/test_docs.py: README, installation, getting-started)"
inenv "${PYTEST[@]}" "$WORK/tests/python/test_docs.py" -k "README or installation or getting-started" \
  || { echo "  FAILED: the quick starts"; fail=1; }
echo "test-wheel: pytest $TESTS"
args=()
for t in $TESTS; do args+=("$WORK/tests/python/$t"); done
inenv "${PYTEST[@]}" "${args[@]}" || { echo "  FAILED: pytest"; fail=1; }

# 4. Nothing came from the toolkit, and libmpi was opened only by ts.distributed.
inenv "$VPY" -c "
import tessel as ts
x = ts.linalg.inv(ts.eye(3)) if ts.cuda.is_available() else None
maps = open('/proc/self/maps').read()
toolkit = sorted({l.split()[-1] for l in maps.splitlines() if '/usr/local/cuda' in l})
print('toolkit files mapped:', toolkit or 'none')
raise SystemExit(1 if toolkit else 0)
" && echo "  ok: no file of the toolkit mapped into the process" || { echo "  FAILED: the toolkit was used"; fail=1; }

# 5. The record: bench/results/<machine>-<date>.json, key "wheel" (size, import time, checks).
WHEEL_PATH="$WHEEL" IMPORT_TXT="$WORK/import.txt" FAILED="$fail" INFO_JSON="$WORK/info.json" python3 - <<'EOF' || true
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench", "peers"))
from peer_results import merge_results
info = json.load(open(os.environ["INFO_JSON"]))
gpus = [d for d in info.get("devices", []) if isinstance(d, dict) and d.get("name")]
merge_results("wheel", {
    "wheel": os.path.basename(os.environ["WHEEL_PATH"]),
    "bytes": os.path.getsize(os.environ["WHEEL_PATH"]),
    "import_s": float(open(os.environ["IMPORT_TXT"]).read().split()[1]),
    "import_note": open(os.environ["IMPORT_TXT"]).read().strip(),
    "load_average": os.getloadavg(),
    "checks_passed": os.environ["FAILED"] == "0",
}, gpus[0]["name"] if gpus else "cpu")
EOF

[ "$fail" = 0 ] && echo "test-wheel: passed" || echo "test-wheel: FAILED"
exit "$fail"

"""ts.profile(), ts.profile.range, ts.benchmark and checked mode, on every backend."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tessel as ts


def _ops(prof, name):
    return [o for o in prof.ops if o["name"] == name]


def test_profile_records_ops_shapes_memory_and_exports(device, tmp_path):
    rng = np.random.default_rng(3)
    a = ts.asarray(rng.standard_normal((4, 6)).astype(np.float32), device=device)
    b = ts.asarray(rng.standard_normal(6).astype(np.float32), device=device)
    with ts.profile() as prof:
        with ts.profile.range("my step"):
            c = a + b
            d = ts.sum(c * c)
        host = float(d)
    np.testing.assert_allclose(host, np.sum((ts.to_numpy(a) + ts.to_numpy(b)) ** 2), rtol=1e-4)
    assert not prof.recording
    add = _ops(prof, "add")
    assert add, prof.ops
    assert add[0]["args"] == "float32[4,6], float32[6]"
    assert add[0]["device"] == str(device)
    assert add[0]["start_ns"] <= add[0]["end_ns"]
    step = _ops(prof, "my step")[0]
    assert add[0]["depth"] == step["depth"] + 1
    assert step["start_ns"] <= add[0]["start_ns"] and add[0]["end_ns"] <= step["end_ns"]
    assert _ops(prof, "sum") and _ops(prof, "multiply")
    kinds = {m["kind"] for m in prof.memory_events}
    assert kinds & {"alloc", "cache_hit", "cache_miss"}, kinds
    assert all(m["reserved"] >= m["allocated"] >= 0 for m in prof.memory_events)

    if device.type == "cuda":
        assert prof.gpu_recorded, prof.cupti_status
        assert prof.gpu_linked and not prof.cupti_status, prof.cupti_status
        kernels = [g for g in prof.gpu_activities if g["op_id"] == add[0]["id"]]
        assert kernels and all(k["start_ns"] < k["end_ns"] for k in kernels)
        # Every kernel was launched inside an op: each is linked (CUPTI's launch callbacks), none
        # to the user's range around the ops.
        op_names = {o["id"]: o["name"] for o in prof.ops}
        all_kernels = [g for g in prof.gpu_activities if g["kind"] == "kernel"]
        assert all(g["op_id"] in op_names for g in all_kernels), all_kernels
        assert "my step" not in {op_names[g["op_id"]] for g in all_kernels}

    table = prof.table(sort_by="gpu_time", group_by="op")
    assert "add" in table and "my step" in table and "calls" in table
    assert "add(float32[4,6], float32[6])" in prof.table(sort_by="cpu_time", group_by="op_args")
    with pytest.raises(ts.ValueError, match="sort_by 'bogus'"):
        prof.table(sort_by="bogus")

    trace_path = tmp_path / "trace.json"
    prof.export_chrome_trace(trace_path)
    trace = json.loads(trace_path.read_text())
    events = trace["traceEvents"]
    assert any(e["ph"] == "X" and e["name"] == "add" and e["pid"] == 1 for e in events)
    assert any(e["ph"] == "C" for e in events)
    if device.type == "cuda":
        assert any(e["ph"] == "X" and e.get("cat") == "kernel" and e["pid"] >= 100 for e in events)

    png = tmp_path / "mem.png"
    prof.memory_timeline(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_range_decorator_and_nesting():
    @ts.profile.range("decorated")
    def work(x):
        return x + 1

    x = ts.ones(3)
    assert work(x).shape == (3,)  # nothing listening: a plain call
    with ts.profile() as prof:
        work(x)
        r = ts.profile.range("outer")
        with r:
            with r:  # the same object nested
                work(x)
    names = [o["name"] for o in prof.ops]
    assert names.count("decorated") == 2 and names.count("outer") == 2
    assert repr(ts.profile.range("a")) == "ts.profile.range('a')"


def test_profile_cap_drops_and_counts():
    x = ts.ones(4)
    with ts.profile(max_events=5) as prof:
        for _ in range(20):
            x + x
    assert len(prof.ops) == 5
    assert prof.dropped >= 15
    assert "dropped" in prof.table()
    with pytest.raises(ValueError, match="max_events"):
        ts.profile(max_events=0)


def test_profile_sessions_do_not_nest():
    with ts.profile():
        with pytest.raises(ts.TesselError, match="sessions do not nest"):
            with ts.profile():
                pass
    with ts.profile() as again:  # the first one ended: a new one starts
        ts.ones(2) + 1
    assert _ops(again, "add")


def test_profile_unwritable_paths_are_clear_errors():
    with ts.profile() as prof:
        ts.ones(2) * 2
    with pytest.raises(ts.TesselError, match="cannot write '/proc/no-such-dir/t.json'"):
        prof.export_chrome_trace("/proc/no-such-dir/t.json")
    with pytest.raises(ts.TesselError, match="cannot write '/proc/no-such-dir/m.png'"):
        prof.memory_timeline("/proc/no-such-dir/m.png")
    with pytest.raises(ts.TesselError, match="never started"):
        ts.profile().table()


def test_profile_without_cupti_records_host_ops():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gpu=False asks for host only: no warning
        with ts.profile(gpu=False) as prof:
            ts.ones(2) + 1
    assert not prof.gpu_recorded
    assert prof.cupti_status
    assert _ops(prof, "add")


def test_profile_malformed_cupti_settings_fail_the_start(monkeypatch):
    monkeypatch.setenv("TESSEL_PROFILE_CUPTI", "link=sometimes")
    with pytest.raises(ts.ValueError, match="TESSEL_PROFILE_CUPTI: 'link=sometimes'"):
        ts.profile().start()
    with ts.profile(gpu=False) as prof:  # no CUPTI, so its settings are not read
        ts.ones(2) + 1
    assert _ops(prof, "add")
    monkeypatch.delenv("TESSEL_PROFILE_CUPTI")
    with ts.profile() as again:  # the failed start left no session behind
        ts.ones(2) + 1
    assert _ops(again, "add")


def test_profile_cupti_missing_warns_once_and_records_host_ops(tmp_path):
    # A fresh process where libcupti cannot be found: host ops only, one warning (on a GPU).
    code = (
        "import warnings, tessel as ts\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(2):\n"
        "        with ts.profile() as p:\n"
        "            ts.ones(3) + 1\n"
        "    print(len([x for x in w if 'host ops only' in str(x.message)]), p.gpu_recorded,\n"
        "          len([o for o in p.ops if o['name'] == 'add']))\n"
    )
    env = dict(os.environ, TESSEL_CUPTI_LIBRARY=str(tmp_path / "no-libcupti.so"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    warned = 1 if ts.cuda_available() else 0
    assert out == [str(warned), "False", "1"], out


def test_profile_held_callback_api_records_unlinked_gpu_activity_and_warns_once():
    # A fresh process where another CUPTI subscriber holds the Callback API (as Nsight does):
    # kernels are still recorded, with op_id 0, and one warning says they cannot be linked.
    if not ts.cuda_available():
        pytest.skip("no CUDA device")
    code = (
        "import ctypes, os, warnings, tessel as ts\n"
        "x = ts.ones(3, device='cuda:0')\n"
        "with ts.profile() as p:\n"
        "    x + 1\n"
        "if not p.gpu_recorded:\n"
        "    print('skip', p.cupti_status.replace(' ', '_')); raise SystemExit\n"
        "path = next(l.split()[-1] for l in open('/proc/self/maps') if 'libcupti' in l)\n"
        "cupti = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_NOLOAD)\n"
        "Callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)\n"
        "ignore = Callback(lambda *a: None)\n"
        "handle = ctypes.c_void_p()\n"
        "r = cupti.cuptiSubscribe(ctypes.byref(handle), ignore, None)\n"
        "if r != 0:\n"
        "    print('skip', f'this_test_cannot_hold_the_Callback_API_(cuptiSubscribe:_{r})'); raise SystemExit\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(2):\n"
        "        with ts.profile() as p:\n"
        "            x + 1\n"
        "assert cupti.cuptiUnsubscribe(handle) == 0\n"
        "kernels = [g for g in p.gpu_activities if g['kind'] == 'kernel']\n"
        "with ts.profile() as again:\n"
        "    x + 1\n"
        "print(len([m for m in w if 'cannot be linked' in str(m.message)]), p.gpu_recorded, p.gpu_linked,\n"
        "      len(kernels) > 0 and all(g['op_id'] == 0 for g in kernels), again.gpu_linked)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    if out and out[0] == "skip":
        pytest.skip(" ".join(out[1:]))
    assert out == ["1", "True", "False", "True", "True"], out


def test_benchmark_reports_cpu_and_device_times(device):
    x = ts.ones(1000, device=device)
    calls = []

    def f(a):
        calls.append(1)
        return a + a

    res = ts.benchmark(f, (x,), n_warmup=3, n_repeat=7)
    assert len(calls) == 10
    assert len(res.cpu_times) == 7 and len(res.gpu_times) == 7
    assert all(t >= 0 for t in res.cpu_times + res.gpu_times)
    line = str(res)
    assert line.startswith("f") and "CPU:" in line and "us" in line and "\n" not in line
    assert ("GPU-" in line) == (device.type == "cuda")
    assert res.cpu_median > 0
    with pytest.raises(ValueError, match="n_repeat"):
        ts.benchmark(f, (x,), n_repeat=0)
    with pytest.raises(TypeError, match="callable"):
        ts.benchmark(3)


def test_checked_mode_nan_names_the_op_and_count(device):
    a = ts.asarray(np.array([[-1.0, 2.0, -3.0]], dtype=np.float32), device=device)
    ts.set_checks("nan")
    try:
        assert ts.checks() == ("nan",)
        ts.sqrt(a * a)  # finite
        with pytest.raises(ts.ValueError, match=r"checked mode \(nan\): sqrt\(float32\[1,3\]\) produced 2 NaN/Inf values"):
            ts.sqrt(a)
        with pytest.raises(ts.ValueError, match=r"checked mode \(nan\): (divide|true_divide)"):
            a / ts.zeros(3, device=device)
        ts.sqrt(ts.asarray(np.array([1, 4]), device=device))  # integer input: a float result, finite
    finally:
        ts.set_checks(None)
    assert ts.checks() == ()
    assert np.isnan(ts.to_numpy(ts.sqrt(a))).sum() == 2  # off again


def test_checked_mode_sync_and_lists(device):
    ts.set_checks(["sync", "nan"])
    try:
        assert ts.checks() == ("sync", "nan")
        y = ts.sum(ts.ones((3, 4), device=device) * 2)
        assert float(y) == 24.0
    finally:
        ts.set_checks("")
    with pytest.raises(ts.ValueError, match="unknown check 'nans'"):
        ts.set_checks("sync,nans")
    assert ts.checks() == ()


def test_tessel_check_environment_unknown_item_is_a_clear_error():
    code = "import tessel as ts\nts.ones(2) + 1\n"
    env = dict(os.environ, TESSEL_CHECK="sync,bogus")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "TESSEL_CHECK: unknown check 'bogus'" in proc.stderr, proc.stderr
    env["TESSEL_CHECK"] = "nan"
    code = "import tessel as ts, numpy as np\nprint(ts.checks())\nts.log(ts.asarray(np.array([-1.0])))\n"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "('nan',)" in proc.stdout
    assert "checked mode (nan): log(float64[1]) produced 1 NaN/Inf value in its output" in proc.stderr, proc.stderr


def test_tessel_profile_environment_writes_trace_and_table(tmp_path):
    prefix = tmp_path / "run"
    code = "import tessel as ts\nx = ts.ones(100)\nfor _ in range(3):\n    x = x * 2\nprint(float(ts.sum(x)))\n"
    env = dict(os.environ, TESSEL_PROFILE=str(prefix))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "800.0" in proc.stdout
    trace = json.loads((tmp_path / "run.json").read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("name") == "multiply" and e["ph"] == "X") == 3
    table = (tmp_path / "run.txt").read_text()
    assert "multiply" in table and "calls" in table


_AXPY = r"""
extern "C" __global__ void axpy_checked(float a, const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_checked_mode_bounds_user_kernels(gpu):
    n = 1000
    x = ts.arange(n, dtype=ts.float32, device=gpu)
    y = ts.ones(n, device=gpu)
    raw = ts.RawKernel(_AXPY, "axpy_checked")
    ew = ts.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y + 1", "mul_add_checked")
    ts.set_checks("bounds")
    try:
        with ts.profile() as prof:
            raw(((n + 255) // 256,), (256,), (np.float32(2.0), x, y, n))
            z = ew(x, y)
        np.testing.assert_allclose(ts.to_numpy(y), 2 * np.arange(n, dtype=np.float32) + 1)
        np.testing.assert_allclose(ts.to_numpy(z), np.arange(n) * (2 * np.arange(n) + 1) + 1, rtol=1e-6)
    finally:
        ts.set_checks(None)
    # Each launch is a range named by its kernel.
    names = [o["name"] for o in prof.ops]
    assert "axpy_checked" in names and "mul_add_checked" in names

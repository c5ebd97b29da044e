"""Developer probe: where the host time of a tiny tessel op goes (not part of the suite).

Prints the per-call time (median of rounds of back-to-back calls, one synchronization per round)
of the tiny ops, then two breakdowns:
  add:        x + y  =  tessel::add in C++ (ts._tessel._time_add_in_cpp)  +  the Python layer
  round trip: torch.from_dlpack(ts.from_dlpack(t)) split into its steps (torch's __dlpack_device__
              and __dlpack__ with the stream tessel passes, tessel's capsule import, tessel's
              __dlpack__ and torch's import), then ts.from_dlpack(t) and the round trip with the
              DLPack C exchange fast path on and off (ts._tessel._dlpack_exchange; the environment
              variable TESSEL_DLPACK_EXCHANGE=0 starts it off), with the fast path's hit count, and
              the round trip with both halves through the C tables (ts.export_to(.., torch.Tensor)).
Runs on the CPU backend without a GPU (torch rows are skipped without torch).
Usage: python3 scripts/overhead_probe.py [calls]"""
import sys
import time

import numpy as np

import tessel as ts

try:
    import torch
except ImportError:
    torch = None

CUDA = ts.cuda_available()
DEV = "cuda:0" if CUDA else "cpu"
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 20000


def sync():
    ts.synchronize(DEV)
    if torch is not None and CUDA:
        torch.cuda.synchronize()


def per_call(fn, n=CALLS, rounds=5):
    for _ in range(max(200, n // 10)):
        fn()
    sync()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        times.append((time.perf_counter() - t) / n * 1e6)
    times.sort()
    return times[len(times) // 2]


def show(name, us, note=""):
    print(f"  {name:44s} {us:8.2f} us  {note}", flush=True)


x = ts.asarray(np.array([1.5], np.float32), device=DEV)
y = ts.asarray(np.array([2.0], np.float32), device=DEV)
o = ts.empty((1,), dtype=ts.float32, device=DEV)
assert (x + y).item() == 3.5 and ts.add(x, y, out=o).item() == 3.5
print(f"device: {ts.device_name(0) if CUDA else 'cpu (CPU backend)'}; {CALLS} calls per round, median of 5")

print("tiny ops:")
loop = per_call(lambda: None)
show("(empty lambda: the probe's own loop)", loop)
cases = {
    "x.shape": lambda: x.shape,
    "ts.empty((1,))": lambda: ts.empty((1,), dtype=ts.float32, device=DEV),
    "x + y": lambda: x + y,
    "ts.add(x, y)": lambda: ts.add(x, y),
    "ts.add(x, y, out=o)": lambda: ts.add(x, y, out=o),
    "x + 1.0": lambda: x + 1.0,
    "1.0 + x": lambda: 1.0 + x,
    "x < y": lambda: x < y,
    "-x": lambda: -x,
}
measured = {name: per_call(fn) for name, fn in cases.items()}
for name, us in measured.items():
    show(name, us)

print("add breakdown (host time per call):")
cpp = ts._tessel._time_add_in_cpp(x, y, None, CALLS)
cpp_out = ts._tessel._time_add_in_cpp(x, y, o, CALLS)
show("tessel::add(x, y) from C++", cpp)
show("Python layer of x + y", measured["x + y"] - loop - cpp, "(x + y - loop - C++)")
show("Python layer of ts.add(x, y)", measured["ts.add(x, y)"] - loop - cpp)
show("tessel::add(x, y, out) from C++", cpp_out)
show("Python layer of ts.add(x, y, out=o)", measured["ts.add(x, y, out=o)"] - loop - cpp_out)

print("ts.from_dlpack(tessel array): tessel's own DLPack C exchange table vs __dlpack__:")
for label, on in (("on", True), ("off", False)):
    previous = ts._tessel._dlpack_exchange(on)
    try:
        show(f"ts.from_dlpack(x), fast path {label}", per_call(lambda: ts.from_dlpack(x)))
    finally:
        ts._tessel._dlpack_exchange(previous)

if torch is None:
    print("round trip: skipped (torch is not installed)")
    sys.exit(0)

t = torch.ones(1, device="cuda" if CUDA else "cpu")
stream = ts._tessel._dlpack_consumer_stream(0) if CUDA else None
tx = ts.from_dlpack(t)
assert torch.from_dlpack(tx).data_ptr() == t.data_ptr(), "the round trip copied"
print(f"round trip breakdown (tessel passes stream={stream}):")
steps = {
    "t.__dlpack_device__()": lambda: t.__dlpack_device__(),
    "t.__dlpack__(stream, max_version)": lambda: t.__dlpack__(stream=stream, max_version=(1, 0)),
    "  + tessel's capsule import": lambda: ts._tessel._from_dlpack_capsule(t.__dlpack__(stream=stream, max_version=(1, 0))),
    "ts.from_dlpack(t)": lambda: ts.from_dlpack(t),
    "tx.__dlpack_device__()": lambda: tx.__dlpack_device__(),
    "tx.__dlpack__(stream=1, max_version)": lambda: tx.__dlpack__(stream=1, max_version=(1, 0)),
    "torch.from_dlpack(tx)": lambda: torch.from_dlpack(tx),
    "round trip torch.from_dlpack(ts.from_dlpack(t))": lambda: torch.from_dlpack(ts.from_dlpack(t)),
    "torch t + t (reference)": lambda: t + t,
}
rt = {name: per_call(fn) for name, fn in steps.items()}
for name, us in rt.items():
    show(name, us)
capsule = rt["  + tessel's capsule import"] - rt["t.__dlpack__(stream, max_version)"]
show("tessel's capsule import alone", capsule, "(difference of the two rows above)")
show("ts.from_dlpack's own work besides torch", rt["ts.from_dlpack(t)"] - rt["t.__dlpack_device__()"]
     - rt["t.__dlpack__(stream, max_version)"] - loop, "(device query, stream, import, call)")
show("torch's share of the round trip", rt["t.__dlpack_device__()"] + rt["t.__dlpack__(stream, max_version)"]
     + rt["torch.from_dlpack(tx)"] - rt["tx.__dlpack__(stream=1, max_version)"] - rt["tx.__dlpack_device__()"] - 3 * loop)

print("DLPack C exchange fast path (torch.Tensor.__dlpack_c_exchange_api__ -> ts.from_dlpack):")
has_api = hasattr(torch.Tensor, "__dlpack_c_exchange_api__") or hasattr(torch.Tensor, "__c_dlpack_exchange_api__")
print(f"  torch {torch.__version__}: exchange API {'present' if has_api else 'absent'}; "
      f"tessel.Array exports one too: {hasattr(ts.Array, '__dlpack_c_exchange_api__')}")
hits = ts._tessel._dlpack_fast_path_hits
split = {}
for label, on in (("on", True), ("off", False)):
    previous = ts._tessel._dlpack_exchange(on)
    try:
        before = hits()
        assert ts.from_dlpack(t).data_ptr == t.data_ptr(), "ts.from_dlpack copied"
        took = hits() - before
        split[label] = {
            "ts.from_dlpack(t)": per_call(lambda: ts.from_dlpack(t)),
            "round trip": per_call(lambda: torch.from_dlpack(ts.from_dlpack(t))),
        }
    finally:
        ts._tessel._dlpack_exchange(previous)
    show(f"ts.from_dlpack(t), fast path {label}", split[label]["ts.from_dlpack(t)"],
         f"(fast path taken: {'yes' if took else 'no'})")
    show(f"round trip, fast path {label}", split[label]["round trip"],
         "(target <= 10 us)" if label == "on" else "")
if has_api:
    both = per_call(lambda: ts.export_to(ts.from_dlpack(t), torch.Tensor))
    assert ts.export_to(tx, torch.Tensor).data_ptr() == t.data_ptr(), "ts.export_to copied"
    show("ts.export_to(tx, torch.Tensor)", per_call(lambda: ts.export_to(tx, torch.Tensor)),
         "(torch's table instead of torch.from_dlpack)")
    show("round trip through both tables", both, "ts.export_to(ts.from_dlpack(t), torch.Tensor); target <= 10 us")
show("fast path saves on ts.from_dlpack(t)", split["off"]["ts.from_dlpack(t)"] - split["on"]["ts.from_dlpack(t)"])

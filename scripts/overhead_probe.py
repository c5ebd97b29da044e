"""Developer probe: where the host time of a tiny tessel op goes (not part of the suite)."""
import time, numpy as np, tessel as ts, torch

def per_call(fn, n=20000, rounds=5):
    for _ in range(2000): fn()
    torch.cuda.synchronize(); ts.synchronize("cuda:0")
    best = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n): fn()
        ts.synchronize("cuda:0"); torch.cuda.synchronize()
        best.append((time.perf_counter() - t) / n * 1e6)
    best.sort(); return best[len(best) // 2]

x = ts.asarray(np.array([1.5], np.float32), device="cuda:0")
y = ts.asarray(np.array([2.0], np.float32), device="cuda:0")
o = ts.empty((1,), dtype=ts.float32, device="cuda:0")
t = torch.ones(1, device="cuda")
cases = {
  "x.shape": lambda: x.shape,
  "x.ndim": lambda: x.ndim,
  "ts.empty((1,))": lambda: ts.empty((1,), dtype=ts.float32, device="cuda:0"),
  "x + y": lambda: x + y,
  "ts.add(x, y)": lambda: ts.add(x, y),
  "ts.add(x, y, out=o)": lambda: ts.add(x, y, out=o),
  "x + 1.0": lambda: x + 1.0,
  "-x": lambda: -x,
  "ts.from_dlpack(t)": lambda: ts.from_dlpack(t),
  "t.__dlpack__()": lambda: t.__dlpack__(),
  "x.__dlpack__()": lambda: x.__dlpack__(),
  "torch.from_dlpack(x)": lambda: torch.from_dlpack(x),
  "round trip": lambda: torch.from_dlpack(ts.from_dlpack(t)),
  "torch t + t": lambda: t + t,
}
for name, fn in cases.items():
    print(f"{name:28s} {per_call(fn):8.2f} us", flush=True)

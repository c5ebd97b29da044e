"""Where the GPU time of one large ts.linalg call goes, next to PyTorch's call on the same input:
the kernels, copies and fills of each call as CUPTI sees them (through torch.profiler, which
records every library's GPU work in the process), with their durations, the idle gaps between
them, and the call's span from its first GPU operation to its last.

    python3 bench/peers/linalg_timeline.py [--op eigh|svd] [--shape 4096 | 4096x1024] [--top 12]

Each library is called twice untimed first (handles, workspaces, JIT), then once under the
profiler, synchronized before and after. Prints a table per call; writes nothing. Skips (exit 0)
without a GPU or without torch.
"""
import argparse
import sys

import tessel as ts

from peer_results import optional_import

torch = optional_import("torch")


def calls(op):
    la = ts.linalg
    if op == "eigh":
        return {
            "tessel": lambda a: la.eigh(a),
            "tessel_ex": lambda a: la.eigh_ex(a),
            "torch": lambda a: torch.linalg.eigh(a),
        }
    return {
        "tessel": lambda a: la.svd(a, full_matrices=False),
        "torch": lambda a: torch.linalg.svd(a, full_matrices=False),
    }


def gpu_events(prof):
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            start = e.time_range.start
            out.append((start, e.time_range.end, e.name))
    return sorted(out)


def report(name, events, top):
    if not events:
        print(f"{name}: no GPU events")
        return
    span = events[-1][1] - events[0][0]
    busy = sum(end - start for start, end, _ in events)
    gaps = [events[i + 1][0] - events[i][1] for i in range(len(events) - 1)]
    print(f"\n{name}: {len(events)} GPU operations, span {span / 1e3:.3f} ms, busy {busy / 1e3:.3f} ms, "
          f"idle {sum(g for g in gaps if g > 0) / 1e3:.3f} ms")
    by_name = {}
    for start, end, what in events:
        count, total = by_name.get(what, (0, 0.0))
        by_name[what] = (count + 1, total + end - start)
    for what, (count, total) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {total / 1e3:9.3f} ms  x{count:<5d} {what[:110]}")
    big = sorted(((g, i) for i, g in enumerate(gaps)), reverse=True)[:5]
    for g, i in big:
        print(f"  gap {g:8.1f} us after {events[i][2][:60]!r} before {events[i + 1][2][:60]!r}")
    head = events[:6]
    tail = events[-6:]
    print("  first:", ", ".join(f"{e[2][:40]} {(e[1] - e[0]):.1f}us" for e in head))
    print("  last: ", ", ".join(f"{e[2][:40]} {(e[1] - e[0]):.1f}us" for e in tail))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=["eigh", "svd"], default="eigh")
    parser.add_argument("--shape", default=None, help="n for eigh, MxN for svd")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    if torch is None or not torch.cuda.is_available() or ts.cuda.device_count() == 0:
        print("linalg_timeline: needs a GPU and torch; skipped")
        return 0
    shape = args.shape or ("4096" if args.op == "eigh" else "4096x1024")
    dims = [int(v) for v in shape.split("x")]
    if args.op == "eigh":
        x = ts.random.normal(0.0, 1.0, (dims[0], dims[0]), device="cuda").astype("float32")
        x = (x + x.mT) * 0.5
    else:
        x = ts.random.normal(0.0, 1.0, tuple(dims), device="cuda").astype("float32")
    for lib, fn in calls(args.op).items():
        arg = x if lib.startswith("tessel") else torch.from_dlpack(x)
        fn(arg)
        fn(arg)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn(arg)
            torch.cuda.synchronize()
        report(f"{lib} {args.op} {shape}", gpu_events(prof), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

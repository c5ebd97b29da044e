"""What the peer scripts of bench/peers share: where results go, how a GPU region is timed, and
the small measurement helpers several of them use. The scripts run as
`python3 bench/peers/X.py`, so this folder is on sys.path and `import peer_results` finds it
(bench/compare.py puts the folder on sys.path too before it imports a peer).

Nothing here imports torch, CuPy or tessel at module level: each script imports what it measures
and skips cleanly when that is missing.
"""
import datetime
import json
import os
import re
import statistics
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def optional_import(name):
    """The module `name`, or None where it is not installed (a peer the script then skips)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def slug(device_name):
    """The device part of a results file name: the rule of bench/bench_results.hpp (device_slug)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", device_name.lower())).strip("-")


def results_path(device_name):
    """bench/results/<device>-<UTC date>.json, or the same name under $TESSEL_BENCH_RESULTS."""
    folder = os.environ.get("TESSEL_BENCH_RESULTS", os.path.join(HERE, "..", "results"))
    return os.path.join(folder, f"{slug(device_name)}-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}.json")


def merge_results(key, results, device_name, merge_rows=None, merge_keys=False):
    """Writes `results` under `key` into today's file for `device_name`, keeping the other keys
    (an unreadable file starts empty, as in bench/bench_results.hpp); prints and returns the path.
    `merge_rows` names a dict inside `results` whose entries are merged into the stored one rather
    than replacing it, so a run of some rows (--only) keeps today's other rows; `merge_keys` merges
    `results`' own keys into the stored dict the same way (a run of some sections)."""
    path = results_path(device_name)
    everything = {}
    if os.path.exists(path):
        try:
            with open(path) as f:
                everything = json.load(f)
        except (OSError, json.JSONDecodeError):
            everything = {}
    previous = everything.get(key)
    if merge_rows and isinstance(previous, dict) and isinstance(previous.get(merge_rows), dict):
        results = dict(results)
        results[merge_rows] = {**previous[merge_rows], **results.get(merge_rows, {})}
    if merge_keys and isinstance(previous, dict):
        results = {**previous, **results}
    everything[key] = results
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(everything, f, indent=2)
        f.write("\n")
    print(f"results: {path} [{key}]")
    return path


def _torch_events():
    import torch

    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def _elapsed_ms(start, stop):
    if hasattr(start, "elapsed_time"):
        return start.elapsed_time(stop)  # torch.cuda.Event
    import cupy

    return cupy.cuda.get_elapsed_time(start, stop)  # cupy.cuda.Event


def median_ms(fn, repeats=20, warmup=3, events=_torch_events):
    """Median ms of `repeats` calls of fn, each bracketed by CUDA events on the current stream,
    after `warmup` untimed calls. `events` makes the (start, stop) pair: torch's by default, or
    e.g. `lambda: (cupy.cuda.Event(), cupy.cuda.Event())`. The median of an even count is the
    upper middle, as tessel::profile::time_on_stream reports it."""
    for _ in range(warmup):
        fn()
    start, stop = events()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(_elapsed_ms(start, stop))
    return sorted(times)[len(times) // 2]


def tessel_copy_gbps(n=1 << 28, events=_torch_events):
    """The device copy bandwidth ceiling: GB/s of ts.copyto between two float32 arrays of n
    elements on the GPU (read and write counted), timed by median_ms with `events`."""
    import tessel as ts

    src = ts.random.uniform(0.0, 1.0, (n,), device="cuda")
    dst = ts.empty((n,), dtype=ts.float32, device="cuda")
    return 2 * n * 4 / median_ms(lambda: ts.copyto(dst, src), events=events) / 1e6


def latency_us(fn, sync, calls=5000, warmup=200):
    """Median wall time in us of one call followed by sync()."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def back_to_back_us(fn, sync, calls=2000, rounds=5, warmup=None):
    """Mean wall time in us per call of `calls` back-to-back calls and one sync(), median over
    `rounds` (warm-up: min(calls, 200) calls unless given)."""
    for _ in range(min(calls, 200) if warmup is None else warmup):
        fn()
    sync()
    runs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(runs)


def rel_error(got, want):
    """max |got - want| / max |want|."""
    import numpy as np

    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))

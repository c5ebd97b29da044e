"""Copies that transpose the last two axes (x.mT into a C-contiguous array), tessel against
PyTorch (x.mT.contiguous()) and CuPy (cupy.ascontiguousarray(x.swapaxes(-1, -2))) on one GPU in
the same process: float32 4096 x 4096, complex64 4096 x 1024 and float32 64 x 512 x 512.

    python3 bench/peers/transpose_copy.py [--rounds R]

Each input is made once by tessel and handed to the peers through DLPack; every result is
checked against NumPy before it is timed. Timing: peer_results.median_ms (CUDA events, the median
of repeats after a warm-up), libraries in alternating order over the rounds. GB/s counts
the bytes read and written once each, over the device copy bandwidth of the same run. Results
merge into bench/results/<device>-<date>.json under "transpose_copy". Skips without a GPU.
"""
import argparse
import statistics
import sys

import numpy as np

import tessel as ts

from peer_results import median_ms, merge_results, optional_import, tessel_copy_gbps

torch = optional_import("torch")
cupy = optional_import("cupy")


SHAPES = [((4096, 4096), "float32"), ((4096, 1024), "complex64"), ((64, 512, 512), "float32")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not ts.cuda_available() or torch is None:
        print("transpose_copy: skipped, needs CUDA and PyTorch (for the events)")
        return 0
    copy_gbps = tessel_copy_gbps()
    results = {"device": ts.device_name(0), "copy_GBps": copy_gbps, "rounds": args.rounds, "rows": {}}
    print(f"copy bandwidth {copy_gbps:.0f} GB/s")
    for shape, dtype in SHAPES:
        host = np.random.default_rng(0).standard_normal(shape).astype(dtype)
        if dtype.startswith("complex"):
            host = host + 1j * np.random.default_rng(1).standard_normal(shape).astype(dtype)
        x = ts.asarray(host, device="cuda")
        want = np.ascontiguousarray(np.swapaxes(host, -1, -2))
        calls = {"tessel": lambda: x.mT.contiguous()}
        calls["torch"] = (lambda t: (lambda: t.mT.contiguous()))(torch.from_dlpack(x))
        if cupy is not None:
            calls["cupy"] = (lambda c: (lambda: cupy.ascontiguousarray(c.swapaxes(-1, -2))))(cupy.from_dlpack(x))
        for lib, fn in calls.items():
            got = fn()
            got = np.asarray(got.cpu()) if lib == "torch" else (cupy.asnumpy(got) if lib == "cupy" else got.numpy())
            assert np.array_equal(got, want), f"{lib}: wrong transpose of {shape} {dtype}"
        round_ms = {lib: [] for lib in calls}
        order = list(calls)
        for r in range(args.rounds):
            for lib in (order if r % 2 == 0 else order[::-1]):
                round_ms[lib].append(median_ms(calls[lib]))
        nbytes = 2 * host.nbytes
        name = f"{'x'.join(map(str, shape))}_{dtype}"
        row = {"libraries": {}}
        for lib in order:
            ms = statistics.median(round_ms[lib])
            row["libraries"][lib] = {"ms": ms, "round_ms": round_ms[lib], "GBps": nbytes / ms / 1e6,
                                     "fraction_of_copy_bandwidth": nbytes / ms / 1e6 / copy_gbps}
            print(f"{name:24s} {lib:7s} {ms * 1e3:9.1f} us  {nbytes / ms / 1e6:7.0f} GB/s "
                  f"({100 * nbytes / ms / 1e6 / copy_gbps:.0f}% of copy)")
        results["rows"][name] = row
    merge_results("transpose_copy", results, ts.device_name(0), merge_rows="rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PyTorch's side of bench/pipeline_bench.cpp: 1 GiB of float32 on the host -> x*2+1 -> host,
chunked over 1 and 4 CUDA streams with pinned buffers and non_blocking copies (the usual way to
overlap copies and compute in PyTorch), from pinned and from pageable input. The pageable
variant stages each chunk through a pinned buffer per stream, as a careful user would.
Results are checked, then timed (wall clock, median of repeats after a warm-up) and merged into
bench/results/<device>-<date>.json under "pipeline_peers".

The reference rows (pinned_4_streams, ...) use 16 MiB chunks; --chunks-mib=16,32,64 (the default)
also times the pinned loop with 2 and 4 streams at the other chunk sizes, as rows named
pinned_<S>_streams_<M>MiB, so tessel's sweep can be compared at equal chunk sizes."""
import argparse
import sys
import time

try:
    import torch
except ImportError:
    print("torch_pipeline: skipped: PyTorch is not installed")
    sys.exit(0)

from peer_results import merge_results

GiB = 1 << 30
CHUNK_BYTES = 16 << 20


def run_pinned(x, y, streams, chunk):
    """x, y pinned host tensors; chunk i on streams[i % len(streams)]."""
    n = x.numel()
    for i, start in enumerate(range(0, n, chunk)):
        s = streams[i % len(streams)]
        with torch.cuda.stream(s):
            d = x[start:start + chunk].to("cuda", non_blocking=True)
            r = d * 2 + 1
            y[start:start + chunk].copy_(r, non_blocking=True)
    torch.cuda.synchronize()


def run_pageable(x, y, streams, chunk, staging_in, staging_out):
    """x, y pageable; each stream has a pinned staging buffer in and out, reused after its event."""
    n = x.numel()
    events = [None] * len(streams)
    pending = [None] * len(streams)  # (start, length) to copy out of staging_out
    for i, start in enumerate(range(0, n, chunk)):
        k = i % len(streams)
        s = streams[k]
        if events[k] is not None:
            events[k].synchronize()
            ps, pl = pending[k]
            y[ps:ps + pl].copy_(staging_out[k][:pl])
        length = min(chunk, n - start)
        staging_in[k][:length].copy_(x[start:start + length])
        with torch.cuda.stream(s):
            d = staging_in[k][:length].to("cuda", non_blocking=True)
            r = d * 2 + 1
            staging_out[k][:length].copy_(r, non_blocking=True)
            events[k] = torch.cuda.Event()
            events[k].record(s)
        pending[k] = (start, length)
    for k in range(len(streams)):
        if events[k] is not None:
            events[k].synchronize()
            ps, pl = pending[k]
            y[ps:ps + pl].copy_(staging_out[k][:pl])


def timed(fn, repeats=7):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks-mib", default="16,32,64",
                        help="chunk sizes (MiB) for the extra pinned rows, comma-separated")
    args = parser.parse_args()
    extra_chunks = [int(v) for v in args.chunks_mib.split(",") if v]
    if any(v <= 0 for v in extra_chunks):
        parser.error("--chunks-mib takes positive sizes")
    if not torch.cuda.is_available():
        print("torch_pipeline: skipped: no CUDA device")
        return
    n = GiB // 4
    chunk = CHUNK_BYTES // 4
    x = (torch.rand(n) * 2000 - 1000).pin_memory()
    y = torch.empty(n).pin_memory()
    x_pageable, y_pageable = x.clone(), torch.empty(n)
    want_sample = x[::4099] * 2 + 1
    out = {"torch": torch.__version__, "bytes": n * 4, "chunk_bytes": CHUNK_BYTES, "x2p1_1GiB": []}
    for num_streams in (1, 4):
        streams = [torch.cuda.Stream() for _ in range(num_streams)]
        y.fill_(float("nan"))
        run_pinned(x, y, streams, chunk)
        assert torch.equal(y[::4099], want_sample), "pinned pipeline result is wrong"
        ms = timed(lambda: run_pinned(x, y, streams, chunk))
        out["x2p1_1GiB"].append({"name": f"pinned_{num_streams}_streams", "streams": num_streams, "ms": ms, "GBps": n * 4 / ms / 1e6})
        print(f"torch pinned, {num_streams} stream(s): {ms:.2f} ms, {n * 4 / ms / 1e6:.2f} GB/s")

        staging_in = [torch.empty(chunk).pin_memory() for _ in streams]
        staging_out = [torch.empty(chunk).pin_memory() for _ in streams]
        y_pageable.fill_(float("nan"))
        run_pageable(x_pageable, y_pageable, streams, chunk, staging_in, staging_out)
        assert torch.equal(y_pageable[::4099], want_sample), "pageable pipeline result is wrong"
        ms = timed(lambda: run_pageable(x_pageable, y_pageable, streams, chunk, staging_in, staging_out), repeats=5)
        out["x2p1_1GiB"].append({"name": f"pageable_{num_streams}_streams", "streams": num_streams, "ms": ms, "GBps": n * 4 / ms / 1e6})
        print(f"torch pageable in+out, {num_streams} stream(s): {ms:.2f} ms, {n * 4 / ms / 1e6:.2f} GB/s")

    for mib in extra_chunks:
        if mib * (1 << 20) == CHUNK_BYTES:
            continue  # the reference rows above
        extra = (mib << 20) // 4
        for num_streams in (2, 4):
            streams = [torch.cuda.Stream() for _ in range(num_streams)]
            y.fill_(float("nan"))
            run_pinned(x, y, streams, extra)
            assert torch.equal(y[::4099], want_sample), "pinned pipeline result is wrong"
            ms = timed(lambda: run_pinned(x, y, streams, extra))
            out["x2p1_1GiB"].append({"name": f"pinned_{num_streams}_streams_{mib}MiB", "streams": num_streams,
                                     "chunk_bytes": mib << 20, "ms": ms, "GBps": n * 4 / ms / 1e6})
            print(f"torch pinned, {num_streams} streams, {mib} MiB chunks: {ms:.2f} ms, {n * 4 / ms / 1e6:.2f} GB/s")

    merge_results("pipeline_peers", out, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    main()

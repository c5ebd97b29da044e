"""ts.Pipeline: pipelined results equal sequential ones, errors cancel cleanly, bad input."""
import gc

import numpy as np
import pytest

import tessel as ts
from conftest import GPU, assert_close


def memory_in_use(device):
    """Bytes the allocator of `device` has handed out (host stats on the CPU)."""
    gc.collect()
    if device.type == "cuda":
        ts.cuda.synchronize(device)
        return ts.cuda.memory_stats(device)["allocated_bytes"]
    return ts.cuda.host_memory_stats()["allocated_bytes"]


def affine(x):
    return x * 2 + 1


@pytest.mark.parametrize("trial", range(6))
def test_pipeline_equals_sequential(device, rng, trial):
    rows = int(rng.integers(1, 400))
    cols = int(rng.integers(1, 9))
    chunk = int(rng.integers(1, rows + 2))  # often not a divisor of rows: a short last chunk
    streams = int(rng.integers(1, 5))
    buffering = int(rng.integers(1, 4))
    host = rng.standard_normal((rows, cols)).astype("float32")  # pageable NumPy input
    p = ts.Pipeline(affine, chunk_size=chunk, streams=streams, buffering=buffering, device=device)
    got = p.run(host)
    assert isinstance(got, np.ndarray)  # NumPy in, NumPy out
    assert_close(got, host * 2 + 1)
    r = p.report
    assert r.chunks == -(-rows // chunk)
    assert r.input_bytes == host.nbytes and r.output_bytes == host.nbytes
    assert r.device == str(device)
    assert "chunks" in str(r) and r.as_dict()["chunks"] == r.chunks


def test_numpy_result_is_read_without_copy(device, rng):
    host = rng.standard_normal(1000).astype("float32")
    got = ts.Pipeline(lambda x: x * 2 + 1, device=device).run(host)
    view = np.asarray(got)
    assert view is got or np.shares_memory(view, got)
    assert_close(view, host * 2 + 1)


def test_tessel_input_and_changed_shape_and_dtype(device, rng):
    host = ts.asarray(rng.standard_normal((37, 4)).astype("float32"), device="cpu")
    p = ts.Pipeline(lambda x: ts.sum(x, axis=1).astype(ts.float64), chunk_size=5, streams=3, device=device)
    got = p.run(host)
    assert isinstance(got, ts.Array) and got.device == ts.Device("cpu")
    assert_close(got, np.asarray(host).sum(axis=1).astype("float64"), rtol=1e-5)


def test_out_and_on_chunk(device, rng):
    host = rng.standard_normal((50, 3)).astype("float32")
    out = np.full((50, 3), np.nan, dtype="float32")
    p = ts.Pipeline(affine, chunk_size=7, streams=2, device=device)
    assert p.run(host, out=out) is out
    assert_close(out, host * 2 + 1)
    seen = []
    assert p.run(host, on_chunk=lambda row, chunk: seen.append((row, chunk))) is None
    assert [row for row, _ in seen] == list(range(0, 50, 7))
    assert_close(np.concatenate([c for _, c in seen]), host * 2 + 1)  # chunks are copies: still valid


def test_iterable_of_chunks(device, rng):
    sizes = [int(s) for s in rng.integers(1, 30, size=7)]
    chunks = [rng.standard_normal((s, 2)).astype("float32") for s in sizes]
    p = ts.Pipeline(affine, streams=3, device=device)
    got = p.run(iter(chunks))
    assert_close(got, np.concatenate(chunks) * 2 + 1)
    assert p.report.chunks == len(chunks)
    out = np.zeros((sum(sizes), 2), dtype="float32")
    p.run((c for c in chunks), out=out)
    assert_close(out, np.concatenate(chunks) * 2 + 1)
    with pytest.raises(ts.ShapeError, match="too small"):
        p.run(iter(chunks), out=np.zeros((3, 2), dtype="float32"))
    empty = p.run(iter([]))
    assert empty.shape == (0,)


def test_zero_length_input(device):
    got = ts.Pipeline(affine, device=device).run(np.zeros((0, 4), dtype="float32"))
    assert got.shape == (0, 4) and got.dtype == np.float32


class Boom(Exception):
    pass


@pytest.mark.parametrize("fail_at", [0, 3, 9])
def test_error_in_chunk_k_cancels_and_reraises(device, rng, fail_at):
    host = rng.standard_normal((100, 8)).astype("float32")
    calls = []
    armed = {"on": False}

    def compute(x):
        calls.append(len(calls))
        if armed["on"] and len(calls) - 1 == fail_at:
            raise Boom(f"chunk {fail_at}")
        return x * 2 + 1

    p = ts.Pipeline(compute, chunk_size=10, streams=3, device=device)
    p.run(host)  # warm the pools so the baseline includes their caches
    calls.clear()
    armed["on"] = True
    before = memory_in_use(device)
    try:
        p.run(host)
    except Boom as e:  # the same Python exception type, not a wrapper
        assert str(e) == f"chunk {fail_at}"
        notes = getattr(e, "__notes__", [])
        assert not notes or f"chunk {fail_at}" in notes[0]
    else:
        pytest.fail("the compute error was not raised")
    assert len(calls) == fail_at + 1  # nothing after the failing chunk was computed
    assert memory_in_use(device) == before
    # The pipeline still works afterwards.
    armed["on"] = False
    assert_close(p.run(host), host * 2 + 1)


def test_error_note_counts_the_chunks_of_each_run(device, rng):
    """Every run numbers its chunks from 0 in the error note: array runs (the kept pipeline),
    iterable runs after them, and runs repeated on one Pipeline."""
    host = rng.standard_normal((40, 3)).astype("float32")
    state = {"calls": 0, "fail_at": None}

    def compute(x):
        k = state["calls"]
        state["calls"] += 1
        if k == state["fail_at"]:
            raise Boom(f"call {k}")
        return x * 2 + 1

    p = ts.Pipeline(compute, chunk_size=10, streams=2, device=device)
    for run in range(3):
        assert_close(p.run(host), host * 2 + 1)  # 4 chunks numbered 0..3, then the next run
        chunks = [host[i:i + 10] for i in range(0, 40, 10)]
        for source in (host, iter(chunks)):
            state["calls"], state["fail_at"] = 0, 2
            with pytest.raises(Boom) as info:
                p.run(source)
            notes = getattr(info.value, "__notes__", None)
            if notes is not None:  # Python >= 3.11
                assert any("for chunk 2)" in n for n in notes), (run, notes)
            state["fail_at"] = None


def test_error_in_chunk_iterator_and_callback(device, rng):
    def chunks():
        yield rng.standard_normal((4, 2)).astype("float32")
        raise KeyError("source broke")

    p = ts.Pipeline(affine, device=device)
    with pytest.raises(KeyError, match="source broke"):
        p.run(chunks())

    def callback(row, chunk):
        raise ZeroDivisionError("sink broke")

    with pytest.raises(ZeroDivisionError):
        p.run(np.ones((30, 2), dtype="float32"), on_chunk=callback)


def test_bad_input(device):
    host = np.ones((10, 2), dtype="float32")
    for bad in (dict(chunk_size=0), dict(streams=0), dict(streams=-2), dict(buffering=0), dict(chunk_bytes=-1)):
        with pytest.raises(ValueError, match="must be positive"):
            ts.Pipeline(affine, device=device, **bad)
    with pytest.raises(TypeError):
        ts.Pipeline(affine, chunk_size=2.5)
    with pytest.raises(TypeError):
        ts.Pipeline(affine, bogus=1)
    with pytest.raises(TypeError, match="callable"):
        ts.Pipeline(42)
    with pytest.raises(TypeError, match="progress"):
        ts.Pipeline(affine, progress="yes")
    p = ts.Pipeline(lambda x: x[:1] if x.shape[0] > 3 else x, chunk_size=4, device=device)
    with pytest.raises(ts.ShapeError, match="rows"):
        p.run(host)
    flip = {"n": 0}

    def inconsistent(x):
        flip["n"] += 1
        return ts.reshape(x, (x.shape[0], 2, 1)) if flip["n"] > 1 else x

    with pytest.raises(ts.ShapeError, match="inconsistent"):
        ts.Pipeline(inconsistent, chunk_size=3, device=device).run(host)
    with pytest.raises(ts.ShapeError, match="too small"):
        ts.Pipeline(affine, device=device).run(host, out=np.zeros((5, 2), dtype="float32"))
    with pytest.raises(TypeError, match="must return an array"):
        ts.Pipeline(lambda x: None, device=device).run(host)
    with pytest.raises(ts.ShapeError, match="0-d"):
        ts.Pipeline(affine, device=device).run(np.ones((), dtype="float32"))
    with pytest.raises(TypeError, match="iterable"):
        ts.Pipeline(affine, device=device).run(42)
    with pytest.raises(ValueError, match="not both"):
        ts.Pipeline(affine, device=device).run(host, out=host.copy(), on_chunk=print)


def test_report_and_repr():
    p = ts.Pipeline(affine, chunk_size=3, streams=2, buffering=3, device="cpu")
    assert p.report is None
    assert "chunk_size=3" in repr(p) and p.buffering == 3
    p.run(np.ones((7, 1), dtype="float32"))
    assert p.report.chunks == 3 and p.report.wall_ms >= 0


def test_compute_cycle_is_collected():
    import weakref

    class Holder:
        pass

    h = Holder()
    h.p = ts.Pipeline(lambda x: (h, x)[1], device="cpu")  # compute -> h -> pipeline -> compute
    ref = weakref.ref(h)
    assert_close(h.p.run(np.ones(3, dtype="float32")), np.ones(3, dtype="float32"))
    del h
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")
def test_cuda_pinned_input_and_overlap_report():
    host = ts.cuda.pinned_empty((1 << 20,), "float32", numpy=False)  # a tessel array over pinned memory
    view = np.from_dlpack(host)
    view[:] = np.arange(view.size, dtype="float32")
    p = ts.Pipeline(affine, streams=4, device=GPU)
    got = p.run(host)
    assert isinstance(got, ts.Array)
    assert_close(got, view * 2 + 1)
    r = p.report
    assert not r.pageable_input and r.h2d_GBps > 0 and r.d2h_GBps > 0 and r.streams >= 1
    assert 0 <= r.overlap_percent <= 100
    p.run(view.copy())  # pageable NumPy input is staged, and the report says so
    assert p.report.pageable_input

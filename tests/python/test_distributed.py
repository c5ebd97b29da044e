"""ts.distributed on the CPU backend: each test runs a worker script under mpirun (1, 2 and 4
ranks) in a subprocess, since MPI starts once per process. Every rank's input is a function of
(seed, rank), so each rank checks every collective against NumPy on all ranks' inputs."""
import datetime
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import tessel as ts

MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(MPIRUN is None or not ts.distributed.built_with_mpi(),
                               reason="needs mpirun and a tessel built with MPI")

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
TORCHRUN_CHECK = pathlib.Path(__file__).resolve().parent / "dist_torchrun_check.py"

PRELUDE = textwrap.dedent("""
    import sys
    import numpy as np
    import tessel as ts
    import tessel.distributed as dist

    def inputs(seed, rank, shape, dtype):
        rng = np.random.default_rng([seed, rank])
        if dtype == "bool":
            return rng.integers(0, 2, shape).astype(bool)
        if dtype.startswith("uint"):
            return rng.integers(0, 4, shape).astype(dtype)
        if dtype.startswith("int"):
            return rng.integers(-3, 4, shape).astype(dtype)
        values = rng.integers(-12, 13, shape) / 4.0  # exact in every float dtype, sums of 4 too
        if dtype.startswith("complex"):
            values = values + 1j * (rng.integers(-12, 13, shape) / 4.0)
        return values.astype(dtype)

    def expect_error(kind, parts, fn):
        try:
            fn()
        except kind as error:
            for part in parts:
                assert part in str(error), f"{error!r} lacks {part!r}"
            return
        raise AssertionError(f"expected {kind.__name__}")

    # ts.asarray shares a NumPy array's memory and the collectives write in place: inputs go in as copies.
""")


def run_ranks(tmp_path, np_, body, env=None, timeout=240):
    script = tmp_path / "worker.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    full_env = dict(os.environ, TESSEL_FORCE_CPU="1", OMPI_MCA_rmaps_base_oversubscribe="1", **(env or {}))
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(np_), sys.executable, str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=full_env)
    assert done.returncode == 0, f"mpirun -np {np_} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@needs_mpi
@pytest.mark.parametrize("np_", [1, 2, 4])
def test_collectives_match_numpy(tmp_path, np_):
    out = run_ranks(tmp_path, np_, """
        dist.init("cpu")
        r, n = dist.rank(), dist.world_size()
        assert dist.is_initialized() and dist.local_device() == ts.Device("cpu")
        seed = ts.asarray(np.array([np.random.SeedSequence().entropy % 2**62]))
        dist.broadcast(seed, 0)
        seed = int(seed.numpy()[0])
        all_ = lambda shape, dtype: [inputs(seed, k, shape, dtype) for k in range(n)]
        reducers = {"sum": lambda a: np.sum(a, axis=0), "prod": lambda a: np.prod(a, axis=0),
                    "min": lambda a: np.min(a, axis=0), "max": lambda a: np.max(a, axis=0),
                    "avg": lambda a: np.mean(a, axis=0)}
        dtypes = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "float16", "float32",
                  "float64", "complex64", "complex128"]
        for dtype in dtypes:
            for op, fn in reducers.items():
                if op == "avg" and dtype in ("bool",) + tuple(d for d in dtypes if "int" in d):
                    continue
                if op in ("min", "max") and dtype.startswith("complex"):
                    continue
                for shape in [(5, 3), (), (0, 4)]:
                    values = all_(shape, dtype)
                    x = ts.asarray(values[r].copy())
                    dist.all_reduce(x, op=op)
                    want = fn(np.stack(values)) if dtype != "bool" else (
                        np.any(values, axis=0) if op in ("sum", "max") else np.all(values, axis=0))
                    np.testing.assert_allclose(x.numpy().astype(np.complex128), np.asarray(want).astype(np.complex128),
                                               rtol=2e-3 if dtype == "float16" else 1e-12, err_msg=f"{op} {dtype} {shape}")
        # a non-contiguous view, written in place
        values = all_((4, 6), "float64")
        base = ts.asarray(values[r].copy())
        view = base.T[::2]
        dist.all_reduce(view, op="max")
        want = np.stack(values).max(axis=0).T[::2]
        np.testing.assert_array_equal(view.numpy(), want)
        np.testing.assert_array_equal(base.numpy()[:, 1::2], values[r][:, 1::2])  # untouched outside the view
        # broadcast, reduce, all_gather, reduce_scatter, all_to_all
        values = all_((3, 2), "int32")
        x = ts.asarray(values[r].copy()); dist.broadcast(x, src=n - 1)
        np.testing.assert_array_equal(x.numpy(), values[n - 1])
        x = ts.asarray(values[r].copy()); dist.reduce(x, dst=0, op="sum")
        np.testing.assert_array_equal(x.numpy(), np.sum(values, axis=0) if r == 0 else values[r])
        out = ts.zeros((n, 3, 2), dtype="int32"); dist.all_gather(out, ts.asarray(values[r].copy()))
        np.testing.assert_array_equal(out.numpy(), np.stack(values))
        blocks = all_((n, 5), "float32")
        out = ts.zeros(5, dtype="float32"); dist.reduce_scatter(out, ts.asarray(blocks[r].copy()), op="avg")
        np.testing.assert_allclose(out.numpy(), np.mean([b[r] for b in blocks], axis=0), rtol=1e-6)
        out = ts.zeros((n, 5), dtype="float32"); dist.all_to_all(out, ts.asarray(blocks[r].copy()))
        np.testing.assert_array_equal(out.numpy(), np.stack([b[r] for b in blocks]))
        # a ring of send/recv inside a group, and async handles
        got = ts.zeros((3, 2), dtype="int32")
        with dist.group():
            dist.send(ts.asarray(values[r].copy()), (r + 1) % n)
            dist.recv(got, (r - 1) % n)
        np.testing.assert_array_equal(got.numpy(), values[(r - 1) % n])
        x = ts.asarray(values[r].copy())
        work = dist.all_reduce(x, op="min", async_op=True)
        assert isinstance(work, dist.Work)
        work.wait()
        assert work.is_completed()
        np.testing.assert_array_equal(x.numpy(), np.min(values, axis=0))
        assert dist.barrier() is None
        # split: even and odd ranks, ordered backwards
        sub = dist.new_group(r % 2, key=-r)
        members = [k for k in reversed(range(n)) if k % 2 == r % 2]
        assert (sub.size, members[sub.rank]) == (len(members), r)
        x = ts.asarray(values[r].copy()); dist.all_reduce(x, group=sub)
        np.testing.assert_array_equal(x.numpy(), np.sum([values[k] for k in members], axis=0))
        print(f"rank {r} of {n} ok")
    """)
    # The ranks' lines may interleave in mpirun's output.
    assert sorted(re.findall(r"rank \d+ of \d+ ok", out)) == [f"rank {r} of {np_} ok" for r in range(np_)]


@needs_mpi
def test_errors(tmp_path):
    out = run_ranks(tmp_path, 2, """
        x = ts.zeros(3)
        expect_error(ts.TesselError, ["all_reduce", "before tessel.distributed.init()"], lambda: dist.all_reduce(x))
        expect_error(ts.TesselError, ["rank", "before"], dist.rank)
        dist.init("cpu")
        r = dist.rank()
        expect_error(ts.TesselError, ["already initialized"], lambda: dist.init("cpu"))
        expect_error(ts.DTypeError, ["all_reduce", "avg", "int32"], lambda: dist.all_reduce(ts.zeros(2, dtype="int32"), op="avg"))
        expect_error(ts.ValueError, ["unknown reduce op 'mean'"], lambda: dist.all_reduce(x, op="mean"))
        expect_error(ts.ShapeError, ["all_gather", "expected (2, 3)"], lambda: dist.all_gather(ts.zeros((3, 3)), x))
        expect_error(ts.ValueError, ["broadcast", "root 5"], lambda: dist.broadcast(x, src=5))
        expect_error(TypeError, ["all_reduce", "must be a tessel Array"], lambda: dist.all_reduce(np.zeros(3)))
        # TESSEL_DIST_DEBUG (set for this run): shapes that differ across ranks
        y = ts.zeros(3 + r)
        expect_error(ts.ShapeError, ["TESSEL_DIST_DEBUG", "rank 1 passed shape (4,)", "rank 0 passed shape (3,)"],
                     lambda: dist.all_reduce(y))
        # the ranks' device check, called directly: this CPU machine has no GPUs to run out of
        expect_error(ts.DeviceError, ["2 ranks on node 'n0'", "1 GPU"],
                     lambda: dist._native._check_ranks_fit_devices(0, 2, 1, "n0"))
        print(f"rank {r} errors ok")
    """, env={"TESSEL_DIST_DEBUG": "1"})
    assert out.count("errors ok") == 2


def run_alone(tmp_path, body, env):
    script = tmp_path / "alone.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=dict(base, TESSEL_FORCE_CPU="1", **env))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_torchrun_launch_without_torch_names_torch(tmp_path):
    out = run_alone(tmp_path, """
        sys.modules["torch"] = None  # torch not importable
        expect_error(RuntimeError, ["torchrun", "torch.distributed's store", "torch is not importable", "mpirun"], dist.init)
        assert not dist.is_initialized()
        print("ok")
    """, {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert "ok" in out


def test_launcher_missing_variables(tmp_path):
    out = run_alone(tmp_path, """
        expect_error(ts.TesselError, ["torchrun", "lacks WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT"], dist.init)
        assert dist._native._detect_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0"}) == "srun"
        expect_error(ts.TesselError, ["lacks SLURM_NTASKS"], lambda: dist._native._detect_launcher({"SLURM_PROCID": "0"}))
        print("ok")
    """, {"RANK": "0"})
    assert "ok" in out


@needs_mpi
@pytest.mark.parametrize("np_", [2, 4])
def test_guide_example_runs(tmp_path, np_):
    """docs/examples/python/distributed_allreduce.py, which docs/guide/distributed.rst includes."""
    example = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / "python" / "distributed_allreduce.py"
    out = run_ranks(tmp_path, np_, example.read_text())
    evens = (np_ + 1) // 2
    for r in range(np_):
        assert f"rank {r} of {np_}: {evens if r % 2 == 0 else np_ - evens} ranks share my parity" in out


def without_launcher_env():
    """os.environ without the variables of an MPI or torchrun launch (pytest may run under one)."""
    launch = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_")
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_") + launch)}


def run_torchrun(nproc, args, env):
    # --standalone: a rendezvous on a free local port, so parallel runs do not collide.
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               str(TORCHRUN_CHECK), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=dict(without_launcher_env(), **env))
    assert done.returncode == 0, f"torchrun failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@needs_torch
def test_torchrun_bootstrap_on_cpu():
    """Ranks from torchrun's variables, rank 0's bytes through torch.distributed's store (made-up
    bytes: NCCL needs a GPU), and the errors of a CPU device or too few GPUs under torchrun."""
    out = run_torchrun(2, ["--bootstrap-only"], {"TESSEL_FORCE_CPU": "1"})
    assert sorted(re.findall(r"rank \d of \d: torchrun bootstrap ok", out)) == [
        "rank 0 of 2: torchrun bootstrap ok", "rank 1 of 2: torchrun bootstrap ok"]


@needs_torch
@pytest.mark.skipif(not ts.cuda_available(), reason="needs a GPU")
def test_torchrun_on_gpu():
    nproc = min(ts.device_count(), 2)
    out = run_torchrun(nproc, [], {})
    assert out.count("ok") == nproc, out


def test_torchrun_variables_missing_or_malformed(tmp_path):
    out = run_alone(tmp_path, """
        import os
        expect_error(ts.TesselError, ["torchrun-style launch lacks LOCAL_WORLD_SIZE"], lambda: dist._torchrun_ranks(os.environ))
        os.environ["LOCAL_WORLD_SIZE"] = "2"
        assert dist._torchrun_ranks(os.environ) == (1, 4, 1, 2)
        os.environ["RANK"] = "one"
        expect_error(ts.ValueError, ["RANK='one' is not an integer"], lambda: dist._torchrun_ranks(os.environ))
        print("ok")
    """, {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert "ok" in out


def test_launch_checks_name_the_values():
    check = ts.distributed._native._check_launch
    with pytest.raises(ts.ValueError, match=r"rank 2 of world size 2; expected 0 <= rank < size"):
        check(2, 2, 0, 1)
    with pytest.raises(ts.ValueError, match=r"rank -1 of world size 2"):
        check(-1, 2, 0, 1)
    with pytest.raises(ts.ValueError, match=r"local rank 1 of local size 1 in a world of 2"):
        check(1, 2, 1, 1)
    with pytest.raises(ts.ValueError, match=r"local rank 0 of local size 3 in a world of 2"):
        check(0, 2, 0, 3)
    with pytest.raises(ts.TesselError, match=r"rank 0 of 2 would run on the CPU,.*mpirun -np 2.*CUDA devices"):
        check(0, 2, 0, 2, "cpu")
    if ts.device_count() < 2:  # more ranks on this node than GPUs (or a build without CUDA)
        with pytest.raises(ts.DeviceError, match=r"tessel.distributed.init"):
            check(1, 2, 1, 2, "cuda:1")


def test_init_from_launch_refuses_a_bad_id():
    if not ts.cuda_available():
        with pytest.raises(ts.TesselError, match="would run on the CPU"):
            ts.distributed._native.init_from_launch(0, 1, 0, 1, "cpu", b"")
        return
    with pytest.raises(ts.ValueError, match="the NCCL unique id has 3 bytes, expected 128"):
        ts.distributed._native.init_from_launch(0, 1, 0, 1, "cuda:0", b"abc")


@needs_torch
def test_store_exchange_gives_up_after_the_store_timeout():
    from torch.distributed import TCPStore
    store = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=1), wait_for_workers=False)
    with pytest.raises(RuntimeError, match=r"rank 1 got no NCCL unique id from rank 0 through torch.distributed's store"):
        ts.distributed._share_from_rank0(store, 1, None, "tessel/test")
    # rank 0's value reaches a later reader, without the prefix that marks it as a value
    assert ts.distributed._share_from_rank0(store, 0, lambda: b"\x00id", "tessel/test2") == b"\x00id"
    assert ts.distributed._share_from_rank0(store, 1, None, "tessel/test2") == b"\x00id"

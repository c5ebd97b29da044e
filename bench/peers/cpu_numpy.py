"""tessel's CPU backend against NumPy and PyTorch's CPU tensors, in one process (issue 43).

Rows (float32 unless named): a + b (1e7), exp(a) * b + 1 (1e7; also through ts.fuse), sum (1e7),
matmul 1024^2, fft 2^20 complex64, sort and argsort (5e6), a[mask] (1e7, half the mask set),
cumsum (1e7), unique values (5e6 int32 keys in [0, 5e6)), take/gather (1e7 random int64 indices
into 1e7 values), linalg at 512 (solve with one right-hand side, eigh, svd without full
matrices; float64, NumPy's default) and the particle step on one rank (tessel's
ts.sim.DistributedParticles in a world of one CPU rank, against the same DEM step written with
NumPy's and PyTorch's array ops: velocity Verlet, a uniform grid sorted by cell, linear
spring-dashpot contacts, walls and gravity, as bench/peers/numba_sim.py).

Every library's result is checked against NumPy's before timing. Each round runs every library
once per row, the order rotating from round to round, and a row reports the median over rounds.
Before a library's turn the process sleeps --settle-ms (250 ms): BLAS and OpenMP pools spin for
a while after a call (OpenBLAS's threads up to about 0.1 s), and on two cores one library's
spinning threads would slow the next library's call. Then the library runs the op once untimed
(its own threads awake, its data in cache, its clock up after the pause) and once timed: every
row is a steady-state time, the same way for the three libraries.
Each library runs with its own default threads (NumPy: one, its BLAS: the CPU count; PyTorch:
torch.get_num_threads(); tessel: ts.num_threads(), TESSEL_NUM_THREADS or the affinity mask).

The CPU's bandwidth is measured in the same run, with NumPy on Python threads (the GIL is released
inside its loops): read = 4n bytes / time of a NumPy reduction over the row's 1e7 float32 split
across the CPUs (the fastest of np.sum of the float64 view, np.count_nonzero of the uint8 view and
np.max: the cheaper the work per byte, the closer to the memory's own rate); copy = 8n bytes (read
and written) / time of np.copyto into a preallocated array. They are timed in the sum and a + b
rows' own rounds, beside the libraries (the machine's memory rate drifts by a third from minute to
minute on this shared VM, and is lower after the settle pause), and once more after the rows back
to back on 1..T threads, beside tessel's sum and a + b timed the same way (bandwidth()). The sum
row's bandwidth is its 4n bytes / time; a + b's is 12n bytes / time (two reads and a write, into
a new array). 1e7 float32 is 40
MB against this EPYC's 32 MB L3, so part of a repeated read hits the cache, for NumPy's readers
as for the rows. PyTorch missing: its column is skipped.

  python3 bench/peers/cpu_numpy.py [--rounds 11] [--only add,sum,...] [--no-write]

Results merge into bench/results/cpu-<date>.json under "cpu_numpy" (rows merge, so --only keeps
today's other rows).
"""
import argparse
import concurrent.futures
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

import tessel as ts

from peer_results import merge_results, optional_import

DEV = "cpu"
LIBS = ("numpy", "torch", "tessel")


def _t(x):
    return ts.asarray(x, device=DEV)


def _close(got, want, rtol, atol=0.0, what=""):
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, NumPy's {want.shape}")
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        err = np.max(np.abs(got.astype(np.complex128) - want.astype(np.complex128)))
        raise AssertionError(f"{what}: differs from NumPy's (max abs error {err:.3g})")


def _np(x):
    """A NumPy view of a torch tensor or tessel array."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "numpy") and not isinstance(x, ts.Array):
        return x.numpy()
    return ts.to_numpy(x)


# ---------------------------------------------------------------------------------------------
# The particle step in array ops (NumPy's or PyTorch's): the physics of bench/peers/numba_sim.py.
RADIUS, STIFFNESS, ZETA, DENSITY, DT, GRAVITY = 0.004, 1000.0, 0.3, 1000.0, 1e-4, -9.81


class ArraySim:
    """A uniform-grid DEM step written with whole-array ops. `xp` is "numpy" or "torch"."""

    def __init__(self, xp, n, seed=2026, torch=None):
        self.kind, self.torch = xp, torch
        side = (n / 1e6) ** (1.0 / 3.0)
        rng = np.random.default_rng(seed)
        f32 = np.float32
        self.n, self.lo, self.hi = n, f32(0.0), f32(side)
        self.dims = max(1, int(math.floor(side / (2 * RADIUS))))
        self.inv_cell = f32(self.dims / side)
        pos = rng.uniform(RADIUS, side - RADIUS, (3, n)).astype(f32)
        vel = rng.uniform(-0.05, 0.05, (3, n)).astype(f32)
        self.m = f32(DENSITY * 4.0 / 3.0 * math.pi * RADIUS**3)
        # The 27 neighbour cell offsets.
        d = self.dims
        offsets = [(dz * d + dy) * d + dx for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
        deltas = [(dx, dy, dz) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
        if xp == "numpy":
            self.pos, self.vel, self.acc = pos, vel, np.zeros((3, n), f32)
        else:
            self.pos, self.vel = torch.from_numpy(pos), torch.from_numpy(vel)
            self.acc = torch.zeros((3, n), dtype=torch.float32)
        self.offsets, self.deltas = offsets, deltas
        self.contacts = 0
        self._forces()

    def _cells(self, p):
        if self.kind == "numpy":
            c = np.clip(np.floor((p - self.lo) * self.inv_cell).astype(np.int64), 0, self.dims - 1)
        else:
            c = ((p - float(self.lo)) * float(self.inv_cell)).floor().to(self.torch.int64).clamp_(0, self.dims - 1)
        return c

    def _forces(self):
        if self.kind == "numpy":
            self._forces_numpy()
        else:
            self._forces_torch()

    def _forces_numpy(self):
        d, n = self.dims, self.n
        c = self._cells(self.pos)
        key = (c[2] * d + c[1]) * d + c[0]
        order = np.argsort(key, kind="stable")
        ks = key[order]
        p = self.pos[:, order]
        v = self.vel[:, order]
        cs = c[:, order]
        cells = d * d * d
        start = np.searchsorted(ks, np.arange(cells), side="left")
        end = np.searchsorted(ks, np.arange(cells), side="right")
        f = np.zeros((3, n), np.float32)
        count = np.zeros(n, np.int64)
        k, zeta, m = np.float32(STIFFNESS), np.float32(ZETA), self.m
        m_eff = np.float32(m * m / (m + m))
        gamma = np.float32(2.0) * zeta * np.float32(math.sqrt(m_eff * k))
        rs = np.float32(2 * RADIUS)
        for (dx, dy, dz), off in zip(self.deltas, self.offsets):
            ok = ((cs[0] + dx >= 0) & (cs[0] + dx < d) & (cs[1] + dy >= 0) & (cs[1] + dy < d) & (cs[2] + dz >= 0)
                  & (cs[2] + dz < d))
            i = np.nonzero(ok)[0]
            nc = ks[i] + off
            lo, hi = start[nc], end[nc]
            cnt = hi - lo
            i = np.repeat(i, cnt)
            first = np.repeat(lo - np.cumsum(cnt) + cnt, cnt)
            j = first + np.arange(i.size)
            keep = i != j
            i, j = i[keep], j[keep]
            dd = p[:, j] - p[:, i]
            d2 = (dd * dd).sum(axis=0)
            touch = (d2 < rs * rs) & (d2 > 0)
            i, j, dd, d2 = i[touch], j[touch], dd[:, touch], d2[touch]
            dist = np.sqrt(d2)
            nrm = dd / dist
            vr = v[:, j] - v[:, i]
            vn = (vr * nrm).sum(axis=0)
            fn = k * (rs - dist) - gamma * vn
            for a in range(3):
                f[a] += np.bincount(i, weights=-fn * nrm[a], minlength=n).astype(np.float32)
            count += np.bincount(i, minlength=n)
        self._finish(f, p, v, order, count)

    def _forces_torch(self):
        torch = self.torch
        d, n = self.dims, self.n
        c = self._cells(self.pos)
        key = (c[2] * d + c[1]) * d + c[0]
        ks, order = torch.sort(key, stable=True)
        p = self.pos[:, order]
        v = self.vel[:, order]
        cs = c[:, order]
        cells = torch.arange(d * d * d)
        start = torch.searchsorted(ks, cells, right=False)
        end = torch.searchsorted(ks, cells, right=True)
        f = torch.zeros((3, n), dtype=torch.float32)
        count = torch.zeros(n, dtype=torch.int64)
        k, m = STIFFNESS, float(self.m)
        m_eff = m * m / (m + m)
        gamma = 2.0 * ZETA * math.sqrt(m_eff * k)
        rs = 2 * RADIUS
        for (dx, dy, dz), off in zip(self.deltas, self.offsets):
            ok = ((cs[0] + dx >= 0) & (cs[0] + dx < d) & (cs[1] + dy >= 0) & (cs[1] + dy < d) & (cs[2] + dz >= 0)
                  & (cs[2] + dz < d))
            i = torch.nonzero(ok).squeeze(1)
            nc = ks[i] + off
            lo, hi = start[nc], end[nc]
            cnt = hi - lo
            i = torch.repeat_interleave(i, cnt)
            first = torch.repeat_interleave(lo - torch.cumsum(cnt, 0) + cnt, cnt)
            j = first + torch.arange(i.numel())
            keep = i != j
            i, j = i[keep], j[keep]
            dd = p[:, j] - p[:, i]
            d2 = (dd * dd).sum(dim=0)
            touch = (d2 < rs * rs) & (d2 > 0)
            i, j, dd, d2 = i[touch], j[touch], dd[:, touch], d2[touch]
            dist = torch.sqrt(d2)
            nrm = dd / dist
            vr = v[:, j] - v[:, i]
            vn = (vr * nrm).sum(dim=0)
            fn = k * (rs - dist) - gamma * vn
            f.index_add_(1, i, -fn * nrm)
            count.index_add_(0, i, torch.ones_like(i))
        self._finish(f, p, v, order, count)

    def _finish(self, f, p, v, order, count):
        """Walls and gravity, then the accelerations scattered back to the particles' slots."""
        k, m = np.float32(STIFFNESS), self.m
        gamma = float(2.0 * ZETA * math.sqrt(float(m) * float(k)))
        lo, hi, r = float(self.lo), float(self.hi), RADIUS
        for a in range(3):
            for side, sign in ((0, -1.0), (1, 1.0)):
                overlap = (r - (p[a] - lo)) if side == 0 else (r - (hi - p[a]))
                vn = -v[a] * sign
                fw = -(k * overlap - gamma * vn) * sign
                if self.kind == "numpy":
                    f[a] += np.where(overlap > 0, fw, np.float32(0)).astype(np.float32)
                else:
                    f[a] += self.torch.where(overlap > 0, fw, self.torch.zeros_like(fw))
        acc = f / m
        acc[2] += np.float32(GRAVITY)
        self.acc[:, order] = acc
        self.contacts = int(count.sum()) // 2

    def step(self):
        h = np.float32(0.5 * DT)
        self.vel += h * self.acc
        self.pos += np.float32(DT) * self.vel
        self._forces()
        self.vel += h * self.acc


# ---------------------------------------------------------------------------------------------
def build_rows(names, torch, n_particles):
    """{row: {"libs": {lib: fn}, "check": {lib: check(result)}, "bytes": ..., "note": ...}}."""
    rng = np.random.default_rng(0)
    rows = {}
    f32 = np.float32

    def row(name, fns, checks=None, **extra):
        if names is None or name in names:
            rows[name] = {"libs": fns, "check": checks or {}, **extra}

    n = 10_000_000
    a = rng.random(n, dtype=f32)
    b = rng.random(n, dtype=f32)
    ta_, tb_ = (torch.from_numpy(x) if torch else None for x in (a, b))
    xa, xb = _t(a), _t(b)

    def with_torch(fns, torch_fn):
        if torch is not None:
            fns["torch"] = torch_fn
        return fns

    threads = len(os.sched_getaffinity(0))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)
    cuts = [(n * i // threads) & ~15 for i in range(threads)] + [n]
    parts = [slice(cuts[i], cuts[i + 1]) for i in range(threads)]
    dst = np.empty_like(a)

    def on_threads(per_slice):
        return lambda: list(pool.map(per_slice, parts))

    # The memory's rates in the same rounds as the rows they judge (see the module docstring).
    copy_refs = {"np.copyto": (on_threads(lambda sl: np.copyto(dst[sl], a[sl])), 8 * n)}
    read_refs = {"np.sum float64 view": (on_threads(lambda sl: np.sum(a[sl].view(np.float64))), 4 * n),
                 "np.count_nonzero uint8 view": (on_threads(lambda sl: np.count_nonzero(a[sl].view(np.uint8))), 4 * n),
                 "np.max": (on_threads(lambda sl: np.max(a[sl])), 4 * n)}
    row("add", with_torch({"numpy": lambda: a + b, "tessel": lambda: xa + xb}, lambda: ta_ + tb_),
        want=lambda: a + b, tol=(0, 0), bytes=12 * n, references=copy_refs)
    fused = ts.fuse(lambda x, y: ts.exp(x) * y + 1)
    row("exp_mul_add", with_torch({"numpy": lambda: np.exp(a) * b + 1, "tessel": lambda: ts.exp(xa) * xb + 1},
                                  lambda: torch.exp(ta_) * tb_ + 1),
        want=lambda: np.exp(a) * b + 1, tol=(1e-6, 0))
    row("exp_mul_add_fused", with_torch({"numpy": lambda: np.exp(a) * b + 1, "tessel": lambda: fused(xa, xb)},
                                        lambda: torch.exp(ta_) * tb_ + 1),
        want=lambda: np.exp(a) * b + 1, tol=(1e-6, 0), note="tessel through ts.fuse; the others as exp_mul_add")
    row("sum", with_torch({"numpy": lambda: np.sum(a), "tessel": lambda: ts.sum(xa)}, lambda: torch.sum(ta_)),
        want=lambda: np.sum(a.astype(np.float64)), tol=(1e-5, 0), bytes=4 * n, references=read_refs)

    k = 1024
    ma, mb = rng.random((k, k), dtype=f32), rng.random((k, k), dtype=f32)
    tma, tmb = (torch.from_numpy(x) if torch else None for x in (ma, mb))
    xma, xmb = _t(ma), _t(mb)
    row("matmul", with_torch({"numpy": lambda: ma @ mb, "tessel": lambda: xma @ xmb}, lambda: tma @ tmb),
        want=lambda: ma @ mb, tol=(1e-4, 1e-3))

    nf = 1 << 20
    z = (rng.standard_normal(nf) + 1j * rng.standard_normal(nf)).astype(np.complex64)
    tz, xz = (torch.from_numpy(z) if torch else None), _t(z)
    row("fft", with_torch({"numpy": lambda: np.fft.fft(z), "tessel": lambda: ts.fft.fft(xz)},
                          lambda: torch.fft.fft(tz)),
        want=lambda: np.fft.fft(z.astype(np.complex128)), tol=(0, 2e-3 * math.sqrt(nf)))

    ns = 5_000_000
    s = rng.random(ns, dtype=f32)
    ts_, xs = (torch.from_numpy(s) if torch else None), _t(s)
    row("sort", with_torch({"numpy": lambda: np.sort(s), "tessel": lambda: ts.sort(xs)},
                           lambda: torch.sort(ts_).values),
        want=lambda: np.sort(s), tol=(0, 0))
    row("argsort", with_torch({"numpy": lambda: np.argsort(s), "tessel": lambda: ts.argsort(xs)},
                              lambda: torch.argsort(ts_)),
        want=lambda: np.sort(s), tol=(0, 0), post=lambda idx: s[_np(idx)],
        note="each library's default (NumPy: introsort; tessel: stable=True; PyTorch: stable=False)")

    mask = a > 0.5
    tmask, xmask = (torch.from_numpy(mask) if torch else None), _t(mask)
    row("mask", with_torch({"numpy": lambda: a[mask], "tessel": lambda: xa[xmask]}, lambda: ta_[tmask]),
        want=lambda: a[mask], tol=(0, 0))
    row("cumsum", with_torch({"numpy": lambda: np.cumsum(a), "tessel": lambda: ts.cumsum(xa)},
                             lambda: torch.cumsum(ta_, 0)),
        want=lambda: np.cumsum(a.astype(np.float64)), tol=(1e-3, 0))

    keys = rng.integers(0, ns, ns, dtype=np.int32)
    tkeys, xkeys = (torch.from_numpy(keys) if torch else None), _t(keys)
    row("unique", with_torch({"numpy": lambda: np.unique(keys), "tessel": lambda: ts.unique_values(xkeys)},
                             lambda: torch.unique(tkeys)),
        want=lambda: np.unique(keys), tol=(0, 0), post=lambda u: np.sort(_np(u)))

    idx = rng.integers(0, n, n, dtype=np.int64)
    tidx, xidx = (torch.from_numpy(idx) if torch else None), _t(idx)
    row("take", with_torch({"numpy": lambda: np.take(a, idx), "tessel": lambda: ts.take(xa, xidx)},
                           lambda: ta_[tidx]),
        want=lambda: a[idx], tol=(0, 0))

    m = 512
    A = rng.standard_normal((m, m)) + m * np.eye(m)
    S = rng.standard_normal((m, m))
    S = S + S.T
    rhs = rng.standard_normal(m)
    tA, tS, trhs = (torch.from_numpy(x) if torch else None for x in (A, S, rhs))
    xA, xS, xrhs = _t(A), _t(S), _t(rhs)
    row("solve", with_torch({"numpy": lambda: np.linalg.solve(A, rhs), "tessel": lambda: ts.linalg.solve(xA, xrhs)},
                            lambda: torch.linalg.solve(tA, trhs)),
        want=lambda: np.linalg.solve(A, rhs), tol=(1e-8, 1e-10))
    row("eigh", with_torch({"numpy": lambda: np.linalg.eigh(S), "tessel": lambda: ts.linalg.eigh(xS)},
                           lambda: torch.linalg.eigh(tS)),
        want=lambda: np.linalg.eigvalsh(S), tol=(1e-8, 1e-8), post=lambda r: _np(r[0]))
    row("svd", with_torch({"numpy": lambda: np.linalg.svd(A, full_matrices=False),
                           "tessel": lambda: ts.linalg.svd(xA, full_matrices=False)},
                          lambda: torch.linalg.svd(tA, full_matrices=False)),
        want=lambda: np.linalg.svd(A, compute_uv=False), tol=(1e-8, 1e-8), post=lambda r: _np(r[1]))

    if names is None or "particle_step" in names:
        rows["particle_step"] = particle_row(n_particles, torch)
    return rows


def particle_row(n, torch):
    """tessel's DistributedParticles on one CPU rank against ArraySim in NumPy and PyTorch."""
    import tessel.distributed as dist

    if not dist.is_initialized():
        dist.init(DEV)
    d = ts.sim.DistributedParticles.benchmark_setup(n)
    sims = {"numpy": ArraySim("numpy", n)}
    if torch is not None:
        sims["torch"] = ArraySim("torch", n, torch=torch)
    fns = {lib: sim.step for lib, sim in sims.items()}
    fns["tessel"] = lambda: d.step(1)
    # Checked after the timed steps: finite energies and contact counts within 30% of NumPy's
    # (different initial states of the same density, so only the order of magnitude is shared).
    def check():
        diag = d.diagnostics()
        c = {lib: sim.contacts for lib, sim in sims.items()}
        c["tessel"] = int(diag["contacts"])
        for lib, v in c.items():
            if not (0.7 * c["numpy"] <= v <= 1.3 * c["numpy"]):
                raise AssertionError(f"particle_step: {lib} has {v} contacts, NumPy {c['numpy']}")
        if not math.isfinite(diag["total_energy"]):
            raise AssertionError("particle_step: tessel's energy is not finite")
        return c

    return {"libs": fns, "check": {}, "after": check, "note": f"{n} particles (the benchmark_setup density), one step"}


# ---------------------------------------------------------------------------------------------
def bandwidth(threads, rounds):
    """Back to back (no settle pause), in alternating rounds: GB/s of NumPy reading and copying 1e7
    float32 on 1..threads Python threads each taking one slice, and of tessel's sum and a + b of
    the same arrays. Read: the fastest of np.sum, np.max, np.sum of the float64 view and
    np.count_nonzero of the uint8 view, 4n bytes over its time. Copy: np.copyto into a preallocated
    array, 8n bytes over its time. tessel: sum 4n bytes, a + b 12n bytes (into a new array)."""
    n = 10_000_000
    rng = np.random.default_rng(1)
    src = rng.random(n, dtype=np.float32)
    other = rng.random(n, dtype=np.float32)
    dst = np.empty_like(src)
    xs, xo = ts.asarray(src, device=DEV), ts.asarray(other, device=DEV)
    readers = {"np.sum": np.sum, "np.max": np.max, "np.sum float64 view": lambda x: np.sum(x.view(np.float64)),
               "np.count_nonzero uint8 view": lambda x: np.count_nonzero(x.view(np.uint8))}
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        def on(t, per_slice):
            cuts = [(n * i // t) & ~15 for i in range(t)] + [n]  # the 8-byte views need even counts
            slices = [slice(cuts[i], cuts[i + 1]) for i in range(t)]
            return (lambda: per_slice(slices[0])) if t == 1 else (lambda: list(pool.map(per_slice, slices)))

        calls = {}  # name -> (fn, bytes, kind)
        for t in range(1, threads + 1):
            for name, f in readers.items():
                calls[f"{name} x{t}"] = (on(t, lambda sl, f=f: f(src[sl])), 4 * n, "read")
            calls[f"np.copyto x{t}"] = (on(t, lambda sl: np.copyto(dst[sl], src[sl])), 8 * n, "copy")
        calls["tessel sum"] = (lambda: ts.sum(xs), 4 * n, "tessel")
        calls["tessel a + b"] = (lambda: xs + xo, 12 * n, "tessel")
        order = list(calls)
        times = {name: [] for name in order}
        for fn, _, _ in calls.values():
            fn()
        for k in range(rounds):
            for name in order[k % len(order):] + order[:k % len(order)]:
                t0 = time.perf_counter()
                calls[name][0]()
                times[name].append(time.perf_counter() - t0)
    rate = {name: calls[name][1] / statistics.median(times[name]) / 1e9 for name in order}
    read = {name: v for name, v in rate.items() if calls[name][2] == "read"}
    copy = {name: v for name, v in rate.items() if calls[name][2] == "copy"}
    best_read, best_copy = max(read, key=read.get), max(copy, key=copy.get)
    return {"read": {"GBps_by_reader": read, "reader": best_read, "GBps": read[best_read]},
            "copy": {"GBps_by_threads": copy, "GBps": copy[best_copy]},
            "tessel_sum_GBps": rate["tessel sum"], "tessel_add_GBps": rate["tessel a + b"]}


def time_rows(rows, rounds, settle):
    results = {}
    for name, r in rows.items():
        libs = r["libs"]
        want = r["want"]() if "want" in r else None
        for lib, fn in libs.items():  # warm-up, and the check against NumPy
            got = fn()
            if want is not None:
                got = r["post"](got) if "post" in r else got
                rtol, atol = r["tol"]
                if rtol == 0 and atol == 0:
                    if not np.array_equal(_np(got), want):
                        raise AssertionError(f"{name}: {lib} differs from NumPy")
                else:
                    _close(_np(got), want, rtol, atol, f"{name} ({lib})")
        refs = r.get("references", {})
        calls = dict(libs)
        calls.update({f"ref:{ref}": fn for ref, (fn, _) in refs.items()})
        order = list(calls)
        times = {lib: [] for lib in order}
        for k in range(rounds):
            rot = order[k % len(order):] + order[:k % len(order)]
            for lib in rot:
                # Settle, then one untimed call: the other libraries' pools are idle again, this
                # library's threads are awake and its data in cache; the second call is timed.
                time.sleep(settle)
                calls[lib]()
                t0 = time.perf_counter()
                calls[lib]()
                times[lib].append(1e3 * (time.perf_counter() - t0))
        row = {f"{lib}_ms": statistics.median(times[lib]) for lib in libs}
        if refs:
            rates = {ref: nbytes / statistics.median(times[f"ref:{ref}"]) / 1e6 for ref, (_, nbytes) in refs.items()}
            row["reference_GBps"] = rates
            row["reference"] = max(rates, key=rates.get)
        if "after" in r:
            row["contacts"] = r["after"]()
        best_peer = min(row[f"{lib}_ms"] for lib in libs if lib != "tessel")
        row["vs_numpy"] = row["numpy_ms"] / row["tessel_ms"]
        row["vs_best"] = best_peer / row["tessel_ms"]
        if "bytes" in r:
            row["tessel_GBps"] = r["bytes"] / row["tessel_ms"] / 1e6
        if refs:
            row["of_reference"] = row["tessel_GBps"] / row["reference_GBps"][row["reference"]]
        if "note" in r:
            row["note"] = r["note"]
        results[name] = row
        peers = "  ".join(f"{lib} {row[f'{lib}_ms']:8.2f}" for lib in libs)
        print(f"{name:18s} {peers}   vs NumPy {row['vs_numpy']:5.2f}x  vs best {row['vs_best']:5.2f}x", flush=True)
        if refs:
            print(f"{'':18s} tessel {row['tessel_GBps']:.1f} GB/s = {100 * row['of_reference']:.0f}% of "
                  f"{row['reference']} on {len(os.sched_getaffinity(0))} threads ({row['reference_GBps'][row['reference']]:.1f} GB/s, same rounds)")
    return results


def print_table(results, with_torch):
    """The rows as a Markdown table (ms; tessel's speed against NumPy and against the faster peer)."""
    head = "| op | NumPy | " + ("PyTorch CPU | " if with_torch else "") + "tessel | vs NumPy | vs best |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name, row in results.items():
        cells = [f"{row['numpy_ms']:.2f}"] + ([f"{row['torch_ms']:.2f}"] if with_torch else []) + [f"{row['tessel_ms']:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + f" | {row['vs_numpy']:.2f}x | {row['vs_best']:.2f}x |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--only", default=None, help="comma-separated rows")
    parser.add_argument("--particles", type=int, default=100_000)
    parser.add_argument("--settle-ms", type=float, default=250.0, help="sleep before each library's turn")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    torch = None if args.no_torch else optional_import("torch")
    names = set(args.only.split(",")) if args.only else None
    threads = len(os.sched_getaffinity(0))
    print(f"cpu_numpy: {threads} CPUs; tessel {ts.num_threads() if hasattr(ts, 'num_threads') else '?'} threads; "
          f"NumPy {np.__version__}; PyTorch {torch.__version__ + f' ({torch.get_num_threads()} threads)' if torch else 'absent'}")
    rows = build_rows(names, torch, args.particles)
    results = time_rows(rows, args.rounds, args.settle_ms / 1e3)
    bw = bandwidth(threads, max(args.rounds, 7))
    print(f"bandwidth, back to back: read {bw['read']['GBps']:.1f} GB/s ({bw['read']['reader']}), copy "
          f"{bw['copy']['GBps']:.1f} GB/s (NumPy, best of 1..{threads} threads)")
    bw["tessel_sum_of_read"] = bw["tessel_sum_GBps"] / bw["read"]["GBps"]
    bw["tessel_add_of_copy"] = bw["tessel_add_GBps"] / bw["copy"]["GBps"]
    print(f"back to back: tessel sum {bw['tessel_sum_GBps']:.1f} GB/s = {100 * bw['tessel_sum_of_read']:.0f}% of read; "
          f"a + b {bw['tessel_add_GBps']:.1f} GB/s = {100 * bw['tessel_add_of_copy']:.0f}% of copy")
    print_table(results, torch is not None)
    if args.no_write:
        return
    out = {
        "rows": results,
        "bandwidth": bw,
        "cpus": threads,
        "machine": platform.processor() or platform.machine(),
        "tessel_threads": ts.num_threads() if hasattr(ts, "num_threads") else None,
        "numpy": np.__version__,
        "torch": torch.__version__ if torch else None,
        "torch_threads": torch.get_num_threads() if torch else None,
        "rounds": args.rounds,
        "settle_ms": args.settle_ms,
        "load_average": os.getloadavg(),
    }
    merge_results("cpu_numpy", out, "cpu", merge_rows="rows")


if __name__ == "__main__":
    sys.exit(main())

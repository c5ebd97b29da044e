"""The peer of bench/sim_bench.cpp: a uniform-grid DEM step in Numba CUDA kernels with CuPy's
argsort, on the configuration of issue 8:

  1e6 particles of radius 0.004 at uniform random positions in the unit box with walls,
  velocities uniform in [-0.05, 0.05], linear spring-dashpot contacts (k = 1000, zeta = 0.3,
  density 1000) and gravity, dt = 1e-4; median step (CUDA events) over 100 steps after 10
  warm-up steps.

Same physics as tessel's sim::Particles (velocity Verlet, damping with the half-step velocity,
reduced mass per pair, walls as contacts). Before timing, the run is sanity-checked: finite
energy and a contact count close to tessel's for the same configuration when that is known.

tessel in the same process: `measure_tessel` times ts.sim.Particles (docs/guide/simulation.rst) here too,
so both numbers come from one process and one GPU state. When the tessel package is missing,
"tessel_same_process" records why it was skipped, and bench/sim_bench.cpp has tessel's number.
bench/compare.py calls `median_step_ms(n, steps)` for the peer's number alone.

Results merge into bench/results/<device>-<date>.json under "sim_peers".

  python3 bench/peers/numba_sim.py [--n 1000000] [--steps 100] [--warmup 10]
  NUMBA_ENABLE_CUDASIM=1 python3 bench/peers/numba_sim.py --simulate   # tiny CPU check, no GPU
"""
import argparse
import math
import os
import sys
import time

import numpy as np

import peer_results

np.row_stack = np.vstack  # removed in NumPy 2; numba.cuda still refers to it

try:
    from numba import cuda
except ImportError as error:  # pragma: no cover
    print(f"numba_sim: skipped: numba.cuda is not installed ({error})")
    sys.exit(0)

SIMULATE = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
if not SIMULATE:
    try:
        import cupy as cp
    except ImportError:
        print("numba_sim: skipped: CuPy is not installed")
        sys.exit(0)
else:
    cp = None

BLOCK = 256
RADIUS = 0.004
STIFFNESS = 1000.0
ZETA = 0.3
DENSITY = 1000.0
DT = 1e-4
GRAVITY = -9.81


@cuda.jit
def kick_drift_key(x, y, z, vx, vy, vz, ax, ay, az, keys, dt, lo, inv_cell, dims_x, dims_y, dims_z, kick):
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    if kick:
        h = np.float32(0.5) * dt
        vx[i] += h * ax[i]
        vy[i] += h * ay[i]
        vz[i] += h * az[i]
        x[i] += dt * vx[i]
        y[i] += dt * vy[i]
        z[i] += dt * vz[i]
    cx = min(max(int(math.floor((x[i] - lo) * inv_cell)), 0), dims_x - 1)
    cy = min(max(int(math.floor((y[i] - lo) * inv_cell)), 0), dims_y - 1)
    cz = min(max(int(math.floor((z[i] - lo) * inv_cell)), 0), dims_z - 1)
    keys[i] = (cz * dims_y + cy) * dims_x + cx


@cuda.jit
def gather_ranges(order, keys_sorted, x, y, z, vx, vy, vz, r, m, pos, vel, cell_start, cell_end):
    s = cuda.grid(1)
    n = order.shape[0]
    if s >= n:
        return
    i = order[s]
    pos[s, 0] = x[i]
    pos[s, 1] = y[i]
    pos[s, 2] = z[i]
    pos[s, 3] = r[i]
    vel[s, 0] = vx[i]
    vel[s, 1] = vy[i]
    vel[s, 2] = vz[i]
    vel[s, 3] = m[i]
    k = keys_sorted[s]
    if s == 0 or keys_sorted[s - 1] != k:
        cell_start[k] = s
    if s == n - 1 or keys_sorted[s + 1] != k:
        cell_end[k] = s + 1


@cuda.jit(device=True)
def contact(nx, ny, nz, overlap, vrx, vry, vrz, m_eff, k, zeta):
    gamma = np.float32(2.0) * zeta * math.sqrt(m_eff * k)
    vn = vrx * nx + vry * ny + vrz * nz
    fn = k * overlap - gamma * vn
    return -fn * nx, -fn * ny, -fn * nz


@cuda.jit
def forces(order, pos, vel, cell_start, cell_end, ax, ay, az, vx, vy, vz, contacts, dt, lo, hi, inv_cell, dims_x,
           dims_y, dims_z, k, zeta, g, finish):
    s = cuda.grid(1)
    if s >= order.shape[0]:
        return
    xi = pos[s, 0]
    yi = pos[s, 1]
    zi = pos[s, 2]
    ri = pos[s, 3]
    vxi = vel[s, 0]
    vyi = vel[s, 1]
    vzi = vel[s, 2]
    mi = vel[s, 3]
    cx = min(max(int(math.floor((xi - lo) * inv_cell)), 0), dims_x - 1)
    cy = min(max(int(math.floor((yi - lo) * inv_cell)), 0), dims_y - 1)
    cz = min(max(int(math.floor((zi - lo) * inv_cell)), 0), dims_z - 1)
    fx = np.float32(0.0)
    fy = np.float32(0.0)
    fz = np.float32(0.0)
    count = 0
    for dz in range(-1, 2):
        nzc = cz + dz
        if nzc < 0 or nzc >= dims_z:
            continue
        for dy in range(-1, 2):
            nyc = cy + dy
            if nyc < 0 or nyc >= dims_y:
                continue
            for dx in range(-1, 2):
                nxc = cx + dx
                if nxc < 0 or nxc >= dims_x:
                    continue
                c = (nzc * dims_y + nyc) * dims_x + nxc
                start = cell_start[c]
                if start < 0:
                    continue
                for j in range(start, cell_end[c]):
                    if j == s:
                        continue
                    ddx = pos[j, 0] - xi
                    ddy = pos[j, 1] - yi
                    ddz = pos[j, 2] - zi
                    d2 = ddx * ddx + ddy * ddy + ddz * ddz
                    rs = ri + pos[j, 3]
                    if d2 >= rs * rs or d2 <= 0:
                        continue
                    d = math.sqrt(d2)
                    inv = np.float32(1.0) / d
                    mj = vel[j, 3]
                    m_eff = mi * mj / (mi + mj)
                    cfx, cfy, cfz = contact(ddx * inv, ddy * inv, ddz * inv, rs - d, vel[j, 0] - vxi, vel[j, 1] - vyi,
                                            vel[j, 2] - vzi, m_eff, k, zeta)
                    fx += cfx
                    fy += cfy
                    fz += cfz
                    count += 1
    # Walls: the same law with the particle's own mass.
    for axis in range(3):
        p = xi if axis == 0 else (yi if axis == 1 else zi)
        v = vxi if axis == 0 else (vyi if axis == 1 else vzi)
        for side in range(2):
            overlap = ri - (p - lo) if side == 0 else ri - (hi - p)
            if overlap <= 0:
                continue
            nsign = np.float32(-1.0) if side == 0 else np.float32(1.0)
            gamma = np.float32(2.0) * zeta * math.sqrt(mi * k)
            vn = -v * nsign
            f = -(k * overlap - gamma * vn) * nsign
            if axis == 0:
                fx += f
            elif axis == 1:
                fy += f
            else:
                fz += f
    inv_m = np.float32(1.0) / mi
    i = order[s]
    a_x = fx * inv_m
    a_y = fy * inv_m
    a_z = fz * inv_m + g
    ax[i] = a_x
    ay[i] = a_y
    az[i] = a_z
    if finish:
        h = np.float32(0.5) * dt
        vx[i] = vxi + h * a_x
        vy[i] = vyi + h * a_y
        vz[i] = vzi + h * a_z
    contacts[i] = count


class NumbaSim:
    """Uniform-grid DEM: Numba kernels, CuPy argsort (NumPy's when simulating)."""

    def __init__(self, n, side=1.0, seed=2026):
        xp = np if SIMULATE else cp
        self.xp = xp
        rng = np.random.default_rng(seed)
        self.n = n
        self.lo, self.hi = np.float32(0.0), np.float32(side)
        self.dims = max(1, int(math.floor(side / (2 * RADIUS))))
        self.inv_cell = np.float32(self.dims / side)
        lo_p, hi_p = RADIUS, side - RADIUS
        f32 = np.float32
        self.x, self.y, self.z = (xp.asarray(rng.uniform(lo_p, hi_p, n).astype(f32)) for _ in range(3))
        self.vx, self.vy, self.vz = (xp.asarray(rng.uniform(-0.05, 0.05, n).astype(f32)) for _ in range(3))
        self.ax, self.ay, self.az = (xp.zeros(n, dtype=f32) for _ in range(3))
        self.r = xp.full(n, RADIUS, dtype=f32)
        self.m = xp.full(n, DENSITY * 4.0 / 3.0 * math.pi * RADIUS**3, dtype=f32)
        self.keys = xp.zeros(n, dtype=np.int32)
        self.pos = xp.zeros((n, 4), dtype=f32)
        self.vel = xp.zeros((n, 4), dtype=f32)
        self.contacts = xp.zeros(n, dtype=np.int32)
        cells = self.dims**3
        self.cell_start = xp.full(cells, -1, dtype=np.int32)
        self.cell_end = xp.zeros(cells, dtype=np.int32)
        self.grid = (n + BLOCK - 1) // BLOCK
        self._step(kick=False)

    def _step(self, kick):
        d, g = self.dims, self.grid
        kick_drift_key[g, BLOCK](self.x, self.y, self.z, self.vx, self.vy, self.vz, self.ax, self.ay, self.az, self.keys,
                                 np.float32(DT), self.lo, self.inv_cell, d, d, d, kick)
        order = self.xp.argsort(self.keys).astype(np.int32)
        keys_sorted = self.keys[order]
        self.cell_start.fill(-1)
        gather_ranges[g, BLOCK](order, keys_sorted, self.x, self.y, self.z, self.vx, self.vy, self.vz, self.r, self.m,
                                self.pos, self.vel, self.cell_start, self.cell_end)
        forces[g, BLOCK](order, self.pos, self.vel, self.cell_start, self.cell_end, self.ax, self.ay, self.az, self.vx,
                         self.vy, self.vz, self.contacts, np.float32(DT), self.lo, self.hi, self.inv_cell, d, d, d,
                         np.float32(STIFFNESS), np.float32(ZETA), np.float32(GRAVITY), kick)

    def step(self):
        self._step(kick=True)

    def diagnostics(self):
        xp = self.xp
        v2 = self.vx.astype(np.float64) ** 2 + self.vy.astype(np.float64) ** 2 + self.vz.astype(np.float64) ** 2
        kinetic = float(0.5 * xp.sum(self.m.astype(np.float64) * v2))
        contacts = int(xp.sum(self.contacts)) // 2
        finite = bool(xp.all(xp.isfinite(self.x)) and xp.all(xp.isfinite(self.vx)))
        return kinetic, contacts, finite


def median_ms(step, steps, warmup):
    """Median ms per step: CUDA events (CuPy's) on the GPU, the host clock in the simulator."""
    for _ in range(warmup):
        step()
    if SIMULATE:
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - t0))
        return sorted(times)[len(times) // 2]
    return peer_results.median_ms(step, steps, warmup=0, events=lambda: (cp.cuda.Event(), cp.cuda.Event()))


def measure_tessel(n, side, steps, warmup):
    """tessel's step time in this process, through the Python binding (when it exists).

    The binding mirrors the C++ API (docs/guide/simulation.rst): ts.sim.ParticlesConfig, ts.sim.InitOptions,
    ts.sim.init_gas(options, config), ts.sim.Particles(state, config, device) with .step(k) and
    .diagnostics() (a dict); timing uses CuPy events on the default stream, as for the peer.
    """
    try:
        import tessel as ts

        sim = ts.sim
        config = sim.ParticlesConfig()
        config.box_hi = [side, side, side]
        config.dt = DT
        config.stiffness = STIFFNESS
        config.damping_ratio = ZETA
        options = sim.InitOptions()
        options.n = n
        options.radius = RADIUS
        options.speed = 0.05
        options.seed = 2026
        p = sim.Particles(sim.init_gas(options, config), config, ts.Device("cuda:0"))
    except Exception as error:  # the binding is not there yet, or differs
        return {"skipped": f"tessel.sim.Particles unavailable in Python: {type(error).__name__}: {error}"}

    def step():
        p.step(1)

    try:
        p.step(warmup)
        d = p.diagnostics()  # synchronizes; raises on NaN
        if not math.isfinite(d["kinetic"]) or d["contacts"] <= 0:
            return {"skipped": f"tessel sanity check failed: kinetic energy {d['kinetic']}, contacts {d['contacts']}"}
        # tessel works on the current stream of cuda:0, the legacy default stream, as CuPy's
        # events here: the events bracket exactly one step's kernels.
        ms = median_ms(step, steps, 0)
    except Exception as error:
        return {"skipped": f"timing tessel failed: {type(error).__name__}: {error}"}
    return {"median_ms_per_step": ms, "contacts": int(d["contacts"])}


def median_step_ms(n=1_000_000, steps=100, warmup=10):
    """The peer's median ms per step at n particles (the issue's density), sanity-checked."""
    sim = NumbaSim(n, (n / 1e6) ** (1.0 / 3.0))
    ms = median_ms(sim.step, steps, warmup)
    kinetic, contacts, finite = sim.diagnostics()
    if not finite or not math.isfinite(kinetic) or contacts <= 0:
        raise RuntimeError(f"numba_sim: sanity check failed: kinetic {kinetic}, contacts {contacts}, finite {finite}")
    return ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--simulate", action="store_true", help="tiny run in the CUDA simulator (no GPU, no results)")
    args = parser.parse_args()
    if args.simulate:
        if not SIMULATE:
            sys.exit("numba_sim: --simulate needs NUMBA_ENABLE_CUDASIM=1 in the environment")
        args.n, args.steps, args.warmup = 300, 3, 2
    elif not cuda.is_available():
        print("numba_sim: skipped: no CUDA device")
        return
    side = (args.n / 1e6) ** (1.0 / 3.0)  # the density: 1e6 particles per unit volume
    sim = NumbaSim(args.n, side)
    ms = median_ms(sim.step, args.steps, args.warmup)
    kinetic, contacts, finite = sim.diagnostics()
    if not finite or not math.isfinite(kinetic) or contacts <= 0:
        sys.exit(f"numba_sim: sanity check failed: kinetic {kinetic}, contacts {contacts}, finite {finite}")
    print(f"numba+cupy n={args.n}: median {ms:.4f} ms/step, {contacts} contacts, kinetic energy {kinetic:.6g}")
    if args.simulate:
        return
    out = {"numba_cupy": {"n": args.n, "median_ms_per_step": ms, "contacts": contacts, "kinetic": kinetic,
                          "numba": __import__("numba").__version__, "cupy": cp.__version__}}
    out["tessel_same_process"] = measure_tessel(args.n, side, args.steps, args.warmup)
    if "median_ms_per_step" in out["tessel_same_process"]:
        t = out["tessel_same_process"]
        out["ratio_tessel_over_numba"] = t["median_ms_per_step"] / ms
        if abs(t["contacts"] - contacts) > 0.2 * contacts:
            print(f"numba_sim: warning: contact counts differ: tessel {t['contacts']}, numba {contacts}")
        print(f"tessel (same process): {t['median_ms_per_step']:.4f} ms/step: ratio {out['ratio_tessel_over_numba']:.3f}")
    else:
        print(f"tessel (same process): {out['tessel_same_process']['skipped']}; see bench/sim_bench.cpp")
    peer_results.merge_results("sim_peers", out, cp.cuda.runtime.getDeviceProperties(0)["name"].decode())


if __name__ == "__main__":
    main()

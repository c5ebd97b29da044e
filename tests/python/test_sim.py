"""ts.sim.Particles: small-N steps, conservation, zero-copy views, bad input."""
import numpy as np
import pytest

import tessel as ts
from conftest import GPU


def small_gas(n=300, seed=5, **config):
    cfg = ts.sim.ParticlesConfig(**config)
    state = ts.sim.init_gas(ts.sim.InitOptions(n=n, radius=0.03, speed=0.5, seed=seed), cfg)
    return state, cfg


def test_small_step_runs(device):
    state, cfg = small_gas(dt=1e-4)
    p = ts.sim.Particles(state, cfg, device=device)
    assert len(p) == 300 and p.device == device
    p.step(20)
    d = p.diagnostics()
    assert d["step"] == 20 and p.steps_done == 20
    assert np.isfinite(d["kinetic"]) and d["kinetic"] > 0
    assert np.isfinite(d["total_energy"]) and len(d["momentum"]) == 3
    assert d["contacts"] >= 0 and d["potential"] == pytest.approx(d["potential_gravity"] + d["potential_spring"])
    host = p.state()
    assert isinstance(host, ts.sim.ParticleState) and host.positions.shape == (300, 3)
    assert np.all(np.isfinite(host.positions))
    # Walls hold the particles in the unit box (up to the contact overlap).
    assert host.positions.min() > -0.05 and host.positions.max() < 1.05


def test_momentum_conserved_periodic_no_gravity(device):
    state, cfg = small_gas(n=400, walls=False, periodic=True, gravity=[0.0, 0.0, 0.0], dt=1e-4, damping_ratio=0.2)
    p = ts.sim.Particles(state, cfg, device=device)
    m = np.asarray(p.state().mass, dtype="float64")
    v0 = np.asarray(p.state().velocities, dtype="float64")
    start = (m[:, None] * v0).sum(axis=0)
    d = p.diagnostics()
    energy = d["kinetic"] + d["potential_spring"]
    contacts = d["contacts"]
    for _ in range(20):
        p.step(10)
        d = p.diagnostics()
        contacts += d["contacts"]
        # With damping, energy never increases.
        assert d["kinetic"] + d["potential_spring"] <= energy * (1 + 1e-5)
        energy = d["kinetic"] + d["potential_spring"]
    assert contacts > 0  # the momentum check below saw collisions
    scale = (m[:, None] * np.abs(v0)).sum()
    np.testing.assert_allclose(np.array(d["momentum"]), start, atol=1e-5 * scale)


def test_views_are_zero_copy(device):
    state, cfg = small_gas(n=200)
    p = ts.sim.Particles(state, cfg, device=device)
    pos = p.positions
    vel = p.velocities
    assert pos.shape == (200, 3) and pos.dtype == ts.float32 and pos.device == device
    assert p.ids.dtype == ts.int32 and p.radii.shape == (200,) and p.masses.shape == (200,)
    before = np.asarray(pos).copy()
    p.step(50)
    after = np.asarray(pos)  # the same view object, read after the step
    assert not np.array_equal(before, after)  # the C++ step changed what the view sees
    np.testing.assert_array_equal(after, np.asarray(p.positions))
    # Rows are in cell order: ids maps them back to particles.
    ids = np.asarray(p.ids)
    assert sorted(ids.tolist()) == list(range(200))
    np.testing.assert_array_equal(np.asarray(p.state().positions)[ids], after)
    np.testing.assert_array_equal(np.asarray(vel), np.asarray(p.velocities))
    if device.type == "cpu":
        # Same memory: NumPy views of the tessel view see writes through p's storage.
        shared = np.from_dlpack(pos)
        p.step(1)
        np.testing.assert_array_equal(shared, np.asarray(p.positions))


def test_writes_through_views_are_seen(device):
    state, cfg = small_gas(n=100, gravity=[0.0, 0.0, 0.0])
    p = ts.sim.Particles(state, cfg, device=device)
    v = p.velocities
    v[...] = ts.zeros((100, 3), device=device)
    assert p.diagnostics()["kinetic"] == 0.0


def test_state_constructor_and_fields():
    pos = np.array([[0.2, 0.5, 0.5], [0.8, 0.5, 0.5]])
    st = ts.sim.ParticleState(pos, velocities=[[1, 0, 0], [-1, 0, 0]], radius=0.05)
    assert len(st) == 2 and st.positions.dtype == np.float32
    np.testing.assert_allclose(st.mass, 1000 * 4 / 3 * np.pi * 0.05**3, rtol=1e-6)
    st.vx = [2.0, -2.0]
    np.testing.assert_array_equal(st.velocities[:, 0], [2.0, -2.0])
    with pytest.raises(ts.ShapeError, match="positions"):
        ts.sim.ParticleState(np.zeros((3, 2)))
    with pytest.raises(ts.ShapeError, match="radius"):
        ts.sim.ParticleState(pos, radius=[0.1, 0.1, 0.1])


def test_head_on_collision_restitution():
    zeta = 0.3
    cfg = ts.sim.ParticlesConfig(walls=False, gravity=[0, 0, 0], damping_ratio=zeta, stiffness=1000.0, dt=1e-5,
                                 box_lo=[0, 0, 0], box_hi=[1, 1, 1])
    st = ts.sim.ParticleState([[0.4, 0.5, 0.5], [0.6, 0.5, 0.5]], velocities=[[1, 0, 0], [-1, 0, 0]], radius=0.05)
    p = ts.sim.Particles(st, cfg, device="cpu")
    p.step(20000)
    v = p.state().velocities
    e = (v[1, 0] - v[0, 0]) / 2.0
    assert e == pytest.approx(np.exp(-np.pi * zeta / np.sqrt(1 - zeta**2)), rel=2e-2)


def test_config_and_options_kwargs():
    cfg = ts.sim.ParticlesConfig(dt=2e-4, walls=False, periodic=True, model="hertz")
    assert cfg.dt == 2e-4 and cfg.periodic and cfg.model == ts.sim.ContactModel.hertz
    cfg.box_hi = [2.0, 2.0, 2.0]
    assert list(cfg.box_hi) == [2.0, 2.0, 2.0]
    cfg.model = ts.sim.ContactModel.linear
    assert "linear" in repr(cfg)
    opts = ts.sim.InitOptions(n=10, seed=3)
    assert opts.n == 10 and opts.seed == 3 and "n=10" in repr(opts)
    with pytest.raises(TypeError):
        ts.sim.ParticlesConfig(dtt=1e-4)
    with pytest.raises(TypeError):
        ts.sim.InitOptions(radius="big")
    with pytest.raises(TypeError):
        ts.sim.ParticlesConfig(box_hi=[1.0, 2.0])
    with pytest.raises(ValueError, match="linear"):
        ts.sim.ParticlesConfig(model="spring")


def test_bad_inputs(device, tmp_path):
    state, cfg = small_gas(n=50)
    x = state.x
    x[7] = np.nan
    state.x = x
    with pytest.raises(ValueError, match="particle 7"):
        ts.sim.Particles(state, cfg, device=device)
    state, cfg = small_gas(n=50)
    r = state.radius
    r[3] = -1.0
    state.radius = r
    with pytest.raises(ValueError, match="radius"):
        ts.sim.Particles(state, cfg, device=device)
    state, _ = small_gas(n=50)
    with pytest.raises(ValueError, match="time step|dt"):
        ts.sim.Particles(state, ts.sim.ParticlesConfig(dt=0.0), device=device)
    with pytest.raises(ValueError):
        ts.sim.init_gas(ts.sim.InitOptions(n=0))
    with pytest.raises(ValueError, match="step count"):
        ts.sim.Particles(state, cfg, device=device).step(-1)
    with pytest.raises(TypeError):
        ts.sim.Particles(state, cfg, device=device, colour="red")
    with pytest.raises(TypeError):
        ts.sim.Particles("not a state")
    # A particle leaving a box without walls (not periodic) is a clear error at diagnostics().
    st = ts.sim.ParticleState([[0.98, 0.5, 0.5]], velocities=[[100.0, 0, 0]], radius=0.01)
    p = ts.sim.Particles(st, ts.sim.ParticlesConfig(walls=False, gravity=[0, 0, 0]), device=device)
    p.step(100)
    with pytest.raises(ValueError, match="left the box"):
        p.diagnostics()
    # A time step above a fifth of the stable limit warns with the limit.
    with pytest.warns(RuntimeWarning, match="stable"):
        ts.sim.Particles(state, ts.sim.ParticlesConfig(dt=5e-3, stiffness=1e5), device=device)
    # Output directories: unwritable (a path under a regular file) is a ValueError naming it.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="output directory"):
        ts.sim.prepare_output_directory(str(blocker / "frames"))
    ts.sim.prepare_output_directory(str(tmp_path / "ok" / "frames"))
    assert (tmp_path / "ok" / "frames").is_dir()


def test_neighbor_list_is_symmetric():
    state, cfg = small_gas(n=300)
    p = ts.sim.Particles(state, cfg, device="cpu")
    offsets, indices = p.neighbor_list()
    assert offsets.shape == (301,) and offsets[-1] == indices.size
    pairs = {(i, int(j)) for i in range(300) for j in indices[offsets[i]:offsets[i + 1]]}
    assert all((j, i) in pairs for i, j in pairs)
    assert p.diagnostics()["contacts"] == len(pairs) // 2


def test_benchmark_setup_small_cpu():
    p = ts.sim.Particles.benchmark_setup(20_000, device="cpu")
    cfg = p.config
    side = (20_000 / 1e6) ** (1 / 3)
    assert cfg.box_hi[0] == pytest.approx(side) and cfg.walls and cfg.dt == 1e-4
    assert cfg.stiffness == 1000.0 and cfg.damping_ratio == 0.3 and cfg.gravity[2] == pytest.approx(-9.81)
    r = np.asarray(p.radii)
    assert np.all(r == np.float32(0.004))
    v = p.state().velocities
    assert np.abs(v).max() <= 0.05 and np.abs(v).max() > 0.04
    p.step()
    assert p.steps_done == 1 and p.diagnostics()["contacts"] > 0
    with pytest.raises(ValueError, match="positive"):
        ts.sim.Particles.benchmark_setup(0, device="cpu")


@pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")
def test_cpu_and_cuda_agree_over_100_steps():
    state, cfg = small_gas(n=200, damping_ratio=0.0, dt=1e-4)
    a = ts.sim.Particles(state, cfg, device="cpu")
    b = ts.sim.Particles(state, cfg, device=GPU)
    a.step(100)
    b.step(100)
    np.testing.assert_allclose(a.state().positions, b.state().positions, atol=1e-4)

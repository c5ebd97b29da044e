"""ts.sim.DistributedParticles on the CPU backend: worker scripts under mpirun (1, 2 and 4 ranks)
compare the distributed run with the single-process ts.sim.Particles from the same state."""
import pytest

# The mpirun runner of the ts.distributed tests (a worker script per test, TESSEL_FORCE_CPU=1).
from test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.parametrize("np_", [1, 2, 4])
def test_matches_single_process(tmp_path, np_):
    out = run_ranks(tmp_path, np_, """
        import numpy as np
        import tessel as ts
        import tessel.distributed as dist
        dist.init("cpu")
        cfg = ts.sim.ParticlesConfig(box_hi=[0.2, 0.1, 0.1], stiffness=1000.0, dt=5e-5)
        state = ts.sim.init_gas(ts.sim.InitOptions(n=600, radius=0.004, speed=0.2, seed=3), cfg)
        single = ts.sim.Particles(state, cfg, device="cpu")
        d = ts.sim.DistributedParticles(state, cfg, rebalance_every=10)
        assert d.global_size == 600 and len(d.slab_bounds) == dist.world_size() + 1
        single.step(60)
        d.step(60)
        got, want = d.diagnostics(), single.diagnostics()
        assert sum(got["rank_counts"]) == 600 and len(got["rank_counts"]) == dist.world_size()
        assert got["imbalance"] >= 1.0 and got["step"] == 60
        # float32 physics, summed in another order: a few float32 ulps of the total energy
        # (the C++ tests measure the single run's own spread; this checks the Python plumbing).
        scale = abs(want["total_energy"])
        for key in ("total_energy", "kinetic", "potential_spring", "potential_gravity"):
            assert abs(got[key] - want[key]) <= 1e-6 * scale, (key, got[key], want[key])
        assert got["contacts"] == want["contacts"] and got["wall_contacts"] == want["wall_contacts"]
        everything = d.gather(0)
        if dist.rank() == 0:
            ref = single.state()
            assert len(everything) == 600
            assert np.abs(everything.positions - ref.positions).max() < 1e-5
            assert np.array_equal(everything.radius, ref.radius)
            print("distributed-ok", got["rank_counts"])
        else:
            assert len(everything) == 0
    """)
    assert "distributed-ok" in out


@needs_mpi
def test_slabs_thinner_than_the_cutoff_are_an_error(tmp_path):
    out = run_ranks(tmp_path, 2, """
        import tessel as ts
        import tessel.distributed as dist
        dist.init("cpu")
        cfg = ts.sim.ParticlesConfig(box_hi=[0.012, 0.1, 0.1])
        state = ts.sim.init_gas(ts.sim.InitOptions(n=40, radius=0.004), cfg)
        try:
            ts.sim.DistributedParticles(state, cfg)
        except ValueError as error:
            message = str(error)
            assert "2 ranks cut axis 0" in message and "cutoff 0.008" in message, message
            print("error-ok")
        else:
            raise AssertionError("expected ValueError")
        ts.sim.DistributedParticles(state, cfg, axis=1)  # along y the box has room
    """)
    assert out.count("error-ok") == 2

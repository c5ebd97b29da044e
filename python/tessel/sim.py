"""tessel.sim: a discrete-element (DEM) particle simulation (the C++ tessel::sim, same names).

    import tessel as ts
    config = ts.sim.ParticlesConfig(dt=1e-4)                 # unit box, walls, gravity -9.81 z
    state = ts.sim.init_gas(ts.sim.InitOptions(n=100_000, radius=0.004), config)
    p = ts.sim.Particles(state, config, device="cuda")
    p.step(1000)                                             # asynchronous on the GPU
    d = p.diagnostics()                                      # dict: kinetic, momentum, contacts, ...
    x = p.positions                                          # (n, 3) zero-copy view, cell order
    who = p.ids                                              # row k is particle who[k]
    host = p.state()                                         # ParticleState in particle order

Across ranks (under mpirun; every rank passes the same initial state, each keeps its slab):

    ts.distributed.init()
    d = ts.sim.DistributedParticles(state, config)           # slabs along x of the box
    d.step(1000)
    d.diagnostics()                                          # totals over the ranks, rank_counts
    everything = d.gather(0)                                 # ParticleState on rank 0

See docs/guide/simulation.rst for the physics and the Python API.
"""
from __future__ import annotations

from ._tessel import _sim as _native

ContactModel = _native.ContactModel
ParticlesConfig = _native.ParticlesConfig
InitOptions = _native.InitOptions
ParticleState = _native.ParticleState
Particles = _native.Particles
DistributedParticles = _native.DistributedParticles
init_gas = _native.init_gas
init_block = _native.init_block
init_collision = _native.init_collision
prepare_output_directory = _native.prepare_output_directory

__all__ = [
    "ContactModel", "ParticlesConfig", "InitOptions", "ParticleState", "Particles", "DistributedParticles",
    "init_gas", "init_block", "init_collision", "prepare_output_directory",
]

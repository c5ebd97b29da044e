// The particle simulation across ranks (docs/guide/simulation.rst). Run alone it is a world of
// one rank; under `mpirun -np N` the box is cut into N slabs, and every rank checks the same totals.
#include <tessel/tessel.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>

using namespace tessel;

int main() {
  // doc:begin sim_distributed
  dist::init();                                          // under mpirun: rank and size from MPI
  sim::BenchmarkSetup setup = sim::benchmark_setup(4000);  // the same state on every rank
  sim::DistributedOptions options;
  options.axis = 0;                                      // slabs along x
  options.rebalance_every = 20;                          // move the slab bounds to the particles
  sim::DistributedParticles particles(setup.state, setup.config, dist::world(), options);

  particles.step(50);                                    // halo exchange + migration each step
  sim::DistributedDiagnostics d = particles.diagnostics();  // summed over the ranks
  sim::ParticleState all = particles.gather(0);          // the whole state on rank 0
  if (dist::rank() == 0) {
    std::printf("step %lld: energy %.6f J, %lld contacts, %zu ranks, imbalance %.3f\n",
                static_cast<long long>(d.step), d.total_energy(), static_cast<long long>(d.contacts),
                d.rank_counts.size(), d.imbalance());
  }
  // doc:end sim_distributed
  // The same 50 steps in one process: totals within float32 rounding of the total energy.
  sim::Particles single(setup.state, setup.config, dist::local_device());
  single.step(50);
  const sim::Diagnostics s = single.diagnostics();
  if (std::abs(d.total_energy() - s.total_energy()) > 1e-6 * std::abs(s.total_energy()) || d.contacts != s.contacts ||
      (dist::rank() == 0 && all.size() != 4000)) {
    throw std::runtime_error("sim_distributed example: the distributed run differs from the single one");
  }
  if (dist::rank() == 0) std::printf("sim_distributed: ok\n");
  return 0;
}

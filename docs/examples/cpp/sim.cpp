// The particle simulation from C++ (docs/guide/simulation.rst).
#include <tessel/tessel.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>

using namespace tessel;

int main() {
  // doc:begin sim
  sim::ParticlesConfig config;             // unit box with walls, gravity -9.81 along z
  config.dt = 1e-4;
  config.friction = 0.3;                   // Coulomb friction (0: none)
  sim::InitOptions init;
  init.n = 2000;
  init.radius = 0.01;
  init.polydispersity = 0.2;               // radii in radius * [0.8, 1.2]
  sim::Particles particles(sim::init_gas(init, config), config, default_device());

  particles.step(100);                     // asynchronous on the GPU
  sim::Diagnostics d = particles.diagnostics();
  Array positions = particles.positions(); // (n, 3) float32 view of the live state, cell order
  Array ids = particles.ids();             // row k is particle ids[k]
  sim::ParticleState host = particles.state();  // host copy in the original particle order
  std::printf("step %lld: energy %.6f J, %lld contacts\n", static_cast<long long>(d.step), d.total_energy(),
              static_cast<long long>(d.contacts));
  // doc:end sim
  if (d.step != 100 || positions.shape() != Shape{2000, 3} || ids.shape() != Shape{2000} || host.size() != 2000 ||
      !std::isfinite(d.total_energy())) {
    throw std::runtime_error("sim example: unexpected state");
  }
  std::printf("sim: ok\n");
  return 0;
}

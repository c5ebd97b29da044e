// The particle simulation benchmark of issue 8 on the GPU:
//   1e6 particles of radius 0.004 at uniform random positions in the unit box with walls,
//   velocities uniform in [-0.05, 0.05], linear spring-dashpot contacts and gravity, dt = 1e-4;
//   the median step over 100 steps after 10 warm-up steps (CUDA events per step).
//   Target: <= 0.6 ms per step (the Numba/CuPy uniform-grid code took 1.18 ms on an H100;
//   bench/peers/numba_sim.py measures it on this machine).
//   1e7 particles at the same density (box side 10^(1/3)): target <= 12x the 1e6 time.
// Before timing, each run is sanity-checked: finite energies, contacts found, momentum finite.
// Without a GPU this prints a note and exits 0.
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/core/device.hpp"
#include "tessel/profile/timer.hpp"
#include "tessel/sim/particles.hpp"

namespace {

struct Result {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  std::int64_t contacts = 0;
  double kinetic = 0;
};

Result run(std::int64_t n, int warmup, int repeats) {
  using namespace tessel;
  const sim::BenchmarkSetup setup = sim::benchmark_setup(n);
  sim::Particles p(setup.state, setup.config, Device::cuda(0));
  p.step(warmup);
  const sim::Diagnostics d = p.diagnostics();  // sanity check before timing (throws on NaN)
  if (!std::isfinite(d.total_energy()) || d.contacts <= 0) {
    std::fprintf(stderr, "sim_bench: sanity check failed at n=%lld: energy %g, contacts %lld\n",
                 static_cast<long long>(n), d.total_energy(), static_cast<long long>(d.contacts));
    std::exit(1);
  }
  // The warm-up steps ran above, before the sanity check: none here.
  const profile::Timing t = profile::time_on_stream([&] { p.step(1); }, p.stream(), {0, repeats});
  const sim::Diagnostics after = p.diagnostics();
  Result r;
  r.median_ms = t.median_ms;
  r.min_ms = t.min_ms;
  r.max_ms = t.max_ms;
  r.contacts = after.contacts;
  r.kinetic = after.kinetic;
  std::printf("sim n=%lld: median %.4f ms/step (min %.4f, max %.4f), %lld contacts, %.4g particle-steps/s\n",
              static_cast<long long>(n), r.median_ms, r.min_ms, r.max_ms, static_cast<long long>(r.contacts),
              static_cast<double>(n) / (r.median_ms / 1e3));
  return r;
}

}  // namespace

int main() {
  if (tessel::bench::skip_without_cuda("sim_bench")) return 0;
  const Result small = run(1'000'000, 10, 100);
  const Result large = run(10'000'000, 10, 100);
  const double ratio = large.median_ms / small.median_ms;
  std::printf("sim: 1e6 %.4f ms/step (target <= 0.6), 1e7 %.4f ms/step, ratio %.2f (target <= 12)\n", small.median_ms,
              large.median_ms, ratio);
  auto entry = [](const Result& r, std::int64_t n) {
    return nlohmann::json{{"n", n},
                          {"median_ms_per_step", r.median_ms},
                          {"min_ms", r.min_ms},
                          {"max_ms", r.max_ms},
                          {"contacts", r.contacts},
                          {"particle_steps_per_s", static_cast<double>(n) / (r.median_ms / 1e3)}};
  };
  nlohmann::json results;
  results["device"] = tessel::device_properties(0).name;
  results["config"] = "radius 0.004, uniform random in a box with walls at 1e6 per unit volume, v in [-0.05, 0.05], "
                      "linear spring-dashpot (k 1000, zeta 0.3), gravity, dt 1e-4; median of 100 steps after 10 warm-up";
  results["n_1e6"] = entry(small, 1'000'000);
  results["n_1e7"] = entry(large, 10'000'000);
  results["target_ms_1e6"] = 0.6;
  results["ratio_1e7_over_1e6"] = ratio;
  results["target_ratio"] = 12.0;
  results["peer"] = "bench/peers/numba_sim.py writes sim_peers (Numba kernels + CuPy argsort, same configuration)";
  tessel::bench::write_results("sim", results);
  return 0;
}

// The particle-collision workload: issue 8's benchmark configuration (sim::benchmark_setup),
// median step time after warm-up steps. The check before timing is physical: with damping and
// walls the total energy must not grow, and every diagnostic must be finite.
#include <cmath>

#include <fmt/format.h>

#include "bench_suite.hpp"
#include "tessel/sim/particles.hpp"

namespace tessel::cli::bench {
namespace {

std::vector<Row> particles(Context& ctx) {
  // A small CPU runs 1e6 particles at seconds per step: it gets a tenth of them.
  const std::int64_t n = ctx.device.is_cuda() ? 1'000'000 : 100'000;
  const std::string variant = fmt::format("{:.0e} particles, ms/step", static_cast<double>(n));
  const sim::BenchmarkSetup setup = sim::benchmark_setup(n);
  sim::Particles p(setup.state, setup.config, ctx.device);
  p.step(ctx.device.is_cuda() ? 10 : 2);
  const sim::Diagnostics before = p.diagnostics();
  const int repeats = ctx.device.is_cuda() ? (ctx.quick ? 30 : 100) : 5;
  const double ms = profile::time_on_stream([&] { p.step(1); }, p.stream(), {0, repeats}).median_ms;
  const sim::Diagnostics after = p.diagnostics();
  const double e0 = before.total_energy(), e1 = after.total_energy();
  if (!std::isfinite(e1) || after.contacts <= 0 || e1 > e0 + 1e-6 * std::abs(e0)) {
    return {failed_row("particles", variant,
                       fmt::format("energy {:.6g} -> {:.6g}, {} contacts: not a damped system", e0, e1, after.contacts))};
  }
  Row r;
  r.workload = "particles";
  r.variant = variant;
  r.ms = ms;
  r.rate = static_cast<double>(n) / ms / 1e3;
  r.unit = "Mparticle-steps/s";
  r.note = fmt::format("{} contacts; target <= 0.6 ms at 1e6 on an H100", after.contacts);
  return {r};
}

}  // namespace

std::vector<Workload> sim_workloads() {
  return {{"particles", "particle collisions (DEM), 1e6 particles, median ms per step", particles}};
}

}  // namespace tessel::cli::bench

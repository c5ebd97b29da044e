// sim::DistributedParticles scaling, into bench/results/<device>-<date>.json under
// "sim_dist_np<N>" (rank 0 writes). Run it under the launcher, one rank per GPU:
//   mpirun -np N build/bench/sim_dist_bench [--weak 1e7] [--strong 1e8] [--steps 20] [--warmup 3]
// (TESSEL_FORCE_CPU=1 for the CPU path). Alone, or on one GPU, it runs and reports as one rank.
//
// - Weak scaling: --weak particles per rank (default 1e7), so n = per_rank * N.
// - Strong scaling: --strong particles in all (default 1e8), whatever N.
// Both use benchmark_setup(n) (the issue 8 configuration at the same density). Each run is
// sanity-checked (finite energies, every particle owned once) after the warm-up, then the steps
// are timed with barriers on either side (wall clock). Reported: steps/s, particle-steps/s, the
// per-rank counts' imbalance, the ghosts per rank, and rank 0's ms per step in each phase
// (integrate, migrate, halo, force: DistributedOptions::time_phases, which waits for the device at
// each phase boundary; the exchanges already wait there for their counts, so the cost is about
// two more stream synchronizations per step). When today's file holds the one-rank result of the same size, the weak
// efficiency (t_1 / t_N) and the strong speedup (t_1 / t_N) are added. On one rank, the weak run
// is also timed as a single-process sim::Particles::step (single_process_ms_per_step).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/tessel.hpp"

using namespace tessel;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "sim_dist_bench: FAILED: %s\n", what.c_str());
  std::exit(1);
}

nlohmann::json run(const char* mode, std::int64_t n, int warmup, int steps) {
  const dist::Communicator& world = dist::world();
  const sim::BenchmarkSetup setup = sim::benchmark_setup(n);
  sim::DistributedOptions options;
  options.time_phases = true;
  sim::DistributedParticles p(setup.state, setup.config, world, options);
  p.step(warmup);
  const sim::DistributedDiagnostics check = p.diagnostics();
  std::int64_t owned = 0;
  for (std::int64_t c : check.rank_counts) owned += c;
  if (!std::isfinite(check.total_energy()) || owned != n) {
    fail(std::string(mode) + " n=" + std::to_string(n) + ": energy " + std::to_string(check.total_energy()) + ", " +
         std::to_string(owned) + " particles owned");
  }
  world.barrier();
  const sim::DistributedParticles::PhaseTimes before = p.phase_times();
  const auto start = std::chrono::steady_clock::now();
  p.step(steps);
  world.barrier();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const sim::DistributedParticles::PhaseTimes after = p.phase_times();
  auto phase_ms = [&](double sim::DistributedParticles::PhaseTimes::*slot) {
    return 1e3 * (after.*slot - before.*slot) / steps;
  };
  const nlohmann::json phases = {{"integrate", phase_ms(&sim::DistributedParticles::PhaseTimes::integrate)},
                                 {"migrate", phase_ms(&sim::DistributedParticles::PhaseTimes::migrate)},
                                 {"halo", phase_ms(&sim::DistributedParticles::PhaseTimes::halo)},
                                 {"force", phase_ms(&sim::DistributedParticles::PhaseTimes::force)}};
  const sim::DistributedDiagnostics d = p.diagnostics();
  // Ghosts: the largest count over the ranks (the slowest rank sets the pace).
  Array ghosts = full({1}, static_cast<double>(p.ghost_count()), DType::float64, world.device());
  world.all_reduce(ghosts, dist::ReduceOp::max);
  const double max_ghosts = ghosts.to(Device::cpu()).item<double>();
  const double steps_per_s = steps / seconds;
  if (world.rank() == 0) {
    std::printf("%s n=%lld on %d ranks: %.4g steps/s (%.4f ms/step), %.4g particle-steps/s, imbalance %.3f, "
                "up to %.0f ghosts per rank\n",
                mode, static_cast<long long>(n), world.size(), steps_per_s, 1e3 * seconds / steps,
                steps_per_s * static_cast<double>(n), d.imbalance(), max_ghosts);
    std::printf("  rank 0 ms/step: integrate %.4f, migrate %.4f, halo %.4f, force %.4f (exchange = migrate + halo)\n",
                phases["integrate"].get<double>(), phases["migrate"].get<double>(), phases["halo"].get<double>(),
                phases["force"].get<double>());
  }
  return {{"n", n},
          {"ranks", world.size()},
          {"steps", steps},
          {"steps_per_s", steps_per_s},
          {"ms_per_step", 1e3 * seconds / steps},
          {"particle_steps_per_s", steps_per_s * static_cast<double>(n)},
          {"rank_counts", d.rank_counts},
          {"imbalance", d.imbalance()},
          {"max_ghosts_per_rank", max_ghosts},
          {"rank0_phase_ms_per_step", phases}};
}

// sim::Particles::step alone on this rank's device, same setup: the single-process time the
// one-rank distributed step is compared with (what the distribution costs before any scaling).
double single_process_ms(std::int64_t n, int warmup, int steps) {
  const sim::BenchmarkSetup setup = sim::benchmark_setup(n);
  sim::Particles p(setup.state, setup.config, dist::local_device());
  p.step(warmup);
  synchronize(dist::local_device());
  const auto start = std::chrono::steady_clock::now();
  p.step(steps);
  synchronize(dist::local_device());
  return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
}

// The one-rank ms/step of a run of `n` particles in today's results, or 0.
double one_rank_ms(const nlohmann::json& all, const char* mode, std::int64_t n) {
  const auto it = all.find("sim_dist_np1");
  if (it == all.end() || !it->contains(mode)) return 0;
  const nlohmann::json& r = (*it)[mode];
  return r.value("n", std::int64_t{0}) == n ? r.value("ms_per_step", 0.0) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t weak = 10'000'000, strong = 100'000'000;
  int steps = 20, warmup = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--weak" && i + 1 < argc) {
      weak = static_cast<std::int64_t>(std::atof(argv[++i]));
    } else if (arg == "--strong" && i + 1 < argc) {
      strong = static_cast<std::int64_t>(std::atof(argv[++i]));
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (arg == "--warmup" && i + 1 < argc) {
      warmup = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: sim_dist_bench [--weak PER_RANK] [--strong TOTAL] [--steps N] [--warmup N]\n");
      return 2;
    }
  }
  if (weak < 0 || strong < 0 || steps <= 0 || warmup < 0) fail("--weak and --strong must be >= 0 (0 skips), --steps > 0");
  dist::init();
  const int size = dist::world_size();
  nlohmann::json results = {{"world_size", size},
                            {"device", dist::local_device().str()},
                            {"config", "benchmark_setup(n): radius 0.004 at 1e6 per unit volume, walls, gravity, "
                                       "dt 1e-4; slabs along x, fixed; wall clock between barriers"}};
  if (weak > 0) results["weak"] = run("weak", weak * size, warmup, steps);
  if (weak > 0 && size == 1) {
    const double single = single_process_ms(weak, warmup, steps);
    results["weak"]["single_process_ms_per_step"] = single;
    results["weak"]["np1_over_single_process"] = results["weak"]["ms_per_step"].get<double>() / single;
    std::printf("sim::Particles::step alone at n=%lld: %.4f ms/step; the one-rank distributed step takes %.3fx that\n",
                static_cast<long long>(weak), single, results["weak"]["np1_over_single_process"].get<double>());
  }
  if (strong > 0) results["strong"] = run("strong", strong, warmup, steps);
  if (dist::rank() == 0) {
    const nlohmann::json all = bench::read_results();
    if (weak > 0 && size > 1) {
      if (const double t1 = one_rank_ms(all, "weak", weak); t1 > 0) {
        results["weak"]["efficiency_vs_np1"] = t1 / results["weak"]["ms_per_step"].get<double>();
        std::printf("weak scaling efficiency on %d ranks: %.3f (target >= 0.9 on 2 and 4 GPUs)\n", size,
                    results["weak"]["efficiency_vs_np1"].get<double>());
      }
    }
    if (strong > 0 && size > 1) {
      if (const double t1 = one_rank_ms(all, "strong", strong); t1 > 0) {
        results["strong"]["speedup_vs_np1"] = t1 / results["strong"]["ms_per_step"].get<double>();
        std::printf("strong scaling speedup on %d ranks: %.3f (target >= 1.8 on 2 GPUs)\n", size,
                    results["strong"]["speedup_vs_np1"].get<double>());
      }
    }
    bench::write_results("sim_dist_np" + std::to_string(size), results);
  }
  dist::finalize();
  return 0;
}

// sim::DistributedParticles on the CPU backend against the single-process sim::Particles from the
// same initial state. ctest runs this binary whole under mpirun -np 1, 2 and 4
// (distsim.mpirun_np*) and each test alone as an MPI singleton (one rank).
//
// Tolerances: the distributed run differs from the single one only in the order of the float32
// force sums (its grid holds owned + ghost particles, so neighbours are visited in another order).
// The single run's own spread under that kind of change is measured in each test: the same state
// with the particles in another order (reversed, and shuffled: each reorders every cell's contents
// and so every force sum), run single-process. The distributed result must be within max(4 x that spread, a floor of a few
// float32 ulps of the quantity's scale): 4x because the distributed run is one more reordering of
// the same kind, and the floor because a spread can happen to be 0 for a short run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "testing.hpp"
#include "tessel/dist/dist.hpp"
#include "tessel/sim/distributed.hpp"
#include "tessel/sim/particles.hpp"

namespace dist = tessel::dist;
namespace sim = tessel::sim;
using tessel::Device;
using tessel::testing::expect_error;

namespace {

void ensure_init() {
  if (!dist::is_initialized()) dist::init(Device::cpu());
}

// The state with its particles in another order: new index k holds old particle perm[k].
sim::ParticleState permuted(const sim::ParticleState& s, const std::vector<std::size_t>& perm) {
  sim::ParticleState r = s;
  const std::vector<const std::vector<float>*> from = {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.radius, &s.mass};
  const std::vector<std::vector<float>*> to = {&r.x, &r.y, &r.z, &r.vx, &r.vy, &r.vz, &r.radius, &r.mass};
  for (std::size_t f = 0; f < from.size(); ++f) {
    for (std::size_t k = 0; k < perm.size(); ++k) (*to[f])[k] = (*from[f])[perm[k]];
  }
  return r;
}
// Back to the original order.
sim::ParticleState unpermuted(const sim::ParticleState& s, const std::vector<std::size_t>& perm) {
  std::vector<std::size_t> inverse(perm.size());
  for (std::size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = k;
  return permuted(s, inverse);
}
// Two reorderings: reversed, and a seeded shuffle.
std::vector<std::vector<std::size_t>> reorderings(std::size_t n) {
  std::vector<std::size_t> rev(n), shuffled(n);
  std::iota(shuffled.begin(), shuffled.end(), 0);
  for (std::size_t k = 0; k < n; ++k) rev[k] = n - 1 - k;
  std::mt19937_64 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  return {rev, shuffled};
}

struct Totals {
  double energy, kinetic, spring;
  double momentum[3];
  double contacts, wall_contacts;
};
Totals totals(const sim::Diagnostics& d) {
  return {d.total_energy(), d.kinetic, d.potential_spring, {d.momentum[0], d.momentum[1], d.momentum[2]},
          static_cast<double>(d.contacts), static_cast<double>(d.wall_contacts)};
}

// Compares the distributed totals with the single run's, within 4x the largest deviation of the
// reordered single runs (floor: 1e-6 of the scale, a few float32 ulps: the total energy for energies, since energy
// moves between its kinetic and elastic parts).
void expect_totals_close(const Totals& dist_t, const Totals& single, const std::vector<Totals>& twins,
                         double momentum_scale, const std::string& where) {
  const double energy_scale = std::abs(single.energy);
  auto check = [&](const char* name, auto field, double scale) {
    const double got = field(dist_t), want = field(single);
    double spread = 0;
    for (const Totals& t : twins) spread = std::max(spread, std::abs(field(t) - want));
    // 1e-12 relative: the rounding of the double sums, which the ranks add in another order.
    const double tol = std::max({4 * spread, 1e-6 * scale, 1e-12 * std::abs(want)});
    EXPECT_LE(std::abs(got - want), tol) << where << ": " << name << " distributed " << got << " single " << want
                                         << " (single-run spread " << spread << ", tolerance " << tol << ")";
    if (dist::world().rank() == 0 && std::getenv("TESSEL_TEST_VERBOSE")) {
      std::printf("%s %s: dist %.10g single %.10g spread %.3g |diff| %.3g tol %.3g\n", where.c_str(), name, got, want,
                  spread, std::abs(got - want), tol);
    }
  };
  check("total energy", [](const Totals& t) { return t.energy; }, energy_scale);
  check("kinetic energy", [](const Totals& t) { return t.kinetic; }, energy_scale);
  check("spring energy", [](const Totals& t) { return t.spring; }, energy_scale);
  check("momentum x", [](const Totals& t) { return t.momentum[0]; }, momentum_scale);
  check("momentum y", [](const Totals& t) { return t.momentum[1]; }, momentum_scale);
  check("momentum z", [](const Totals& t) { return t.momentum[2]; }, momentum_scale);
  // Contact counts are whole numbers; a pair at the edge of touching may flip with the rounding,
  // which the spread then shows.
  check("contacts", [](const Totals& t) { return t.contacts; }, 0);
  check("wall contacts", [](const Totals& t) { return t.wall_contacts; }, 0);
}

double momentum_scale(const sim::ParticleState& s) {
  double sum = 0;
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    sum += s.mass[i] * (std::abs(s.vx[i]) + std::abs(s.vy[i]) + std::abs(s.vz[i]));
  }
  return sum;
}

// Runs `steps` steps three ways and compares totals: single, single reversed, distributed.
void compare_totals(const sim::ParticleState& state, const sim::ParticlesConfig& config, std::int64_t steps,
                    const sim::DistributedOptions& options, const std::string& where) {
  ensure_init();
  sim::Particles single(state, config, Device::cpu());
  sim::DistributedParticles d(state, config, dist::world(), options);
  single.step(steps);
  d.step(steps);
  std::vector<Totals> twins;
  for (const auto& perm : reorderings(state.x.size())) {
    sim::Particles twin(permuted(state, perm), config, Device::cpu());
    twin.step(steps);
    twins.push_back(totals(twin.diagnostics()));
  }
  const sim::DistributedDiagnostics dd = d.diagnostics();
  std::int64_t counted = 0;
  for (auto c : dd.rank_counts) counted += c;
  EXPECT_EQ(counted, state.size()) << where;
  EXPECT_EQ(static_cast<int>(dd.rank_counts.size()), dist::world().size());
  EXPECT_EQ(dd.step, steps);
  expect_totals_close(totals(dd), totals(single.diagnostics()), twins, momentum_scale(state), where);
}

}  // namespace

TEST(DistributedParticles, BenchmarkTotalsMatchSingleProcess) {
  const sim::BenchmarkSetup setup = sim::benchmark_setup(4000);
  compare_totals(setup.state, setup.config, 50, {}, "benchmark n=4000, 50 steps");
  sim::DistributedOptions rebalanced;
  rebalanced.rebalance_every = 7;
  compare_totals(setup.state, setup.config, 50, rebalanced, "benchmark n=4000, 50 steps, rebalanced every 7");
}

TEST(DistributedParticles, PeriodicTotalsMatchSingleProcess) {
  sim::ParticlesConfig config;
  config.box_hi = {0.12, 0.06, 0.06};
  config.walls = false;
  config.periodic = true;
  config.gravity = {0, 0, 0};
  config.stiffness = 1000;
  sim::InitOptions init;
  config.dt = 5e-5;
  init.n = 400;  // a quarter of the volume
  init.radius = 0.004;
  init.speed = 0.2;  // fast enough that particles cross slab faces and the periodic seam
  compare_totals(sim::init_gas(init, config), config, 100, {}, "periodic gas n=400, 100 steps");
}

TEST(DistributedParticles, RebalancedTotalsMatchAndBalanceImproves) {
  // A block in the upper part of the box, slabs along z: equal-width slabs leave the lower ranks
  // empty; rebalancing every 5 steps moves the bounds to the particles.
  ensure_init();
  sim::ParticlesConfig config;
  config.box_hi = {0.1, 0.1, 0.2};
  sim::InitOptions init;
  init.n = 1000;
  init.radius = 0.003;
  const sim::ParticleState state = sim::init_block(init, config);
  sim::DistributedOptions fixed;
  fixed.axis = 2;
  sim::DistributedOptions balanced = fixed;
  balanced.rebalance_every = 5;
  compare_totals(state, config, 30, balanced, "block n=1000 rebalanced every 5, 30 steps");
  sim::DistributedParticles a(state, config, dist::world(), fixed), b(state, config, dist::world(), balanced);
  a.step(10);
  b.step(10);
  const double before = a.diagnostics().imbalance(), after = b.diagnostics().imbalance();
  if (dist::world().size() > 1) {
    EXPECT_GT(before, 1.5) << "the block should leave equal-width slabs unbalanced";
    EXPECT_LT(after, 1.2) << "imbalance after rebalancing " << after << " (before " << before << ")";
  } else {
    EXPECT_DOUBLE_EQ(after, 1.0);
  }
}

TEST(DistributedParticles, SmallCaseTrajectoriesAgreeFor100Steps) {
  ensure_init();
  for (const bool periodic : {false, true}) {
    sim::ParticleState state;
    sim::ParticlesConfig config;
    if (periodic) {
      config.box_hi = {0.1, 0.05, 0.05};
      config.walls = false;
      config.periodic = true;
      config.gravity = {0, 0, 0};
      config.dt = 5e-5;
      sim::InitOptions init;
      init.n = 300;
      init.speed = 0.2;
      state = sim::init_gas(init, config);
    } else {
      const sim::BenchmarkSetup setup = sim::benchmark_setup(300);
      state = setup.state;
      config = setup.config;
    }
    sim::Particles single(state, config, Device::cpu());
    sim::DistributedParticles d(state, config, dist::world());
    single.step(100);
    d.step(100);
    std::vector<sim::ParticleState> others;
    for (const auto& perm : reorderings(state.x.size())) {
      sim::Particles twin(permuted(state, perm), config, Device::cpu());
      twin.step(100);
      others.push_back(unpermuted(twin.state(), perm));
    }
    const sim::ParticleState got = d.gather(0);
    if (dist::world().rank() != 0) {
      EXPECT_EQ(got.size(), 0);
      continue;
    }
    const sim::ParticleState want = single.state();
    ASSERT_EQ(got.size(), want.size());
    double spread = 0, diff = 0, vspread = 0, vdiff = 0;
    auto periodic_delta = [&](double a, double b, int axis) {
      double dlt = a - b;
      if (periodic) {
        const double length = config.box_hi[axis] - config.box_lo[axis];
        dlt -= length * std::round(dlt / length);
      }
      return std::abs(dlt);
    };
    for (std::size_t i = 0; i < want.x.size(); ++i) {
      const float wp[3] = {want.x[i], want.y[i], want.z[i]}, gp[3] = {got.x[i], got.y[i], got.z[i]};
      const float wv[3] = {want.vx[i], want.vy[i], want.vz[i]}, gv[3] = {got.vx[i], got.vy[i], got.vz[i]};
      for (const sim::ParticleState& other : others) {
        const float op[3] = {other.x[i], other.y[i], other.z[i]}, ov[3] = {other.vx[i], other.vy[i], other.vz[i]};
        for (int a = 0; a < 3; ++a) {
          spread = std::max(spread, periodic_delta(wp[a], op[a], a));
          vspread = std::max(vspread, std::abs(static_cast<double>(wv[a]) - ov[a]));
        }
      }
      for (int a = 0; a < 3; ++a) {
        diff = std::max(diff, periodic_delta(gp[a], wp[a], a));
        vdiff = std::max(vdiff, std::abs(static_cast<double>(gv[a]) - wv[a]));
      }
      EXPECT_EQ(got.radius[i], want.radius[i]);
      EXPECT_EQ(got.mass[i], want.mass[i]);
    }
    // Positions are O(0.1): 1e-6 is a few float32 ulps; velocities O(0.1) likewise.
    const double tol = std::max(4 * spread, 1e-6), vtol = std::max(4 * vspread, 1e-6);
    if (std::getenv("TESSEL_TEST_VERBOSE")) {
      std::printf("trajectories periodic=%d: max |dx| %.3g (single spread %.3g), max |dv| %.3g (spread %.3g)\n",
                  periodic, diff, spread, vdiff, vspread);
    }
    EXPECT_LE(diff, tol) << "periodic " << periodic << ": positions differ by " << diff << ", single spread "
                         << spread;
    EXPECT_LE(vdiff, vtol) << "periodic " << periodic << ": velocities differ by " << vdiff << ", single spread "
                           << vspread;
  }
}

TEST(DistributedParticles, SlabsThinnerThanTheCutoffAreAnError) {
  ensure_init();
  sim::ParticlesConfig config;
  config.box_hi = {0.012, 0.1, 0.1};  // cutoff 0.008: room for one slab along x
  sim::InitOptions init;
  init.n = 50;
  const sim::ParticleState state = sim::init_gas(init, config);
  EXPECT_EQ(sim::DistributedParticles::max_ranks(config, 0.008, 0), 1);
  if (dist::world().size() == 1) {
    sim::DistributedParticles d(state, config, dist::world());
    EXPECT_EQ(d.local_size(), 50);
  } else {
    const std::string ranks = std::to_string(dist::world().size()) + " ranks";
    expect_error<tessel::ValueError>([&] { sim::DistributedParticles d(state, config, dist::world()); },
                                     {"sim::DistributedParticles", ranks, "axis 0", "length 0.012", "cutoff 0.008",
                                      "use at most 1 ranks"});
  }
  // Along y the same box has room.
  sim::DistributedOptions y;
  y.axis = 1;
  sim::DistributedParticles ok(state, config, dist::world(), y);
  EXPECT_EQ(ok.global_size(), 50);
}

TEST(DistributedParticles, BadOptionsAreErrors) {
  ensure_init();
  const sim::BenchmarkSetup setup = sim::benchmark_setup(100);
  sim::DistributedOptions bad_axis;
  bad_axis.axis = 3;
  expect_error<tessel::ValueError>([&] { sim::DistributedParticles d(setup.state, setup.config, dist::world(), bad_axis); },
                                   {"sim::DistributedParticles", "axis must be 0, 1 or 2, got 3"});
  sim::DistributedOptions bad_rebalance;
  bad_rebalance.rebalance_every = -1;
  expect_error<tessel::ValueError>(
      [&] { sim::DistributedParticles d(setup.state, setup.config, dist::world(), bad_rebalance); },
      {"rebalance_every must be >= 0, got -1"});
  sim::ParticleState short_state = setup.state;
  short_state.vx.pop_back();
  expect_error<tessel::ShapeError>([&] { sim::DistributedParticles d(short_state, setup.config, dist::world()); },
                                   {"sim::Particles", "vx has 99"});
  sim::DistributedParticles d(setup.state, setup.config, dist::world());
  expect_error<tessel::ValueError>([&] { d.gather(dist::world().size()); }, {"gather root"});
  expect_error<tessel::ValueError>([&] { d.step(-1); }, {"step count must be >= 0, got -1"});
}

TEST(DistributedParticles, ParticleLeavingAnOpenBoxIsAnErrorOnEveryRank) {
  ensure_init();
  sim::ParticlesConfig config;
  config.box_hi = {0.2, 0.1, 0.1};
  config.walls = false;
  config.gravity = {0, 0, 0};
  sim::InitOptions init;
  init.n = 100;
  init.speed = 0.01;
  sim::ParticleState state = sim::init_gas(init, config);
  state.x[7] = 0.195f;  // 0.01 per step outwards: out of the box after one step
  state.vx[7] = 100.0f;
  sim::DistributedParticles d(state, config, dist::world());
  // The step finds it (before the force pass that would reject it on its rank alone), on every
  // rank, so none is left waiting for the others.
  expect_error<tessel::ValueError>([&] { d.step(1); },
                                   {"sim::DistributedParticles", "particle 7", "left the box", "step 1"});
}

TEST(DistributedParticles, DifferentStatesOnTheRanksAreAnError) {
  ensure_init();
  const int rank = dist::world().rank(), size = dist::world().size();
  const sim::BenchmarkSetup setup = sim::benchmark_setup(2000 + rank);
  if (size == 1) {
    sim::DistributedParticles d(setup.state, setup.config, dist::world());
    EXPECT_EQ(d.global_size(), 2000);
    return;
  }
  expect_error<tessel::ValueError>(
      [&] { sim::DistributedParticles d(setup.state, setup.config, dist::world()); },
      {"every rank must pass the same initial state", "2000 to " + std::to_string(2000 + size - 1) + " particles",
       "this rank " + std::to_string(2000 + rank)});
}

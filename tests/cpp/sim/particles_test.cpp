// sim::Particles: physics checks against analytic results and conservation laws, the grid
// search against brute force, CPU/GPU agreement, and the error paths. Each test body runs over
// the cpu and cuda:0 backends (the CUDA case skips without a GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tessel/sim/particles.hpp"
#include "testing.hpp"

namespace tessel {
namespace {

using sim::ParticleState;
using sim::Particles;
using sim::ParticlesConfig;
using testing::expect_error;

class SimTest : public testing::BackendTest {};

constexpr double pi = 3.14159265358979323846;

ParticleState make_state(std::int64_t n) {
  ParticleState s;
  for (auto* v : {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.radius, &s.mass}) v->assign(static_cast<std::size_t>(n), 0.0f);
  return s;
}

// (n, 3) views read back as rows of three.
std::vector<float> host_rows(const Array& view) { return view.to(Device::cpu()).to_vector<float>(); }

ParticlesConfig open_box(double lo, double hi) {
  ParticlesConfig c;
  c.box_lo = {lo, lo, lo};
  c.box_hi = {hi, hi, hi};
  c.walls = false;
  c.periodic = false;
  c.gravity = {0, 0, 0};
  return c;
}

// ---- physics ----

TEST_P(SimTest, HeadOnCollisionMatchesAnalyticRestitution) {
  TESSEL_SKIP_UNAVAILABLE(device());
  for (double zeta : {0.1, 0.3, 0.6}) {
    SCOPED_TRACE("damping ratio " + std::to_string(zeta));
    ParticlesConfig c = open_box(-1.0, 1.0);
    c.stiffness = 1000.0;
    c.damping_ratio = zeta;
    // Unequal masses: the dashpot uses the reduced mass, so e depends on it being right.
    const double m1 = 1e-3, m2 = 3e-3, r1 = 0.01, r2 = 0.015;
    const double m_eff = m1 * m2 / (m1 + m2);
    const double omega = std::sqrt(c.stiffness / m_eff);
    const double contact_time = pi / (omega * std::sqrt(1 - zeta * zeta));
    c.dt = contact_time / 400;
    ParticleState s = make_state(2);
    s.radius = {static_cast<float>(r1), static_cast<float>(r2)};
    s.mass = {static_cast<float>(m1), static_cast<float>(m2)};
    const double v1 = 0.2, v2 = -0.1;
    s.x = {-0.1f, static_cast<float>(-0.1 + r1 + r2 + 1e-4)};
    s.y = {0.05f, 0.05f};
    s.z = {-0.3f, -0.3f};
    s.vx = {static_cast<float>(v1), static_cast<float>(v2)};
    Particles p(s, c, device());
    EXPECT_TRUE(p.warnings().empty());
    const std::int64_t steps = static_cast<std::int64_t>(std::ceil((1e-4 / (v1 - v2) + 1.5 * contact_time) / c.dt));
    std::int64_t max_contacts = 0;
    for (std::int64_t k = 0; k < steps; k += 50) {
      p.step(50);
      max_contacts = std::max(max_contacts, p.diagnostics().contacts);
    }
    EXPECT_EQ(max_contacts, 1);
    const ParticleState out = p.state();  // original order
    const std::vector<float> v{out.vx[0], out.vy[0], out.vz[0], out.vx[1], out.vy[1], out.vz[1]};
    ASSERT_GT(out.x[1] - out.x[0], r1 + r2) << "the particles must have separated";
    const double e = (v[3] - v[0]) / (v1 - v2);
    const double expected = std::exp(-pi * zeta / std::sqrt(1 - zeta * zeta));
    EXPECT_NEAR(e, expected, 0.01 * expected);
    // Head-on: nothing moves off the x axis; momentum is unchanged.
    EXPECT_EQ(v[1], 0.0f);
    EXPECT_EQ(v[2], 0.0f);
    EXPECT_NEAR(m1 * v[0] + m2 * v[3], m1 * v1 + m2 * v2, 1e-6 * (m1 * v1 - m2 * v2));
  }
}

TEST_P(SimTest, MomentumConservedWithoutWallsOrGravity) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c;
  c.box_lo = {-0.5, -0.5, -0.5};  // negative coordinates on purpose
  c.box_hi = {0.5, 0.5, 0.5};
  c.walls = false;
  c.periodic = true;
  c.gravity = {0, 0, 0};
  c.friction = 0.5;
  c.damping_ratio = 0.2;
  c.dt = 1e-4;
  sim::InitOptions o;
  o.n = 2000;
  o.radius = 0.02;
  o.polydispersity = 0.3;
  o.speed = 2.0;
  TESSEL_SEEDED_RNG(rng);
  o.seed = rng();
  Particles p(sim::init_gas(o, c), c, device());
  const sim::Diagnostics d0 = p.diagnostics();
  const std::vector<float> v0 = host_rows(p.velocities());
  const std::vector<float> m = p.masses().to(Device::cpu()).to_vector<float>();
  double scale = 0;  // sum |m v|: the size of the momentum that rounding acts on
  for (std::size_t i = 0; i < m.size(); ++i) {
    scale += m[i] * std::sqrt(double(v0[3 * i]) * v0[3 * i] + double(v0[3 * i + 1]) * v0[3 * i + 1] +
                              double(v0[3 * i + 2]) * v0[3 * i + 2]);
  }
  std::int64_t contacts = 0;
  for (int k = 0; k < 10; ++k) {
    p.step(30);
    const sim::Diagnostics d = p.diagnostics();
    contacts += d.contacts;
    for (int a = 0; a < 3; ++a) EXPECT_NEAR(d.momentum[a], d0.momentum[a], 2e-6 * scale) << "axis " << a;
  }
  EXPECT_GT(contacts, 0) << "the test needs collisions to mean anything";
}

TEST_P(SimTest, DampedEnergyNeverIncreases) {
  TESSEL_SKIP_UNAVAILABLE(device());
  for (auto model : {sim::ContactModel::linear, sim::ContactModel::hertz}) {
    SCOPED_TRACE(model == sim::ContactModel::linear ? "linear" : "hertz");
    ParticlesConfig c;  // a box with walls and gravity
    c.box_hi = {1.0, 1.0, 0.5};
    c.damping_ratio = 0.5;
    c.friction = 0.3;
    c.model = model;
    c.stiffness = model == sim::ContactModel::linear ? 1000.0 : 2e5;
    c.dt = 5e-5;
    sim::InitOptions o;
    o.n = 400;
    o.radius = 0.02;
    o.polydispersity = 0.2;
    Particles p(sim::init_block(o, c), c, device());
    sim::Diagnostics last = p.diagnostics();
    const double e0 = last.total_energy();
    const double scale = std::abs(last.kinetic) + std::abs(last.potential_gravity) + std::abs(last.potential_spring);
    const std::vector<float> m = p.masses().to(Device::cpu()).to_vector<float>();
    double total_mass = 0;
    for (float v : m) total_mass += v;
    // Float32 state: each step rounds every position (to an ulp of the box size) and velocity,
    // so the energy of the rounded state may move by about 2 eps (M |g| L + 2 KE) per step,
    // up or down. Anything above that would be the integrator or the contact law adding energy.
    const double eps = std::numeric_limits<float>::epsilon();
    const int interval = 40;
    std::int64_t contacts = 0;
    for (int k = 0; k < 200; ++k) {
      p.step(interval);
      const sim::Diagnostics d = p.diagnostics();
      contacts += d.contacts + d.wall_contacts;
      const double rounding = interval * 2 * eps * (total_mass * 9.81 * 1.0 + 2 * std::max(d.kinetic, last.kinetic));
      ASSERT_LE(d.total_energy(), last.total_energy() + rounding) << "step " << d.step;
      last = d;
    }
    EXPECT_GT(contacts, 0);
    EXPECT_LT(last.total_energy(), e0 - 1e-3 * scale) << "damping should have dissipated energy";
  }
}

// One large particle overlapping 65537 small ones (which do not touch each other) and the floor:
// more contacts for one particle than a 16-bit count holds. (The counts were once packed as
// pairs + 65536 * walls in one int32: this case then reported 32769 pairs and 2 wall contacts.)
TEST_P(SimTest, ContactCountsPastSixteenBits) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const std::int64_t small = 65537;
  const int reach = 27;  // a lattice ball of radius 27 holds about 82000 points
  std::vector<std::array<int, 3>> points;
  for (int i = -reach; i <= reach; ++i) {
    for (int j = -reach; j <= reach; ++j) {
      for (int k = -reach; k <= reach; ++k) {
        if (i * i + j * j + k * k <= reach * reach && (i | j | k) != 0) points.push_back({i, j, k});
      }
    }
  }
  std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
    return a[0] * a[0] + a[1] * a[1] + a[2] * a[2] < b[0] * b[0] + b[1] * b[1] + b[2] * b[2];
  });
  ASSERT_GE(static_cast<std::int64_t>(points.size()), small);
  const auto& far = points[static_cast<std::size_t>(small - 1)];
  const double rho = std::sqrt(double(far[0] * far[0] + far[1] * far[1] + far[2] * far[2]));
  const double big = rho + 1.0;  // overlaps every small particle (lattice spacing 1, radius 0.4: no small pairs)
  ParticlesConfig c;
  c.box_lo = {-big - 2, -big - 2, -(big - 0.3)};  // the big particle overlaps the floor by 0.3, no small one does
  c.box_hi = {big + 2, big + 2, big + 2};
  c.gravity = {0, 0, 0};
  c.dt = 1e-5;
  ParticleState s = make_state(small + 1);
  s.radius[0] = static_cast<float>(big);
  s.mass[0] = 1e6f;
  for (std::int64_t i = 1; i <= small; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const auto& pt = points[k - 1];
    s.x[k] = static_cast<float>(pt[0]);
    s.y[k] = static_cast<float>(pt[1]);
    s.z[k] = static_cast<float>(pt[2]);
    s.radius[k] = 0.4f;
    s.mass[k] = 1.0f;
  }
  Particles p(s, c, device());
  sim::Diagnostics d = p.diagnostics();
  EXPECT_EQ(d.contacts, small);
  EXPECT_EQ(d.wall_contacts, 1);
}

// ---- grid search ----

struct BruteNeighbors {
  std::vector<std::vector<std::int32_t>> lists;
};

void expect_neighbors_match_brute_force(const Device& device, bool periodic, std::mt19937_64& rng) {
  const std::int64_t n = 5000;
  ParticlesConfig c;
  c.box_lo = {-1.0, -0.7, -0.2};
  c.box_hi = {0.5, 0.3, 0.9};
  c.walls = false;
  c.periodic = periodic;
  ParticleState s = make_state(n);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    s.x[k] = static_cast<float>(c.box_lo[0] + (c.box_hi[0] - c.box_lo[0]) * unit(rng));
    s.y[k] = static_cast<float>(c.box_lo[1] + (c.box_hi[1] - c.box_lo[1]) * unit(rng));
    s.z[k] = static_cast<float>(c.box_lo[2] + (c.box_hi[2] - c.box_lo[2]) * unit(rng));
    s.radius[k] = static_cast<float>(0.005 + 0.03 * unit(rng) * unit(rng));  // mixed sizes, most small
    s.mass[k] = 1.0f;
  }
  Particles p(s, c, device);
  const sim::NeighborList list = p.neighbor_list();
  ASSERT_EQ(list.offsets.size(), static_cast<std::size_t>(n + 1));
  std::int64_t total = 0, borderline = 0;
  const double length[3] = {c.box_hi[0] - c.box_lo[0], c.box_hi[1] - c.box_lo[1], c.box_hi[2] - c.box_lo[2]};
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> expected, got(list.indices.begin() + list.offsets[static_cast<std::size_t>(i)],
                                            list.indices.begin() + list.offsets[static_cast<std::size_t>(i + 1)]);
    std::vector<double> gap(static_cast<std::size_t>(n));  // distance - (r_i + r_j), in double
    for (std::int64_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
      double d[3] = {double(s.x[b]) - s.x[a], double(s.y[b]) - s.y[a], double(s.z[b]) - s.z[a]};
      if (periodic) {
        for (int ax = 0; ax < 3; ++ax) d[ax] -= length[ax] * std::nearbyint(d[ax] / length[ax]);
      }
      const double dist = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      gap[b] = dist - (double(s.radius[a]) + s.radius[b]);
      if (gap[b] < 0) expected.push_back(static_cast<std::int32_t>(j));
    }
    std::sort(got.begin(), got.end());
    ASSERT_TRUE(std::adjacent_find(got.begin(), got.end()) == got.end()) << "particle " << i << " lists a neighbor twice";
    total += static_cast<std::int64_t>(expected.size());
    std::vector<std::int32_t> diff;
    std::set_symmetric_difference(got.begin(), got.end(), expected.begin(), expected.end(), std::back_inserter(diff));
    for (std::int32_t j : diff) {
      // Only pairs touching to float32 rounding may differ.
      EXPECT_LT(std::abs(gap[static_cast<std::size_t>(j)]), 1e-6) << "particle " << i << " and " << j;
      ++borderline;
    }
  }
  EXPECT_GT(total, n / 10) << "the random set should have many contacts";
  EXPECT_LE(borderline, 2);
}

TEST_P(SimTest, NeighborSearchEqualsBruteForce) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  {
    SCOPED_TRACE("open box");
    expect_neighbors_match_brute_force(device(), false, rng);
  }
  {
    SCOPED_TRACE("periodic box");
    expect_neighbors_match_brute_force(device(), true, rng);
  }
}

// Steps are deterministic (no atomics), and the neighbor list leaves the trajectory alone.
TEST_P(SimTest, NeighborListDoesNotPerturbTheRun) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c;
  c.friction = 0.2;
  sim::InitOptions o;
  o.n = 1500;
  o.radius = 0.02;
  o.speed = 0.5;
  const ParticleState s = sim::init_gas(o, c);
  Particles a(s, c, device()), b(s, c, device());
  a.step(20);
  b.step(20);
  EXPECT_GT(b.neighbor_list().indices.size(), 0u);
  a.step(20);
  b.step(20);
  const ParticleState sa = a.state(), sb = b.state();
  EXPECT_EQ(sa.x, sb.x);
  EXPECT_EQ(sa.vz, sb.vz);
}

// Particles outside the grid are clamped into the border cells and still found.
TEST_P(SimTest, NeighborSearchWithParticlesOnTheBoxFaces) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c = open_box(-0.3, 0.3);
  ParticleState s = make_state(4);
  s.radius = {0.05f, 0.05f, 0.05f, 0.05f};
  s.mass = {1, 1, 1, 1};
  s.x = {-0.3f, -0.25f, 0.3f, 0.29f};  // pairs on the low and the high face
  s.y = {-0.3f, -0.3f, 0.3f, 0.3f};
  s.z = {0.0f, 0.0f, 0.3f, 0.3f};
  Particles p(s, c, device());
  const sim::NeighborList list = p.neighbor_list();
  const std::vector<std::int64_t> offsets{0, 1, 2, 3, 4};
  EXPECT_EQ(list.offsets, offsets);
  const std::vector<std::int32_t> indices{1, 0, 3, 2};
  EXPECT_EQ(list.indices, indices);
}

// ---- boundaries ----

TEST_P(SimTest, LeavingTheBoxWrapsWhenPeriodic) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c = open_box(-0.5, 0.5);
  c.periodic = true;
  c.dt = 1e-3;
  ParticleState s = make_state(1);
  s.radius = {0.01f};
  s.mass = {1e-3f};
  s.x = {0.45f};
  s.y = {-0.45f};
  s.vx = {1.0f};
  s.vy = {-1.0f};
  Particles p(s, c, device());
  p.step(100);  // 0.1 s at 1 m/s: crosses the +x and the -y face
  p.diagnostics();
  const std::vector<float> x = host_rows(p.positions());
  EXPECT_NEAR(x[0], 0.45 + 0.1 - 1.0, 1e-5);
  EXPECT_NEAR(x[1], -0.45 - 0.1 + 1.0, 1e-5);
  EXPECT_EQ(x[2], 0.0f);
}

TEST_P(SimTest, LeavingTheBoxWithoutWallsIsAnError) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c = open_box(0.0, 1.0);
  c.dt = 1e-3;
  ParticleState s = make_state(4);
  for (int i = 0; i < 4; ++i) {
    s.x[static_cast<std::size_t>(i)] = 0.2f + 0.2f * static_cast<float>(i);
    s.y[static_cast<std::size_t>(i)] = s.z[static_cast<std::size_t>(i)] = 0.5f;
    s.radius[static_cast<std::size_t>(i)] = 0.01f;
    s.mass[static_cast<std::size_t>(i)] = 1e-3f;
  }
  s.vz[2] = 2.0f;  // leaves through the top after 0.25 s
  Particles p(s, c, device());
  p.step(100);
  EXPECT_NO_THROW(p.diagnostics());
  p.step(200);
  expect_error<ValueError>([&] { p.diagnostics(); }, {"sim::Particles", "particle 2 left the box", "position (0.6, 0.5,",
                                                      "walls are off"});
}

TEST_P(SimTest, WallsKeepParticlesInside) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c;  // walls and gravity
  c.damping_ratio = 0.2;
  sim::InitOptions o;
  o.n = 300;
  o.radius = 0.02;
  o.speed = 1.0;
  Particles p(sim::init_gas(o, c), c, device());
  p.step(2000);
  const sim::Diagnostics d = p.diagnostics();
  EXPECT_GT(d.wall_contacts, 0);  // resting on the floor
  const std::vector<float> x = host_rows(p.positions());
  for (float v : x) {
    EXPECT_GE(v, -0.005f);
    EXPECT_LE(v, 1.005f);
  }
}

// ---- CPU vs GPU ----

// Largest differences between two runs of the same particles, in the original order: positions
// (minimum image when periodic: the backends may wrap a particle on the face differently) and
// velocities relative to the largest speed component of `a`.
struct TrajectoryError {
  double position = 0, velocity = 0;
  std::int64_t worst_particle = -1;
};
TrajectoryError trajectory_error(const ParticleState& a, const ParticleState& b, const ParticlesConfig& c) {
  TrajectoryError e;
  double vmax = 0;
  for (const auto* v : {&a.vx, &a.vy, &a.vz}) {
    for (float x : *v) vmax = std::max(vmax, double(std::abs(x)));
  }
  for (std::size_t i = 0; i < a.x.size(); ++i) {
    const float pa[3] = {a.x[i], a.y[i], a.z[i]}, pb[3] = {b.x[i], b.y[i], b.z[i]};
    const float va[3] = {a.vx[i], a.vy[i], a.vz[i]}, vb[3] = {b.vx[i], b.vy[i], b.vz[i]};
    for (int k = 0; k < 3; ++k) {
      double d = double(pb[k]) - pa[k];
      if (c.periodic) {
        const double length = c.box_hi[static_cast<std::size_t>(k)] - c.box_lo[static_cast<std::size_t>(k)];
        d -= length * std::nearbyint(d / length);
      }
      const double dv = std::abs(double(vb[k]) - va[k]) / vmax;
      if (std::abs(d) > e.position || dv > e.velocity) e.worst_particle = static_cast<std::int64_t>(i);
      e.position = std::max(e.position, std::abs(d));
      e.velocity = std::max(e.velocity, dv);
    }
  }
  return e;
}

// What "agree" means after 100 steps (SimTrajectoryCheck shows these bounds accept rounding-level
// differences and reject bug-sized ones).
constexpr double position_tolerance = 2e-5;  // m (particles move ~5e-3 m; radii ~0.02 m)
constexpr double velocity_tolerance = 2e-3;  // of the largest speed component
constexpr std::int64_t trajectory_steps = 100;

// No normal dashpot in either scenario: every force is then continuous at contact onset, so a
// pair that one backend finds in contact a step earlier (rounding) changes the trajectory only by
// rounding. Friction is on (Coulomb-limited, continuous at onset since it scales with |fn|).
struct TrajectoryScenario {
  std::string name;
  ParticlesConfig config;
  ParticleState state;
};
std::vector<TrajectoryScenario> trajectory_scenarios(std::uint64_t seed) {
  std::vector<TrajectoryScenario> out;
  {
    ParticlesConfig c;  // walls, gravity, linear contacts
    c.damping_ratio = 0.0;
    c.friction = 0.3;
    c.tangential_damping = 2.0;
    c.dt = 1e-4;
    sim::InitOptions o;
    o.n = 3000;
    o.radius = 0.02;
    o.polydispersity = 0.3;
    o.speed = 0.5;
    o.seed = seed;
    out.push_back({"walls, gravity, linear", c, sim::init_gas(o, c)});
  }
  {
    ParticlesConfig c;  // periodic, no gravity, Hertz contacts, negative coordinates
    c.box_lo = {-0.5, -0.5, -0.5};
    c.box_hi = {0.5, 0.5, 0.5};
    c.walls = false;
    c.periodic = true;
    c.gravity = {0, 0, 0};
    c.model = sim::ContactModel::hertz;
    c.stiffness = 2e5;
    c.damping_ratio = 0.0;
    c.friction = 0.5;
    c.tangential_damping = 2.0;  // (0 would take the normal dashpot's, which is off here)
    c.dt = 1e-4;
    sim::InitOptions o;
    o.n = 3000;
    o.radius = 0.02;
    o.polydispersity = 0.3;
    o.speed = 1.0;
    o.seed = seed + 1;
    out.push_back({"periodic, hertz", c, sim::init_gas(o, c)});
  }
  return out;
}

ParticleState run_for(const ParticleState& s, const ParticlesConfig& c, const Device& device, std::int64_t steps,
                      sim::Diagnostics* diagnostics = nullptr) {
  Particles p(s, c, device);
  p.step(steps);
  if (diagnostics != nullptr) *diagnostics = p.diagnostics();
  return p.state();
}

// The diagnostics of the two runs agree as the CPU/GPU test requires.
void expect_diagnostics_agree(const sim::Diagnostics& a, const sim::Diagnostics& b) {
  EXPECT_NEAR(static_cast<double>(a.contacts), static_cast<double>(b.contacts), 2.0);  // threshold pairs may differ
  EXPECT_EQ(a.wall_contacts, b.wall_contacts);
  EXPECT_NEAR(a.kinetic, b.kinetic, 1e-5 * a.kinetic);
  EXPECT_NEAR(a.potential_spring, b.potential_spring, 1e-4 * a.potential_spring + 1e-12);
}

TEST(SimCrossBackend, CpuAndGpuTrajectoriesAgree) {
  TESSEL_SKIP_UNAVAILABLE(testing::test_gpu());
  TESSEL_SEEDED_RNG(rng);
  for (const TrajectoryScenario& sc : trajectory_scenarios(rng())) {
    SCOPED_TRACE(sc.name);
    Particles cpu(sc.state, sc.config, Device::cpu());
    Particles gpu(sc.state, sc.config, testing::test_gpu());
    cpu.step(trajectory_steps);
    gpu.step(trajectory_steps);
    const TrajectoryError e = trajectory_error(cpu.state(), gpu.state(), sc.config);
    EXPECT_LE(e.position, position_tolerance) << "particle " << e.worst_particle;
    EXPECT_LE(e.velocity, velocity_tolerance) << "particle " << e.worst_particle;
    const sim::Diagnostics dc = cpu.diagnostics(), dg = gpu.diagnostics();
    EXPECT_GT(dc.contacts, 100) << "the comparison needs contacts to mean anything";
    expect_diagnostics_agree(dc, dg);
  }
}

// The CPU/GPU tolerances above, checked on the CPU: a 1-ulp change of every initial position (the
// size of what FMA contraction on the GPU does; measured over 10 seeds: <= 4e-6 m, <= 1.3e-5 of
// vmax, kinetic and spring energy within 1e-6 after 100 steps) stays inside them with a margin of
// 2, and runs that differ the way a real bug would (a step lost, no friction, 5% weaker springs,
// gravity ignored, a wrong periodic image; measured: >= 5e-4 m and >= 1e-2 of vmax) fall outside
// them by a margin of 3.
TEST(SimTrajectoryCheck, TolerancesAcceptRoundingAndRejectBugs) {
  TESSEL_SEEDED_RNG(rng);
  const Device cpu = Device::cpu();
  for (const TrajectoryScenario& sc : trajectory_scenarios(rng())) {
    SCOPED_TRACE(sc.name);
    sim::Diagnostics d_reference;
    const ParticleState reference = run_for(sc.state, sc.config, cpu, trajectory_steps, &d_reference);
    EXPECT_GT(d_reference.contacts, 100);
    {
      ParticleState nudged = sc.state;
      for (auto* v : {&nudged.x, &nudged.y, &nudged.z}) {
        for (float& x : *v) x = std::nextafter(x, 2.0f);
      }
      sim::Diagnostics d_nudged;
      const TrajectoryError e =
          trajectory_error(reference, run_for(nudged, sc.config, cpu, trajectory_steps, &d_nudged), sc.config);
      std::printf("  %s / 1-ulp nudge: position error %.3g, velocity error %.3g; kinetic %.3g, spring %.3g (relative)\n",
                  sc.name.c_str(), e.position, e.velocity, std::abs(d_nudged.kinetic / d_reference.kinetic - 1),
                  std::abs(d_nudged.potential_spring / d_reference.potential_spring - 1));
      expect_diagnostics_agree(d_reference, d_nudged);
      EXPECT_GT(e.position, 0.0) << "the nudge must reach the trajectory";
      EXPECT_LE(e.position, 0.5 * position_tolerance) << "rounding-sized changes must stay well inside";
      EXPECT_LE(e.velocity, 0.5 * velocity_tolerance);
    }
    auto expect_caught = [&](const std::string& bug, const ParticleState& s, const ParticlesConfig& c, std::int64_t steps) {
      const TrajectoryError e = trajectory_error(reference, run_for(s, c, cpu, steps), sc.config);
      std::printf("  %s / %s: position error %.3g, velocity error %.3g\n", sc.name.c_str(), bug.c_str(), e.position, e.velocity);
      EXPECT_TRUE(e.position > 3 * position_tolerance || e.velocity > 3 * velocity_tolerance)
          << bug << ": position error " << e.position << ", velocity error " << e.velocity;
    };
    expect_caught("one step lost", sc.state, sc.config, trajectory_steps - 1);
    ParticlesConfig c = sc.config;
    c.friction = 0.0;
    expect_caught("friction ignored", sc.state, c, trajectory_steps);
    c = sc.config;
    c.stiffness *= 0.95;
    expect_caught("springs 5% weak", sc.state, c, trajectory_steps);
    if (!sc.config.periodic) {
      c = sc.config;
      c.gravity = {0, 0, 0};
      expect_caught("gravity ignored", sc.state, c, trajectory_steps);
    } else {
      // A wrong image: contacts across the faces are lost (an open box instead of a periodic one).
      ParticlesConfig open = sc.config;
      open.periodic = false;
      open.walls = false;
      // Same particles; wrapping is not compared (min image), so only lost cross-face contacts count.
      const TrajectoryError e = trajectory_error(reference, run_for(sc.state, open, cpu, trajectory_steps), sc.config);
      std::printf("  %s / open instead of periodic: position error %.3g, velocity error %.3g\n", sc.name.c_str(),
                  e.position, e.velocity);
      EXPECT_TRUE(e.position > 3 * position_tolerance || e.velocity > 3 * velocity_tolerance)
          << "open instead of periodic: position error " << e.position << ", velocity error " << e.velocity;
    }
  }
}

// The smallest run that still launches every kernel of the CUDA backend (kick_drift_key, the CUB
// sort, gather_ranges, forces_kernel, diagnostics_kernel, write_back_kernel, neighbor_counts_kernel,
// neighbor_fill_kernel): the compute-sanitizer racecheck/synccheck target. Checked against the CPU.
TEST(SimCrossBackend, SmallRunEveryKernel) {
  TESSEL_SKIP_UNAVAILABLE(testing::test_gpu());
  ParticlesConfig c;  // walls, gravity, friction
  c.friction = 0.3;
  c.damping_ratio = 0.0;
  sim::InitOptions o;
  o.n = 600;
  o.radius = 0.04;
  o.polydispersity = 0.3;
  o.speed = 0.5;
  o.seed = 8;
  const ParticleState s = sim::init_gas(o, c);
  Particles cpu(s, c, Device::cpu()), gpu(s, c, testing::test_gpu());
  cpu.step(5);
  gpu.step(5);
  const sim::Diagnostics dc = cpu.diagnostics(), dg = gpu.diagnostics();
  EXPECT_GT(dc.contacts, 10);
  EXPECT_NEAR(static_cast<double>(dc.contacts), static_cast<double>(dg.contacts), 1.0);  // a pair touching to rounding
  EXPECT_EQ(dc.wall_contacts, dg.wall_contacts);
  EXPECT_NEAR(dc.kinetic, dg.kinetic, 1e-5 * dc.kinetic);
  const sim::NeighborList lc = cpu.neighbor_list(), lg = gpu.neighbor_list();
  ASSERT_EQ(lc.offsets.size(), lg.offsets.size());
  std::size_t differences = 0;
  for (std::size_t i = 0; i + 1 < lc.offsets.size(); ++i) {
    std::vector<std::int32_t> a(lc.indices.begin() + lc.offsets[i], lc.indices.begin() + lc.offsets[i + 1]);
    std::vector<std::int32_t> b(lg.indices.begin() + lg.offsets[i], lg.indices.begin() + lg.offsets[i + 1]);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::vector<std::int32_t> diff;
    std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(diff));
    differences += diff.size();
  }
  EXPECT_LE(differences, 2u) << "only one pair touching to rounding may differ";
  const TrajectoryError e = trajectory_error(cpu.state(), gpu.state(), c);
  EXPECT_LE(e.position, 1e-6);
  EXPECT_LE(e.velocity, 1e-4);
}

// ---- views ----

TEST_P(SimTest, ViewsAreTheLiveState) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c = open_box(0.0, 1.0);
  ParticleState s = make_state(3);
  s.x = {0.1f, 0.5f, 0.9f};
  s.y = {0.2f, 0.5f, 0.8f};
  s.z = {0.3f, 0.5f, 0.7f};
  s.radius = {0.01f, 0.02f, 0.03f};
  s.mass = {1.0f, 2.0f, 3.0f};
  s.vx = {0.1f, 0.0f, 0.0f};
  Particles p(s, c, device());
  const Array pos = p.positions();
  EXPECT_EQ(pos.shape(), (Shape{3, 3}));
  EXPECT_EQ(pos.strides(), (Strides{1, 3}));
  EXPECT_EQ(pos.dtype(), DType::float32);
  EXPECT_EQ(pos.device(), device());
  EXPECT_EQ(p.ids().dtype(), DType::int32);
  // Rows are in cell order; ids() names the particle of each row.
  const std::vector<std::int32_t> ids = p.ids().to(Device::cpu()).to_vector<std::int32_t>();
  const std::vector<float> rows = host_rows(pos), radii = p.radii().to(Device::cpu()).to_vector<float>();
  std::vector<bool> seen(3, false);
  for (std::size_t k = 0; k < 3; ++k) {
    const auto i = static_cast<std::size_t>(ids[k]);
    ASSERT_LT(i, 3u);
    seen[i] = true;
    EXPECT_EQ(rows[3 * k], s.x[i]);
    EXPECT_EQ(rows[3 * k + 1], s.y[i]);
    EXPECT_EQ(rows[3 * k + 2], s.z[i]);
    EXPECT_EQ(radii[k], s.radius[i]);
  }
  EXPECT_TRUE(seen[0] && seen[1] && seen[2]);
  EXPECT_EQ(p.state().x, s.x);
  // A write through the view is seen by the next step.
  const auto row = static_cast<std::int64_t>(std::find(ids.begin(), ids.end(), 1) - ids.begin());
  fill(p.velocities().index({row, 1}), Scalar(0.5));
  p.step(10);
  const ParticleState after = p.state();
  EXPECT_NEAR(after.y[1], 0.5 + 10 * c.dt * 0.5, 1e-6);
  EXPECT_NEAR(after.x[0], 0.1 + 10 * c.dt * 0.1, 1e-6);
}

// ---- bad input ----

TEST_P(SimTest, BadInputIsRejected) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c;
  auto good = [] {
    ParticleState s = make_state(3);
    s.x = s.y = s.z = {0.2f, 0.5f, 0.8f};
    s.radius = {0.01f, 0.01f, 0.01f};
    s.mass = {1e-3f, 1e-3f, 1e-3f};
    return s;
  };
  {
    ParticleState s = good();
    s.radius[1] = 0.0f;
    expect_error<ValueError>([&] { Particles(s, c, device()); }, {"radius must be positive", "particle 1"});
    s.radius[1] = -0.01f;
    expect_error<ValueError>([&] { Particles(s, c, device()); }, {"radius must be positive", "particle 1"});
  }
  {
    ParticleState s = good();
    s.mass[2] = -1.0f;
    expect_error<ValueError>([&] { Particles(s, c, device()); }, {"mass must be positive", "particle 2"});
  }
  for (double dt : {0.0, -1e-4, std::numeric_limits<double>::quiet_NaN()}) {
    ParticlesConfig bad = c;
    bad.dt = dt;
    expect_error<ValueError>([&] { Particles(good(), bad, device()); }, {"time step must be positive"});
  }
  {
    ParticleState s = good();
    s.y[2] = std::numeric_limits<float>::quiet_NaN();
    expect_error<ValueError>([&] { Particles(s, c, device()); }, {"particle 2", "non-finite position", "nan"});
  }
  {
    ParticleState s = good();
    s.mass.pop_back();
    expect_error<ShapeError>([&] { Particles(s, c, device()); }, {"mass has 2", "x has 3"});
  }
  {
    ParticlesConfig bad = c;
    bad.periodic = true;
    expect_error<ValueError>([&] { Particles(good(), bad, device()); }, {"periodic", "walls = false"});
    bad.walls = false;
    ParticleState s = good();
    s.radius = {0.2f, 0.2f, 0.2f};
    expect_error<ValueError>([&] { Particles(s, bad, device()); }, {"periodic box needs at least 3 cells"});
  }
  {
    ParticleState s = good();
    s.x[0] = 1.5f;
    expect_error<ValueError>([&] { Particles(s, c, device()); }, {"particle 0", "outside the box"});
  }
  expect_error<ValueError>([&] { Particles(make_state(0), c, device()); }, {"at least one particle"});
}

TEST_P(SimTest, TooLargeTimeStepWarnsWithTheStableLimit) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c;
  c.stiffness = 1e6;
  c.dt = 1e-3;
  ParticleState s = make_state(2);
  s.x = s.y = s.z = {0.2f, 0.7f};
  s.radius = {0.01f, 0.01f};
  s.mass = {1e-3f, 1e-3f};
  Particles p(s, c, device());
  // m_eff = 5e-4, omega = sqrt(1e6 / 5e-4), dt_crit = 2 / omega * (sqrt(1 + 0.09) - 0.3).
  const double expected = 2.0 / std::sqrt(1e6 / 5e-4) * (std::sqrt(1.09) - 0.3);
  EXPECT_NEAR(p.stable_dt(), expected, 1e-6 * expected);  // masses are float32
  ASSERT_EQ(p.warnings().size(), 1u);
  const std::string& w = p.warnings()[0];
  EXPECT_NE(w.find("too large for the contact stiffness"), std::string::npos) << w;
  EXPECT_NE(w.find("stable limit is dt_crit = "), std::string::npos) << w;
  EXPECT_NE(w.find("unstable"), std::string::npos) << w;
  c.dt = expected / 10;
  EXPECT_TRUE(Particles(s, c, device()).warnings().empty());
}

TEST_P(SimTest, NonFinitePositionDuringTheRunIsAnError) {
  TESSEL_SKIP_UNAVAILABLE(device());
  ParticlesConfig c;
  sim::InitOptions o;
  o.n = 50;
  o.radius = 0.02;
  Particles p(sim::init_gas(o, c), c, device());
  p.step(5);
  const std::int32_t particle = p.ids().to(Device::cpu()).to_vector<std::int32_t>()[7];
  fill(p.positions().index({7, 2}), Scalar(std::numeric_limits<double>::quiet_NaN()));
  p.step(1);
  expect_error<ValueError>([&] { p.diagnostics(); },
                           {"particle " + std::to_string(particle) + " ", "non-finite state", "stable limit"});
}

TEST_P(SimTest, MoreParticlesThanFitInMemoryIsOutOfMemory) {
  TESSEL_SKIP_UNAVAILABLE(device());
  expect_error<OutOfMemory>([&] { Particles::check_memory(std::int64_t{1} << 40, 1000, device()); },
                            {"sim::Particles", "1099511627776 particles need", device().str(), "available"});
  EXPECT_NO_THROW(Particles::check_memory(1000, 1000, device()));
}

TEST(SimOutput, UnwritableOutputDirectoryIsAnError) {
  const std::string file = (std::filesystem::temp_directory_path() / ("tessel_sim_test_" + std::to_string(::getpid()))).string();
  std::ofstream(file) << "x";
  expect_error<ValueError>([&] { sim::prepare_output_directory(file + "/frames"); },
                           {"cannot create the output directory", file + "/frames"});
  expect_error<ValueError>([&] { sim::prepare_output_directory(file); }, {"cannot create the output directory"});
  std::remove(file.c_str());
  const std::string dir = file + "_dir/a/b";
  EXPECT_NO_THROW(sim::prepare_output_directory(dir));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  std::filesystem::remove_all(file + "_dir");
}

TEST(SimInit, InitialStatesAreInsideTheBoxAndSized) {
  ParticlesConfig c;
  sim::InitOptions o;
  o.n = 1001;
  o.radius = 0.01;
  o.polydispersity = 0.2;
  for (auto make : {sim::init_gas, sim::init_block, sim::init_collision}) {
    const ParticleState s = make(o, c);
    ASSERT_EQ(s.size(), o.n);
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      for (float v : {s.x[i], s.y[i], s.z[i]}) {
        ASSERT_GE(v, 0.0f);
        ASSERT_LE(v, 1.0f);
      }
      ASSERT_GE(s.radius[i], 0.008f - 1e-6f);
      ASSERT_LE(s.radius[i], 0.012f + 1e-6f);
      ASSERT_NEAR(s.mass[i], 1000.0 * 4.0 / 3.0 * pi * std::pow(s.radius[i], 3), 1e-6 * s.mass[i]);
    }
  }
  o.n = 100000000;
  expect_error<ValueError>([&] { sim::init_block(o, c); }, {"does not fit"});
  o.n = std::int64_t{1} << 50;
  expect_error<OutOfMemory>([&] { sim::init_gas(o, c); }, {"sim::init_gas", "1125899906842624 particles", "host memory"});
}

INSTANTIATE_TEST_SUITE_P(All, SimTest, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

}  // namespace
}  // namespace tessel

// sim::DistributedParticles: slab decomposition, migration, halo exchange and reduced diagnostics
// around sim::Particles' force pass (include/tessel/sim/distributed.hpp says how a step goes).
#include "tessel/sim/distributed.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "backend/particles.hpp"
#include "backend/particles_physics.hpp"
#include "tessel/core/error.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::sim {
namespace {

constexpr const char* op = "sim::DistributedParticles";

// A particle on the wire: its id, then x y z vx vy vz ax ay az radius mass as float bits (one
// int32 message carries everything, so ids stay exact).
constexpr std::size_t kWords = 12;

std::int32_t float_bits(float v) {
  std::int32_t w;
  std::memcpy(&w, &v, sizeof w);
  return w;
}
float bits_float(std::int32_t w) {
  float v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}

// Grouped point-to-point exchange of int32 records: sends[k] goes to its peer, and one message is
// received from each of recv_peers, in that order (MPI and NCCL match messages between a pair of
// ranks in the order they were posted, so a peer that appears twice is fine). Counts go first,
// then the payloads that are not empty. Returns the received records, concatenated.
std::vector<std::int32_t> exchange(const dist::Communicator& comm,
                                   const std::vector<std::pair<int, std::vector<std::int32_t>>>& sends,
                                   const std::vector<int>& recv_peers) {
  const Device device = comm.device();
  std::vector<Array> count_out, count_in;
  {
    dist::Group group;
    for (const auto& [peer, data] : sends) {
      const std::int64_t count = static_cast<std::int64_t>(data.size());
      count_out.push_back(from_host(&count, {1}, DType::int64, device));
      comm.send(count_out.back(), peer);
    }
    for (int peer : recv_peers) {
      count_in.push_back(zeros({1}, DType::int64, device));
      comm.recv(count_in.back(), peer);
    }
  }
  std::vector<std::int64_t> counts;
  std::int64_t total = 0;
  for (const Array& c : count_in) {
    counts.push_back(c.to(Device::cpu()).item<std::int64_t>());
    total += counts.back();
  }
  std::vector<Array> payload_out, payload_in;
  {
    dist::Group group;
    for (const auto& [peer, data] : sends) {
      if (data.empty()) continue;
      payload_out.push_back(
          from_host(data.data(), {static_cast<std::int64_t>(data.size())}, DType::int32, device));
      comm.send(payload_out.back(), peer);
    }
    for (std::size_t k = 0; k < recv_peers.size(); ++k) {
      if (counts[k] == 0) {
        payload_in.emplace_back();
        continue;
      }
      payload_in.push_back(empty({counts[k]}, DType::int32, device));
      comm.recv(payload_in.back(), recv_peers[k]);
    }
  }
  std::vector<std::int32_t> received;
  received.reserve(static_cast<std::size_t>(total));
  for (std::size_t k = 0; k < recv_peers.size(); ++k) {
    if (counts[k] == 0) continue;
    const std::vector<std::int32_t> part = payload_in[k].to(Device::cpu()).to_vector<std::int32_t>();
    received.insert(received.end(), part.begin(), part.end());
  }
  return received;
}

}  // namespace

double DistributedDiagnostics::imbalance() const {
  if (rank_counts.empty()) return 1.0;
  const double total = static_cast<double>(std::accumulate(rank_counts.begin(), rank_counts.end(), std::int64_t{0}));
  if (total == 0) return 1.0;
  const double largest = static_cast<double>(*std::max_element(rank_counts.begin(), rank_counts.end()));
  return largest / (total / static_cast<double>(rank_counts.size()));
}

std::int64_t DistributedParticles::max_ranks(const ParticlesConfig& config, double cutoff, int axis) {
  const double length = config.box_hi[axis] - config.box_lo[axis];
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(length / cutoff)));
}

DistributedParticles::DistributedParticles(const ParticleState& state, const ParticlesConfig& config,
                                           dist::Communicator comm, const DistributedOptions& options)
    : comm_(std::move(comm)), config_(config), options_(options), n_global_(state.size()) {
  TESSEL_RANGE("sim::DistributedParticles");
  if (!comm_.defined()) throw ValueError(fmt::format("{}: the communicator is undefined", op));
  if (options.axis < 0 || options.axis > 2) {
    throw ValueError(fmt::format("{}: axis must be 0, 1 or 2, got {}", op, options.axis));
  }
  if (options.rebalance_every < 0) {
    throw ValueError(fmt::format("{}: rebalance_every must be >= 0, got {}", op, options.rebalance_every));
  }
  const std::size_t size0 = state.x.size();
  bool consistent = size0 > 0;
  for (const auto* f : {&state.y, &state.z, &state.vx, &state.vy, &state.vz, &state.radius, &state.mass}) {
    consistent = consistent && f->size() == size0;
  }
  if (!consistent) {
    // sim::Particles names the problem exactly.
    Particles check(state, config, Device::cpu());
  }
  // Every rank must pass the same state: compare the sizes (one small all_reduce of n and -n).
  {
    const std::int64_t mine[2] = {n_global_, -n_global_};
    Array sizes = from_host(mine, {2}, DType::int64, comm_.device());
    comm_.all_reduce(sizes, dist::ReduceOp::max);
    const std::vector<std::int64_t> extremes = sizes.to(Device::cpu()).to_vector<std::int64_t>();
    if (extremes[0] != -extremes[1]) {
      throw ValueError(fmt::format("{}: every rank must pass the same initial state, but the ranks passed {} to {} "
                                   "particles (this rank {})",
                                   op, -extremes[1], extremes[0], n_global_));
    }
  }
  const float r_max = *std::max_element(state.radius.begin(), state.radius.end());
  cutoff_ = 2.0 * static_cast<double>(r_max);
  // Every rank searches the same global grid as the single-process run would.
  if (config_.cell_size <= 0) config_.cell_size = cutoff_;

  const int size = comm_.size();
  const int axis = options.axis;
  const double lo = config.box_lo[axis], length = config.box_hi[axis] - lo;
  const double width = length / size;
  // A particle within the cutoff of a slab must lie in a neighbouring slab (ghosts come only from
  // the two neighbours): slabs at least as wide as the cutoff.
  if (size > 1 && !(width >= cutoff_)) {
    throw ValueError(fmt::format(
        "{}: {} ranks cut axis {} of the box (length {:g}) into slabs of width {:g}, thinner than the interaction "
        "cutoff {:g} (twice the largest radius): use at most {} ranks for this box, or a larger box",
        op, size, axis, length, width, cutoff_, max_ranks(config, cutoff_, axis)));
  }
  bounds_.resize(static_cast<std::size_t>(size) + 1);
  for (int r = 0; r <= size; ++r) bounds_[static_cast<std::size_t>(r)] = lo + length * r / size;
  bounds_.back() = config.box_hi[axis];

  // Keep the owned particles (positions wrapped into a periodic box as sim::Particles does).
  const int me = comm_.rank();
  for (std::int64_t i = 0; i < state.size(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    float p[3] = {state.x[k], state.y[k], state.z[k]};
    if (config.periodic) {
      for (int a = 0; a < 3; ++a) {
        const double alo = config.box_lo[a], alen = config.box_hi[a] - alo;
        double w = p[a] - alen * std::floor((p[a] - alo) / alen);
        if (w >= alo + alen) w -= alen;
        p[a] = static_cast<float>(std::max(w, alo));
      }
    }
    if (owner_of(p[axis]) != me) continue;
    id_.push_back(static_cast<std::int32_t>(i));
    for (int a = 0; a < 3; ++a) {
      x_[a].push_back(p[a]);
      a_[a].push_back(0.0f);
    }
    v_[0].push_back(state.vx[k]);
    v_[1].push_back(state.vy[k]);
    v_[2].push_back(state.vz[k]);
    radius_.push_back(state.radius[k]);
    mass_.push_back(state.mass[k]);
  }
  compute_forces(false);
}

void DistributedParticles::pack(std::vector<std::int32_t>& out, std::size_t k) const {
  out.push_back(id_[k]);
  for (int a = 0; a < 3; ++a) out.push_back(float_bits(x_[a][k]));
  for (int a = 0; a < 3; ++a) out.push_back(float_bits(v_[a][k]));
  for (int a = 0; a < 3; ++a) out.push_back(float_bits(a_[a][k]));
  out.push_back(float_bits(radius_[k]));
  out.push_back(float_bits(mass_[k]));
}

int DistributedParticles::owner_of(float coordinate) const {
  // Soft walls let particles sit slightly outside the box: the end slabs own what is beyond them.
  const auto it = std::upper_bound(bounds_.begin() + 1, bounds_.end() - 1, static_cast<double>(coordinate));
  return static_cast<int>(it - (bounds_.begin() + 1));
}

// The halo exchange and sim::Particles' force pass on owned + ghost particles; the owned
// particles keep the new accelerations, contact counts and spring energies, and with finish_kick
// the second half kick.
void DistributedParticles::compute_forces(bool finish_kick) {
  const int size = comm_.size(), me = comm_.rank(), axis = options_.axis;
  const std::size_t n_owned = id_.size();
  std::vector<std::int32_t> ghosts;
  if (size > 1) {
    const bool periodic = config_.periodic;
    const int left = me > 0 ? me - 1 : (periodic ? size - 1 : -1);
    const int right = me < size - 1 ? me + 1 : (periodic ? 0 : -1);
    const double low = bounds_[static_cast<std::size_t>(me)], high = bounds_[static_cast<std::size_t>(me) + 1];
    std::vector<std::int32_t> to_left, to_right;
    for (std::size_t k = 0; k < n_owned; ++k) {
      const double c = x_[axis][k];
      if (left >= 0 && c < low + cutoff_) pack(to_left, k);
      if (right >= 0 && c >= high - cutoff_) pack(to_right, k);
    }
    std::vector<std::pair<int, std::vector<std::int32_t>>> sends;
    std::vector<int> recvs;
    if (left >= 0) sends.emplace_back(left, std::move(to_left));
    if (right >= 0) sends.emplace_back(right, std::move(to_right));
    // What the right neighbour sent to its left comes first, then what the left one sent right.
    if (right >= 0) recvs.push_back(right);
    if (left >= 0) recvs.push_back(left);
    ghosts = exchange(comm_, sends, recvs);
    // With two ranks in a periodic box both neighbours are the same rank, and a particle near
    // both of its faces arrives twice: keep one copy.
    if (left == right && left >= 0) {
      std::vector<std::pair<std::int32_t, std::size_t>> order;
      for (std::size_t g = 0; g < ghosts.size() / kWords; ++g) order.emplace_back(ghosts[g * kWords], g);
      std::sort(order.begin(), order.end());
      std::vector<std::int32_t> unique;
      for (std::size_t k = 0; k < order.size(); ++k) {
        if (k > 0 && order[k].first == order[k - 1].first) continue;
        const auto* rec = ghosts.data() + order[k].second * kWords;
        unique.insert(unique.end(), rec, rec + kWords);
      }
      ghosts = std::move(unique);
    }
  }
  const std::size_t n_ghost = ghosts.size() / kWords;
  ghosts_ = static_cast<std::int64_t>(n_ghost);
  pair_contacts_.assign(n_owned, 0);
  wall_contacts_.assign(n_owned, 0);
  spring_energy_.assign(n_owned, 0.0f);
  // Owned rows first, then the ghosts: a row's local index tells which it is.
  ParticleState local;
  const std::size_t n = n_owned + n_ghost;
  for (auto* f : {&local.x, &local.y, &local.z, &local.vx, &local.vy, &local.vz, &local.radius, &local.mass}) {
    f->resize(n);
  }
  std::vector<float*> pos = {local.x.data(), local.y.data(), local.z.data()};
  std::vector<float*> vel = {local.vx.data(), local.vy.data(), local.vz.data()};
  for (std::size_t k = 0; k < n_owned; ++k) {
    for (int a = 0; a < 3; ++a) {
      pos[a][k] = x_[a][k];
      vel[a][k] = v_[a][k];
    }
    local.radius[k] = radius_[k];
    local.mass[k] = mass_[k];
  }
  for (std::size_t g = 0; g < n_ghost; ++g) {
    const std::int32_t* rec = ghosts.data() + g * kWords;
    const std::size_t k = n_owned + g;
    for (int a = 0; a < 3; ++a) {
      pos[a][k] = bits_float(rec[1 + a]);
      vel[a][k] = bits_float(rec[4 + a]);
    }
    local.radius[k] = bits_float(rec[10]);
    local.mass[k] = bits_float(rec[11]);
  }
  // The constructor runs the force pass at these positions (velocities are the half-step ones,
  // as in Particles::step's force pass).
  // The ranks agree on failure before going on, so that an error on one rank raises on all of
  // them rather than leaving the others waiting in the next exchange: a bad owned particle (not
  // finite, or out of a box without walls or periodic wrap) is named by its id on every rank; any
  // other error raises on its rank and names that rank on the others.
  const bool check_box = !config_.walls && !config_.periodic;
  std::int64_t bad = n_global_;
  for (std::size_t k = 0; k < n_owned && bad == n_global_; ++k) {
    for (int a = 0; a < 3; ++a) {
      const float c = x_[a][k];
      if (!std::isfinite(c) || !std::isfinite(v_[a][k]) ||
          (check_box && (c < config_.box_lo[a] || c > config_.box_hi[a]))) {
        bad = id_[k];
      }
    }
  }
  std::unique_ptr<Particles> part;  // not std::optional: the constructor used is private (friend)
  std::exception_ptr failure;
  if (bad == n_global_ && n_owned > 0) {  // a rank with no particles has no forces to compute
    try {
      // Rank 0 logs the time-step warning once, for the first step.
      part.reset(new Particles(local, config_, comm_.device(), std::nullopt,
                               warnings_.empty() && steps_ == 0 && comm_.rank() == 0));
    } catch (...) {
      failure = std::current_exception();
    }
  }
  {
    const std::int64_t mine[2] = {bad, failure ? comm_.rank() : size};
    Array agreed = from_host(mine, {2}, DType::int64, comm_.device());
    comm_.all_reduce(agreed, dist::ReduceOp::min);
    const std::vector<std::int64_t> first = agreed.to(Device::cpu()).to_vector<std::int64_t>();
    if (first[0] < n_global_) {
      throw ValueError(fmt::format("{}: particle {} has a non-finite state or left the box at step {} (walls {}, "
                                   "periodic {}); the time step {:g} may be too large",
                                   op, first[0], steps_, config_.walls ? "on" : "off",
                                   config_.periodic ? "yes" : "no", config_.dt));
    }
    if (failure) std::rethrow_exception(failure);
    if (first[1] < size) {
      throw Error(fmt::format("{}: rank {} failed in the force pass at step {} (its error is on that rank)", op,
                              first[1], steps_));
    }
  }
  if (!part) return;
  if (warnings_.empty() && steps_ == 0) warnings_ = part->warnings();
  const Stream& stream = part->stream();
  const std::vector<float> acc = part->accelerations_.to(Device::cpu(), stream).to_vector<float>();
  const std::vector<std::int32_t> row_id = part->ids_.to(Device::cpu(), stream).to_vector<std::int32_t>();
  const std::vector<std::int32_t> pairs = part->pair_contacts_.to(Device::cpu(), stream).to_vector<std::int32_t>();
  const std::vector<std::uint8_t> walls = part->wall_contacts_.to(Device::cpu(), stream).to_vector<std::uint8_t>();
  const std::vector<float> energy = part->spring_energy_.to(Device::cpu(), stream).to_vector<float>();
  const float half_dt = 0.5f * static_cast<float>(config_.dt);
  for (std::size_t row = 0; row < n; ++row) {
    const auto k = static_cast<std::size_t>(row_id[row]);
    if (k >= n_owned) continue;
    for (int a = 0; a < 3; ++a) {
      a_[a][k] = acc[a * n + row];
      // The second half kick, as backend::force_slot does it.
      if (finish_kick) v_[a][k] += half_dt * a_[a][k];
    }
    pair_contacts_[k] = pairs[row];
    wall_contacts_[k] = walls[row];
    spring_energy_[k] = energy[row];
  }
}

// Sends each owned particle outside this rank's slab to the rank that owns its position.
void DistributedParticles::migrate() {
  const int size = comm_.size(), me = comm_.rank(), axis = options_.axis;
  if (size == 1) return;
  std::vector<std::vector<std::int32_t>> out(static_cast<std::size_t>(size));
  std::size_t kept = 0;
  for (std::size_t k = 0; k < id_.size(); ++k) {
    const int owner = owner_of(x_[axis][k]);
    if (owner == me) {
      // Compact in place.
      id_[kept] = id_[k];
      for (int a = 0; a < 3; ++a) {
        x_[a][kept] = x_[a][k];
        v_[a][kept] = v_[a][k];
        a_[a][kept] = a_[a][k];
      }
      radius_[kept] = radius_[k];
      mass_[kept] = mass_[k];
      ++kept;
      continue;
    }
    pack(out[static_cast<std::size_t>(owner)], k);
  }
  id_.resize(kept);
  for (int a = 0; a < 3; ++a) {
    x_[a].resize(kept);
    v_[a].resize(kept);
    a_[a].resize(kept);
  }
  radius_.resize(kept);
  mass_.resize(kept);
  // Every pair of ranks exchanges (a count, usually 0): after a rebalance a particle may move
  // more than one slab.
  std::vector<std::pair<int, std::vector<std::int32_t>>> sends;
  std::vector<int> recvs;
  for (int q = 0; q < size; ++q) {
    if (q == me) continue;
    sends.emplace_back(q, std::move(out[static_cast<std::size_t>(q)]));
    recvs.push_back(q);
  }
  const std::vector<std::int32_t> in = exchange(comm_, sends, recvs);
  for (std::size_t g = 0; g < in.size() / kWords; ++g) {
    const std::int32_t* rec = in.data() + g * kWords;
    id_.push_back(rec[0]);
    for (int a = 0; a < 3; ++a) {
      x_[a].push_back(bits_float(rec[1 + a]));
      v_[a].push_back(bits_float(rec[4 + a]));
      a_[a].push_back(bits_float(rec[7 + a]));
    }
    radius_.push_back(bits_float(rec[10]));
    mass_.push_back(bits_float(rec[11]));
  }
}

// Moves the slab bounds to the quantiles of a global histogram of the particles' coordinates.
void DistributedParticles::rebalance() {
  const int size = comm_.size(), axis = options_.axis;
  if (size == 1) return;
  constexpr std::int64_t bins = 4096;
  const double lo = config_.box_lo[axis], hi = config_.box_hi[axis], length = hi - lo;
  std::vector<double> hist(static_cast<std::size_t>(bins), 0.0);
  for (float c : x_[axis]) {
    const double t = (static_cast<double>(c) - lo) / length * bins;
    const auto b = static_cast<std::int64_t>(std::clamp(std::floor(t), 0.0, static_cast<double>(bins - 1)));
    hist[static_cast<std::size_t>(b)] += 1.0;
  }
  Array h = from_host(hist.data(), {bins}, DType::float64, comm_.device());
  comm_.all_reduce(h, dist::ReduceOp::sum);
  hist = h.to(Device::cpu()).to_vector<double>();
  const double total = std::accumulate(hist.begin(), hist.end(), 0.0);
  if (total <= 0) return;
  std::vector<double> next(bounds_.size());
  next.front() = lo;
  next.back() = hi;
  double cumulative = 0;
  std::int64_t b = 0;
  for (int r = 1; r < size; ++r) {
    const double target = total * r / size;
    while (b < bins && cumulative + hist[static_cast<std::size_t>(b)] < target) cumulative += hist[static_cast<std::size_t>(b++)];
    // Linear inside the bin that crosses the target.
    const double in_bin = b < bins ? hist[static_cast<std::size_t>(b)] : 1.0;
    const double frac = in_bin > 0 ? (target - cumulative) / in_bin : 0.0;
    next[static_cast<std::size_t>(r)] = lo + (static_cast<double>(b) + frac) * length / bins;
  }
  // No slab thinner than the cutoff: push forward, then back from the top (the constructor
  // checked that size * cutoff fits).
  for (int r = 1; r < size; ++r) {
    next[static_cast<std::size_t>(r)] = std::max(next[static_cast<std::size_t>(r)], next[static_cast<std::size_t>(r) - 1] + cutoff_);
  }
  for (int r = size - 1; r >= 1; --r) {
    next[static_cast<std::size_t>(r)] = std::min(next[static_cast<std::size_t>(r)], next[static_cast<std::size_t>(r) + 1] - cutoff_);
  }
  bounds_ = next;
}

void DistributedParticles::step(std::int64_t count) {
  TESSEL_RANGE("sim::DistributedParticles::step");
  if (count < 0) throw ValueError(fmt::format("{}: step count must be >= 0, got {}", op, count));
  const float dt = static_cast<float>(config_.dt), half_dt = 0.5f * dt;
  for (std::int64_t s = 0; s < count; ++s) {
    // First half of velocity Verlet, as backend::kick_drift_cell_key does it.
    for (std::size_t k = 0; k < id_.size(); ++k) {
      for (int a = 0; a < 3; ++a) {
        v_[a][k] += half_dt * a_[a][k];
        x_[a][k] += dt * v_[a][k];
        if (config_.periodic) {
          const auto lo = static_cast<float>(config_.box_lo[a]);
          const auto length = static_cast<float>(config_.box_hi[a] - config_.box_lo[a]);
          x_[a][k] = backend::physics::wrap(x_[a][k], lo, length);
        }
      }
    }
    ++steps_;
    if (options_.rebalance_every > 0 && steps_ % options_.rebalance_every == 0) rebalance();
    migrate();
    compute_forces(true);
  }
}

DistributedDiagnostics DistributedParticles::diagnostics() {
  TESSEL_RANGE("sim::DistributedParticles::diagnostics");
  // The single-process per-particle terms (backend::physics::add_diagnostic_terms), over the owned rows.
  backend::SimParams p{};
  for (int a = 0; a < 3; ++a) {
    p.lo[a] = static_cast<float>(config_.box_lo[a]);
    p.gravity[a] = static_cast<float>(config_.gravity[a]);
  }
  backend::SimArrays arr;
  arr.x = x_[0].data();
  arr.y = x_[1].data();
  arr.z = x_[2].data();
  arr.vx = v_[0].data();
  arr.vy = v_[1].data();
  arr.vz = v_[2].data();
  arr.mass = mass_.data();
  arr.spring_energy = spring_energy_.data();
  arr.pair_contacts = pair_contacts_.data();
  arr.wall_contacts = wall_contacts_.data();
  backend::physics::DiagnosticTerms t;
  const bool check_box = !config_.walls && !config_.periodic;
  std::int64_t bad = -1;
  for (std::size_t k = 0; k < id_.size(); ++k) {
    backend::physics::add_diagnostic_terms(p, arr, static_cast<long long>(k), t);
    bool ok = true;
    for (int a = 0; a < 3; ++a) {
      ok = ok && std::isfinite(x_[a][k]) && std::isfinite(v_[a][k]);
      if (check_box) ok = ok && x_[a][k] >= config_.box_lo[a] && x_[a][k] <= config_.box_hi[a];
    }
    if (!ok && bad < 0) bad = static_cast<std::int64_t>(k);
  }
  const int size = comm_.size();
  // One all_reduce for the sums and the first bad particle's id (min over ranks).
  std::vector<double> sums = {t.kinetic,      t.potential_gravity, t.potential_spring,
                              t.momentum[0],  t.momentum[1],       t.momentum[2],
                              static_cast<double>(t.pair_contacts_twice), static_cast<double>(t.wall_contacts)};
  Array s = from_host(sums.data(), {static_cast<std::int64_t>(sums.size())}, DType::float64, comm_.device());
  comm_.all_reduce(s, dist::ReduceOp::sum);
  sums = s.to(Device::cpu()).to_vector<double>();
  const std::int64_t my_bad = bad >= 0 ? id_[static_cast<std::size_t>(bad)] : n_global_;
  Array bad_id = from_host(&my_bad, {1}, DType::int64, comm_.device());
  comm_.all_reduce(bad_id, dist::ReduceOp::min);
  const std::int64_t first_bad = bad_id.to(Device::cpu()).item<std::int64_t>();
  const std::int64_t mine = local_size();
  Array count = from_host(&mine, {1}, DType::int64, comm_.device());
  Array counts = zeros({size, 1}, DType::int64, comm_.device());
  comm_.all_gather(counts, count);
  if (first_bad < n_global_) {
    throw ValueError(fmt::format(
        "{}: particle {} has a non-finite state or left the box at step {} (walls {}, periodic {}); the time step "
        "{:g} may be too large",
        op, first_bad, steps_, config_.walls ? "on" : "off", config_.periodic ? "yes" : "no", config_.dt));
  }
  DistributedDiagnostics d;
  d.step = steps_;
  d.time = time();
  d.kinetic = sums[0];
  d.potential_gravity = sums[1];
  d.potential_spring = sums[2];
  d.momentum = {sums[3], sums[4], sums[5]};
  d.contacts = static_cast<std::int64_t>(std::llround(sums[6])) / 2;
  d.wall_contacts = static_cast<std::int64_t>(std::llround(sums[7]));
  d.rank_counts = counts.to(Device::cpu()).to_vector<std::int64_t>();
  d.slab_bounds = bounds_;
  return d;
}

ParticleState DistributedParticles::gather(int root) {
  const int size = comm_.size(), me = comm_.rank();
  if (root < 0 || root >= size) {
    throw ValueError(fmt::format("{}: gather root {} is not a rank of a communicator of size {}", op, root, size));
  }
  std::vector<std::int32_t> mine;
  mine.reserve(id_.size() * kWords);
  for (std::size_t k = 0; k < id_.size(); ++k) {
    pack(mine, k);
  }
  std::vector<std::int32_t> all;
  if (me == root) {
    std::vector<int> recvs;
    for (int q = 0; q < size; ++q) {
      if (q != root) recvs.push_back(q);
    }
    all = exchange(comm_, {}, recvs);
    all.insert(all.end(), mine.begin(), mine.end());
  } else {
    exchange(comm_, {{root, std::move(mine)}}, {});
    return {};
  }
  ParticleState s;
  const auto n = static_cast<std::size_t>(n_global_);
  for (auto* f : {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.radius, &s.mass}) f->assign(n, 0.0f);
  std::vector<float*> fields = {s.x.data(), s.y.data(), s.z.data(), s.vx.data(), s.vy.data(), s.vz.data()};
  std::size_t seen = 0;
  for (std::size_t g = 0; g < all.size() / kWords; ++g, ++seen) {
    const std::int32_t* rec = all.data() + g * kWords;
    const auto i = static_cast<std::size_t>(rec[0]);
    for (int f = 0; f < 6; ++f) fields[static_cast<std::size_t>(f)][i] = bits_float(rec[1 + f]);
    s.radius[i] = bits_float(rec[10]);
    s.mass[i] = bits_float(rec[11]);
  }
  if (seen != n) {
    throw Error(fmt::format("{}: gather found {} particles on the ranks, expected {}", op, seen, n));
  }
  return s;
}

}  // namespace tessel::sim

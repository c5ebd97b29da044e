// sim::DistributedParticles: slab decomposition, migration, halo exchange and reduced diagnostics
// around sim::Particles' force pass (include/tessel/sim/distributed.hpp says how a step goes).
#include "tessel/sim/distributed.hpp"

#include <algorithm>
#include <chrono>
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
#include "tessel/core/stream.hpp"
#include "tessel/ops/backend_entry_points.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/indexing.hpp"
#include "tessel/ops/reduce.hpp"
#include "tessel/ops/sort.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::sim {
namespace {

constexpr const char* op = "sim::DistributedParticles";

// The owned particles are the columns of a (12, n) int32 array: the id, then the float32 bits of
// x y z vx vy vz ax ay az radius mass. One int32 message then carries a selection of particles
// as it is (ids stay exact), and the float rows are the same storage read as float32.
constexpr std::int64_t kRows = 12;
constexpr std::int64_t kX = 1, kV = 4, kA = 7, kRadius = 10, kMass = 11;

// Rows [first, first + count) of C-contiguous records as float32 (a view of the same storage).
Array float_rows(const Array& records, std::int64_t first, std::int64_t count) {
  const std::int64_t n = records.dim(1);
  return Array(records.storage(), {count, n}, {n, 1}, records.offset() + first * n, DType::float32);
}
Array float_row(const Array& records, std::int64_t row) {
  const std::int64_t n = records.dim(1);
  return Array(records.storage(), {n}, {1}, records.offset() + row * n, DType::float32);
}

float bits_float(std::int32_t w) {
  float v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}

// concatenate along `axis`, leaving out empty parts (a new array even for one part: the force
// pass reorders its inputs in place). `empty_shape` when every part is empty.
Array join(const std::vector<Array>& parts, std::int64_t axis, const Shape& empty_shape, DType dtype, Device device) {
  std::vector<Array> full;
  for (const Array& a : parts) {
    if (a.size() > 0) full.push_back(a);
  }
  if (full.empty()) return empty(empty_shape, dtype, device);
  if (full.size() == 1) return full[0].copy();
  return concatenate(full, axis);
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Grouped point-to-point exchange of (12, m) records: sends[k] goes to its peer, and one message
// is received from each of recv_peers, in that order (MPI and NCCL match messages between a pair
// of ranks in the order they were posted, so a peer that appears twice is fine). The record
// counts go first (one int64 per peer, read back together: the receive buffers need them), then
// the payloads that are not empty, device to device. Returns the received records, concatenated.
Array exchange(const dist::Communicator& comm, const std::vector<std::pair<int, Array>>& sends,
               const std::vector<int>& recv_peers) {
  const Device device = comm.device();
  std::vector<Array> count_out, count_in;
  {
    dist::Group group;
    for (const auto& [peer, data] : sends) {
      const std::int64_t count = data.dim(1);
      count_out.push_back(from_host(&count, {1}, DType::int64, device));
      comm.send(count_out.back(), peer);
    }
    for (int peer : recv_peers) {
      count_in.push_back(zeros({1}, DType::int64, device));
      comm.recv(count_in.back(), peer);
    }
  }
  std::vector<std::int64_t> counts;
  if (!count_in.empty()) counts = concatenate(count_in).to(Device::cpu()).to_vector<std::int64_t>();
  std::vector<Array> payload_in;
  {
    dist::Group group;
    for (const auto& [peer, data] : sends) {
      if (data.dim(1) > 0) comm.send(data, peer);
    }
    for (std::size_t k = 0; k < recv_peers.size(); ++k) {
      if (counts[k] == 0) continue;
      payload_in.push_back(empty({kRows, counts[k]}, DType::int32, device));
      comm.recv(payload_in.back(), recv_peers[k]);
    }
  }
  return join(payload_in, 1, {kRows, 0}, DType::int32, device);
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
  // The state and configuration as sim::Particles checks them (the same on every rank, so every
  // rank raises); the force passes then take the radii and masses as checked here.
  Particles::validate_state(state, config);
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

  // Keep the owned particles (positions wrapped into a periodic box as sim::Particles does), as
  // records, uploaded once.
  const int me = comm_.rank();
  std::vector<std::int64_t> owned;
  std::vector<float> wrapped[3];
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
    owned.push_back(i);
    for (int a = 0; a < 3; ++a) wrapped[a].push_back(p[a]);
  }
  const std::size_t n = owned.size();
  std::vector<std::int32_t> host(static_cast<std::size_t>(kRows) * n, 0);  // accelerations 0 (0.0f's bits)
  auto put = [&](std::int64_t row, std::size_t j, float v) { std::memcpy(&host[row * n + j], &v, sizeof v); };
  for (std::size_t j = 0; j < n; ++j) {
    const auto k = static_cast<std::size_t>(owned[j]);
    host[j] = static_cast<std::int32_t>(owned[j]);
    for (int a = 0; a < 3; ++a) put(kX + a, j, wrapped[a][j]);
    put(kV + 0, j, state.vx[k]);
    put(kV + 1, j, state.vy[k]);
    put(kV + 2, j, state.vz[k]);
    put(kRadius, j, state.radius[k]);
    put(kMass, j, state.mass[k]);
  }
  records_ = from_host(host.data(), {kRows, static_cast<std::int64_t>(n)}, DType::int32, comm_.device());
  r_max_ = r_max;
  r_min_ = *std::min_element(state.radius.begin(), state.radius.end());
  m_min_ = *std::min_element(state.mass.begin(), state.mass.end());
  lap_start_ = seconds_now();
  compute_forces(false);
  phase_times_ = {};
}

int DistributedParticles::owner_of(float coordinate) const {
  // Soft walls let particles sit slightly outside the box: the end slabs own what is beyond them.
  const auto it = std::upper_bound(bounds_.begin() + 1, bounds_.end() - 1, static_cast<double>(coordinate));
  return static_cast<int>(it - (bounds_.begin() + 1));
}

void DistributedParticles::lap(double& slot) {
  if (!options_.time_phases) return;
  current_stream(comm_.device()).synchronize();
  const double now = seconds_now();
  slot += now - lap_start_;
  lap_start_ = now;
}

// The halo exchange and sim::Particles' force pass on owned + ghost particles; the owned
// particles keep the new accelerations, contact counts and spring energies, and with finish_kick
// the second half kick. All on the device but the counts.
void DistributedParticles::compute_forces(bool finish_kick) {
  const int size = comm_.size(), me = comm_.rank(), axis = options_.axis;
  const Device device = comm_.device();
  const std::int64_t n_owned = local_size();
  Array ghosts = empty({kRows, 0}, DType::int32, device);
  if (size > 1) {
    const bool periodic = config_.periodic;
    const int left = me > 0 ? me - 1 : (periodic ? size - 1 : -1);
    const int right = me < size - 1 ? me + 1 : (periodic ? 0 : -1);
    const double low = bounds_[static_cast<std::size_t>(me)], high = bounds_[static_cast<std::size_t>(me) + 1];
    // Compared in float64, as the slab bounds are (a float32 bound could move a particle across).
    const Array c = astype(float_row(records_, kX + axis), DType::float64);
    const Array near_low = c < low + cutoff_, near_high = c >= high - cutoff_;
    std::vector<std::pair<int, Array>> sends;
    std::vector<int> recvs;
    if (left >= 0 && left == right) {
      // Two ranks in a periodic box: both neighbours are the same rank, and a particle near both
      // of its faces is a ghost there once. Send the union across the left face, nothing across
      // the right one; the receiver orders the ghosts by id (as the host dedup of the union did).
      sends.emplace_back(left, getitem(records_, {Slice(), near_low | near_high}));
      sends.emplace_back(right, empty({kRows, 0}, DType::int32, device));
    } else {
      if (left >= 0) sends.emplace_back(left, getitem(records_, {Slice(), near_low}));
      if (right >= 0) sends.emplace_back(right, getitem(records_, {Slice(), near_high}));
    }
    // What the right neighbour sent to its left comes first, then what the left one sent right.
    if (right >= 0) recvs.push_back(right);
    if (left >= 0) recvs.push_back(left);
    ghosts = exchange(comm_, sends, recvs);
    if (left >= 0 && left == right && ghosts.dim(1) > 1) ghosts = take(ghosts, argsort(ghosts[0]), 1);
  }
  lap(phase_times_.halo);
  const std::int64_t n_ghost = ghosts.dim(1);
  ghosts_ = n_ghost;
  pair_contacts_ = zeros({n_owned}, DType::int32, device);
  wall_contacts_ = zeros({n_owned}, DType::uint8, device);
  spring_energy_ = zeros({n_owned}, DType::float32, device);
  // The ranks agree on failure before going on, so that an error on one rank raises on all of
  // them rather than leaving the others waiting in the next exchange: a bad owned particle (not
  // finite, or out of a box without walls or periodic wrap) is named by its id on every rank (the
  // smallest such id); any other error raises on its rank and names that rank on the others.
  // The check is a device reduction; its one int64 comes back (the force pass must not start on
  // a bad state).
  const bool check_box = !config_.walls && !config_.periodic;
  std::int64_t bad = n_global_;
  if (n_owned > 0) {
    Array ok = isfinite(float_rows(records_, kX, 3)) & isfinite(float_rows(records_, kV, 3));
    if (check_box) {
      for (int a = 0; a < 3; ++a) {
        const Array c = astype(float_row(records_, kX + a), DType::float64);
        Array row = ok[a];
        bitwise_and(row, (c >= config_.box_lo[a]) & (c <= config_.box_hi[a]), row);
      }
    }
    const Array ids = astype(records_[0], DType::int64);
    bad = min(where(all(ok, std::vector<std::int64_t>{0}), full_like(ids, n_global_), ids))
              .to(Device::cpu())
              .item<std::int64_t>();
  }
  std::unique_ptr<Particles> part;  // not std::optional: the constructor used is private (friend)
  std::exception_ptr failure;
  if (bad == n_global_ && n_owned > 0) {  // a rank with no particles has no forces to compute
    try {
      // Owned columns first, then the ghosts: a row's local index tells which it is. Rank 0 logs
      // the time-step warning once, for the first step. The force pass runs at these positions
      // (velocities are the half-step ones, as in Particles::step's force pass).
      const Shape e3 = {3, 0}, e1 = {0};
      part.reset(new Particles(
          join({float_rows(records_, kX, 3), float_rows(ghosts, kX, 3)}, 1, e3, DType::float32, device),
          join({float_rows(records_, kV, 3), float_rows(ghosts, kV, 3)}, 1, e3, DType::float32, device),
          join({float_row(records_, kRadius), float_row(ghosts, kRadius)}, 0, e1, DType::float32, device),
          join({float_row(records_, kMass), float_row(ghosts, kMass)}, 0, e1, DType::float32, device), config_,
          r_min_, r_max_, m_min_, warnings_.empty() && steps_ == 0 && comm_.rank() == 0));
    } catch (...) {
      failure = std::current_exception();
    }
  }
  {
    const std::int64_t mine[2] = {bad, failure ? comm_.rank() : size};
    Array agreed = from_host(mine, {2}, DType::int64, device);
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
  if (part) {
    if (warnings_.empty() && steps_ == 0) warnings_ = part->warnings();
    // The force pass leaves its rows sorted by grid cell; row r holds local particle ids_[r]
    // (owned below n_owned, ghosts above). The owned records move into that order, as
    // Particles::step keeps its state: the next force pass then gathers a nearly sorted state
    // instead of a random one (on the H100 at 1e7 particles, the construction's gather took
    // about twice Particles::step's). The order is in range by construction (a permutation's
    // owned entries): the gather skips take's bounds check and its read-back.
    const Array owned = part->ids_ < n_owned;
    records_ = internal::take_unchecked(records_, getitem(part->ids_, {owned}), 1);
    Array acc = float_rows(records_, kA, 3);
    copyto(acc, getitem(part->accelerations_, {Slice(), owned}));
    if (finish_kick) {
      // The second half kick, as backend::force_slot does it.
      Array v = float_rows(records_, kV, 3);
      v += (0.5f * static_cast<float>(config_.dt)) * acc;
    }
    pair_contacts_ = getitem(part->pair_contacts_, {owned});
    wall_contacts_ = getitem(part->wall_contacts_, {owned});
    spring_energy_ = getitem(part->spring_energy_, {owned});
  }
  lap(phase_times_.force);
}

// Sends each owned particle outside this rank's slab to the rank that owns its position: one
// boolean-mask selection of the records per rank, on the device.
void DistributedParticles::migrate() {
  const int size = comm_.size(), me = comm_.rank(), axis = options_.axis;
  if (size == 1) return;
  const Device device = comm_.device();
  // owner_of on the device: upper_bound of the coordinate in the inner bounds, in float64.
  const Array inner = from_host(bounds_.data() + 1, {size - 1}, DType::float64, device);
  const Array owner = searchsorted(inner, astype(float_row(records_, kX + axis), DType::float64), true);
  // Every pair of ranks exchanges (a count, usually 0): after a rebalance a particle may move
  // more than one slab.
  std::vector<std::pair<int, Array>> sends;
  std::vector<int> recvs;
  for (int q = 0; q < size; ++q) {
    if (q == me) continue;
    sends.emplace_back(q, getitem(records_, {Slice(), owner == q}));
    recvs.push_back(q);
  }
  const Array kept = getitem(records_, {Slice(), owner == me});
  const Array in = exchange(comm_, sends, recvs);
  records_ = in.dim(1) > 0 ? concatenate({kept, in}, 1) : kept;
}

// Moves the slab bounds to the quantiles of a global histogram of the particles' coordinates.
void DistributedParticles::rebalance() {
  const int size = comm_.size(), axis = options_.axis;
  if (size == 1) return;
  constexpr std::int64_t bins = 4096;
  const Device device = comm_.device();
  const double lo = config_.box_lo[axis], hi = config_.box_hi[axis], length = hi - lo;
  // The histogram on the device: bin indices sorted, each bin's count from the sorted positions
  // of the bin edges.
  Array h = zeros({bins}, DType::float64, device);
  if (local_size() > 0) {
    const Array c = astype(float_row(records_, kX + axis), DType::float64);
    const Array t = minimum(maximum(floor((c - lo) / length * static_cast<double>(bins)), 0.0),
                            static_cast<double>(bins - 1));
    const Array edges = searchsorted(sort(astype(t, DType::int64)), arange(0, bins + 1, 1, DType::int64, device));
    h = astype(edges.slice(0, Slice(1, bins + 1)) - edges.slice(0, Slice(0, bins)), DType::float64);
  }
  // The global histogram (bins doubles) comes to the host for the quantiles: every
  // rebalance_every steps, not every step.
  comm_.all_reduce(h, dist::ReduceOp::sum);
  const std::vector<double> hist = h.to(Device::cpu()).to_vector<double>();
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
    lap_start_ = seconds_now();
    // First half of velocity Verlet, as backend::kick_drift_cell_key does it (in float32, one
    // rounding per operation), on the device.
    if (local_size() > 0) {
      Array v = float_rows(records_, kV, 3), x = float_rows(records_, kX, 3);
      v += half_dt * float_rows(records_, kA, 3);
      x += dt * v;
      if (config_.periodic) {
        for (int a = 0; a < 3; ++a) {
          // backend::physics::wrap.
          const auto lo = static_cast<float>(config_.box_lo[a]);
          const auto length = static_cast<float>(config_.box_hi[a] - config_.box_lo[a]);
          const float top = lo + length;
          const Array c = float_row(records_, kX + a);
          Array w = c - length * floor((c - lo) / length);
          w = where(w >= top, w - length, w);
          copyto(c, maximum(w, lo));
        }
      }
    }
    lap(phase_times_.integrate);
    ++steps_;
    if (options_.rebalance_every > 0 && steps_ % options_.rebalance_every == 0) rebalance();
    migrate();
    lap(phase_times_.migrate);
    compute_forces(true);
  }
}

DistributedDiagnostics DistributedParticles::diagnostics() {
  TESSEL_RANGE("sim::DistributedParticles::diagnostics");
  // The single-process per-particle terms (backend::physics::add_diagnostic_terms), over the owned
  // rows, on the host: not a per-step cost (the state is read back once per call).
  const std::int64_t n = local_size();
  const auto un = static_cast<std::size_t>(n);
  std::vector<float> f;
  std::vector<std::int32_t> id, pairs;
  std::vector<std::uint8_t> walls;
  std::vector<float> energy;
  if (n > 0) {
    f = float_rows(records_, kX, 11).to(Device::cpu()).to_vector<float>();
    id = records_[0].to(Device::cpu()).to_vector<std::int32_t>();
    pairs = pair_contacts_.to(Device::cpu()).to_vector<std::int32_t>();
    walls = wall_contacts_.to(Device::cpu()).to_vector<std::uint8_t>();
    energy = spring_energy_.to(Device::cpu()).to_vector<float>();
  }
  auto row = [&](std::int64_t r) { return f.data() + (r - kX) * n; };
  backend::SimParams p{};
  for (int a = 0; a < 3; ++a) {
    p.lo[a] = static_cast<float>(config_.box_lo[a]);
    p.gravity[a] = static_cast<float>(config_.gravity[a]);
  }
  backend::SimArrays arr;
  arr.x = row(kX);
  arr.y = row(kX + 1);
  arr.z = row(kX + 2);
  arr.vx = row(kV);
  arr.vy = row(kV + 1);
  arr.vz = row(kV + 2);
  arr.mass = row(kMass);
  arr.spring_energy = energy.data();
  arr.pair_contacts = pairs.data();
  arr.wall_contacts = walls.data();
  backend::physics::DiagnosticTerms t;
  const bool check_box = !config_.walls && !config_.periodic;
  std::int64_t bad = -1;
  for (std::size_t k = 0; k < un; ++k) {
    backend::physics::add_diagnostic_terms(p, arr, static_cast<long long>(k), t);
    bool ok = true;
    for (int a = 0; a < 3; ++a) {
      const float x = row(kX + a)[k], v = row(kV + a)[k];
      ok = ok && std::isfinite(x) && std::isfinite(v);
      if (check_box) ok = ok && x >= config_.box_lo[a] && x <= config_.box_hi[a];
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
  const std::int64_t my_bad = bad >= 0 ? id[static_cast<std::size_t>(bad)] : n_global_;
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
  // The records go as they are; the root reads them back once.
  Array all;
  if (me == root) {
    std::vector<int> recvs;
    for (int q = 0; q < size; ++q) {
      if (q != root) recvs.push_back(q);
    }
    all = join({exchange(comm_, {}, recvs), records_}, 1, {kRows, 0}, DType::int32, comm_.device());
  } else {
    exchange(comm_, {{root, records_}}, {});
    return {};
  }
  const std::int64_t total = all.dim(1);
  const std::vector<std::int32_t> host = total > 0 ? all.to(Device::cpu()).to_vector<std::int32_t>()
                                                   : std::vector<std::int32_t>{};
  ParticleState s;
  const auto n = static_cast<std::size_t>(n_global_);
  for (auto* f : {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.radius, &s.mass}) f->assign(n, 0.0f);
  std::vector<float*> fields = {s.x.data(), s.y.data(), s.z.data(), s.vx.data(), s.vy.data(), s.vz.data()};
  auto word = [&](std::int64_t row, std::int64_t g) { return host[static_cast<std::size_t>(row * total + g)]; };
  for (std::int64_t g = 0; g < total; ++g) {
    const auto i = static_cast<std::size_t>(word(0, g));
    for (int f = 0; f < 6; ++f) fields[static_cast<std::size_t>(f)][i] = bits_float(word(kX + f, g));
    s.radius[i] = bits_float(word(kRadius, g));
    s.mass[i] = bits_float(word(kMass, g));
  }
  if (total != n_global_) {
    throw Error(fmt::format("{}: gather found {} particles on the ranks, expected {}", op, total, n_global_));
  }
  return s;
}

}  // namespace tessel::sim

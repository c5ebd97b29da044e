// sim::Particles: validation, grid planning, memory, and the order of backend calls.
// The kernels are in backend/cpu/particles.cpp and backend/cuda/particles.cu; the physics both
// share is in backend/particles_physics.hpp.
#include "tessel/ops/cast.hpp"
#include "tessel/sim/particles.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "array/backend.hpp"
#include "backend/particles.hpp"
#include "core/not_built.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/memory/caching_allocator.hpp"

namespace tessel::sim {
namespace {

constexpr const char* op = "sim::Particles";
constexpr double pi = 3.14159265358979323846;
constexpr std::int64_t max_cells = std::int64_t{1} << 30;  // 2 * cell index stays in int32

// Bytes per particle: state x v a (9 floats), radius, mass, id, pair contacts, spring energy,
// wall contacts (1 byte), sorted copies (12 floats and an id), keys and slots (double buffers).
constexpr std::int64_t bytes_per_particle = 9 * 4 + 3 * 4 + 2 * 4 + 1 + 13 * 4 + 2 * 4 + 2 * 4;

void require(bool ok, const std::string& message) {
  if (!ok) throw ValueError(std::string(op) + ": " + message);
}

bool finite(double v) { return std::isfinite(v); }

std::size_t backend_sort_temp_bytes(Device device, std::int64_t n, int bits) {
  if (device.is_cpu()) return backend::cpu::sort_temp_bytes(n, bits);
#if defined(TESSEL_HAVE_CUDA)
  DeviceGuard guard(device);
  return backend::cuda::sort_temp_bytes(n, bits);
#else
  ::tessel::detail::throw_cuda_not_built(op);
#endif
}

std::int64_t available_bytes(Device device) {
  if (device.is_cpu()) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : std::numeric_limits<std::int64_t>::max();
  }
  const DeviceProperties& props = device_properties(device.index);
  CachingAllocator& pool = device_allocator(device.index);
  const double cap = static_cast<double>(props.total_memory) * pool.options().memory_fraction;
  return static_cast<std::int64_t>(cap) - pool.stats().allocated_bytes;
}

std::string position_str(float x, float y, float z) { return fmt::format("({:g}, {:g}, {:g})", x, y, z); }

void validate(const ParticleState& s, const ParticlesConfig& c) {
  const std::int64_t n = s.size();
  require(n > 0, "needs at least one particle");
  const std::size_t size = s.x.size();
  const std::vector<std::pair<const char*, const std::vector<float>*>> fields = {
      {"x", &s.x}, {"y", &s.y}, {"z", &s.z}, {"vx", &s.vx}, {"vy", &s.vy}, {"vz", &s.vz},
      {"radius", &s.radius}, {"mass", &s.mass}};
  for (const auto& [name, values] : fields) {
    if (values->size() != size) {
      throw ShapeError(fmt::format("{}: every state field needs one value per particle: x has {}, {} has {}", op, size,
                                   name, values->size()));
    }
  }
  require(n < (std::int64_t{1} << 31) - 1, fmt::format("{} particles exceed the limit of 2^31 - 1", n));
  require(finite(c.dt) && c.dt > 0, fmt::format("the time step must be positive and finite, got dt = {}", c.dt));
  require(finite(c.stiffness) && c.stiffness > 0, fmt::format("the stiffness must be positive, got {}", c.stiffness));
  require(finite(c.damping_ratio) && c.damping_ratio >= 0 && c.damping_ratio < 1,
          fmt::format("the damping ratio must be in [0, 1), got {}", c.damping_ratio));
  require(finite(c.friction) && c.friction >= 0, fmt::format("the friction coefficient must be >= 0, got {}", c.friction));
  require(finite(c.tangential_damping) && c.tangential_damping >= 0,
          fmt::format("the tangential damping must be >= 0, got {}", c.tangential_damping));
  require(!(c.periodic && c.walls), "periodic boundaries need walls = false");
  for (int a = 0; a < 3; ++a) {
    require(finite(c.box_lo[a]) && finite(c.box_hi[a]) && c.box_hi[a] > c.box_lo[a],
            fmt::format("the box must have box_hi > box_lo on every axis, got [{}, {}] on axis {}", c.box_lo[a],
                        c.box_hi[a], a));
    require(finite(c.gravity[a]), "gravity must be finite");
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (!(s.radius[k] > 0) || !std::isfinite(s.radius[k])) {
      throw ValueError(fmt::format("{}: radius must be positive and finite, particle {} has radius {}", op, i, s.radius[k]));
    }
    if (!(s.mass[k] > 0) || !std::isfinite(s.mass[k])) {
      throw ValueError(fmt::format("{}: mass must be positive and finite, particle {} has mass {}", op, i, s.mass[k]));
    }
    if (!std::isfinite(s.x[k]) || !std::isfinite(s.y[k]) || !std::isfinite(s.z[k])) {
      throw ValueError(fmt::format("{}: particle {} has a non-finite position {}", op, i,
                                   position_str(s.x[k], s.y[k], s.z[k])));
    }
    if (!std::isfinite(s.vx[k]) || !std::isfinite(s.vy[k]) || !std::isfinite(s.vz[k])) {
      throw ValueError(fmt::format("{}: particle {} has a non-finite velocity {}", op, i,
                                   position_str(s.vx[k], s.vy[k], s.vz[k])));
    }
    if (!c.periodic) {
      const float p[3] = {s.x[k], s.y[k], s.z[k]};
      for (int a = 0; a < 3; ++a) {
        if (p[a] < static_cast<float>(c.box_lo[a]) || p[a] > static_cast<float>(c.box_hi[a])) {  // as the kernels compare
          throw ValueError(fmt::format("{}: particle {} at {} is outside the box [{}, {}] x [{}, {}] x [{}, {}]", op, i,
                                       position_str(p[0], p[1], p[2]), c.box_lo[0], c.box_hi[0], c.box_lo[1],
                                       c.box_hi[1], c.box_lo[2], c.box_hi[2]));
        }
      }
    }
  }
}

// The Verlet stability limit of the stiffest, lightest contact: a damped oscillator of angular
// frequency w and damping ratio z is stable for dt < 2 / w * (sqrt(1 + z^2) - z). The lightest
// pair has m_eff = m_min / 2. Hertz contacts stiffen with overlap; their linearized stiffness
// 1.5 k sqrt(R_eff * overlap) is taken at an overlap of 10% of the smallest radius.
double stable_time_step(const ParticlesConfig& c, double m_min, double r_min) {
  double k = c.stiffness;
  if (c.model == ContactModel::hertz) k = 1.5 * c.stiffness * std::sqrt(0.5 * r_min * 0.1 * r_min);
  const double omega = std::sqrt(k / (0.5 * m_min));
  const double z = c.damping_ratio;
  return 2.0 / omega * (std::sqrt(1.0 + z * z) - z);
}

}  // namespace

std::int64_t Particles::required_bytes(std::int64_t n, std::int64_t cells, Device device) {
  std::int64_t bytes = n * bytes_per_particle + cells * 2 * 4;
  if (device.is_cpu()) bytes += cells * 4;  // the counting sort's cursors
  return bytes;
}

void Particles::check_memory(std::int64_t n, std::int64_t cells, Device device) {
  if (device.is_cuda()) check_device_index(device.index, op);
  int bits = 1;
  while ((std::int64_t{1} << bits) < cells) ++bits;
  // CUB's workspace for n keys (a host-side size query; nothing is allocated). Counts past the
  // int32 limit, which the constructor rejects anyway, are sized at the limit.
  const std::int64_t sortable = std::min<std::int64_t>(n, (std::int64_t{1} << 31) - 1);
  const std::int64_t temp = static_cast<std::int64_t>(backend_sort_temp_bytes(device, sortable, bits));
  const std::int64_t need = required_bytes(n, cells, device) + temp;
  const std::int64_t have = available_bytes(device);
  if (need > have) {
    throw OutOfMemory(fmt::format("{}: {} particles need {} on {} ({} per particle, {} for {} grid cells, {} of sort "
                                  "workspace) but only {} are available: use fewer particles or a larger cell_size",
                                  op, n, format_bytes(need), device.str(), format_bytes(bytes_per_particle),
                                  format_bytes(cells * 8), cells, format_bytes(temp),
                                  format_bytes(std::max<std::int64_t>(have, 0))));
  }
}

Particles::Particles(const ParticleState& state, const ParticlesConfig& config, Device device,
                     const OptionalStream& stream)
    : Particles(state, config, device, stream, true) {}

Particles::Particles(const ParticleState& state, const ParticlesConfig& config, Device device,
                     const OptionalStream& stream, bool log_warnings)
    : n_(state.size()), device_(device), config_(config) {
  TESSEL_RANGE("sim::Particles");
  if (device.is_cuda()) check_device_index(device.index, op);
  stream_ = detail::resolve_stream(device, stream);
  if (stream_.device() != device) {
    throw DeviceError(fmt::format("{}: the stream is on {} but the device is {}", op, stream_.device().str(), device.str()));
  }
  validate(state, config);

  const float r_max = *std::max_element(state.radius.begin(), state.radius.end());
  const float r_min = *std::min_element(state.radius.begin(), state.radius.end());
  const float m_min = *std::min_element(state.mass.begin(), state.mass.end());
  const std::int64_t cells = configure(r_min, r_max, m_min, log_warnings);
  // Upload: positions, velocities and accelerations as (3, n) SoA.
  const auto un = static_cast<std::size_t>(n_);
  std::vector<float> host(3 * un);
  auto pack = [&](const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c) {
    std::copy(a.begin(), a.end(), host.begin());
    std::copy(b.begin(), b.end(), host.begin() + static_cast<std::ptrdiff_t>(un));
    std::copy(c.begin(), c.end(), host.begin() + static_cast<std::ptrdiff_t>(2 * un));
  };
  pack(state.x, state.y, state.z);
  if (config.periodic) {
    for (int a = 0; a < 3; ++a) {
      const double lo = config.box_lo[a], length = config.box_hi[a] - lo;
      for (std::size_t i = 0; i < un; ++i) {
        float& v = host[a * un + i];
        double w = v - length * std::floor((v - lo) / length);
        if (w >= lo + length) w -= length;
        v = static_cast<float>(std::max(w, lo));
      }
    }
  }
  positions_ = from_host(host.data(), {3, n_}, DType::float32, device, stream_);
  pack(state.vx, state.vy, state.vz);
  velocities_ = from_host(host.data(), {3, n_}, DType::float32, device, stream_);
  radii_ = from_host(state.radius.data(), {n_}, DType::float32, device, stream_);
  masses_ = from_host(state.mass.data(), {n_}, DType::float32, device, stream_);
  start(cells);
}

Particles::Particles(Array positions, Array velocities, Array radii, Array masses, const ParticlesConfig& config,
                     float r_min, float r_max, float m_min, bool log_warnings)
    : n_(radii.size()), device_(radii.device()), config_(config) {
  TESSEL_RANGE("sim::Particles");
  stream_ = detail::resolve_stream(device_, std::nullopt);
  // The caller (DistributedParticles) checked the state: the radii and masses once, the positions
  // and velocities before each force pass.
  const std::int64_t cells = configure(r_min, r_max, m_min, log_warnings);
  positions_ = std::move(positions);
  velocities_ = std::move(velocities);
  radii_ = std::move(radii);
  masses_ = std::move(masses);
  start(cells);
}

void Particles::validate_state(const ParticleState& state, const ParticlesConfig& config) { validate(state, config); }

// The grid, the time-step warning and the memory check, from the radii and masses' extremes.
// Returns the number of grid cells.
std::int64_t Particles::configure(float r_min, float r_max, float m_min, bool log_warnings) {
  const ParticlesConfig& config = config_;
  const Device device = device_;
  const double cutoff = 2.0 * static_cast<double>(r_max);
  double cell = config.cell_size > 0 ? config.cell_size : cutoff;
  require(finite(config.cell_size) && config.cell_size >= 0, "cell_size must be >= 0 (0 picks twice the largest radius)");
  require(cell >= cutoff, fmt::format("cell_size {} is smaller than twice the largest radius ({}): contacts would be missed",
                                      cell, cutoff));
  std::int64_t cells = 1;
  for (int a = 0; a < 3; ++a) {
    const double length = config.box_hi[a] - config.box_lo[a];
    const double dims = std::max(1.0, std::floor(length / cell));
    require(dims <= static_cast<double>(max_cells), fmt::format("the grid is too fine: {} cells along axis {}", dims, a));
    dims_[a] = static_cast<std::int64_t>(dims);
    if (config.periodic) {
      require(dims_[a] >= 3, fmt::format("a periodic box needs at least 3 cells of size >= {} per axis, but axis {} has "
                                         "length {}: use a larger box or smaller particles",
                                         cutoff, a, length));
    }
    cells *= dims_[a];
    require(cells <= max_cells, fmt::format("the grid is too fine: more than 2^30 cells (cell size {} in box "
                                            "[{}, {}] x [{}, {}] x [{}, {}]): set a larger cell_size",
                                            cell, config.box_lo[0], config.box_hi[0], config.box_lo[1],
                                            config.box_hi[1], config.box_lo[2], config.box_hi[2]));
  }
  cell_size_ = cell;
  cell_bits_ = 1;
  while ((std::int64_t{1} << cell_bits_) < cells) ++cell_bits_;

  stable_dt_ = stable_time_step(config, m_min, r_min);
  if (config.dt > 0.2 * stable_dt_) {
    std::string message = fmt::format(
        "{}: dt = {:g} is too large for the contact stiffness: the stable limit is dt_crit = {:g} (lightest pair, "
        "stiffness {:g}, damping ratio {:g}); use dt <= {:g} (dt_crit / 5) for accurate contacts",
        op, config.dt, stable_dt_, config.stiffness, config.damping_ratio, 0.2 * stable_dt_);
    if (config.dt > stable_dt_) message += "; this run is unstable";
    warnings_.push_back(message);
    if (log_warnings) TESSEL_LOG_WARN(message);
  }

  // Memory: checked before allocating anything.
  check_memory(n_, cells, device);
  sort_temp_bytes_ = backend_sort_temp_bytes(device, n_, cell_bits_);

  return cells;
}

// Allocates the per-step buffers around the uploaded state and computes the initial forces.
void Particles::start(std::int64_t cells) {
  const Device device = device_;
  accelerations_ = zeros({3, n_}, DType::float32, device, stream_);
  ids_ = arange(0, n_, 1, DType::int32, device, stream_);
  pair_contacts_ = zeros({n_}, DType::int32, device, stream_);
  wall_contacts_ = zeros({n_}, DType::uint8, device, stream_);
  spring_energy_ = zeros({n_}, DType::float32, device, stream_);
  sorted_pos_ = Buffer::allocate(device, n_ * 16, stream_);
  sorted_vel_ = Buffer::allocate(device, n_ * 16, stream_);
  sorted_acc_ = Buffer::allocate(device, n_ * 16, stream_);
  sorted_id_ = Buffer::allocate(device, n_ * 4, stream_);
  for (int k = 0; k < 2; ++k) {
    keys_[k] = Buffer::allocate(device, n_ * 4, stream_);
    slots_[k] = Buffer::allocate(device, n_ * 4, stream_);
  }
  cells_ = Buffer::allocate(device, cells * 8, stream_);
  sort_temp_ = Buffer::allocate(device, static_cast<std::int64_t>(std::max<std::size_t>(sort_temp_bytes_, 1)), stream_);

  bin(false, false);
  forces(false);
}

namespace {

backend::SimParams make_params(const ParticlesConfig& c, const std::array<std::int64_t, 3>& dims, int bits) {
  backend::SimParams p;
  for (int a = 0; a < 3; ++a) {
    p.lo[a] = static_cast<float>(c.box_lo[a]);
    p.hi[a] = static_cast<float>(c.box_hi[a]);
    p.length[a] = static_cast<float>(c.box_hi[a] - c.box_lo[a]);
    p.dims[a] = static_cast<int>(dims[a]);
    p.inv_cell[a] = static_cast<float>(static_cast<double>(dims[a]) / (c.box_hi[a] - c.box_lo[a]));
    p.gravity[a] = static_cast<float>(c.gravity[a]);
  }
  p.walls = c.walls ? 1 : 0;
  p.periodic = c.periodic ? 1 : 0;
  p.hertz = c.model == ContactModel::hertz ? 1 : 0;
  p.stiffness = static_cast<float>(c.stiffness);
  p.damping_ratio = static_cast<float>(c.damping_ratio);
  p.friction = static_cast<float>(c.friction);
  p.tangential_damping = static_cast<float>(c.tangential_damping);
  p.dt = static_cast<float>(c.dt);
  p.cell_bits = bits;
  return p;
}

}  // namespace

// Pointers into the members, rebuilt per call (cheap).
backend::SimArrays Particles::arrays() const {
  backend::SimArrays a;
  a.n = n_;
  a.cells = dims_[0] * dims_[1] * dims_[2];
  a.x = positions_.data_as<float>();
  a.y = a.x + n_;
  a.z = a.y + n_;
  a.vx = velocities_.data_as<float>();
  a.vy = a.vx + n_;
  a.vz = a.vy + n_;
  a.ax = accelerations_.data_as<float>();
  a.ay = a.ax + n_;
  a.az = a.ay + n_;
  a.radius = radii_.data_as<float>();
  a.mass = masses_.data_as<float>();
  a.id = ids_.data_as<std::int32_t>();
  a.pair_contacts = pair_contacts_.data_as<std::int32_t>();
  a.wall_contacts = wall_contacts_.data_as<std::uint8_t>();
  a.spring_energy = spring_energy_.data_as<float>();
  a.sorted_pos = static_cast<float*>(sorted_pos_->data());
  a.sorted_vel = static_cast<float*>(sorted_vel_->data());
  a.sorted_acc = static_cast<float*>(sorted_acc_->data());
  a.sorted_id = static_cast<std::int32_t*>(sorted_id_->data());
  for (int k = 0; k < 2; ++k) {
    a.keys[k] = static_cast<std::uint32_t*>(keys_[k]->data());
    a.slots[k] = static_cast<std::int32_t*>(slots_[k]->data());
  }
  a.cells_range = static_cast<std::int32_t*>(cells_->data());
  a.sort_temp = sort_temp_->data();
  a.sort_temp_bytes = sort_temp_bytes_;
  return a;
}

void Particles::bin(bool kick, bool gather_acc) {
  const backend::SimArrays a = arrays();
  const backend::SimParams p = make_params(config_, dims_, cell_bits_);
  if (device_.is_cpu()) {
    positions_.wait();
    velocities_.wait();
    backend::cpu::bin(p, a, kick, gather_acc, stream_);
  } else {
#if defined(TESSEL_HAVE_CUDA)
    backend::cuda::bin(p, a, kick, gather_acc, stream_);
#endif
  }
}

void Particles::forces(bool finish_kick) {
  const backend::SimArrays a = arrays();
  const backend::SimParams p = make_params(config_, dims_, cell_bits_);
  if (device_.is_cpu()) {
    backend::cpu::forces(p, a, finish_kick, stream_);
  } else {
#if defined(TESSEL_HAVE_CUDA)
    backend::cuda::forces(p, a, finish_kick, stream_);
#endif
  }
}

void Particles::write_back() {
  const backend::SimArrays a = arrays();
  const backend::SimParams p = make_params(config_, dims_, cell_bits_);
  if (device_.is_cpu()) {
    backend::cpu::write_back(p, a, stream_);
  } else {
#if defined(TESSEL_HAVE_CUDA)
    backend::cuda::write_back(p, a, stream_);
#endif
  }
}

ParticleState Particles::state() const {
  const std::vector<float> pos = positions_.to(Device::cpu(), stream_).to_vector<float>();
  const std::vector<float> vel = velocities_.to(Device::cpu(), stream_).to_vector<float>();
  const std::vector<float> radius = radii_.to(Device::cpu(), stream_).to_vector<float>();
  const std::vector<float> mass = masses_.to(Device::cpu(), stream_).to_vector<float>();
  const std::vector<std::int32_t> id = ids_.to(Device::cpu(), stream_).to_vector<std::int32_t>();
  ParticleState s;
  const auto n = static_cast<std::size_t>(n_);
  for (auto* v : {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.radius, &s.mass}) v->assign(n, 0.0f);
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = static_cast<std::size_t>(id[k]);
    s.x[i] = pos[k];
    s.y[i] = pos[n + k];
    s.z[i] = pos[2 * n + k];
    s.vx[i] = vel[k];
    s.vy[i] = vel[n + k];
    s.vz[i] = vel[2 * n + k];
    s.radius[i] = radius[k];
    s.mass[i] = mass[k];
  }
  return s;
}

void Particles::step(std::int64_t count) {
  TESSEL_RANGE("sim::Particles::step");
  require(count >= 0, fmt::format("step count must be >= 0, got {}", count));
  if (count == 0) return;
  if (device_.is_cuda()) {
    // Writes the user made through the views on other streams come first.
    positions_.storage()->wait_on_stream(stream_);
    velocities_.storage()->wait_on_stream(stream_);
  }
  for (std::int64_t k = 0; k < count; ++k) {
    bin(true, false);
    forces(true);
    ++steps_;
  }
  if (device_.is_cuda()) {
    positions_.storage()->record_pending_write(stream_);
    velocities_.storage()->record_pending_write(stream_);
  }
}

Diagnostics Particles::diagnostics() {
  TESSEL_RANGE("sim::Particles::diagnostics");
  const backend::SimArrays a = arrays();
  const backend::SimParams p = make_params(config_, dims_, cell_bits_);
  const bool check_box = !config_.walls && !config_.periodic;
  backend::DiagnosticSums sums;
  if (device_.is_cpu()) {
    positions_.wait();
    velocities_.wait();
    sums = backend::cpu::diagnostics(p, a, check_box, stream_);
  } else {
#if defined(TESSEL_HAVE_CUDA)
    positions_.storage()->wait_on_stream(stream_);
    velocities_.storage()->wait_on_stream(stream_);
    sums = backend::cuda::diagnostics(p, a, check_box, stream_);
#endif
  }
  if (sums.first_bad >= 0) {
    const std::int64_t slot = sums.first_bad;
    const std::int64_t i = ids_.index({slot}).to(Device::cpu(), stream_).item<std::int32_t>();
    const std::vector<float> pos = positions_.index({Slice(none, none), slot}).to(Device::cpu(), stream_).to_vector<float>();
    const std::vector<float> vel = velocities_.index({Slice(none, none), slot}).to(Device::cpu(), stream_).to_vector<float>();
    const bool finite_state = std::all_of(pos.begin(), pos.end(), [](float v) { return std::isfinite(v); }) &&
                              std::all_of(vel.begin(), vel.end(), [](float v) { return std::isfinite(v); });
    if (!finite_state) {
      throw ValueError(fmt::format("{}: particle {} has a non-finite state at step {} (position {}, velocity {}): the "
                                   "time step {:g} may be too large (stable limit {:g})",
                                   op, i, steps_, position_str(pos[0], pos[1], pos[2]), position_str(vel[0], vel[1], vel[2]),
                                   config_.dt, stable_dt_));
    }
    throw ValueError(fmt::format("{}: particle {} left the box [{}, {}] x [{}, {}] x [{}, {}] at step {}: position {}, "
                                 "velocity {} (walls are off and the box is not periodic)",
                                 op, i, config_.box_lo[0], config_.box_hi[0], config_.box_lo[1], config_.box_hi[1],
                                 config_.box_lo[2], config_.box_hi[2], steps_, position_str(pos[0], pos[1], pos[2]),
                                 position_str(vel[0], vel[1], vel[2])));
  }
  Diagnostics d;
  d.step = steps_;
  d.time = time();
  d.kinetic = sums.kinetic;
  d.potential_gravity = sums.potential_gravity;
  d.potential_spring = sums.potential_spring;
  d.momentum = {sums.momentum[0], sums.momentum[1], sums.momentum[2]};
  d.contacts = sums.pair_contacts_twice / 2;
  d.wall_contacts = sums.wall_contacts;
  return d;
}

NeighborList Particles::neighbor_list() {
  TESSEL_RANGE("sim::Particles::neighbor_list");
  // The grid at the current positions: reorder without a kick and write the state back as is.
  bin(false, true);
  write_back();
  const backend::SimArrays a = arrays();
  const backend::SimParams p = make_params(config_, dims_, cell_bits_);
  NeighborList list;
  list.offsets.assign(static_cast<std::size_t>(n_ + 1), 0);
  Array counts = empty({n_}, DType::int64, device_, stream_);
  if (device_.is_cpu()) {
    backend::cpu::neighbor_counts(p, a, counts.data_as<std::int64_t>(), stream_);
  } else {
#if defined(TESSEL_HAVE_CUDA)
    backend::cuda::neighbor_counts(p, a, counts.data_as<std::int64_t>(), stream_);
    counts.storage()->record_pending_write(stream_);
#endif
  }
  const std::vector<std::int64_t> host_counts = counts.to(Device::cpu(), stream_).to_vector<std::int64_t>();
  std::partial_sum(host_counts.begin(), host_counts.end(), list.offsets.begin() + 1);
  const std::int64_t total = list.offsets.back();
  Array offsets = from_host(list.offsets.data(), {n_ + 1}, DType::int64, device_, stream_);
  Array out = empty({std::max<std::int64_t>(total, 1)}, DType::int32, device_, stream_);
  if (device_.is_cpu()) {
    backend::cpu::neighbor_fill(p, a, offsets.data_as<std::int64_t>(), out.data_as<std::int32_t>(), stream_);
  } else {
#if defined(TESSEL_HAVE_CUDA)
    offsets.storage()->wait_on_stream(stream_);
    backend::cuda::neighbor_fill(p, a, offsets.data_as<std::int64_t>(), out.data_as<std::int32_t>(), stream_);
    out.storage()->record_pending_write(stream_);
#endif
  }
  list.indices = out.to(Device::cpu(), stream_).to_vector<std::int32_t>();
  list.indices.resize(static_cast<std::size_t>(total));
  return list;
}

// ---- initial states ----
namespace {

ParticleState empty_state(std::int64_t n) {
  ParticleState s;
  const auto un = static_cast<std::size_t>(n);
  for (auto* v : {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.radius, &s.mass}) v->assign(un, 0.0f);
  return s;
}

void check_init(const InitOptions& o, const char* name) {
  if (o.n <= 0) throw ValueError(fmt::format("sim::{}: n must be positive, got {}", name, o.n));
  const std::int64_t host_have = available_bytes(Device::cpu());
  if (o.n > host_have / 32) {  // 8 floats per particle
    throw OutOfMemory(fmt::format("sim::{}: the initial state of {} particles needs {:.4g} GiB of host memory but the "
                                  "host has {}",
                                  name, o.n, static_cast<double>(o.n) * 32.0 / (1024.0 * 1024.0 * 1024.0),
                                  format_bytes(host_have)));
  }
  if (!(o.radius > 0) || !std::isfinite(o.radius)) {
    throw ValueError(fmt::format("sim::{}: radius must be positive, got {}", name, o.radius));
  }
  if (!(o.polydispersity >= 0 && o.polydispersity < 1)) {
    throw ValueError(fmt::format("sim::{}: polydispersity must be in [0, 1), got {}", name, o.polydispersity));
  }
  if (!(o.density > 0) || !std::isfinite(o.density)) {
    throw ValueError(fmt::format("sim::{}: density must be positive, got {}", name, o.density));
  }
}

void set_radii(ParticleState& s, const InitOptions& o, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(1.0 - o.polydispersity, 1.0 + o.polydispersity);
  for (std::size_t i = 0; i < s.radius.size(); ++i) {
    const double r = o.polydispersity > 0 ? o.radius * u(rng) : o.radius;
    s.radius[i] = static_cast<float>(r);
    s.mass[i] = static_cast<float>(o.density * 4.0 / 3.0 * pi * r * r * r);
  }
}

}  // namespace

BenchmarkSetup benchmark_setup(std::int64_t n, std::uint64_t seed) {
  if (n <= 0) throw ValueError("sim::benchmark_setup: n must be positive, got " + std::to_string(n));
  ParticlesConfig config;
  const double side = std::cbrt(static_cast<double>(n) / 1e6);  // the density of 1e6 in the unit box
  config.box_hi = {side, side, side};
  config.walls = true;
  config.model = ContactModel::linear;
  config.stiffness = 1000.0;
  config.damping_ratio = 0.3;
  config.dt = 1e-4;
  InitOptions init;
  init.n = n;
  init.radius = 0.004;
  init.density = 1000.0;
  init.speed = 0.05;
  init.seed = seed;
  return {init_gas(init, config), config};
}

ParticleState init_gas(const InitOptions& o, const ParticlesConfig& c) {
  check_init(o, "init_gas");
  ParticleState s = empty_state(o.n);
  std::mt19937_64 rng(o.seed);
  set_radii(s, o, rng);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double r_max = o.radius * (1.0 + o.polydispersity);
  std::vector<float>* pos[3] = {&s.x, &s.y, &s.z};
  std::vector<float>* vel[3] = {&s.vx, &s.vy, &s.vz};
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    for (int a = 0; a < 3; ++a) {
      const double margin = c.periodic ? 0.0 : r_max;
      const double lo = c.box_lo[a] + margin, hi = c.box_hi[a] - margin;
      if (!(hi > lo)) throw ValueError(fmt::format("sim::init_gas: the box is smaller than a particle on axis {}", a));
      (*pos[a])[i] = static_cast<float>(lo + (hi - lo) * unit(rng));
      (*vel[a])[i] = static_cast<float>(o.speed * (2.0 * unit(rng) - 1.0));
    }
  }
  return s;
}

ParticleState init_block(const InitOptions& o, const ParticlesConfig& c) {
  check_init(o, "init_block");
  const double r_max = o.radius * (1.0 + o.polydispersity);
  const double spacing = 2.02 * r_max;
  const std::int64_t side = static_cast<std::int64_t>(std::ceil(std::cbrt(static_cast<double>(o.n))));
  std::int64_t per[3];
  for (int a = 0; a < 2; ++a) {
    const double fit = std::floor((c.box_hi[a] - c.box_lo[a] - 2 * r_max) / spacing) + 1;
    per[a] = std::max<std::int64_t>(1, std::min<std::int64_t>(side, static_cast<std::int64_t>(fit)));
  }
  per[2] = (o.n + per[0] * per[1] - 1) / (per[0] * per[1]);
  const double height = static_cast<double>(per[2] - 1) * spacing + 2 * r_max;
  if (height > c.box_hi[2] - c.box_lo[2]) {
    throw ValueError(fmt::format("sim::init_block: a block of {} particles of radius {} ({} x {} x {}) does not fit in "
                                 "the box height {}",
                                 o.n, o.radius, per[0], per[1], per[2], c.box_hi[2] - c.box_lo[2]));
  }
  ParticleState s = empty_state(o.n);
  std::mt19937_64 rng(o.seed);
  set_radii(s, o, rng);
  std::uniform_real_distribution<double> jitter(-0.005 * r_max, 0.005 * r_max);
  const double x0 = 0.5 * (c.box_lo[0] + c.box_hi[0]) - 0.5 * static_cast<double>(per[0] - 1) * spacing;
  const double y0 = 0.5 * (c.box_lo[1] + c.box_hi[1]) - 0.5 * static_cast<double>(per[1] - 1) * spacing;
  const double z_top = c.box_hi[2] - r_max - 0.05 * (c.box_hi[2] - c.box_lo[2] - height);
  for (std::int64_t i = 0; i < o.n; ++i) {
    const std::int64_t ix = i % per[0], iy = (i / per[0]) % per[1], iz = i / (per[0] * per[1]);
    const auto k = static_cast<std::size_t>(i);
    s.x[k] = static_cast<float>(x0 + static_cast<double>(ix) * spacing + jitter(rng));
    s.y[k] = static_cast<float>(y0 + static_cast<double>(iy) * spacing + jitter(rng));
    s.z[k] = static_cast<float>(z_top - static_cast<double>(iz) * spacing + jitter(rng));
  }
  return s;
}

ParticleState init_collision(const InitOptions& o, const ParticlesConfig& c) {
  check_init(o, "init_collision");
  if (o.n < 2) throw ValueError(fmt::format("sim::init_collision: needs at least 2 particles, got {}", o.n));
  const double r_max = o.radius * (1.0 + o.polydispersity);
  const double spacing = 2.02 * r_max;
  const std::int64_t half = o.n / 2;
  // Lattice points of a ball, nearest to the center first: the first `count` of them.
  const std::int64_t reach = static_cast<std::int64_t>(std::ceil(std::cbrt(3.0 * static_cast<double>(o.n - half) / (4 * pi)))) + 2;
  std::vector<std::array<double, 3>> points;
  for (std::int64_t i = -reach; i <= reach; ++i) {
    for (std::int64_t j = -reach; j <= reach; ++j) {
      for (std::int64_t k = -reach; k <= reach; ++k) {
        points.push_back({static_cast<double>(i) * spacing, static_cast<double>(j) * spacing, static_cast<double>(k) * spacing});
      }
    }
  }
  std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
    return a[0] * a[0] + a[1] * a[1] + a[2] * a[2] < b[0] * b[0] + b[1] * b[1] + b[2] * b[2];
  });
  const std::int64_t count = o.n - half;
  const auto& far = points[static_cast<std::size_t>(count - 1)];
  const double ball = std::sqrt(far[0] * far[0] + far[1] * far[1] + far[2] * far[2]) + r_max;
  const double lx = c.box_hi[0] - c.box_lo[0];
  const double centers[2] = {c.box_lo[0] + 0.3 * lx, c.box_lo[0] + 0.7 * lx};
  for (int a = 0; a < 3; ++a) {
    const double room = a == 0 ? 0.2 * lx : 0.5 * (c.box_hi[a] - c.box_lo[a]);
    if (ball > room) {
      throw ValueError(fmt::format("sim::init_collision: two balls of {} particles of radius {} (ball radius {:.4g}) do "
                                   "not fit in the box",
                                   count, o.radius, ball));
    }
  }
  ParticleState s = empty_state(o.n);
  std::mt19937_64 rng(o.seed);
  set_radii(s, o, rng);
  std::uniform_real_distribution<double> jitter(-0.005 * r_max, 0.005 * r_max);
  const double yc = 0.5 * (c.box_lo[1] + c.box_hi[1]), zc = 0.5 * (c.box_lo[2] + c.box_hi[2]);
  for (std::int64_t i = 0; i < o.n; ++i) {
    const int body = i < half ? 0 : 1;
    const auto& pt = points[static_cast<std::size_t>(body == 0 ? i : i - half)];
    const auto k = static_cast<std::size_t>(i);
    s.x[k] = static_cast<float>(centers[body] + pt[0] + jitter(rng));
    s.y[k] = static_cast<float>(yc + pt[1] + jitter(rng));
    s.z[k] = static_cast<float>(zc + pt[2] + jitter(rng));
    s.vx[k] = static_cast<float>(body == 0 ? o.speed : -o.speed);
  }
  return s;
}

void prepare_output_directory(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw ValueError("sim: the output directory is empty");
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path)) {
    throw ValueError(fmt::format("sim: cannot create the output directory '{}': {}", path,
                                 ec ? ec.message() : std::string("a file of that name exists")));
  }
  const std::string probe = (fs::path(path) / ".tessel_write_test").string();
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (f == nullptr) {
    throw ValueError(fmt::format("sim: the output directory '{}' is not writable: {}", path, std::strerror(errno)));
  }
  std::fclose(f);
  std::remove(probe.c_str());
}

}  // namespace tessel::sim

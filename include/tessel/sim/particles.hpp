#pragma once
// sim::Particles: a discrete-element (DEM) simulation of soft spheres.
//
// - Structure-of-arrays float32 state (positions, velocities, accelerations, radii, masses) in
//   tessel Arrays, so positions() and velocities() are zero-copy views of the live state.
// - Neighbor search on a uniform grid: cell = floor((x - box_lo) / cell_size) (clamped to the
//   grid, so coordinates below box_lo, negative ones included, work), particles sorted by linear
//   cell index every step (CUB radix sort on the GPU, a counting sort on the CPU), cell
//   start/end ranges, and positions/velocities gathered into sorted order for locality.
// - Contacts: linear or Hertzian spring-dashpot normal force, optional Coulomb-limited viscous
//   tangential friction, gravity, box walls (contacts with the same law), periodic boundaries.
// - Velocity-Verlet integration. Diagnostics (energies, momentum, contact counts) are device
//   reductions read back only when asked.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessel/array/array.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {
struct SimArrays;
}

namespace tessel::sim {

enum class ContactModel { linear, hertz };

struct ParticlesConfig {
  std::array<double, 3> box_lo{0.0, 0.0, 0.0};
  std::array<double, 3> box_hi{1.0, 1.0, 1.0};
  bool walls = true;      // the six box faces push particles back (same contact law, wall mass infinite)
  bool periodic = false;  // periodic in all three axes (requires walls = false)
  std::array<double, 3> gravity{0.0, 0.0, -9.81};
  ContactModel model = ContactModel::linear;
  // Linear: normal spring constant k (N/m), F = k * overlap.
  // Hertz: F = k * sqrt(R_eff * overlap) * overlap (k plays the role of 4/3 E*).
  double stiffness = 2000.0;
  // Normal damping ratio zeta in [0, 1): the dashpot is 2 * zeta * sqrt(m_eff * k_n). For the
  // linear model the restitution coefficient is exp(-pi * zeta / sqrt(1 - zeta^2)).
  double damping_ratio = 0.3;
  double friction = 0.0;             // Coulomb coefficient mu; 0 turns tangential forces off
  double tangential_damping = 0.0;   // gamma_t (N s/m); 0: the normal dashpot of the pair
  double dt = 1e-4;
  double cell_size = 0.0;            // 0: twice the largest radius (the smallest correct size)
};

// Host-side initial state, one entry per particle.
struct ParticleState {
  std::vector<float> x, y, z, vx, vy, vz, radius, mass;
  std::int64_t size() const { return static_cast<std::int64_t>(x.size()); }
};

struct Diagnostics {
  std::int64_t step = 0;
  double time = 0;
  double kinetic = 0;            // sum 1/2 m v^2
  double potential_gravity = 0;  // sum -m g . (x - box_lo)
  double potential_spring = 0;   // elastic energy stored in the overlaps (pairs and walls)
  std::array<double, 3> momentum{0, 0, 0};
  std::int64_t contacts = 0;       // particle-particle contacts (pairs)
  std::int64_t wall_contacts = 0;  // particle-wall contacts
  double total_energy() const { return kinetic + potential_gravity + potential_spring; }
};

// Contacts found by the grid search, in original particle indices: the neighbors of particle i
// (dist < r_i + r_j, minimum image when periodic) are indices[offsets[i] .. offsets[i+1]).
struct NeighborList {
  std::vector<std::int64_t> offsets;
  std::vector<std::int32_t> indices;
};

class Particles {
 public:
  // Validates the state and the configuration (ValueError naming the first bad particle or
  // setting), checks that the state fits in memory (OutOfMemory before allocating), uploads the
  // state and computes the initial forces. A time step above a fifth of the stable limit adds a
  // warning (warnings(), and the log).
  Particles(const ParticleState& state, const ParticlesConfig& config, Device device = default_device(),
            const OptionalStream& stream = std::nullopt);
  // Owns its state: moves, never copies.
  Particles(Particles&&) = default;
  Particles& operator=(Particles&&) = default;
  Particles(const Particles&) = delete;
  Particles& operator=(const Particles&) = delete;

  // Advances `count` velocity-Verlet steps. Asynchronous on the GPU.
  void step(std::int64_t count = 1);
  // Reduces energies, momentum and contact counts (on the device) and reads them back. Also the
  // check point: ValueError for a non-finite position or velocity, or for a particle outside the
  // box when walls are off and the box is not periodic, naming the particle and its position.
  Diagnostics diagnostics();
  // The grid search at the current positions (for tests; reads back to the host).
  NeighborList neighbor_list();

  // Views of the live state (float32, device memory on the GPU). The state is kept sorted by
  // grid cell (each step reorders it, in place), so row k belongs to particle ids()[k].
  // positions() and velocities() are (n, 3) views of the SoA storage (strides (1, n)): writing
  // through them between steps is allowed, and the next step sees it (accelerations are those of
  // the last step). radii(), masses() and ids() are (n,) copies, taken on the simulation's stream:
  // writing those would break what the constructor checked (cell size against the largest
  // radius, positive masses, ids that index the state).
  Array positions() const { return positions_.T(); }
  Array velocities() const { return velocities_.T(); }
  Array radii() const { return radii_.copy(stream_); }
  Array masses() const { return masses_.copy(stream_); }
  Array ids() const { return ids_.copy(stream_); }  // int32: the original index of each row
  // A host copy of the state in the original particle order.
  ParticleState state() const;

  std::int64_t size() const { return n_; }
  Device device() const { return device_; }
  const Stream& stream() const { return stream_; }
  const ParticlesConfig& config() const { return config_; }
  std::int64_t steps_done() const { return steps_; }
  double time() const { return static_cast<double>(steps_) * config_.dt; }
  // Verlet stability limit for the stiffest, lightest contact (docs/guide/simulation.rst).
  double stable_dt() const { return stable_dt_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  std::array<std::int64_t, 3> grid_dims() const { return dims_; }
  double cell_size() const { return cell_size_; }

  // Bytes of memory a simulation of n particles over `cells` grid cells needs on `device`.
  static std::int64_t required_bytes(std::int64_t n, std::int64_t cells, Device device);
  // OutOfMemory, naming the need and what is available, when n particles over `cells` cells do
  // not fit on `device` (the constructor calls it before allocating anything).
  static void check_memory(std::int64_t n, std::int64_t cells, Device device);

 private:
  // Runs this class's force pass on each rank's owned + ghost particles and takes the per-row
  // results (accelerations, contact counts, spring energies) back, on the device.
  friend class DistributedParticles;
  // log_warnings = false: warnings() is filled but nothing is logged (DistributedParticles builds
  // one of these per step and logs once).
  Particles(const ParticleState& state, const ParticlesConfig& config, Device device, const OptionalStream& stream,
            bool log_warnings);
  // DistributedParticles' force pass, from its device arrays as they are (positions and velocities
  // (3, n) C-contiguous float32, radii and masses (n,), on one device, its current stream; the
  // arrays become this object's state), with the radius and mass extremes of the whole state.
  Particles(Array positions, Array velocities, Array radii, Array masses, const ParticlesConfig& config, float r_min,
            float r_max, float m_min, bool log_warnings);
  // The constructor's checks of a state and configuration (ValueError / ShapeError naming the
  // first bad particle or setting), without building anything.
  static void validate_state(const ParticleState& state, const ParticlesConfig& config);
  std::int64_t configure(float r_min, float r_max, float m_min, bool log_warnings);
  void start(std::int64_t cells);
  void bin(bool kick, bool gather_acc);
  void forces(bool finish_kick);
  void write_back();
  backend::SimArrays arrays() const;

  std::int64_t n_ = 0;
  Device device_;
  Stream stream_;
  ParticlesConfig config_;
  double stable_dt_ = 0;
  std::vector<std::string> warnings_;
  std::int64_t steps_ = 0;
  std::array<std::int64_t, 3> dims_{1, 1, 1};
  double cell_size_ = 0;
  int cell_bits_ = 1;
  Array positions_, velocities_, accelerations_;  // (3, n) SoA
  Array radii_, masses_, ids_;                    // (n,)
  Array pair_contacts_, wall_contacts_;           // per particle (int32, uint8), from the last force evaluation
  Array spring_energy_;                           // per particle, from the last force evaluation
  std::shared_ptr<Buffer> sorted_pos_, sorted_vel_, sorted_acc_;  // 4 floats per particle
  std::shared_ptr<Buffer> sorted_id_;
  std::shared_ptr<Buffer> keys_[2], slots_[2];       // cell keys and old slots (sort double buffers)
  std::shared_ptr<Buffer> cells_;                    // per cell: [start, end) in sorted order
  std::shared_ptr<Buffer> sort_temp_;
  std::size_t sort_temp_bytes_ = 0;
};

// ---- initial states (host, deterministic for a seed) ----
struct InitOptions {
  std::int64_t n = 1000;
  double radius = 0.004;
  double polydispersity = 0.0;  // radii uniform in radius * [1 - p, 1 + p]
  double density = 1000.0;      // mass = density * 4/3 pi r^3
  double speed = 0.05;          // gas: velocities uniform in [-speed, speed]; collision: approach speed
  std::uint64_t seed = 1;
};
// Uniform random positions in the box (kept a radius inside), velocities uniform in
// [-speed, speed]. Overlaps are allowed, as in the benchmark configuration.
ParticleState init_gas(const InitOptions& options, const ParticlesConfig& config);
// The benchmark configuration of issue 8 (bench/sim_bench.cpp, `tessel bench`, Python's
// Particles.benchmark_setup and the Numba peer share it): n particles of radius 0.004 at uniform
// random positions in a walled box of n / 1e6 unit volumes (the unit box for 1e6), velocities
// uniform in [-0.05, 0.05], linear spring-dashpot (stiffness 1000, damping ratio 0.3, density
// 1000), gravity, dt = 1e-4.
struct BenchmarkSetup {
  ParticleState state;
  ParticlesConfig config;
};
BenchmarkSetup benchmark_setup(std::int64_t n, std::uint64_t seed = 2026);
// A jittered cubic lattice block in the upper part of the box, at rest (falls under gravity).
ParticleState init_block(const InitOptions& options, const ParticlesConfig& config);
// Two lattice balls of n/2 particles each flying at each other along x.
ParticleState init_collision(const InitOptions& options, const ParticlesConfig& config);

// Creates `path` (and parents) and checks that a file can be written there: ValueError naming
// the path and the reason otherwise. The CLI calls it before running.
void prepare_output_directory(const std::string& path);

}  // namespace tessel::sim

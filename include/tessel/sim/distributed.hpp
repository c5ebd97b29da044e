#pragma once
// sim::DistributedParticles: the particle simulation split across the ranks of a
// dist::Communicator.
//
// Decomposition: slabs along one axis of the box. Slabs first, not a 3-D grid: a slab has two
// neighbours (a grid cell up to 26), so the halo is two messages per step and a particle's owner
// is one comparison against the slab bounds; their cost is more halo surface per rank at high
// rank counts, and the rank count is limited by box length / cutoff. A 3-D grid is future work.
//
// Each rank owns the particles whose coordinate along the axis lies in its slab. A step is
//   1. the first half of velocity Verlet on the owned particles (v += dt/2 a; x += dt v; wrap),
//   2. migration: particles that left the slab go to the rank that owns their new position,
//   3. the halo: owned particles within the interaction cutoff (twice the largest radius) of a
//      slab face go, as ghosts, to the neighbour across that face (periodic boxes wrap across the
//      first and last rank), over grouped send/recv,
//   4. sim::Particles' own force pass on owned + ghost particles (the same kernels, the same
//      global box, grid and walls), then the second half kick on the owned particles.
// The forces on an owned particle see every particle within the cutoff, so the physics is that of
// the single-process run; only the order of the force sums differs (so results agree within
// float32 rounding, which the chaotic contact dynamics then amplifies over many steps).
//
// Diagnostics are summed over the owned particles of each rank and then over the ranks
// (all_reduce), with the per-rank particle counts. With rebalance_every = K > 0, every K steps
// the slab bounds move to the quantiles of the particles' coordinates (a global histogram), so
// each rank owns about n / size particles; slabs never get thinner than the cutoff.
//
// The owned state lives on the communicator's device as one (12, n) int32 record array (row 0 the
// ids, rows 1-11 the bits of x y z vx vy vz ax ay az radius mass), so a particle's wire record is
// its column: migration and the halo select columns with boolean masks (tessel array ops), send
// the selections as they are and concatenate what arrives, and the force pass takes its inputs
// from device arrays. Per step only counts come back to the host: the sizes of the mask
// selections, one int64 per peer from the count exchange, and the first bad particle's id.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/dist/dist.hpp"
#include "tessel/sim/particles.hpp"

namespace tessel::sim {

struct DistributedDiagnostics : Diagnostics {
  std::vector<std::int64_t> rank_counts;  // owned particles per rank
  std::vector<double> slab_bounds;        // size + 1 bounds along the axis (box_lo .. box_hi)
  // Largest rank count over the mean (1: perfectly balanced).
  double imbalance() const;
};

struct DistributedOptions {
  int axis = 0;                      // the axis the slabs cut (0, 1 or 2)
  std::int64_t rebalance_every = 0;  // 0: fixed, equal-width slabs
  bool time_phases = false;          // fill phase_times() (synchronizes the device per phase)
};

class DistributedParticles {
 public:
  // Every rank passes the same full initial state and configuration (for example
  // benchmark_setup(n) with the same seed); each keeps the particles in its slab. Collective.
  // ValueError when the slabs would be thinner than the interaction cutoff (naming the box
  // length, the rank count, the slab width and the cutoff), when the ranks pass states of
  // different sizes, or for a bad axis; the state and
  // configuration are checked as sim::Particles checks them.
  DistributedParticles(const ParticleState& state, const ParticlesConfig& config, dist::Communicator comm,
                       const DistributedOptions& options = {});

  // Advances `count` steps. Collective. Errors raise on every rank: ValueError naming the particle
  // when one has a non-finite state or left a box without walls or periodic wrap (checked before
  // each force pass); an error of one rank's force pass raises there and names that rank on the
  // others.
  void step(std::int64_t count = 1);
  // Totals over all ranks, on every rank. Collective. ValueError for a non-finite state, or for a
  // particle outside the box when walls are off and the box is not periodic (naming its id).
  DistributedDiagnostics diagnostics();
  // The whole state, in the original particle order, on `root` (an empty state elsewhere).
  // Collective.
  ParticleState gather(int root = 0);

  std::int64_t local_size() const { return records_.defined() ? records_.dim(1) : 0; }
  std::int64_t global_size() const { return n_global_; }
  std::int64_t ghost_count() const { return ghosts_; }  // ghosts received in the last step
  std::int64_t steps_done() const { return steps_; }
  double time() const { return static_cast<double>(steps_) * config_.dt; }
  const std::vector<double>& slab_bounds() const { return bounds_; }
  double cutoff() const { return cutoff_; }
  const dist::Communicator& communicator() const { return comm_; }
  const ParticlesConfig& config() const { return config_; }
  // sim::Particles' warnings for this configuration (the time step against the stable limit),
  // from this rank's first force pass (logged once, by rank 0).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Seconds spent in each part of step() since construction, summed over steps; measured only
  // with DistributedOptions::time_phases (which waits for the device at each phase boundary).
  struct PhaseTimes {
    double integrate = 0;  // the first half kick and drift
    double migrate = 0;    // owner masks, count and payload exchange, compaction
    double halo = 0;       // ghost masks, count and payload exchange (and the periodic dedup)
    double force = 0;      // sim::Particles' force pass on owned + ghosts, results taken back
  };
  const PhaseTimes& phase_times() const { return phase_times_; }

  // The width every slab needs (the cutoff) and the most ranks a box axis allows.
  static std::int64_t max_ranks(const ParticlesConfig& config, double cutoff, int axis);

 private:
  void compute_forces(bool finish_kick);
  void migrate();
  void rebalance();
  int owner_of(float coordinate) const;
  // With time_phases: waits for the device and adds the seconds since the last lap to `slot`.
  void lap(double& slot);

  dist::Communicator comm_;
  ParticlesConfig config_;  // cell_size fixed to the global one, so every rank uses the same grid
  DistributedOptions options_;
  std::int64_t n_global_ = 0;
  double cutoff_ = 0;
  std::vector<double> bounds_;
  std::int64_t steps_ = 0;
  std::int64_t ghosts_ = 0;
  std::vector<std::string> warnings_;
  PhaseTimes phase_times_;
  double lap_start_ = 0;  // seconds on the steady clock
  // The smallest and largest radius and the smallest mass of the whole state (the force pass's
  // stability warning and grid checks see the global values, as the single-process run does).
  float r_min_ = 0, r_max_ = 0, m_min_ = 0;
  // Owned particles, on the device: the (12, n) int32 records (see the top of this file); and from
  // the last force pass, contacts (int32, uint8) and spring energy (float32) per owned particle.
  Array records_;
  Array pair_contacts_, wall_contacts_, spring_energy_;
};

}  // namespace tessel::sim

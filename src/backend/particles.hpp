#pragma once
// The particle simulation's backends (internal): backend/cpu/particles.cpp (OpenMP) and
// backend/cuda/particles.cu implement the same functions. src/sim/particles.cpp owns the memory
// and the order of calls. The physics both use is in backend/particles_physics.hpp.
#include <cstddef>
#include <cstdint>

#include "tessel/core/stream.hpp"

namespace tessel::backend {

// Everything the kernels need, by value (float32 physics, as the state).
struct SimParams {
  float lo[3], hi[3], length[3];
  float inv_cell[3];     // cells per unit length, per axis
  int dims[3];           // cells per axis
  int walls = 1, periodic = 0;
  int hertz = 0;
  float stiffness = 0, damping_ratio = 0, friction = 0, tangential_damping = 0;
  float gravity[3];
  float dt = 0;
  int cell_bits = 1;     // bits of the largest linear cell index (the radix sort's end bit)
};

// Pointers to the state and the scratch. The state is kept in cell order: every step sorts the
// particles by cell, gathers them into the sorted scratch, and the force pass writes the whole
// state back in the new order (so every pass reads and writes nearly contiguously, and the
// state's buffers never move). id[s] is the original index of the particle in slot s.
struct SimArrays {
  std::int64_t n = 0;
  std::int64_t cells = 0;
  float *x = nullptr, *y = nullptr, *z = nullptr;
  float *vx = nullptr, *vy = nullptr, *vz = nullptr;
  float *ax = nullptr, *ay = nullptr, *az = nullptr;
  float *radius = nullptr, *mass = nullptr;
  std::int32_t* id = nullptr;
  // Per particle, from the last force pass. Two arrays, not one packed int: a particle can touch
  // any number of others (a large one among many small ones), up to n - 1 < 2^31 - 1 (the
  // particle count limit sim::Particles checks), and at most 6 walls.
  std::int32_t* pair_contacts = nullptr;
  std::uint8_t* wall_contacts = nullptr;
  float* spring_energy = nullptr;     // per particle: half its pair energies + its wall energies
  float* sorted_pos = nullptr;        // 4 per particle: x y z radius
  float* sorted_vel = nullptr;        // 4 per particle: vx vy vz mass
  float* sorted_acc = nullptr;        // 4 per particle: ax ay az (gathered only for write_back)
  std::int32_t* sorted_id = nullptr;
  std::uint32_t* keys[2] = {nullptr, nullptr};
  std::int32_t* slots[2] = {nullptr, nullptr};  // sort values: the slot each particle had before the sort
  std::int32_t* cells_range = nullptr;  // 2 per cell: start, end (empty: 0, 0)
  void* sort_temp = nullptr;
  std::size_t sort_temp_bytes = 0;
};

// Raw sums of the diagnostics (doubles) plus the first particle that fails the check.
struct DiagnosticSums {
  double kinetic = 0, potential_gravity = 0, potential_spring = 0;
  double momentum[3] = {0, 0, 0};
  long long pair_contacts_twice = 0;  // each pair is seen from both sides
  long long wall_contacts = 0;
  long long first_bad = -1;           // first slot with a non-finite state or out of the box
};

namespace cpu {
// Optional first half of velocity Verlet (v += dt/2 a; x += dt v; wrap), then cell keys, the sort,
// the gather into sorted order (accelerations too with gather_acc) and the cell ranges. Returns
// which of keys/ids holds the sorted order (ids: the old slot of each new slot).
int bin(const SimParams& p, const SimArrays& a, bool kick, bool gather_acc, const Stream& stream);
// Forces at the sorted positions: writes the state back in sorted order with the new
// accelerations, per-particle contact counts and spring energies; with finish_kick also
// v = v_half + dt/2 a.
void forces(const SimParams& p, const SimArrays& a, bool finish_kick, const Stream& stream);
// Writes the sorted copies back as the state without computing forces (after bin with gather_acc).
void write_back(const SimParams& p, const SimArrays& a, const Stream& stream);
// check_box: flag particles outside [lo, hi] (walls off, not periodic).
DiagnosticSums diagnostics(const SimParams& p, const SimArrays& a, bool check_box, const Stream& stream);
// Contact neighbor list from the grid (after bin), by original index: counts[id], then the lists.
void neighbor_counts(const SimParams& p, const SimArrays& a, std::int64_t* counts, const Stream& stream);
void neighbor_fill(const SimParams& p, const SimArrays& a, const std::int64_t* offsets, std::int32_t* out,
                   const Stream& stream);
std::size_t sort_temp_bytes(std::int64_t n, int cell_bits);
}  // namespace cpu

namespace cuda {
int bin(const SimParams& p, const SimArrays& a, bool kick, bool gather_acc, const Stream& stream);
void forces(const SimParams& p, const SimArrays& a, bool finish_kick, const Stream& stream);
void write_back(const SimParams& p, const SimArrays& a, const Stream& stream);
DiagnosticSums diagnostics(const SimParams& p, const SimArrays& a, bool check_box, const Stream& stream);
// offsets/counts/out are device pointers here.
void neighbor_counts(const SimParams& p, const SimArrays& a, std::int64_t* counts, const Stream& stream);
void neighbor_fill(const SimParams& p, const SimArrays& a, const std::int64_t* offsets, std::int32_t* out,
                   const Stream& stream);
std::size_t sort_temp_bytes(std::int64_t n, int cell_bits);
}  // namespace cuda

}  // namespace tessel::backend

// CPU backend of the particle simulation (OpenMP). Same steps as backend/cuda/particles.cu: the
// CUB radix sort becomes a stable counting sort by cell, which gives the cell ranges for free.
// Keys and ids: slot 0 holds each slot's key, slot 1 the sorted order (old slot per new slot).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/threads.hpp"
#include "backend/particles.hpp"
#include "backend/particles_physics.hpp"

namespace tessel::backend::cpu {

using namespace physics;

int bin(const SimParams& p, const SimArrays& a, bool kick, bool gather_acc, const Stream& /*stream*/) {
  const std::int64_t n = a.n;
  std::uint32_t* keys = a.keys[0];
#pragma omp parallel for schedule(static) num_threads(tessel::num_threads()) if (n > 4096 && !omp_in_parallel())
  for (std::int64_t i = 0; i < n; ++i) keys[i] = kick_drift_cell_key(p, a, i, kick);
  // Stable counting sort: cells_range[2c] counts, then prefix sums give [start, end).
  std::int32_t* range = a.cells_range;
  std::fill(range, range + 2 * a.cells, 0);
  for (std::int64_t i = 0; i < n; ++i) ++range[2 * static_cast<std::int64_t>(keys[i]) + 1];
  std::int32_t running = 0;
  for (std::int64_t c = 0; c < a.cells; ++c) {
    const std::int32_t count = range[2 * c + 1];
    range[2 * c] = running;
    running += count;
    range[2 * c + 1] = running;
  }
  std::vector<std::int32_t> cursor(static_cast<std::size_t>(a.cells));
  for (std::int64_t c = 0; c < a.cells; ++c) cursor[static_cast<std::size_t>(c)] = range[2 * c];
  std::int32_t* old_slots = a.slots[1];
  std::uint32_t* sorted_keys = a.keys[1];
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t s = cursor[keys[i]]++;
    old_slots[s] = static_cast<std::int32_t>(i);
    sorted_keys[s] = keys[i];
  }
#pragma omp parallel for schedule(static) num_threads(tessel::num_threads()) if (n > 4096 && !omp_in_parallel())
  for (std::int64_t s = 0; s < n; ++s) {
    const std::int64_t i = old_slots[s];  // the particle's slot before this sort
    float* pos = a.sorted_pos + 4 * s;
    float* vel = a.sorted_vel + 4 * s;
    pos[0] = a.x[i];
    pos[1] = a.y[i];
    pos[2] = a.z[i];
    pos[3] = a.radius[i];
    vel[0] = a.vx[i];
    vel[1] = a.vy[i];
    vel[2] = a.vz[i];
    vel[3] = a.mass[i];
    a.sorted_id[s] = a.id[i];
    if (gather_acc) {
      float* acc = a.sorted_acc + 4 * s;
      acc[0] = a.ax[i];
      acc[1] = a.ay[i];
      acc[2] = a.az[i];
      acc[3] = 0.0f;
    }
  }
  return 1;
}

void forces(const SimParams& p, const SimArrays& a, bool finish_kick, const Stream& /*stream*/) {
#pragma omp parallel for schedule(dynamic, 256) num_threads(tessel::num_threads()) if (a.n > 2048 && !omp_in_parallel())
  for (std::int64_t s = 0; s < a.n; ++s) force_slot(p, a, s, finish_kick);
}

void write_back(const SimParams& /*p*/, const SimArrays& a, const Stream& /*stream*/) {
#pragma omp parallel for schedule(static) num_threads(tessel::num_threads()) if (a.n > 4096 && !omp_in_parallel())
  for (std::int64_t s = 0; s < a.n; ++s) write_back_slot(a, s);
}

DiagnosticSums diagnostics(const SimParams& p, const SimArrays& a, bool check_box, const Stream& /*stream*/) {
  DiagnosticTerms total;
  long long first_bad = a.n;
#pragma omp parallel num_threads(tessel::num_threads()) if (a.n > 4096 && !omp_in_parallel())
  {
    DiagnosticTerms mine;
    long long my_first_bad = a.n;
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < a.n; ++i) {
      add_diagnostic_terms(p, a, i, mine);
      if (my_first_bad == a.n && bad_particle(p, a.x[i], a.y[i], a.z[i], a.vx[i], a.vy[i], a.vz[i], check_box)) {
        my_first_bad = i;  // static schedule: each thread's indices increase
      }
    }
#pragma omp critical(tessel_sim_diagnostics)
    {
      total = combine(total, mine);
      first_bad = std::min(first_bad, my_first_bad);
    }
  }
  DiagnosticSums sums = to_sums(total);
  sums.first_bad = first_bad < a.n ? first_bad : -1;
  return sums;
}

void neighbor_counts(const SimParams& p, const SimArrays& a, std::int64_t* counts, const Stream& /*stream*/) {
#pragma omp parallel for schedule(dynamic, 256) num_threads(tessel::num_threads()) if (a.n > 2048 && !omp_in_parallel())
  for (std::int64_t s = 0; s < a.n; ++s) {
    std::int64_t count = 0;
    for_each_contact(p, a.sorted_pos, a.cells_range, static_cast<int>(s), [&](int) { ++count; });
    counts[a.sorted_id[s]] = count;
  }
}

void neighbor_fill(const SimParams& p, const SimArrays& a, const std::int64_t* offsets, std::int32_t* out,
                   const Stream& /*stream*/) {
#pragma omp parallel for schedule(dynamic, 256) num_threads(tessel::num_threads()) if (a.n > 2048 && !omp_in_parallel())
  for (std::int64_t s = 0; s < a.n; ++s) {
    std::int64_t at = offsets[a.sorted_id[s]];
    for_each_contact(p, a.sorted_pos, a.cells_range, static_cast<int>(s), [&](int j) { out[at++] = a.sorted_id[j]; });
  }
}

std::size_t sort_temp_bytes(std::int64_t /*n*/, int /*cell_bits*/) { return 0; }

}  // namespace tessel::backend::cpu

#pragma once
// The physics shared by the CPU and CUDA backends (compiled by both the host compiler and nvcc),
// so the two follow the same formulas in the same float32 order.
#include <math.h>

#include <cstdint>

#include "backend/particles.hpp"

#if defined(__CUDACC__)
#define TESSEL_HD __host__ __device__ __forceinline__
#else
#define TESSEL_HD inline
#endif

namespace tessel::backend::physics {

// Four consecutive floats (x y z r or vx vy vz m of one sorted particle), one 16-byte load on the
// GPU (the sorted buffers are 16-byte aligned: they come from the caching allocator).
struct Float4 {
  float x, y, z, w;
};
TESSEL_HD Float4 load4(const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return {v.x, v.y, v.z, v.w};
#else
  return {p[0], p[1], p[2], p[3]};
#endif
}

// Cell coordinate of x along an axis, clamped to the grid: clamping is monotone and never moves
// two coordinates apart, so particles within a cell size stay in the same or adjacent cells.
TESSEL_HD int cell_coord(float x, float lo, float inv_cell, int dims) {
  int c = static_cast<int>(floorf((x - lo) * inv_cell));
  return c < 0 ? 0 : (c >= dims ? dims - 1 : c);
}

TESSEL_HD std::uint32_t cell_key(const SimParams& p, float x, float y, float z) {
  const int cx = cell_coord(x, p.lo[0], p.inv_cell[0], p.dims[0]);
  const int cy = cell_coord(y, p.lo[1], p.inv_cell[1], p.dims[1]);
  const int cz = cell_coord(z, p.lo[2], p.inv_cell[2], p.dims[2]);
  return static_cast<std::uint32_t>((cz * p.dims[1] + cy) * p.dims[0] + cx);
}

// Wraps a coordinate into [lo, lo + length) for periodic boxes.
TESSEL_HD float wrap(float x, float lo, float length) {
  float w = x - length * floorf((x - lo) / length);
  if (w >= lo + length) w -= length;  // rounding can land exactly on the upper face
  if (w < lo) w = lo;
  return w;
}

// The first half of velocity Verlet for particle i when `kick` (v += dt/2 a; x += dt v; wrap if
// periodic; written back), then its cell key at the resulting position.
TESSEL_HD std::uint32_t kick_drift_cell_key(const SimParams& p, const SimArrays& a, long long i, bool kick) {
  float x = a.x[i], y = a.y[i], z = a.z[i];
  if (kick) {
    const float half_dt = 0.5f * p.dt;
    const float vx = a.vx[i] + half_dt * a.ax[i];
    const float vy = a.vy[i] + half_dt * a.ay[i];
    const float vz = a.vz[i] + half_dt * a.az[i];
    x += p.dt * vx;
    y += p.dt * vy;
    z += p.dt * vz;
    if (p.periodic) {
      x = wrap(x, p.lo[0], p.length[0]);
      y = wrap(y, p.lo[1], p.length[1]);
      z = wrap(z, p.lo[2], p.length[2]);
    }
    a.x[i] = x;
    a.y[i] = y;
    a.z[i] = z;
    a.vx[i] = vx;
    a.vy[i] = vy;
    a.vz[i] = vz;
  }
  return cell_key(p, x, y, z);
}

// Minimum-image displacement along a periodic axis.
TESSEL_HD float min_image(float d, float length) { return d - length * rintf(d / length); }

struct ContactResult {
  float f[3];      // force on particle i
  float energy;    // elastic energy of the contact
};

// The contact law. n: unit normal from i towards the other body; overlap > 0; vrel = v_other - v_i;
// m_eff and r_eff: reduced mass and radius (the particle's own for a wall). The force is exactly
// antisymmetric under swapping i and j (every term changes sign with n and vrel), so pair forces
// conserve momentum to rounding.
TESSEL_HD ContactResult contact(const SimParams& p, float nx, float ny, float nz, float overlap, float vrx, float vry,
                                float vrz, float m_eff, float r_eff) {
  float k_spring = p.stiffness;   // force / overlap
  float k_damping = p.stiffness;  // d force / d overlap, for the dashpot
  float energy_factor = 0.5f;
  if (p.hertz) {
    const float s = sqrtf(r_eff * overlap);
    k_spring = p.stiffness * s;
    k_damping = 1.5f * k_spring;
    energy_factor = 0.4f;
  }
  const float gamma_n = 2.0f * p.damping_ratio * sqrtf(m_eff * k_damping);
  const float vn = vrx * nx + vry * ny + vrz * nz;  // < 0 while approaching
  const float fn = k_spring * overlap - gamma_n * vn;  // repulsive magnitude along -n
  ContactResult r;
  r.f[0] = -fn * nx;
  r.f[1] = -fn * ny;
  r.f[2] = -fn * nz;
  r.energy = energy_factor * k_spring * overlap * overlap;
  if (p.friction > 0.0f) {
    const float tx = vrx - vn * nx, ty = vry - vn * ny, tz = vrz - vn * nz;
    const float vt = sqrtf(tx * tx + ty * ty + tz * tz);
    if (vt > 0.0f) {
      const float gamma_t = p.tangential_damping > 0.0f ? p.tangential_damping : gamma_n;
      const float ft = fminf(p.friction * fabsf(fn), gamma_t * vt);  // Coulomb-limited viscous friction
      const float scale = ft / vt;  // drags i along the other body's tangential motion
      r.f[0] += scale * tx;
      r.f[1] += scale * ty;
      r.f[2] += scale * tz;
    }
  }
  return r;
}

// Calls visit(j) for every sorted particle j in the 27 cells around sorted particle s
// (s itself included: the caller skips it). Non-periodic rows of three cells are contiguous in
// the sorted order, so each row is one range; periodic rows may wrap and are walked per cell.
template <class Visit>
TESSEL_HD void for_each_candidate(const SimParams& p, const std::int32_t* cells, float x, float y, float z,
                                  Visit&& visit) {
  const int cx = cell_coord(x, p.lo[0], p.inv_cell[0], p.dims[0]);
  const int cy = cell_coord(y, p.lo[1], p.inv_cell[1], p.dims[1]);
  const int cz = cell_coord(z, p.lo[2], p.inv_cell[2], p.dims[2]);
  for (int dz = -1; dz <= 1; ++dz) {
    int nz = cz + dz;
    if (p.periodic) {
      nz = nz < 0 ? nz + p.dims[2] : (nz >= p.dims[2] ? nz - p.dims[2] : nz);
    } else if (nz < 0 || nz >= p.dims[2]) {
      continue;
    }
    for (int dy = -1; dy <= 1; ++dy) {
      int ny = cy + dy;
      if (p.periodic) {
        ny = ny < 0 ? ny + p.dims[1] : (ny >= p.dims[1] ? ny - p.dims[1] : ny);
      } else if (ny < 0 || ny >= p.dims[1]) {
        continue;
      }
      const int row = (nz * p.dims[1] + ny) * p.dims[0];
      if (!p.periodic) {
        const int x0 = cx > 0 ? cx - 1 : 0;
        const int x1 = cx + 1 < p.dims[0] ? cx + 1 : p.dims[0] - 1;
        int begin = 0x7fffffff, end = 0;
        for (int c = row + x0; c <= row + x1; ++c) {
          const int b = cells[2 * c], e = cells[2 * c + 1];
          if (e > b) {
            begin = b < begin ? b : begin;
            end = e > end ? e : end;
          }
        }
        for (int j = begin; j < end; ++j) visit(j);
      } else {
        for (int dx = -1; dx <= 1; ++dx) {
          int nx = cx + dx;
          nx = nx < 0 ? nx + p.dims[0] : (nx >= p.dims[0] ? nx - p.dims[0] : nx);
          const int c = row + nx;
          const int b = cells[2 * c], e = cells[2 * c + 1];
          for (int j = b; j < e; ++j) visit(j);
        }
      }
    }
  }
}

// Displacement from i to j, minimum image when periodic.
TESSEL_HD void displacement(const SimParams& p, const float* pi, const float* pj, float* d) {
  d[0] = pj[0] - pi[0];
  d[1] = pj[1] - pi[1];
  d[2] = pj[2] - pi[2];
  if (p.periodic) {
    d[0] = min_image(d[0], p.length[0]);
    d[1] = min_image(d[1], p.length[1]);
    d[2] = min_image(d[2], p.length[2]);
  }
}

struct ParticleForce {
  float f[3];
  float energy;       // half of each pair's energy (the other half is the partner's) + wall energies
  int pair_contacts;  // <= n - 1 < 2^31 - 1 (sim::Particles checks n)
  int wall_contacts;  // <= 6
};

// Total contact force on sorted particle s from its neighbors and the walls.
TESSEL_HD ParticleForce particle_force(const SimParams& p, const float* sorted_pos, const float* sorted_vel,
                                       const std::int32_t* cells, int s) {
  const Float4 pi = load4(sorted_pos + 4 * static_cast<std::int64_t>(s));
  const Float4 vi = load4(sorted_vel + 4 * static_cast<std::int64_t>(s));
  const float xi = pi.x, yi = pi.y, zi = pi.z, ri = pi.w;
  const float vxi = vi.x, vyi = vi.y, vzi = vi.z, mi = vi.w;
  const float own[3] = {xi, yi, zi};
  ParticleForce out{{0.0f, 0.0f, 0.0f}, 0.0f, 0, 0};
  for_each_candidate(p, cells, xi, yi, zi, [&](int j) {
    if (j == s) return;
    const Float4 pj = load4(sorted_pos + 4 * static_cast<std::int64_t>(j));
    const float other[3] = {pj.x, pj.y, pj.z};
    float d[3];
    displacement(p, own, other, d);
    const float d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    const float rs = ri + pj.w;
    if (!(d2 < rs * rs) || d2 <= 0.0f) return;
    const Float4 vj = load4(sorted_vel + 4 * static_cast<std::int64_t>(j));
    const float dist = sqrtf(d2);
    const float inv = 1.0f / dist;
    const float m_eff = mi * vj.w / (mi + vj.w);
    const float r_eff = ri * pj.w / rs;
    const ContactResult c = contact(p, d[0] * inv, d[1] * inv, d[2] * inv, rs - dist, vj.x - vxi, vj.y - vyi,
                                    vj.z - vzi, m_eff, r_eff);
    out.f[0] += c.f[0];
    out.f[1] += c.f[1];
    out.f[2] += c.f[2];
    out.energy += 0.5f * c.energy;
    out.pair_contacts += 1;
  });
  if (p.walls) {
    const float vel[3] = {vxi, vyi, vzi};
    for (int axis = 0; axis < 3; ++axis) {
      for (int side = 0; side < 2; ++side) {
        // Overlap with the face; the normal points from the particle into the wall.
        const float overlap = side == 0 ? ri - (own[axis] - p.lo[axis]) : ri - (p.hi[axis] - own[axis]);
        if (!(overlap > 0.0f)) continue;
        float n[3] = {0.0f, 0.0f, 0.0f};
        n[axis] = side == 0 ? -1.0f : 1.0f;
        const ContactResult c = contact(p, n[0], n[1], n[2], overlap, -vel[0], -vel[1], -vel[2], mi, ri);
        out.f[0] += c.f[0];
        out.f[1] += c.f[1];
        out.f[2] += c.f[2];
        out.energy += c.energy;
        out.wall_contacts += 1;
      }
    }
  }
  return out;
}

// Writes sorted slot s back as the state's slot s (position, radius, mass and id from the sorted
// copies; the given velocity and acceleration).
TESSEL_HD void store_state(const SimArrays& a, long long s, const Float4& pos, const Float4& vel, float ax, float ay,
                           float az) {
  a.x[s] = pos.x;
  a.y[s] = pos.y;
  a.z[s] = pos.z;
  a.radius[s] = pos.w;
  a.mass[s] = vel.w;
  a.id[s] = a.sorted_id[s];
  a.vx[s] = vel.x;
  a.vy[s] = vel.y;
  a.vz[s] = vel.z;
  a.ax[s] = ax;
  a.ay[s] = ay;
  a.az[s] = az;
}

// The force pass for sorted slot s (both backends run exactly this per slot): contact force,
// acceleration with gravity, with finish_kick the second half kick v = v_half + dt/2 a, then the
// state, contact counts and spring energy written back in sorted order.
TESSEL_HD void force_slot(const SimParams& p, const SimArrays& a, long long s, bool finish_kick) {
  const ParticleForce f = particle_force(p, a.sorted_pos, a.sorted_vel, a.cells_range, static_cast<int>(s));
  const Float4 pos = load4(a.sorted_pos + 4 * s);
  Float4 vel = load4(a.sorted_vel + 4 * s);
  const float inv_m = 1.0f / vel.w;
  const float ax = f.f[0] * inv_m + p.gravity[0];
  const float ay = f.f[1] * inv_m + p.gravity[1];
  const float az = f.f[2] * inv_m + p.gravity[2];
  if (finish_kick) {
    const float half_dt = 0.5f * p.dt;
    vel.x += half_dt * ax;
    vel.y += half_dt * ay;
    vel.z += half_dt * az;
  }
  store_state(a, s, pos, vel, ax, ay, az);
  a.pair_contacts[s] = f.pair_contacts;
  a.wall_contacts[s] = static_cast<std::uint8_t>(f.wall_contacts);
  a.spring_energy[s] = f.energy;
}

// Writes the sorted copies of slot s (accelerations gathered too) back as the state, no forces.
TESSEL_HD void write_back_slot(const SimArrays& a, long long s) {
  const Float4 acc = load4(a.sorted_acc + 4 * s);
  store_state(a, s, load4(a.sorted_pos + 4 * s), load4(a.sorted_vel + 4 * s), acc.x, acc.y, acc.z);
}

// Per-particle terms of the diagnostics, summed in double (per thread, then per block or across
// OpenMP threads).
struct DiagnosticTerms {
  double kinetic = 0, potential_gravity = 0, potential_spring = 0;
  double momentum[3] = {0, 0, 0};
  long long pair_contacts_twice = 0, wall_contacts = 0;
};
TESSEL_HD void add_diagnostic_terms(const SimParams& p, const SimArrays& a, long long i, DiagnosticTerms& t) {
  const double m = a.mass[i];
  const double vx = a.vx[i], vy = a.vy[i], vz = a.vz[i];
  t.kinetic += 0.5 * m * (vx * vx + vy * vy + vz * vz);
  t.potential_gravity -= m * (p.gravity[0] * (static_cast<double>(a.x[i]) - p.lo[0]) +
                              p.gravity[1] * (static_cast<double>(a.y[i]) - p.lo[1]) +
                              p.gravity[2] * (static_cast<double>(a.z[i]) - p.lo[2]));
  t.potential_spring += a.spring_energy[i];
  t.momentum[0] += m * vx;
  t.momentum[1] += m * vy;
  t.momentum[2] += m * vz;
  t.pair_contacts_twice += a.pair_contacts[i];
  t.wall_contacts += a.wall_contacts[i];
}
TESSEL_HD DiagnosticTerms combine(const DiagnosticTerms& x, const DiagnosticTerms& y) {
  DiagnosticTerms r;
  r.kinetic = x.kinetic + y.kinetic;
  r.potential_gravity = x.potential_gravity + y.potential_gravity;
  r.potential_spring = x.potential_spring + y.potential_spring;
  for (int k = 0; k < 3; ++k) r.momentum[k] = x.momentum[k] + y.momentum[k];
  r.pair_contacts_twice = x.pair_contacts_twice + y.pair_contacts_twice;
  r.wall_contacts = x.wall_contacts + y.wall_contacts;
  return r;
}
// The sums as the backends return them (first_bad is set by the caller).
inline DiagnosticSums to_sums(const DiagnosticTerms& t) {
  DiagnosticSums sums;
  sums.kinetic = t.kinetic;
  sums.potential_gravity = t.potential_gravity;
  sums.potential_spring = t.potential_spring;
  for (int k = 0; k < 3; ++k) sums.momentum[k] = t.momentum[k];
  sums.pair_contacts_twice = t.pair_contacts_twice;
  sums.wall_contacts = t.wall_contacts;
  return sums;
}

// Number of contacts of sorted particle s with other particles (the neighbor-list count).
template <class Visit>
TESSEL_HD void for_each_contact(const SimParams& p, const float* sorted_pos, const std::int32_t* cells, int s,
                                Visit&& visit) {
  const float* pi = sorted_pos + 4 * static_cast<std::int64_t>(s);
  for_each_candidate(p, cells, pi[0], pi[1], pi[2], [&](int j) {
    if (j == s) return;
    const float* pj = sorted_pos + 4 * static_cast<std::int64_t>(j);
    float d[3];
    displacement(p, pi, pj, d);
    const float d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    const float rs = pi[3] + pj[3];
    if (d2 < rs * rs) visit(j);
  });
}

// True when particle i's state is bad: non-finite, or (check_box) outside the box.
TESSEL_HD bool bad_particle(const SimParams& p, float x, float y, float z, float vx, float vy, float vz,
                            bool check_box) {
  if (!isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(vx) || !isfinite(vy) || !isfinite(vz)) return true;
  if (check_box) {
    return x < p.lo[0] || x > p.hi[0] || y < p.lo[1] || y > p.hi[1] || z < p.lo[2] || z > p.hi[2];
  }
  return false;
}

}  // namespace tessel::backend::physics

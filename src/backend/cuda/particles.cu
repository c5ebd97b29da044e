// CUDA backend of the particle simulation. One step is three launches, a memset and the sort:
//   kick_drift_key  v += dt/2 a; x += dt v; wrap; key = linear cell index; value = slot
//   CUB DeviceRadixSort::SortPairs (keys, slots) over the key's bits only (double buffers)
//   clear cells + gather_ranges  sorted x y z r / vx vy vz m as float4, original ids; cell ranges
//   forces          one thread per sorted particle over the 27 neighbor cells (each pair twice,
//                   no atomics); writes the whole state back in the new (cell) order
// The state stays in cell order from step to step, so the gather reads nearly contiguous
// memory (particles move little per step) and every other pass is coalesced.
// All memory comes from src/sim/particles.cpp (tessel's caching allocator); every launch is checked.
#include <cuda_runtime_api.h>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>

#include "backend/particles.hpp"
#include "backend/particles_physics.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

using namespace physics;

constexpr int block_threads = 256;

unsigned blocks_for(long long n) {
  return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((n + block_threads - 1) / block_threads, 1LL << 30)));
}


__global__ void kick_drift_key(SimParams p, SimArrays a, int kick) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  a.keys[0][i] = kick_drift_cell_key(p, a, i, kick != 0);
  a.slots[0][i] = static_cast<std::int32_t>(i);
}

// Gathers the state into sorted order and marks where each occupied cell's run starts and ends.
__global__ void gather_ranges(SimArrays a, const std::uint32_t* keys, const std::int32_t* old_slots, int gather_acc) {
  const long long s = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= a.n) return;
  const std::int32_t i = old_slots[s];
  reinterpret_cast<float4*>(a.sorted_pos)[s] = make_float4(a.x[i], a.y[i], a.z[i], a.radius[i]);
  reinterpret_cast<float4*>(a.sorted_vel)[s] = make_float4(a.vx[i], a.vy[i], a.vz[i], a.mass[i]);
  a.sorted_id[s] = a.id[i];
  if (gather_acc) reinterpret_cast<float4*>(a.sorted_acc)[s] = make_float4(a.ax[i], a.ay[i], a.az[i], 0.0f);
  const std::uint32_t key = keys[s];
  if (s == 0 || keys[s - 1] != key) a.cells_range[2 * static_cast<long long>(key)] = static_cast<std::int32_t>(s);
  if (s == a.n - 1 || keys[s + 1] != key) a.cells_range[2 * static_cast<long long>(key) + 1] = static_cast<std::int32_t>(s + 1);
}

__global__ void __launch_bounds__(block_threads) forces_kernel(SimParams p, SimArrays a, int finish_kick) {
  const long long s = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= a.n) return;
  force_slot(p, a, s, finish_kick != 0);
}

__global__ void write_back_kernel(SimArrays a) {
  const long long s = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= a.n) return;
  write_back_slot(a, s);
}

// Block sums in double, then one atomicAdd per block and quantity.
struct CombineTerms {
  __device__ DiagnosticTerms operator()(const DiagnosticTerms& x, const DiagnosticTerms& y) const { return combine(x, y); }
};

__global__ void diagnostics_kernel(SimParams p, SimArrays a, int check_box, DiagnosticSums* out) {
  using BlockReduce = cub::BlockReduce<DiagnosticTerms, block_threads>;
  __shared__ typename BlockReduce::TempStorage temp;
  DiagnosticTerms mine;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    add_diagnostic_terms(p, a, i, mine);
    if (bad_particle(p, a.x[i], a.y[i], a.z[i], a.vx[i], a.vy[i], a.vz[i], check_box != 0)) {
      atomicMin(reinterpret_cast<unsigned long long*>(&out->first_bad), static_cast<unsigned long long>(i));
    }
  }
  const DiagnosticTerms total = BlockReduce(temp).Reduce(mine, CombineTerms{});
  if (threadIdx.x == 0) {
    atomicAdd(&out->kinetic, total.kinetic);
    atomicAdd(&out->potential_gravity, total.potential_gravity);
    atomicAdd(&out->potential_spring, total.potential_spring);
    for (int k = 0; k < 3; ++k) atomicAdd(&out->momentum[k], total.momentum[k]);
    atomicAdd(reinterpret_cast<unsigned long long*>(&out->pair_contacts_twice),
              static_cast<unsigned long long>(total.pair_contacts_twice));
    atomicAdd(reinterpret_cast<unsigned long long*>(&out->wall_contacts), static_cast<unsigned long long>(total.wall_contacts));
  }
}

__global__ void neighbor_counts_kernel(SimParams p, SimArrays a, long long* counts) {
  const long long s = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= a.n) return;
  long long count = 0;
  for_each_contact(p, a.sorted_pos, a.cells_range, static_cast<int>(s), [&](int) { ++count; });
  counts[a.sorted_id[s]] = count;
}

__global__ void neighbor_fill_kernel(SimParams p, SimArrays a, const long long* offsets, std::int32_t* out) {
  const long long s = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= a.n) return;
  long long at = offsets[a.sorted_id[s]];
  for_each_contact(p, a.sorted_pos, a.cells_range, static_cast<int>(s), [&](int j) { out[at++] = a.sorted_id[j]; });
}

// int item count (n < 2^31 is checked by sim::Particles): CUB's 32-bit offset path.
cudaError_t sort_pairs(void* temp, std::size_t& temp_bytes, cub::DoubleBuffer<std::uint32_t>& keys,
                       cub::DoubleBuffer<std::int32_t>& slots, long long n, int bits, cudaStream_t s) {
  if (n > 0x7fffffffLL) return cudaErrorInvalidValue;
  return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, slots, static_cast<int>(n), 0, bits, s);
}

}  // namespace

std::size_t sort_temp_bytes(std::int64_t n, int cell_bits) {
  cub::DoubleBuffer<std::uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::int32_t> slots(nullptr, nullptr);
  std::size_t bytes = 0;
  TESSEL_CUDA_CHECK(sort_pairs(nullptr, bytes, keys, slots, n, cell_bits, nullptr), "sim::Particles");
  return bytes;
}

int bin(const SimParams& p, const SimArrays& a, bool kick, bool gather_acc, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  kick_drift_key<<<blocks_for(a.n), block_threads, 0, s>>>(p, a, kick ? 1 : 0);
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (kick_drift_key)");
  cub::DoubleBuffer<std::uint32_t> keys(a.keys[0], a.keys[1]);
  cub::DoubleBuffer<std::int32_t> slots(a.slots[0], a.slots[1]);
  std::size_t temp_bytes = a.sort_temp_bytes;
  TESSEL_CUDA_CHECK(sort_pairs(a.sort_temp, temp_bytes, keys, slots, a.n, p.cell_bits, s), "sim::Particles (sort)");
  // Both buffers switch together, so one selector names the sorted slot.
  const int slot = keys.selector;
  TESSEL_CUDA_CHECK(cudaMemsetAsync(a.cells_range, 0, static_cast<std::size_t>(a.cells) * 2 * sizeof(std::int32_t), s),
                    "sim::Particles (clear cells)");
  gather_ranges<<<blocks_for(a.n), block_threads, 0, s>>>(a, a.keys[slot], a.slots[slot], gather_acc ? 1 : 0);
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (gather_ranges)");
  return slot;
}

void forces(const SimParams& p, const SimArrays& a, bool finish_kick, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  forces_kernel<<<blocks_for(a.n), block_threads, 0, s>>>(p, a, finish_kick ? 1 : 0);
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (forces)");
}

void write_back(const SimParams& /*p*/, const SimArrays& a, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  write_back_kernel<<<blocks_for(a.n), block_threads, 0, s>>>(a);
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (write_back)");
}

DiagnosticSums diagnostics(const SimParams& p, const SimArrays& a, bool check_box, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  DiagnosticSums init;
  init.first_bad = a.n;  // atomicMin target: n means "none"
  auto out = Buffer::allocate(stream.device(), sizeof(DiagnosticSums), stream);
  auto* d_out = static_cast<DiagnosticSums*>(out->data());
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(d_out, &init, sizeof init, cudaMemcpyHostToDevice, s), "sim::Particles (diagnostics)");
  const unsigned blocks = std::min<unsigned>(blocks_for(a.n), 2048);
  diagnostics_kernel<<<blocks, block_threads, 0, s>>>(p, a, check_box ? 1 : 0, d_out);
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (diagnostics)");
  DiagnosticSums result;
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(&result, d_out, sizeof result, cudaMemcpyDeviceToHost, s), "sim::Particles (diagnostics)");
  TESSEL_CUDA_CHECK(cudaStreamSynchronize(s), "sim::Particles (diagnostics)");
  if (result.first_bad >= a.n) result.first_bad = -1;
  return result;
}

void neighbor_counts(const SimParams& p, const SimArrays& a, std::int64_t* counts, const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  neighbor_counts_kernel<<<blocks_for(a.n), block_threads, 0, s>>>(p, a, reinterpret_cast<long long*>(counts));
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (neighbor_counts)");
}

void neighbor_fill(const SimParams& p, const SimArrays& a, const std::int64_t* offsets, std::int32_t* out,
                   const Stream& stream) {
  DeviceGuard guard(stream.device());
  const cudaStream_t s = detail::cuda_stream(stream);
  neighbor_fill_kernel<<<blocks_for(a.n), block_threads, 0, s>>>(p, a, reinterpret_cast<const long long*>(offsets), out);
  TESSEL_CUDA_CHECK_LAUNCH(s, "sim::Particles (neighbor_fill)");
}

}  // namespace tessel::backend::cuda

// tessel's own batched small-matrix kernels (device/linalg_small.cuh): the launches, and the
// dispatch by the rows of tuning/linalg_routes.hpp over the library routes of linalg.cpp. The
// specializations those rows take are compiled ahead of time (linalg_small_aot_*.cu, for the
// build's GPU architectures); any other one (TESSEL_LINALG_SMALL forcing a kernel beyond its rows,
// another architecture) is compiled at run time by NVRTC and cached on disk.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backend/linalg.hpp"
#include "backend/cuda/linalg_small_aot.hpp"
#include "backend/cuda/tuning/linalg_routes.hpp"
#include "backend/linalg_small.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::backend::cuda {
namespace {

// The rows: tuning/linalg_routes.hpp (kSmallKernelRows), with the measurements that chose them.
const auto& kTuning = tuning::kSmallKernelRows;

constexpr int kMaxSweeps = 60;  // Jacobi sweeps; a converging matrix needs fewer than 15
// tridiagonal_eigh: QR steps per order (random 8 x 8 matrices take 1.7-2.1 an eigenvalue, at most
// 2.6), and its largest order: registers hold it without spills to n = 12 in float and 8 in
// double (sm_90); 9-16 (double) and 13-16 (float) spill: forced only, for measuring (no kTuning rows there).
constexpr int kTridiagonalStepsPerOrder = 30;
constexpr std::int64_t kTridiagonalMaxN = 16;
constexpr int kBlock = 64;      // one matrix per thread
constexpr int kWaves = 8;

const char* kind_name(SmallKernel kind) {
  switch (kind) {
    case SmallKernel::cholesky: return "cholesky";
    case SmallKernel::lu_solve: return "lu_solve_batch";
    case SmallKernel::eigh: return "jacobi_eigh";
    case SmallKernel::svd: return "jacobi_svd";
    case SmallKernel::inv: return "gauss_jordan_inv";
    case SmallKernel::svd_block: return "jacobi_svd_block";
    case SmallKernel::eigh_warp: return "jacobi_eigh_warp";
    case SmallKernel::eigh_tridiagonal: return "tridiagonal_eigh";
  }
  return "?";
}

const char* scalar_name(DType dtype) {
  if (dtype == DType::float32) return "float";
  if (dtype == DType::float64) return "double";
  throw DTypeError(fmt::format("linalg: tessel's small-matrix kernels take float32 or float64, got {}", dtype_name(dtype)));
}

// Loaded kernels by (request name, device): a launch does one map lookup. The ahead-of-time
// instantiation when the build has one for the device, else NVRTC's. A block kernel may use all
// of the device's shared memory per block (set once, at load).
jit::Kernel kernel_for(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool variant, Device device,
                       bool block = false) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, jit::Kernel> loaded;
  const jit::CompileRequest request = small_kernel_request(kind, dtype, m, n, variant);
  const auto key = std::make_pair(request.name, device.index);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = loaded.find(key);
    if (it != loaded.end()) return it->second;
  }
  jit::Kernel k;
  if (const void* entry = aot_small_kernel(kind, dtype, m, n, variant)) k = jit::compiled_kernel(entry, request.name, device);
  // Not built ahead of time (or not for this device's architecture): compiles, or reads the disk
  // cache, outside the lock.
  if (!k.defined()) k = jit::get_kernel(request, device);
  if (block) k.set_max_dynamic_shared_memory(device_properties(device.index).shared_memory_per_block_optin);
  std::lock_guard<std::mutex> lock(mutex);
  return loaded.emplace(key, k).first->second;
}

// The lanes per matrix of gauss_jordan_inv and jacobi_eigh_warp: n rounded up to a power of two
// (GroupWidth there).
std::int64_t group_width(std::int64_t n) {
  std::int64_t w = 1;
  while (w < n) w *= 2;
  return w;
}

// threads: the launch's thread count (0: one per matrix).
void launch(SmallKernel kind, const LinalgBatch& p, bool upper, std::vector<void*> args, const Stream& stream,
            std::int64_t threads = 0, int block = kBlock) {
  const jit::Kernel k = kernel_for(kind, p.dtype, p.m, p.n, upper, stream.device());
  k.launch(k.launch_config_fixed(threads > 0 ? threads : p.batch, block, kWaves), args, stream);
}

// A block kernel's launch: `team` threads per matrix (block_kernel_team), team_bytes of shared
// memory each; a block of 4 warp teams, or of one block team. The grid covers the batch up to
// kWaves waves of resident blocks (the teams grid-stride beyond).
void launch_block(SmallKernel kind, const LinalgBatch& p, std::vector<void*> args, const Stream& stream,
                  std::int64_t team_bytes, const char* op) {
  const int team = block_kernel_team(kind, p.n);
  const std::int64_t per_team = kind == SmallKernel::eigh_warp ? 32 / group_width(p.n) : 1;  // matrices
  const jit::Kernel k = kernel_for(kind, p.dtype, p.m, p.n, false, stream.device(), true);
  const std::int64_t limit = static_cast<std::int64_t>(device_properties(stream.device().index).shared_memory_per_block_optin);
  const std::int64_t teams = team == 32 ? std::max<std::int64_t>(1, std::min<std::int64_t>(4, limit / team_bytes)) : 1;
  const int block = static_cast<int>(team * teams);
  if (k.attributes().max_threads_per_block < block) {
    throw Error(fmt::format("{}: internal error: {} runs at most {} threads per block, the team needs {}", op, k.name(),
                            k.attributes().max_threads_per_block, block));
  }
  jit::LaunchConfig config;
  config.block = jit::Dim3(static_cast<unsigned>(block));
  config.shared_mem = static_cast<std::size_t>(team_bytes * teams);
  const std::int64_t resident = device_properties(stream.device().index).multiprocessors *
                                static_cast<std::int64_t>(k.max_active_blocks(block, config.shared_mem));
  const std::int64_t blocks = (p.batch + teams * per_team - 1) / (teams * per_team);
  config.grid = jit::Dim3(static_cast<unsigned>(std::min<std::int64_t>(blocks, resident * kWaves)));
  args.push_back(&team_bytes);
  k.launch(config, args, stream);
}

// TESSEL_LINALG_SMALL: unset or "1", the tuning table; "0", none of tessel's kernels (the library path);
// a kernel (cholesky, lu_solve, eigh, svd, inv, svd_block, eigh_warp or eigh_tridiagonal), that
// kernel alone, at every batch and every order up to small_kernel_max_n (for
// bench/peers/linalg_crossover.py).
struct Selection {
  bool off = false;
  bool forced = false;
  SmallKernel kind = SmallKernel::eigh;
};
const Selection& selection() {
  static const Selection chosen = [] {
    Selection s;
    const char* v = std::getenv("TESSEL_LINALG_SMALL");
    if (v == nullptr || std::string(v).empty() || std::string(v) == "1") return s;
    const std::string name(v);
    if (name == "0") {
      s.off = true;
      return s;
    }
    const std::pair<const char*, SmallKernel> names[] = {
        {"cholesky", SmallKernel::cholesky}, {"lu_solve", SmallKernel::lu_solve}, {"eigh", SmallKernel::eigh},
        {"svd", SmallKernel::svd},           {"inv", SmallKernel::inv},           {"svd_block", SmallKernel::svd_block},
        {"eigh_warp", SmallKernel::eigh_warp}, {"eigh_tridiagonal", SmallKernel::eigh_tridiagonal}};
    for (const auto& [kind_label, kind] : names) {
      if (name == kind_label) {
        s.forced = true;
        s.kind = kind;
        return s;
      }
    }
    throw ValueError(fmt::format(
        "TESSEL_LINALG_SMALL={}: expected 0 or a kernel (cholesky, lu_solve, eigh, svd, inv, svd_block, eigh_warp, "
        "eigh_tridiagonal)",
        name));
  }();
  return chosen;
}

}  // namespace

std::vector<SmallKernelTuning> small_kernel_rows(SmallKernel kind, DType dtype) {
  std::vector<SmallKernelTuning> rows;
  for (const auto& row : kTuning) {
    if (row.kind == kind && row.dtype == dtype) rows.push_back(row);
  }
  return rows;
}

std::int64_t small_kernel_max_n(SmallKernel kind, DType dtype) {
  if (kind == SmallKernel::eigh_tridiagonal) {
    return dtype == DType::float32 || dtype == DType::float64 ? kTridiagonalMaxN : 0;
  }
  std::int64_t max_n = 0;
  for (const auto& row : kTuning) {
    if (row.kind == kind && row.dtype == dtype) max_n = std::max(max_n, row.max_n);
  }
  return max_n;
}

bool small_kernel_applies(SmallKernel kind, const LinalgBatch& p) {
  const Selection& chosen = selection();
  if (chosen.off) return false;
  const std::int64_t n = std::max(p.m, p.n);
  if (chosen.forced) return kind == chosen.kind && n <= small_kernel_max_n(kind, p.dtype);
  // The per-thread svd's rows take square matrices (the ones built ahead of time); tall ones go
  // to gesvdjBatched.
  if (kind == SmallKernel::svd && p.m != p.n) return false;
  for (const auto& row : kTuning) {
    if (row.kind == kind && row.dtype == p.dtype && n >= row.min_n && n <= row.max_n) return p.batch >= row.min_batch;
  }
  return false;
}

int block_kernel_team(SmallKernel kind, std::int64_t n) {
  if (n <= 32 || kind == SmallKernel::eigh_warp) return 32;
  return n <= 64 ? 128 : 256;
}

std::int64_t block_kernel_bytes(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool vectors) {
  const std::int64_t t = itemsize(dtype);
  std::int64_t bytes = 0;
  if (kind == SmallKernel::eigh_warp) {  // jacobi_eigh_warp's: the warp's matrices, leading dimension n + 1
    bytes = t * (32 / group_width(n)) * n * (n + 1);
  } else {  // jacobi_svd_block's
    bytes = t * (m * n + (vectors ? n * (n | 1) : 0) + n + 32) + 4 * (2 * n);
  }
  return (bytes + 15) / 16 * 16;
}

bool small_jacobi_applies(SmallKernel kind, const LinalgBatch& p, bool vectors, Device device) {
  if (small_kernel_applies(kind, p)) return true;
  // eigh_warp's shared memory (at most 32 x 33 doubles a warp) fits every device
  if (kind == SmallKernel::eigh) {
    return small_kernel_applies(SmallKernel::eigh_tridiagonal, p) || small_kernel_applies(SmallKernel::eigh_warp, p);
  }
  if (!small_kernel_applies(SmallKernel::svd_block, p)) return false;
  const std::int64_t bytes = block_kernel_bytes(SmallKernel::svd_block, p.dtype, p.m, p.n, vectors);
  return bytes <= static_cast<std::int64_t>(device_properties(device.index).shared_memory_per_block_optin);
}

jit::CompileRequest small_kernel_request(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool variant) {
  jit::CompileRequest r;
  r.source = "#include \"linalg_small.cuh\"\n";
  const char* t = scalar_name(dtype);
  switch (kind) {
    case SmallKernel::cholesky:
      r.name = fmt::format("tessel_linalg_small::cholesky<{}, {}, {}>", t, n, variant ? "true" : "false");
      break;
    case SmallKernel::lu_solve:
      r.name = fmt::format("tessel_linalg_small::lu_solve_batch<{}, {}, {}>", t, n, variant ? "true" : "false");
      break;
    case SmallKernel::svd:
      r.name = fmt::format("tessel_linalg_small::jacobi_svd<{}, {}, {}>", t, m, n);
      break;
    case SmallKernel::svd_block:
      r.name = fmt::format("tessel_linalg_small::jacobi_svd_block<{}, {}, {}, {}>", t, m, n,
                           block_kernel_team(kind, n));
      break;
    default:
      r.name = fmt::format("tessel_linalg_small::{}<{}, {}>", kind_name(kind), t, n);
      break;
  }
  return r;
}

void small_cholesky(const LinalgBatch& p, void* a, bool upper, std::int32_t* info, const Stream& stream) {
  long long batch = p.batch;
  launch(SmallKernel::cholesky, p, upper, {&a, &info, &batch}, stream);
}

void small_solve(const LinalgBatch& p, const void* a, const void* b, void* out, std::int64_t nrhs, bool row_major,
                 std::int32_t* info, const Stream& stream) {
  long long batch = p.batch;
  int k = static_cast<int>(nrhs);
  if (nrhs > INT32_MAX) throw ValueError(fmt::format("solve: {} right-hand sides exceed the kernel's int count", nrhs));
  launch(SmallKernel::lu_solve, p, row_major, {&a, &b, &out, &k, &info, &batch}, stream);
}

void small_inv(const LinalgBatch& p, const void* a, void* out, std::int32_t* info, const Stream& stream) {
  if (p.n > 32) throw Error(fmt::format("inv: internal error: the warp inverse takes n <= 32, got {}", p.n));
  long long batch = p.batch;
  const std::int64_t per_warp = 32 / group_width(p.n);
  const std::int64_t warps = (p.batch + per_warp - 1) / per_warp;
  launch(SmallKernel::inv, p, false, {&a, &out, &info, &batch}, stream, warps * 32, 128);
}

void small_eigh(const LinalgBatch& p, const void* a, void* v, void* w, bool vectors, std::int32_t* info,
                const Stream& stream) {
  long long batch = p.batch;
  int flag = vectors ? 1 : 0, sweeps = kMaxSweeps;
  if (small_kernel_applies(SmallKernel::eigh_tridiagonal, p)) {  // first: its rows take the large batches
    int steps = kTridiagonalStepsPerOrder * static_cast<int>(p.n);
    return launch(SmallKernel::eigh_tridiagonal, p, false, {&a, &v, &w, &flag, &steps, &info, &batch}, stream);
  }
  if (small_kernel_applies(SmallKernel::eigh, p)) {
    return launch(SmallKernel::eigh, p, false, {&a, &v, &w, &flag, &sweeps, &info, &batch}, stream);
  }
  if (p.n > 32) throw Error(fmt::format("eigh: internal error: the warp kernel takes n <= 32, got {}", p.n));
  launch_block(SmallKernel::eigh_warp, p, {&a, &v, &w, &flag, &sweeps, &info, &batch}, stream,
               block_kernel_bytes(SmallKernel::eigh_warp, p.dtype, p.n, p.n, vectors), "eigh");
}

void small_svd(const LinalgBatch& p, const void* a, void* s, void* u, void* vh, bool vectors, std::int32_t* info,
               const Stream& stream) {
  long long batch = p.batch;
  int v = vectors ? 1 : 0, sweeps = kMaxSweeps;
  if (small_kernel_applies(SmallKernel::svd, p)) {
    return launch(SmallKernel::svd, p, false, {&a, &s, &u, &vh, &v, &sweeps, &info, &batch}, stream);
  }
  launch_block(SmallKernel::svd_block, p, {&a, &s, &u, &vh, &v, &sweeps, &info, &batch}, stream,
               block_kernel_bytes(SmallKernel::svd_block, p.dtype, p.m, p.n, vectors), "svd");
}

}  // namespace tessel::backend::cuda

// tessel's own batched small-matrix kernels (device/linalg_small.cuh): the NVRTC requests,
// specialized on the matrix order, the launches, and the tuning table by which linalg.cpp's
// dispatcher chooses them over cuSOLVER.
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
#include "backend/linalg_small.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::backend::cuda {
namespace {

// ---- tuning table (CUB-style policy data: rows per op, dtype and range of orders) ----
// A batch takes tessel's kernel when a row of its op and dtype has min_n <= n <= max_n and
// batch >= min_batch; else the cuSOLVER / cuBLAS path of linalg.cpp. The per-thread kernels keep
// a whole matrix in registers, so max_n is bounded by register spills (the inverse keeps a row
// per lane of a warp: n <= 32). Measured on the H100 by bench/peers/linalg_crossover.py at batches
// 16, 64, 256, 4096 and 100,000 and orders 4, 8 and 16 (linalg_crossover in
// bench/results/nvidia-h100-80gb-hbm3-2026-11-28.json); `measurement` gives the library time over
// tessel's at the row's smallest batch and at 100,000. Below about 0.1 ms both paths are bound by
// the launch and the info read (16 matrices: 0.8-1.1x). LU alone (det, slogdet) has no row: the
// per-thread LU kernel was 0.4-1.1x getrfBatched at every measured point.
const SmallKernelTuning kTuning[] = {
    {SmallKernel::cholesky, DType::float32, 1, 16, 64, "n 4-16: 1.11-1.27x at batch 64, 3.1-10x at 100,000"},
    {SmallKernel::cholesky, DType::float64, 1, 16, 64, "n 4-16: 0.96-1.29x at 64, 1.36-1.38x at 256, 1.9-11.6x at 100,000"},
    {SmallKernel::lu_solve, DType::float32, 1, 8, 64, "n 4, 8: 2.4-2.9x at 64, 5.8-6.1x at 100,000"},
    {SmallKernel::lu_solve, DType::float32, 9, 16, 256, "n 16: 0.98x at 64, 1.46x at 256, 2.41x at 100,000"},
    {SmallKernel::lu_solve, DType::float64, 1, 8, 64, "n 4, 8: 2.3-2.4x at 64, 4.4-5.3x at 100,000"},
    {SmallKernel::lu_solve, DType::float64, 9, 16, 256, "n 16: 0.74x at 64, 1.09x at 256, 1.35x at 100,000"},
    // eigh_tridiagonal (checked before eigh, so it takes the batches of its rows and eigh the
    // smaller ones) against the kernel the table chose before it (eigh to n 7 in float32 and 6 in
    // float64, eigh_warp above), each forced, on the H200 by bench/peers/linalg_crossover.py at
    // batches 4096 and 100,000 (linalg_crossover of nvidia-h200-2026-12-01.json), the other
    // kernel's time over its own; below 4096 it was not measured. It loses at n 16 (0.48-0.91x).
    {SmallKernel::eigh_tridiagonal, DType::float32, 1, 8, 4096,
     "n 4, 6, 7, 8: 1.15, 1.35, 1.55, 0.97x at 4096; 1.12, 1.60, 1.72, 2.22x at 100,000"},
    {SmallKernel::eigh_tridiagonal, DType::float32, 12, 12, 100000, "n 12: 0.87x at 4096, 1.78x at 100,000"},
    {SmallKernel::eigh_tridiagonal, DType::float64, 1, 6, 4096, "n 4, 6: 1.12, 1.41x at 4096; 1.19, 1.50x at 100,000"},
    {SmallKernel::eigh_tridiagonal, DType::float64, 7, 8, 100000, "n 7, 8: 0.98, 0.82x at 4096; 1.73, 1.35x at 100,000"},
    {SmallKernel::eigh_tridiagonal, DType::float64, 12, 12, 100000, "n 12: 0.88x at 4096, 1.99x at 100,000"},
    {SmallKernel::eigh, DType::float32, 1, 4, 64, "n 4: 1.22x at 64, 15.9x at 100,000"},
    // n 5-8: the per-thread kernel against the warp kernel (eigh_warp rows below), each forced, at
    // batches 256 to 100,000 (linalg_crossover rows tessel-eigh and tessel-eigh_warp of 2026-11-28):
    // per-thread wins at 100,000 to n 7 in float32 (0.108 against 0.148 ms) and n 6 in float64
    // (0.128 against 0.260); from n 8 (float64: 7) the warp kernel wins at every batch.
    {SmallKernel::eigh, DType::float32, 5, 7, 256, "n 5-7: 2.2-3.5x at 256, 20-40x at 100,000"},
    {SmallKernel::eigh, DType::float64, 1, 4, 64, "n 4: 1.29x at 64, 17.4x at 100,000"},
    {SmallKernel::eigh, DType::float64, 5, 6, 256, "n 5, 6: 2.06, 1.52x at 256; 27.2, 20.6x at 100,000"},
    // eigh at n 9-16: syevjBatched wins at every measured batch (n 16: 0.07-0.66x).
    {SmallKernel::svd, DType::float32, 1, 8, 64, "n 4, 8: 1.09-2.17x at 64, 63-220x at 100,000"},
    {SmallKernel::svd, DType::float32, 9, 16, 4096, "n 16: 0.19x at 256, 2.0x at 4096, 4.9x at 100,000"},
    {SmallKernel::svd, DType::float64, 1, 4, 64, "n 4: 2.16x at 64, 326x at 100,000"},
    {SmallKernel::svd, DType::float64, 5, 8, 256, "n 8: 0.61x at 64, 1.18x at 256, 64x at 100,000"},
    {SmallKernel::svd, DType::float64, 9, 16, 4096, "n 16: 0.29x at 256, 2.7x at 4096, 6.2x at 100,000"},
    // inv: Gauss-Jordan, a warp (or a part of one) per matrix, every n <= 32 and every batch.
    {SmallKernel::inv, DType::float32, 1, 32, 1,
     "n 4-16: 3.1-3.5x at 16, 6.4-8.6x at 100,000; n 32, batch 20,000: 0.241 ms (getrfBatched path 2.853)"},
    {SmallKernel::inv, DType::float64, 1, 32, 1, "n 4-16: 2.9-3.2x at 16, 6.2-8.8x at 100,000"},
    // eigh_warp takes eigh from n = 8 (float64: 7) to 32 (one-sided Jacobi, a column per lane),
    // where it beats syevjBatched at every measured point; from n = 9 below 1024 matrices it was
    // not measured. Measured on the H100 by bench/peers/linalg_crossover.py at orders 5-8 and
    // batches 256 to 100,000, and at orders 16, 24 and 32 and batches 1024, 20,000 and 100,000
    // (linalg_crossover in bench/results/nvidia-h100-80gb-hbm3-2026-11-28.json), library time
    // over tessel's.
    {SmallKernel::eigh_warp, DType::float32, 8, 8, 256, "n 8: 2.79x at 256, 17.1x at 100,000"},
    {SmallKernel::eigh_warp, DType::float64, 7, 8, 256, "n 7, 8: 2.80, 2.94x at 256; 10.5, 13.3x at 100,000"},
    {SmallKernel::eigh_warp, DType::float32, 9, 32, 1024,
     "n 16, 24, 32: 1.62, 2.35, 3.21x at 1024; 4.10, 3.60, 3.08x at 20,000; 4.61, 3.68, 3.16x at 100,000"},
    {SmallKernel::eigh_warp, DType::float64, 9, 32, 1024,
     "n 16, 24, 32: 1.77, 2.24, 2.40x at 1024; 2.31, 2.64, 2.90x at 20,000; 2.29, 2.61, 2.87x at 100,000"},
    // svd_block takes what the per-thread rows leave (n > 16), where it beats cuSOLVER
    // (gesvdjBatched to n = 32, gesvdj per matrix above). Measured on the H100 by
    // bench/peers/linalg_crossover.py, library time over tessel's, at batches 1, 32 and 1024
    // (orders 24 to 128: linalg_crossover in bench/results/nvidia-h100-80gb-hbm3-2026-11-27.json) and
    // 1024, 20,000 and 100,000 (orders 17 to 32: linalg_crossover_block_rows in
    // nvidia-h100-80gb-hbm3-2026-11-28.json): it wins from n = 48 at batch 32 (14-28x) and 1024
    // (63-434x float32, 71-294x float64), and loses at batch 1 (0.5-1.0x); at n 17-32 it loses at
    // 1024 (0.62-0.86x, but 1.27x in float64 at n = 24) and wins at 20,000.
    // max_n: 128 in float32; 112 in float64, where the matrix and V still fit the H100's 227 KB of
    // shared memory per block.
    {SmallKernel::svd_block, DType::float32, 17, 32, 20000, "n 24, 32: 0.62-0.86x at 1024, 1.30-2.05x at 20,000"},
    {SmallKernel::svd_block, DType::float32, 33, 128, 32,
     "n 48, batch 32: 1.22 ms (gesvdj 34.6); n 128, batch 2000: 83.7 ms (PyTorch 5185, CuPy 18989)"},
    {SmallKernel::svd_block, DType::float64, 17, 24, 1024, "n 24: 1.27x at 1024, 2.41x at 20,000"},
    {SmallKernel::svd_block, DType::float64, 25, 32, 20000, "n 32: 0.86x at 1024, 1.19x at 20,000"},
    {SmallKernel::svd_block, DType::float64, 33, 112, 32, "n 48, batch 32: 1.82 ms (gesvdj 47.3)"},
};

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

// Loaded kernels by (request name, device): a launch does one map lookup. A block kernel may use
// all of the device's shared memory per block (set once, at load).
jit::Kernel kernel_for(const jit::CompileRequest& request, Device device, bool block = false) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, jit::Kernel> loaded;
  const auto key = std::make_pair(request.name, device.index);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = loaded.find(key);
    if (it != loaded.end()) return it->second;
  }
  jit::Kernel k = jit::get_kernel(request, device);  // compiles (or reads the disk cache) outside the lock
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
  const jit::Kernel k = kernel_for(small_kernel_request(kind, p.dtype, p.m, p.n, upper), stream.device());
  k.launch(k.launch_config_fixed(threads > 0 ? threads : p.batch, block, kWaves), args, stream);
}

// A block kernel's launch: `team` threads per matrix (block_kernel_team), team_bytes of shared
// memory each; a block of 4 warp teams, or of one block team. The grid covers the batch up to
// kWaves waves of resident blocks (the teams grid-stride beyond).
void launch_block(SmallKernel kind, const LinalgBatch& p, std::vector<void*> args, const Stream& stream,
                  std::int64_t team_bytes, const char* op) {
  const int team = block_kernel_team(kind, p.n);
  const std::int64_t per_team = kind == SmallKernel::eigh_warp ? 32 / group_width(p.n) : 1;  // matrices
  const jit::Kernel k = kernel_for(small_kernel_request(kind, p.dtype, p.m, p.n, false), stream.device(), true);
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

#pragma once
// Gathers, scatters, mask compaction and nonzero, implemented by backend/cpu/indexing.cpp and
// backend/cuda/indexing.cu with the same signatures. src/ops/indexing.cpp turns every indexing
// form into these problems: a launch shape (the result of the indexing expression), the indexed
// array seen over that shape (its strides on the sliced axes, 0 on the axes the index arrays
// make), and the index arrays broadcast over it.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/elementwise.hpp"

namespace tessel::backend {

// One index array of a gather or scatter. A plain integer index selects along one axis of the
// indexed array (negative values count from the end; out of range is reported through the
// status). An index that comes from a boolean mask holds flat positions into the mask's axes
// (C order, always in range) and selects along all of them: `axes` has one entry per mask axis.
struct IndexAxis {
  std::int64_t size = 0;    // the axis' length
  std::int64_t stride = 0;  // its stride in the indexed array, elements
};
struct IndexOperand {
  const void* data = nullptr;        // element 0 of the index array's view
  DType dtype = DType::int64;        // any integer dtype
  std::vector<std::int64_t> strides;  // over the launch shape, elements (0 on broadcast axes)
  std::vector<IndexAxis> axes;       // one (integer index) or the mask's axes (flat positions)
  bool from_mask = false;
};

// What the host reads after a checked launch: status[0] the size a compaction found, status[1]
// the failing index operand + 1 (0: none), status[2] the failing index value.
constexpr int kStatusWords = 3;

struct GatherProblem {
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;    // launch shape
  void* base = nullptr;               // the indexed array at element 0 of its (basic-indexed) view
  std::vector<std::int64_t> base_strides;  // over the launch shape
  std::vector<IndexOperand> indices;
  // gather: out is C-contiguous over the launch shape.
  void* out = nullptr;
  // scatter: the values over the launch shape (strides, 0 on broadcast axes), or one scalar.
  const void* values = nullptr;
  std::vector<std::int64_t> value_strides;
  bool value_is_scalar = false;
  alignas(16) unsigned char scalar[16] = {};  // the scalar's bytes in `dtype`
  // Gathers and check_indices report an out-of-range index in status[1..2] (device-visible
  // memory on CUDA); without check_bounds an out-of-range index is undefined behaviour.
  bool check_bounds = true;
  std::int64_t* status = nullptr;
};

// x[m] = value in place over x's (basic-indexed) view: the mask and the value broadcast over it.
struct MaskedAssignProblem {
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  void* x = nullptr;
  std::vector<std::int64_t> x_strides;
  const bool* mask = nullptr;
  std::vector<std::int64_t> mask_strides;
  const void* values = nullptr;  // null: the scalar below
  std::vector<std::int64_t> value_strides;
  alignas(16) unsigned char scalar[16] = {};
};

// The CUDA stream's status words: page-locked host memory the device writes directly (no copy
// back), kept per stream (a StreamCache, backend/cuda/stream_cache.hpp) and reused; [1] and [2]
// are 0 between uses. The lock is held from before the launch until the host has read them (after
// a stream synchronize). The CPU backend writes the ops layer's own host words instead.
struct StatusLease {
  std::int64_t* words = nullptr;  // what kernels write (the device's address of `host`, or device memory)
  std::int64_t* host = nullptr;   // what the host reads after read_status
  bool copy_back = false;         // words is device memory, copied to host by read_status
  std::unique_lock<std::mutex> lock;
};

// gather, scatter (indices already checked) and check_indices (only checks the indices of
// `problem`; launch shape = the indices' broadcast shape). select_flagged copies the elements of
// the contiguous `in` (n items of itemsize bytes) whose flag is set to `out`, in order, and
// flat_nonzero writes the positions (0..n-1) of the set flags, in order; both write their count
// to status[0] (on CUDA the device writes it, read after a stream synchronize: one pass, a
// decoupled look-back scan over 16K-element tiles, any item width of 1, 2, 4, 8 or 16 bytes, any
// alignment of in and flags, any n >= 0). unravel splits flat C-order positions into one int64
// coordinate array per axis of `shape`. The CPU runs synchronously and ignores `stream`.
#define TESSEL_INDEXING_BACKEND(X)                                                                          \
  X(void, gather, (const GatherProblem& problem, const Stream& stream))                                    \
  X(void, scatter, (const GatherProblem& problem, const Stream& stream))                                   \
  X(void, check_indices, (const GatherProblem& problem, const Stream& stream))                             \
  X(void, select_flagged,                                                                                  \
    (const void* in, std::int64_t itemsize, const bool* flags, std::int64_t n, void* out, std::int64_t* status, \
     const Stream& stream))                                                                                \
  X(void, flat_nonzero, (const bool* flags, std::int64_t n, std::int64_t* out, std::int64_t* status, const Stream& stream)) \
  X(void, unravel,                                                                                         \
    (const std::int64_t* flat, std::int64_t n, const std::vector<std::int64_t>& shape,                      \
     const std::vector<std::int64_t*>& out, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_INDEXING_BACKEND)

// CUDA only. masked_assign: one generated pass, x = m ? value : x (vector loads and stores when
// everything is contiguous; the ops layer runs where() on the CPU). lease_status: the stream's
// status words; read_status: the host waits for the stream and can then read lease.host (the one
// synchronization); clear_status zeroes the failure words after a reported failure.
#define TESSEL_INDEXING_CUDA_ONLY(X)                                           \
  X(void, masked_assign, (const MaskedAssignProblem& problem, const Stream& stream)) \
  X(StatusLease, lease_status, (const Stream& stream))                         \
  X(void, read_status, (StatusLease& lease, const Stream& stream))             \
  X(void, clear_status, (StatusLease& lease, const Stream& stream))
TESSEL_BACKEND_CUDA_ONLY(TESSEL_INDEXING_CUDA_ONLY)

namespace cuda {
using backend::StatusLease;
enum class IndexKernel { gather, scatter, check };
// The generated kernel's spec for a problem (what the launcher compiles; tests compile it too).
jit::ElementwiseSpec index_kernel_spec(IndexKernel kind, const GatherProblem& problem);
jit::ElementwiseSpec masked_assign_spec(DType dtype, bool scalar_value);
// Tests only: the epoch of the stream's last compaction (0: none since its scratch was zeroed);
// with set != 0, moves it forward to `set` (at most 2^22 - 1), e.g. to reach the wrap-around.
unsigned compaction_epoch_for_testing(const Stream& stream, unsigned set = 0);
}  // namespace cuda

}  // namespace tessel::backend

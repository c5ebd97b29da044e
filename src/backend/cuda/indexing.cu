// CUDA gathers, scatters, index checks, the status words and nonzero's unravel (see
// backend/indexing.hpp); the mask compaction is in indexing_compact.cu.
//
// - Gathers, scatters and index checks are generated at run time through jit::ElementwiseLauncher
//   (one launch path for generated kernels): the indexed array is a pointer operand whose strides
//   cover the sliced axes, the index arrays are ordinary inputs broadcast over the launch shape,
//   and the body adds each index times its axis' stride. One launcher per (kind, dtype, index
//   dtypes, mask ranks, checked or not: launcher_key), kept for the process; the launcher keys
//   layout and rank.
// - Mask compaction and nonzero are one pass each: indexing_compact.cu.
// - Status words (the compaction's count, the failing index) live in page-locked host memory the
//   kernels write directly, so reading them costs one stream synchronize and no copy.
#include <cuda_runtime_api.h>


#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/stream_cache.hpp"
#include "backend/indexing.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

constexpr const char* kIndexPreamble = R"(
#ifndef TESSEL_INDEX_PREAMBLE
#define TESSEL_INDEX_PREAMBLE
// Records an out-of-range index: which index operand (slot + 1) and its value. Plain stores (the
// words may be host memory, where device atomics are not guaranteed): when several threads fail,
// the host may read one thread's slot with another's value, and checks the pair before naming it.
__device__ __noinline__ void tessel_index_fail(unsigned long long status, int slot, long long value) {
  volatile long long* words = reinterpret_cast<volatile long long*>(status);
  words[1] = slot + 1;
  words[2] = value;
}
#endif
)";

using Kind = IndexKernel;

bool gathers_by_address(const GatherProblem& p) {
  for (std::int64_t s : p.base_strides) {
    if (s != 0) return false;
  }
  return true;
}

std::string dtype_tag(DType d) { return dtype_name(d); }

}  // namespace

// The spec of one generated gather / scatter / check kernel.
jit::ElementwiseSpec index_kernel_spec(IndexKernel kind, const GatherProblem& p) {
  const bool value_is_scalar = p.value_is_scalar;
  jit::ElementwiseSpec spec;
  spec.widen_half = false;  // elements move unchanged
  spec.preamble = kIndexPreamble;
  std::string name = kind == Kind::gather ? "tessel_gather" : kind == Kind::scatter ? "tessel_scatter" : "tessel_index_check";
  if (kind != Kind::check) name += "_" + dtype_tag(p.dtype);
  // A gather whose every result axis comes from the index arrays reads the source through its
  // address alone (a by-value parameter): the launch stays contiguous, with vector loads of the
  // indices and stores of the result, when the index arrays are contiguous.
  const bool src_by_value = kind == Kind::gather && gathers_by_address(p);
  if (kind == Kind::gather) {
    // Evict-first loads of the indices and stores of the result: the fastest of 25 variants on
    // the H100 (unrolling, block sizes, the read-only path, L2 keep hints and 32-bit offsets gained
    // nothing; python_indexing_gather_variants in bench/results/nvidia-h100-80gb-hbm3-2026-11-27.json).
    spec.streaming = true;
    spec.operands.push_back({"out", p.dtype, true, false, false});
    if (src_by_value) {
      spec.operands.push_back({"srcp", DType::uint64, false, true, false});
      name += "_a";
    } else {
      spec.operands.push_back({"src", p.dtype, false, false, true});
    }
  } else if (kind == Kind::scatter) {
    spec.operands.push_back({"dst", p.dtype, true, false, true});
    spec.operands.push_back({"val", p.dtype, false, value_is_scalar, false});
    if (value_is_scalar) name += "_scalar";
  } else {
    // A check writes no array: the first index array, as a pointer operand that is never read,
    // gives the launch its shape and layout.
    spec.operands.push_back({"anchor", p.indices.at(0).dtype, false, false, true});
  }
  const bool checked = kind == Kind::check || (kind == Kind::gather && p.check_bounds);
  // off: elements from the source's place along the indexed axes. The bounds check and the
  // negative-index wrap run on the 64-bit index value either way.
  const std::string off_t = "long long";
  std::string body = "long long off = 0;\n";
  for (std::size_t k = 0; k < p.indices.size(); ++k) {
    const IndexOperand& op = p.indices[k];
    const std::string i = "i" + std::to_string(k);
    const std::string a = "a" + std::to_string(k) + "_";
    spec.operands.push_back({i, op.dtype, false, false, false});
    name += "_" + dtype_tag(op.dtype);
    for (std::size_t j = 0; j < op.axes.size(); ++j) {
      spec.operands.push_back({a + "n" + std::to_string(j), DType::int64, false, true, false});
      spec.operands.push_back({a + "s" + std::to_string(j), DType::int64, false, true, false});
    }
    if (op.from_mask) {
      name += "m" + std::to_string(op.axes.size());
      body += "{ long long p = (long long)" + i + ";\n";
      for (std::size_t j = op.axes.size(); j-- > 1;) {
        const std::string n = a + "n" + std::to_string(j), s = a + "s" + std::to_string(j);
        body += "  off += (p % " + n + ") * " + s + "; p /= " + n + ";\n";
      }
      body += "  off += p * " + a + "s0; }\n";
      continue;
    }
    const std::string n = a + "n0", s = a + "s0";
    const std::string fail = "tessel_index_fail(v_status, " + std::to_string(k) + ", (long long)" + i + ")";
    if (is_unsigned_integer(op.dtype)) {
      body += "{ unsigned long long uj = (unsigned long long)" + i + ";\n";
      if (checked) body += "  if (uj >= (unsigned long long)" + n + ") { " + fail + "; uj = 0; }\n";
      body += "  off += (" + off_t + ")uj * (" + off_t + ")" + s + "; }\n";
    } else {
      body += "{ long long j = (long long)" + i + "; if (j < 0) j += " + n + ";\n";
      if (checked) body += "  if ((unsigned long long)j >= (unsigned long long)" + n + ") { " + fail + "; j = 0; }\n";
      body += "  off += (" + off_t + ")j * (" + off_t + ")" + s + "; }\n";
    }
  }
  if (checked) {
    spec.operands.push_back({"status", DType::uint64, false, true, false});
    name += "_chk";
  }
  if (kind == Kind::gather) {
    const std::string place = src_by_value
                                  ? std::string("reinterpret_cast<const ") + cuda_type_name(p.dtype) + "*>(v_srcp) + off"
                                  : std::string("src + off");
    body += "out = *(" + place + ");\n";
  }
  if (kind == Kind::scatter) body += "dst[off] = val;\n";
  if (kind == Kind::check) body += "(void)off; (void)anchor;\n";
  // The body reads the status scalar as v_status (a by-value parameter), not the body variable.
  spec.name = name;
  spec.body = body;
  return spec;
}

namespace {

// What index_kernel_spec's kernel depends on, as bytes: the kind, the element dtype, whether the
// source goes by address, a scalar value, the bounds check, and per index operand its dtype,
// whether it came from a mask and its axis count (the first byte, the kind, is never 'm': the
// masked assignment's keys). The launchers are found by this key, so a launch builds no spec (the
// spec's name and body strings cost microseconds per call).
std::string launcher_key(Kind kind, const GatherProblem& p) {
  std::string key;
  key.reserve(8 + 3 * p.indices.size());
  key.push_back(static_cast<char>(kind));
  key.push_back(static_cast<char>(p.dtype));
  key.push_back(static_cast<char>(kind == Kind::gather && gathers_by_address(p)));
  key.push_back(static_cast<char>(kind == Kind::scatter && p.value_is_scalar));
  key.push_back(static_cast<char>(kind == Kind::check || (kind == Kind::gather && p.check_bounds)));
  for (const IndexOperand& op : p.indices) {
    key.push_back(static_cast<char>(op.dtype));
    key.push_back(static_cast<char>(op.from_mask));
    key.push_back(static_cast<char>(op.axes.size()));
  }
  return key;
}

// The process's launcher for `key`; `make_spec` builds its spec on the first call only.
// (A pointer, not a reference: GCC 13's -Wdangling-reference flags a reference returned from a call
// that takes a temporary key.)
template <class MakeSpec>
const jit::ElementwiseLauncher* launcher_for(std::string key, MakeSpec make_spec) {
  static std::mutex mutex;
  static auto* launchers = new std::unordered_map<std::string, std::unique_ptr<jit::ElementwiseLauncher>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = launchers->find(key);
  if (it == launchers->end()) {
    it = launchers->emplace(std::move(key), std::make_unique<jit::ElementwiseLauncher>(make_spec())).first;
  }
  return it->second.get();
}

// Argument views in spec order; every pointer stays valid until the launch returns.
struct LaunchArgs {
  std::vector<jit::ElementwiseArgView> views;
  std::vector<std::int64_t> words;  // scalar values (reserved up front: views point into it)
  std::vector<std::int64_t> contiguous;

  void array(const void* data, const std::vector<std::int64_t>& strides) {
    views.push_back({data, strides.data(), strides.size(), nullptr});
  }
  void scalar(std::int64_t value) {
    words.push_back(value);
    views.push_back({nullptr, nullptr, 0, reinterpret_cast<const unsigned char*>(&words.back())});
  }
};

void launch(Kind kind, const GatherProblem& p, const Stream& stream) {
  const jit::ElementwiseLauncher& launcher = *launcher_for(launcher_key(kind, p), [&] { return index_kernel_spec(kind, p); });
  LaunchArgs args;
  std::size_t scalars = 2;
  for (const IndexOperand& op : p.indices) scalars += 2 * op.axes.size();
  args.words.reserve(scalars);
  std::int64_t stride = 1;
  args.contiguous.assign(p.shape.size(), 0);
  for (std::size_t d = p.shape.size(); d-- > 0;) {
    args.contiguous[d] = stride;
    stride *= p.shape[d];
  }
  if (kind == Kind::gather) {
    args.array(p.out, args.contiguous);
    if (gathers_by_address(p)) {
      args.scalar(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p.base)));
    } else {
      args.array(p.base, p.base_strides);
    }
  } else if (kind == Kind::scatter) {
    args.array(p.base, p.base_strides);
    if (p.value_is_scalar) {
      args.views.push_back({nullptr, nullptr, 0, p.scalar});
    } else {
      args.array(p.values, p.value_strides);
    }
  } else {
    args.array(p.indices.at(0).data, p.indices.at(0).strides);
  }
  for (const IndexOperand& op : p.indices) {
    args.array(op.data, op.strides);
    for (const IndexAxis& axis : op.axes) {
      args.scalar(axis.size);
      args.scalar(axis.stride);
    }
  }
  const bool checked = kind == Kind::check || (kind == Kind::gather && p.check_bounds);
  if (checked) args.scalar(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p.status)));
  launcher.launch(p.shape, args.views.data(), args.views.size(), stream.device(), stream);
}


constexpr int kMaxUnravelDims = 64;
struct UnravelArgs {
  long long dims[kMaxUnravelDims];
  long long* out[kMaxUnravelDims];
};

__global__ void unravel_kernel(const long long* flat, long long n, int ndim, const UnravelArgs args) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long p = flat[i];
    for (int d = ndim - 1; d >= 1; --d) {
      args.out[d][i] = p % args.dims[d];
      p /= args.dims[d];
    }
    args.out[0][i] = p;
  }
}

struct StatusSlot {
  std::shared_ptr<Buffer> host;    // page-locked, read by the host
  std::shared_ptr<Buffer> device;  // set only where the device cannot write `host` directly
  std::int64_t* device_words = nullptr;
  std::mutex mutex;
};

auto* const g_slots = new StreamCache<StatusSlot>();

}  // namespace

StatusLease lease_status(const Stream& stream) {
  StatusSlot* slot = &g_slots->get(stream.id(), [&] {
    auto made = std::make_unique<StatusSlot>();
    made->host = Buffer::allocate_pinned(kStatusWords * 8, stream);
    std::memset(made->host->data(), 0, kStatusWords * 8);
    DeviceGuard guard(stream.device());
    void* device_pointer = nullptr;
    // Page-locked memory is mapped into every device's address space under unified addressing.
    if (cudaHostGetDevicePointer(&device_pointer, made->host->data(), 0) == cudaSuccess && device_pointer) {
      made->device_words = static_cast<std::int64_t*>(device_pointer);
    } else {
      (void)cudaGetLastError();
      made->device = Buffer::allocate(stream.device(), kStatusWords * 8, stream);
      TESSEL_CUDA_CHECK(cudaMemsetAsync(made->device->data(), 0, kStatusWords * 8, detail::cuda_stream(stream)),
                        "indexing");
      made->device_words = static_cast<std::int64_t*>(made->device->data());
    }
    return made;
  });
  StatusLease lease;
  lease.lock = std::unique_lock<std::mutex>(slot->mutex);
  lease.words = slot->device_words;
  lease.host = static_cast<std::int64_t*>(slot->host->data());
  lease.copy_back = slot->device != nullptr;
  return lease;
}

void read_status(StatusLease& lease, const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (lease.copy_back) {
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(lease.host, lease.words, kStatusWords * 8, cudaMemcpyDeviceToHost,
                                      detail::cuda_stream(stream)),
                      "indexing");
  }
  stream.synchronize();
}

void clear_status(StatusLease& lease, const Stream& stream) {
  lease.host[1] = lease.host[2] = 0;
  if (lease.copy_back) {
    DeviceGuard guard(stream.device());
    TESSEL_CUDA_CHECK(cudaMemsetAsync(lease.words + 1, 0, 2 * 8, detail::cuda_stream(stream)),
                      "indexing");
  }
}

void gather(const GatherProblem& problem, const Stream& stream) { launch(Kind::gather, problem, stream); }

jit::ElementwiseSpec masked_assign_spec(DType dtype, bool scalar) {
  jit::ElementwiseSpec spec;
  spec.widen_half = false;  // elements move unchanged
  spec.name = "tessel_masked_assign_" + dtype_tag(dtype) + (scalar ? "_scalar" : "");
  spec.operands.push_back({"x", dtype, true, false, false});
  spec.operands.push_back({"m", DType::bool_, false, false, false});
  spec.operands.push_back({"val", dtype, false, scalar, false});
  spec.body = "if (m) x = val;";
  return spec;
}

void masked_assign(const MaskedAssignProblem& p, const Stream& stream) {
  const bool scalar = p.values == nullptr;
  const std::string key = {'m', static_cast<char>(p.dtype), static_cast<char>(scalar)};
  const jit::ElementwiseLauncher& launcher = *launcher_for(key, [&] { return masked_assign_spec(p.dtype, scalar); });
  LaunchArgs args;
  args.array(p.x, p.x_strides);
  args.array(p.mask, p.mask_strides);
  if (scalar) {
    args.views.push_back({nullptr, nullptr, 0, p.scalar});
  } else {
    args.array(p.values, p.value_strides);
  }
  launcher.launch(p.shape, args.views.data(), args.views.size(), stream.device(), stream);
}
void scatter(const GatherProblem& problem, const Stream& stream) { launch(Kind::scatter, problem, stream); }
void check_indices(const GatherProblem& problem, const Stream& stream) { launch(Kind::check, problem, stream); }

void unravel(const std::int64_t* flat, std::int64_t n, const std::vector<std::int64_t>& shape,
             const std::vector<std::int64_t*>& out, const Stream& stream) {
  if (n == 0) return;
  if (shape.size() > static_cast<std::size_t>(kMaxUnravelDims)) {
    throw ValueError("nonzero: at most " + std::to_string(kMaxUnravelDims) + " dimensions are supported");
  }
  DeviceGuard guard(stream.device());
  const auto s = detail::cuda_stream(stream);
  UnravelArgs args{};
  for (std::size_t d = 0; d < shape.size(); ++d) {
    args.dims[d] = shape[d];
    args.out[d] = reinterpret_cast<long long*>(out[d]);
  }
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<long long>((n + threads - 1) / threads, 1LL << 16));
  unravel_kernel<<<blocks, threads, 0, s>>>(reinterpret_cast<const long long*>(flat), n, static_cast<int>(shape.size()),
                                            args);
  TESSEL_CUDA_CHECK_LAUNCH(s, "nonzero");
}

}  // namespace tessel::backend::cuda

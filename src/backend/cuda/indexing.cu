// CUDA gathers, scatters, index checks, mask compaction and nonzero (see backend/indexing.hpp).
//
// - Gathers, scatters and index checks are generated at run time through jit::ElementwiseLauncher
//   (one launch path for generated kernels): the indexed array is a pointer operand whose strides
//   cover the sliced axes, the index arrays are ordinary inputs broadcast over the launch shape,
//   and the body adds each index times its axis' stride. One launcher per (kind, dtype, index
//   dtypes, mask ranks, checked or not: launcher_key), kept for the process; the launcher keys
//   layout and rank.
// - Mask compaction and nonzero are one pass each (compact::select_kernel, a decoupled look-back
//   over 16K-element tiles) that writes the selected items and their count. It is instantiated
//   per item width (1, 2, 4, 8, 16 bytes), not per dtype, plus once for positions.
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
    // the H100 (1e8 float32 source, 1e7 int64 indices: 0.357 ms checked against 0.366 ms with
    // plain accesses; unrolling, block sizes, the read-only path, L2 keep hints and 32-bit
    // offsets gained nothing; python_indexing_gather_variants in
    // bench/results/nvidia-h100-80gb-hbm3-2026-11-27.json).
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

// ---- mask compaction: one pass, a decoupled look-back over tiles of 16K elements ----
//
// One block per tile of kTileElems elements; the blocks take tiles in launch order (an atomic
// counter), so every tile a block waits on belongs to a block that is already running. A block:
//  1. reads the tile's flags (uint4 = 16 flags per thread and step) and turns them into one
//     16-bit mask per (thread, step);
//  2. scans the selected counts in (step, thread) order: a warp scan per step, then one warp
//     scans the 32 (step, warp) totals (kSteps * warps == 32 for every configuration);
//  3. publishes the tile's count and looks back over its predecessors' published counts for
//     the tile's output offset (one 64-bit word per tile: a 2-bit state, a 22-bit epoch and a
//     40-bit value);
//  4. per step, reads the items coalesced (lane l of a warp reads 16 bytes at l * 16, then
//     512 + l * 16, ...; only where one of the 16 bytes' flags is set), places the selected
//     ones in shared memory in order, and writes them out with aligned 16-byte stores.
// Bytes moved: n of flags + width * n of items (less where whole 16-byte groups are unselected)
// + width * count written. The count lands in status[0] from the last tile's block.
//
// Scratch without a per-call memset: the tile counter and the state words live in one buffer
// per stream (Scratch, below, in a StreamCache), zeroed once when it is allocated or grown, and reused by every
// compaction on that stream (the stream orders them: one launch uses it at a time).
//  - The counter: the block that takes the last ticket (tiles - 1) zeroes it. Every other block
//    has taken its ticket by then (the tickets are handed out by one atomic counter), so nothing
//    in this launch touches it again, and the next launch on the stream finds 0. A ticket past
//    the launch's tiles (a counter that did not start at 0) traps instead of writing anywhere.
//  - The states: each call has an epoch (1 .. 2^22 - 1) in every word it writes, and a word
//    counts only when its epoch is the call's own; words left by earlier calls (larger ones leave
//    words past a later call's own, and any call leaves them below) are waited past like unset
//    ones. Epochs are handed out in order after the buffer was zeroed; before one would repeat
//    (after 2^22 - 1 calls) the host zeroes the buffer again, so a word carrying this call's
//    epoch was written by this call.
// The value field holds counts up to 2^40 - 1, so n must stay below 2^40 (1.1e12 elements, a
// 1.1 TB mask): checked on the host. The host-side epoch assumes each launch it counts runs once,
// in the order issued on the stream; a launch into a stream capture (a graph may replay it) takes
// zeroed scratch of its own instead (the ops never capture one: they read the count back).
namespace compact {

constexpr int kTileElems = 16384;     // elements per tile
constexpr int kThreadStepElems = 16;  // flags per (thread, step): one uint4
constexpr int kWarpStepElems = 32 * kThreadStepElems;
constexpr unsigned kFull = 0xffffffffu;
constexpr unsigned long long kAggregate = 1ull << 62;  // the tile's own count is published
constexpr unsigned long long kInclusive = 2ull << 62;  // the count through this tile is published
constexpr int kValueBits = 40;                         // bits 0-39: the count
constexpr unsigned long long kValueMask = (1ull << kValueBits) - 1;
constexpr unsigned kEpochMask = (1u << 22) - 1;        // bits 40-61: the call's epoch (never 0)
constexpr long long kMaxElems = 1ll << kValueBits;     // n < kMaxElems

// How items are read: 16-byte vectors (items and flags 16-byte aligned), one naturally aligned
// word per item, bytes (items not aligned to their width), or no items (nonzero's positions).
enum class Load { vector, word, bytes, positions };

template <int W> struct WordOf;
template <> struct WordOf<1> { using type = unsigned char; };
template <> struct WordOf<2> { using type = unsigned short; };
template <> struct WordOf<4> { using type = unsigned int; };
template <> struct WordOf<8> { using type = unsigned long long; };
template <> struct WordOf<16> { using type = uint4; };

template <int W>
struct Config {
  static constexpr int kThreads = W <= 4 ? 256 : W == 8 ? 128 : 64;  // 16 KB of staged items per step
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kSteps = kTileElems / (kThreads * kThreadStepElems);
  static constexpr int kPerVector = 16 / W;  // items per 16 bytes
  static constexpr int kStageBytes = kThreads * kThreadStepElems * W + 16;
  static_assert(kSteps * kWarps == 32, "the (step, warp) totals are scanned by one warp");
};

// 4 flag bytes -> 4 bits (any nonzero byte is set).
__device__ __forceinline__ unsigned flag_nibble(unsigned word) {
  const unsigned ones = __vcmpne4(word, 0u) & 0x01010101u;
  return (ones * 0x10204080u) >> 28;  // bit 8i lands at 28 + i, without carries
}

// The 16 flags at e of a tile whose first `valid` flags exist (offsets within the tile).
__device__ __forceinline__ unsigned flags16(const unsigned char* flags, int e, int valid, bool vector) {
  if (vector && e + kThreadStepElems <= valid) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(flags + e));
    return flag_nibble(v.x) | (flag_nibble(v.y) << 4) | (flag_nibble(v.z) << 8) | (flag_nibble(v.w) << 12);
  }
  unsigned bits = 0;
#pragma unroll
  for (int k = 0; k < kThreadStepElems; ++k) {
    if (e + k < valid && flags[e + k] != 0) bits |= 1u << k;
  }
  return bits;
}

__device__ __forceinline__ long long warp_sum(long long v) {
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) v += __shfl_xor_sync(kFull, v, d);
  return v;
}

// A word is this call's when its state is set and its epoch is the call's.
__device__ __forceinline__ bool is_current(unsigned long long word, unsigned epoch) {
  return (word >> 62) != 0 && static_cast<unsigned>((word >> kValueBits) & kEpochMask) == epoch;
}

// Called by one whole warp: publishes the tile's count (tagged with the call's epoch) and
// returns the count of the tiles before it (in every lane).
__device__ long long look_back(unsigned long long* tile_state, long long tile, unsigned count, int lane,
                               unsigned epoch) {
  volatile unsigned long long* state = tile_state;
  const unsigned long long tag = static_cast<unsigned long long>(epoch) << kValueBits;
  if (tile == 0) {
    if (lane == 0) state[0] = kInclusive | tag | count;
    return 0;
  }
  if (lane == 0) state[tile] = kAggregate | tag | count;
  long long before = 0;
  for (long long top = tile - 1;; top -= 32) {
    const long long idx = top - 31 + lane;  // lane 31 reads the nearest predecessor
    unsigned long long word = kInclusive;   // before tile 0: an inclusive 0
    if (idx >= 0) {
      do {
        word = state[idx];
      } while (!is_current(word, epoch));  // unset, or left by an earlier call
    }
    const unsigned inclusive = __ballot_sync(kFull, (word >> 62) == 2);
    const int first = inclusive ? 31 - __clz(inclusive) : 0;  // the nearest inclusive word
    before += warp_sum(lane >= first ? static_cast<long long>(word & kValueMask) : 0);
    if (inclusive) break;
  }
  if (lane == 0) state[tile] = kInclusive | tag | static_cast<unsigned long long>(before + count);
  return before;
}

union Vector16 {
  uint4 v;
  unsigned char b[16];
};

template <int W, Load L>
struct Items {
  Vector16 v[W];   // this lane's 16-byte groups of the step (W groups of kPerVector items)
  unsigned meta[W];  // per group: its flags | (its first output slot, counted in the warp) << 16
};

template <int W, Load L>
// Offsets within the tile: `items` is the tile's first item, `seg` the warp's first element of
// the step, `valid` the number of elements of the tile that exist.
__device__ __forceinline__ void load_step(Items<W, L>& it, const unsigned char* items, int seg, int valid,
                                          unsigned state, int lane) {
  using Word = typename WordOf<W>::type;
  constexpr int P = Config<W>::kPerVector;
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const int q = (j * 32 + lane) * P;  // first element of the group in the warp's segment
    const unsigned owner = __shfl_sync(kFull, state, q / kThreadStepElems);
    const int b = q % kThreadStepElems;
    const unsigned mask16 = owner & 0xffffu;
    const unsigned bits = (mask16 >> b) & ((1u << P) - 1u);
    it.meta[j] = bits | (((owner >> 16) + __popc(mask16 & ((1u << b) - 1u))) << 16);
    if constexpr (L != Load::positions) {
      if (bits != 0) {
        const int e = seg + q;
        if (L == Load::vector && e + P <= valid) {
          it.v[j].v = __ldg(reinterpret_cast<const uint4*>(items + static_cast<unsigned>(e) * W));
        } else {
#pragma unroll
          for (int k = 0; k < P; ++k) {
            if ((bits >> k) & 1u) {  // set flags are all below n
              const unsigned char* src = items + static_cast<unsigned>(e + k) * W;
              if constexpr (L == Load::bytes) {
#pragma unroll
                for (int c = 0; c < W; ++c) it.v[j].b[k * W + c] = src[c];
              } else if constexpr (W == 16) {  // 8-byte alignment is what is known
                const unsigned long long* words = reinterpret_cast<const unsigned long long*>(src);
                unsigned long long lo = words[0], hi = words[1];
                memcpy(&it.v[j].b[0], &lo, 8);
                memcpy(&it.v[j].b[8], &hi, 8);
              } else {
                const Word w = *reinterpret_cast<const Word*>(src);
                memcpy(&it.v[j].b[k * W], &w, W);
              }
            }
          }
        }
      }
    }
  }
}

template <int W, Load L>
__global__ void __launch_bounds__(Config<W>::kThreads, 4)
    select_kernel(const unsigned char* items, const unsigned char* flags, long long n, unsigned char* out,
                  long long* count, unsigned long long* tile_state, unsigned long long* next_tile,
                  long long tiles, unsigned epoch, bool vector_flags) {
  using C = Config<W>;
  using Word = typename WordOf<W>::type;
  constexpr int T = C::kThreads, S = C::kSteps, P = C::kPerVector;
  __shared__ alignas(16) unsigned char stage[C::kStageBytes];
  __shared__ unsigned totals[32];  // per (step, warp); then their exclusive scan
  __shared__ long long s_tile, s_before;
  __shared__ unsigned s_count;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;

  if (t == 0) {
    const unsigned long long ticket = atomicAdd(next_tile, 1ull);
    if (ticket >= static_cast<unsigned long long>(tiles)) __trap();  // the counter did not start at 0
    // The last ticket: every block of this launch has taken its own; zero the counter for the
    // next launch on the stream (see the comment above namespace compact).
    if (ticket == static_cast<unsigned long long>(tiles - 1)) atomicExch(next_tile, 0ull);
    s_tile = static_cast<long long>(ticket);
  }
  __syncthreads();
  const long long tile = s_tile;
  const long long base = tile * kTileElems;
  // Within the tile, offsets are 32-bit.
  const int valid = static_cast<int>(n - base < kTileElems ? n - base : kTileElems);
  const unsigned char* tile_flags = flags + base;
  const unsigned char* tile_items = items + (L == Load::positions ? 0 : base * W);

  // 1-2. Flags and the scan of the counts in (step, thread) order.
  unsigned mask[S];
#pragma unroll
  for (int s = 0; s < S; ++s) mask[s] = flags16(tile_flags, (s * T + t) * kThreadStepElems, valid, vector_flags);
  unsigned state[S];  // mask | (exclusive count in the warp) << 16
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const unsigned c = __popc(mask[s]);
    unsigned inclusive = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned up = __shfl_up_sync(kFull, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    state[s] = mask[s] | ((inclusive - c) << 16);
    if (lane == 31) totals[s * C::kWarps + warp] = inclusive;
  }
  // The first step's items are in flight during the scan and the look-back.
  Items<W, L> it;
  load_step(it, tile_items, warp * kWarpStepElems, valid, state[0], lane);
  __syncthreads();

  // 3. The tile's offset.
  if (warp == 0) {
    const unsigned c = totals[lane];
    unsigned inclusive = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned up = __shfl_up_sync(kFull, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    totals[lane] = inclusive - c;
    const unsigned tile_count = __shfl_sync(kFull, inclusive, 31);
    const long long before = look_back(tile_state, tile, tile_count, lane, epoch);
    if (lane == 0) {
      s_before = before;
      s_count = tile_count;
      if (tile == tiles - 1) *count = before + tile_count;  // the device writes the count
    }
  }
  __syncthreads();
  const long long before = s_before;
  const unsigned tile_count = s_count;
  const bool aligned_out = reinterpret_cast<unsigned long long>(out) % W == 0;

  // 4. Items, one step at a time.
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const unsigned step_first = totals[s * C::kWarps];
    const unsigned step_count = (s + 1 < S ? totals[(s + 1) * C::kWarps] : tile_count) - step_first;
    const long long first_out = before + step_first;  // output index of the step's first item
    // Staged so that the output's 16-byte boundaries fall on the stage's.
    const unsigned shift = aligned_out ? static_cast<unsigned>((reinterpret_cast<unsigned long long>(out) + first_out * W) % 16) / W : 0;
    const unsigned warp_first = shift + totals[s * C::kWarps + warp] - step_first;
    const int seg = (s * T + warp * 32) * kThreadStepElems;  // the warp's first element, in the tile
    Word* staged = reinterpret_cast<Word*>(stage);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      unsigned slot = warp_first + (it.meta[j] >> 16);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        if ((it.meta[j] >> k) & 1u) {
          if constexpr (L == Load::positions) {
            staged[slot++] = static_cast<Word>(base + seg + (j * 32 + lane) * P + k);
          } else {
            Word w;
            memcpy(&w, &it.v[j].b[k * W], W);
            staged[slot++] = w;
          }
        }
      }
    }
    if (s + 1 < S) {
      load_step(it, tile_items, seg + T * kThreadStepElems, valid, state[s + 1], lane);  // in flight during the writes
    }
    __syncthreads();
    if (aligned_out) {
      unsigned char* dst = out + (first_out - shift) * W;  // 16-byte aligned (may precede out; never written there)
      const unsigned lo = shift * W, hi = (shift + step_count) * W;
      for (unsigned c = t; c * 16 < hi; c += T) {
        const unsigned b0 = c * 16;
        if (b0 >= lo && b0 + 16 <= hi) {
          *reinterpret_cast<uint4*>(dst + b0) = *reinterpret_cast<const uint4*>(stage + b0);
        } else {
          for (unsigned b = b0 < lo ? lo : b0; b < b0 + 16 && b < hi; b += W) {
            *reinterpret_cast<Word*>(dst + b) = *reinterpret_cast<const Word*>(stage + b);
          }
        }
      }
    } else {
      unsigned char* dst = out + first_out * W;
      for (unsigned b = t; b < step_count * W; b += T) dst[b] = stage[b];
    }
    __syncthreads();
  }
}

// The stream's compaction scratch: word 0 is the tile counter, then one state word per tile
// (`tiles` of them). Zeroed when allocated; `epoch` is the last call's (0: none since zeroing).
// The lock is held from choosing the epoch through the launch.
struct Scratch {
  std::mutex mutex;
  std::shared_ptr<Buffer> buffer;
  long long tiles = 0;
  unsigned epoch = 0;
};

auto* const g_scratch = new StreamCache<Scratch>();

Scratch& scratch_for(const Stream& stream) {
  return g_scratch->get(stream.id(), [] { return std::make_unique<Scratch>(); });
}

template <int W, Load L>
void launch_select(const void* in, const bool* flags, std::int64_t n, void* out, std::int64_t* status,
                   const Stream& stream, const char* op) {
  if (n >= kMaxElems) {
    throw ValueError(std::string(op) + ": at most 2^40 - 1 elements are supported, got " + std::to_string(n));
  }
  const auto s = detail::cuda_stream(stream);
  const long long tiles = std::max<long long>(1, (n + kTileElems - 1) / kTileElems);  // n == 0: one block writes 0
  const bool vector_flags = reinterpret_cast<std::uintptr_t>(flags) % 16 == 0;
  const auto launch = [&](unsigned long long* words, unsigned epoch) {
    select_kernel<W, L><<<static_cast<unsigned>(tiles), Config<W>::kThreads, 0, s>>>(
        static_cast<const unsigned char*>(in), reinterpret_cast<const unsigned char*>(flags), n,
        static_cast<unsigned char*>(out), reinterpret_cast<long long*>(status), words + 1, words, tiles, epoch,
        vector_flags);
    TESSEL_CUDA_CHECK_LAUNCH(s, op);
  };
  // A captured launch may run any number of times (graph replays) under the one epoch chosen
  // here: it gets scratch of its own, zeroed before it in the graph, as every launch once did.
  // (The ops never get here while capturing: they read the count back.)
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TESSEL_CUDA_CHECK(cudaStreamIsCapturing(s, &capturing), op);
  if (capturing != cudaStreamCaptureStatusNone) {
    auto temp = Buffer::allocate(stream.device(), (tiles + 1) * 8, stream);
    TESSEL_CUDA_CHECK(cudaMemsetAsync(temp->data(), 0, static_cast<std::size_t>(tiles + 1) * 8, s), op);
    launch(static_cast<unsigned long long*>(temp->data()), 1);
    return;
  }
  Scratch& scratch = scratch_for(stream);
  std::lock_guard<std::mutex> lock(scratch.mutex);
  if (scratch.tiles < tiles) {  // allocated or grown: zeroed, the epochs start again
    const long long capacity = std::max(tiles, 2 * scratch.tiles);
    auto buffer = Buffer::allocate(stream.device(), (capacity + 1) * 8, stream);
    TESSEL_CUDA_CHECK(cudaMemsetAsync(buffer->data(), 0, static_cast<std::size_t>(capacity + 1) * 8, s), op);
    scratch.buffer = std::move(buffer);  // the old one's free is ordered on this stream, after its last use
    scratch.tiles = capacity;
    scratch.epoch = 0;
  } else if (scratch.epoch >= kEpochMask) {  // every epoch used since the zeroing: zero again
    TESSEL_CUDA_CHECK(cudaMemsetAsync(scratch.buffer->data(), 0, static_cast<std::size_t>(scratch.tiles + 1) * 8, s), op);
    scratch.epoch = 0;
  }
  launch(static_cast<unsigned long long*>(scratch.buffer->data()), ++scratch.epoch);
}

template <int W>
void select_width(const void* in, const bool* flags, std::int64_t n, void* out, std::int64_t* status,
                  const Stream& stream) {
  const auto address = reinterpret_cast<std::uintptr_t>(in);
  if (address % 16 == 0 && reinterpret_cast<std::uintptr_t>(flags) % 16 == 0) {
    launch_select<W, Load::vector>(in, flags, n, out, status, stream, "select_flagged");
  } else if (address % std::min(W, 8) == 0) {
    launch_select<W, Load::word>(in, flags, n, out, status, stream, "select_flagged");
  } else {
    launch_select<W, Load::bytes>(in, flags, n, out, status, stream, "select_flagged");
  }
}

}  // namespace compact

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

unsigned compaction_epoch_for_testing(const Stream& stream, unsigned set) {
  compact::Scratch& scratch = compact::scratch_for(stream);
  std::lock_guard<std::mutex> lock(scratch.mutex);
  const unsigned was = scratch.epoch;
  if (set != 0) {
    // Only forward: every epoch since the last zeroing stays used at most once.
    if (scratch.tiles == 0 || set < was || set > compact::kEpochMask) {
      throw ValueError("compaction_epoch_for_testing: no scratch yet, or an epoch behind the last one");
    }
    scratch.epoch = set;
  }
  return was;
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

void select_flagged(const void* in, std::int64_t width, const bool* flags, std::int64_t n, void* out,
                    std::int64_t* status, const Stream& stream) {
  DeviceGuard guard(stream.device());
  switch (width) {
    case 1: return compact::select_width<1>(in, flags, n, out, status, stream);
    case 2: return compact::select_width<2>(in, flags, n, out, status, stream);
    case 4: return compact::select_width<4>(in, flags, n, out, status, stream);
    case 8: return compact::select_width<8>(in, flags, n, out, status, stream);
    case 16: return compact::select_width<16>(in, flags, n, out, status, stream);
    default: throw DTypeError("select_flagged: internal error, item width " + std::to_string(width));
  }
}

void flat_nonzero(const bool* flags, std::int64_t n, std::int64_t* out, std::int64_t* status, const Stream& stream) {
  DeviceGuard guard(stream.device());
  // The positions kernel reads no items; its flags load as vectors where they are 16-byte aligned.
  compact::launch_select<8, compact::Load::positions>(nullptr, flags, n, out, status, stream, "nonzero");
}

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

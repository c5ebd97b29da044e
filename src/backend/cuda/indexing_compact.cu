// CUDA mask compaction and nonzero's positions (backend/indexing.hpp's select_flagged and
// flat_nonzero): one pass each, a decoupled look-back over 16K-element tiles that writes the
// selected items and their count. It is instantiated per item width (1, 2, 4, 8, 16 bytes), not
// per dtype, plus once for positions. indexing.cu has the gathers, scatters and status words.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "backend/cuda/stream_cache.hpp"
#include "backend/indexing.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

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
    // next launch on the stream (see the comment at the top of this file).
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

}  // namespace

unsigned compaction_epoch_for_testing(const Stream& stream, unsigned set) {
  Scratch& scratch = scratch_for(stream);
  std::lock_guard<std::mutex> lock(scratch.mutex);
  const unsigned was = scratch.epoch;
  if (set != 0) {
    // Only forward: every epoch since the last zeroing stays used at most once.
    if (scratch.tiles == 0 || set < was || set > kEpochMask) {
      throw ValueError("compaction_epoch_for_testing: no scratch yet, or an epoch behind the last one");
    }
    scratch.epoch = set;
  }
  return was;
}

void select_flagged(const void* in, std::int64_t width, const bool* flags, std::int64_t n, void* out,
                    std::int64_t* status, const Stream& stream) {
  DeviceGuard guard(stream.device());
  switch (width) {
    case 1: return select_width<1>(in, flags, n, out, status, stream);
    case 2: return select_width<2>(in, flags, n, out, status, stream);
    case 4: return select_width<4>(in, flags, n, out, status, stream);
    case 8: return select_width<8>(in, flags, n, out, status, stream);
    case 16: return select_width<16>(in, flags, n, out, status, stream);
    default: throw DTypeError("select_flagged: internal error, item width " + std::to_string(width));
  }
}

void flat_nonzero(const bool* flags, std::int64_t n, std::int64_t* out, std::int64_t* status, const Stream& stream) {
  DeviceGuard guard(stream.device());
  // The positions kernel reads no items; its flags load as vectors where they are 16-byte aligned.
  launch_select<8, Load::positions>(nullptr, flags, n, out, status, stream, "nonzero");
}

}  // namespace tessel::backend::cuda

#pragma once
// Elementwise kernel generation. A spec names the operands (arrays or by-value scalars, inputs
// and outputs, with dtypes), a body of C++ statements over one element of each, and a layout:
//  - contiguous: every array operand is contiguous with the full shape (or a uniform input: one
//    element broadcast to every place); a grid-stride loop with 16-byte vector loads/stores
//    (runtime-checked alignment, scalar loop otherwise and for the tail);
//  - strided: N-d over collapsed dimensions (rank R), per-operand strides in elements (0 for
//    broadcast axes, negative allowed), 64-bit index math unless the caller proves 32-bit safe.
// Expr builds a body from an expression tree (the basis for ops and fusion); Array-level launching
// is in elementwise_launch below.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::jit {

constexpr int kMaxElementwiseRank = 12;

struct ElementwiseOperand {
  std::string name;  // identifier in the body
  DType dtype = DType::float32;
  bool is_output = false;
  bool is_scalar = false;  // a by-value kernel parameter (inputs only)
  // An array operand the body sees as a pointer to this element's place (`T* name`, `const T*`
  // for inputs) instead of a value: nothing is loaded or stored for it, the body indexes from it.
  // Gathers and scatters reach their data this way (the element offset of the sliced axes comes
  // from the operand's strides, the offset along indexed axes from the body).
  bool is_pointer = false;
  // Contiguous layout: an array input whose strides are all 0 (a 0-d array broadcast): each
  // thread loads its one element once, and the other operands keep the vectorized loop. The
  // launcher sets it per launch; the strided layout reads such an input through its 0 strides.
  bool is_uniform = false;
};

enum class ElementwiseLayout : std::uint8_t { contiguous, strided };

struct ElementwiseSpec {
  std::string name;  // identifier; the kernel is name + a layout suffix
  std::vector<ElementwiseOperand> operands;
  std::string body;      // statements; reads inputs, assigns outputs
  std::string preamble;  // device code placed before the kernel
  // true: float16/bfloat16 variables are float in the body (computed in float, rounded once at
  // the store; what generated ops want). false: variables have the declared types (user kernels).
  bool widen_half = true;
  ElementwiseLayout layout = ElementwiseLayout::contiguous;
  int rank = 1;          // strided: number of collapsed dimensions, 1..kMaxElementwiseRank
  bool index32 = false;  // 32-bit index math; only when every index and offset is provably < 2^31
  // contiguous: 16-byte vectors each thread loads (all of them, for every array input) before it
  // computes on any, per trip of the grid-stride loop. 1..kMaxElementwiseUnroll.
  int unroll = 1;
  // contiguous: the vector loads of array inputs and the vector stores of outputs are streaming
  // (ld.global.cs / st.global.cs, evicted first), so that what pointer operands read keeps more
  // of the L2 (gathers: the indices and the result stream, the source is read at random).
  bool streaming = false;
  // The spec's own launch shape: each nonzero field replaces the process tuning's
  // (elementwise_tuning()) in this spec's launches; unroll, as there, shapes the contiguous layout.
  struct OwnTuning {
    int block = 0;
    int unroll = 0;
    int waves = 0;
  } own_tuning;
};

constexpr int kMaxElementwiseUnroll = 8;

// The launch shape of generated elementwise kernels. Process-wide; the default comes from
// TESSEL_EW_TUNING="block,unroll,waves" when set, else the values below (docs/guide/performance.rst).
// The bench sweeps it (bench/elementwise_bench.cpp).
struct ElementwiseTuning {
  // The defaults: the fastest shape of bench/elementwise_bench.cpp's sweep
  // (elementwise.tuning_sweep in bench/results/nvidia-h100-80gb-hbm3-2026-11-23.json; the table is
  // in docs/architecture.rst).
  int block = 128;  // threads per block, multiple of 32 in [32, 1024]
  int unroll = 2;   // contiguous layout: 16-byte vectors per thread per loop trip, 1..8
  int waves = 64;   // grid cap in full waves of resident blocks; beyond it threads grid-stride
  bool operator==(const ElementwiseTuning& o) const { return block == o.block && unroll == o.unroll && waves == o.waves; }
};
ElementwiseTuning elementwise_tuning();
// A cached elementwise kernel's launch shape for the tuning in force when it was cached: a launch
// under that tuning is arithmetic only; under another (set_elementwise_tuning since) it asks the
// kernel (launch_config_fixed).
struct ElementwiseLaunchShape {
  ElementwiseTuning tuning;
  FixedLaunchShape shape;
  static ElementwiseLaunchShape of(const Kernel& kernel, const ElementwiseTuning& tuning) {
    return {tuning, kernel.fixed_launch_shape(tuning.block, tuning.waves)};
  }
  LaunchConfig config(const Kernel& kernel, std::int64_t threads, const ElementwiseTuning& now) const {
    return now == tuning ? shape.config(threads) : kernel.launch_config_fixed(threads, now.block, now.waves);
  }
};
// Validates (ValueError naming the bad field) and applies to every later launch.
void set_elementwise_tuning(const ElementwiseTuning& tuning);
// `tuning` with the nonzero fields of spec.own_tuning in place of its own: what a launch of the
// spec uses.
ElementwiseTuning tuning_for(const ElementwiseSpec& spec, ElementwiseTuning tuning);
// Threads a launch of `n` elements needs: contiguous+aligned covers `unroll` vectors of `vec`
// elements per thread, otherwise one element per thread.
std::int64_t elementwise_threads(std::int64_t n, bool contiguous_aligned, int vec, int unroll);

// Elements per vector access in the contiguous path: 16 bytes of the widest array operand.
int vector_width(const ElementwiseSpec& spec);
// The kernel's exported name (spec.name plus "_c" / "_s<rank>" and "_i32").
std::string elementwise_kernel_name(const ElementwiseSpec& spec);
// The CUDA source. Validates names and the spec (ValueError).
std::string generate_elementwise_source(const ElementwiseSpec& spec);
// True when `body` needs the old value of the output `name`: it reads it (anything but a plain
// "name = ..." assignment), or may leave it unassigned (no unconditional top-level assignment, as
// in `if (m) name = v;`). Such outputs are loaded before the body runs, so skipped elements keep
// their value.
bool body_reads(const std::string& body, const std::string& name);

// ---- launching over memory ------------------------------------------------------------------
// One operand of a launch: an array view (data at element 0 of the view, strides in elements over
// the launch shape, 0 on broadcast axes) or a scalar value (its bytes, in the operand's dtype).
struct ElementwiseArg {
  void* data = nullptr;
  std::vector<std::int64_t> strides;
  bool is_scalar = false;
  alignas(16) unsigned char scalar[16] = {};  // scalar operands: the value's bytes

  static ElementwiseArg array(void* data, std::vector<std::int64_t> strides) {
    ElementwiseArg a;
    a.data = data;
    a.strides = std::move(strides);
    return a;
  }
  template <class T>
  static ElementwiseArg value(const T& v) {
    static_assert(sizeof(T) <= 16, "scalar too large");
    ElementwiseArg a;
    a.is_scalar = true;
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    for (std::size_t i = 0; i < sizeof(T); ++i) a.scalar[i] = p[i];
    return a;
  }
};

// The same operand borrowed: what ElementwiseLauncher reads, without a copy of the strides.
// `strides` (one per launch dimension) and `scalar` must stay valid for the launch call only.
struct ElementwiseArgView {
  const void* data;
  const std::int64_t* strides;  // arrays: the view's strides over the launch shape
  std::size_t num_strides;
  const unsigned char* scalar;  // scalars: the value's bytes; nullptr for arrays

  static ElementwiseArgView of(const ElementwiseArg& arg) {
    return {arg.data, arg.strides.data(), arg.strides.size(), arg.is_scalar ? arg.scalar : nullptr};
  }
};

// 32-bit index math is used only up to this bound, which leaves room for the grid-stride
// increment (at most 2^26 threads in flight) without overflowing int.
constexpr std::int64_t kElementwiseIndex32Limit = (std::int64_t{1} << 31) - (std::int64_t{1} << 26);

// The layout choice of a launch, from the launch shape and the array operands' strides (over that
// shape, in elements): contiguous when every array operand is C-contiguous, else strided over the
// collapsed dimensions (size-one axes dropped, axes every operand steps through as one merged).
// index32 when the element count and, strided, every operand's furthest offset fit
// kElementwiseIndex32Limit. `rank` may exceed kMaxElementwiseRank; the launcher reports that.
struct ElementwisePlan {
  ElementwiseLayout layout = ElementwiseLayout::contiguous;
  int rank = 1;  // strided: collapsed dimensions; contiguous: 1
  bool index32 = false;
  std::vector<std::int64_t> dims;                  // strided: the collapsed shape
  std::vector<std::vector<std::int64_t>> strides;  // strided: per array operand, over dims
};
ElementwisePlan plan_elementwise(const std::vector<std::int64_t>& shape,
                                 const std::vector<const std::vector<std::int64_t>*>& array_strides);
// Whether 32-bit index math is safe for a strided launch over `dims`: the element count `n` and
// every operand's furthest offset (sum of |stride| * (extent - 1)) fit kElementwiseIndex32Limit.
bool fits_index32(std::int64_t n, const std::vector<std::int64_t>& dims,
                  const std::vector<std::vector<std::int64_t>>& strides);

// The one launch path of generated elementwise kernels (ops, fusion, casts, user kernels): it
// chooses the layout (plan_elementwise), the index width and the launch shape, packs the
// parameters, and keeps the loaded kernel of every (layout, rank, index width, unroll, device) it
// has launched. A repeated launch neither regenerates nor hashes the source; the same launch
// again from one thread finds its kernel without a lock. Kernel::launch makes the device current.
// Thread-safe: one launcher may be used from several threads at once. Not copyable (share it
// through a pointer); callers keep one launcher per spec.
class ElementwiseLauncher {
 public:
  explicit ElementwiseLauncher(ElementwiseSpec spec);
  ~ElementwiseLauncher();
  ElementwiseLauncher(const ElementwiseLauncher&) = delete;
  ElementwiseLauncher& operator=(const ElementwiseLauncher&) = delete;

  // The spec as given (layout, rank, index32 and unroll are chosen per launch).
  const ElementwiseSpec& spec() const { return spec_; }
  // Chooses the layout (plan_elementwise), the index width and the launch shape; compiles on the
  // first launch of a layout (through the process-wide caches) and launches on `stream`. args
  // follow spec().operands.
  void launch(const std::vector<std::int64_t>& shape, const std::vector<ElementwiseArg>& args, Device device,
              const Stream& stream) const;
  // The same over borrowed operands (`count` of them): no per-operand copies, and no heap
  // allocation for contiguous launches of up to 8 operands (the tiny-op path of fused kernels).
  void launch(const std::vector<std::int64_t>& shape, const ElementwiseArgView* args, std::size_t count,
              Device device, const Stream& stream) const;
  // Kernels this launcher holds (one per distinct layout/rank/index width/unroll/device launched).
  std::size_t num_cached_kernels() const;

 private:
  struct Cache;
  ElementwiseSpec spec_;
  int vec_ = 1;  // vector_width(spec_): the same for every layout
  std::unique_ptr<Cache> cache_;
};

// ---- expression trees ------------------------------------------------------------------------
// An immutable node; shared subtrees are emitted once. The ops layer chooses the code of each op
// (a function from tessel_device.cuh, or an operator format); dtypes are the NumPy result dtypes.
class Expr {
 public:
  // Operand `index` of the spec's inputs (array or scalar), by position among inputs.
  static Expr input(int index, DType dtype);
  // A literal in the node's compute type, e.g. literal("1.0f", float32).
  static Expr literal(std::string code, DType dtype);
  // fn(args...), e.g. call("tessel::maximum", {a, b}, float32).
  static Expr call(std::string fn, std::vector<Expr> args, DType dtype);
  // A format with {0}, {1}, ... for the arguments, e.g. format("({0} + {1})", {a, b}, int32).
  static Expr format(std::string pattern, std::vector<Expr> args, DType dtype);
  // A NumPy cast (rounds to the target dtype even where it is computed wider).
  static Expr cast(Expr value, DType dtype);

  DType dtype() const;
  struct Node;
  const Node* node() const { return node_.get(); }

 private:
  std::shared_ptr<const Node> node_;
};

// An elementwise spec computing `outputs` (one per output dtype) from inputs: array inputs are
// "in<i>", scalar inputs too (marked in `input_is_scalar`), outputs "out<j>".
ElementwiseSpec lower_expressions(const std::string& name, const std::vector<DType>& input_dtypes,
                                  const std::vector<bool>& input_is_scalar, const std::vector<Expr>& outputs,
                                  const std::vector<DType>& output_dtypes);

}  // namespace tessel::jit

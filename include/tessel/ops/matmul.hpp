#pragma once
// Matrix products with NumPy matmul semantics, fused epilogues and autotuned plans.
//
//   out = epilogue(alpha * (a @ b) + beta * c + bias)
//
// a and b follow numpy.matmul: 1-D operands are promoted (a: prepended 1, b: appended 1) and
// the promoted axis is removed from the result; the batch dimensions broadcast. bias has n
// elements (the last dimension of the result). The epilogue is none, relu, gelu (erf form) or
// gelu_tanh (tanh approximation), or the derivative of one of these for training's backward
// pass: relu_grad, gelu_grad and gelu_tanh_grad compute
// out = (alpha * (a @ b) + beta * c) * act'(aux), aux being the forward's aux (the activation's
// input), here an input. bias_grad, with any epilogue, receives the column sums of out (its sum
// over all rows), the bias gradient when out is a gradient, as one more GEMM: ones @ out.
// Dtypes: float16, bfloat16, float32, float64, complex64, complex128 (a and b of one dtype, the
// result of the same dtype), and int8 x int8 -> int32.
//
// MatmulPlan is the stateful form (nvmath-python's model): plan once, autotune, execute many
// times on new arrays of the same layout. Autotune winners are cached in memory and on disk
// under $TESSEL_CACHE_DIR/matmul (default ~/.cache/tessel/matmul).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/array/array.hpp"

namespace tessel {

enum class MatmulEpilogue { none, relu, gelu, gelu_tanh, relu_grad, gelu_grad, gelu_tanh_grad };
// "none", "relu", "gelu", "gelu_tanh", "relu_grad", "gelu_grad", "gelu_tanh_grad"; ValueError
// for anything else.
MatmulEpilogue parse_matmul_epilogue(std::string_view name);
const char* matmul_epilogue_name(MatmulEpilogue epilogue);
// True for relu_grad, gelu_grad and gelu_tanh_grad (aux is their input).
bool is_matmul_grad_epilogue(MatmulEpilogue epilogue);

// default: the dtype's own precision (fp32 accumulation for fp16/bf16/fp32); fp32: no TF32;
// tf32: float32/complex64 inputs multiplied in TF32 (ValueError for other dtypes).
enum class MatmulCompute { default_, fp32, tf32 };
MatmulCompute parse_matmul_compute(std::string_view name);  // "default", "fp32", "tf32"
const char* matmul_compute_name(MatmulCompute compute);

struct MatmulOptions {
  Array bias;                 // undefined: no bias; else 1-D with n elements, the result's dtype
  MatmulEpilogue epilogue = MatmulEpilogue::none;
  double alpha = 1.0;
  double beta = 0.0;
  Array c;                    // broadcastable to the result; required when beta != 0
  MatmulCompute compute = MatmulCompute::default_;
  // Training's auxiliary array, the result's shape and dtype. With a forward epilogue (relu, gelu,
  // gelu_tanh) an output: receives the epilogue's input (alpha*a@b + beta*c + bias); the ReLU mask
  // is aux > 0. With a *_grad epilogue an input, required: that forward's aux.
  Array aux;
  // Undefined, or a 1-D output of n elements in the result's dtype: receives the result summed
  // over all its rows (and batches), accumulated in float32 (float64 for float64).
  Array bias_grad;
};

// The product as a new array, or written into `out` (its shape and dtype must be the result's).
Array matmul(const Array& a, const Array& b, const MatmulOptions& options = {}, const Array& out = Array(),
             const OptionalStream& stream = std::nullopt);
// The Array API's linalg.matmul: the same function.
inline Array linalg_matmul(const Array& a, const Array& b, const OptionalStream& stream = std::nullopt) {
  return matmul(a, b, {}, Array(), stream);
}
// The Array API's vecdot: sum(conj(x1) * x2, axis), the batch dimensions broadcast.
Array vecdot(const Array& x1, const Array& x2, std::int64_t axis = -1, const OptionalStream& stream = std::nullopt);

// One candidate an autotune timed.
struct MatmulCandidate {
  std::string name;    // "cublaslt:algo3", "simt:128x128x8", "sm90:..." or "cpu:openblas"
  double time_ms = -1; // median time of single runs interleaved with the others, -1 when not timed (or failed)
  // Median time per run back to back, for the autotune's finalists (-1 for the others); the
  // autotuner picks the finalist with the smallest (see TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS).
  double sustained_ms = -1;
  bool ok = true;      // false when it failed to run; the reason is in `error`
  std::string error;
};

// What MatmulPlan::execute may change between runs. Unset fields keep the planned values;
// undefined arrays mean the planned arrays. The epilogue and the compute mode are fixed by the
// plan: given ones must equal the planned ones (ValueError naming both otherwise).
struct MatmulExecuteOptions {
  Array bias, c, aux, bias_grad;           // new data of the planned layouts
  std::optional<double> alpha, beta;       // unset: the planned alpha / beta
  std::optional<MatmulEpilogue> epilogue;  // set: checked against the plan
  std::optional<MatmulCompute> compute;    // set: checked against the plan
  MatmulExecuteOptions() = default;
  // Everything in `options` counts as given: its alpha, beta (1 and 0 by default, as for
  // matmul()), epilogue and compute; only its undefined arrays fall back to the planned ones.
  MatmulExecuteOptions(const MatmulOptions& options)  // NOLINT(google-explicit-constructor): implicit on purpose
      : bias(options.bias), c(options.c), aux(options.aux), bias_grad(options.bias_grad), alpha(options.alpha),
        beta(options.beta), epilogue(options.epilogue), compute(options.compute) {}
};

namespace detail {
struct MatmulPlanState;
}

class MatmulPlan {
 public:
  // Plans a @ b with the given options for the layouts (shapes, strides, dtypes, device) of a,
  // b, bias and c. The arrays passed later to execute must have the same layouts.
  MatmulPlan(const Array& a, const Array& b, const MatmulOptions& options = {},
             const OptionalStream& stream = std::nullopt);
  ~MatmulPlan();
  MatmulPlan(MatmulPlan&&) noexcept;
  MatmulPlan& operator=(MatmulPlan&&) noexcept;

  // The candidates this plan may run, in order (index = pin argument).
  const std::vector<MatmulCandidate>& candidates() const;
  // Times every candidate `iterations` times on the planned arrays (CUDA events; the result is
  // checked to not fail) and selects the fastest; the winner is stored in the memory and disk
  // caches. Returns the candidates with their times.
  const std::vector<MatmulCandidate>& autotune(int iterations = 10);
  // Pins one candidate (index into candidates(), or its name): execute uses only it.
  void pin(int candidate_index);
  void pin(const std::string& candidate_name);
  // The candidate execute runs now.
  const MatmulCandidate& selected() const;
  // True when the selection came from the autotune cache (memory or disk).
  bool from_cache() const;
  // Runs the planned product on new arrays with the planned layouts (ValueError naming both
  // layouts otherwise). See MatmulExecuteOptions for what options may change: execute(a, b)
  // keeps every planned option; passing a MatmulOptions sets alpha/beta/epilogue/compute as
  // written in it (an epilogue or compute mode other than the planned one is a ValueError).
  Array execute(const Array& a, const Array& b, const MatmulExecuteOptions& options = {}, const Array& out = Array(),
                const OptionalStream& stream = std::nullopt);
  // Runs on the arrays given at planning time.
  Array execute(const Array& out = Array(), const OptionalStream& stream = std::nullopt);
  // The key under which autotune results are cached (for logs and tests).
  const std::string& cache_key() const;

 private:
  std::unique_ptr<detail::MatmulPlanState> state_;
};

// Clears the in-memory autotune cache and the plan cache of matmul() (tests use this to force
// a read of the disk cache).
void clear_matmul_memory_cache();
// The folder of the disk cache: $TESSEL_CACHE_DIR/matmul (default ~/.cache/tessel/matmul), or
// the folder given to set_matmul_cache_dir.
std::string matmul_cache_dir();
// Overrides the disk cache folder for this process ("" restores the default). Tests point it at
// a temporary folder; TESSEL_CACHE_DIR is read once per process, so it cannot serve them.
void set_matmul_cache_dir(const std::string& folder);

// Autotuning on first use, config().matmul_autotune (TESSEL_MATMUL_AUTOTUNE, set_matmul_autotune
// in tessel/core/config.hpp): while on, matmul() autotunes a layout the first time it runs it (as
// MatmulPlan::autotune(10), winner stored in the memory and disk caches) unless the caches already
// hold a winner for it. The first call of each layout then takes the autotune's time and
// synchronizes; calls on a stream that a CUDA graph capture records are not tuned (a later call is).

}  // namespace tessel

#pragma once
// matmul's internals (shared by matmul.cpp, matmul_plan.cpp and matmul_autotune.cpp):
//  - planning (matmul_plan.cpp): validation with NumPy matmul semantics, normalization of the
//    operands into a backend::MatmulProblem, the candidates of a layout, matmul()'s plan cache,
//    and running a candidate;
//  - autotuning (matmul_autotune.cpp): timing the candidates and the cache of winners in memory
//    and on disk.
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/matmul.hpp"
#include "tessel/array/array.hpp"
#include "tessel/ops/matmul.hpp"

namespace tessel::detail {

// Everything one product needs, after validation and normalization.
struct MatmulPrepared {
  Device device;
  Stream stream;
  Shape result_shape;
  Shape full_shape;       // batch + (m, n): result_shape with the axes of 1-D operands kept
  DType out_dtype = DType::float32;
  Array a, b;             // (batch..., m, k) and (batch..., k, n) views or copies
  Array result;           // what matmul returns (out when given)
  Array d, d_final;       // D as written by the backend; d_final: where it is copied at the end (or undefined)
  Array aux, aux_final;    // with a *_grad epilogue aux is an input (aux_final stays undefined)
  Array bias_grad;         // options.bias_grad
  Array bias;
  Array c;                // broadcast view of options.c, copied into d when beta != 0
  backend::MatmulProblem problem;
  std::string signature;  // the layouts that a plan is valid for
};

// Validates and normalizes a @ b. plan_mode: the layout of `out` is not part of the signature (a
// plan runs on any out); D is then written directly only when out is contiguous, as the plan's
// candidates were made for.
MatmulPrepared prepare_matmul(const Array& a, const Array& b, const MatmulOptions& options, const Array& out,
                              const OptionalStream& stream, bool plan_mode = false);

// The candidates of one layout and the selection; shared by matmul()'s plan cache and MatmulPlan.
struct MatmulPlanCore {
  std::string signature, key;
  Device device;
  std::unique_ptr<backend::MatmulCandidates> cuda;
  std::vector<MatmulCandidate> candidates;
  int selected = 0;
  bool from_cache = false;
  std::mutex run_mutex;
  // Autotune on first use (config().matmul_autotune): set once the first use has been tuned or found
  // nothing to tune; tune_mutex makes one of several threads tune.
  std::atomic<bool> first_use_done{false};
  std::mutex tune_mutex;

  // Runs one candidate (one run at a time per core: cuBLASLt descriptors carry the bias/aux
  // pointers).
  void run(int candidate, const backend::MatmulProblem& problem, const Stream& stream);
};

// The candidates of p's layout, with the cached autotune winner selected when there is one.
std::shared_ptr<MatmulPlanCore> make_matmul_core(const MatmulPrepared& p);
// matmul()'s plan cache: the core of p's signature, made on first use.
std::shared_ptr<MatmulPlanCore> cached_matmul_core(const MatmulPrepared& p);
void clear_matmul_plan_cache();
// Runs candidate `index` of core on p and finishes the outputs; returns p.result.
Array run_matmul_plan(MatmulPlanCore& core, int index, MatmulPrepared& p);

// ---- autotuning (matmul_autotune.cpp) ----
// The part of a cache key that names the machine: device, library and driver versions.
std::string matmul_environment_key(Device device);
// The autotune winner of `key` from memory, else from disk (from_disk says which).
std::optional<std::string> cached_matmul_winner(const std::string& key, bool& from_disk);
// Times every candidate of core on p's layout, selects the fastest and stores it in the caches.
void autotune_matmul(MatmulPlanCore& core, const MatmulPrepared& p, int iterations);
// matmul()'s autotune on first use: autotune_matmul(core, p, 10) once per core while
// config().matmul_autotune is on, unless the core's selection came from the autotune cache, it
// has one candidate, or p's stream is being captured (then a later call tunes).
void autotune_on_first_use(MatmulPlanCore& core, const MatmulPrepared& p);
void clear_matmul_winner_cache();

}  // namespace tessel::detail

// The "not built with CUDA" error of the ops layer's backends (backend/dispatch.hpp), the one of
// every layer (core/not_built.hpp): in a build without CUDA, every CUDA entry of every family list
// is a stub generated here that throws it, naming the entry.
#include "backend/dispatch.hpp"

#include <string>

#include "core/not_built.hpp"
#include "tessel/core/error.hpp"

#if !defined(TESSEL_HAVE_CUDA)
#include "backend/cast.hpp"
#include "backend/elementwise.hpp"
#include "backend/fft.hpp"
#include "backend/indexing.hpp"
#include "backend/linalg.hpp"
#include "backend/matmul.hpp"
#include "backend/random.hpp"
#include "backend/reduce.hpp"
#include "backend/set_ops.hpp"
#include "backend/sort.hpp"
#include "tessel/ops/matmul_kernels.hpp"
#endif

namespace tessel::backend {

void throw_cuda_not_built(const char* op) { ::tessel::detail::throw_cuda_not_built(op); }

#if !defined(TESSEL_HAVE_CUDA)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
TESSEL_CAST_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_ELEMENTWISE_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_ELEMENTWISE_CUDA_ONLY(TESSEL_BACKEND_CUDA_STUB)
TESSEL_FFT_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_FFT_CUDA_ONLY(TESSEL_BACKEND_CUDA_STUB)
TESSEL_INDEXING_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_INDEXING_CUDA_ONLY(TESSEL_BACKEND_CUDA_STUB)
TESSEL_LINALG_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_LINALG_CUDA_ONLY(TESSEL_BACKEND_CUDA_STUB)
TESSEL_MATMUL_CUDA_ONLY(TESSEL_BACKEND_CUDA_STUB)
TESSEL_RANDOM_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_REDUCE_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_SET_OPS_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_SORT_BACKEND(TESSEL_BACKEND_CUDA_STUB)
TESSEL_SORT_CUDA_ONLY(TESSEL_BACKEND_CUDA_STUB)
#pragma GCC diagnostic pop
#endif

}  // namespace tessel::backend

#if !defined(TESSEL_HAVE_CUDA)
// The sm90 GEMM of tessel/ops/matmul_kernels.hpp lives in backend/cuda/matmul_sm90.cu; a build
// without CUDA has no configuration of it.
namespace tessel::internal::sm90 {
int num_configs() { return 0; }
const char* config_name(int) { return "invalid"; }
bool can_implement(const GemmArgs&, int) { return false; }
void run(const GemmArgs&, int, void*) { backend::throw_cuda_not_built("matmul_sm90"); }
}  // namespace tessel::internal::sm90
#endif

// CUDA matrix products: cuBLASLt (heuristic top-k algorithms, fused BIAS/RELU/GELU epilogues,
// GELU_AUX for the aux output), tessel's SIMT kernel for float32 (matmul_simt.cu) and tessel's
// Hopper kernel for float16/bfloat16 (matmul_sm90.cu).
//
// cuBLASLt is column-major. A row-major D (m x n) is the column-major D^T (n x m), and
// D^T = B^T A^T, so cuBLASLt's "A" is our B and its "B" is our A. A row-major operand is its own
// transpose in column-major terms (op N); a column-major one (a transposed view) is op T. Batches
// are strided (one stride per operand; 0 broadcasts), so views run without copies.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/cuda_libraries.hpp"
#include "backend/matmul.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/cublas_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/ops/matmul_kernels.hpp"

namespace tessel::backend::cuda {
namespace {

// The workspace cap: cuBLASLt's recommendation for Hopper is 32 MiB.
constexpr std::uint64_t kWorkspaceCap = 32ull << 20;
constexpr int kTopK = 8;

#define TESSEL_LT_CHECK(expr) TESSEL_CUBLAS_CHECK((expr), "matmul")

// One cuBLASLt handle per device, created on first use and kept for the process.
cublasLtHandle_t lt_handle(Device device) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device.index);
  if (it != handles.end()) return it->second;
  require_cuda_library(CudaLibrary::cublasLt, "matmul");
  DeviceGuard guard(device);
  cublasLtHandle_t handle = nullptr;
  TESSEL_LT_CHECK(cublasLtCreate(&handle));
  handles[device.index] = handle;
  return handle;
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::float16: return CUDA_R_16F;
    case DType::bfloat16: return CUDA_R_16BF;
    case DType::float32: return CUDA_R_32F;
    case DType::float64: return CUDA_R_64F;
    case DType::complex64: return CUDA_C_32F;
    case DType::complex128: return CUDA_C_64F;
    case DType::int8: return CUDA_R_8I;
    case DType::int32: return CUDA_R_32I;
    default: throw DTypeError(fmt::format("matmul: no cuBLASLt type for {}", dtype_name(dtype)));
  }
}

void compute_types(const MatmulProblem& p, cublasComputeType_t& compute, cudaDataType_t& scale) {
  switch (p.dtype) {
    case DType::float16: case DType::bfloat16:
      compute = CUBLAS_COMPUTE_32F; scale = CUDA_R_32F; return;
    case DType::float32:
      compute = p.compute == MatmulCompute::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      scale = CUDA_R_32F; return;
    case DType::complex64:
      compute = p.compute == MatmulCompute::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      scale = CUDA_C_32F; return;
    case DType::float64: compute = CUBLAS_COMPUTE_64F; scale = CUDA_R_64F; return;
    case DType::complex128: compute = CUBLAS_COMPUTE_64F; scale = CUDA_C_64F; return;
    case DType::int8: compute = CUBLAS_COMPUTE_32I; scale = CUDA_R_32I; return;
    default: throw DTypeError(fmt::format("matmul: no cuBLASLt compute type for {}", dtype_name(p.dtype)));
  }
}

std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t align = 16;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// alpha/beta in the scale type, as host memory for cuBLASLt's host pointer mode.
struct Scalars {
  alignas(16) unsigned char alpha[16];
  alignas(16) unsigned char beta[16];
};
Scalars scalars(const MatmulProblem& p, cudaDataType_t scale) {
  Scalars s{};
  auto put = [&](unsigned char* dst, double value) {
    switch (scale) {
      case CUDA_R_32F: { float v = static_cast<float>(value); std::memcpy(dst, &v, sizeof v); break; }
      case CUDA_R_64F: { std::memcpy(dst, &value, sizeof value); break; }
      case CUDA_C_32F: { float v[2] = {static_cast<float>(value), 0.0f}; std::memcpy(dst, v, sizeof v); break; }
      case CUDA_C_64F: { double v[2] = {value, 0.0}; std::memcpy(dst, v, sizeof v); break; }
      case CUDA_R_32I: { std::int32_t v = static_cast<std::int32_t>(value); std::memcpy(dst, &v, sizeof v); break; }
      default: break;
    }
  };
  put(s.alpha, p.alpha);
  put(s.beta, p.beta);
  return s;
}

// The fused cuBLASLt epilogue for p, or false when cuBLASLt has none (then the plan runs
// DEFAULT and apply_epilogue afterwards). cuBLASLt's GELU is the tanh form; GELU_AUX writes the
// GELU input, which is tessel's aux. The ReLU aux of cuBLASLt is a bit mask, not tessel's aux.
bool fused_epilogue(const MatmulProblem& p, cublasLtEpilogue_t& epilogue) {
  const bool bias = p.bias != nullptr;
  // cuBLASLt's GELU is accurate only to about 1e-10 in double (seen on an H100): float64 and
  // complex128 products take tessel's own epilogue, which computes tanh in full precision.
  const bool wide = p.out_dtype == DType::float64 || p.out_dtype == DType::complex128;
  if (wide && (p.epilogue == MatmulEpilogue::gelu_tanh || p.epilogue == MatmulEpilogue::gelu_tanh_grad)) return false;
  const bool aux_aligned = p.ldaux % 8 == 0 && p.batch_stride_aux % 8 == 0;
  if (is_matmul_grad_epilogue(p.epilogue)) {
    // DGELU reads GELU_AUX's aux. Not DGELU_BGRAD: it was slower than DGELU plus the column sums
    // as a GEMM (backward_gemm in bench/results/nvidia-h200-2026-12-01-dgelu-bgrad.json), so
    // bias_grad is summed after the product.
    // DRELU reads a bit mask, not tessel's aux, and the erf GELU has no derivative epilogue: those
    // run DEFAULT + apply_epilogue.
    if (p.epilogue != MatmulEpilogue::gelu_tanh_grad || !aux_aligned) return false;
    epilogue = CUBLASLT_EPILOGUE_DGELU;
    return true;
  }
  if (p.aux) {
    if (p.epilogue == MatmulEpilogue::gelu_tanh && aux_aligned) {
      epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      return true;
    }
    return false;
  }
  switch (p.epilogue) {
    case MatmulEpilogue::none: epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; return true;
    case MatmulEpilogue::relu: epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; return true;
    case MatmulEpilogue::gelu_tanh: epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; return true;
    case MatmulEpilogue::gelu: return false;  // the erf form: cuBLASLt has none
    default: return false;
  }
  return false;
}

bool reads_or_writes_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}

// The cuBLASLt descriptors of one problem layout and one epilogue choice (fused: the epilogue
// of fused_epilogue, which must exist; unfused: DEFAULT + apply_epilogue).
class LtPlan {
 public:
  LtPlan(const MatmulProblem& p, Device device, bool fused) : device_(device), fused_(fused) {
    if (p.batch > INT32_MAX) throw ValueError(fmt::format("matmul: {} batches exceed cuBLASLt's int32 count", p.batch));
    handle_ = lt_handle(device);
    cublasComputeType_t compute;
    compute_types(p, compute, scale_);
    TESSEL_LT_CHECK(cublasLtMatmulDescCreate(&desc_, compute, scale_));
    // our B is cuBLASLt's A, our A is its B (see the top of the file)
    const cublasOperation_t op_a = p.b.row_major() ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasOperation_t op_b = p.a.row_major() ? CUBLAS_OP_N : CUBLAS_OP_T;
    TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    const auto batch = static_cast<std::int32_t>(p.batch);
    auto layout = [&](cublasLtMatrixLayout_t& out, DType dtype, std::uint64_t rows, std::uint64_t cols, std::int64_t ld,
                      std::int64_t batch_stride) {
      TESSEL_LT_CHECK(cublasLtMatrixLayoutCreate(&out, cuda_type(dtype), rows, cols, ld));
      if (batch > 1) {
        TESSEL_LT_CHECK(cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        TESSEL_LT_CHECK(cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                         &batch_stride, sizeof batch_stride));
      }
    };
    const auto m = static_cast<std::uint64_t>(p.m), n = static_cast<std::uint64_t>(p.n),
               k = static_cast<std::uint64_t>(p.k);
    if (p.b.row_major()) {
      layout(a_layout_, p.dtype, n, k, p.b.row_stride, p.b.batch_stride);
    } else {
      layout(a_layout_, p.dtype, k, n, p.b.col_stride, p.b.batch_stride);
    }
    if (p.a.row_major()) {
      layout(b_layout_, p.dtype, k, m, p.a.row_stride, p.a.batch_stride);
    } else {
      layout(b_layout_, p.dtype, m, k, p.a.col_stride, p.a.batch_stride);
    }
    layout(d_layout_, p.out_dtype, n, m, p.ldd, p.batch_stride_d);

    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    post_epilogue_ = p.bias || p.aux || p.epilogue != MatmulEpilogue::none;
    if (fused) {
      fused_epilogue(p, epilogue);
      post_epilogue_ = false;
    }
    epilogue_ = epilogue;
    TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    set_pointers(p);
    if (reads_or_writes_aux(epilogue)) {
      const std::int64_t ld = p.ldaux, bs = p.batch_stride_aux;
      TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
      TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &bs, sizeof bs));
    }

    cublasLtMatmulPreference_t preference = nullptr;
    TESSEL_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t cap = kWorkspaceCap;
    TESSEL_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap));
    const std::uint32_t align_a = alignment_of(p.b.data), align_b = alignment_of(p.a.data), align_d = alignment_of(p.d);
    TESSEL_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
    TESSEL_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
    TESSEL_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d));
    TESSEL_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d));
    results_.resize(kTopK);
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_layout_, b_layout_, d_layout_, d_layout_,
                                                                 preference, kTopK, results_.data(), &found);
    cublasLtMatmulPreferenceDestroy(preference);
    // NOT_SUPPORTED (or INVALID_VALUE for layouts a type combination does not allow, as int8
    // with a row-major B) means no algorithm: the caller falls back or reports a DTypeError.
    heuristic_status_ = cublasLtGetStatusName(status);
    results_.resize(status == CUBLAS_STATUS_SUCCESS ? static_cast<std::size_t>(found) : 0);
  }
  ~LtPlan() {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    for (auto layout : {a_layout_, b_layout_, d_layout_}) {
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    }
  }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  int size() const { return static_cast<int>(results_.size()); }
  const char* heuristic_status() const { return heuristic_status_; }
  bool fused() const { return !post_epilogue_; }
  std::size_t workspace(int algo) const { return results_[static_cast<std::size_t>(algo)].workspaceSize; }

  void run(int algo, const MatmulProblem& p, const Stream& stream) {
    set_pointers(p);
    const Scalars s = scalars(p, scale_);
    const auto& result = results_[static_cast<std::size_t>(algo)];
    std::shared_ptr<Buffer> workspace;
    if (result.workspaceSize > 0) workspace = Buffer::allocate(device_, static_cast<std::int64_t>(result.workspaceSize), stream);
    auto cuda_stream = detail::cuda_stream(stream);
    TESSEL_LT_CHECK(cublasLtMatmul(handle_, desc_, s.alpha, p.b.data, a_layout_, p.a.data, b_layout_, s.beta, p.d,
                                   d_layout_, p.d, d_layout_, &result.algo, workspace ? workspace->data() : nullptr,
                                   result.workspaceSize, cuda_stream));
    if (post_epilogue_) apply_epilogue(p, stream.handle());
  }

 private:
  void set_pointers(const MatmulProblem& p) {
    if (epilogue_ == CUBLASLT_EPILOGUE_BIAS || epilogue_ == CUBLASLT_EPILOGUE_RELU_BIAS ||
        epilogue_ == CUBLASLT_EPILOGUE_GELU_BIAS || epilogue_ == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
      const void* bias = p.bias;
      TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (reads_or_writes_aux(epilogue_)) {
      void* aux = p.aux;
      TESSEL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    }
  }

  Device device_;
  bool fused_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, d_layout_ = nullptr;
  cudaDataType_t scale_ = CUDA_R_32F;
  cublasLtEpilogue_t epilogue_ = CUBLASLT_EPILOGUE_DEFAULT;
  bool post_epilogue_ = false;
  std::vector<cublasLtMatmulHeuristicResult_t> results_;
  const char* heuristic_status_ = "";
};

namespace sm90 = ::tessel::internal::sm90;
bool sm90_args(const MatmulProblem& p, sm90::GemmArgs& args) {
  // aux is fused too (the activation's input, stored before the activation): where cuBLASLt has
  // no fused form (relu+aux, gelu+aux) this kernel is the only one that writes D in one pass.
  if ((p.dtype != DType::float16 && p.dtype != DType::bfloat16) || p.beta != 0.0) return false;
  if (!p.a.row_major()) return false;
  using E = sm90::Epilogue;
  const bool bias = p.bias != nullptr;
  switch (p.epilogue) {
    case MatmulEpilogue::none: args.epilogue = bias ? E::bias : E::none; break;
    case MatmulEpilogue::relu: args.epilogue = bias ? E::bias_relu : E::relu; break;
    case MatmulEpilogue::gelu: args.epilogue = bias ? E::bias_gelu : E::gelu; break;
    case MatmulEpilogue::gelu_tanh: args.epilogue = bias ? E::bias_gelu_tanh : E::gelu_tanh; break;
    default: return false;  // the *_grad epilogues: cuBLASLt's DGELU, or apply_epilogue
  }
  args.m = p.m; args.n = p.n; args.k = p.k; args.batch = p.batch;
  args.dtype = p.dtype == DType::float16 ? 0 : 1;
  args.a = p.a.data; args.lda = p.a.row_stride; args.batch_stride_a = p.a.batch_stride;
  args.b = p.b.data;
  args.b_k_contiguous = !p.b.row_major();
  args.ldb = p.b.row_major() ? p.b.row_stride : p.b.col_stride;
  args.batch_stride_b = p.b.batch_stride;
  args.d = p.d; args.ldd = p.ldd; args.batch_stride_d = p.batch_stride_d;
  args.bias = p.bias;
  args.alpha = static_cast<float>(p.alpha);
  args.aux = p.aux;
  args.ldaux = p.ldaux;
  args.batch_stride_aux = p.batch_stride_aux;
  return true;
}

// All candidates of one layout: cuBLASLt fused algorithms, cuBLASLt unfused ones when there is
// no fused form, SIMT configurations (float32 without TF32), sm90 configurations (fp16/bf16).
class Candidates final : public MatmulCandidates {
 public:
  Candidates(const MatmulProblem& p, Device device) {
    DeviceGuard guard(device);  // the heuristic queries and the sm90 checks read the current device
    cublasLtEpilogue_t epilogue;
    if (fused_epilogue(p, epilogue)) {
      fused_ = std::make_unique<LtPlan>(p, device, true);
      if (fused_->size() == 0) fused_.reset();  // e.g. no epilogue algorithm for float64
    }
    std::string heuristic_status = "not asked";
    if (!fused_) {
      unfused_ = std::make_unique<LtPlan>(p, device, false);
      heuristic_status = unfused_->heuristic_status();
      if (unfused_->size() == 0) unfused_.reset();
    }
    const int lt = fused_ ? fused_->size() : unfused_ ? unfused_->size() : 0;
    for (int i = 0; i < lt; ++i) entries_.push_back({Kind::lt, i, fmt::format("cublaslt:{}{}", fused_ ? "" : "unfused:", i)});
    if (p.dtype == DType::float32 && p.compute != MatmulCompute::tf32) {
      for (int c = 0; c < simt_num_configs(); ++c) {
        if (simt_can_implement(p, c)) entries_.push_back({Kind::simt, c, std::string("simt:") + simt_config_name(c)});
      }
    }
    const DeviceProperties& props = device_properties(device.index);
    sm90::GemmArgs args{};
    if (props.cc_major == 9 && props.cc_minor == 0 && sm90_args(p, args)) {
      for (int c = 0; c < sm90::num_configs(); ++c) {
        if (sm90::can_implement(args, c)) entries_.push_back({Kind::sm90, c, std::string("sm90:") + sm90::config_name(c)});
      }
    }
    if (entries_.empty()) {
      throw DTypeError(fmt::format(
          "matmul: cuBLASLt offers no algorithm for {} x {} -> {} with this layout (m={}, n={}, k={}, a {}, b {}; "
          "heuristic: {}); for int8, b must be k-contiguous (a transposed view) and the sizes multiples of 4",
          dtype_name(p.dtype), dtype_name(p.dtype), dtype_name(p.out_dtype), p.m, p.n, p.k,
          p.a.row_major() ? "row-major" : "column-major", p.b.row_major() ? "row-major" : "column-major",
          heuristic_status));
    }
  }

  int size() const override { return static_cast<int>(entries_.size()); }
  std::string name(int candidate) const override { return entries_.at(static_cast<std::size_t>(candidate)).name; }

  void run(int candidate, const MatmulProblem& p, const Stream& stream) override {
    DeviceGuard guard(stream.device());  // launches and cuBLASLt calls go to the arrays' device
    const Entry& e = entries_.at(static_cast<std::size_t>(candidate));
    switch (e.kind) {
      case Kind::lt:
        (fused_ ? fused_ : unfused_)->run(e.index, p, stream);
        return;
      case Kind::simt:
        simt_run(p, e.index, stream.handle());
        return;
      case Kind::sm90: {
        sm90::GemmArgs args{};
        sm90_args(p, args);
        sm90::run(args, e.index, stream.handle());
        return;
      }
    }
  }

 private:
  enum class Kind { lt, simt, sm90 };
  struct Entry {
    Kind kind;
    int index;
    std::string name;
  };
  std::unique_ptr<LtPlan> fused_, unfused_;
  std::vector<Entry> entries_;
};

}  // namespace

std::unique_ptr<MatmulCandidates> plan_matmul(const MatmulProblem& problem, Device device) {
  return std::make_unique<Candidates>(problem, device);
}

std::string matmul_library_version() { return fmt::format("cublasLt {}", cublasLtGetVersion()); }

}  // namespace tessel::backend::cuda

#pragma once
// The matmul epilogues' activations and their derivatives: one definition for the CPU backend's
// epilogue loop and the CUDA kernels (the SIMT GEMM, the epilogue kernel that follows a cuBLASLt
// product, tessel's Hopper kernel), so that the CPU tests check the formulas the GPU runs. T is
// float or double; the callers compute half types in float. The real math is the C library's
// (std:: on the host, CUDA's math library on the device).
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define TESSEL_ACTIVATION __host__ __device__ __forceinline__
#else
#include <cmath>
#define TESSEL_ACTIVATION inline
#endif

namespace tessel::activation {

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
using ::erf;
using ::exp;
using ::tanh;
#else
using std::erf;
using std::exp;
using std::tanh;
#endif

// The constants (members, not namespace-scope variables, which NVRTC warns about where unused).
struct Constants {
  static constexpr double sqrt_half = 0.70710678118654752;      // 1 / sqrt(2)
  static constexpr double sqrt_2_over_pi = 0.79788456080286536;  // sqrt(2 / pi)
  static constexpr double inv_sqrt_2pi = 0.3989422804014327;     // 1 / sqrt(2 pi)
  static constexpr double gelu_tanh_cubic = 0.044715;
};

// max(x, 0), NaN propagated as numpy.maximum propagates it.
template <class T>
TESSEL_ACTIVATION T relu(T x) {
  return x > T(0) ? x : (x != x ? x : T(0));
}
template <class T>
TESSEL_ACTIVATION T gelu(T x) {
  return T(0.5) * x * (T(1) + erf(x * T(Constants::sqrt_half)));
}
template <class T>
TESSEL_ACTIVATION T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + tanh(T(Constants::sqrt_2_over_pi) * (x + T(Constants::gelu_tanh_cubic) * x * x * x)));
}

// g * act'(z), z being the activation's input (the forward's aux). ReLU's is where(z > 0, g, 0),
// as torch's threshold_backward (no 0 * Inf).
template <class T>
TESSEL_ACTIVATION T relu_grad(T g, T z) {
  return z > T(0) ? g : T(0);
}
template <class T>
TESSEL_ACTIVATION T gelu_grad(T g, T z) {
  return g * (T(0.5) * (T(1) + erf(z * T(Constants::sqrt_half))) + z * exp(T(-0.5) * z * z) * T(Constants::inv_sqrt_2pi));
}
template <class T>
TESSEL_ACTIVATION T gelu_tanh_grad(T g, T z) {
  const T c = T(Constants::sqrt_2_over_pi), k = T(Constants::gelu_tanh_cubic);
  const T t = tanh(c * (z + k * z * z * z));
  return g * (T(0.5) * (T(1) + t) + T(0.5) * z * (T(1) - t * t) * c * (T(1) + T(3) * k * z * z));
}

}  // namespace tessel::activation

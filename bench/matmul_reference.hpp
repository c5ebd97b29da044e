#pragma once
// The float64 reference of one output of a @ b + bias for the matmul benchmarks' checks
// (row-major a: m x k, b: k x n, bias: n or empty).
#include <cmath>
#include <cstdint>
#include <vector>

namespace tessel::bench {

struct ReferenceEntry {
  double value;  // (a @ b + bias)[i, j], before any activation
  double scale;  // sum over k of |a_ik * b_kj|: the size of rounding errors
};

inline ReferenceEntry reference_entry(const std::vector<float>& a, const std::vector<float>& b,
                                      const std::vector<float>& bias, std::int64_t i, std::int64_t j, std::int64_t n,
                                      std::int64_t k) {
  ReferenceEntry r{0, 0};
  for (std::int64_t kk = 0; kk < k; ++kk) {
    const double p = double(a[static_cast<std::size_t>(i * k + kk)]) * b[static_cast<std::size_t>(kk * n + j)];
    r.value += p;
    r.scale += std::abs(p);
  }
  if (!bias.empty()) r.value += bias[static_cast<std::size_t>(j)];
  return r;
}

}  // namespace tessel::bench

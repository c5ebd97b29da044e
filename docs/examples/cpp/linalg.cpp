// Linear algebra from C++ (docs/cpp/index.rst). Runs on the default device.
#include <tessel/tessel.hpp>

#include <cstdio>
#include <stdexcept>

using namespace tessel;

static void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("linalg example: ") + what);
}

int main() {
  const Device device = default_device();
  // doc:begin linalg
  Array x = random::normal({100, 8, 8}, 0.0, 1.0, DType::float32, device);   // 100 matrices
  Array spd = add(matmul(x, x.swapaxes(-1, -2)), eye(8, 8, 0, DType::float32, device));
  Array rhs = random::normal({100, 8, 2}, 0.0, 1.0, DType::float32, device);

  Array L = linalg::cholesky(spd);                      // spd = L L^T
  Array sol = linalg::solve(spd, rhs);                  // spd @ sol = rhs
  linalg::EighResult eig = linalg::eigh(spd);           // eigenvalues ascending, vectors in columns
  linalg::SVDResult usv = linalg::svd(x, /*full_matrices=*/false);

  // The *_ex forms leave LAPACK's info on the device: no synchronization.
  linalg::CholeskyExResult ex = linalg::cholesky_ex(spd);
  try {
    linalg::inv(zeros({3, 3}, DType::float32, device));
  } catch (const linalg::LinAlgError& e) {              // also a tessel::ValueError
    std::printf("%s (batch index %lld)\n", e.what(), static_cast<long long>(e.batch_index()));
  }
  // doc:end linalg
  check(max(abs(linalg_matmul(L, L.swapaxes(-1, -2)) - spd)).item<float>() < 1e-3f, "cholesky");
  check(max(abs(linalg_matmul(spd, sol) - rhs)).item<float>() < 1e-3f, "solve");
  check(eig.eigenvalues.shape() == Shape{100, 8} && usv.S.shape() == Shape{100, 8}, "shapes");
  check(max(ex.info).item<std::int32_t>() == 0, "info");
  std::printf("linalg example: ok\n");
  return 0;
}

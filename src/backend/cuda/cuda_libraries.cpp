// Opening cuBLASLt, cuBLAS, cuSOLVER and cuFFT on first use (cuda_libraries.hpp).
//
// Each is looked for where tessel/_cuda_libs.py found it (a wheel: NVIDIA's PyPI wheels, passed as
// TESSEL_<NAME>_LIBRARY), else in the toolkit tessel was built with (a source build), else by its
// soname through the loader's own search (LD_LIBRARY_PATH, the ldconfig cache). The libraries a
// library needs are opened first from the same places, so its own references find those copies.
#include "backend/cuda/cuda_libraries.hpp"

#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/shared_library.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {
namespace {

// CUDA 13's sonames (cuSOLVER, cuSPARSE and cuFFT keep 12) and the wheels that install them; the
// same table as tessel/_cuda_libs.py's, which test_cuda_libraries.py compares with this one.
struct LibraryFile {
  const char* soname;
  const char* env_var;
  const char* title;
  const char* pip_spec;
};
constexpr LibraryFile kCublasLt{"libcublasLt.so.13", "TESSEL_CUBLASLT_LIBRARY", "cuBLASLt", "nvidia-cublas>=13,<14"};
constexpr LibraryFile kCublas{"libcublas.so.13", "TESSEL_CUBLAS_LIBRARY", "cuBLAS", "nvidia-cublas>=13,<14"};
constexpr LibraryFile kNvJitLink{"libnvJitLink.so.13", "TESSEL_NVJITLINK_LIBRARY", "nvJitLink",
                                 "nvidia-nvjitlink>=13,<14"};
constexpr LibraryFile kCusparse{"libcusparse.so.12", "TESSEL_CUSPARSE_LIBRARY", "cuSPARSE", "nvidia-cusparse>=12.6,<13"};
constexpr LibraryFile kCusolver{"libcusolver.so.12", "TESSEL_CUSOLVER_LIBRARY", "cuSOLVER", "nvidia-cusolver>=12,<13"};
constexpr LibraryFile kCufft{"libcufft.so.12", "TESSEL_CUFFT_LIBRARY", "cuFFT", "nvidia-cufft>=12,<13"};

// The files of lib in load order: what it needs, then itself.
std::vector<LibraryFile> files_of(CudaLibrary lib) {
  switch (lib) {
    case CudaLibrary::cublasLt: return {kCublasLt};
    case CudaLibrary::cublas: return {kCublasLt, kCublas};
    case CudaLibrary::cusolver: return {kCublasLt, kCublas, kNvJitLink, kCusparse, kCusolver};
    case CudaLibrary::cufft: return {kCufft};
  }
  return {};
}

struct Opened {
  void* handle = nullptr;
  std::string error;  // why it could not be opened
};

Opened open_file(const LibraryFile& file) {
  std::vector<std::string> names;
#if defined(TESSEL_CUDA_LIBRARY_DIR)
  names.push_back(std::string(TESSEL_CUDA_LIBRARY_DIR) + "/" + file.soname);
#endif
  names.emplace_back(file.soname);
  const ::tessel::detail::SharedLibrary lib = ::tessel::detail::open_shared_library(file.env_var, names);
  if (lib.handle != nullptr) return {lib.handle, {}};
  return {nullptr, fmt::format("cannot load {} ({}, CUDA 13): tried {}. Install it with: pip install '{}' (tessel's "
                               "wheel depends on it), or install the CUDA 13 toolkit, or set {} to its path",
                               file.soname, file.title, lib.tried, file.pip_spec, file.env_var)};
}

// The handle of lib, its dependencies opened first; tried once per process (opening a file another
// library already opened only counts a reference).
const Opened& opened(CudaLibrary lib) {
  static std::mutex mutex;
  static Opened libraries[4];
  static bool tried[4] = {};
  const auto index = static_cast<int>(lib);
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried[index]) {
    tried[index] = true;
    for (const LibraryFile& file : files_of(lib)) {
      libraries[index] = open_file(file);  // the last one, lib itself, is kept
      if (libraries[index].handle == nullptr) break;
    }
  }
  return libraries[index];
}

}  // namespace

void require_cuda_library(CudaLibrary lib, const char* op) {
  const Opened& o = opened(lib);
  if (o.handle == nullptr) throw Error(fmt::format("{}: {}", op, o.error));
}

void* cuda_library_function(CudaLibrary lib, const char* name) {
  const Opened& o = opened(lib);
  if (o.handle == nullptr) throw Error(fmt::format("{}: {}", name, o.error));
  void* fn = ::tessel::detail::library_symbol(o.handle, name);
  if (fn == nullptr) {
    throw Error(fmt::format("{}: the loaded {} has no function {}; tessel needs CUDA 13's", name,
                            files_of(lib).back().soname, name));
  }
  return fn;
}

}  // namespace tessel::backend::cuda

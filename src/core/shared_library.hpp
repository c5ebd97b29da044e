#pragma once
// Shared libraries that tessel opens on first use (dlopen), so that it links and imports without
// them: cuBLAS, cuBLASLt, cuSOLVER and cuFFT (backend/cuda/cuda_libraries.hpp), CUPTI (profile),
// NCCL (backend/cuda/dist.cpp) and, in the wheel, MPI (backend/cpu/mpi_api.hpp).
#include <string>
#include <vector>

namespace tessel::detail {

struct SharedLibrary {
  void* handle = nullptr;  // null when nothing could be opened
  std::string path;        // the name that opened
  std::string tried;       // each name tried, with the loader's reason: "libx.so.1 (not found); ..."
};

// Opens the file named by the environment variable env_var when it is set (an explicit choice:
// nothing else is tried), else the first of names that opens (a path, or a soname for the
// loader's own search). global: RTLD_GLOBAL, for a library whose plugins need its symbols (Open
// MPI); else RTLD_LOCAL.
SharedLibrary open_shared_library(const char* env_var, const std::vector<std::string>& names, bool global = false);

// The address of symbol in an open library, or nullptr.
void* library_symbol(void* handle, const char* symbol);

}  // namespace tessel::detail

#pragma once
#include <string>

namespace tessel {

const char* version();  // "MAJOR.MINOR.PATCH"

// How this copy of tessel was built: type, compilers, CUDA architectures, options.
struct BuildInfo {
  std::string version;
  std::string build_type;
  bool cuda = false;
  std::string cuda_architectures;
  std::string cxx_compiler;
  std::string cuda_compiler;
  bool nvtx = false;
};
BuildInfo build_info();

}  // namespace tessel

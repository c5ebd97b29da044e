#pragma once
// Runtime compilation with NVRTC, always to CUBIN for one architecture (never PTX: no driver JIT
// at load time, and the cubin can be cached on disk as is). NVRTC runs without a GPU, so
// compiling (and the caches) work on machines without one; only loading and launching need it.
#include <string>
#include <vector>

namespace tessel::jit {

struct CompileRequest {
  std::string source;
  // The kernel to export: an extern "C" name or a C++ name expression ("scale<float>"); also
  // names the program in messages.
  std::string name;
  // Extra NVRTC options, e.g. "-DBLOCK=256". A "-arch=..." here overrides `arch`.
  std::vector<std::string> options;
  // "sm_90", "sm_90a", ...; empty: the current CUDA device's.
  std::string arch;
};

struct CompileResult {
  std::string cubin;         // the CUBIN image
  std::string lowered_name;  // the symbol to load (== name for extern "C" kernels)
  std::string arch;          // the architecture it was compiled for
  std::string log;           // NVRTC's log (warnings), may be empty
  double milliseconds = 0;   // compile wall time
};

// True when tessel was built with NVRTC (a CUDA build).
bool nvrtc_available();
// "13.0"; "" without NVRTC.
std::string nvrtc_version();
// "sm_XY" from the device's compute capability (DeviceError for a bad index / no CUDA).
std::string device_arch(int device_index);
// The architecture a request compiles for: a "-arch=" option, else request.arch, else the current
// device's.
std::string resolve_arch(const CompileRequest& request);
// The options NVRTC gets: tessel's defaults (-std=c++17, -arch=...) and the request's.
std::vector<std::string> effective_options(const CompileRequest& request, const std::string& arch);

// Compiles to CUBIN. A compile error raises CompileError (kernel name, the log and the offending
// source lines); without NVRTC, DeviceError.
CompileResult compile_to_cubin(const CompileRequest& request);

// PTX of the request for its architecture's virtual form (sm_90 -> compute_90), for reading (what
// Numba's inspect_asm shows); launches always use compile_to_cubin. Errors as compile_to_cubin.
std::string compile_to_ptx(const CompileRequest& request);

// The CompileError message: kernel name and arch, the NVRTC log, then each source line the log
// points at, with `context` lines around it (">" marks the line itself).
std::string format_compile_error(const std::string& name, const std::string& arch, const std::string& log,
                                 const std::string& source, int context = 2);

}  // namespace tessel::jit

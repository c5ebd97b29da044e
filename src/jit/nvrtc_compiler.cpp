// NVRTC: source -> CUBIN. Every NVRTC call is checked; the embedded device headers are passed as
// named headers, so nothing is searched for on the file system.
#if defined(TESSEL_HAVE_CUDA)
#include <nvrtc.h>

#include <chrono>
#include <memory>

#include "jit/embedded_headers.hpp"
#include "core/not_built.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/jit/compiler.hpp"

namespace tessel::jit {
namespace {

void check_nvrtc(nvrtcResult status, const char* call, const std::string& name) {
  if (status != NVRTC_SUCCESS) {
    throw CompileError("jit: " + std::string(call) + " failed for kernel '" + name + "': " + nvrtcGetErrorString(status),
                       "");
  }
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    nvrtcDestroyProgram(p);  // cannot fail for a valid program; nothing to report in a destructor
    delete p;
  }
};

}  // namespace

bool nvrtc_available() { return true; }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

namespace {

// Compiles with NVRTC; the program, with its log in `log`. CompileError on a compile error.
std::unique_ptr<nvrtcProgram, ProgramDeleter> compile_program(const CompileRequest& request, const std::string& arch,
                                                              const std::vector<std::string>& options, std::string& log) {
  std::size_t header_count = 0;
  const detail::EmbeddedHeader* headers = detail::embedded_headers(&header_count);
  std::vector<const char*> header_sources, header_names;
  for (std::size_t i = 0; i < header_count; ++i) {
    header_sources.push_back(headers[i].source);
    header_names.push_back(headers[i].name);
  }
  const std::string program_name = request.name + ".cu";
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  check_nvrtc(nvrtcCreateProgram(program.get(), request.source.c_str(), program_name.c_str(),
                                 static_cast<int>(header_count), header_sources.data(), header_names.data()),
              "nvrtcCreateProgram", request.name);
  check_nvrtc(nvrtcAddNameExpression(*program, request.name.c_str()), "nvrtcAddNameExpression", request.name);
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  std::size_t log_size = 0;
  check_nvrtc(nvrtcGetProgramLogSize(*program, &log_size), "nvrtcGetProgramLogSize", request.name);
  log.assign(log_size, '\0');
  if (log_size > 0) check_nvrtc(nvrtcGetProgramLog(*program, &log[0]), "nvrtcGetProgramLog", request.name);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (compiled != NVRTC_SUCCESS) {
    if (log.empty()) log = nvrtcGetErrorString(compiled);
    throw CompileError(format_compile_error(request.name, arch, log, request.source), log);
  }
  return program;
}

}  // namespace

std::string compile_to_ptx(const CompileRequest& request) {
  const std::string arch = resolve_arch(request);
  std::string virtual_arch = arch;
  if (virtual_arch.rfind("sm_", 0) == 0) virtual_arch = "compute_" + virtual_arch.substr(3);
  std::vector<std::string> options;
  for (const std::string& o : effective_options(request, arch)) {
    options.push_back(o.rfind("-arch=", 0) == 0 || o.rfind("--gpu-architecture=", 0) == 0 ? "-arch=" + virtual_arch : o);
  }
  std::string log;
  auto program = compile_program(request, arch, options, log);
  std::size_t size = 0;
  check_nvrtc(nvrtcGetPTXSize(*program, &size), "nvrtcGetPTXSize", request.name);
  std::string ptx(size, '\0');
  if (size > 0) check_nvrtc(nvrtcGetPTX(*program, &ptx[0]), "nvrtcGetPTX", request.name);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

CompileResult compile_to_cubin(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  CompileResult result;
  result.arch = resolve_arch(request);
  const std::vector<std::string> options = effective_options(request, result.arch);
  std::string log;
  auto program = compile_program(request, result.arch, options, log);
  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(*program, request.name.c_str(), &lowered), "nvrtcGetLoweredName", request.name);
  result.lowered_name = lowered;

  std::size_t cubin_size = 0;
  check_nvrtc(nvrtcGetCUBINSize(*program, &cubin_size), "nvrtcGetCUBINSize", request.name);
  if (cubin_size == 0) {
    throw CompileError("jit: kernel '" + request.name + "': NVRTC produced no CUBIN for " + result.arch, log);
  }
  result.cubin.resize(cubin_size);
  check_nvrtc(nvrtcGetCUBIN(*program, &result.cubin[0]), "nvrtcGetCUBIN", request.name);
  result.log = std::move(log);
  result.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessel::jit

#else  // CPU-only builds: no NVRTC, no kernels to load or launch.
#include "core/not_built.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/compiler.hpp"

namespace tessel::jit {

bool nvrtc_available() { return false; }
std::string nvrtc_version() { return ""; }

CompileResult compile_to_cubin(const CompileRequest& request) {
  ::tessel::detail::throw_cuda_not_built("jit: kernel '" + request.name + "' needs NVRTC");
}

std::string compile_to_ptx(const CompileRequest& request) {
  ::tessel::detail::throw_cuda_not_built("jit: kernel '" + request.name + "' needs NVRTC");
}

}  // namespace tessel::jit
#endif

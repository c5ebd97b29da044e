// Backend-neutral parts of the compiler: arch resolution, options, error formatting.
#include "tessel/jit/compiler.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include "jit/compile_error.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"

namespace tessel::jit {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// "-arch=sm_90a", "--gpu-architecture=sm_90", "-arch" "sm_90": the value, or "".
std::string arch_option(const std::vector<std::string>& options) {
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    for (const char* p : {"-arch=", "--gpu-architecture=", "--gpu-architecture ", "-arch "}) {
      if (starts_with(o, p)) return o.substr(std::string(p).size());
    }
    if ((o == "-arch" || o == "--gpu-architecture") && i + 1 < options.size()) return options[i + 1];
  }
  return "";
}

// Whether a kernel's source includes CCCL (libcu++, CUB, Thrust): <cuda/...>, <cub/...>, <thrust/...>, <nv/...>.
bool includes_cccl(const std::string& source) {
  for (const char* prefix : {"<cuda/", "<cub/", "<thrust/", "<nv/", "\"cuda/", "\"cub/"}) {
    for (std::size_t at = source.find(prefix); at != std::string::npos; at = source.find(prefix, at + 1)) {
      const std::size_t line = source.rfind('\n', at);
      const std::size_t hash = source.find('#', line == std::string::npos ? 0 : line);
      if (hash < at && source.compare(hash, 8, "#include") == 0) return true;
    }
  }
  return false;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// CCCL's headers for NVRTC: TESSEL_CCCL_INCLUDE (the nvidia-cuda-cccl wheel's nvidia/cu13/include/cccl,
// which tessel/_cuda_libs.py sets for a wheel), else the CUDA toolkit's include/cccl (CUDA_HOME,
// CUDA_PATH, /usr/local/cuda); empty when none is there.
std::string cccl_include_dir() {
  if (const char* dir = std::getenv("TESSEL_CCCL_INCLUDE"); dir != nullptr && is_directory(dir)) return dir;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var); root != nullptr && is_directory(std::string(root) + "/include/cccl")) {
      return std::string(root) + "/include/cccl";
    }
  }
  return is_directory("/usr/local/cuda/include/cccl") ? "/usr/local/cuda/include/cccl" : "";
}

}  // namespace

std::string device_arch(int device_index) {
  const DeviceProperties& p = device_properties(device_index);
  return "sm_" + std::to_string(p.cc_major) + std::to_string(p.cc_minor);
}

std::string resolve_arch(const CompileRequest& request) {
  std::string arch = arch_option(request.options);
  if (arch.empty()) arch = request.arch;
  if (arch.empty()) {
    if (!cuda_available()) {
      throw DeviceError("jit: kernel '" + request.name + "': no architecture given and no CUDA device (" +
                        cuda_unavailable_reason() + "); pass an arch such as \"sm_90\"");
    }
    arch = device_arch(current_device().index);
  }
  // compute_XY would produce PTX; tessel only loads CUBIN.
  if (!starts_with(arch, "sm_")) {
    throw ValueError("jit: kernel '" + request.name + "': arch must be a real architecture like \"sm_90\", got \"" +
                     arch + "\" (tessel compiles to CUBIN, not PTX)");
  }
  return arch;
}

std::vector<std::string> effective_options(const CompileRequest& request, const std::string& arch) {
  std::vector<std::string> out;
  const bool has_std = std::any_of(request.options.begin(), request.options.end(),
                                   [](const std::string& o) { return starts_with(o, "-std=") || starts_with(o, "--std="); });
  if (!has_std) out.push_back("-std=c++17");
  if (arch_option(request.options).empty()) out.push_back("-arch=" + arch);
  out.insert(out.end(), request.options.begin(), request.options.end());
  // Only a kernel that includes CCCL gets its folder (so other kernels' cache keys do not depend on it).
  if (includes_cccl(request.source)) {
    if (const std::string dir = cccl_include_dir(); !dir.empty()) out.push_back("-I" + dir);
  }
  return out;
}

std::string format_compile_error(const std::string& name, const std::string& arch, const std::string& log,
                                 const std::string& source, int context) {
  std::ostringstream msg;
  msg << "jit: failed to compile kernel '" << name << "' for " << arch << "\n";
  msg << "NVRTC log:\n" << log;
  if (!log.empty() && log.back() != '\n') msg << "\n";

  // Log lines look like "<program>(LINE): error: ..."; the program is "<name>.cu". Lines in
  // embedded headers name the header instead and are not from the user's source.
  const std::string program = name + ".cu(";
  std::set<int> lines;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find(program);
    if (at == std::string::npos) continue;
    if (line.find("error") == std::string::npos) continue;  // warnings do not explain a failure
    const std::size_t begin = at + program.size();
    const std::size_t end = line.find(')', begin);
    if (end == std::string::npos) continue;
    const int number = std::atoi(line.substr(begin, end - begin).c_str());
    if (number > 0) lines.insert(number);
  }
  msg << detail::source_excerpt(source, lines, context);
  return msg.str();
}

namespace detail {

std::string source_excerpt(const std::string& source, const std::set<int>& lines, int context) {
  if (lines.empty()) return "";
  std::vector<std::string> src_lines;
  std::istringstream src(source);
  std::string line;
  while (std::getline(src, line)) src_lines.push_back(line);
  const int total = static_cast<int>(src_lines.size());
  std::ostringstream msg;
  int printed_to = 0;
  for (int number : lines) {
    const int first = std::max({1, number - context, printed_to + 1});
    const int last = std::min(total, number + context);
    if (first > last) continue;
    if (printed_to != 0 && first > printed_to + 1) msg << "  ...\n";
    for (int i = first; i <= last; ++i) {
      msg << (lines.count(i) ? "> " : "  ");
      std::string num = std::to_string(i);
      msg << std::string(num.size() < 5 ? 5 - num.size() : 0, ' ') << num << " | "
          << src_lines[static_cast<std::size_t>(i - 1)] << "\n";
    }
    printed_to = last;
  }
  const std::string text = msg.str();
  return text.empty() ? text : "source:\n" + text;
}

}  // namespace detail

}  // namespace tessel::jit

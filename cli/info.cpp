// `tessel info [--json]`: the environment check a new user runs first.
#include <dlfcn.h>
#include <link.h>
#include <omp.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/version.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cublasLt.h>
#include <cufft.h>
#include <nvrtc.h>
#endif

namespace tessel::cli {
namespace {

std::string cuda_version_string(int v) {
  return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : std::string("none");
}

// NCCL is optional at run time: look it up instead of linking it.
std::string nccl_version() {
  void* lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return "not found (libnccl.so.2)";
  using GetVersion = int (*)(int*);
  std::string result = "unknown";
  if (auto get = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"))) {
    int v = 0;
    if (get(&v) == 0) result = fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  }
  dlclose(lib);
  return result;
}

nlohmann::json library_versions() {
  nlohmann::json libs;
#if defined(TESSEL_HAVE_CUDA)
  const std::size_t blas = cublasLtGetVersion();
  libs["cublasLt"] = fmt::format("{}.{}.{}", blas / 10000, (blas % 10000) / 100, blas % 100);
  int fft = 0;
  libs["cufft"] = cufftGetVersion(&fft) == CUFFT_SUCCESS ? fmt::format("{}.{}.{}", fft / 1000, (fft % 1000) / 100, fft % 100)
                                                          : std::string("unknown");
  int major = 0, minor = 0;
  libs["nvrtc"] = nvrtcVersion(&major, &minor) == NVRTC_SUCCESS ? fmt::format("{}.{}", major, minor) : std::string("unknown");
  libs["nccl"] = nccl_version();
#else
  libs["cublasLt"] = libs["cufft"] = libs["nvrtc"] = "not built (CPU-only build)";
  libs["nccl"] = nccl_version();
#endif
  return libs;
}

// The file each CUDA, BLAS and MPI library of this process was loaded from (linked or opened so far).
nlohmann::json library_files() {
  nlohmann::json files = nlohmann::json::object();
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::string base = path.substr(path.find_last_of('/') + 1);
        for (const char* stem : {"libcublasLt.so", "libcublas.so", "libcufft.so", "libcusolver.so", "libcusparse.so",
                                 "libnvrtc.so", "libnvJitLink.so", "libcupti.so", "libnccl.so", "libmpi.so",
                                 "libscipy_openblas", "libopenblas"}) {
          if (base.rfind(stem, 0) == 0) (*static_cast<nlohmann::json*>(data))[base] = path;
        }
        return 0;
      },
      &files);
  return files;
}

nlohmann::json collect() {
  nlohmann::json j;
  const BuildInfo b = build_info();
  j["version"] = b.version;
  j["build"] = {{"type", b.build_type},     {"cuda", b.cuda},
                {"cuda_architectures", b.cuda_architectures}, {"cxx_compiler", b.cxx_compiler},
                {"cuda_compiler", b.cuda_compiler},           {"nvtx", b.nvtx}};
  j["cuda_available"] = cuda_available();
  if (!cuda_available()) j["cuda_unavailable_reason"] = cuda_unavailable_reason();
  j["backend"] = cuda_available() ? "cuda" : "cpu";
  j["driver_version"] = cuda_version_string(driver_version());
  j["runtime_version"] = cuda_version_string(runtime_version());
  j["cpu_threads"] = omp_get_max_threads();
  j["devices"] = nlohmann::json::array();
  for (int i = 0; i < device_count(); ++i) {
    const DeviceProperties& p = device_properties(i);
    j["devices"].push_back({{"index", i},
                            {"name", p.name},
                            {"compute_capability", fmt::format("{}.{}", p.cc_major, p.cc_minor)},
                            {"multiprocessors", p.multiprocessors},
                            {"memory_bytes", p.total_memory},
                            {"l2_cache_bytes", p.l2_cache},
                            {"sm_clock_mhz", p.clock_khz / 1000},
                            {"memory_clock_mhz", p.memory_clock_khz / 1000},
                            {"memory_bus_width_bits", p.memory_bus_width_bits},
                            {"peak_bandwidth_bytes_per_s", p.peak_bandwidth_bytes_per_s},
                            {"peak_fp32_flops", p.peak_fp32_flops},
                            {"peak_fp64_flops", p.peak_fp64_flops},
                            {"peak_bf16_tensor_flops", p.peak_bf16_tensor_flops}});
  }
  j["libraries"] = library_versions();
  j["library_files"] = library_files();
  const Config& c = config();
  j["settings"] = {{"TESSEL_LOG", static_cast<int>(c.log_level)},
                   {"TESSEL_SYNC", c.sync_after_ops},
                   {"TESSEL_ALLOCATOR", c.caching_allocator ? "caching" : "direct"},
                   {"TESSEL_MEMORY_FRACTION", c.memory_fraction},
                   {"TESSEL_MAX_SPLIT_SIZE_MB", c.max_split_size >> 20},
                   {"TESSEL_FORCE_CPU", c.force_cpu},
                   {"TESSEL_CACHE_DIR", c.cache_dir}};
  return j;
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / double(1ull << 30)); }

void print_text(const nlohmann::json& j) {
  const auto& b = j["build"];
  fmt::print("tessel {} ({} build, CUDA {}{}, NVTX {})\n", j["version"].get<std::string>(),
             b["type"].get<std::string>(), b["cuda"].get<bool>() ? "on" : "off",
             b["cuda"].get<bool>() ? ", architectures " + b["cuda_architectures"].get<std::string>() : "",
             b["nvtx"].get<bool>() ? "on" : "off");
  if (j["cuda_available"].get<bool>()) {
    fmt::print("CUDA: available, driver {}, runtime {}, {} device(s)\n", j["driver_version"].get<std::string>(),
               j["runtime_version"].get<std::string>(), j["devices"].size());
  } else {
    fmt::print("CUDA: unavailable ({})\n", j["cuda_unavailable_reason"].get<std::string>());
    fmt::print("Backend: CPU only; every op runs on the CPU backend with {} threads.\n", j["cpu_threads"].get<int>());
  }
  for (const auto& d : j["devices"]) {
    fmt::print("  cuda:{}  {}  (compute capability {})\n", d["index"].get<int>(), d["name"].get<std::string>(),
               d["compute_capability"].get<std::string>());
    fmt::print("          {} SMs, {} memory, {:.0f} MiB L2, SM clock {} MHz, memory clock {} MHz, {}-bit bus\n",
               d["multiprocessors"].get<int>(), gib(d["memory_bytes"].get<double>()),
               d["l2_cache_bytes"].get<double>() / (1 << 20), d["sm_clock_mhz"].get<int>(),
               d["memory_clock_mhz"].get<int>(), d["memory_bus_width_bits"].get<int>());
    fmt::print("          peak estimates: {:.2f} TB/s memory, {:.1f} TFLOP/s fp32, {:.1f} fp64, {:.0f} bf16 tensor\n",
               d["peak_bandwidth_bytes_per_s"].get<double>() / 1e12, d["peak_fp32_flops"].get<double>() / 1e12,
               d["peak_fp64_flops"].get<double>() / 1e12, d["peak_bf16_tensor_flops"].get<double>() / 1e12);
  }
  const auto& libs = j["libraries"];
  fmt::print("Libraries: cuBLASLt {}, cuFFT {}, NVRTC {}, NCCL {}\n", libs["cublasLt"].get<std::string>(),
             libs["cufft"].get<std::string>(), libs["nvrtc"].get<std::string>(), libs["nccl"].get<std::string>());
  for (const auto& [name, path] : j["library_files"].items()) {
    fmt::print("  {:<24} {}\n", name, path.get<std::string>());
  }
  const auto& s = j["settings"];
  fmt::print("Settings: allocator {}, memory fraction {}, sync after ops {}, kernel cache {}\n",
             s["TESSEL_ALLOCATOR"].get<std::string>(), s["TESSEL_MEMORY_FRACTION"].get<double>(),
             s["TESSEL_SYNC"].get<bool>() ? "on" : "off", s["TESSEL_CACHE_DIR"].get<std::string>());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show devices, library versions and build options");
  auto* json = cmd->add_flag("--json", "Print JSON instead of text");
  cmd->callback([json] {
    const nlohmann::json j = collect();
    if (*json) {
      fmt::print("{}\n", j.dump(2));
    } else {
      print_text(j);
    }
  });
}

}  // namespace tessel::cli

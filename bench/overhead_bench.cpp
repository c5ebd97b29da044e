// Host dispatch overhead of tiny ops on CUDA: microseconds of host time per call, enqueued back to
// back, for
//   an empty kernel through the runtime's cudaLaunchKernel, the driver's cuLaunchKernel and
//   jit::Kernel::launch (the floor every op pays),
//   tessel::empty({1024}) (allocator + Array construction),
//   add(a, b) with and without out=, add(a, scalar), negative(a) on 1024 float32,
//   add's CUDA backend call alone and the ops layer's storage bookkeeping (its split),
//   a fused relu(x * a + b) * c (tessel::fuse) and a user jit::ElementwiseKernel z = x * y + 1.
// Each op's result is checked against a host reference before it is timed. A timed sample is a
// batch of 200 calls (well under the launch queue depth, so the host does not block on a full
// queue; the GPU's ~2 us per tiny kernel would otherwise hide host time), synchronized between
// batches; the cases take turns batch by batch, and each result is the median over 50 rounds.
//
// `overhead_bench --host-probe` (no GPU needed) times what a fused / user elementwise launch paid
// on every call before jit::ElementwiseLauncher (source generation, the kernel-cache key hash)
// against what a cached launch pays instead (plan_elementwise; the two cache lookups that follow
// it are a lock and a small map find each).
//
// `overhead_bench --cpu-loop N` instead runs N tiny adds (1024 float32, out= given) on the CPU
// backend and exits: the workload for `valgrind --tool=callgrind` (the backend-neutral part of the
// dispatch: promotion, broadcast, operand handling, stream resolution, Storage bookkeeping).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/jit/kernel.hpp"
#include "tessel/jit/kernel_cache.hpp"
#include "tessel/jit/user_kernels.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/fuse.hpp"
#include "tessel/profile/timer.hpp"
#include "tessel/tessel.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda.h>  // driver API types only; the functions come from cudaGetDriverEntryPointByVersion
#include <cuda_runtime_api.h>

#include "tessel/ops/backend_entry_points.hpp"  // the CUDA backend's entry, timed alone
#endif

using namespace tessel;

namespace {

int cpu_loop(long calls) {
  Array a = random::uniform({1024}, -1, 1, DType::float32, Device::cpu());
  Array b = random::uniform({1024}, -1, 1, DType::float32, Device::cpu());
  Array c = empty({1024}, DType::float32, Device::cpu());
  for (long i = 0; i < calls; ++i) add(a, b, c);
  const auto av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  for (std::size_t i = 0; i < cv.size(); ++i) {
    if (cv[i] != av[i] + bv[i]) {
      std::printf("overhead_bench --cpu-loop: wrong sum at %zu\n", i);
      return 1;
    }
  }
  std::printf("overhead_bench --cpu-loop: %ld tiny adds on the CPU backend\n", calls);
  return 0;
}

#if defined(TESSEL_HAVE_CUDA)
// Median host microseconds per call of `call`, over 7 samples of `calls` calls (no GPU involved).
double cpu_us_per_call(const std::function<void()>& call, int calls) {
  const auto batch = [&] {
    for (int i = 0; i < calls; ++i) call();
  };
  return profile::time_on_host(batch, {1, 7}).median_ms * 1000 / calls;
}

int host_probe() {
  const FusedKernel fused = fuse([](const std::vector<Sym>& v) { return relu(v[0] * 1.75 + v[1]) * v[2]; }, 3);
  const std::vector<DType> f32(3, DType::float32);
  jit::CompileRequest request;
  request.source = fused.source(f32);
  request.name = "tessel_fused_c_i32";
  const jit::ElementwiseKernel user("float32 x, float32 y", "float32 z", "z = x * y + 1", "overhead_user");
  jit::ElementwiseSpec user_spec = user.spec();
  user_spec.unroll = jit::elementwise_tuning().unroll;
  const std::vector<std::int64_t> shape{1024}, unit{1};
  const std::vector<const std::vector<std::int64_t>*> strides{&unit, &unit, &unit, &unit};
  if (jit::plan_elementwise(shape, strides).layout != jit::ElementwiseLayout::contiguous) {
    std::printf("overhead_bench --host-probe: plan_elementwise did not choose the contiguous layout\n");
    return 1;
  }
  std::size_t sink = 0;
  nlohmann::json results;
  results["fused_source_us"] = cpu_us_per_call([&] { sink += fused.source(f32).size(); }, 2000);
  results["fused_cache_key_us"] = cpu_us_per_call([&] { sink += jit::cache_key(request, "sm_90").lo & 1; }, 2000);
  results["user_source_us"] = cpu_us_per_call([&] { sink += jit::generate_elementwise_source(user_spec).size(); }, 2000);
  results["plan_elementwise_us"] = cpu_us_per_call([&] { sink += jit::plan_elementwise(shape, strides).rank; }, 200000);
  const double removed = results["fused_source_us"].get<double>() + results["fused_cache_key_us"].get<double>();
  results["fused_removed_over_plan"] = removed / results["plan_elementwise_us"].get<double>();
  std::printf("per call before (fused relu(x*1.75+b)*c, float32): source %.2f us + cache key %.2f us\n",
              results["fused_source_us"].get<double>(), results["fused_cache_key_us"].get<double>());
  std::printf("per call before (user z = x*y+1): source %.2f us (+ its cache key)\n", results["user_source_us"].get<double>());
  std::printf("per call now: plan_elementwise %.3f us (%.0fx less than source + key for the fused chain)\n",
              results["plan_elementwise_us"].get<double>(), results["fused_removed_over_plan"].get<double>());
  tessel::bench::write_results("overhead_host_probe", results);
  std::printf("(checksum %zu)\n", sink % 10);  // keeps the timed calls observable
  return 0;
}
#endif

}  // namespace

#if !defined(TESSEL_HAVE_CUDA)
int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--cpu-loop") == 0) return cpu_loop(std::atol(argv[2]));
  if (argc == 2 && std::strcmp(argv[1], "--host-probe") == 0) {
    std::printf("overhead_bench --host-probe: skipped: tessel was built without CUDA (no source generation)\n");
    return 0;
  }
  std::printf("overhead_bench: skipped: tessel was built without CUDA\n");
  return 0;
}
#else

namespace {

constexpr int kBatch = 200;
constexpr int kBatches = 50;

// Host microseconds per call of each case, enqueued kBatch times back to back per sample; the
// cases take turns, one batch each per round, so that a drift of the host's speed (up to 1.5x
// between minutes on a VM) hits them alike. Medians over kBatches rounds.
struct Timed {
  const char* key;
  std::string label;
  std::function<void()> call;
  double us = 0;
};
void time_interleaved(std::vector<Timed>& cases, const Stream& stream) {
  for (Timed& t : cases) {
    for (int i = 0; i < 3 * kBatch; ++i) t.call();  // warm-up: compile, load, allocator pools
  }
  stream.synchronize();
  std::vector<std::vector<double>> samples(cases.size());
  for (int round = 0; round < kBatches; ++round) {
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) cases[c].call();
      const auto t1 = std::chrono::steady_clock::now();
      stream.synchronize();
      samples[c].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kBatch);
    }
  }
  for (std::size_t c = 0; c < cases.size(); ++c) cases[c].us = bench::median(samples[c]);
}

double max_abs_error(const Array& got, const std::function<double(std::size_t)>& want) {
  const auto g = got.to(Device::cpu()).to_vector<float>();
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double e = std::abs(double(g[i]) - want(i));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--cpu-loop") == 0) return cpu_loop(std::atol(argv[2]));
  if (argc == 2 && std::strcmp(argv[1], "--host-probe") == 0) return host_probe();
  if (bench::skip_without_cuda("overhead_bench")) return 0;
  const Device gpu = Device::cuda(0);
  const Stream stream = current_stream(gpu);
  nlohmann::json results;
  results["device"] = device_properties(0).name;
  results["batch_calls"] = kBatch;
  results["batches"] = kBatches;
  results["interleaved"] = true;
  bool all_ok = true;
  std::vector<Timed> timed;

  // The floor: an empty kernel through the runtime directly, through the driver, and through
  // jit::Kernel::launch (which uses the driver's cuLaunchKernel).
  jit::CompileRequest request;
  request.source = "extern \"C\" __global__ void tessel_overhead_empty(float* p) {}";
  request.name = "tessel_overhead_empty";
  const jit::Kernel empty_kernel = jit::get_kernel(request, gpu);
  results["jit_launches_through_driver"] = empty_kernel.launches_through_driver();
  std::printf("jit::Kernel launches through %s\n", empty_kernel.launches_through_driver() ? "cuLaunchKernel (driver)"
                                                                                         : "cudaLaunchKernel (runtime)");
  float* dummy = nullptr;
  void* kernel_args[] = {&dummy};
  auto* raw_stream = static_cast<cudaStream_t>(stream.handle());
  timed.push_back({"cudaLaunchKernel_us", "bare cudaLaunchKernel", [&] {
                     const cudaError_t status =
                         cudaLaunchKernel(empty_kernel.handle(), dim3(4), dim3(256), kernel_args, 0, raw_stream);
                     if (status != cudaSuccess) {
                       std::printf("cudaLaunchKernel failed: %s\n", cudaGetErrorString(status));
                       std::exit(1);
                     }
                   }});
  using KernelGetFunction = CUresult (*)(CUfunction*, CUkernel);
  using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);
  void* get_fn = nullptr;
  void* launch_fn = nullptr;
  cudaDriverEntryPointQueryResult q1{}, q2{};
  CUfunction function = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuKernelGetFunction", &get_fn, 12000, cudaEnableDefault, &q1) == cudaSuccess &&
      cudaGetDriverEntryPointByVersion("cuLaunchKernel", &launch_fn, 12000, cudaEnableDefault, &q2) == cudaSuccess &&
      get_fn && launch_fn &&
      reinterpret_cast<KernelGetFunction>(get_fn)(
          &function, static_cast<CUkernel>(const_cast<void*>(empty_kernel.handle()))) == CUDA_SUCCESS) {
    auto launch = reinterpret_cast<LaunchKernel>(launch_fn);
    timed.push_back({"cuLaunchKernel_us", "driver cuLaunchKernel", [&, launch] {
                       if (launch(function, 4, 1, 1, 256, 1, 1, 0, static_cast<CUstream>(raw_stream), kernel_args,
                                  nullptr) != CUDA_SUCCESS) {
                         std::printf("cuLaunchKernel failed\n");
                         std::exit(1);
                       }
                     }});
  } else {
    (void)cudaGetLastError();
    std::printf("driver entry points unavailable; cuLaunchKernel not timed\n");
  }
  jit::LaunchConfig config;
  config.grid = jit::Dim3(4);
  config.block = jit::Dim3(256);
  timed.push_back({"jit_kernel_launch_us", "jit::Kernel::launch", [&] { empty_kernel.launch(config, kernel_args, stream); }});
  timed.push_back({"empty_1024_us", "empty({1024})", [&] { (void)empty({1024}, DType::float32, gpu); }});

  Array a = random::uniform({1024}, -1, 1, DType::float32, gpu);
  Array b = random::uniform({1024}, -1, 1, DType::float32, gpu);
  Array c = full({1024}, NAN, DType::float32, gpu);
  const auto av = a.to(Device::cpu()).to_vector<float>(), bv = b.to(Device::cpu()).to_vector<float>();

  struct Case {
    const char* key;
    const char* label;
    std::function<Array()> call;
    std::function<double(std::size_t)> want;
    // Largest accepted absolute error: 0 for single ops; the generated fused and user kernels may
    // contract x * y + z into one fma (one rounding fewer than the host reference).
    double tolerance = 0;
  };
  // Fused relu(x * a + b) * c (a, b, c arrays; plans and kernels cached after the first call) and
  // a user ElementwiseKernel writing c (its launchers cached per scalar binding).
  const FusedKernel fused = fuse([](const std::vector<Sym>& v) { return relu(v[0] * v[1] + v[2]) * v[3]; }, 4);
  Array fa = random::uniform({1024}, -1, 1, DType::float32, gpu);
  Array fc = random::uniform({1024}, -1, 1, DType::float32, gpu);
  const auto fav = fa.to(Device::cpu()).to_vector<float>(), fcv = fc.to(Device::cpu()).to_vector<float>();
  const jit::ElementwiseKernel user("float32 x, float32 y", "float32 z", "z = x * y + 1", "overhead_user");
  const std::vector<std::int64_t> user_shape{1024};
  const std::vector<jit::ElementwiseArg> user_args{jit::ElementwiseArg::array(a.data(), {1}),
                                                   jit::ElementwiseArg::array(b.data(), {1}),
                                                   jit::ElementwiseArg::array(c.data(), {1})};
  // The split of add(a, b, out=c): the CUDA backend's part alone (kernel-cache lookup, parameters,
  // launch), and the ops layer's stream bookkeeping on the operands' storages.
  const Array* backend_inputs[3] = {&a, &b, nullptr};
  const Scalar* backend_scalars[3] = {nullptr, nullptr, nullptr};
  const DType backend_dtypes[3] = {DType::float32, DType::float32, DType::float32};

  const std::vector<Case> cases{
      {"add_out_us", "add(a, b, out=c)", [&] { return add(a, b, c); },
       [&](std::size_t i) { return double(float(av[i] + bv[i])); }},
      {"add_us", "add(a, b)", [&] { return add(a, b); }, [&](std::size_t i) { return double(float(av[i] + bv[i])); }},
      {"cuda_backend_add_us", "backend add alone", [&] {
         internal::cuda_elementwise(ElementwiseOp::add, 2, backend_inputs, backend_scalars, backend_dtypes, c, stream);
         return c;
       },
       [&](std::size_t i) { return double(float(av[i] + bv[i])); }},
      {"add_scalar_us", "add(a, 2.5)", [&] { return add(a, Scalar(2.5)); },
       [&](std::size_t i) { return double(float(av[i] + 2.5f)); }},
      {"negative_us", "negative(a)", [&] { return negative(a); }, [&](std::size_t i) { return -double(av[i]); }},
      {"fused_relu_axpb_c_us", "fused relu(x*a+b)*c", [&] { return fused({a, fa, b, fc}); },
       [&](std::size_t i) { return double(std::max(0.0f, av[i] * fav[i] + bv[i]) * fcv[i]); }, 1e-6},
      {"user_elementwise_kernel_us", "ElementwiseKernel x*y+1", [&] {
         user.launch(user_shape, user_args, gpu, stream);
         return c;
       },
       [&](std::size_t i) { return double(av[i] * bv[i] + 1.0f); }, 1e-6},
  };
  for (const Case& k : cases) {
    fill(c, NAN);
    const double err = max_abs_error(k.call(), k.want);
    if (!(err <= k.tolerance)) {
      all_ok = false;
      results[k.key] = {{"status", "FAILED"}, {"max_abs_error", err}};
      std::printf("%-30s FAILED check (max abs error %.3g)\n", k.label, err);
      continue;
    }
    timed.push_back({k.key, k.label, [call = k.call] { (void)call(); }});
  }
  timed.push_back({"storage_bookkeeping_us", "wait_on_stream x3 + record", [&] {
                     a.storage()->wait_on_stream(stream);
                     b.storage()->wait_on_stream(stream);
                     c.storage()->wait_on_stream(stream);
                     c.storage()->record_pending_write(stream);
                   }});

  time_interleaved(timed, stream);
  double floor_us = 0;
  for (const Timed& t : timed) {
    if (std::strcmp(t.key, "jit_kernel_launch_us") == 0) floor_us = t.us;
  }
  for (const Timed& t : timed) {
    results[t.key] = t.us;
    std::printf("%-30s %.2f us host per call (%.2fx jit::Kernel::launch)\n", (t.label + ":").c_str(), t.us,
                t.us / floor_us);
  }
  tessel::bench::write_results("overhead", results);
  return all_ok ? 0 : 1;
}
#endif

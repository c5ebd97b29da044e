// Host <-> device pipelines and CUDA graphs, against ceilings measured in the same run, all on
// the pipeline's device (--device=N, default 0):
//   1. ceilings: pinned H2D and D2H copy bandwidth alone (256 MiB copies), pageable H2D and D2H,
//      and what the pipeline is really bounded by: 1 GiB H2D and 1 GiB D2H at the same time on
//      two streams, chunked like the pipeline (per chunk size; the best is the ceiling), with
//      each direction alone chunked the same way (the per-copy overhead);
//   2. 1 GiB of float32 on the host -> x*2+1 (one fused tessel kernel) -> host, with Pipeline,
//      from pinned and from pageable input: GB/s of input processed, as a share of the
//      single-direction pinned bandwidth (target >= 85%), of the bidirectional ceiling, or of
//      the pageable copy bandwidth (target >= 80%), with the pipeline's report (overlap %);
//   3. a sweep over chunk size x stream count x ordered copies (pinned in, pinned out given, as
//      PyTorch's loop does), to choose the defaults from data (--sweep-chunks-mib=8,16,...,
//      --sweep-streams=1,2,..., --no-sweep);
//   4. launch cost of a chain of 20 small elementwise ops, eager vs one graph replay (target >= 3x).
// Every result is checked against a host reference before it is timed; times are medians.
// bench/peers/torch_pipeline.py measures PyTorch's 1- and 4-stream versions of job 2.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/tessel.hpp"

#if !defined(TESSEL_HAVE_CUDA)
int main() {
  std::printf("pipeline_bench: skipped: tessel was built without CUDA\n");
  return 0;
}
#else
#include <cuda_runtime_api.h>

using namespace tessel;

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t MiB = 1 << 20;

using bench::median;

// Median GB/s of a copy of `bytes` with cudaMemcpyAsync on `stream` (2 untimed copies first).
double copy_GBps(void* dst, const void* src, std::int64_t bytes, cudaMemcpyKind kind, const Stream& stream, int repeats = 9) {
  return double(bytes) / bench::device_copy_ms(dst, src, bytes, kind, stream, {2, repeats}) / 1e6;
}


// Largest relative error of y against x*2+1 (float32 arithmetic) over a strided sample.
double check_twice_plus_one(const Array& x, const Array& y) {
  const float* xs = x.data_as<float>();
  const float* ys = y.data_as<float>();
  double worst = 0;
  const std::int64_t n = x.size();
  for (std::int64_t i = 0; i < n; i += 4099) {
    const double want = double(xs[i] * 2.0f + 1.0f);
    worst = std::max(worst, std::abs(double(ys[i]) - want) / std::max(1e-30, std::abs(want)));
  }
  const double last = double(xs[n - 1] * 2.0f + 1.0f);
  worst = std::max(worst, std::abs(double(ys[n - 1]) - last) / std::max(1e-30, std::abs(last)));
  return std::isfinite(worst) ? worst : INFINITY;
}

nlohmann::json report_json(const PipelineReport& r) {
  return {{"h2d_GBps", r.h2d_GBps},       {"d2h_GBps", r.d2h_GBps},           {"compute_ms", r.compute_ms},
          {"wall_ms", r.wall_ms},         {"throughput_GBps", r.throughput_GBps}, {"overlap_percent", r.overlap_percent},
          {"chunks", r.chunks},           {"chunk_bytes", r.chunk_bytes},     {"streams", r.streams},
          {"ordered_copies", r.ordered_copies}};
}

void check_copy(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "pipeline_bench: %s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// `bytes` copied in chunks of `chunk` with one cudaMemcpyAsync each, H2D on `up` and/or D2H on
// `down` (both: at the same time, as the pipeline's copies run). Median over `repeats` (after a
// warm-up) of the CUDA-event time from a common start to each direction's last copy; a direction
// not asked for gets 0.
struct CopyTimes {
  double h2d_ms = 0, d2h_ms = 0, both_ms = 0;  // both_ms: until both directions are done
};
CopyTimes chunked_copies(void* dev_in, const void* host_in, void* host_out, const void* dev_out, std::int64_t bytes,
                         std::int64_t chunk, bool h2d, bool d2h, const Stream& up, const Stream& down, int repeats = 5) {
  const Device device = up.device();
  std::vector<double> h2d_ms, d2h_ms, both_ms;
  for (int rep = 0; rep <= repeats; ++rep) {
    Event start(device), up_done(device), down_done(device);
    start.record(up);
    down.wait(start);
    for (std::int64_t off = 0; off < bytes; off += chunk) {
      const auto len = static_cast<std::size_t>(std::min(chunk, bytes - off));
      if (h2d) {
        check_copy(cudaMemcpyAsync(static_cast<char*>(dev_in) + off, static_cast<const char*>(host_in) + off, len,
                                   cudaMemcpyHostToDevice, static_cast<cudaStream_t>(up.handle())),
                   "cudaMemcpyAsync (H2D ceiling)");
      }
      if (d2h) {
        check_copy(cudaMemcpyAsync(static_cast<char*>(host_out) + off, static_cast<const char*>(dev_out) + off, len,
                                   cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(down.handle())),
                   "cudaMemcpyAsync (D2H ceiling)");
      }
    }
    up_done.record(up);
    down_done.record(down);
    const double u = start.elapsed_ms(up_done), d = start.elapsed_ms(down_done);
    if (rep == 0) continue;  // warm-up
    h2d_ms.push_back(h2d ? u : 0);
    d2h_ms.push_back(d2h ? d : 0);
    both_ms.push_back(std::max(h2d ? u : 0.0, d2h ? d : 0.0));
  }
  return {median(h2d_ms), median(d2h_ms), median(both_ms)};
}

// "8,16,32" -> {8, 16, 32}; exits on anything else.
std::vector<std::int64_t> parse_list(const std::string& text, const char* flag) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0) {
      std::fprintf(stderr, "pipeline_bench: %s takes positive integers separated by commas, got '%s'\n", flag, text.c_str());
      std::exit(2);
    }
    values.push_back(v);
  }
  return values;
}

struct Flags {
  int device = 0;
  bool sweep = true;
  std::vector<std::int64_t> chunks_mib = {8, 16, 24, 32, 48, 64};
  std::vector<std::int64_t> streams = {1, 2, 3, 4, 6};
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (a == "--no-sweep") {
      f.sweep = false;
    } else if (const char* v = value("--device")) {
      char* end = nullptr;
      const long d = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || d < 0) {
        std::fprintf(stderr, "pipeline_bench: --device takes a device index, got '%s'\n", v);
        std::exit(2);
      }
      f.device = static_cast<int>(d);
    } else if (const char* v = value("--sweep-chunks-mib")) {
      f.chunks_mib = parse_list(v, "--sweep-chunks-mib");
    } else if (const char* v = value("--sweep-streams")) {
      f.streams = parse_list(v, "--sweep-streams");
    } else {
      std::fprintf(stderr,
                   "usage: pipeline_bench [--device=N] [--no-sweep] [--sweep-chunks-mib=8,16,...] "
                   "[--sweep-streams=1,2,...]\n");
      std::exit(2);
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  if (bench::skip_without_cuda("pipeline_bench")) return 0;
  if (flags.device < 0 || flags.device >= device_count()) {
    std::fprintf(stderr, "pipeline_bench: --device=%d, but there are %d CUDA devices\n", flags.device, device_count());
    return 2;
  }
  // Everything below (the ceilings included) runs on the pipeline's device.
  const Device gpu = Device::cuda(flags.device);
  DeviceGuard device_guard(gpu);
  Stream stream = Stream::create(gpu);
  nlohmann::json out;
  out["device"] = device_properties(flags.device).name;
  out["device_index"] = flags.device;

  // The job's data: 1 GiB of float32 in pinned and in pageable host memory, and outputs.
  const std::int64_t n = (1024 * MiB) / 4;
  const std::int64_t job_bytes = n * 4;
  Array x_pinned = empty_pinned({n}, DType::float32);
  {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
    float* p = x_pinned.data_as<float>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = dist(rng);
  }
  Array x_pageable = empty({n}, DType::float32, Device::cpu());
  std::memcpy(x_pageable.data(), x_pinned.data(), static_cast<std::size_t>(job_bytes));
  Array y_pageable = empty({n}, DType::float32, Device::cpu());
  Array y_pinned = empty_pinned({n}, DType::float32);
  std::memset(y_pinned.data(), 0, static_cast<std::size_t>(job_bytes));  // touched, as x is

  // ---- 1. ceilings ----
  {
    const std::int64_t bytes = 256 * MiB;
    auto pinned = Buffer::allocate_pinned(bytes);
    auto dev = Buffer::allocate(gpu, bytes, stream);
    std::vector<char> pageable(static_cast<std::size_t>(bytes), 1);
    std::memset(pinned->data(), 1, static_cast<std::size_t>(bytes));
    const double h2d = copy_GBps(dev->data(), pinned->data(), bytes, cudaMemcpyHostToDevice, stream);
    const double d2h = copy_GBps(pinned->data(), dev->data(), bytes, cudaMemcpyDeviceToHost, stream);
    const double pageable_h2d = copy_GBps(dev->data(), pageable.data(), bytes, cudaMemcpyHostToDevice, stream, 5);
    const double pageable_d2h = copy_GBps(pageable.data(), dev->data(), bytes, cudaMemcpyDeviceToHost, stream, 5);
    out["ceiling"] = {{"pinned_h2d_GBps", h2d}, {"pinned_d2h_GBps", d2h}, {"pageable_h2d_GBps", pageable_h2d},
                      {"pageable_d2h_GBps", pageable_d2h}, {"bytes", bytes}, {"device_index", flags.device}};
    std::printf("pinned H2D %.2f GB/s, D2H %.2f GB/s; pageable H2D %.2f GB/s, D2H %.2f GB/s (cuda:%d)\n", h2d, d2h,
                pageable_h2d, pageable_d2h, flags.device);
  }
  // The pipeline's real bound: its H2D and D2H copies share the link at the same time. 1 GiB each
  // way on two streams, chunked, for every chunk size of the sweep and the default's 16 MiB; each
  // direction alone chunked the same way shows the per-copy cost.
  {
    Stream up = Stream::create(gpu), down = Stream::create(gpu);
    auto dev_in = Buffer::allocate(gpu, job_bytes, up);
    auto dev_out = Buffer::allocate(gpu, job_bytes, down);
    check_copy(cudaMemsetAsync(dev_out->data(), 0, static_cast<std::size_t>(job_bytes), static_cast<cudaStream_t>(down.handle())),
               "cudaMemsetAsync");
    std::vector<std::int64_t> chunk_mib = flags.chunks_mib;
    chunk_mib.push_back(16);
    std::sort(chunk_mib.begin(), chunk_mib.end());
    chunk_mib.erase(std::unique(chunk_mib.begin(), chunk_mib.end()), chunk_mib.end());
    nlohmann::json rows = nlohmann::json::array();
    double best = 0;
    std::int64_t best_chunk = 0;
    for (const std::int64_t mib : chunk_mib) {
      const std::int64_t chunk = mib * MiB;
      const CopyTimes both = chunked_copies(dev_in->data(), x_pinned.data(), y_pinned.data(), dev_out->data(), job_bytes,
                                            chunk, true, true, up, down);
      const CopyTimes h2d = chunked_copies(dev_in->data(), x_pinned.data(), y_pinned.data(), dev_out->data(), job_bytes,
                                           chunk, true, false, up, down);
      const CopyTimes d2h = chunked_copies(dev_in->data(), x_pinned.data(), y_pinned.data(), dev_out->data(), job_bytes,
                                           chunk, false, true, up, down);
      const double GBps = double(job_bytes) / both.both_ms / 1e6;  // per direction, as the pipeline counts its input
      rows.push_back({{"chunk_bytes", chunk},
                      {"bidirectional_GBps", GBps},
                      {"bidirectional_h2d_GBps", double(job_bytes) / both.h2d_ms / 1e6},
                      {"bidirectional_d2h_GBps", double(job_bytes) / both.d2h_ms / 1e6},
                      {"bidirectional_ms", both.both_ms},
                      {"h2d_alone_GBps", double(job_bytes) / h2d.h2d_ms / 1e6},
                      {"d2h_alone_GBps", double(job_bytes) / d2h.d2h_ms / 1e6}});
      std::printf("chunks of %3lld MiB: H2D+D2H at once %.2f GB/s each way (H2D %.2f, D2H %.2f); alone H2D %.2f, D2H %.2f\n",
                  static_cast<long long>(mib), GBps, double(job_bytes) / both.h2d_ms / 1e6,
                  double(job_bytes) / both.d2h_ms / 1e6, double(job_bytes) / h2d.h2d_ms / 1e6,
                  double(job_bytes) / d2h.d2h_ms / 1e6);
      if (GBps > best) {
        best = GBps;
        best_chunk = chunk;
      }
    }
    up.synchronize();
    down.synchronize();
    out["ceiling"]["pinned_bidirectional_GBps"] = best;  // 1 GiB each way at once: GB/s of one direction
    out["ceiling"]["pinned_bidirectional_chunk_bytes"] = best_chunk;
    out["ceiling"]["pinned_bidirectional_by_chunk"] = rows;
    std::printf("bidirectional ceiling: %.2f GB/s each way (chunks of %lld MiB)\n", best,
                static_cast<long long>(best_chunk / MiB));
  }
  const double pinned_ceiling = std::min(out["ceiling"]["pinned_h2d_GBps"].get<double>(),
                                         out["ceiling"]["pinned_d2h_GBps"].get<double>());
  const double bidir_ceiling = out["ceiling"]["pinned_bidirectional_GBps"].get<double>();
  const double pageable_ceiling = out["ceiling"]["pageable_h2d_GBps"].get<double>();

  // ---- 2. 1 GiB host -> x*2+1 -> host ----
  const FusedKernel kernel = fuse([](const std::vector<Sym>& v) { return v[0] * 2 + 1; }, 1);
  auto compute = [&kernel](const Array& chunk, const Stream& s) { return kernel({chunk}, std::nullopt, s); };

  // Times run_once (7 runs after a checked warm-up) and returns the JSON row, or exits on a wrong result.
  auto measure = [&](const char* name, Pipeline& pipeline, const Array& input, const std::function<Array()>& run_once,
                     double ceiling, int repeats) -> nlohmann::json {
    {
      Array y = run_once();  // warm-up: compiles the kernel, fills the pools
      std::memset(y.data(), 0xff, static_cast<std::size_t>(y.nbytes()));  // poison (NaN)
      y = run_once();
      const double err = check_twice_plus_one(input, y);
      if (!(err < 1e-6)) {
        std::fprintf(stderr, "pipeline_bench: %s: wrong result (max rel err %g)\n", name, err);
        std::exit(1);
      }
    }
    std::vector<double> wall;
    PipelineReport best_report;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = Clock::now();
      Array y = run_once();
      wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (i == 0 || pipeline.report().wall_ms <= best_report.wall_ms) best_report = pipeline.report();
    }
    const double ms = median(wall);
    const double GBps = double(job_bytes) / ms / 1e6;
    return {{"name", name},
            {"bytes", job_bytes},
            {"ms", ms},
            {"GBps", GBps},
            {"ceiling_GBps", ceiling},
            {"fraction_of_ceiling", GBps / ceiling},
            {"fraction_of_bidirectional", GBps / bidir_ceiling},
            {"report", report_json(best_report)}};
  };

  struct Case {
    const char* name;
    const Array* input;
    const Array* output;  // nullptr: run(input) returns a new (pinned) result
    std::optional<int> streams;
    bool ordered;
    double ceiling;
  };
  const std::vector<Case> cases = {
      {"pinned", &x_pinned, nullptr, std::nullopt, false, pinned_ceiling},
      {"pinned_into_pinned", &x_pinned, &y_pinned, std::nullopt, false, pinned_ceiling},  // as PyTorch's loop
      {"pinned_ordered", &x_pinned, nullptr, std::nullopt, true, pinned_ceiling},
      {"pinned_1_stream", &x_pinned, nullptr, 1, false, pinned_ceiling},
      {"pinned_2_streams", &x_pinned, nullptr, 2, false, pinned_ceiling},
      {"pageable_input", &x_pageable, nullptr, std::nullopt, false, pageable_ceiling},
      {"pageable_input_and_output", &x_pageable, &y_pageable, std::nullopt, false, pageable_ceiling},
  };
  nlohmann::json jobs = nlohmann::json::array();
  for (const Case& c : cases) {
    PipelineOptions options;
    options.device = gpu;
    options.progress = ProgressMode::off;
    options.num_streams = c.streams;
    options.ordered_copies = c.ordered;
    Pipeline pipeline(compute, options);
    auto run_once = [&]() -> Array {
      if (c.output) {
        pipeline.run(*c.input, *c.output);
        return *c.output;
      }
      return pipeline.run(*c.input);
    };
    nlohmann::json row = measure(c.name, pipeline, *c.input, run_once, c.ceiling, 7);
    std::printf("%-26s %8.2f ms  %6.2f GB/s  %5.1f%% of %s ceiling, %5.1f%% of bidirectional  | %s\n", c.name,
                row["ms"].get<double>(), row["GBps"].get<double>(), 100 * row["fraction_of_ceiling"].get<double>(),
                c.ceiling == pinned_ceiling ? "pinned" : "pageable", 100 * row["fraction_of_bidirectional"].get<double>(),
                pipeline.report().str().c_str());
    jobs.push_back(row);
  }
  out["x2p1_1GiB"] = jobs;
  out["target"] = {{"pinned_fraction", 0.85}, {"pageable_fraction", 0.80}, {"vs_torch_4_streams", 1.15}};

  // ---- 3. sweep: chunk size x streams x ordered copies, pinned in, given pinned out ----
  if (flags.sweep) {
    nlohmann::json sweep = nlohmann::json::array();
    nlohmann::json best;
    for (const std::int64_t mib : flags.chunks_mib) {
      for (const std::int64_t streams : flags.streams) {
        for (const bool ordered : {false, true}) {
          if (ordered && streams == 1) continue;  // one stream is in order anyway
          PipelineOptions options;
          options.device = gpu;
          options.progress = ProgressMode::off;
          options.chunk_bytes = mib * MiB;
          options.num_streams = static_cast<int>(streams);
          options.ordered_copies = ordered;
          Pipeline pipeline(compute, options);
          auto run_once = [&]() -> Array {
            pipeline.run(x_pinned, y_pinned);
            return y_pinned;
          };
          const std::string name = std::to_string(mib) + "MiB_" + std::to_string(streams) + "s" + (ordered ? "_ordered" : "");
          nlohmann::json row = measure(name.c_str(), pipeline, x_pinned, run_once, pinned_ceiling, 5);
          row["chunk_mib"] = mib;
          row["streams"] = streams;
          row["ordered_copies"] = ordered;
          std::printf("sweep %3lld MiB x %lld streams%-9s %7.2f ms  %6.2f GB/s  %5.1f%% of pinned, %5.1f%% of bidirectional\n",
                      static_cast<long long>(mib), static_cast<long long>(streams), ordered ? " ordered" : "",
                      row["ms"].get<double>(), row["GBps"].get<double>(), 100 * row["fraction_of_ceiling"].get<double>(),
                      100 * row["fraction_of_bidirectional"].get<double>());
          if (best.is_null() || row["GBps"].get<double>() > best["GBps"].get<double>()) best = row;
          sweep.push_back(row);
        }
      }
    }
    out["sweep"] = sweep;
    out["sweep_best"] = best;
    if (!best.is_null()) {
      std::printf("sweep best: %s, %.2f GB/s (%.1f%% of pinned, %.1f%% of bidirectional)\n",
                  best["name"].get<std::string>().c_str(), best["GBps"].get<double>(),
                  100 * best["fraction_of_ceiling"].get<double>(), 100 * best["fraction_of_bidirectional"].get<double>());
    }
  }
  x_pinned = Array();
  x_pageable = Array();
  y_pageable = Array();
  y_pinned = Array();

  // ---- 4. 20 small ops: eager launches vs one graph replay ----
  {
    const std::int64_t m = 4096;
    std::vector<float> xv(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) xv[static_cast<std::size_t>(i)] = 0.001f * float(i % 977);
    Array x = from_vector(xv, {m}, gpu, stream);
    auto chain = [&](const Array& in) {
      Array t = in;
      for (int i = 0; i < 10; ++i) {
        t = multiply(t, Scalar(0.999f), std::nullopt, stream);
        t = add(t, Scalar(0.5f), std::nullopt, stream);
      }
      return t;  // 20 kernels
    };
    Array eager = chain(x);
    Array y;
    GraphOptions graph_options;
    graph_options.reserve_bytes = 16 * MiB;
    Graph graph = Graph::capture(stream, [&] { y = chain(x); }, graph_options);
    graph.replay(stream);
    stream.synchronize();
    const std::vector<float> want = eager.to_vector<float>(), got = y.to_vector<float>();
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {
        std::fprintf(stderr, "pipeline_bench: graph replay differs from eager at %zu: %g vs %g\n", i, got[i], want[i]);
        return 1;
      }
    }
    const int iters = 500;
    auto time_us = [&](const std::function<void()>& body) {
      std::vector<double> per_iter;
      for (int rep = 0; rep < 7; ++rep) {
        stream.synchronize();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) body();
        stream.synchronize();
        per_iter.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
      }
      return median(per_iter);
    };
    const double eager_us = time_us([&] { chain(x); });
    const double graph_us = time_us([&] { graph.replay(stream); });
    out["graph_20_ops"] = {{"elements", m},          {"ops", 20},
                           {"eager_us_per_chain", eager_us}, {"graph_us_per_replay", graph_us},
                           {"eager_us_per_op", eager_us / 20}, {"graph_us_per_op", graph_us / 20},
                           {"speedup", eager_us / graph_us}, {"target_speedup", 3.0},
                           {"graph_nodes", graph.num_nodes()}};
    std::printf("20 small ops: eager %.2f us, graph replay %.2f us (%.2fx, %lld nodes)\n", eager_us, graph_us,
                eager_us / graph_us, static_cast<long long>(graph.num_nodes()));
  }
  // PyTorch's numbers, when bench/peers/torch_pipeline.py ran first today on this device.
  {
    const std::string path = tessel::bench::results_path();
    nlohmann::json all = tessel::bench::read_results();
    if (all.contains("pipeline_peers")) {
      double torch_pinned4 = 0, torch_pageable4 = 0;
      for (const auto& e : all["pipeline_peers"]["x2p1_1GiB"]) {
        if (e["name"] == "pinned_4_streams") torch_pinned4 = e["GBps"].get<double>();
        if (e["name"] == "pageable_4_streams") torch_pageable4 = e["GBps"].get<double>();
      }
      double ours_pinned = 0, ours_pageable = 0, ours_into = 0;
      for (const auto& e : out["x2p1_1GiB"]) {
        if (e["name"] == "pinned") ours_pinned = e["GBps"].get<double>();
        if (e["name"] == "pinned_into_pinned") ours_into = e["GBps"].get<double>();
        if (e["name"] == "pageable_input_and_output") ours_pageable = e["GBps"].get<double>();
      }
      if (torch_pinned4 > 0) {
        out["vs_torch_pinned_4_streams"] = ours_pinned / torch_pinned4;
        out["vs_torch_pinned_into_pinned_4_streams"] = ours_into / torch_pinned4;
        // PyTorch against the same bound: how much room the bidirectional link leaves anyone.
        out["torch_pinned_4_streams_fraction_of_bidirectional"] = torch_pinned4 / bidir_ceiling;
        if (out.contains("sweep_best") && !out["sweep_best"].is_null()) {
          out["vs_torch_sweep_best"] = out["sweep_best"]["GBps"].get<double>() / torch_pinned4;
        }
      }
      if (torch_pageable4 > 0) out["vs_torch_pageable_4_streams"] = ours_pageable / torch_pageable4;
      std::printf("vs PyTorch 4 streams: pinned %.2fx (into a given pinned output %.2fx), pageable %.2fx (target 1.15x); "
                  "PyTorch is at %.1f%% of the bidirectional ceiling, 1.15x of it is %.1f%%\n",
                  torch_pinned4 > 0 ? ours_pinned / torch_pinned4 : 0.0, torch_pinned4 > 0 ? ours_into / torch_pinned4 : 0.0,
                  torch_pageable4 > 0 ? ours_pageable / torch_pageable4 : 0.0, 100 * torch_pinned4 / bidir_ceiling,
                  115 * torch_pinned4 / bidir_ceiling);
    } else {
      std::printf("no pipeline_peers in %s: run bench/peers/torch_pipeline.py first for the PyTorch ratio\n", path.c_str());
    }
  }
  tessel::bench::write_results("pipeline", out);
  return 0;
}
#endif

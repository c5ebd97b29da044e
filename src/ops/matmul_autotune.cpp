// matmul autotuning: every candidate of a layout timed with CUDA events (host clocks on the CPU),
// and the winners cached in memory and on disk (one JSON file per key under matmul_cache_dir()).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/disk_cache.hpp"
#include "ops/matmul_plan.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/log.hpp"
#include "tessel/jit/hash.hpp"

namespace tessel {
namespace {

std::mutex cache_dir_mutex;
std::string& cache_dir_override() {
  static std::string folder;
  return folder;
}

}  // namespace

void set_matmul_cache_dir(const std::string& folder) {
  std::lock_guard<std::mutex> lock(cache_dir_mutex);
  cache_dir_override() = folder;
}

std::string matmul_cache_dir() {
  {
    std::lock_guard<std::mutex> lock(cache_dir_mutex);
    if (!cache_dir_override().empty()) return cache_dir_override();
  }
  const std::string& base = config().cache_dir;
  if (!base.empty()) return base + "/matmul";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/tessel/matmul";
}

namespace detail {
namespace {

std::mutex cache_mutex;
std::unordered_map<std::string, std::string>& winner_cache() {  // cache key -> candidate name
  static std::unordered_map<std::string, std::string> cache;
  return cache;
}

// The winners on disk: <matmul_cache_dir()>/<hash of the key>.json, holding the key itself (a hash
// collision reads as a miss) and every candidate's times.
DiskCache winner_files() { return DiskCache(matmul_cache_dir(), ".json"); }

void store_winner(const std::string& key, const std::vector<MatmulCandidate>& candidates, const std::string& winner) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  winner_cache()[key] = winner;
  nlohmann::json j;
  j["key"] = key;
  j["winner"] = winner;
  j["candidates"] = nlohmann::json::array();
  for (const MatmulCandidate& c : candidates) {
    j["candidates"].push_back({{"name", c.name}, {"time_ms", c.time_ms}, {"sustained_ms", c.sustained_ms}, {"ok", c.ok}});
  }
  const DiskCache files = winner_files();
  const std::string name = jit::hash128(key).hex();
  try {
    files.write(name, j.dump(2) + "\n");
    TESSEL_LOG_INFO(fmt::format("matmul: autotune winner {} stored in {}", winner, files.path(name)));
  } catch (const Error& error) {
    TESSEL_LOG_WARN(fmt::format("matmul: could not write the autotune cache: {}", error.what()));
  }
}

// Part of every cache key: a change in how the autotuner ranks candidates must not reuse winners
// ranked the old way. 2: single runs, then the finalists back to back (autotune_sustain_ms).
constexpr const char* kAutotuneRanking = "ranking 2";

// TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS=T (default 20; 0 turns the phase off): how long each finalist
// runs back to back in the autotune's second phase. Single runs interleaved with other candidates
// rank some algorithms first that are slower in sustained use (seen on the H100 at 8192^3 bf16: the
// power limit reacts over milliseconds, so a neighbour's lighter load lends headroom). A matmul in
// real use runs back to back, so finalists are ranked that way.
double autotune_sustain_ms() {
  static const double sustain = [] {
    const char* env = std::getenv("TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS");
    if (env == nullptr || *env == '\0') return 20.0;
    char* end = nullptr;
    const double value = std::strtod(env, &end);
    if (*end != '\0' || !(value >= 0 && value <= 1000)) {
      throw ValueError(
          fmt::format("TESSEL_MATMUL_AUTOTUNE_SUSTAIN_MS: expected a number of milliseconds in 0..1000, got \"{}\"", env));
    }
    return value;
  }();
  return sustain;
}

}  // namespace

std::optional<std::string> cached_matmul_winner(const std::string& key, bool& from_disk) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = winner_cache().find(key);
  if (it != winner_cache().end()) {
    from_disk = false;
    return it->second;
  }
  const DiskCache files = winner_files();
  const std::string name = jit::hash128(key).hex();
  const std::optional<std::string> text = files.read(name);
  if (!text) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    if (j.at("key").get<std::string>() != key) return std::nullopt;  // a hash collision
    const std::string winner = j.at("winner").get<std::string>();
    winner_cache()[key] = winner;
    from_disk = true;
    return winner;
  } catch (const std::exception& error) {
    TESSEL_LOG_WARN(fmt::format("matmul: ignoring the unreadable autotune cache file {}: {}", files.path(name), error.what()));
    return std::nullopt;
  }
}

std::string matmul_environment_key(Device device) {
  if (device.is_cpu()) return fmt::format("cpu|openblas|{}", kAutotuneRanking);
  const DeviceProperties& props = device_properties(device.index);
  return fmt::format("{}|sm_{}{}|{}|driver {}|{}", props.name, props.cc_major, props.cc_minor,
                     backend::cuda::matmul_library_version(), driver_version(), kAutotuneRanking);
}

// Times `iterations` runs of every candidate with CUDA events (host clocks on the CPU) on a
// scratch output with D's layout, so the user's out and c are not touched.
void autotune_matmul(MatmulPlanCore& core, const MatmulPrepared& p, int iterations) {
  if (iterations < 1) throw ValueError(fmt::format("MatmulPlan.autotune: iterations must be >= 1, got {}", iterations));
  TESSEL_LOG_INFO(fmt::format("matmul: autotuning {} ({} candidates, {} iterations each)", core.signature,
                              core.candidates.size(), iterations));
  backend::MatmulProblem pr = p.problem;
  // Same strides as D, so that the candidates see the planned layout.
  const std::int64_t span_d = (pr.batch - 1) * pr.batch_stride_d + (pr.m - 1) * pr.ldd + pr.n;
  auto scratch_buffer = Buffer::allocate(p.device, span_d * itemsize(p.out_dtype), p.stream);
  pr.d = scratch_buffer->data();
  std::shared_ptr<Buffer> aux_buffer;
  if (pr.aux) {
    const std::int64_t span = (pr.batch - 1) * pr.batch_stride_aux + (pr.m - 1) * pr.ldaux + pr.n;
    aux_buffer = Buffer::allocate(p.device, span * itemsize(p.out_dtype), p.stream);
    pr.aux = aux_buffer->data();
  }
  // On the CPU too: an input may still be landing from a device copy.
  for (const Array* x : {&p.a, &p.b, &p.bias}) {
    if (x->defined()) x->storage()->wait_on_stream(p.stream);
  }
  // Round-robin timing: each round runs every candidate once, so clock boost, thermal state and
  // other work on the GPU weigh on all candidates alike instead of on the last ones timed.
  const std::size_t count = core.candidates.size();
  auto fail = [&](std::size_t i, const Error& error) {
    MatmulCandidate& c = core.candidates[i];
    c.ok = false;
    c.time_ms = -1;
    c.error = error.what();
    TESSEL_LOG_INFO(fmt::format("matmul:   candidate {:2d} {} failed: {}", i, c.name, c.error));
  };
  // Runs candidate i `runs` times; false (and the candidate marked failed) when it throws.
  auto run_guarded = [&](std::size_t i, int runs) {
    try {
      for (int r = 0; r < runs; ++r) core.run(static_cast<int>(i), pr, p.stream);
      return true;
    } catch (const CudaError& error) {
      if (error.fatal()) throw;
      fail(i, error);
    } catch (const Error& error) {
      fail(i, error);
    }
    return false;
  };
  for (std::size_t i = 0; i < count; ++i) {  // warm-up; also surfaces failures
    core.candidates[i].ok = true;
    core.candidates[i].error.clear();
    core.candidates[i].time_ms = -1;
    core.candidates[i].sustained_ms = -1;
    run_guarded(i, 1);
  }
  // Median milliseconds per run of each candidate in `which`, over `rounds` round-robin rounds in
  // which a sample of candidate i is runs[i] back-to-back runs (-1 where it failed).
  auto median_per_run = [&](const std::vector<std::size_t>& which, int rounds, const std::vector<int>& runs) {
    std::vector<std::vector<double>> samples(count);
    if (p.device.is_cuda()) {
      std::vector<std::vector<std::pair<Event, Event>>> events(count);
      for (int round = 0; round < rounds; ++round) {
        for (std::size_t i : which) {
          if (!core.candidates[i].ok) continue;
          events[i].emplace_back(Event(p.device), Event(p.device));
          events[i].back().first.record(p.stream);
          if (run_guarded(i, runs[i])) events[i].back().second.record(p.stream);
          else events[i].pop_back();
        }
      }
      for (std::size_t i : which) {
        if (!core.candidates[i].ok) continue;
        for (auto& [start, stop] : events[i]) {
          stop.synchronize();
          samples[i].push_back(start.elapsed_ms(stop) / runs[i]);
        }
      }
    } else {
      for (int round = 0; round < rounds; ++round) {
        for (std::size_t i : which) {
          if (!core.candidates[i].ok) continue;
          const auto t0 = std::chrono::steady_clock::now();
          if (run_guarded(i, runs[i])) {
            samples[i].push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / runs[i]);
          }
        }
      }
    }
    std::vector<double> median(count, -1.0);
    for (std::size_t i : which) {
      if (!core.candidates[i].ok || samples[i].empty()) continue;
      std::sort(samples[i].begin(), samples[i].end());
      median[i] = samples[i][samples[i].size() / 2];
    }
    return median;
  };

  // Phase 1: single runs, round robin, so clock boost, thermal state and other work on the GPU
  // weigh on all candidates alike instead of on the last ones timed.
  std::vector<std::size_t> all(count);
  for (std::size_t i = 0; i < count; ++i) all[i] = i;
  const std::vector<double> single = median_per_run(all, iterations, std::vector<int>(count, 1));
  double best = -1;
  for (std::size_t i = 0; i < count; ++i) {
    MatmulCandidate& c = core.candidates[i];
    if (!c.ok || single[i] < 0) continue;
    c.time_ms = single[i];
    if (best < 0 || c.time_ms < best) best = c.time_ms;
    TESSEL_LOG_INFO(fmt::format("matmul:   candidate {:2d} {:32s} {:9.4f} ms (median of {} single runs)", i, c.name,
                                c.time_ms, iterations));
  }

  // Phase 2: the finalists (within kFinalistMargin of the best, at most kMaxFinalists, fastest
  // first) each run back to back for about autotune_sustain_ms(), three rounds, and the best
  // sustained median wins (see autotune_sustain_ms for why).
  constexpr double kFinalistMargin = 1.06;
  constexpr std::size_t kMaxFinalists = 4;
  std::vector<std::size_t> finalists;
  for (std::size_t i = 0; i < count; ++i) {
    if (core.candidates[i].ok && core.candidates[i].time_ms >= 0 && core.candidates[i].time_ms <= best * kFinalistMargin) {
      finalists.push_back(i);
    }
  }
  std::sort(finalists.begin(), finalists.end(),
            [&](std::size_t x, std::size_t y) { return core.candidates[x].time_ms < core.candidates[y].time_ms; });
  if (finalists.size() > kMaxFinalists) finalists.resize(kMaxFinalists);
  const double sustain_ms = autotune_sustain_ms();
  int best_index = -1;
  if (finalists.size() > 1 && sustain_ms > 0) {
    std::vector<int> runs(count, 1);
    for (std::size_t i : finalists) {
      const double per_run = std::max(core.candidates[i].time_ms, 1e-3);
      runs[i] = static_cast<int>(std::clamp(std::ceil(sustain_ms / per_run), 1.0, 1000.0));
    }
    const std::vector<double> sustained = median_per_run(finalists, 3, runs);
    double best_sustained = -1;
    for (std::size_t i : finalists) {
      MatmulCandidate& c = core.candidates[i];
      if (!c.ok || sustained[i] < 0) continue;
      c.sustained_ms = sustained[i];
      TESSEL_LOG_INFO(fmt::format("matmul:   finalist  {:2d} {:32s} {:9.4f} ms back to back ({} runs per sample)", i,
                                  c.name, c.sustained_ms, runs[i]));
      if (best_sustained < 0 || c.sustained_ms < best_sustained) {
        best_sustained = c.sustained_ms;
        best_index = static_cast<int>(i);
      }
    }
  }
  if (best_index < 0) {  // no second phase (or every finalist failed in it): the single-run best
    for (std::size_t i = 0; i < count; ++i) {
      const MatmulCandidate& c = core.candidates[i];
      if (c.ok && c.time_ms >= 0 && (best_index < 0 || c.time_ms < core.candidates[static_cast<std::size_t>(best_index)].time_ms)) {
        best_index = static_cast<int>(i);
      }
    }
  }
  if (best_index < 0) throw Error(fmt::format("matmul: autotune found no candidate that runs for {}", core.signature));
  if (p.device.is_cuda()) scratch_buffer->record_stream(p.stream);
  core.selected = best_index;
  core.from_cache = false;
  const MatmulCandidate& chosen = core.candidates[static_cast<std::size_t>(best_index)];
  TESSEL_LOG_INFO(chosen.sustained_ms >= 0
                      ? fmt::format("matmul: autotune chose {} ({:.4f} ms back to back, {:.4f} ms single)", chosen.name,
                                    chosen.sustained_ms, chosen.time_ms)
                      : fmt::format("matmul: autotune chose {} ({:.4f} ms)", chosen.name, chosen.time_ms));
  store_winner(core.key, core.candidates, core.candidates[best_index].name);
}

void autotune_on_first_use(MatmulPlanCore& core, const MatmulPrepared& p) {
  if (core.first_use_done.load(std::memory_order_acquire) || !config().matmul_autotune) return;
  // The autotune allocates scratch outputs and synchronizes: not inside a graph capture.
  if (p.stream.capturing()) return;
  std::lock_guard<std::mutex> lock(core.tune_mutex);
  if (core.first_use_done.load(std::memory_order_relaxed)) return;
  if (!core.from_cache && core.candidates.size() > 1) autotune_matmul(core, p, 10);
  core.first_use_done.store(true, std::memory_order_release);
}

void clear_matmul_winner_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  winner_cache().clear();
}

}  // namespace detail
}  // namespace tessel

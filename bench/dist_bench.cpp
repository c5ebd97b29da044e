// tessel::dist, into bench/results/<device>-<date>.json under "dist" (rank 0 writes). Run it under
// the launcher, one rank per GPU: `mpirun -np 2 build/bench/dist_bench` (TESSEL_FORCE_CPU=1 for
// the CPU path). On one GPU, or alone, it runs and reports as one rank.
//
// 1. all_reduce bus bandwidth, float32 sum, 8 B to 1 GiB (--max-bytes to stop earlier): each size
//    is checked first (every rank contributes rank + 1, so every element must be n(n+1)/2), then
//    timed with profile::time_on_stream (warm-up, then the median of back-to-back calls on rank
//    0). Bus bandwidth is nccl-tests' convention: bytes / time * 2(n-1)/n.
// 2. On the CPU path: the 64 MiB all_reduce through tessel against a raw MPI_Allreduce on the
//    same buffer, in the same run. The two take turns round by round (the order swapped every
//    round), each after a barrier, host-timed; the result is the median of the per-round ratios
//    tessel / MPI (the target: <= 1.10). The peer for the GPU path is torch.distributed
//    (NCCL), measured by the multi-GPU issue's run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_results.hpp"
#include "tessel/tessel.hpp"

#if TESSEL_BENCH_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

using namespace tessel;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "dist_bench: FAILED: %s\n", what.c_str());
  std::exit(1);
}

// Every rank contributes rank + 1; every element of the result must be n(n+1)/2.
void check_sum(const Array& x, int n) {
  const float want = static_cast<float>(n * (n + 1) / 2);
  const std::int64_t last = x.size() - 1;
  for (std::int64_t i : {std::int64_t{0}, last / 2, last}) {
    const float got = x.slice(0, Slice(i, i + 1)).item<float>();
    if (got != want) fail("all_reduce of " + std::to_string(x.nbytes()) + " B: element " + std::to_string(i) + " is " +
                          std::to_string(got) + ", expected " + std::to_string(want));
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t max_bytes = std::int64_t{1} << 30;
  int rounds = 41;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--max-bytes" && i + 1 < argc) {
      max_bytes = std::atoll(argv[++i]);
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: dist_bench [--max-bytes N] [--rounds N]\n");
      return 2;
    }
  }
  dist::init();
  const int rank = dist::rank();
  const int n = dist::world_size();
  const Device device = dist::local_device();
  const dist::Communicator& world = dist::world();
  const Stream stream = device.is_cuda() ? current_stream(device) : Stream::cpu();
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  if (rank == 0) {
    std::printf("dist_bench: %d rank%s on %s (%s)\n", n, n == 1 ? "" : "s", device.str().c_str(),
                device.is_cuda() ? "NCCL" : "MPI");
    std::printf("%12s %12s %12s %12s\n", "bytes", "time us", "algbw GB/s", "busbw GB/s");
  }

  nlohmann::json sweep = nlohmann::json::array();
  for (std::int64_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
    const std::int64_t count = bytes / 4;
    Array x = full({count}, Scalar(rank + 1), DType::float32, device);
    world.all_reduce(x);
    check_sum(x, n);
    const bool big = bytes >= (std::int64_t{64} << 20);
    world.barrier();
    const profile::Timing t = profile::time_on_stream([&] { world.all_reduce(x); }, stream,
                                                      {big ? 1 : 3, big ? 5 : 25});
    const double seconds = t.median_ms / 1e3;
    const double algbw = static_cast<double>(bytes) / seconds / 1e9;
    if (rank == 0) {
      std::printf("%12lld %12.2f %12.3f %12.3f\n", static_cast<long long>(bytes), t.median_ms * 1e3, algbw,
                  algbw * bus_factor);
      std::fflush(stdout);
    }
    sweep.push_back({{"bytes", bytes}, {"median_us", t.median_ms * 1e3}, {"min_us", t.min_ms * 1e3},
                     {"repeats", t.repeats}, {"algbw_GBps", algbw}, {"busbw_GBps", algbw * bus_factor}});
    if (bytes == max_bytes) break;
    if (bytes * 8 > max_bytes) bytes = max_bytes / 8;  // the last step lands on max_bytes
  }

  nlohmann::json results = {{"world_size", n},
                            {"device", device.str()},
                            {"transport", device.is_cuda() ? "nccl" : "mpi"},
                            {"dtype", "float32"},
                            {"op", "sum"},
                            {"all_reduce_sweep", sweep}};

#if TESSEL_BENCH_HAVE_MPI
  if (device.is_cpu()) {
    const std::int64_t bytes = std::int64_t{64} << 20;
    const std::int64_t count = bytes / 4;
    Array x = full({count}, Scalar(rank + 1), DType::float32, device);
    world.all_reduce(x);
    check_sum(x, n);
    auto run_tessel = [&] {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      world.all_reduce(x);
      return seconds_since(start);
    };
    auto run_mpi = [&] {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return seconds_since(start);
    };
    run_tessel();  // warm-up: both paths' buffers and algorithms
    run_mpi();
    std::vector<double> tessel_s, mpi_s, ratios;
    for (int r = 0; r < rounds; ++r) {
      fill(x, Scalar(1.0f));  // keeps the sums finite over the rounds
      double t = 0, m = 0;
      if (r % 2 == 0) {
        t = run_tessel();
        m = run_mpi();
      } else {
        m = run_mpi();
        t = run_tessel();
      }
      // The slowest rank's time is the collective's time.
      double both[2] = {t, m};
      MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      tessel_s.push_back(both[0]);
      mpi_s.push_back(both[1]);
      ratios.push_back(both[0] / both[1]);
    }
    const double ratio = bench::median(ratios);
    const double tessel_ms = bench::median(tessel_s) * 1e3;
    const double mpi_ms = bench::median(mpi_s) * 1e3;
    if (rank == 0) {
      std::printf("64 MiB all_reduce: tessel %.3f ms, MPI_Allreduce %.3f ms, ratio %.3f (target <= 1.10: %s)\n",
                  tessel_ms, mpi_ms, ratio, ratio <= 1.10 ? "met" : "NOT met");
    }
    results["cpu_64MiB_vs_MPI_Allreduce"] = {{"bytes", bytes},
                                             {"rounds", rounds},
                                             {"tessel_median_ms", tessel_ms},
                                             {"mpi_median_ms", mpi_ms},
                                             {"median_ratio_tessel_over_mpi", ratio},
                                             {"target_ratio", 1.10},
                                             {"met", ratio <= 1.10}};
  }
#endif

  if (rank == 0) {
    const std::string path = bench::write_results("dist_np" + std::to_string(n), results);
    std::printf("dist_bench: wrote %s\n", path.c_str());
  }
  dist::finalize();
  return 0;
}

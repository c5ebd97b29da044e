// The CPU backend's one thread setting (tessel::num_threads(), backend/cpu/threads.hpp): loop sizes,
// nesting, and the BLAS following it without running beside OpenMP's threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backend/cpu/blas_threads.hpp"
#include "backend/cpu/threads.hpp"
#include "tessel/array/array.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/ops/reduce.hpp"

using namespace tessel;
namespace cpu = tessel::backend::cpu;

namespace {

class Threads : public ::testing::Test {
 protected:
  void SetUp() override { before_ = num_threads(); }
  void TearDown() override { set_num_threads(before_); }
  int before_ = 1;
};

TEST_F(Threads, LoopThreadsFollowTheSettingAndTheWork) {
  set_num_threads(4);
  EXPECT_EQ(cpu::loop_threads(1 << 30, cpu::kMinElementsPerThread), 4);
  EXPECT_EQ(cpu::loop_threads(3 * cpu::kMinElementsPerThread, cpu::kMinElementsPerThread), 3);
  EXPECT_EQ(cpu::loop_threads(2 * cpu::kMinElementsPerThread - 1, cpu::kMinElementsPerThread), 1);
  set_num_threads(1);
  EXPECT_EQ(cpu::loop_threads(1 << 30, cpu::kMinElementsPerThread), 1);
  set_num_threads(2);
  // Inside a region: the calling thread only.
  int inside = -1;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    inside = cpu::loop_threads(1 << 30, 1);
  }
  EXPECT_EQ(inside, 1);
}

// The same bits on one thread and two: every element takes one loop whatever the share it falls
// in, and a full sum adds fixed blocks in order.
TEST_F(Threads, ResultsDoNotDependOnTheThreadCount) {
  const Array a = arange(0, 1 << 22, 1, DType::float32, Device::cpu());
  set_num_threads(1);
  const std::vector<float> one = exp(a * Scalar(1e-6)).to_vector<float>();
  const double sum_one = sum(a * Scalar(0.1)).item<double>();
  set_num_threads(2);
  const std::vector<float> two = exp(a * Scalar(1e-6)).to_vector<float>();
  EXPECT_EQ(one, two);
  EXPECT_EQ(sum(a * Scalar(0.1)).item<double>(), sum_one);
}

// tessel's CPU workers: every piece exactly once, from any number of calling threads at once,
// nested calls on the calling thread, the first exception rethrown.
TEST_F(Threads, RunPiecesTakesEveryPieceOnce) {
  set_num_threads(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(1000);
    cpu::parallel_pieces(1000, 3, [&](std::int64_t p) { hits[static_cast<std::size_t>(p)].fetch_add(1); });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  // Callers on several threads: one holds the workers, the others run alone; all complete.
  std::vector<std::thread> callers;
  std::atomic<std::int64_t> total{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        cpu::parallel_pieces(64, 3, [&](std::int64_t p) { total.fetch_add(p); });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 20 * (63 * 64 / 2));
  // Nested: inside a piece every loop runs on its own thread.
  std::atomic<int> nested_threads{0};
  cpu::parallel_pieces(4, 2, [&](std::int64_t) {
    EXPECT_TRUE(cpu::in_parallel_pieces());
    EXPECT_EQ(cpu::loop_threads(1 << 30, 1), 1);
    cpu::parallel_pieces(8, 2, [&](std::int64_t) { nested_threads.fetch_add(1); });
  });
  EXPECT_EQ(nested_threads.load(), 32);
  EXPECT_FALSE(cpu::in_parallel_pieces());
  // The first exception reaches the caller; the pool stays usable.
  EXPECT_THROW(cpu::parallel_pieces(100, 2, [&](std::int64_t p) {
                 if (p == 7) throw ValueError("piece 7");
               }),
               ValueError);
  std::atomic<int> after{0};
  cpu::parallel_pieces(10, 2, [&](std::int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 10);
}

TEST_F(Threads, BlasFollowsTheSettingAndIsSerialInsideRegions) {
  const Array a = ones({256, 256}, DType::float64, Device::cpu());
  set_num_threads(1);
  (void)matmul(a, a);
  EXPECT_EQ(cpu::blas_num_threads(), 1);
  set_num_threads(2);
  (void)matmul(a, a);
  EXPECT_EQ(cpu::blas_num_threads(), 2);
  {
    cpu::BlasSerialRegion serial;
    EXPECT_EQ(cpu::blas_num_threads(), 1);
    {
      cpu::BlasSerialRegion nested;
      EXPECT_EQ(cpu::blas_num_threads(), 1);
    }
    EXPECT_EQ(cpu::blas_num_threads(), 1);
    cpu::use_blas_threads();  // outside a region, but a serial region is open: stays serial
    EXPECT_EQ(cpu::blas_num_threads(), 1);
  }
  EXPECT_EQ(cpu::blas_num_threads(), 2);
  // A batch of small products runs one per OpenMP thread: the BLAS is back at 2 afterwards.
  const Array batch = ones({64, 16, 16}, DType::float64, Device::cpu());
  const Array product = matmul(batch, batch);
  EXPECT_EQ(product.to_vector<double>()[0], 16.0);
  EXPECT_EQ(cpu::blas_num_threads(), 2);
  const std::string threading = cpu::blas_threading();
  EXPECT_TRUE(threading == "pthreads" || threading == "openmp" || threading == "sequential") << threading;
}

}  // namespace

// tessel::dist on the CPU backend (MPI). ctest runs this binary whole under mpirun -np 1, 2 and 4
// (dist.mpirun_np*) and each test alone as an MPI singleton. Every rank's input is a function of
// (seed, rank), with the seed broadcast from rank 0, so each rank computes every collective's
// expected result itself, in complex<double>, from all ranks' inputs.
//
// The tests that need no initialized runtime come first: gtest runs a file's tests in order, so in
// the whole-binary runs they see the process before init().
#include <gtest/gtest.h>

#include <chrono>
#include <complex>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testing.hpp"
#include "tessel/dist/dist.hpp"
#include "tessel/ops/cast.hpp"

namespace dist = tessel::dist;
using tessel::Array;
using tessel::Device;
using tessel::DType;
using tessel::Shape;
using tessel::testing::expect_error;
using cd = std::complex<double>;

namespace {

// Sets or unsets environment variables for a scope and restores them.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    remember(name);
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, old] : saved_) {
      if (old.first) {
        setenv(name.c_str(), old.second.c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  void remember(const char* name) {
    if (saved_.count(name) != 0) return;
    const char* old = std::getenv(name);
    saved_[name] = {old != nullptr, old != nullptr ? old : ""};
  }
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

dist::detail::Getenv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

// ---------------- before init ----------------

TEST(DistBeforeInit, CallsRaiseNamingInit) {
  if (dist::is_initialized()) GTEST_SKIP() << "an earlier test of this process initialized tessel.distributed";
  expect_error<tessel::Error>([] { dist::world(); }, {"world", "before tessel.distributed.init()"});
  expect_error<tessel::Error>([] { dist::rank(); }, {"rank", "before tessel.distributed.init()"});
  expect_error<tessel::Error>([] { dist::local_device(); }, {"local_device", "before"});
  const Array x = tessel::zeros({3}, DType::float32, Device::cpu());
  expect_error<tessel::Error>([&] { dist::Communicator().all_reduce(x); }, {"all_reduce", "before tessel.distributed.init()"});
  expect_error<tessel::Error>([&] { dist::Communicator().barrier(); }, {"barrier", "before"});
}

TEST(DistBeforeInit, TorchrunLaunchFromCppSaysWhatItNeeds) {
  if (dist::is_initialized()) GTEST_SKIP() << "an earlier test of this process initialized tessel.distributed";
  ScopedEnv env;
  // Hide the MPI launcher (restored before anything starts MPI) and look like torchrun.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) env.set(name, nullptr);
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "1");
  env.set("LOCAL_RANK", "0");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  expect_error<tessel::Error>([] { dist::init(); }, {"torchrun", "torch.distributed's store", "mpirun"});
  env.set("MASTER_PORT", nullptr);
  env.set("LOCAL_RANK", nullptr);
  expect_error<tessel::Error>([] { dist::init(); }, {"torchrun", "lacks LOCAL_RANK, MASTER_PORT"});
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistBeforeInit, LaunchedRanksAreCheckedBeforeAnyExchange) {
  if (dist::is_initialized()) GTEST_SKIP() << "an earlier test of this process initialized tessel.distributed";
  using dist::detail::check_launch;
  expect_error<tessel::ValueError>([] { check_launch(2, 2, 0, 1, std::nullopt); },
                                   {"tessel.distributed.init", "rank 2 of world size 2", "RANK and WORLD_SIZE"});
  expect_error<tessel::ValueError>([] { check_launch(0, 0, 0, 1, std::nullopt); }, {"rank 0 of world size 0"});
  expect_error<tessel::ValueError>([] { check_launch(1, 2, 1, 1, std::nullopt); },
                                   {"local rank 1 of local size 1 in a world of 2", "LOCAL_WORLD_SIZE"});
  expect_error<tessel::ValueError>([] { check_launch(0, 2, 0, 3, std::nullopt); }, {"local size 3 in a world of 2"});
  // The CPU collectives need MPI, which such a launch did not start.
  expect_error<tessel::Error>([] { check_launch(1, 2, 1, 2, Device::cpu()); },
                              {"rank 1 of 2 would run on the CPU", "MPI", "mpirun -np 2", "CUDA devices"});
  expect_error<tessel::Error>([] { dist::init_from_launch(0, 1, 0, 1, Device::cpu(), ""); }, {"on the CPU", "mpirun"});
#if TESSEL_HAVE_CUDA
  // More ranks on this node than it has GPUs.
  if (tessel::device_count() < 2) {
    expect_error<tessel::DeviceError>([] { check_launch(1, 2, 1, 2, Device::cuda(1)); },
                                      {"2 ranks on node", tessel::device_count() == 1 ? "1 GPU" : "0 GPUs"});
  }
#else
  expect_error<tessel::DeviceError>([] { check_launch(0, 1, 0, 1, Device::cuda(0)); }, {"cuda:0 needs CUDA"});
#endif
  if (tessel::cuda_available()) {
    EXPECT_EQ(check_launch(0, 1, 0, 1, std::nullopt), Device::cuda(0));
    expect_error<tessel::ValueError>([] { dist::init_from_launch(0, 1, 0, 1, Device::cuda(0), "abc"); },
                                     {"NCCL unique id has 3 bytes, expected 128"});
  }
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistLauncher, DetectsEachLauncherAndNamesMissingVariables) {
  using dist::detail::Launcher;
  using dist::detail::detect_launcher;
  EXPECT_EQ(detect_launcher(env_of({})).launcher, Launcher::none);
  const auto ompi = detect_launcher(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"RANK", "0"}}));
  EXPECT_EQ(ompi.launcher, Launcher::mpi);  // MPI's variables win over stray torchrun ones
  EXPECT_EQ(ompi.name, "mpirun");
  EXPECT_EQ(detect_launcher(env_of({{"PMIX_RANK", "0"}})).launcher, Launcher::mpi);
  const auto slurm = detect_launcher(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(slurm.launcher, Launcher::mpi);
  EXPECT_EQ(slurm.name, "srun");
  const auto torchrun = detect_launcher(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                                {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}));
  EXPECT_EQ(torchrun.launcher, Launcher::torchrun);

  expect_error<tessel::Error>([] { detect_launcher(env_of({{"RANK", "0"}})); },
                              {"torchrun", "lacks WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT"});
  expect_error<tessel::Error>([] { detect_launcher(env_of({{"LOCAL_RANK", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}})); },
                              {"lacks MASTER_ADDR, MASTER_PORT"});
  expect_error<tessel::Error>([] { detect_launcher(env_of({{"SLURM_PROCID", "0"}})); },
                              {"Slurm", "lacks SLURM_NTASKS, SLURM_LOCALID", "srun"});
  expect_error<tessel::Error>([] { detect_launcher(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}})); },
                              {"Open MPI", "lacks OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK"});
}

TEST(DistChecks, MoreRanksThanGpusOnANode) {
  using dist::detail::check_ranks_fit_devices;
  EXPECT_NO_THROW(check_ranks_fit_devices(0, 1, 1, "node-a"));
  EXPECT_NO_THROW(check_ranks_fit_devices(3, 4, 8, "node-a"));
  expect_error<tessel::DeviceError>([] { check_ranks_fit_devices(1, 2, 1, "node-a"); },
                                    {"2 ranks on node 'node-a'", "1 GPU", "local rank 1", "TESSEL_FORCE_CPU"});
  expect_error<tessel::DeviceError>([] { check_ranks_fit_devices(0, 3, 0, "gpuless"); }, {"3 ranks", "0 GPUs"});
}

TEST(DistChecks, ArrayOnAnotherDeviceThanTheCommunicator) {
  const Array x = tessel::zeros({2, 3}, DType::float32, Device::cpu());
  EXPECT_NO_THROW(dist::detail::check_array_device("all_reduce", x, Device::cpu()));
  expect_error<tessel::DeviceError>([&] { dist::detail::check_array_device("all_reduce", x, Device::cuda(1)); },
                                    {"tessel.distributed.all_reduce", "array is on cpu", "communicator's device is cuda:1"});
}

TEST(DistChecks, SingleProcessCommunicatorsNeedCudaDevices) {
  expect_error<tessel::DeviceError>([] { dist::init_devices({Device::cpu()}); },
                                    {"tessel.distributed.init_devices", "cpu"});
}

TEST(DistChecks, ReduceOpNamesAndTimeoutSetting) {
  EXPECT_EQ(dist::parse_reduce_op("avg"), dist::ReduceOp::avg);
  EXPECT_STREQ(dist::reduce_op_name(dist::ReduceOp::prod), "prod");
  expect_error<tessel::ValueError>([] { dist::parse_reduce_op("mean"); }, {"unknown reduce op 'mean'", "sum, prod, min, max, avg"});
  ScopedEnv env;
  env.set("TESSEL_DIST_TIMEOUT_S", nullptr);
  EXPECT_EQ(dist::detail::timeout_seconds(), 600.0);
  env.set("TESSEL_DIST_TIMEOUT_S", "2.5");
  EXPECT_EQ(dist::detail::timeout_seconds(), 2.5);
  env.set("TESSEL_DIST_TIMEOUT_S", "soon");
  expect_error<tessel::ValueError>([] { dist::detail::timeout_seconds(); }, {"TESSEL_DIST_TIMEOUT_S", "'soon'"});
  env.set("TESSEL_DIST_TIMEOUT_S", "-1");
  expect_error<tessel::ValueError>([] { dist::detail::timeout_seconds(); }, {"TESSEL_DIST_TIMEOUT_S"});
}

TEST(DistChecks, BuiltWithMpiMatchesTheBuild) {
#if TESSEL_TEST_HAVE_MPI
  EXPECT_TRUE(dist::built_with_mpi());
#else
  EXPECT_FALSE(dist::built_with_mpi());
  expect_error<tessel::Error>([] { dist::init(); }, {"built without MPI", "libopenmpi-dev"});
#endif
}

// ---------------- initialized ----------------

#if TESSEL_TEST_HAVE_MPI

namespace {

void ensure_init() {
  if (!dist::is_initialized()) dist::init(Device::cpu());
}

// rank 0's seed, on every rank.
std::uint64_t shared_seed() {
  std::int64_t seed = static_cast<std::int64_t>(tessel::testing::test_seed() & 0x7fffffffffffffffULL);
  Array word = tessel::full({1}, tessel::Scalar(seed), DType::int64, Device::cpu());
  dist::world().broadcast(word, 0);
  return static_cast<std::uint64_t>(word.to_vector<std::int64_t>()[0]);
}

std::vector<DType> dtypes() { return tessel::testing::all_dtypes(); }

bool is_float(DType d) { return tessel::dtype_info(d).kind == tessel::DTypeKind::floating; }
bool is_unsigned(DType d) { return tessel::dtype_info(d).kind == tessel::DTypeKind::unsigned_int; }

// Rank r's input: small values exact in every dtype, so sums and products of up to 4 ranks are
// exact (multiples of 1/4 in [-3, 3] for floats; integers in [-3, 3], [0, 3], {0, 1}).
std::vector<cd> input_values(std::uint64_t seed, int rank, std::int64_t n, DType dtype, int salt = 0) {
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<std::uint64_t>(rank) * 7919ULL + static_cast<std::uint64_t>(salt));
  std::vector<cd> values(static_cast<std::size_t>(n));
  for (auto& v : values) {
    if (dtype == DType::bool_) {
      v = static_cast<double>(rng() % 2);
    } else if (is_unsigned(dtype)) {
      v = static_cast<double>(rng() % 4);
    } else if (is_float(dtype) || tessel::is_complex(dtype)) {
      const double re = (static_cast<double>(rng() % 25) - 12) / 4.0;
      const double im = tessel::is_complex(dtype) ? (static_cast<double>(rng() % 25) - 12) / 4.0 : 0.0;
      v = cd(re, im);
    } else {
      v = static_cast<double>(static_cast<int>(rng() % 7) - 3);
    }
  }
  return values;
}

Array make_array(const std::vector<cd>& values, const Shape& shape, DType dtype) {
  return tessel::astype(tessel::from_vector(values, shape, Device::cpu()), dtype);
}

std::vector<cd> read(const Array& x) {
  return tessel::astype(x, DType::complex128).to_vector<cd>();
}

cd combine(dist::ReduceOp op, DType dtype, cd a, cd b) {
  if (dtype == DType::bool_) {
    const bool x = a != 0.0, y = b != 0.0;
    return (op == dist::ReduceOp::sum || op == dist::ReduceOp::max) ? (x || y) : (x && y);
  }
  switch (op) {
    case dist::ReduceOp::sum: case dist::ReduceOp::avg: return a + b;
    case dist::ReduceOp::prod: return a * b;
    case dist::ReduceOp::min: return a.real() < b.real() ? a : b;
    case dist::ReduceOp::max: return a.real() > b.real() ? a : b;
  }
  return a;
}

// op over ranks of rank_values[r][i].
std::vector<cd> reference_reduce(const std::vector<std::vector<cd>>& rank_values, dist::ReduceOp op, DType dtype) {
  std::vector<cd> result = rank_values[0];
  for (std::size_t r = 1; r < rank_values.size(); ++r) {
    for (std::size_t i = 0; i < result.size(); ++i) result[i] = combine(op, dtype, result[i], rank_values[r][i]);
  }
  if (op == dist::ReduceOp::avg) {
    for (auto& v : result) v /= static_cast<double>(rank_values.size());
  }
  return result;
}

// float16/bfloat16 round the exact values; the rest hold them exactly.
double tolerance(DType dtype) {
  if (dtype == DType::bfloat16) return 0.02;
  if (dtype == DType::float16) return 2e-3;
  return 1e-12;
}

void expect_values(const std::vector<cd>& got, const std::vector<cd>& want, DType dtype, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(1.0, std::abs(want[i]));
    EXPECT_LE(std::abs(got[i] - want[i]), tolerance(dtype) * scale)
        << what << " element " << i << ": got " << got[i] << ", want " << want[i] << " (" << tessel::dtype_name(dtype)
        << ", rank " << dist::rank() << " of " << dist::world_size() << ")";
  }
}

bool op_applies(dist::ReduceOp op, DType dtype) {
  if (op == dist::ReduceOp::avg) return is_float(dtype) || tessel::is_complex(dtype);
  if (op == dist::ReduceOp::min || op == dist::ReduceOp::max) return !tessel::is_complex(dtype);
  return true;
}

const std::vector<dist::ReduceOp> kOps = {dist::ReduceOp::sum, dist::ReduceOp::prod, dist::ReduceOp::min,
                                          dist::ReduceOp::max, dist::ReduceOp::avg};

// The layouts each collective is checked on: contiguous, 0-d, zero-size, and a non-contiguous
// view (every other column of a transposed block) written through in place.
struct Layout {
  const char* name;
  Shape shape;
  bool strided;
};
const std::vector<Layout> kLayouts = {{"contiguous (5, 3)", {5, 3}, false},
                                      {"0-d", {}, false},
                                      {"zero-size (0, 4)", {0, 4}, false},
                                      {"strided (3, 4) view", {3, 4}, true}};

// An array of `layout` holding `values` (C order); strided layouts are a view into a bigger,
// poisoned block, returned with that block so the test can check what lies outside the view.
struct Placed {
  Array view;
  Array base;
};
Placed place(const std::vector<cd>& values, const Layout& layout, DType dtype) {
  if (!layout.strided) {
    Array a = make_array(values, layout.shape, dtype);
    return {a, a};
  }
  // base (8, 3) -> transpose (3, 8) -> every other column (3, 4): strides (1, 6).
  std::vector<cd> poison(24, cd(2.0, 0.0));
  Array base = make_array(poison, {8, 3}, dtype);
  Array view = base.T().slice(1, tessel::Slice(0, tessel::none, 2));
  EXPECT_FALSE(view.is_contiguous());
  tessel::copyto(view, make_array(values, layout.shape, dtype));
  return {view, base};
}

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

class DistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ensure_init();
    seed_ = shared_seed();
    rank_ = dist::rank();
    size_ = dist::world_size();
  }
  std::vector<std::vector<cd>> all_inputs(std::int64_t n, DType dtype, int salt = 0) const {
    std::vector<std::vector<cd>> all;
    for (int r = 0; r < size_; ++r) all.push_back(input_values(seed_, r, n, dtype, salt));
    return all;
  }
  std::uint64_t seed_ = 0;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

TEST_F(DistTest, RuntimeQueries) {
  EXPECT_GE(rank_, 0);
  EXPECT_LT(rank_, size_);
  EXPECT_GE(dist::local_rank(), 0);
  EXPECT_LT(dist::local_rank(), dist::local_size());
  EXPECT_LE(dist::local_size(), size_);
  EXPECT_EQ(dist::local_device(), Device::cpu());
  EXPECT_EQ(dist::world().rank(), rank_);
  EXPECT_EQ(dist::world().size(), size_);
  EXPECT_EQ(dist::world().device(), Device::cpu());
  if (const char* np = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(size_, std::atoi(np));
  }
}

TEST_F(DistTest, InitTwiceIsAnError) {
  expect_error<tessel::Error>([] { dist::init(); }, {"init", "already initialized", "once per process"});
  expect_error<tessel::Error>([] { dist::init_from_launch(0, 1, 0, 1, Device::cpu(), ""); }, {"already initialized"});
  expect_error<tessel::Error>([] { dist::detail::check_launch(0, 1, 0, 1, std::nullopt); }, {"already initialized"});
}

TEST_F(DistTest, AllReduceEveryOpDtypeAndLayout) {
  for (DType dtype : dtypes()) {
    for (dist::ReduceOp op : kOps) {
      if (!op_applies(op, dtype)) continue;
      for (const Layout& layout : kLayouts) {
        const std::int64_t n = numel(layout.shape);
        const auto inputs = all_inputs(n, dtype);
        Placed x = place(inputs[static_cast<std::size_t>(rank_)], layout, dtype);
        dist::world().all_reduce(x.view, op);
        const std::string what = std::string("all_reduce ") + dist::reduce_op_name(op) + " " + layout.name;
        expect_values(read(x.view), read(make_array(reference_reduce(inputs, op, dtype), layout.shape, dtype)), dtype, what);
        if (layout.strided) {
          // The elements of the block outside the view keep their poison.
          const auto base = read(x.base.T().slice(1, tessel::Slice(1, tessel::none, 2)));
          const cd poison = read(make_array({cd(2.0)}, {1}, dtype))[0];  // true for bool
          for (const cd& v : base) EXPECT_EQ(v, poison) << what << ": wrote outside the view";
        }
      }
    }
  }
}

TEST_F(DistTest, UnsupportedReductionsAreDTypeErrors) {
  const Array i = tessel::zeros({3}, DType::int32, Device::cpu());
  const Array c = tessel::zeros({3}, DType::complex64, Device::cpu());
  expect_error<tessel::DTypeError>([&] { dist::world().all_reduce(i, dist::ReduceOp::avg); },
                                   {"all_reduce", "avg", "floating or complex", "int32"});
  expect_error<tessel::DTypeError>([&] { dist::world().all_reduce(c, dist::ReduceOp::max); },
                                   {"all_reduce", "max", "complex64"});
  expect_error<tessel::DTypeError>([&] { dist::world().reduce(c, 0, dist::ReduceOp::min); }, {"reduce", "min"});
}

TEST_F(DistTest, BroadcastFromEveryRoot) {
  for (DType dtype : dtypes()) {
    for (const Layout& layout : kLayouts) {
      for (int root = 0; root < size_; ++root) {
        const auto inputs = all_inputs(numel(layout.shape), dtype, root);
        Placed x = place(inputs[static_cast<std::size_t>(rank_)], layout, dtype);
        dist::world().broadcast(x.view, root);
        expect_values(read(x.view), read(make_array(inputs[static_cast<std::size_t>(root)], layout.shape, dtype)), dtype,
                      std::string("broadcast from ") + std::to_string(root) + " " + layout.name);
      }
    }
  }
  const Array x = tessel::zeros({2}, DType::float32, Device::cpu());
  expect_error<tessel::ValueError>([&] { dist::world().broadcast(x, size_); },
                                   {"broadcast", "root " + std::to_string(size_), "outside the communicator's ranks"});
  expect_error<tessel::ValueError>([&] { dist::world().broadcast(x, -1); }, {"broadcast", "root -1"});
}

TEST_F(DistTest, ReduceToEveryRoot) {
  for (DType dtype : dtypes()) {
    for (dist::ReduceOp op : kOps) {
      if (!op_applies(op, dtype)) continue;
      for (const Layout& layout : kLayouts) {
        const int root = size_ - 1;
        const auto inputs = all_inputs(numel(layout.shape), dtype);
        Placed x = place(inputs[static_cast<std::size_t>(rank_)], layout, dtype);
        dist::world().reduce(x.view, root, op);
        // The root holds the reduction; the others keep their input.
        const auto want = rank_ == root ? reference_reduce(inputs, op, dtype) : inputs[static_cast<std::size_t>(rank_)];
        expect_values(read(x.view), read(make_array(want, layout.shape, dtype)), dtype,
                      std::string("reduce ") + dist::reduce_op_name(op) + " " + layout.name);
      }
    }
  }
}

TEST_F(DistTest, AllGather) {
  for (DType dtype : dtypes()) {
    for (const Layout& layout : kLayouts) {
      const std::int64_t n = numel(layout.shape);
      const auto inputs = all_inputs(n, dtype);
      Placed in = place(inputs[static_cast<std::size_t>(rank_)], layout, dtype);
      Shape out_shape{size_};
      out_shape.insert(out_shape.end(), layout.shape.begin(), layout.shape.end());
      // A non-contiguous output too: the transposed view of a (..., size) block.
      Array out = layout.strided ? tessel::full({layout.shape[1], layout.shape[0], size_}, tessel::Scalar(2), dtype, Device::cpu()).T()
                                 : tessel::full(out_shape, tessel::Scalar(2), dtype, Device::cpu());
      dist::world().all_gather(out, in.view);
      std::vector<cd> want;
      for (const auto& v : inputs) want.insert(want.end(), v.begin(), v.end());
      expect_values(read(out), read(make_array(want, out_shape, dtype)), dtype, std::string("all_gather ") + layout.name);
    }
  }
  const Array in = tessel::zeros({3}, DType::float32, Device::cpu());
  const Array bad = tessel::zeros({size_ + 1, 3}, DType::float32, Device::cpu());
  expect_error<tessel::ShapeError>([&] { dist::world().all_gather(bad, in); },
                                   {"all_gather", "(" + std::to_string(size_ + 1) + ", 3)", "expected (" + std::to_string(size_) + ", 3)"});
  const Array other = tessel::zeros({size_, 3}, DType::float64, Device::cpu());
  expect_error<tessel::DTypeError>([&] { dist::world().all_gather(other, in); }, {"all_gather", "float32", "float64"});
}

TEST_F(DistTest, ReduceScatter) {
  for (DType dtype : dtypes()) {
    for (dist::ReduceOp op : kOps) {
      if (!op_applies(op, dtype)) continue;
      for (const Layout& layout : kLayouts) {
        if (layout.strided) continue;  // the strided case below
        const std::int64_t block = numel(layout.shape);
        const auto inputs = all_inputs(block * size_, dtype);
        Shape in_shape{size_};
        in_shape.insert(in_shape.end(), layout.shape.begin(), layout.shape.end());
        const Array in = make_array(inputs[static_cast<std::size_t>(rank_)], in_shape, dtype);
        Array out = tessel::full(layout.shape, tessel::Scalar(2), dtype, Device::cpu());
        dist::world().reduce_scatter(out, in, op);
        std::vector<std::vector<cd>> blocks;
        for (const auto& v : inputs) {
          blocks.emplace_back(v.begin() + block * rank_, v.begin() + block * (rank_ + 1));
        }
        expect_values(read(out), read(make_array(reference_reduce(blocks, op, dtype), layout.shape, dtype)), dtype,
                      std::string("reduce_scatter ") + dist::reduce_op_name(op) + " " + layout.name);
      }
    }
  }
  // Non-contiguous input and output (float64, sum).
  const auto inputs = all_inputs(size_ * 6, DType::float64);
  // (size, 6): every other column of a (size, 12) block.
  std::vector<cd> wide(static_cast<std::size_t>(size_ * 12), cd(7.0));
  for (std::size_t i = 0; i < static_cast<std::size_t>(size_ * 6); ++i) wide[2 * i] = inputs[static_cast<std::size_t>(rank_)][i];
  const Array in = make_array(wide, {size_, 12}, DType::float64).slice(1, tessel::Slice(0, tessel::none, 2));
  ASSERT_FALSE(in.is_contiguous());
  Array out_base = tessel::zeros({12}, DType::float64, Device::cpu());
  Array out = out_base.slice(0, tessel::Slice(0, tessel::none, 2));
  dist::world().reduce_scatter(out, in);
  std::vector<std::vector<cd>> blocks;
  for (const auto& v : inputs) blocks.emplace_back(v.begin() + 6 * rank_, v.begin() + 6 * (rank_ + 1));
  expect_values(read(out), reference_reduce(blocks, dist::ReduceOp::sum, DType::float64), DType::float64,
                "reduce_scatter strided");
  const Array bad_in = tessel::zeros({size_, 5}, DType::float64, Device::cpu());
  expect_error<tessel::ShapeError>([&] { dist::world().reduce_scatter(tessel::zeros({6}, DType::float64, Device::cpu()), bad_in); },
                                   {"reduce_scatter", "(" + std::to_string(size_) + ", 5)", "(6,)"});
}

TEST_F(DistTest, AllToAll) {
  for (DType dtype : dtypes()) {
    for (std::int64_t chunk : {std::int64_t{3}, std::int64_t{0}}) {
      const auto inputs = all_inputs(size_ * chunk, dtype);
      const Array in = make_array(inputs[static_cast<std::size_t>(rank_)], {size_, chunk}, dtype);
      Array out = tessel::full({size_, chunk}, tessel::Scalar(2), dtype, Device::cpu());
      dist::world().all_to_all(out, in);
      std::vector<cd> want;
      for (int r = 0; r < size_; ++r) {
        const auto& v = inputs[static_cast<std::size_t>(r)];
        want.insert(want.end(), v.begin() + chunk * rank_, v.begin() + chunk * (rank_ + 1));
      }
      expect_values(read(out), read(make_array(want, {size_, chunk}, dtype)), dtype,
                    "all_to_all chunk " + std::to_string(chunk));
    }
  }
  // Strided in and out: blocks are rows of transposed (chunk, size) arrays.
  const auto inputs = all_inputs(size_ * 4, DType::int64);
  const Array in = make_array(inputs[static_cast<std::size_t>(rank_)], {size_, 4}, DType::int64).T().copy().T();
  Array out = tessel::zeros({4, size_}, DType::int64, Device::cpu()).T();
  dist::world().all_to_all(out, in);
  std::vector<cd> want;
  for (int r = 0; r < size_; ++r) {
    const auto& v = inputs[static_cast<std::size_t>(r)];
    want.insert(want.end(), v.begin() + 4 * rank_, v.begin() + 4 * (rank_ + 1));
  }
  expect_values(read(out), want, DType::int64, "all_to_all strided");
  const Array bad = tessel::zeros({size_ + 1, 2}, DType::int64, Device::cpu());
  expect_error<tessel::ShapeError>([&] { dist::world().all_to_all(bad, bad); }, {"all_to_all", "one block per rank"});
}

TEST_F(DistTest, SendRecvRingInAGroup) {
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  for (DType dtype : dtypes()) {
    for (const Layout& layout : kLayouts) {
      const auto inputs = all_inputs(numel(layout.shape), dtype);
      Placed x = place(inputs[static_cast<std::size_t>(rank_)], layout, dtype);
      Placed got = place(std::vector<cd>(static_cast<std::size_t>(numel(layout.shape)), cd(2.0)), layout, dtype);
      {
        // Every rank sends before it receives: without the group this would rely on buffering.
        dist::Group group;
        dist::world().send(x.view, next);
        dist::world().recv(got.view, prev);
      }
      expect_values(read(got.view), read(make_array(inputs[static_cast<std::size_t>(prev)], layout.shape, dtype)),
                    dtype, std::string("ring ") + layout.name);
    }
  }
}

TEST_F(DistTest, RecvOfTheWrongSizeIsAShapeError) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  if (rank_ == 0) {
    dist::world().send(tessel::ones({3}, DType::float32, Device::cpu()), 1);
  } else if (rank_ == 1) {
    Array x = tessel::zeros({5}, DType::float32, Device::cpu());
    expect_error<tessel::ShapeError>([&] { dist::world().recv(x, 0); },
                                     {"recv on rank 1", "rank 0 sent 3 elements", "(5,)"});
  }
  dist::world().barrier();
}

TEST_F(DistTest, AsyncHandles) {
  const auto inputs = all_inputs(1000, DType::float64);
  Array x = make_array(inputs[static_cast<std::size_t>(rank_)], {1000}, DType::float64);
  Array y = make_array(inputs[static_cast<std::size_t>(rank_)], {10, 100}, DType::float64).T();  // strided
  dist::Work wx = dist::world().all_reduce(x, dist::ReduceOp::max, /*async_op=*/true);
  dist::Work wy = dist::world().all_reduce(y, dist::ReduceOp::avg, /*async_op=*/true);
  dist::Work wb = dist::world().barrier(/*async_op=*/true);
  wy.wait();
  wx.wait();
  wb.wait();
  EXPECT_TRUE(wx.is_completed());
  EXPECT_TRUE(wb.is_completed());
  wx.wait();  // waiting again is harmless
  expect_values(read(x), reference_reduce(inputs, dist::ReduceOp::max, DType::float64), DType::float64, "async max");
  const Array y_want = make_array(reference_reduce(inputs, dist::ReduceOp::avg, DType::float64), {10, 100}, DType::float64).T();
  expect_values(read(y), read(y_want), DType::float64, "async avg, strided");
  // is_completed polls until done.
  Array z = make_array(inputs[static_cast<std::size_t>(rank_)], {1000}, DType::float64);
  dist::Work wz = dist::world().all_reduce(z, dist::ReduceOp::sum, true);
  while (!wz.is_completed()) std::this_thread::yield();
  expect_values(read(z), reference_reduce(inputs, dist::ReduceOp::sum, DType::float64), DType::float64, "polled");
}

TEST_F(DistTest, GroupedCollectivesCompleteAtTheEnd) {
  const auto a_in = all_inputs(7, DType::float32, 1);
  const auto b_in = all_inputs(7, DType::int32, 2);
  Array a = make_array(a_in[static_cast<std::size_t>(rank_)], {7}, DType::float32);
  Array b = make_array(b_in[static_cast<std::size_t>(rank_)], {7}, DType::int32);
  dist::Work async_b;
  {
    dist::Group outer;
    dist::world().all_reduce(a);
    {
      dist::Group inner;  // nested groups end with the outermost
      async_b = dist::world().all_reduce(b, dist::ReduceOp::min, true);
    }
  }
  async_b.wait();
  expect_values(read(a), reference_reduce(a_in, dist::ReduceOp::sum, DType::float32), DType::float32, "grouped sum");
  expect_values(read(b), reference_reduce(b_in, dist::ReduceOp::min, DType::int32), DType::int32, "grouped min");
  dist::Group explicit_end;
  Array c = make_array(a_in[static_cast<std::size_t>(rank_)], {7}, DType::float32);
  dist::world().all_reduce(c, dist::ReduceOp::max);
  explicit_end.end();
  expect_values(read(c), reference_reduce(a_in, dist::ReduceOp::max, DType::float32), DType::float32, "end()");
}

TEST_F(DistTest, SplitByColorAndKey) {
  const int color = rank_ % 2;
  // key = -rank: the new communicator orders its ranks backwards.
  dist::Communicator sub = dist::world().split(color, -rank_);
  std::vector<int> members;
  for (int r = size_ - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  ASSERT_TRUE(sub.defined());
  EXPECT_EQ(sub.size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[static_cast<std::size_t>(sub.rank())], rank_);
  const auto inputs = all_inputs(9, DType::int64);
  Array x = make_array(inputs[static_cast<std::size_t>(rank_)], {9}, DType::int64);
  sub.all_reduce(x);
  std::vector<std::vector<cd>> member_inputs;
  for (int r : members) member_inputs.push_back(inputs[static_cast<std::size_t>(r)]);
  expect_values(read(x), reference_reduce(member_inputs, dist::ReduceOp::sum, DType::int64), DType::int64, "split sum");
  // sub-rank 0 broadcasts to its group.
  Array y = make_array(inputs[static_cast<std::size_t>(rank_)], {9}, DType::int64);
  sub.broadcast(y, 0);
  expect_values(read(y), inputs[static_cast<std::size_t>(members[0])], DType::int64, "split broadcast");

  // Only rank 0 joins a group; the others get an undefined communicator.
  dist::Communicator only0 = dist::world().split(rank_ == 0 ? 0 : -1, 0);
  if (rank_ == 0) {
    ASSERT_TRUE(only0.defined());
    EXPECT_EQ(only0.size(), 1);
  } else {
    EXPECT_FALSE(only0.defined());
    expect_error<tessel::Error>([&] { only0.all_reduce(x); }, {"all_reduce", "undefined", "negative color"});
  }
}

TEST_F(DistTest, ReadOnlyOutputIsRefused) {
  Array x = tessel::zeros({4}, DType::float32, Device::cpu());
  x.set_read_only();
  expect_error<tessel::ValueError>([&] { dist::world().all_reduce(x); }, {"all_reduce", "read-only"});
}

TEST_F(DistTest, DebugModeNamesMismatchedShapesAndDtypes) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  ScopedEnv env;
  env.set("TESSEL_DIST_DEBUG", "1");
  {
    Array x = tessel::zeros({rank_ == 1 ? 4 : 3}, DType::float32, Device::cpu());
    expect_error<tessel::ShapeError>([&] { dist::world().all_reduce(x); },
                                     {"all_reduce (TESSEL_DIST_DEBUG)", "rank 1 passed shape (4,)", "rank 0 passed shape (3,)"});
  }
  {
    Array x = tessel::zeros({3}, rank_ == 1 ? DType::int32 : DType::float32, Device::cpu());
    expect_error<tessel::DTypeError>([&] { dist::world().broadcast(x, 0); },
                                     {"broadcast (TESSEL_DIST_DEBUG)", "rank 1 passed int32", "rank 0 passed float32"});
  }
  {
    Array x = tessel::zeros({3}, DType::float32, Device::cpu());
    expect_error<tessel::ValueError>([&] { dist::world().broadcast(x, rank_ == 1 ? 1 : 0); },
                                     {"rank 1 passed root 1", "rank 0 passed root 0"});
  }
  // A recv checks the dtype and shape its send had (the same byte count passes MPI unnoticed).
  if (rank_ == 0) {
    dist::world().send(tessel::ones({2, 3}, DType::float32, Device::cpu()), 1);
  } else if (rank_ == 1) {
    Array x = tessel::zeros({6}, DType::int32, Device::cpu());
    expect_error<tessel::DTypeError>([&] { dist::world().recv(x, 0); },
                                     {"recv on rank 1", "rank 0 sent float32 (2, 3)", "int32 (6,)"});
  }
  // Matching calls pass the check and compute.
  Array ok = tessel::ones({3}, DType::float32, Device::cpu());
  dist::world().all_reduce(ok);
  EXPECT_EQ(ok.to_vector<float>(), std::vector<float>(3, static_cast<float>(size_)));
}

TEST_F(DistTest, AWaitOnAHungPeerTimesOutAndCanBeResumed) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  // Rank 1 joins the all-reduce 1.5 s late. Rank 0 issues it with a 0.3 s timeout (read when the
  // call is made): its wait raises naming the call and the rank, the call stays in flight, and
  // later waits complete it once rank 1 arrives.
  Array x = tessel::full({4}, tessel::Scalar(rank_ + 1), DType::int32, Device::cpu());
  if (rank_ == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  dist::Work work;
  {
    ScopedEnv env;
    if (rank_ == 0) env.set("TESSEL_DIST_TIMEOUT_S", "0.3");
    work = dist::world().all_reduce(x, dist::ReduceOp::sum, true);
  }
  if (rank_ == 0) {
    expect_error<tessel::Error>([&] { work.wait(); },
                                {"all_reduce on rank 0 of", "not completed after", "TESSEL_DIST_TIMEOUT_S", "peer rank"});
    int timeouts = 0;
    for (;;) {
      try {
        work.wait();
        break;
      } catch (const tessel::Error&) {
        ASSERT_LT(++timeouts, 50) << "rank 1 never arrived";
      }
    }
  }
  work.wait();
  EXPECT_EQ(x.to_vector<std::int32_t>(), std::vector<std::int32_t>(4, size_ * (size_ + 1) / 2));
}

#endif  // TESSEL_TEST_HAVE_MPI

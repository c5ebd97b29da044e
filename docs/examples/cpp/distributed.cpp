// Collectives from C++ (docs/guide/distributed.rst). Run alone it is a world of one rank; under
// `mpirun -np N` each rank checks the same results.
#include <tessel/tessel.hpp>

#include <cstdio>
#include <vector>

using namespace tessel;

int main() {
  // doc:begin dist
  dist::init();                                    // rank, size, local rank from MPI
  const int r = dist::rank(), n = dist::world_size();
  const Device device = dist::local_device();      // cuda:<local rank>, or the CPU
  const dist::Communicator& world = dist::world();

  Array x = full({4}, r + 1, DType::float32, device);
  world.all_reduce(x);                             // in place: 1 + 2 + ... + n
  Array gathered = empty({n, 2}, DType::int32, device);
  world.all_gather(gathered, full({2}, r, DType::int32, device));

  dist::Work work = world.all_reduce(x, dist::ReduceOp::max, /*async_op=*/true);
  work.wait();                                     // x may be read after this

  Array left = empty({3}, DType::float32, device);
  {
    dist::Group group;                             // issued together when the scope ends
    world.send(full({3}, r, DType::float32, device), (r + 1) % n);
    world.recv(left, (r + n - 1) % n);
  }
  dist::Communicator parity = world.split(/*color=*/r % 2, /*key=*/r);
  std::printf("rank %d of %d: sum %g, %d ranks share my parity\n", r, n, x.to_vector<float>()[0], parity.size());
  // doc:end dist
  const std::vector<float> sums = x.to_vector<float>();
  const std::vector<std::int32_t> ranks = gathered.to_vector<std::int32_t>();
  const std::vector<float> from_left = left.to_vector<float>();
  bool ok = sums == std::vector<float>(4, static_cast<float>(n * (n + 1) / 2)) &&
            from_left == std::vector<float>(3, static_cast<float>((r + n - 1) % n)) && parity.size() == (n + 1 - r % 2) / 2;
  for (int k = 0; k < n; ++k) ok = ok && ranks[2 * k] == k && ranks[2 * k + 1] == k;
  if (!ok) {
    std::fprintf(stderr, "distributed example: wrong results on rank %d\n", r);
    return 1;
  }
  return 0;
}

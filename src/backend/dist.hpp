#pragma once
// The backend interface of the dist layer. src/dist/dist.cpp checks every call once (devices,
// dtypes, shapes, the debug-mode cross-rank check), lays non-contiguous arrays out contiguously
// and hands the backends a Collective of contiguous arrays. backend/cpu/dist.cpp runs it over MPI
// (and owns the MPI process bootstrap); backend/cuda/dist.cpp over NCCL, loaded with dlopen.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "tessel/dist/dist.hpp"

namespace tessel::dist {

// The completion of one call. `progress` is the backend's: it returns true once the call has
// finished (blocking until then when `block`), and raises what the call failed with. `then` are
// the front end's steps after completion (copy back to a non-contiguous array, the average's
// division), run once, in order.
struct Work::State {
  std::string op;  // for messages
  std::function<bool(bool block)> progress;
  std::vector<std::function<void()>> then;
  std::vector<Array> keep_alive;  // buffers the backend reads or writes until completion
  bool done = false;
  std::exception_ptr error;

  // Runs progress and, on completion, the `then` steps. Rethrows a stored failure.
  bool complete(bool block);
  // A call still in flight when its last Work goes (after a timeout, say) may still write its
  // buffers: they are kept for the life of the process rather than freed under the transport.
  ~State();
};

}  // namespace tessel::dist

namespace tessel::backend {

enum class CollectiveKind : std::uint8_t {
  all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, send, recv, barrier
};
const char* collective_name(CollectiveKind kind);

// One call, as the backends take it: contiguous arrays on the communicator's device. For in-place
// calls (all_reduce, broadcast, reduce) `in` and `out` are the same array.
struct Collective {
  CollectiveKind kind = CollectiveKind::barrier;
  dist::ReduceOp op = dist::ReduceOp::sum;
  Array in;
  Array out;
  int peer = 0;  // the root, or the peer of send/recv
  Stream stream;
  // The caller waits for this call at once (async_op=false, outside a group, and no
  // TESSEL_DIST_TIMEOUT_S set): MPI may run its blocking collective, whose tuned algorithms beat
  // the nonblocking ones (a 64 MiB all-reduce on 2 ranks took 1.7x as long through MPI_Iallreduce).
  bool blocking = false;
};

class CommBackend {
 public:
  virtual ~CommBackend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;
  // Queues (CUDA) or starts (MPI) the call and sets work.progress.
  virtual void issue(const Collective& call, dist::Work::State& work) = 0;
  // Whether a call's arrays may be touched only after Work completion (MPI: true), or as soon as
  // later work is queued on the call's stream (NCCL: false).
  virtual bool completes_on_host() const = 0;
  // Whether ReduceOp::avg is done by the backend (NCCL's ncclAvg); else it is a sum, divided after.
  virtual bool native_avg() const = 0;
  // nullptr for a negative color. Collective over this communicator.
  virtual std::unique_ptr<CommBackend> split(int color, int key) = 0;
  // Every rank's words (the same count on each), in rank order: the debug-mode check. Blocking.
  virtual std::vector<std::vector<std::int64_t>> all_gather_words(const std::vector<std::int64_t>& words) = 0;
  // Blocking broadcast of host bytes from root (the NCCL unique id).
  virtual void broadcast_bytes(void* data, std::size_t bytes, int root) = 0;
  virtual void group_start() {}
  virtual void group_end() {}
};

namespace cpu {

bool have_mpi();
struct ProcessInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string host;
};
// MPI_Init_thread unless MPI is already initialized (by mpi4py, say); then reads the world and
// the node (MPI_Comm_split_type SHARED). Error when tessel was built without MPI.
ProcessInfo mpi_start();
// MPI_Finalize if mpi_start() initialized MPI.
void mpi_stop();
// A communicator over MPI_COMM_WORLD (a duplicate) for arrays on `device`: the CPU collectives,
// and the bootstrap of the NCCL ones.
std::unique_ptr<CommBackend> mpi_world(Device device);

}  // namespace cpu

namespace cuda {

// Whether libnccl can be loaded; otherwise `why` says what was tried.
bool nccl_available(std::string* why);
// A NCCL communicator of the ranks of `bootstrap` (its unique id broadcast through it), on
// `device`; split and the debug check go through the bootstrap communicator.
std::unique_ptr<CommBackend> nccl_from_bootstrap(std::unique_ptr<CommBackend> bootstrap, Device device);
// ncclGetUniqueId's bytes (NCCL_UNIQUE_ID_BYTES).
std::string nccl_unique_id();
// A NCCL communicator of rank `rank` of `size` on `device` from rank 0's unique id, for ranks
// that have no MPI (torchrun): split goes through ncclCommSplit and the debug check through NCCL
// itself. The same creation path as nccl_from_bootstrap.
std::unique_ptr<CommBackend> nccl_from_unique_id(const std::string& unique_id, int rank, int size, Device device);
// One communicator per device of this process (ncclCommInitAll).
std::vector<std::unique_ptr<CommBackend>> nccl_single_process(const std::vector<Device>& devices);
void nccl_group_start();
void nccl_group_end();

}  // namespace cuda

}  // namespace tessel::backend

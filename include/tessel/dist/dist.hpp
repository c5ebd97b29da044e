#pragma once
// tessel::dist: processes, communicators and collectives on arrays.
//
// One process per device, started by mpirun or srun: init() reads the rank, the world size and
// the local rank (the rank among the processes of this node) from MPI. The collectives run over
// NCCL for CUDA arrays (the NCCL unique id is broadcast over MPI) and over MPI's own collectives
// for CPU arrays, so the same program runs, and is tested, without a GPU.
//
// Collectives work in place where PyTorch's do (all_reduce, broadcast, reduce) and take an
// output array otherwise. They are ordered on the array's stream (the CPU stream runs work at
// once). Each returns a Work: with async_op=false the call has finished on return (CPU) or is
// queued on the stream (CUDA); with async_op=true it may still be in flight, and Work::wait()
// must be called before the arrays are read or written. Inside a Group, calls are batched and
// issued together when the group ends (the way to exchange with send/recv without deadlock).
//
// TESSEL_DIST_DEBUG=1 checks before every collective that all ranks call the same collective
// with the same dtype, shapes and root (one small extra all-gather per call), and that a recv
// matches its send; a mismatch is a ShapeError or DTypeError naming the ranks and their shapes.
// TESSEL_DIST_TIMEOUT_S (default 600) bounds how long a wait polls before it raises (NCCL: and
// aborts the communicator). On the CPU, synchronous calls outside a group run MPI's blocking
// collectives (no timeout) unless TESSEL_DIST_TIMEOUT_S is set; then every call is nonblocking
// and polled.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "tessel/array/array.hpp"

namespace tessel::dist {

enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };
const char* reduce_op_name(ReduceOp op);
// "sum", "prod", "min", "max", "avg" (ValueError for anything else).
ReduceOp parse_reduce_op(const std::string& name);

// Whether tessel was built with MPI (the launcher path and the CPU collectives need it).
bool built_with_mpi();

// Starts the distributed runtime for this process, once:
//   - launched by mpirun/srun (or run alone as an MPI singleton): rank, size and local rank come
//     from MPI;
//   - launched by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): that path
//     bootstraps through torch.distributed's store, which only the Python front end can reach;
//     from C++ it is an Error saying so.
// The local device is `device` when given, else cuda:<local rank> when CUDA is available (DeviceError when this node has
// more ranks than GPUs), else the CPU. Error when called twice, when tessel was built without
// MPI, or when the launcher environment lacks variables.
void init(std::optional<Device> device = std::nullopt);
// Starts the distributed runtime from ranks that a launcher other than MPI gave this process
// (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE): tessel.distributed.init's path under
// torchrun. The communicator is NCCL's, made the way init() makes it, from `nccl_unique_id`: the
// bytes of new_nccl_unique_id() made on rank 0 and passed to every rank by the caller's own
// bootstrap (tessel.distributed passes them through torch.distributed's store). Makes the checks of
// detail::check_launch first: a CPU device is an Error (the CPU collectives run over MPI, which
// this launch did not start); ValueError when the id is not NCCL_UNIQUE_ID_BYTES long.
void init_from_launch(int rank, int size, int local_rank, int local_size, Device device,
                      const std::string& nccl_unique_id);
// A new NCCL unique id (ncclGetUniqueId) as bytes, for init_from_launch on every rank. Error when
// tessel was built without CUDA or NCCL cannot be loaded.
std::string new_nccl_unique_id();
bool is_initialized();
// Destroys the communicators and finalizes MPI if init() started it. Called at exit otherwise.
void finalize();

int rank();         // in the world communicator
int world_size();
int local_rank();   // among the ranks of this node
int local_size();
Device local_device();

class Communicator;

// An operation in flight. wait() finishes it (raises what it failed with); is_completed() polls.
class Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // CPU: returns when the operation has finished. CUDA: the array's stream waits for it, and the
  // host waits for the communicator's progress (so a failed peer surfaces within the timeout).
  void wait();
  bool is_completed();

 private:
  std::shared_ptr<State> state_;
};

class Communicator {
 public:
  struct Impl;
  Communicator() = default;  // undefined: every call raises
  explicit Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  Device device() const;

  // Ranks passing the same color form a new communicator, ordered by key then by rank here.
  // A negative color returns an undefined Communicator for this rank (it joins none).
  // Collective over this communicator.
  Communicator split(int color, int key) const;

  // x <- op over the ranks of x (in place). avg needs a floating or complex dtype; min and max
  // a real one.
  Work all_reduce(const Array& x, ReduceOp op = ReduceOp::sum, bool async_op = false,
                  const OptionalStream& stream = std::nullopt) const;
  // x <- root's x.
  Work broadcast(const Array& x, int root, bool async_op = false,
                 const OptionalStream& stream = std::nullopt) const;
  // root's x <- op over the ranks of x; the other ranks' x are left as they were.
  Work reduce(const Array& x, int root, ReduceOp op = ReduceOp::sum, bool async_op = false,
              const OptionalStream& stream = std::nullopt) const;
  // out[r] <- rank r's in; out has shape (size, *in.shape).
  Work all_gather(const Array& out, const Array& in, bool async_op = false,
                  const OptionalStream& stream = std::nullopt) const;
  // out <- op over ranks r of in[rank]; in has shape (size, *out.shape).
  Work reduce_scatter(const Array& out, const Array& in, ReduceOp op = ReduceOp::sum,
                      bool async_op = false, const OptionalStream& stream = std::nullopt) const;
  // out[r] <- rank r's in[rank]; in and out have shape (size, ...), alike.
  Work all_to_all(const Array& out, const Array& in, bool async_op = false,
                  const OptionalStream& stream = std::nullopt) const;
  Work send(const Array& x, int peer, bool async_op = false,
            const OptionalStream& stream = std::nullopt) const;
  Work recv(const Array& x, int peer, bool async_op = false,
            const OptionalStream& stream = std::nullopt) const;
  // Returns when every rank has reached it (async_op: a Work that completes then).
  Work barrier(bool async_op = false) const;

  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// Single-process multi-GPU (ncclCommInitAll): one communicator per device, rank i on devices[i],
// with no launcher and no init(). Their calls must be made from one thread inside a Group (NCCL's
// rule for one process driving several ranks). CUDA only; DeviceError otherwise.
std::vector<Communicator> init_devices(const std::vector<Device>& devices);

// The communicator of all ranks (Error before init()).
const Communicator& world();

// Batches the collectives and send/recv calls made while it lives on this thread, and issues
// them together when it ends (ncclGroupStart/End; over MPI the nonblocking calls are completed
// together). Calls made with async_op=false complete when the group ends. Groups nest.
class Group {
 public:
  Group();
  ~Group() noexcept(false);
  // Ends the group now (the destructor then does nothing); raises what a grouped call failed with.
  void end();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  bool open_ = true;
};

namespace detail {

// The launcher found in an environment (getenv is the lookup, so tests pass their own).
enum class Launcher : std::uint8_t { none, mpi, torchrun };
struct LaunchInfo {
  Launcher launcher = Launcher::none;
  std::string name;  // "mpirun", "srun", "torchrun" or "none"
};
using Getenv = std::function<const char*(const char*)>;
// Error naming the missing variables when only some of the torchrun variables are set, or when
// srun's SLURM_PROCID is set without SLURM_NTASKS.
LaunchInfo detect_launcher(const Getenv& getenv);

// DeviceError when a node has more ranks than GPUs: names the local rank, the local size, the
// host and the GPU count.
void check_ranks_fit_devices(int local_rank, int local_size, int device_count, const std::string& host);

// The device of a rank when none is given: cuda:<local rank> when CUDA is available, else the CPU.
Device default_rank_device(int local_rank);

// What init_from_launch checks before its ranks talk to each other, so that a caller can check it
// before its own exchange of the NCCL unique id: not initialized yet; 0 <= rank < size and
// 0 <= local_rank < local_size <= size (ValueError naming the values); the device (default:
// default_rank_device) is CUDA (a CPU device is an Error naming mpirun, which the CPU collectives
// need); this node has a GPU per rank (check_ranks_fit_devices). Returns the device.
Device check_launch(int rank, int size, int local_rank, int local_size, std::optional<Device> device);

// DeviceError "<op>: ... on <array device>, the communicator's device is <device>".
void check_array_device(const char* op, const Array& x, Device comm_device, const char* what = "array");

// The NCCL wait timeout in seconds from TESSEL_DIST_TIMEOUT_S (default 600; ValueError if malformed).
double timeout_seconds();
bool debug_checks();  // TESSEL_DIST_DEBUG=1

}  // namespace detail

}  // namespace tessel::dist

// The MPI side of the dist layer: the process bootstrap (rank, size, local rank) and the
// collectives on CPU arrays. Async and grouped calls (and every call when TESSEL_DIST_TIMEOUT_S
// is set) use MPI's nonblocking forms (MPI_Iallreduce, MPI_Isend...), so they need no thread: a
// Work holds the requests, and waiting is MPI_Testall polled until done or the timeout. Other
// calls run the blocking collective (Collective::blocking says why). Without MPI
// (TESSEL_HAVE_MPI unset) every entry point raises.
#include "backend/dist.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "tessel/array/half.hpp"

#if TESSEL_HAVE_MPI
// The C API only: Open MPI's and MPICH's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#if TESSEL_MPI_DLOPEN
#include "backend/cpu/mpi_api.hpp"  // the wheel: libmpi opened by mpi_start(), not linked
#endif
#endif

namespace tessel::backend::cpu {

#if !TESSEL_HAVE_MPI

bool have_mpi() { return false; }
[[noreturn]] static void no_mpi() {
  throw Error(
      "tessel.distributed: tessel was built without MPI, which launching with mpirun/srun and the "
      "CPU collectives need; install Open MPI (Debian: libopenmpi-dev openmpi-bin, as "
      "scripts/install-deps.sh does) and rebuild");
}
ProcessInfo mpi_start() { no_mpi(); }
void mpi_stop() {}
std::unique_ptr<CommBackend> mpi_world(Device) { no_mpi(); }

#else

bool have_mpi() { return true; }

namespace {

bool g_we_initialized = false;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

void check_mpi(int code, const std::string& what) {
  if (code != MPI_SUCCESS) throw Error(fmt::format("{}: MPI failed: {}", what, mpi_error_text(code)));
}

// The MPI type of a dtype for data movement and the built-in reductions. float16 and bfloat16
// have none: they move as 16-bit words and reduce through the user ops below.
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::bool_: return MPI_C_BOOL;
    case DType::int8: return MPI_INT8_T;
    case DType::int16: return MPI_INT16_T;
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    case DType::uint8: return MPI_UINT8_T;
    case DType::uint16: return MPI_UINT16_T;
    case DType::uint32: return MPI_UINT32_T;
    case DType::uint64: return MPI_UINT64_T;
    case DType::float16: return MPI_UINT16_T;
    case DType::bfloat16: return MPI_UINT16_T;
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::complex64: return MPI_C_FLOAT_COMPLEX;
    case DType::complex128: return MPI_C_DOUBLE_COMPLEX;
  }
  throw DTypeError("tessel.distributed: unknown dtype");
}

// Elementwise inout[i] = inout[i] (op) in[i] for a 16-bit float, computed in float and rounded
// back (what NCCL does for half and bfloat16).
template <class H, int kOp>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]);
    const float y = static_cast<float>(b[i]);
    float r = 0;
    if constexpr (kOp == 0) r = x + y;
    if constexpr (kOp == 1) r = x * y;
    if constexpr (kOp == 2) r = std::isnan(x) || std::isnan(y) ? std::numeric_limits<float>::quiet_NaN() : std::min(x, y);
    if constexpr (kOp == 3) r = std::isnan(x) || std::isnan(y) ? std::numeric_limits<float>::quiet_NaN() : std::max(x, y);
    b[i] = H(r);
  }
}

struct HalfOps {
  MPI_Op ops[2][4]{};  // [float16, bfloat16][sum, prod, min, max]
  HalfOps() {
    MPI_Op_create(&half_op<float16, 0>, 1, &ops[0][0]);
    MPI_Op_create(&half_op<float16, 1>, 1, &ops[0][1]);
    MPI_Op_create(&half_op<float16, 2>, 1, &ops[0][2]);
    MPI_Op_create(&half_op<float16, 3>, 1, &ops[0][3]);
    MPI_Op_create(&half_op<bfloat16, 0>, 1, &ops[1][0]);
    MPI_Op_create(&half_op<bfloat16, 1>, 1, &ops[1][1]);
    MPI_Op_create(&half_op<bfloat16, 2>, 1, &ops[1][2]);
    MPI_Op_create(&half_op<bfloat16, 3>, 1, &ops[1][3]);
  }
};

HalfOps& half_ops() {
  static HalfOps ops;  // after MPI_Init (first collective); freed by MPI_Finalize
  return ops;
}

// The MPI op for a reduction. avg arrives here as sum (the front end divides); bool: sum and max
// are "any", prod and min "all", as NCCL computes them on bytes.
MPI_Op mpi_op(dist::ReduceOp op, DType dtype) {
  if (dtype == DType::float16 || dtype == DType::bfloat16) {
    const int which = dtype == DType::float16 ? 0 : 1;
    switch (op) {
      case dist::ReduceOp::sum: case dist::ReduceOp::avg: return half_ops().ops[which][0];
      case dist::ReduceOp::prod: return half_ops().ops[which][1];
      case dist::ReduceOp::min: return half_ops().ops[which][2];
      case dist::ReduceOp::max: return half_ops().ops[which][3];
    }
  }
  if (dtype == DType::bool_) {
    return (op == dist::ReduceOp::sum || op == dist::ReduceOp::max) ? MPI_LOR : MPI_LAND;
  }
  switch (op) {
    case dist::ReduceOp::sum: case dist::ReduceOp::avg: return MPI_SUM;
    case dist::ReduceOp::prod: return MPI_PROD;
    case dist::ReduceOp::min: return MPI_MIN;
    case dist::ReduceOp::max: return MPI_MAX;
  }
  return MPI_SUM;
}

int count_of(const Array& a, const char* op) {
  if (a.size() > std::numeric_limits<int>::max()) {
    throw ValueError(fmt::format("{}: {} elements is more than MPI's int count allows on the CPU path",
                                 op, a.size()));
  }
  return static_cast<int>(a.size());
}

constexpr int kDataTag = 0;
constexpr int kDescriptorTag = 1;

class MpiComm final : public CommBackend {
 public:
  MpiComm(MPI_Comm comm, Device device) : comm_(comm), device_(device) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }
  bool completes_on_host() const override { return true; }
  bool native_avg() const override { return false; }

  void issue(const Collective& call, dist::Work::State& work) override {
    const std::string op = collective_name(call.kind);
    const double timeout = dist::detail::timeout_seconds();  // a malformed setting raises before anything is posted
    auto requests = std::make_shared<std::vector<MPI_Request>>();
    MPI_Request request = MPI_REQUEST_NULL;
    // Keeps the request the call just wrote (read after the call, not as a second argument).
    auto add = [&](int code) {
      check_mpi(code, op);
      requests->push_back(request);
    };
    const DType dtype = call.in.defined() ? call.in.dtype() : call.out.defined() ? call.out.dtype() : DType::uint8;
    const MPI_Datatype type = mpi_type(dtype);
    void* in = call.in.defined() ? call.in.data() : nullptr;
    void* out = call.out.defined() ? call.out.data() : nullptr;
    if (call.blocking) {
      run_blocking(call, dtype, type, in, out);
      work.progress = [](bool) { return true; };
      return;
    }
    // Expected element count of a recv, for the mismatch check (MPI reports what arrived).
    std::int64_t expected_recv = -1;
    auto descriptor = std::make_shared<std::vector<std::int64_t>>();
    switch (call.kind) {
      case CollectiveKind::all_reduce:
        add(MPI_Iallreduce(MPI_IN_PLACE, out, count_of(call.out, "all_reduce"), type, mpi_op(call.op, dtype),
                           comm_, &request));
        break;
      case CollectiveKind::broadcast:
        add(MPI_Ibcast(out, count_of(call.out, "broadcast"), type, call.peer, comm_, &request));
        break;
      case CollectiveKind::reduce:
        add(MPI_Ireduce(rank_ == call.peer ? MPI_IN_PLACE : in, rank_ == call.peer ? out : nullptr,
                        count_of(call.in, "reduce"), type, mpi_op(call.op, dtype), call.peer, comm_, &request));
        break;
      case CollectiveKind::all_gather:
        add(MPI_Iallgather(in, count_of(call.in, "all_gather"), type, out, count_of(call.in, "all_gather"),
                           type, comm_, &request));
        break;
      case CollectiveKind::reduce_scatter:
        add(MPI_Ireduce_scatter_block(in, out, count_of(call.out, "reduce_scatter"), type,
                                      mpi_op(call.op, dtype), comm_, &request));
        break;
      case CollectiveKind::all_to_all: {
        const int chunk = count_of(call.in, "all_to_all") / size_;
        add(MPI_Ialltoall(in, chunk, type, out, chunk, type, comm_, &request));
        break;
      }
      case CollectiveKind::send:
        if (dist::detail::debug_checks()) {
          *descriptor = describe(call.in);
          add(MPI_Isend(descriptor->data(), static_cast<int>(descriptor->size()), MPI_INT64_T, call.peer,
                        kDescriptorTag, comm_, &request));
        }
        add(MPI_Isend(in, count_of(call.in, "send"), type, call.peer, kDataTag, comm_, &request));
        break;
      case CollectiveKind::recv:
        if (dist::detail::debug_checks()) {
          descriptor->assign(2 + 16, 0);
          add(MPI_Irecv(descriptor->data(), static_cast<int>(descriptor->size()), MPI_INT64_T, call.peer,
                        kDescriptorTag, comm_, &request));
        }
        expected_recv = call.out.size();
        add(MPI_Irecv(out, count_of(call.out, "recv"), type, call.peer, kDataTag, comm_, &request));
        break;
      case CollectiveKind::barrier:
        add(MPI_Ibarrier(comm_, &request));
        break;
    }
    const int rank = rank_;
    const int size = size_;
    const int peer = call.peer;
    const Array recv_array = call.kind == CollectiveKind::recv ? call.out : Array();
    const MPI_Datatype recv_type = type;
    work.progress = [requests, descriptor, op, rank, size, peer, expected_recv, recv_array,
                     recv_type, timeout](bool block) {
      std::vector<MPI_Status> statuses(requests->size());
      int flag = 0;
      const auto start = std::chrono::steady_clock::now();
      for (;;) {
        const int code = MPI_Testall(static_cast<int>(requests->size()), requests->data(), &flag, statuses.data());
        if (code == MPI_ERR_IN_STATUS) {
          for (const MPI_Status& status : statuses) {
            if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) {
              throw Error(fmt::format("{} on rank {} of {}: MPI failed: {}", op, rank, size,
                                      mpi_error_text(status.MPI_ERROR)));
            }
          }
        }
        check_mpi(code, fmt::format("{} on rank {} of {}", op, rank, size));
        if (flag) break;
        if (!block) return false;
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited > timeout) {
          // The requests stay posted: a later wait() completes the call if the peers arrive.
          throw Error(fmt::format(
              "{} on rank {} of {}: not completed after {:.3g} s (TESSEL_DIST_TIMEOUT_S): a peer rank has "
              "exited, hangs, or did not make the same call",
              op, rank, size, waited));
        }
        std::this_thread::yield();
      }
      if (expected_recv >= 0) {
        if (!descriptor->empty()) check_descriptor(*descriptor, recv_array, rank, peer);
        int received = 0;
        MPI_Get_count(&statuses.back(), recv_type, &received);
        if (received != expected_recv) {
          throw ShapeError(fmt::format("recv on rank {}: rank {} sent {} elements, the receiving array {} holds {}",
                                       rank, peer, received, shape_str(recv_array.shape()), expected_recv));
        }
      }
      return true;
    };
  }

  std::unique_ptr<CommBackend> split(int color, int key) override {
    MPI_Comm child = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child), "split");
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiComm>(child, device_);
  }

  std::vector<std::vector<std::int64_t>> all_gather_words(const std::vector<std::int64_t>& words) override {
    std::vector<std::int64_t> all(words.size() * static_cast<std::size_t>(size_));
    check_mpi(MPI_Allgather(words.data(), static_cast<int>(words.size()), MPI_INT64_T, all.data(),
                            static_cast<int>(words.size()), MPI_INT64_T, comm_),
              "tessel.distributed debug check");
    std::vector<std::vector<std::int64_t>> result;
    for (int r = 0; r < size_; ++r) {
      result.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(words.size()) * r,
                          all.begin() + static_cast<std::ptrdiff_t>(words.size()) * (r + 1));
    }
    return result;
  }

  void broadcast_bytes(void* data, std::size_t bytes, int root) override {
    check_mpi(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_), "broadcast of bootstrap bytes");
  }

 private:
  // The blocking form of a call (MPI's tuned collectives), finished on return.
  void run_blocking(const Collective& call, DType dtype, MPI_Datatype type, void* in, void* out) {
    const std::string what = fmt::format("{} on rank {} of {}", collective_name(call.kind), rank_, size_);
    switch (call.kind) {
      case CollectiveKind::all_reduce:
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, out, count_of(call.out, "all_reduce"), type, mpi_op(call.op, dtype), comm_),
                  what);
        break;
      case CollectiveKind::broadcast:
        check_mpi(MPI_Bcast(out, count_of(call.out, "broadcast"), type, call.peer, comm_), what);
        break;
      case CollectiveKind::reduce:
        check_mpi(MPI_Reduce(rank_ == call.peer ? MPI_IN_PLACE : in, rank_ == call.peer ? out : nullptr,
                             count_of(call.in, "reduce"), type, mpi_op(call.op, dtype), call.peer, comm_),
                  what);
        break;
      case CollectiveKind::all_gather:
        check_mpi(MPI_Allgather(in, count_of(call.in, "all_gather"), type, out, count_of(call.in, "all_gather"), type,
                                comm_),
                  what);
        break;
      case CollectiveKind::reduce_scatter:
        check_mpi(MPI_Reduce_scatter_block(in, out, count_of(call.out, "reduce_scatter"), type, mpi_op(call.op, dtype),
                                           comm_),
                  what);
        break;
      case CollectiveKind::all_to_all: {
        const int chunk = count_of(call.in, "all_to_all") / size_;
        check_mpi(MPI_Alltoall(in, chunk, type, out, chunk, type, comm_), what);
        break;
      }
      case CollectiveKind::send:
        if (dist::detail::debug_checks()) {
          std::vector<std::int64_t> descriptor = describe(call.in);
          check_mpi(MPI_Send(descriptor.data(), static_cast<int>(descriptor.size()), MPI_INT64_T, call.peer,
                             kDescriptorTag, comm_),
                    what);
        }
        check_mpi(MPI_Send(in, count_of(call.in, "send"), type, call.peer, kDataTag, comm_), what);
        break;
      case CollectiveKind::recv: {
        if (dist::detail::debug_checks()) {
          std::vector<std::int64_t> descriptor(2 + 16, 0);
          check_mpi(MPI_Recv(descriptor.data(), static_cast<int>(descriptor.size()), MPI_INT64_T, call.peer,
                             kDescriptorTag, comm_, MPI_STATUS_IGNORE),
                    what);
          check_descriptor(descriptor, call.out, rank_, call.peer);
        }
        MPI_Status status;
        check_mpi(MPI_Recv(out, count_of(call.out, "recv"), type, call.peer, kDataTag, comm_, &status), what);
        int received = 0;
        MPI_Get_count(&status, type, &received);
        if (received != call.out.size()) {
          throw ShapeError(fmt::format("recv on rank {}: rank {} sent {} elements, the receiving array {} holds {}",
                                       rank_, call.peer, received, shape_str(call.out.shape()), call.out.size()));
        }
        break;
      }
      case CollectiveKind::barrier:
        check_mpi(MPI_Barrier(comm_), what);
        break;
    }
  }

  // A send's dtype and shape, for the receiver's debug check: [dtype, ndim, dims (at most 16)].
  static std::vector<std::int64_t> describe(const Array& a) {
    std::vector<std::int64_t> words(2 + 16, 0);
    words[0] = static_cast<std::int64_t>(a.dtype());
    words[1] = a.ndim();
    for (std::int64_t i = 0; i < a.ndim() && i < 16; ++i) words[static_cast<std::size_t>(2 + i)] = a.shape()[static_cast<std::size_t>(i)];
    return words;
  }
  static void check_descriptor(const std::vector<std::int64_t>& sent, const Array& out, int rank, int peer) {
    Shape shape;
    for (std::int64_t i = 0; i < sent[1] && i < 16; ++i) shape.push_back(sent[static_cast<std::size_t>(2 + i)]);
    const DType dtype = static_cast<DType>(sent[0]);
    if (dtype != out.dtype()) {
      throw DTypeError(fmt::format("recv on rank {}: rank {} sent {} {}, the receiving array is {} {} (TESSEL_DIST_DEBUG)",
                                   rank, peer, dtype_name(dtype), shape_str(shape), dtype_name(out.dtype()),
                                   shape_str(out.shape())));
    }
    if (shape != out.shape()) {
      throw ShapeError(fmt::format("recv on rank {}: rank {} sent shape {}, the receiving array has shape {} (TESSEL_DIST_DEBUG)",
                                   rank, peer, shape_str(shape), shape_str(out.shape())));
    }
  }

  MPI_Comm comm_;
  Device device_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

ProcessInfo mpi_start() {
#if TESSEL_MPI_DLOPEN
  mpi_api::load_mpi();
#endif
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // MULTIPLE when the library has it, so a Python thread or a pipeline worker may also call in;
    // calls are still made one at a time per communicator by tessel's own code.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "tessel.distributed.init");
    g_we_initialized = true;
  }
  ProcessInfo info;
  MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &info.size);
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &node),
            "tessel.distributed.init (ranks of this node)");
  MPI_Comm_rank(node, &info.local_rank);
  MPI_Comm_size(node, &info.local_size);
  MPI_Comm_free(&node);
  char host[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(host, &length);
  info.host.assign(host, static_cast<std::size_t>(length));
  return info;
}

void mpi_stop() {
#if TESSEL_MPI_DLOPEN
  if (mpi_api::api().handle == nullptr) return;  // never loaded, so never initialized
#endif
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialized && !finalized) MPI_Finalize();
}

std::unique_ptr<CommBackend> mpi_world(Device device) {
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "tessel.distributed.init");
  return std::make_unique<MpiComm>(comm, device);
}

#endif

}  // namespace tessel::backend::cpu

#pragma once
// MPI loaded at run time (TESSEL_MPI_DLOPEN, the wheel's build: CMake's TESSEL_WHEEL). Included by
// backend/cpu/dist.cpp after <mpi.h>: every MPI function that file calls becomes a pointer of the
// same type from a table filled by dlsym, and Open MPI's predefined handles (MPI_COMM_WORLD,
// MPI_INT64_T, MPI_SUM...: addresses of its global objects, through OMPI_PREDEFINED_GLOBAL) are
// looked up the same way, so the library has no reference to libmpi and imports on machines
// without Open MPI. libmpi is opened RTLD_GLOBAL (Open MPI's plugins need its symbols global) by
// load_mpi(), which mpi_start() calls first; nothing else of the file runs before it. MPICH's
// handles are integer constants and need nothing here.
#include <string>

#include <fmt/format.h>

#include "core/shared_library.hpp"
#include "tessel/core/error.hpp"

#define TESSEL_MPI_FUNCTIONS(X)                                                                                   \
  X(Allgather) X(Allreduce) X(Alltoall) X(Barrier) X(Bcast) X(Comm_dup) X(Comm_free) X(Comm_rank)               \
  X(Comm_set_errhandler) X(Comm_size) X(Comm_split) X(Comm_split_type) X(Error_string) X(Finalize) X(Finalized) \
  X(Get_count) X(Get_processor_name) X(Iallgather) X(Iallreduce) X(Ialltoall) X(Ibarrier) X(Ibcast)            \
  X(Init_thread) X(Initialized) X(Irecv) X(Ireduce) X(Ireduce_scatter_block) X(Isend) X(Op_create) X(Recv)      \
  X(Reduce) X(Reduce_scatter_block) X(Send) X(Testall)

namespace tessel::backend::cpu::mpi_api {

struct Api {
#define TESSEL_MPI_POINTER(name) decltype(&::MPI_##name) name = nullptr;
  TESSEL_MPI_FUNCTIONS(TESSEL_MPI_POINTER)
#undef TESSEL_MPI_POINTER
  void* handle = nullptr;
};

inline Api& api() {
  static Api a;
  return a;
}

// The address of one of libmpi's predefined objects (Open MPI), after load_mpi().
inline void* symbol(const char* name) {
  void* p = ::tessel::detail::library_symbol(api().handle, name);
  if (p == nullptr) throw Error(fmt::format("tessel.distributed: libmpi has no symbol {} (is it Open MPI?)", name));
  return p;
}

// Opens libmpi once: TESSEL_MPI_LIBRARY, else Open MPI's soname. Error saying what to install when
// it is missing; thread-safe through the static's initialization.
inline void load_mpi() {
  static const std::string error = [] {
    Api& a = api();
    const ::tessel::detail::SharedLibrary opened = ::tessel::detail::open_shared_library("TESSEL_MPI_LIBRARY", {"libmpi.so.40"}, /*global=*/true);
    a.handle = opened.handle;
    if (a.handle == nullptr) {
      return fmt::format(
          "tessel.distributed: the CPU collectives and the mpirun/srun bootstrap need Open MPI, which could not be "
          "loaded: tried {}. Install Open MPI (Debian/Ubuntu: apt install openmpi-bin libopenmpi3; the library is "
          "libmpi.so.40) or set TESSEL_MPI_LIBRARY to libmpi's path",
          opened.tried);
    }
    std::string missing;
#define TESSEL_MPI_LOAD(name)                                                              \
  a.name = reinterpret_cast<decltype(a.name)>(::tessel::detail::library_symbol(a.handle, "MPI_" #name)); \
  if (a.name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + "MPI_" #name;
    TESSEL_MPI_FUNCTIONS(TESSEL_MPI_LOAD)
#undef TESSEL_MPI_LOAD
    if (!missing.empty()) return fmt::format("tessel.distributed: the loaded libmpi lacks {}", missing);
    return std::string();
  }();
  if (!error.empty()) throw Error(error);
}

}  // namespace tessel::backend::cpu::mpi_api

// From here on the file's MPI calls go through the table.
#define TESSEL_MPI_REDIRECT(name) (::tessel::backend::cpu::mpi_api::api().name)
#define MPI_Allgather TESSEL_MPI_REDIRECT(Allgather)
#define MPI_Allreduce TESSEL_MPI_REDIRECT(Allreduce)
#define MPI_Alltoall TESSEL_MPI_REDIRECT(Alltoall)
#define MPI_Barrier TESSEL_MPI_REDIRECT(Barrier)
#define MPI_Bcast TESSEL_MPI_REDIRECT(Bcast)
#define MPI_Comm_dup TESSEL_MPI_REDIRECT(Comm_dup)
#define MPI_Comm_free TESSEL_MPI_REDIRECT(Comm_free)
#define MPI_Comm_rank TESSEL_MPI_REDIRECT(Comm_rank)
#define MPI_Comm_set_errhandler TESSEL_MPI_REDIRECT(Comm_set_errhandler)
#define MPI_Comm_size TESSEL_MPI_REDIRECT(Comm_size)
#define MPI_Comm_split TESSEL_MPI_REDIRECT(Comm_split)
#define MPI_Comm_split_type TESSEL_MPI_REDIRECT(Comm_split_type)
#define MPI_Error_string TESSEL_MPI_REDIRECT(Error_string)
#define MPI_Finalize TESSEL_MPI_REDIRECT(Finalize)
#define MPI_Finalized TESSEL_MPI_REDIRECT(Finalized)
#define MPI_Get_count TESSEL_MPI_REDIRECT(Get_count)
#define MPI_Get_processor_name TESSEL_MPI_REDIRECT(Get_processor_name)
#define MPI_Iallgather TESSEL_MPI_REDIRECT(Iallgather)
#define MPI_Iallreduce TESSEL_MPI_REDIRECT(Iallreduce)
#define MPI_Ialltoall TESSEL_MPI_REDIRECT(Ialltoall)
#define MPI_Ibarrier TESSEL_MPI_REDIRECT(Ibarrier)
#define MPI_Ibcast TESSEL_MPI_REDIRECT(Ibcast)
#define MPI_Init_thread TESSEL_MPI_REDIRECT(Init_thread)
#define MPI_Initialized TESSEL_MPI_REDIRECT(Initialized)
#define MPI_Irecv TESSEL_MPI_REDIRECT(Irecv)
#define MPI_Ireduce TESSEL_MPI_REDIRECT(Ireduce)
#define MPI_Ireduce_scatter_block TESSEL_MPI_REDIRECT(Ireduce_scatter_block)
#define MPI_Isend TESSEL_MPI_REDIRECT(Isend)
#define MPI_Op_create TESSEL_MPI_REDIRECT(Op_create)
#define MPI_Recv TESSEL_MPI_REDIRECT(Recv)
#define MPI_Reduce TESSEL_MPI_REDIRECT(Reduce)
#define MPI_Reduce_scatter_block TESSEL_MPI_REDIRECT(Reduce_scatter_block)
#define MPI_Send TESSEL_MPI_REDIRECT(Send)
#define MPI_Testall TESSEL_MPI_REDIRECT(Testall)
#if defined(OPEN_MPI) && OPEN_MPI
#undef OMPI_PREDEFINED_GLOBAL
#define OMPI_PREDEFINED_GLOBAL(type, global) (reinterpret_cast<type>(::tessel::backend::cpu::mpi_api::symbol(#global)))
#endif

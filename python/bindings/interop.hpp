#pragma once
// What the interop files share (interop.cpp, interop_dlpack.cpp, interop_dlpack_exchange.cpp,
// interop_cuda_array_interface.cpp).
//
// Ownership model: an exported capsule holds a tessel::Array (so the storage lives until the
// consumer calls the deleter); an imported array wraps the foreign memory in a Buffer whose
// keep-alive releases the producer (calls its DLPack deleter, or drops the reference to the
// object that exposed __cuda_array_interface__) when the last tessel view dies. Memory imported
// read-only gives a read-only Array (the core refuses writes into it).
//
// Streams: data produced on tessel's current stream is handed over by recording an event there
// and making the consumer's stream wait on it (cudaStreamWaitEvent); never a device-wide sync.
#include <cstdint>
#include <memory>

#include "common.hpp"
#include "dlpack_exchange.hpp"

namespace tessel::python {

// ---- shared by every protocol (interop.cpp) ----
// DeviceError naming `op` when cuda:index is not usable in this process.
void check_cuda_device(int index, const char* op);
// ValueError naming `op` for a null data pointer of a non-empty shape (numel also rejects
// negative dimensions).
void check_data_pointer(const void* data, const Shape& shape, const char* op);
// Wraps foreign memory (element 0 at `data`, strides in elements) as an Array without copying;
// keep_alive releases the producer when the last view dies. Null data only for empty arrays.
Array wrap_foreign(void* data, const Shape& shape, const Strides& strides, DType dtype, Device device,
                   std::shared_ptr<void> keep_alive, const char* op, bool read_only);
// device= and copy= of an import: a copy to the device or a plain copy when asked.
Array finish_import(Array a, nb::handle device, nb::handle copy, const char* op);
// Tessel's current stream of `dev` waits for the work queued so far on a foreign stream (a
// protocol integer: 1 is the legacy default stream, 2 the per-thread one, else a cudaStream_t).
void wait_for_foreign_stream(Device dev, std::intptr_t foreign);
// The consumer's stream (a DLPack stream integer: 1 the legacy default stream, 2 the per-thread
// one, -1 no synchronization, else a cudaStream_t) waits for tessel's current stream of the
// array's device and for the array's pending write.
void hand_over_to_consumer_stream(const Array& a, std::intptr_t consumer);

// ---- DLPack (interop_dlpack.cpp) ----
dlpack::DLDataType dl_dtype(DType d);
DType dtype_from_dl(dlpack::DLDataType t, const char* op);
// Describes `a` in t; shape and strides point to storage the caller keeps alive.
void fill_tensor(dlpack::DLTensor& t, const Array& a, const std::int64_t* shape, const std::int64_t* strides);
// A versioned managed tensor that owns a reference to `a` (the storage lives until the deleter).
dlpack::DLManagedTensorVersioned* new_versioned(const Array& a, bool copied);
// Runs a managed tensor's deleter when the last holder of the result goes, with the GIL held
// (NumPy's deleter touches Python objects).
template <class Managed>
std::shared_ptr<void> dlpack_keep_alive(Managed* m) {
  return std::shared_ptr<void>(m, [](void* p) {
    auto* managed = static_cast<Managed*>(p);
    if (managed->deleter == nullptr) return;
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
    PyGILState_STATE state = PyGILState_Ensure();
    managed->deleter(managed);
    PyGILState_Release(state);
  });
}
// Wraps a DLTensor the caller owns through keep_alive (which runs the producer's deleter when
// the last view dies, or at once when this throws) as a tessel array; then device=/copy=.
nb::object import_dltensor(const dlpack::DLTensor& tensor, std::shared_ptr<void> keep_alive, bool read_only,
                           nb::handle device, nb::handle copy);
void register_dlpack(nb::module_& m);

// ---- the DLPack C exchange API (interop_dlpack_exchange.cpp) ----
// ts.from_dlpack(x) through the table of x's type when it has one and the fast path is on; an
// invalid object means "not handled here" (the caller falls back to __dlpack__).
nb::object exchange_import_if_available(nb::handle x, nb::handle device, nb::handle copy);
void register_dlpack_exchange(nb::module_& m);
// The name of the Python exception a C++ exception maps to in the bindings ("TypeError" for a
// DTypeError, "ValueError", "MemoryError", else "RuntimeError"), for C tables that report errors
// by name.
const char* python_error_kind(const std::exception& e);

// ---- __cuda_array_interface__ (interop_cuda_array_interface.cpp) ----
void register_cuda_array_interface(nb::module_& m);

}  // namespace tessel::python

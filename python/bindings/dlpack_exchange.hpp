#pragma once
// The DLPack ABI as tessel's bindings use it: the tensor structs of dlpack.h 1.x and the C
// exchange API table of DLPack 1.2/1.3 (DLPackExchangeAPI). Written from the specification
// (dlpack.h); only the members tessel reads or fills are named, in the specification's order.
//
// The exchange API lets two libraries hand tensors over without Python: a producer type carries
// a class attribute `__dlpack_c_exchange_api__` (older name `__c_dlpack_exchange_api__`), a
// PyCapsule named "dlpack_exchange_api" that points to a process-lifetime DLPackExchangeAPI.
// Its functions do no stream synchronization ("no_sync"): the consumer asks current_work_stream
// for the producer's current stream of the device and orders its own work after it.
#include <cstdint>

namespace tessel::python::dlpack {

enum DeviceTypeCode : std::int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum DataTypeCode : std::uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

struct DLDevice {
  std::int32_t device_type;  // a DeviceTypeCode (a C enum: 4 bytes)
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null means C-contiguous
  std::uint64_t byte_offset;
};
// The pre-1.0 ("legacy") managed tensor.
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};
// Everything up to `flags` stays where it is in every 1.x (and later) version, so the deleter
// can be called whatever the minor version says.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};
constexpr std::uint64_t kFlagReadOnly = 1ULL << 0;
constexpr std::uint64_t kFlagIsCopied = 1ULL << 1;

// Capsule names of the Python protocol (__dlpack__) and of the exchange API attribute.
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kUsedLegacyName = "used_dltensor";
constexpr const char* kExchangeCapsuleName = "dlpack_exchange_api";
constexpr const char* kExchangeAttribute = "__dlpack_c_exchange_api__";
constexpr const char* kExchangeAttributeOld = "__c_dlpack_exchange_api__";

// ---- the C exchange API (every function returns 0 on success, -1 on failure) ----
// Allocates a new tensor of the prototype's dtype, shape and device in the producer. Failure is
// reported through set_error(error_ctx, kind, message) (kind: a Python exception name); callable
// without the GIL.
using ManagedTensorAllocator = int (*)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                       void (*set_error)(void* error_ctx, const char* kind, const char* message));
// An owning managed tensor viewing py_object (an instance of the type the table came from).
// Failure: -1 with a Python exception set. GIL held.
using ManagedTensorFromPyObjectNoSync = int (*)(void* py_object, DLManagedTensorVersioned** out);
// A new producer object owning `tensor` (ownership is taken, on failure too). GIL held.
using ManagedTensorToPyObjectNoSync = int (*)(DLManagedTensorVersioned* tensor, void** out_py_object);
// Fills a non-owning DLTensor valid while py_object lives unchanged (may be null in a table).
using DLTensorFromPyObjectNoSync = int (*)(void* py_object, DLTensor* out);
// The producer's current work stream of a device (a cudaStream_t; null for CPU devices and for
// CUDA's legacy default stream).
using CurrentWorkStream = int (*)(std::int32_t device_type, std::int32_t device_id, void** out_current_stream);

// The stable head of every version of the table: consumers check version.major and may walk
// prev_api to an older table whose major they support.
struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;
};
struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  ManagedTensorAllocator managed_tensor_allocator;
  ManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  ManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  CurrentWorkStream current_work_stream;
};
// The table layout above is the one of DLPack 1.2 and 1.3.
constexpr DLPackVersion kExchangeVersion{1, 3};

}  // namespace tessel::python::dlpack

#pragma once
// Devices: the CPU and CUDA GPUs, enumeration, properties and the current device.
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace tessel {

enum class DeviceType : std::uint8_t { cpu = 0, cuda = 1 };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // always 0 for the CPU

  static Device cpu() { return Device{DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return Device{DeviceType::cuda, index}; }
  // Parses "cpu", "cuda", "cuda:N"; raises DeviceError for anything else.
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;  // "cpu" or "cuda:N"
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
  friend bool operator!=(Device a, Device b) { return !(a == b); }
};

struct DeviceProperties {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int multiprocessors = 0;
  std::size_t total_memory = 0;       // bytes
  std::size_t l2_cache = 0;           // bytes
  std::size_t shared_memory_per_block_optin = 0;
  int max_threads_per_multiprocessor = 0;
  int warp_size = 32;
  int clock_khz = 0;                  // peak SM clock
  int memory_clock_khz = 0;           // peak memory clock
  int memory_bus_width_bits = 0;
  // Estimates from the datasheet formula, not measurements.
  double peak_bandwidth_bytes_per_s = 0;   // 2 * memory clock * bus width / 8 (double data rate)
  double peak_fp32_flops = 0;              // SMs * FP32 lanes per SM * 2 * clock
  double peak_fp64_flops = 0;
  double peak_bf16_tensor_flops = 0;       // dense, 0 where unknown
};

// False when tessel was built without CUDA, when no driver or GPU is present, or with TESSEL_FORCE_CPU=1.
// Never throws. The first call that finds no GPU logs once why the CPU backend is used.
bool cuda_available();
// Why CUDA is unavailable ("" when it is available).
std::string cuda_unavailable_reason();
int device_count();
// Raises DeviceError for an index outside [0, device_count()).
const DeviceProperties& device_properties(int index);
void check_device_index(int index, const char* op);

int driver_version();   // e.g. 13000; 0 without a driver
int runtime_version();  // 0 without CUDA

// The current CUDA device of the calling thread (cudaGetDevice); the CPU when CUDA is unavailable.
Device current_device();
void set_current_device(int index);
// The default device for new arrays: cuda:current when available, else cpu.
Device default_device();

// Whether copies between two GPUs go directly, peer to peer (NVLink or PCIe). The first call for
// a pair enables peer access both ways (once per process; access another library enabled counts).
// False when the GPUs cannot reach each other or with TESSEL_PEER_ACCESS=0: the driver then
// stages their copies through host memory. DeviceError for an index that does not exist.
bool peer_access(Device a, Device b);

// Waits for all work on the device to finish. A no-op for the CPU.
void synchronize(Device device);
void synchronize();  // the current device

// Makes a CUDA device current for a scope and restores the caller's device. Every tessel path
// that touches a GPU holds one for the device it works on (a no-op for the CPU). DeviceError for
// an index that does not exist.
//
// Cheap when the device is already current: one cuCtxGetCurrent (no runtime call) compared with
// the device's primary context, remembered from the first switch. Comparing contexts, not a
// cached device index, keeps it right when other code (PyTorch, CuPy, cudaSetDevice) changed the
// current device in between. With one GPU it does nothing. TESSEL_DEVICE_GUARD=0 turns it off,
// only to measure its cost: with several GPUs, work on a non-current device then fails.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) {
    if (device.is_cuda()) enter(device.index);
  }
  // For destructors: a failure to switch leaves the current device as it is instead of throwing.
  DeviceGuard(Device device, std::nothrow_t) noexcept {
    try {
      if (device.is_cuda()) enter(device.index);
    } catch (...) {
    }
  }
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  void enter(int index);
  void switch_to(int index);
  int previous_ = -1;  // the device to restore; -1: nothing was changed
};

namespace detail {
// Whether a build for `architectures` (CMAKE_CUDA_ARCHITECTURES' syntax: "75-real;90a-real;120",
// "native") has code that runs on a GPU of compute capability major.minor: SASS of the same major
// at the same or a lower minor (an `a` variant: the same architecture only), or PTX of the same or
// an older architecture, which the driver compiles.
bool cuda_architectures_cover(const std::string& architectures, int major, int minor);
}  // namespace detail

}  // namespace tessel

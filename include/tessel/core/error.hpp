#pragma once
// The exception hierarchy. Every message names the op and the offending shapes, dtypes or devices.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace tessel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Invalid argument values that are not about shape, dtype or device (a malformed setting, a bad size).
class ValueError : public Error {
 public:
  using Error::Error;
};

class ShapeError : public Error {
 public:
  using Error::Error;
};

class DTypeError : public Error {
 public:
  using Error::Error;
};

class IndexError : public Error {
 public:
  using Error::Error;
};

class DeviceError : public Error {
 public:
  using Error::Error;
};

class OutOfMemory : public Error {
 public:
  using Error::Error;
};

class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code, bool fatal)
      : Error(message), code_(code), fatal_(fatal) {}
  int code() const { return code_; }
  // A sticky error (illegal address, device assert, ...) corrupts the CUDA context:
  // nothing more can run in this process on that device.
  bool fatal() const { return fatal_; }

 private:
  int code_;
  bool fatal_;
};

class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string log)
      : Error(message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

}  // namespace tessel

#pragma once
// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"): cgram
// has no link-time CUDA dependency, and a machine without a driver or a GPU
// gets an error value that says which, never a crash. The types here mirror
// cuda.h's (which is not needed to build).
//
// RAII owners for what the driver hands out: the device's primary context,
// device memory, modules (PTX loaded with cuModuleLoadDataEx), streams and
// events. Each keeps the driver alive (shared_ptr) and releases its handle
// when it goes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "error.h"

namespace cgram::gpu {

// The driver's handles (opaque pointers and integers, as cuda.h has them).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

// The entry points cgram uses, resolved by name from the library.
struct DriverApi {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned int, int*, void**);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuStreamCreate)(CUstream*, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned int);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
};

class Driver;
using DriverPtr = std::shared_ptr<const Driver>;

// Only this file's factories make the classes below (each constructor takes
// a key they alone can name), so a handle is never wrapped twice.
class Key {
  explicit Key() = default;
  friend class Driver;
  friend class Context;
  friend class DeviceBuffer;
  friend class Stream;
  friend class Module;
  friend class EventTimer;
};

// The loaded library. Thread-safe (the driver API is).
class Driver {
 public:
  // dlopen(`library`), every entry point resolved, cuInit(0). The error
  // says what failed: no such library (no NVIDIA driver installed), a
  // missing entry point (a driver too old), or cuInit's own error (no
  // device, a driver/kernel-module mismatch).
  static Result<DriverPtr> load(const std::string& library = "libcuda.so.1");
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  explicit Driver(Key) {}
  const DriverApi& api() const { return api_; }
  const std::string& library() const { return library_; }
  // A message for a failed call: "cuMemAlloc: out of memory (2)"; nullopt for success.
  std::optional<Error> check(CUresult result, std::string_view call) const;

  struct Device {
    int ordinal = 0;
    std::string name;
    int major = 0, minor = 0;        // compute capability
    size_t memory_bytes = 0;
    double bandwidth_gb_s = 0;       // peak, from the memory clock and bus width (0 when unknown)
  };
  Result<std::vector<Device>> devices() const;

 private:
  void* handle_ = nullptr;
  std::string library_;
  DriverApi api_{};
};

// The device's primary context, current on the calling thread while used.
class Context {
 public:
  static Result<std::unique_ptr<Context>> open(DriverPtr driver, int ordinal = 0);
  Context(Key, DriverPtr driver, CUdevice device, CUcontext context)
      : driver_(std::move(driver)), device_(device), context_(context) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Driver& driver() const { return *driver_; }
  const DriverPtr& driver_ptr() const { return driver_; }
  // Makes the context current on this thread (each call that uses it does).
  std::optional<Error> make_current() const;

 private:
  DriverPtr driver_;
  CUdevice device_;
  CUcontext context_;
};

class Stream;

// Device memory, freed when it goes.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocate(const Context& context, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(Key, DriverPtr driver, CUdeviceptr pointer, size_t bytes)
      : driver_(std::move(driver)), pointer_(pointer), bytes_(bytes) {}
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr get() const { return pointer_; }
  size_t bytes() const { return bytes_; }
  // Copies on `stream` (asynchronous: the host memory must stay until the
  // stream is synchronized). Refused past the buffer's end.
  std::optional<Error> upload(const Stream& stream, const void* data, size_t bytes, size_t offset = 0) const;
  std::optional<Error> download(const Stream& stream, void* data, size_t bytes, size_t offset = 0) const;

 private:
  void release();
  DriverPtr driver_;
  CUdeviceptr pointer_ = 0;
  size_t bytes_ = 0;
};

class Stream {
 public:
  static Result<std::unique_ptr<Stream>> create(const Context& context);
  Stream(Key, DriverPtr driver, CUstream stream) : driver_(std::move(driver)), stream_(stream) {}
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream get() const { return stream_; }
  const Driver& driver() const { return *driver_; }
  std::optional<Error> synchronize() const;

 private:
  DriverPtr driver_;
  CUstream stream_;
};

// A PTX module and its kernels.
class Module {
 public:
  // The JIT log is in the error when the driver refuses the PTX.
  static Result<std::unique_ptr<Module>> load_ptx(const Context& context, const std::string& ptx);
  Module(Key, DriverPtr driver, CUmodule module) : driver_(std::move(driver)), module_(module) {}
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  Result<CUfunction> function(const std::string& name) const;
  // Launches `function` on `stream` with the kernel parameters `args` (each
  // a pointer to the parameter's value, as cuLaunchKernel takes them).
  std::optional<Error> launch(CUfunction function, const Stream& stream, std::array<unsigned, 3> grid,
                              std::array<unsigned, 3> block, std::span<void*> args) const;

 private:
  DriverPtr driver_;
  CUmodule module_;
};

// Elapsed time between two points of a stream, in milliseconds.
class EventTimer {
 public:
  static Result<std::unique_ptr<EventTimer>> create(const Context& context);
  EventTimer(Key, DriverPtr driver, CUevent begin, CUevent end)
      : driver_(std::move(driver)), begin_(begin), end_(end) {}
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  std::optional<Error> start(const Stream& stream);
  Result<double> stop(const Stream& stream);

 private:
  DriverPtr driver_;
  CUevent begin_, end_;
};

}  // namespace cgram::gpu

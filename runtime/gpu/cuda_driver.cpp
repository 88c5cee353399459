#include "cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <utility>

namespace cgram::gpu {
namespace {

constexpr CUresult kSuccess = 0;
// cuDeviceGetAttribute's attributes (cuda.h's CUdevice_attribute).
constexpr int kMemoryClockRate = 36;  // kHz
constexpr int kMemoryBusWidth = 37;   // bits
constexpr int kComputeCapabilityMajor = 75;
constexpr int kComputeCapabilityMinor = 76;
// cuModuleLoadDataEx's options (cuda.h's CUjit_option).
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSize = 6;

// The versioned names cuda.h maps the calls to (the _v2 ABI).
struct Symbol {
  const char* name;
  void** slot;
};

template <typename F>
void** slot(F*& f) {
  return reinterpret_cast<void**>(&f);
}

std::vector<Symbol> symbols(DriverApi& a) {
  return {
      {"cuInit", slot(a.cuInit)},
      {"cuGetErrorString", slot(a.cuGetErrorString)},
      {"cuDeviceGetCount", slot(a.cuDeviceGetCount)},
      {"cuDeviceGet", slot(a.cuDeviceGet)},
      {"cuDeviceGetName", slot(a.cuDeviceGetName)},
      {"cuDeviceGetAttribute", slot(a.cuDeviceGetAttribute)},
      {"cuDeviceTotalMem_v2", slot(a.cuDeviceTotalMem)},
      {"cuDevicePrimaryCtxRetain", slot(a.cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease_v2", slot(a.cuDevicePrimaryCtxRelease)},
      {"cuCtxSetCurrent", slot(a.cuCtxSetCurrent)},
      {"cuMemAlloc_v2", slot(a.cuMemAlloc)},
      {"cuMemFree_v2", slot(a.cuMemFree)},
      {"cuMemcpyHtoDAsync_v2", slot(a.cuMemcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync_v2", slot(a.cuMemcpyDtoHAsync)},
      {"cuModuleLoadDataEx", slot(a.cuModuleLoadDataEx)},
      {"cuModuleUnload", slot(a.cuModuleUnload)},
      {"cuModuleGetFunction", slot(a.cuModuleGetFunction)},
      {"cuLaunchKernel", slot(a.cuLaunchKernel)},
      {"cuStreamCreate", slot(a.cuStreamCreate)},
      {"cuStreamDestroy_v2", slot(a.cuStreamDestroy)},
      {"cuStreamSynchronize", slot(a.cuStreamSynchronize)},
      {"cuEventCreate", slot(a.cuEventCreate)},
      {"cuEventDestroy_v2", slot(a.cuEventDestroy)},
      {"cuEventRecord", slot(a.cuEventRecord)},
      {"cuEventSynchronize", slot(a.cuEventSynchronize)},
      {"cuEventElapsedTime", slot(a.cuEventElapsedTime)},
  };
}

}  // namespace

Result<DriverPtr> Driver::load(const std::string& library) {
  auto driver = std::make_shared<Driver>(Key());
  driver->library_ = library;
  driver->handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!driver->handle_) {
    const char* why = dlerror();
    return Error{ErrorCode::Backend,
                 fmt::format("cannot load the CUDA driver ({}): {} (is the NVIDIA driver installed?)", library,
                             why ? why : "unknown error")};
  }
  for (const Symbol& s : symbols(driver->api_)) {
    *s.slot = dlsym(driver->handle_, s.name);
    if (!*s.slot)
      return Error{ErrorCode::Backend,
                   fmt::format("the CUDA driver {} lacks {} (a driver too old for cgram)", library, s.name)};
  }
  if (auto error = driver->check(driver->api_.cuInit(0), "cuInit")) return *error;
  return DriverPtr(std::move(driver));
}

Driver::~Driver() {
  if (handle_) dlclose(handle_);
}

std::optional<Error> Driver::check(CUresult result, std::string_view call) const {
  if (result == kSuccess) return std::nullopt;
  const char* text = nullptr;
  if (api_.cuGetErrorString && api_.cuGetErrorString(result, &text) != kSuccess) text = nullptr;
  return Error{ErrorCode::Backend, fmt::format("{}: {} ({})", call, text ? text : "unknown CUDA error", result)};
}

Result<std::vector<Driver::Device>> Driver::devices() const {
  int count = 0;
  if (auto error = check(api_.cuDeviceGetCount(&count), "cuDeviceGetCount")) return *error;
  std::vector<Device> out;
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (auto error = check(api_.cuDeviceGet(&device, i), "cuDeviceGet")) return *error;
    Device d;
    d.ordinal = i;
    char name[256] = {};
    if (auto error = check(api_.cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName")) return *error;
    d.name = name;
    api_.cuDeviceGetAttribute(&d.major, kComputeCapabilityMajor, device);
    api_.cuDeviceGetAttribute(&d.minor, kComputeCapabilityMinor, device);
    api_.cuDeviceTotalMem(&d.memory_bytes, device);
    int clock_khz = 0, bus_bits = 0;
    if (api_.cuDeviceGetAttribute(&clock_khz, kMemoryClockRate, device) == kSuccess &&
        api_.cuDeviceGetAttribute(&bus_bits, kMemoryBusWidth, device) == kSuccess)
      d.bandwidth_gb_s = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
    out.push_back(std::move(d));
  }
  return out;
}

// ---------------------------------------------------------------------------

Result<std::unique_ptr<Context>> Context::open(DriverPtr driver, int ordinal) {
  const DriverApi& api = driver->api();
  CUdevice device = 0;
  if (auto error = driver->check(api.cuDeviceGet(&device, ordinal), fmt::format("cuDeviceGet({})", ordinal)))
    return *error;
  CUcontext context = nullptr;
  if (auto error = driver->check(api.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain"))
    return *error;
  auto out = std::make_unique<Context>(Key(), std::move(driver), device, context);
  if (auto error = out->make_current()) return *error;
  return out;
}

Context::~Context() { driver_->api().cuDevicePrimaryCtxRelease(device_); }

std::optional<Error> Context::make_current() const {
  return driver_->check(driver_->api().cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

// ---------------------------------------------------------------------------

Result<DeviceBuffer> DeviceBuffer::allocate(const Context& context, size_t bytes) {
  if (auto error = context.make_current()) return *error;
  CUdeviceptr pointer = 0;
  // A zero-byte buffer is legal here, not for the driver.
  if (bytes > 0) {
    if (auto error = context.driver().check(context.driver().api().cuMemAlloc(&pointer, bytes),
                                            fmt::format("cuMemAlloc({} bytes)", bytes)))
      return *error;
  }
  return DeviceBuffer(Key(), context.driver_ptr(), pointer, bytes);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : driver_(std::move(other.driver_)),
      pointer_(std::exchange(other.pointer_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    driver_ = std::move(other.driver_);
    pointer_ = std::exchange(other.pointer_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (pointer_ != 0 && driver_) driver_->api().cuMemFree(pointer_);
  pointer_ = 0;
  bytes_ = 0;
}

std::optional<Error> DeviceBuffer::upload(const Stream& stream, const void* data, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    return Error{ErrorCode::Backend,
                 fmt::format("upload of {} bytes at {} past a buffer of {}", bytes, offset, bytes_)};
  if (bytes == 0) return std::nullopt;
  return driver_->check(driver_->api().cuMemcpyHtoDAsync(pointer_ + offset, data, bytes, stream.get()),
                        "cuMemcpyHtoDAsync");
}

std::optional<Error> DeviceBuffer::download(const Stream& stream, void* data, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    return Error{ErrorCode::Backend,
                 fmt::format("download of {} bytes at {} past a buffer of {}", bytes, offset, bytes_)};
  if (bytes == 0) return std::nullopt;
  return driver_->check(driver_->api().cuMemcpyDtoHAsync(data, pointer_ + offset, bytes, stream.get()),
                        "cuMemcpyDtoHAsync");
}

// ---------------------------------------------------------------------------

Result<std::unique_ptr<Stream>> Stream::create(const Context& context) {
  if (auto error = context.make_current()) return *error;
  CUstream stream = nullptr;
  if (auto error = context.driver().check(context.driver().api().cuStreamCreate(&stream, 0), "cuStreamCreate"))
    return *error;
  return std::make_unique<Stream>(Key(), context.driver_ptr(), stream);
}

Stream::~Stream() { driver_->api().cuStreamDestroy(stream_); }

std::optional<Error> Stream::synchronize() const {
  return driver_->check(driver_->api().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

// ---------------------------------------------------------------------------

Result<std::unique_ptr<Module>> Module::load_ptx(const Context& context, const std::string& ptx) {
  if (auto error = context.make_current()) return *error;
  std::string log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CUmodule module = nullptr;
  // The PTX text must end with a NUL: std::string's c_str() has one.
  CUresult result = context.driver().api().cuModuleLoadDataEx(&module, ptx.c_str(), 2, options, values);
  if (auto error = context.driver().check(result, "cuModuleLoadDataEx")) {
    log.resize(log.find('\0') == std::string::npos ? log.size() : log.find('\0'));
    if (!log.empty()) error->message += ": " + log;
    return *error;
  }
  return std::make_unique<Module>(Key(), context.driver_ptr(), module);
}

Module::~Module() { driver_->api().cuModuleUnload(module_); }

Result<CUfunction> Module::function(const std::string& name) const {
  CUfunction function = nullptr;
  if (auto error = driver_->check(driver_->api().cuModuleGetFunction(&function, module_, name.c_str()),
                                  fmt::format("cuModuleGetFunction({})", name)))
    return *error;
  return function;
}

std::optional<Error> Module::launch(CUfunction function, const Stream& stream, std::array<unsigned, 3> grid,
                                    std::array<unsigned, 3> block, std::span<void*> args) const {
  return driver_->check(driver_->api().cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                                                      block[2], 0, stream.get(), args.data(), nullptr),
                        "cuLaunchKernel");
}

// ---------------------------------------------------------------------------

Result<std::unique_ptr<EventTimer>> EventTimer::create(const Context& context) {
  if (auto error = context.make_current()) return *error;
  const Driver& driver = context.driver();
  CUevent begin = nullptr, end = nullptr;
  if (auto error = driver.check(driver.api().cuEventCreate(&begin, 0), "cuEventCreate")) return *error;
  if (auto error = driver.check(driver.api().cuEventCreate(&end, 0), "cuEventCreate")) {
    driver.api().cuEventDestroy(begin);
    return *error;
  }
  return std::make_unique<EventTimer>(Key(), context.driver_ptr(), begin, end);
}

EventTimer::~EventTimer() {
  driver_->api().cuEventDestroy(begin_);
  driver_->api().cuEventDestroy(end_);
}

std::optional<Error> EventTimer::start(const Stream& stream) {
  return driver_->check(driver_->api().cuEventRecord(begin_, stream.get()), "cuEventRecord");
}

Result<double> EventTimer::stop(const Stream& stream) {
  if (auto error = driver_->check(driver_->api().cuEventRecord(end_, stream.get()), "cuEventRecord")) return *error;
  if (auto error = driver_->check(driver_->api().cuEventSynchronize(end_), "cuEventSynchronize")) return *error;
  float ms = 0;
  if (auto error = driver_->check(driver_->api().cuEventElapsedTime(&ms, begin_, end_), "cuEventElapsedTime"))
    return *error;
  return static_cast<double>(ms);
}

}  // namespace cgram::gpu

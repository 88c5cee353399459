/* A stand-in for libcuda.so.1, for the driver loader's tests on machines
 * without one. Built twice: with CGRAM_FAKE_CUDA_COMPLETE, every entry point
 * cgram resolves exists and cuInit answers "no device" (as the real driver
 * does on a machine without a GPU); without it, only cuInit exists (a
 * driver too old). Only cuInit and cuGetErrorString are ever called. */
#define CUDA_ERROR_NO_DEVICE 100

int cuInit(unsigned int flags) {
  (void)flags;
  return CUDA_ERROR_NO_DEVICE;
}

#ifdef CGRAM_FAKE_CUDA_COMPLETE
int cuGetErrorString(int error, const char** text) {
  *text = error == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
  return 0;
}
#define NEVER_CALLED(name) \
  void name(void) {}
NEVER_CALLED(cuDeviceGetCount)
NEVER_CALLED(cuDeviceGet)
NEVER_CALLED(cuDeviceGetName)
NEVER_CALLED(cuDeviceGetAttribute)
NEVER_CALLED(cuDeviceTotalMem_v2)
NEVER_CALLED(cuDevicePrimaryCtxRetain)
NEVER_CALLED(cuDevicePrimaryCtxRelease_v2)
NEVER_CALLED(cuCtxSetCurrent)
NEVER_CALLED(cuMemAlloc_v2)
NEVER_CALLED(cuMemFree_v2)
NEVER_CALLED(cuMemcpyHtoDAsync_v2)
NEVER_CALLED(cuMemcpyDtoHAsync_v2)
NEVER_CALLED(cuModuleLoadDataEx)
NEVER_CALLED(cuModuleUnload)
NEVER_CALLED(cuModuleGetFunction)
NEVER_CALLED(cuLaunchKernel)
NEVER_CALLED(cuStreamCreate)
NEVER_CALLED(cuStreamDestroy_v2)
NEVER_CALLED(cuStreamSynchronize)
NEVER_CALLED(cuEventCreate)
NEVER_CALLED(cuEventDestroy_v2)
NEVER_CALLED(cuEventRecord)
NEVER_CALLED(cuEventSynchronize)
NEVER_CALLED(cuEventElapsedTime)
#endif

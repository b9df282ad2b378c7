/* Minimal stand-in for the NVIDIA driver library (libcuda.so.1) so that
 * vLLM's compiled CUDA extension modules can be *loaded* (and register their
 * torch ops) on a machine without a GPU driver. Every entry point fails with
 * CUDA_ERROR_NO_DEVICE (100); nothing here can run a kernel. The symbol list
 * is the set of cu* symbols the vllm 0.33.0 wheel's .so files import. */
#define STUB(name) int name(void) { return 100; }
STUB(cuCtxGetCurrent) STUB(cuCtxSetCurrent) STUB(cuDeviceGetAttribute)
STUB(cuDevicePrimaryCtxRetain) STUB(cuDriverGetVersion) STUB(cuGetProcAddress_v2)
STUB(cuGetProcAddress) STUB(cuInit) STUB(cuDeviceGetCount) STUB(cuDeviceGet)
STUB(cuMemAddressFree) STUB(cuMemAddressReserve) STUB(cuMemCreate)
STUB(cuMemGetAllocationGranularity) STUB(cuMemMap) STUB(cuMemRelease)
STUB(cuMemSetAccess) STUB(cuMemUnmap) STUB(cuPointerGetAttribute)
STUB(cuTensorMapEncodeTiled)
int cuGetErrorString(int err, const char **s) { static const char m[] = "libcuda stub: no device"; if (s) *s = m; return 0; }

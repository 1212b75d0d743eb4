/*
 * A fake libcuda.so.1 for gpucheck's tests: just the driver calls truth_table's child
 * reads (cuDeviceGetCount, cuDeviceGet, cuDevicePrimaryCtxGetState, cuCtxGetCurrent)
 * and the two a test "framework" makes (cuInit, cuDevicePrimaryCtxRetain). Like the
 * real driver, every call but cuInit returns CUDA_ERROR_NOT_INITIALIZED (3) before cuInit.
 * Its own prototypes: no CUDA header is needed to build it.
 */
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;

enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_INITIALIZED = 3,
       CUDA_ERROR_INVALID_DEVICE = 101 };

static int initialized;
static int primary_active;
static CUcontext current;
static int primary_token;

CUresult cuInit(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    initialized = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
    primary_active = 1;
    current = &primary_token;
    *context = current;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int *flags, int *active) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = primary_active;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *context) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    *context = current;
    return CUDA_SUCCESS;
}

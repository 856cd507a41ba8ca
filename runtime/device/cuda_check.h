/*
 * CUDA errors as -errno, for the files that include the CUDA runtime
 * (runtime/device/device_cuda.cu, tools/bench/mlp_cuda.cu); nothing else includes
 * this header. cudaError_t maps to -ENOMEM (allocation), -ENODEV (no
 * driver, no device, bad ordinal) or -EIO (anything else); the CUDA name
 * and string go into the caller's error message.
 */
#ifndef SR_CUDA_CHECK_H
#define SR_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <errno.h>

/* -errno for @e (not cudaSuccess); clears a non-sticky error so that it
 * does not resurface in a later call. */
static inline int sr__cuda_errno(cudaError_t e)
{
	int err;

	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		err = -ENOMEM;
		break;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorInvalidDevice:
	case cudaErrorDevicesUnavailable:
		err = -ENODEV;
		break;
	default:
		err = -EIO;
		break;
	}
	(void)cudaGetLastError();
	return err;
}

/* Report @e through @report (printf-like, (int err, fmt, ...) -> err):
 * "cuda: WHAT: string (name)"; evaluates to the -errno. */
#define SR__CUDA_FAIL(report, e, what)                                                  \
	report(sr__cuda_errno(e), "cuda: %s: %s (%s)", (what), cudaGetErrorString(e),   \
	       cudaGetErrorName(e))

/* Return the reported -errno from the calling function when @call fails. */
#define SR__CU(report, call, what)                                                      \
	do {                                                                            \
		cudaError_t e_ = (call);                                                \
		if (e_ != cudaSuccess)                                                  \
			return SR__CUDA_FAIL(report, e_, what);                         \
	} while (0)

#endif

/*
 * Internal interface between the generic device layer (device_api.c: batch
 * bookkeeping, backpressure, DLPack, the host backend) and the CUDA backend
 * (device_cuda.cu, the only file that includes the CUDA runtime, or its
 * stand-in device_nocuda.c). Plain C, usable from C++ (nvcc): no C11 atomics
 * in here; the backend sees batches by index only.
 */
#ifndef SR_DEVICE_PRIV_H
#define SR_DEVICE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stepring/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Columns copied into a device batch, in this order. */
enum {
	SR__COL_OBS = 0,
	SR__COL_REWARD,
	SR__COL_TERMINATED,
	SR__COL_TRUNCATED,
	SR__COL_FLAGS,
	SR__COL_ENV_ID,
	SR__NCOLS,
};

/*
 * Source of one submit: for each column, one or two contiguous pieces
 * (two where a ring range wraps). piece[1] has n - n0 rows; a NULL column
 * (flags from an sr_batch) is zero-filled on the device.
 */
struct sr__cols {
	uint32_t n;                     /* rows in all */
	uint32_t n0;                    /* rows in the first piece */
	const void *piece[2][SR__NCOLS];
	size_t width[SR__NCOLS];        /* bytes per row of each column */
};

/*
 * The MLP as the kernels see it: layer l maps dims[l] -> dims[l + 1]; its
 * weights W[out][in] (row-major) are followed by bias[out], starting at
 * params + off[l]; wt holds the same with each W transposed (W[in][out]),
 * the layout both the host loop and the kernels read. The last layer has no activation: argmax (discrete) or
 * tanh scaled to [low, high] (box).
 */
#define SR__POLICY_MAX_LAYERS 66
struct sr__policy_desc {
	uint32_t nlayers;   /* depth + 1 */
	uint32_t dims[SR__POLICY_MAX_LAYERS + 1];
	size_t off[SR__POLICY_MAX_LAYERS];
	uint32_t activation; /* enum sr_activation */
	uint32_t act_kind;   /* enum sr_space_kind */
	uint32_t max_dim;    /* widest layer */
	const float *params;
	const float *wt;     /* the same, each layer's W transposed: W[in][out], then bias */
	size_t nparams;
	const float *scale;  /* box: (high - low) / 2 per output, else NULL */
	const float *shift;  /* box: (high + low) / 2 per output */
};

const struct sr__policy_desc *sr__policy_desc(const sr_policy *p);

/*
 * The policy's tanh, shared by the host loop and the kernels: a Pade (7,6)
 * rational approximation on (-4.97, 4.97), +-1 outside, clamped to [-1, 1]
 * (|error| < 1e-4; monotone up to rounding, a few ulp near saturation).
 * Every operation is one correctly rounded IEEE operation in a fixed order
 * (no contraction: the library builds with -ffp-contract=off, the kernels
 * spell the operations as __f*_rn intrinsics), so host and GPU compute the
 * same bits; and unlike libm's tanhf it vectorizes.
 */
#ifdef __CUDACC__
#define SR__HD static __device__ __forceinline__
#define SR__MUL(a, b) __fmul_rn(a, b)
#define SR__ADD(a, b) __fadd_rn(a, b)
#define SR__DIV(a, b) __fdiv_rn(a, b)
#else
#define SR__HD static inline
#define SR__MUL(a, b) ((a) * (b))
#define SR__ADD(a, b) ((a) + (b))
#define SR__DIV(a, b) ((a) / (b))
#endif
SR__HD float sr__tanh(float x)
{
	float x2, n, d, y;

	/* Beyond 4.97 the rational overshoots 1, then wanders: saturate. */
	if (x <= -4.97f || x >= 4.97f)
		return x < 0.0f ? -1.0f : 1.0f;
	x2 = SR__MUL(x, x);
	n = SR__MUL(x, SR__ADD(135135.0f,
			       SR__MUL(x2, SR__ADD(17325.0f, SR__MUL(x2, SR__ADD(378.0f, x2))))));
	d = SR__ADD(135135.0f,
		    SR__MUL(x2, SR__ADD(62370.0f, SR__MUL(x2, SR__ADD(3150.0f, SR__MUL(x2, 28.0f))))));
	y = SR__DIV(n, d);
	return y < -1.0f ? -1.0f : y > 1.0f ? 1.0f : y;
}

/* CUDA backend. The device layer owns the batch structs; the backend fills
 * their data pointers at open and works on them by index. */
struct sr__cuda;

bool sr__cuda_available(int index);
/* One line about GPU @index; 0 or -ENODEV. */
int sr__cuda_describe(int index, char *buf, size_t len);
/* Open device opts->index with @nb batches; fills batches[i] pointers,
 * stream, dl_device_*; @name gets the GPU name; *registered / *staging say
 * how copies from the ring will go. 0 or -errno (message set). */
int sr__cuda_open(const sr_device_opts *opts, uint32_t nb, sr_device_batch *batches,
		  struct sr__cuda **out, char *name, size_t name_len, bool *registered,
		  bool *staging);
void sr__cuda_close(struct sr__cuda *c);
/* Enqueue the H2D copies of @src into batch @bi and record its event. */
int sr__cuda_copy(struct sr__cuda *c, uint32_t bi, const struct sr__cols *src);
/* Wait for batch @bi's last recorded event. */
int sr__cuda_sync(struct sr__cuda *c, uint32_t bi);
/* Upload the policy's weights (replacing any earlier one). */
int sr__cuda_set_policy(struct sr__cuda *c, const struct sr__policy_desc *pd);
/* Enqueue the policy on batch @bi's obs (n rows), writing its actions. */
int sr__cuda_forward(struct sr__cuda *c, uint32_t bi, uint32_t n);
/* Actions of batch @bi to the host: src NULL = the batch's own actions;
 * device pointer: D2H into the pinned buffer; host pointer: as is. */
int sr__cuda_actions(struct sr__cuda *c, uint32_t bi, uint32_t n, const void *src,
		     const void **host);

/* For tests and benchmarks: copy @len bytes of device memory to the host
 * (synchronous); and the reference H2D bandwidth, GB/s, of cudaMemcpy from
 * a pinned buffer of @bytes (best of @reps). 0 or -errno. */
int sr__cuda_d2h(int index, void *dst, const void *src, size_t len);
int sr__cuda_pinned_h2d(int index, size_t bytes, int reps, double *gbs);

/* Bind the calling thread to the CPUs near CUDA device @dev (hwloc's CUDA
 * helper, in affinity.c; -ENOSYS without CUDA); @buf gets the list. */
int sr__bind_self_near_cuda(int dev, char *buf, size_t len);
/* The CPUs near CUDA device @dev as a list (hwloc's CUDA helper, in
 * affinity.c): 0, -ENOSYS (no CUDA in this build, no topology), -ENODEV
 * (no such GPU, or hwloc does not know where it is). */
int sr__cuda_local_cpus(int dev, char *buf, size_t len);

/* The pool's cuda device (runtime/device.h) runs @p in its policy op.
 * -ENOSYS for any other device. */
struct sr__device;
int sr__device_set_policy(struct sr__device *dev, sr_policy *p);

#ifdef __cplusplus
}
#endif
#endif

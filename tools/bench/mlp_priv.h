/*
 * Shared by the host MLP (mlp.c) and its CUDA kernels (mlp_cuda.cu, or the
 * stand-in mlp_nocuda.c): the layer layout and the tanh both compute with.
 * Plain C, usable from C++ (nvcc).
 */
#ifndef SR_BENCH_MLP_PRIV_H
#define SR_BENCH_MLP_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Layer l maps dims[l] -> dims[l + 1]. Starting at wt + off[l] come its
 * weights transposed, W[in][out] row-major, then bias[out]: the layout both
 * the host loop and the kernels read. The last layer has no activation:
 * argmax (discrete) or tanh scaled to [low, high] (box).
 */
#define MLP_MAX_LAYERS 66
struct mlp_desc {
	uint32_t nlayers;    /* depth + 1 */
	uint32_t dims[MLP_MAX_LAYERS + 1];
	size_t off[MLP_MAX_LAYERS];
	uint32_t activation; /* enum mlp_activation */
	uint32_t act_kind;   /* enum sr_space_kind */
	uint32_t max_dim;    /* widest layer */
	size_t nparams;
	const float *wt;     /* nparams floats */
	const float *scale;  /* box: (high - low) / 2 per output, else NULL */
	const float *shift;  /* box: (high + low) / 2 per output */
};

/* The policy's weights on one GPU (mlp_cuda.cu). */
struct mlp_cuda;

/* Upload @d's weights to GPU @index with scratch for @max_rows rows. */
int mlp_cuda_upload(const struct mlp_desc *d, int index, uint32_t max_rows,
		    struct mlp_cuda **out);
/* Enqueue the forward pass of @n rows (n <= max_rows) on @stream: @obs and
 * @actions are device pointers. */
int mlp_cuda_forward(struct mlp_cuda *c, void *stream, const float *obs, void *actions,
		     uint32_t n);
/* NULL is a no-op. */
void mlp_cuda_free(struct mlp_cuda *c);

/* Record why an mlp_* call failed; returns @err. */
int mlp_errorf(int err, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 2, 3)))
#endif
	;

/*
 * The policy's tanh, shared by the host loop and the kernels: a Pade (7,6)
 * rational approximation on (-4.97, 4.97), +-1 outside, clamped to [-1, 1]
 * (|error| < 1e-4; monotone up to rounding, a few ulp near saturation).
 * Every operation is one correctly rounded IEEE operation in a fixed order
 * (no contraction: the C sources build with -ffp-contract=off, the kernels
 * spell the operations as __f*_rn intrinsics), so host and GPU compute the
 * same bits; and unlike libm's tanhf it vectorizes.
 */
#ifdef __CUDACC__
#define MLP_HD static __device__ __forceinline__
#define MLP_MUL(a, b) __fmul_rn(a, b)
#define MLP_ADD(a, b) __fadd_rn(a, b)
#define MLP_DIV(a, b) __fdiv_rn(a, b)
#else
#define MLP_HD static inline
#define MLP_MUL(a, b) ((a) * (b))
#define MLP_ADD(a, b) ((a) + (b))
#define MLP_DIV(a, b) ((a) / (b))
#endif
MLP_HD float mlp_tanh(float x)
{
	float x2, n, d, y;

	/* Beyond 4.97 the rational overshoots 1, then wanders: saturate. */
	if (x <= -4.97f || x >= 4.97f)
		return x < 0.0f ? -1.0f : 1.0f;
	x2 = MLP_MUL(x, x);
	n = MLP_MUL(x, MLP_ADD(135135.0f,
			       MLP_MUL(x2, MLP_ADD(17325.0f, MLP_MUL(x2, MLP_ADD(378.0f, x2))))));
	d = MLP_ADD(135135.0f,
		    MLP_MUL(x2, MLP_ADD(62370.0f, MLP_MUL(x2, MLP_ADD(3150.0f, MLP_MUL(x2, 28.0f))))));
	y = MLP_DIV(n, d);
	return y < -1.0f ? -1.0f : y > 1.0f ? 1.0f : y;
}

#ifdef __cplusplus
}
#endif
#endif

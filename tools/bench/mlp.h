/*
 * The synthetic MLP policy of the closed-loop benchmarks: obs -> D hidden
 * layers of width W (tanh or relu) -> logits (argmax, int32 actions) or box
 * outputs (tanh scaled to the action bounds, float32 actions). Its cost
 * scales with W and D; it learns nothing.
 *
 * Part of the benchmark library (tools/bench/), not of libstepring: it uses
 * the public API only. On a CUDA device it runs its own kernels on the
 * device batch's stream (mlp_cuda.cu); on the host it runs a loop. Both
 * compute the same bits (see mlp.c).
 *
 * Errors: every function returns 0 or -errno; mlp_error() says why (per
 * thread, the last failure of an mlp_* call).
 */
#ifndef SR_BENCH_MLP_H
#define SR_BENCH_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "stepring.h"
#include "stepring/device.h"

#ifdef __cplusplus
extern "C" {
#endif

enum mlp_activation {
	MLP_TANH = 0,
	MLP_RELU = 1,
};

struct mlp_opts {
	uint32_t width;      /* hidden width W >= 1 */
	uint32_t depth;      /* hidden layers D >= 1 */
	uint32_t activation; /* enum mlp_activation */
	uint64_t seed;       /* weights are a function of the seed only */
};

struct mlp;

/* Parse "mlp:WxD" or "mlp:WxD:relu" (tanh by default) into @o (seed left
 * as it is). 0 or -EINVAL. */
int mlp_parse(const char *desc, struct mlp_opts *o);

/* An MLP for @spec: Glorot-uniform weights drawn from (seed, layer) with
 * sr_rng, so the same seed gives the same policy on every machine.
 * 0, -EINVAL, -ENOMEM. */
int mlp_create(const sr_env_spec *spec, const struct mlp_opts *o, struct mlp **out);
/* NULL is a no-op. */
void mlp_destroy(struct mlp *p);

/* Host forward pass: @n rows of obs to @n actions. Uses the policy's
 * scratch: one caller at a time per policy. 0 or -EINVAL. */
int mlp_forward(struct mlp *p, const float *obs, uint32_t n, void *actions);

/* Multiply-adds per row; parameter count (weights and biases). */
uint64_t mlp_macs(const struct mlp *p);
size_t mlp_num_params(const struct mlp *p);

/* Run the policy on device batch @b of @d where the batch lives, writing
 * b->actions: the host loop for a host device; for a CUDA device the
 * kernels, enqueued on b->stream after the batch's copies (the weights go
 * up on the first call for @d). Async on CUDA: sr_device_actions(d, b,
 * NULL, &h) brings the actions back in stream order. 0, -EINVAL (obs or
 * action geometry of @d is not the policy's), -ENOMEM, -EIO, -ENOSYS (CUDA
 * device in a build without CUDA). */
int mlp_forward_batch(struct mlp *p, sr_device *d, sr_device_batch *b);

/* Why the last mlp_* call of this thread failed. */
const char *mlp_error(void);

/* The reference host-to-device bandwidth, GB/s, of cudaMemcpyAsync from a
 * pinned buffer of @bytes to GPU @index (best of @reps after one warm-up).
 * 0, -ENOSYS (no CUDA in this build), -ENODEV, -ENOMEM, -EIO. */
int bench_cuda_pinned_h2d(int index, size_t bytes, int reps, double *gbs);

#ifdef __cplusplus
}
#endif
#endif

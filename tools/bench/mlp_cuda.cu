/*
 * The MLP's kernels (mlp.h): one launch per hidden layer (one thread per
 * row and output unit, W x + bias with W stored transposed so that
 * neighbouring threads read neighbouring weights, then the activation),
 * then a head kernel: discrete, one thread per row computes every logit and
 * keeps the first maximum; box, one thread per row and output writes
 * shift + scale * tanh. Products and sums use __fmul_rn/__fadd_rn in the
 * host loop's order and the tanh is mlp_tanh, so the actions are the host
 * policy's, bit for bit.
 *
 * Everything is enqueued on the stream the caller names (the device
 * batch's), behind the batch's copies and before its action copy-back.
 * Also here: the pinned host-to-device reference bandwidth of `bench loop`.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "cuda_check.h"
#include "mlp_priv.h"

struct mlp_cuda {
	int index;
	struct mlp_desc d;   /* wt, scale, shift: device pointers */
	uint32_t max_rows;
	float *d_wt, *d_scale, *d_shift;
	float *d_scratch[2]; /* max_rows * max_dim floats each */
};

#define CU(call, what) SR__CU(mlp_errorf, call, what)

/* Output j of one dense layer for input row xr: the same operations in the
 * same order as the host loop (round-to-nearest, no FMA contraction). */
__device__ static float neuron(const float *__restrict__ wt, uint32_t in, uint32_t on,
			       const float *__restrict__ xr, uint32_t j)
{
	float s = 0.0f;

	for (uint32_t k = 0; k < in; k++)
		s = __fadd_rn(s, __fmul_rn(wt[(size_t)k * on + j], xr[k]));
	return __fadd_rn(s, wt[(size_t)in * on + j]);
}

__global__ void k_dense(const float *__restrict__ wt, uint32_t in, uint32_t on,
			const float *__restrict__ x, float *__restrict__ y, uint32_t n, int act)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t r, j;
	float s;

	if (t >= (size_t)n * on)
		return;
	/* Neighbouring threads: neighbouring outputs j of one row, so the
	 * weight reads (wt[k][j]) coalesce and x[r][k] is a broadcast. */
	r = (uint32_t)(t / on);
	j = (uint32_t)(t % on);
	s = neuron(wt, in, on, x + (size_t)r * in, j);
	if (act == 1)
		s = mlp_tanh(s);
	else if (act == 2)
		s = s > 0.0f ? s : 0.0f;
	y[(size_t)r * on + j] = s;
}

__global__ void k_head_argmax(const float *__restrict__ wt, uint32_t in, uint32_t on,
			      const float *__restrict__ x, int32_t *__restrict__ act, uint32_t n)
{
	uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
	const float *xr;
	float best = 0.0f;
	int32_t bi = 0;

	if (r >= n)
		return;
	xr = x + (size_t)r * in;
	for (uint32_t j = 0; j < on; j++) {
		float s = neuron(wt, in, on, xr, j);

		if (j == 0 || s > best) {
			best = s;
			bi = (int32_t)j;
		}
	}
	act[r] = bi;
}

__global__ void k_head_box(const float *__restrict__ wt, uint32_t in, uint32_t on,
			   const float *__restrict__ x, const float *__restrict__ scale,
			   const float *__restrict__ shift, float *__restrict__ act, uint32_t n)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t r, j;
	float s;

	if (t >= (size_t)n * on)
		return;
	r = (uint32_t)(t / on);
	j = (uint32_t)(t % on);
	s = neuron(wt, in, on, x + (size_t)r * in, j);
	act[t] = __fadd_rn(shift[j], __fmul_rn(scale[j], mlp_tanh(s)));
}

extern "C" void mlp_cuda_free(struct mlp_cuda *c)
{
	if (!c)
		return;
	cudaSetDevice(c->index);
	cudaFree(c->d_wt);
	cudaFree(c->d_scale);
	cudaFree(c->d_shift);
	cudaFree(c->d_scratch[0]);
	cudaFree(c->d_scratch[1]);
	(void)cudaGetLastError();
	free(c);
}

static int upload(struct mlp_cuda *c, const struct mlp_desc *d)
{
	uint32_t od = d->dims[d->nlayers];
	size_t scratch = (size_t)c->max_rows * d->max_dim * sizeof(float);

	CU(cudaSetDevice(c->index), "cudaSetDevice");
	CU(cudaMalloc((void **)&c->d_wt, d->nparams * sizeof(float)), "cudaMalloc weights");
	CU(cudaMalloc((void **)&c->d_scratch[0], scratch), "cudaMalloc policy scratch");
	CU(cudaMalloc((void **)&c->d_scratch[1], scratch), "cudaMalloc policy scratch");
	CU(cudaMemcpy(c->d_wt, d->wt, d->nparams * sizeof(float), cudaMemcpyHostToDevice),
	   "cudaMemcpy weights");
	if (d->act_kind == SR_SPACE_BOX) {
		CU(cudaMalloc((void **)&c->d_scale, od * sizeof(float)), "cudaMalloc scale");
		CU(cudaMalloc((void **)&c->d_shift, od * sizeof(float)), "cudaMalloc shift");
		CU(cudaMemcpy(c->d_scale, d->scale, od * sizeof(float), cudaMemcpyHostToDevice),
		   "cudaMemcpy scale");
		CU(cudaMemcpy(c->d_shift, d->shift, od * sizeof(float), cudaMemcpyHostToDevice),
		   "cudaMemcpy shift");
	}
	return 0;
}

extern "C" int mlp_cuda_upload(const struct mlp_desc *d, int index, uint32_t max_rows,
			       struct mlp_cuda **out)
{
	struct mlp_cuda *c = (struct mlp_cuda *)calloc(1, sizeof(*c));
	int err;

	*out = NULL;
	if (!c)
		return mlp_errorf(-ENOMEM, "mlp: out of memory");
	c->index = index;
	c->max_rows = max_rows;
	c->d = *d;
	err = upload(c, d);
	if (err) {
		mlp_cuda_free(c);
		return err;
	}
	/* Only device pointers from here: the host copy may go away. */
	c->d.wt = c->d_wt;
	c->d.scale = c->d_scale;
	c->d.shift = c->d_shift;
	*out = c;
	return 0;
}

extern "C" int mlp_cuda_forward(struct mlp_cuda *c, void *stream, const float *obs,
				void *actions, uint32_t n)
{
	const struct mlp_desc *d = &c->d;
	cudaStream_t st = (cudaStream_t)stream;
	const float *x = obs;
	uint32_t last = d->nlayers - 1, threads = 128;
	int hid = d->activation == MLP_RELU ? 2 : 1;

	if (n == 0)
		return 0;
	CU(cudaSetDevice(c->index), "cudaSetDevice");
	for (uint32_t l = 0; l < last; l++) {
		size_t total = (size_t)n * d->dims[l + 1];
		float *y = c->d_scratch[l & 1];

		k_dense<<<(unsigned)((total + threads - 1) / threads), threads, 0, st>>>(
			d->wt + d->off[l], d->dims[l], d->dims[l + 1], x, y, n, hid);
		x = y;
	}
	if (d->act_kind == SR_SPACE_DISCRETE) {
		k_head_argmax<<<(n + threads - 1) / threads, threads, 0, st>>>(
			d->wt + d->off[last], d->dims[last], d->dims[last + 1], x,
			(int32_t *)actions, n);
	} else {
		size_t total = (size_t)n * d->dims[last + 1];

		k_head_box<<<(unsigned)((total + threads - 1) / threads), threads, 0, st>>>(
			d->wt + d->off[last], d->dims[last], d->dims[last + 1], x, d->scale,
			d->shift, (float *)actions, n);
	}
	CU(cudaGetLastError(), "policy kernel launch");
	return 0;
}

/* Timed like the ring path in `bench loop --h2d`: host wall clock around
 * the enqueue and the wait, so both figures carry the same overheads. */
extern "C" int bench_cuda_pinned_h2d(int index, size_t bytes, int reps, double *gbs)
{
	void *h = NULL, *dv = NULL;
	cudaStream_t st = NULL;
	double best = 1e30;
	int err = 0;

	*gbs = 0;
	CU(cudaSetDevice(index), "cudaSetDevice");
	CU(cudaHostAlloc(&h, bytes, cudaHostAllocDefault), "cudaHostAlloc");
	if (cudaMalloc(&dv, bytes) != cudaSuccess ||
	    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
		err = mlp_errorf(-ENOMEM, "cuda: pinned H2D setup: %s",
				 cudaGetErrorString(cudaGetLastError()));
		goto out;
	}
	memset(h, 1, bytes);
	for (int i = 0; i <= reps; i++) {
		double t0 = 1e-9 * (double)bench_now_ns(), t;
		cudaError_t e = cudaMemcpyAsync(dv, h, bytes, cudaMemcpyHostToDevice, st);

		if (e == cudaSuccess)
			e = cudaStreamSynchronize(st);
		if (e != cudaSuccess) {
			err = SR__CUDA_FAIL(mlp_errorf, e, "pinned H2D");
			goto out;
		}
		t = 1e-9 * (double)bench_now_ns() - t0;
		if (i > 0 && t < best) /* the first one warms up */
			best = t;
	}
	*gbs = (double)bytes / best / 1e9;
out:
	if (st)
		cudaStreamDestroy(st);
	cudaFree(dv);
	cudaFreeHost(h);
	(void)cudaGetLastError();
	return err;
}

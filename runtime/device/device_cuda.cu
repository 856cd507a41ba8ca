/*
 * The CUDA backend: the only file of stepring that includes the CUDA
 * runtime. It moves bytes; which batch is free or held is decided by
 * device.c.
 *
 * DESIGN
 *
 * One dedicated non-blocking stream per device; everything this file
 * enqueues goes there, so the copies, whatever the caller enqueues on the
 * batch's stream (a policy's kernels) and the action copy-back of a batch
 * run in order without host waits in between. Each of the N
 * batches owns:
 *   - one device block: obs | reward | terminated | truncated | flags |
 *     env_id | actions, each column 256-byte aligned;
 *   - one pinned host block of the same layout, used as the staging buffer
 *     when a source is not pinned, and for actions coming back;
 *   - one event, recorded after the last operation enqueued for the batch
 *     (copy or action copy-back); sr__cuda_sync waits on it.
 *
 * Copies: when the ring segment is registered (cudaHostRegister at open),
 * each column of a batch goes host-to-device in one cudaMemcpyAsync (two
 * where the slot range wraps) straight from the ring. A source outside the
 * registered range is first copied by the CPU into the batch's pinned
 * staging block, then sent in one cudaMemcpyAsync per column. Before
 * writing a batch's staging block the producer waits for that batch's
 * event, so an earlier copy out of it is finished (the consumer may have
 * released the batch without syncing).
 *
 * Errors: cudaError_t maps to -ENOMEM (allocation), -ENODEV (no driver,
 * no device, bad ordinal), -EIO (anything else), with the CUDA string in
 * sr_last_error().
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "device_internal.h"
extern "C" {
#include "sr_base.h" /* plain C declarations */
}

#define COLS_ALIGN 256

struct cuda_batch {
	char *dev;            /* device block */
	char *host;           /* pinned host block, same layout */
	size_t off[SR__NCOLS + 1]; /* column offsets; off[SR__NCOLS] = actions */
	cudaEvent_t ev;
};

struct sr__cuda {
	int index;
	cudaStream_t stream;
	uint32_t nb, max_rows, obs_dim, act_size, act_kind;
	struct cuda_batch b[SR_DEVICE_MAX_IN_FLIGHT];
	/* Registered ring segment (direct H2D), or NULL. */
	const char *reg_base;
	size_t reg_len;
	bool reg_ours;        /* we registered it, so we unregister it */
};

#define CU(call, what) SR__CU(sr__errorf, call, what)

extern "C" bool sr__cuda_available(int index)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return index >= 0 && index < n;
}

extern "C" int sr__cuda_describe(int index, char *buf, size_t len)
{
	cudaDeviceProp prop;

	if (!sr__cuda_available(index) || cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
		(void)cudaGetLastError();
		return -ENODEV;
	}
	snprintf(buf, len, "%s (sm_%d%d, %.0f GiB, %d SMs)", prop.name, prop.major, prop.minor,
		 (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024), prop.multiProcessorCount);
	return 0;
}

extern "C" void sr__cuda_close(struct sr__cuda *c)
{
	if (!c)
		return;
	cudaSetDevice(c->index);
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	for (uint32_t i = 0; i < c->nb; i++) {
		if (c->b[i].ev)
			cudaEventDestroy(c->b[i].ev);
		if (c->b[i].dev)
			cudaFree(c->b[i].dev);
		if (c->b[i].host)
			cudaFreeHost(c->b[i].host);
	}
	if (c->reg_ours)
		cudaHostUnregister((void *)c->reg_base);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	(void)cudaGetLastError();
	free(c);
}

static int open_batches(struct sr__cuda *c, sr_device_batch *pub)
{
	size_t rows = c->max_rows;
	size_t w[SR__NCOLS + 1] = {
		rows * c->obs_dim * sizeof(float), rows * sizeof(float), rows, rows, rows,
		rows * sizeof(uint32_t), rows * c->act_size,
	};

	for (uint32_t i = 0; i < c->nb; i++) {
		struct cuda_batch *b = &c->b[i];
		size_t total = 0;

		for (int k = 0; k <= SR__NCOLS; k++) {
			b->off[k] = total;
			total += (size_t)sr__align_up(w[k], COLS_ALIGN);
		}
		CU(cudaMalloc((void **)&b->dev, total), "cudaMalloc of a device batch");
		CU(cudaHostAlloc((void **)&b->host, total, cudaHostAllocDefault),
		   "cudaHostAlloc of a pinned staging buffer");
		CU(cudaEventCreateWithFlags(&b->ev, cudaEventDisableTiming), "cudaEventCreate");
		pub[i].obs = (float *)(b->dev + b->off[SR__COL_OBS]);
		pub[i].reward = (float *)(b->dev + b->off[SR__COL_REWARD]);
		pub[i].terminated = (uint8_t *)(b->dev + b->off[SR__COL_TERMINATED]);
		pub[i].truncated = (uint8_t *)(b->dev + b->off[SR__COL_TRUNCATED]);
		pub[i].flags = (uint8_t *)(b->dev + b->off[SR__COL_FLAGS]);
		pub[i].env_id = (uint32_t *)(b->dev + b->off[SR__COL_ENV_ID]);
		pub[i].actions = b->dev + b->off[SR__NCOLS];
		pub[i].dl_device_type = 2; /* kDLCUDA */
		pub[i].dl_device_id = c->index;
		pub[i].stream = (void *)c->stream;
	}
	return 0;
}

extern "C" int sr__cuda_open(const sr_device_opts *opts, uint32_t nb, sr_device_batch *batches,
			     struct sr__cuda **out, char *name, size_t name_len,
			     bool *registered, bool *staging)
{
	struct sr__cuda *c;
	cudaDeviceProp prop;
	int n = 0, err;
	cudaError_t e;

	*out = NULL;
	*registered = false;
	*staging = false;
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess)
		return SR__CUDA_FAIL(sr__errorf, e, "no GPU answers");
	if (opts->index < 0 || opts->index >= n)
		return sr__errorf(-ENODEV, "cuda: no device %d (%d found)", opts->index, n);
	CU(cudaSetDevice(opts->index), "cudaSetDevice");
	CU(cudaGetDeviceProperties(&prop, opts->index), "cudaGetDeviceProperties");
	snprintf(name, name_len, "%s", prop.name);

	c = (struct sr__cuda *)calloc(1, sizeof(*c));
	if (!c)
		return sr__errorf(-ENOMEM, "cuda: out of memory");
	c->index = opts->index;
	c->nb = nb;
	c->max_rows = opts->max_rows;
	c->obs_dim = opts->obs_dim;
	c->act_kind = opts->act_kind;
	c->act_size = opts->act_kind == SR_SPACE_DISCRETE ? 4u : 4u * opts->act_dim;
	e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		err = SR__CUDA_FAIL(sr__errorf, e, "cudaStreamCreate");
		goto err_close;
	}
	err = open_batches(c, batches);
	if (err)
		goto err_close;

	if ((opts->flags & SR_DEVICE_F_RING) && !(opts->flags & SR_DEVICE_F_NO_REGISTER)) {
		sr_ring_info ri = {.size = sizeof(ri)};
		size_t len;
		void *base;

		sr_ring_info_get(opts->ring, &ri);
		base = ri.base;
		len = (size_t)ri.bytes;

		e = cudaHostRegister(base, len, cudaHostRegisterDefault);
		if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) {
			/* A ring attached read-only: we only ever read it. */
			(void)cudaGetLastError();
			e = cudaHostRegister(base, len, cudaHostRegisterReadOnly);
		}
		if (e == cudaSuccess) {
			c->reg_ours = true;
		} else if (e == cudaErrorHostMemoryAlreadyRegistered) {
			/* Someone (another device on the same GPU) pinned it. */
			(void)cudaGetLastError();
		} else {
			(void)cudaGetLastError();
			base = NULL;
			*staging = true;
		}
		if (base) {
			c->reg_base = (const char *)base;
			c->reg_len = len;
			*registered = true;
		}
	} else if (opts->flags & SR_DEVICE_F_RING) {
		*staging = true;
	}
	*out = c;
	return 0;

err_close:
	sr__cuda_close(c);
	return err;
}

static bool in_registered(const struct sr__cuda *c, const void *p, size_t len)
{
	const char *q = (const char *)p;

	return c->reg_base && q >= c->reg_base && q + len <= c->reg_base + c->reg_len;
}

extern "C" int sr__cuda_copy(struct sr__cuda *c, uint32_t bi, const struct sr__cols *src)
{
	struct cuda_batch *b = &c->b[bi];
	bool waited = false;

	CU(cudaSetDevice(c->index), "cudaSetDevice");
	for (int k = 0; k < SR__NCOLS; k++) {
		size_t a = (size_t)src->n0 * src->width[k];
		size_t rest = (size_t)(src->n - src->n0) * src->width[k];
		char *dst = b->dev + b->off[k];

		if (!src->piece[0][k]) {
			CU(cudaMemsetAsync(dst, 0, a + rest, c->stream), "cudaMemsetAsync");
			continue;
		}
		if (in_registered(c, src->piece[0][k], a) &&
		    (!rest || in_registered(c, src->piece[1][k], rest))) {
			CU(cudaMemcpyAsync(dst, src->piece[0][k], a, cudaMemcpyHostToDevice,
					   c->stream),
			   "cudaMemcpyAsync H2D from the ring");
			if (rest)
				CU(cudaMemcpyAsync(dst + a, src->piece[1][k], rest,
						   cudaMemcpyHostToDevice, c->stream),
				   "cudaMemcpyAsync H2D from the ring");
			continue;
		}
		/* Not pinned: through this batch's staging block, once its
		 * previous copies are done. */
		if (!waited) {
			CU(cudaEventSynchronize(b->ev), "cudaEventSynchronize");
			waited = true;
		}
		memcpy(b->host + b->off[k], src->piece[0][k], a);
		if (rest)
			memcpy(b->host + b->off[k] + a, src->piece[1][k], rest);
		CU(cudaMemcpyAsync(dst, b->host + b->off[k], a + rest, cudaMemcpyHostToDevice,
				   c->stream),
		   "cudaMemcpyAsync H2D from staging");
	}
	CU(cudaEventRecord(b->ev, c->stream), "cudaEventRecord");
	return 0;
}

extern "C" int sr__cuda_sync(struct sr__cuda *c, uint32_t bi)
{
	CU(cudaEventSynchronize(c->b[bi].ev), "cudaEventSynchronize");
	return 0;
}

extern "C" int sr__cuda_actions(struct sr__cuda *c, uint32_t bi, uint32_t n, const void *src,
				const void **host)
{
	struct cuda_batch *b = &c->b[bi];
	struct cudaPointerAttributes attr;
	size_t len = (size_t)n * c->act_size;
	cudaError_t e;

	if (!src)
		src = b->dev + b->off[SR__NCOLS];
	e = cudaPointerGetAttributes(&attr, src);
	if (e != cudaSuccess) {
		/* Older drivers: an unknown host pointer is an error. */
		(void)cudaGetLastError();
		attr.type = cudaMemoryTypeUnregistered;
	}
	if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
		*host = src;
		return 0;
	}
	CU(cudaMemcpyAsync(b->host + b->off[SR__NCOLS], src, len, cudaMemcpyDeviceToHost,
			   c->stream),
	   "cudaMemcpyAsync D2H of actions");
	CU(cudaEventRecord(b->ev, c->stream), "cudaEventRecord");
	CU(cudaEventSynchronize(b->ev), "cudaEventSynchronize");
	*host = b->host + b->off[SR__NCOLS];
	return 0;
}

/* ---- test helpers ---------------------------------------------- */

extern "C" int sr__cuda_d2h(int index, void *dst, const void *src, size_t len)
{
	CU(cudaSetDevice(index), "cudaSetDevice");
	CU(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
	return 0;
}

/*
 * Internal device interface: where a batch lands.
 *
 * The collector (runtime/collector.c) decides which ring slots form a batch
 * and hands them to a device through this ops table; it does not care
 * whether the batch ends up in host memory or on a GPU.
 *
 *  - host (device_host.c, always built): when the rows are one contiguous
 *    range of slots that does not wrap, the batch is a zero-copy view of
 *    the ring columns; otherwise the rows are copied into a staging buffer
 *    (one copy per column, or a gather).
 *  - cuda (device_api.c over device_cuda.cu / device_nocuda.c): copies
 *    the columns to device memory; sr__device_cuda_open says -ENOSYS in a
 *    build without CUDA.
 *
 * Threading: a device is used by one thread at a time (the pool thread,
 * which runs the collector).
 */
#ifndef SR_DEVICE_H
#define SR_DEVICE_H

#include "stepring/pool.h"
#include "stepring/ring.h"

struct sr__device;

struct sr__device_cfg {
	uint32_t kind;     /* enum sr_device_kind (AUTO resolved by sr__device_open) */
	int32_t index;     /* GPU ordinal */
	sr_ring *ring;     /* the ring the batches come from */
	uint32_t obs_dim;
	uint32_t act_size; /* bytes per action */
	uint32_t max_rows; /* largest batch (staging size) */
	bool final_obs;    /* batches carry final_obs */
	uint32_t act_kind; /* SR_SPACE_DISCRETE or SR_SPACE_BOX (the env spec's); 0: guess from act_size */
	uint32_t act_dim;  /* box: float32 per action; discrete: 1 */
};

/* Which slots form a batch. */
struct sr__batch_req {
	uint64_t first_seq;       /* rows are slots first_seq .. first_seq + n - 1 ... */
	const uint64_t *seqs;     /* ... unless seqs != NULL: row i is slot seqs[i] (gather) */
	uint32_t n;
	const float *final_obs;   /* NULL, or n * obs_dim host floats in row order */
};

struct sr__device_ops {
	const char *name; /* "host", "cuda" */
	/* Form a batch from ring slots. @out's pointers stay valid until the
	 * next batch_from_ring or release. Host: out->first_seq is set when
	 * the rows are the ring slots themselves (view), else UINT64_MAX.
	 * Returns 0 or -errno. */
	int (*batch_from_ring)(struct sr__device *dev, const struct sr__batch_req *req,
			       sr_batch *out);
	/* The caller is done with the batch (a device may recycle buffers). */
	void (*release)(struct sr__device *dev, sr_batch *b);
	void (*close)(struct sr__device *dev);
};

struct sr__device {
	const struct sr__device_ops *ops;
	uint32_t kind; /* enum sr_device_kind actually opened */
	struct sr__device_cfg cfg;
	/* Counters (nanoseconds spent copying, bytes copied). */
	uint64_t ns_copy;
	uint64_t bytes_copied;
	void *priv;    /* implementation data */
};

/* Open the device @cfg->kind names; SR_DEVICE_AUTO tries cuda, then host.
 * Returns 0, -ENOSYS (cuda not built), -ENODEV (no GPU), -ENOMEM. */
int sr__device_open(const struct sr__device_cfg *cfg, struct sr__device **out);
/* Copy ring rows @seqs[0..n) into row-major staging columns, one memcpy
 * per column for each run of consecutive slots (a batch taken from a
 * few workers' ranges is a few runs). */
void sr__gather_rows(const sr_ring *r, const uint64_t *seqs, uint32_t n, float *obs,
		     float *reward, uint8_t *term, uint8_t *trunc, uint32_t *env_id);
/* NULL is a no-op. */
void sr__device_close(struct sr__device *dev);

int sr__device_host_open(const struct sr__device_cfg *cfg, struct sr__device **out);
/* The public device (runtime/device_api.c, over device_cuda.cu or
 * device_nocuda.c) as a pool device: -ENOSYS without CUDA, -ENODEV
 * without a GPU. */
int sr__device_cuda_open(const struct sr__device_cfg *cfg, struct sr__device **out);

#endif

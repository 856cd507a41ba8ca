/*
 * stepring devices: where batches land (host memory or a CUDA GPU), their
 * export as DLPack tensors, and actions coming back.
 *
 * A device owns N "device batches" (N in flight, 2..8, default 3). The
 * producer (the collector, or any single thread) submits a batch: each
 * column (obs, reward, terminated, truncated, flags, env_id) is copied in one
 * copy (two where a ring range wraps) to the device, asynchronously on the
 * device's own stream for CUDA. The consumer (a trainer, possibly another
 * thread) reads the batch, optionally as DLPack tensors, and releases it. A
 * batch is recycled only when it has been released and every DLPack tensor
 * exported from it has been deleted; when the consumer holds all N, submit
 * waits (or says -EAGAIN with SR_SUBMIT_NOWAIT): that is the backpressure.
 *
 * The CUDA device registers the ring segment as pinned memory
 * (cudaHostRegister) so each column goes host-to-device straight from the
 * ring; where registration fails it copies through a pinned staging buffer
 * and says so once (stderr and sr_device_info().staging).
 *
 * A policy runs where the batch lives: on the host it reads b->obs and
 * writes b->actions; on CUDA it enqueues its kernels on b->stream, after
 * the batch's copies and before sr_device_actions() brings the actions
 * back.
 *
 * Thread safety: submit and actions are called by one producer thread; sync, dlpack and release by consumers on any thread;
 * release and the DLPack deleters are thread safe.
 *
 * DLPack: dlpack.h (v0.6+, Debian's libdlpack-dev) defines
 * struct DLManagedTensor; include it to use the tensors.
 */
#ifndef STEPRING_DEVICE_H
#define STEPRING_DEVICE_H

#include "stepring/common.h"
#include "stepring/env.h"
#include "stepring/ring.h"
#include "stepring/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;

#define SR_DEVICE_MAX_IN_FLIGHT 8

/* Columns of a batch, as DLPack tensors. dtypes: obs float32 [n, obs_dim];
 * reward float32 [n]; terminated, truncated, flags uint8 [n]; env_id int32
 * [n] (the ring's uint32 ids, all < 2^31; torch has no uint32); action
 * int32 [n] (discrete) or float32 [n, act_dim] (box). */
enum sr_field {
	SR_FIELD_OBS = 0,
	SR_FIELD_REWARD = 1,
	SR_FIELD_TERMINATED = 2,
	SR_FIELD_TRUNCATED = 3,
	SR_FIELD_FLAGS = 4,
	SR_FIELD_ENV_ID = 5,
	SR_FIELD_ACTION = 6,
	SR_FIELD_COUNT = 7,
};

/* sr_device_opts.flags */
enum {
	SR_DEVICE_F_RING = 1u << 0,      /* @ring is set: register it (CUDA) */
	SR_DEVICE_F_NO_REGISTER = 1u << 1, /* never register the ring: always stage */
	SR_DEVICE_F_QUIET = 1u << 2,     /* do not print the one-time staging note */
};

typedef struct sr_device_opts {
	uint32_t flags;       /* SR_DEVICE_F_* */
	uint32_t kind;        /* enum sr_device_kind: HOST, CUDA or AUTO */
	int32_t index;        /* CUDA ordinal (default 0) */
	uint32_t in_flight;   /* N device batches, 1..SR_DEVICE_MAX_IN_FLIGHT; 0: 3 */
	uint32_t max_rows;    /* rows per batch at most, >= 1 */
	uint32_t obs_dim;     /* float32 per obs, >= 1 */
	uint32_t act_kind;    /* enum sr_space_kind of the actions */
	uint32_t act_dim;     /* box: float32 per action; discrete: 1 */
	const sr_ring *ring;  /* with SR_DEVICE_F_RING */
} sr_device_opts;

typedef struct sr_device sr_device;

/**
 * A device batch: @n rows of every column in device memory (CUDA) or host
 * memory (host). Read only for users; valid from submit until release.
 * Data may still be in flight on a CUDA stream until sr_device_batch_sync()
 * (or an event wait on @stream); DLPack export syncs first.
 */
typedef struct sr_device_batch {
	uint32_t n;
	uint32_t obs_dim;
	uint32_t act_size;      /* bytes per action */
	uint32_t index;         /* which of the N batches, 0..N-1 */
	int32_t dl_device_type; /* kDLCPU (1) or kDLCUDA (2) */
	int32_t dl_device_id;
	float *obs;             /* n * obs_dim */
	float *reward;          /* n */
	uint8_t *terminated;    /* n */
	uint8_t *truncated;     /* n */
	uint8_t *flags;         /* n, SR_SLOT_* (0 when submitted from an sr_batch) */
	uint32_t *env_id;       /* n */
	void *actions;          /* n * act_size, for the policy to write */
	uint64_t first_seq;     /* ring sequence of row 0 (from the source) */
	void *stream;           /* cudaStream_t of the device, NULL on the host */
} sr_device_batch;

/* sr_device_submit* flags */
enum {
	SR_SUBMIT_NOWAIT = 1u << 0, /* -EAGAIN instead of waiting when all N are held */
};

typedef struct sr_device_info {
	uint32_t kind;         /* SR_DEVICE_HOST or SR_DEVICE_CUDA (resolved) */
	int32_t index;
	uint32_t in_flight;
	uint32_t held;         /* batches submitted and not yet recycled */
	bool ring_registered;  /* CUDA: the ring segment is pinned (direct H2D) */
	bool staging;          /* CUDA: copies go through a pinned staging buffer */
	char name[96];         /* "host" or the GPU's name */
	uint64_t batches;      /* submitted since open */
	uint64_t waits;        /* submits that had to wait (backpressure) */
	uint32_t max_rows;     /* as opened */
	uint32_t obs_dim;
	uint32_t act_kind;     /* enum sr_space_kind */
	uint32_t act_dim;
} sr_device_info;

/** Defaults: host, index 0, 3 in flight, discrete actions. */
SR_EXPORT void sr_device_opts_init(sr_device_opts *o);

/**
 * Is there a CUDA device @index that answers? False in a build without
 * CUDA, without a driver, or without a GPU. Thread safe.
 */
SR_EXPORT bool sr_device_cuda_available(int index);

/**
 * Describe GPU 0 for reports: "NVIDIA H200 (sm_90, 140 GiB, 132 SMs)".
 * Returns 0, or -ENODEV (no GPU answers, or no CUDA in this build) with
 * @buf set to "none". Thread safe.
 */
SR_EXPORT int sr_device_describe(char *buf, size_t len);

/**
 * Open a device. SR_DEVICE_AUTO picks CUDA when a GPU answers, else host.
 * Allocates the N batches (device buffers and pinned host buffers for
 * CUDA), creates the stream and events, and with SR_DEVICE_F_RING registers
 * the ring segment. Returns 0, -EINVAL (bad options or flags), -ENOSYS
 * (CUDA asked for in a build without CUDA), -ENODEV (no GPU answers),
 * -ENOMEM; the reason is in sr_last_error().
 */
SR_EXPORT int sr_device_open(const sr_device_opts *opts, sr_device **out);

/** Wait for the stream, unregister the ring, free everything. Batches still
 * held or exported tensors still alive must not be used afterwards (their
 * deleters remain safe to call). NULL is a no-op. */
SR_EXPORT void sr_device_close(sr_device *d);

/** What the device is; 0 or -EINVAL. */
SR_EXPORT int sr_device_info_get(const sr_device *d, sr_device_info *out);

/**
 * Submit host columns (an sr_batch from the pool): take a free device batch
 * (waiting while all N are held, or -EAGAIN with SR_SUBMIT_NOWAIT) and copy
 * each column to it (async on CUDA). *@out gets the batch. Returns 0,
 * -EINVAL (n == 0 or n > max_rows, obs_dim mismatch), -EAGAIN, -EIO (CUDA
 * error, logged). Producer thread only.
 */
SR_EXPORT int sr_device_submit(sr_device *d, const sr_batch *src, unsigned flags,
			       sr_device_batch **out);

/**
 * Submit ring slots [first_seq, first_seq + n) straight from the ring's
 * columns: one copy per column, two where the range wraps. The caller keeps
 * those slots unconsumed until the copy is done (sr_device_batch_sync), or
 * until release if it exports ring views. Returns as sr_device_submit, and
 * -EINVAL when the ring's geometry does not match the device's.
 */
SR_EXPORT int sr_device_submit_ring(sr_device *d, const sr_ring *r, uint64_t first_seq,
				    uint32_t n, unsigned flags, sr_device_batch **out);

/** Wait until the batch's copies are done (not work a caller enqueued on
 * b->stream since: sr_device_actions orders after that). 0 or -EIO. */
SR_EXPORT int sr_device_batch_sync(sr_device_batch *b);

/**
 * Export one column of a batch as a DLPack managed tensor (zero copy: its
 * data pointer is the batch's column). Syncs the batch first. The tensor
 * holds a reference: the batch is recycled only after sr_device_release
 * AND the tensor's deleter ran. The deleter frees the tensor; call it once
 * (torch.from_dlpack does). Returns 0, -EINVAL (bad field, or actions
 * before any policy/actions wrote them is allowed: the memory exists),
 * -ENOMEM.
 */
SR_EXPORT int sr_device_batch_dlpack(sr_device_batch *b, int field,
				     struct DLManagedTensor **out);

/**
 * Consumer: done with the batch. It is recycled once every exported tensor
 * is deleted too. Returns 0, or -EINVAL on a batch already released (the
 * message says which). Thread safe.
 */
SR_EXPORT int sr_device_release(sr_device *d, sr_device_batch *b);

/**
 * Actions back to the host for the pool: @src is NULL (the batch's own
 * actions column, as a policy wrote it on b->stream), a device pointer (copied
 * device-to-host into a pinned buffer) or a host pointer (used as is).
 * *@host gets n * act_size bytes valid until the batch is recycled.
 * Waits for the copy. Returns 0, -EIO.
 */
SR_EXPORT int sr_device_actions(sr_device *d, sr_device_batch *b, const void *src,
				const void **host);

/**
 * Zero-copy DLPack view of ring slots [first_seq, first_seq + n) of one
 * column (kDLCPU; dtypes as enum sr_field, except action: uint8
 * [n, act_size], the ring's raw action bytes). The data pointer is the
 * ring's own memory: the caller keeps those slots from being overwritten
 * while the tensor lives (leave them unconsumed, or check
 * sr_ring_slot_valid after use). The deleter frees only the tensor.
 * Returns 0, -EINVAL (bad field, n == 0 or n > capacity), -ERANGE (the
 * range wraps: view the two pieces separately), -ENOMEM.
 */
SR_EXPORT int sr_ring_dlpack(const sr_ring *r, int field, uint64_t first_seq, uint32_t n,
			     struct DLManagedTensor **out);

#ifdef __cplusplus
}
#endif
#endif

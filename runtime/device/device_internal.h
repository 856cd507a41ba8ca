/*
 * Internal interface between the generic device layer (device.c: batch
 * bookkeeping, backpressure, DLPack, the host backend) and the CUDA backend
 * (device_cuda.cu, the only file that includes the CUDA runtime, or its
 * stand-in device_nocuda.c). Plain C, usable from C++ (nvcc): no C11 atomics
 * in here; the backend sees batches by index only.
 */
#ifndef SR_DEVICE_INTERNAL_H
#define SR_DEVICE_INTERNAL_H

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
/* Actions of batch @bi to the host: src NULL = the batch's own actions;
 * device pointer: D2H into the pinned buffer; host pointer: as is. */
int sr__cuda_actions(struct sr__cuda *c, uint32_t bi, uint32_t n, const void *src,
		     const void **host);

/* For tests: copy @len bytes of device memory to the host (synchronous).
 * 0 or -errno. */
int sr__cuda_d2h(int index, void *dst, const void *src, size_t len);

#ifdef __cplusplus
}
#endif
#endif

/*
 * io_uring checkpoint writer: the only file that includes liburing.
 *
 * DESIGN: SR_CKPT_NBUF staging buffers of chunk_size bytes, registered
 * with the ring (write_fixed: no per-write page pinning). The job's
 * producer fills a free buffer with the next piece of the file (in file
 * order) and submits it; up to SR_CKPT_NBUF writes are in flight while the
 * next buffer is being filled. Every CQE's res is checked: an error stops
 * production, in-flight writes are drained and the error returned; a short
 * write is resubmitted for its remainder. When every data write has
 * completed, the trailer write is submitted linked (IOSQE_IO_LINK) to an
 * fsync, so the fsync runs only after the trailer is written and fails
 * (-ECANCELED) if the write failed.
 *
 * If io_uring_queue_init is refused (EPERM/EACCES: seccomp or
 * kernel.io_uring_disabled; ENOSYS: an old kernel; ENOMEM: locked memory
 * limits), nothing has been written yet and we return SR__CKPT_REFUSED so
 * that the job uses the pwrite writer instead. If only buffer registration
 * fails, plain (unregistered) writes are used.
 */
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "sr_base.h"
#include "ckpt_internal.h"

struct slot {
	bool busy;
	uint64_t off;
	size_t len;
	size_t done;
	const char *ptr; /* the slot's registered buffer, or mapped memory */
};

/* One run of the writer: the ring, its buffers and what is in flight. */
struct uwriter {
	sr__ckpt_job *j;
	struct io_uring ring;
	struct iovec iov[SR_CKPT_NBUF];
	struct slot slots[SR_CKPT_NBUF];
	char *base;     /* SR_CKPT_NBUF buffers of chunk bytes */
	size_t chunk;
	bool fixed;     /* the buffers are registered: write_fixed */
	unsigned inflight;
};

#define FSYNC_TAG 100 /* user data of the fsync (buffers are 0..SR_CKPT_NBUF-1) */

/* Queue the rest of slot @b's write (flags: IOSQE_*). */
static void prep(struct uwriter *w, int b, unsigned sqe_flags)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	const struct slot *s = &w->slots[b];
	const char *addr = s->ptr + s->done;
	bool in_buf = s->ptr == w->base + (size_t)b * w->chunk;

	/* The ring has room for every buffer plus the trailer and fsync. */
	if (!sqe)
		abort();
	if (w->fixed && in_buf)
		io_uring_prep_write_fixed(sqe, sr__ckpt_fd(w->j), addr,
					  (unsigned)(s->len - s->done), s->off + s->done, b);
	else
		io_uring_prep_write(sqe, sr__ckpt_fd(w->j), addr, (unsigned)(s->len - s->done),
				    s->off + s->done);
	sqe->flags |= sqe_flags;
	io_uring_sqe_set_data64(sqe, (uint64_t)b);
}

/* Set up the ring. SR__CKPT_REFUSED (with *why) when io_uring cannot be
 * used here, else 0 or -errno. */
static int uring_open(struct uwriter *w, const char **why)
{
	int r = io_uring_queue_init(2 * SR_CKPT_NBUF + 2, &w->ring, 0);

	if (r == -EPERM || r == -EACCES || r == -ENOSYS || r == -ENOMEM || r == -EINVAL) {
		*why = r == -ENOSYS ? "io_uring_setup: not implemented by this kernel"
		       : r == -ENOMEM ? "io_uring_setup: out of locked memory"
		       : r == -EINVAL ? "io_uring_setup: invalid argument (old kernel)"
				      : "io_uring_setup: not permitted (seccomp, or the "
					"kernel.io_uring_disabled sysctl)";
		return SR__CKPT_REFUSED;
	}
	if (r < 0)
		return sr__ckpt_fail(w->j, r, "checkpoint: io_uring_queue_init failed: %s",
				     sr_strerror(r));
	return 0;
}

/* Keep io_uring's async workers (buffered writes that would block, fsync)
 * where the writer thread may run: off the pool's cores. */
static void uring_confine(struct uwriter *w)
{
	size_t sz;
	const void *cpus = sr__ckpt_job_cpus(w->j, &sz);
	/* Buffered writes to one file serialize on its inode lock: more than
	 * one async worker only adds contention (and CPU the pool needs). */
	unsigned int maxw[2] = {1, 1};

	if (cpus)
		io_uring_register_iowq_aff(&w->ring, sz, cpus);
	io_uring_register_iowq_max_workers(&w->ring, maxw);
}

/* The staging buffers, registered if the kernel lets us. */
static int buffers_open(struct uwriter *w)
{
	w->base = aligned_alloc(SR_CKPT_ALIGN, SR_CKPT_NBUF * w->chunk);
	if (!w->base)
		return sr__ckpt_fail(w->j, -ENOMEM, "checkpoint: out of memory for write buffers");
	for (int b = 0; b < SR_CKPT_NBUF; b++) {
		w->iov[b].iov_base = w->base + (size_t)b * w->chunk;
		w->iov[b].iov_len = w->chunk;
	}
	memset(w->slots, 0, sizeof(w->slots));
	w->fixed = io_uring_register_buffers(&w->ring, w->iov, SR_CKPT_NBUF) == 0;
	return 0;
}

/* Fill every free buffer with the next piece of the file and queue its
 * write. Sets *@eof when the job has produced everything but the trailer.
 * 0 or -errno (a piece that could not be produced or was failed by fault
 * injection; what is queued stays queued). */
static int submit_free(struct uwriter *w, bool *eof)
{
	struct sr__ckpt_piece pc;

	for (int b = 0; b < SR_CKPT_NBUF; b++) {
		int r;

		if (w->slots[b].busy)
			continue;
		r = sr__ckpt_produce(w->j, w->iov[b].iov_base, &pc);
		if (r < 0)
			return r;
		if (r == 0) {
			*eof = true;
			return 0;
		}
		r = sr__ckpt_fault_check(&pc);
		if (r)
			return sr__ckpt_fail(w->j, r,
					     "checkpoint: write of %zu bytes at offset %llu failed: %s",
					     pc.len, (unsigned long long)pc.off, sr_strerror(r));
		w->slots[b] = (struct slot){.busy = true, .off = pc.off, .len = pc.len,
					    .ptr = pc.ptr};
		prep(w, b, 0);
		w->inflight++;
	}
	return 0;
}

/* Account every completion: a slot whose write is done is free again, a
 * short write is resubmitted for its remainder (unless @err: draining),
 * a failed one records the error. Returns @err or the first new error. */
static int reap(struct uwriter *w, int err)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	io_uring_for_each_cqe(&w->ring, head, cqe)
	{
		int b = (int)io_uring_cqe_get_data64(cqe);
		struct slot *s = &w->slots[b];

		seen++;
		if (cqe->res < 0) {
			err = sr__ckpt_fail(w->j, cqe->res,
					    "checkpoint: write of %zu bytes at offset %llu failed: %s",
					    s->len - s->done, (unsigned long long)(s->off + s->done),
					    sr_strerror(cqe->res));
		} else if (cqe->res == 0) {
			err = sr__ckpt_fail(w->j, -EIO, "checkpoint: write returned 0 at offset %llu",
					    (unsigned long long)(s->off + s->done));
		} else {
			s->done += (size_t)cqe->res;
			if (s->done < s->len && !err) {
				prep(w, b, 0); /* short write */
				continue;
			}
		}
		s->busy = false;
		w->inflight--;
	}
	io_uring_cq_advance(&w->ring, seen);
	return err;
}

/* Everything but the trailer: keep up to SR_CKPT_NBUF writes in flight
 * while the next buffer is filled. On an error, produce nothing more and
 * drain what is in flight (unless submitting itself failed: then we cannot
 * reap safely, and io_uring_queue_exit cancels). */
static int write_data(struct uwriter *w)
{
	bool eof = false;
	int err = 0;

	while (!eof || w->inflight) {
		if (!eof && !err)
			err = submit_free(w, &eof);
		if (err)
			eof = true;
		if (!w->inflight)
			break;
		int r = io_uring_submit_and_wait(&w->ring, 1);
		if (r < 0 && r != -EINTR)
			return sr__ckpt_fail(w->j, r, "checkpoint: io_uring_submit failed: %s",
					     sr_strerror(r));
		err = reap(w, err);
	}
	return err;
}

/* Trailer last, linked to the fsync: the fsync starts only after the
 * trailer is written, and is cancelled if that write fails. */
static int write_trailer(struct uwriter *w)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct sr__ckpt_piece pc;
	int res[2] = {1, 1}; /* trailer write, fsync */
	int r;

	sr__ckpt_produce_trailer(w->j, w->iov[0].iov_base, &pc);
	r = sr__ckpt_fault_check(&pc);
	if (r)
		return sr__ckpt_fail(w->j, r, "checkpoint: write of the trailer failed: %s",
				     sr_strerror(r));
	w->slots[0] = (struct slot){.busy = true, .off = pc.off, .len = pc.len, .ptr = pc.ptr};
	prep(w, 0, IOSQE_IO_LINK);
	sqe = io_uring_get_sqe(&w->ring);
	if (!sqe)
		abort();
	io_uring_prep_fsync(sqe, sr__ckpt_fd(w->j), 0);
	io_uring_sqe_set_data64(sqe, FSYNC_TAG);
	r = io_uring_submit(&w->ring);
	if (r < 0)
		return sr__ckpt_fail(w->j, r, "checkpoint: io_uring_submit failed: %s",
				     sr_strerror(r));
	for (int k = 0; k < 2; k++) {
		r = io_uring_wait_cqe(&w->ring, &cqe);
		if (r < 0)
			return sr__ckpt_fail(w->j, r, "checkpoint: io_uring_wait_cqe failed: %s",
					     sr_strerror(r));
		res[io_uring_cqe_get_data64(cqe) == FSYNC_TAG] = cqe->res;
		io_uring_cqe_seen(&w->ring, cqe);
	}
	if (res[0] < 0)
		return sr__ckpt_fail(w->j, res[0], "checkpoint: write of the trailer failed: %s",
				     sr_strerror(res[0]));
	if ((size_t)res[0] != pc.len)
		return sr__ckpt_fail(w->j, -EIO,
				     "checkpoint: short write of the trailer (%d of %zu bytes)",
				     res[0], pc.len);
	if (res[1] < 0)
		return sr__ckpt_fail(w->j, res[1], "checkpoint: fsync failed: %s",
				     sr_strerror(res[1]));
	return 0;
}

int sr__ckpt_run_uring(sr__ckpt_job *j, const char **why)
{
	struct uwriter w = {.j = j, .chunk = sr__ckpt_chunk(j)};
	int err;

	err = uring_open(&w, why);
	if (err)
		return err;
	uring_confine(&w);
	err = buffers_open(&w);
	if (!err)
		err = write_data(&w);
	if (!err)
		err = write_trailer(&w);
	if (w.fixed)
		io_uring_unregister_buffers(&w.ring);
	io_uring_queue_exit(&w.ring);
	free(w.base);
	return err;
}

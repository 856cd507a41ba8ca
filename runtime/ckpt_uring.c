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

#include "internal.h"
#include "ckpt_internal.h"

struct slot {
	bool busy;
	uint64_t off;
	size_t len;
	size_t done;
	const char *ptr; /* the slot's registered buffer, or mapped memory */
};

static void prep(struct io_uring *ring, sr__ckpt_job *j, char *base, size_t chunk, bool fixed,
		 int b, const struct slot *s, unsigned sqe_flags)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	const char *addr = s->ptr + s->done;
	bool in_buf = s->ptr == base + (size_t)b * chunk;

	/* The ring has room for every buffer plus the trailer and fsync. */
	if (!sqe)
		abort();
	if (fixed && in_buf)
		io_uring_prep_write_fixed(sqe, sr__ckpt_fd(j), addr, (unsigned)(s->len - s->done),
					  s->off + s->done, b);
	else
		io_uring_prep_write(sqe, sr__ckpt_fd(j), addr, (unsigned)(s->len - s->done),
				    s->off + s->done);
	sqe->flags |= sqe_flags;
	io_uring_sqe_set_data64(sqe, (uint64_t)b);
}

int sr__ckpt_run_uring(sr__ckpt_job *j, const char **why)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct iovec iov[SR_CKPT_NBUF];
	struct slot slots[SR_CKPT_NBUF];
	struct sr__ckpt_piece pc;
	size_t chunk = sr__ckpt_chunk(j);
	unsigned inflight = 0;
	bool eof = false, fixed;
	char *base;
	int r, err = 0;

	r = io_uring_queue_init(2 * SR_CKPT_NBUF + 2, &ring, 0);
	if (r == -EPERM || r == -EACCES || r == -ENOSYS || r == -ENOMEM || r == -EINVAL) {
		*why = r == -ENOSYS ? "io_uring_setup: not implemented by this kernel"
		       : r == -ENOMEM ? "io_uring_setup: out of locked memory"
		       : r == -EINVAL ? "io_uring_setup: invalid argument (old kernel)"
				      : "io_uring_setup: not permitted (seccomp, or the "
					"kernel.io_uring_disabled sysctl)";
		return SR__CKPT_REFUSED;
	}
	if (r < 0)
		return sr__ckpt_fail(j, r, "checkpoint: io_uring_queue_init failed: %s",
				     sr_strerror(r));

	/* io_uring's async workers (buffered writes that would block, fsync)
	 * stay where the writer thread may run: off the pool's cores. */
	{
		size_t sz;
		const void *cpus = sr__ckpt_job_cpus(j, &sz);
		if (cpus)
			io_uring_register_iowq_aff(&ring, sz, cpus);
	}
	/* Buffered writes to one file serialize on its inode lock: more than
	 * one async worker only adds contention (and CPU the pool needs). */
	{
		unsigned int maxw[2] = {1, 1};
		io_uring_register_iowq_max_workers(&ring, maxw);
	}
	base = aligned_alloc(SR_CKPT_ALIGN, SR_CKPT_NBUF * chunk);
	if (!base) {
		io_uring_queue_exit(&ring);
		return sr__ckpt_fail(j, -ENOMEM, "checkpoint: out of memory for write buffers");
	}
	for (int b = 0; b < SR_CKPT_NBUF; b++) {
		iov[b].iov_base = base + (size_t)b * chunk;
		iov[b].iov_len = chunk;
	}
	memset(slots, 0, sizeof(slots));
	fixed = io_uring_register_buffers(&ring, iov, SR_CKPT_NBUF) == 0;

	while (!eof || inflight) {
		/* Fill and submit every free buffer. */
		for (int b = 0; b < SR_CKPT_NBUF && !eof && !err; b++) {
			if (slots[b].busy)
				continue;
			r = sr__ckpt_produce(j, iov[b].iov_base, &pc);
			if (r < 0) {
				err = r;
				break;
			}
			if (r == 0) {
				eof = true;
				break;
			}
			r = sr__ckpt_fault_check(&pc);
			if (r) {
				err = sr__ckpt_fail(j, r,
						    "checkpoint: write of %zu bytes at offset %llu "
						    "failed: %s",
						    pc.len, (unsigned long long)pc.off, sr_strerror(r));
				break;
			}
			slots[b] = (struct slot){.busy = true, .off = pc.off, .len = pc.len,
						 .ptr = pc.ptr};
			prep(&ring, j, base, chunk, fixed, b, &slots[b], 0);
			inflight++;
		}
		if (err)
			eof = true; /* produce nothing more; drain what is in flight */
		if (!inflight)
			break;
		r = io_uring_submit_and_wait(&ring, 1);
		if (r < 0 && r != -EINTR) {
			err = sr__ckpt_fail(j, r, "checkpoint: io_uring_submit failed: %s",
					    sr_strerror(r));
			break; /* cannot reap safely: io_uring_queue_exit cancels */
		}
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			int b = (int)io_uring_cqe_get_data64(cqe);
			struct slot *s = &slots[b];
			seen++;
			if (cqe->res < 0) {
				err = sr__ckpt_fail(j, cqe->res,
						    "checkpoint: write of %zu bytes at offset %llu "
						    "failed: %s",
						    s->len - s->done,
						    (unsigned long long)(s->off + s->done),
						    sr_strerror(cqe->res));
				s->busy = false;
				inflight--;
			} else if (cqe->res == 0) {
				err = sr__ckpt_fail(j, -EIO, "checkpoint: write returned 0 at "
							     "offset %llu",
						    (unsigned long long)(s->off + s->done));
				s->busy = false;
				inflight--;
			} else {
				s->done += (size_t)cqe->res;
				if (s->done < s->len && !err) {
					prep(&ring, j, base, chunk, fixed, b, s, 0); /* short write */
				} else {
					s->busy = false;
					inflight--;
				}
			}
		}
		io_uring_cq_advance(&ring, seen);
	}

	if (!err) {
		/* Trailer last, linked to the fsync: the fsync starts only after
		 * the trailer is written, and is cancelled if that write fails. */
		struct io_uring_sqe *sqe;
		int res[2] = {1, 1};

		sr__ckpt_produce_trailer(j, iov[0].iov_base, &pc);
		r = sr__ckpt_fault_check(&pc);
		if (r) {
			err = sr__ckpt_fail(j, r, "checkpoint: write of the trailer failed: %s",
					    sr_strerror(r));
			goto out;
		}
		slots[0] = (struct slot){.busy = true, .off = pc.off, .len = pc.len, .ptr = pc.ptr};
		prep(&ring, j, base, chunk, fixed, 0, &slots[0], IOSQE_IO_LINK);
		sqe = io_uring_get_sqe(&ring);
		if (!sqe)
			abort();
		io_uring_prep_fsync(sqe, sr__ckpt_fd(j), 0);
		io_uring_sqe_set_data64(sqe, 100);
		r = io_uring_submit(&ring);
		if (r < 0) {
			err = sr__ckpt_fail(j, r, "checkpoint: io_uring_submit failed: %s",
					    sr_strerror(r));
			goto out;
		}
		for (int k = 0; k < 2; k++) {
			r = io_uring_wait_cqe(&ring, &cqe);
			if (r < 0) {
				err = sr__ckpt_fail(j, r, "checkpoint: io_uring_wait_cqe failed: %s",
						    sr_strerror(r));
				goto out;
			}
			res[io_uring_cqe_get_data64(cqe) == 100] = cqe->res;
			io_uring_cqe_seen(&ring, cqe);
		}
		if (res[0] < 0)
			err = sr__ckpt_fail(j, res[0], "checkpoint: write of the trailer failed: %s",
					    sr_strerror(res[0]));
		else if ((size_t)res[0] != pc.len)
			err = sr__ckpt_fail(j, -EIO, "checkpoint: short write of the trailer (%d of "
						     "%zu bytes)",
					    res[0], pc.len);
		else if (res[1] < 0)
			err = sr__ckpt_fail(j, res[1], "checkpoint: fsync failed: %s",
					    sr_strerror(res[1]));
	}
out:
	if (fixed)
		io_uring_unregister_buffers(&ring);
	io_uring_queue_exit(&ring);
	free(base);
	return err;
}

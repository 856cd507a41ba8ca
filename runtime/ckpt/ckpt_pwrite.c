/*
 * Checkpoint writer without io_uring: pwrite of each piece in file order,
 * then the trailer, then fsync. It runs in the job's thread (PWRITE
 * backend, or when io_uring is refused) or in the caller's (SYNC). Always
 * built: it is the fallback the io_uring writer relies on.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sr_base.h"
#include "ckpt_internal.h"

static int write_piece(sr__ckpt_job *j, const struct sr__ckpt_piece *pc)
{
	const char *p = pc->ptr;
	size_t left = pc->len;
	uint64_t off = pc->off;
	int err = sr__ckpt_fault_check(pc);

	if (err)
		return sr__ckpt_fail(j, err, "checkpoint: write of %zu bytes at offset %llu failed: %s",
				     pc->len, (unsigned long long)pc->off, sr_strerror(err));
	while (left) {
		ssize_t r = pwrite(sr__ckpt_fd(j), p, left, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			return sr__ckpt_fail(j, err,
					     "checkpoint: write of %zu bytes at offset %llu failed: %s",
					     left, (unsigned long long)off, sr_strerror(err));
		}
		if (r == 0)
			return sr__ckpt_fail(j, -EIO, "checkpoint: write returned 0 at offset %llu",
					     (unsigned long long)off);
		p += r;
		left -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int sr__ckpt_run_pwrite(sr__ckpt_job *j)
{
	struct sr__ckpt_piece pc;
	void *buf = aligned_alloc(SR_CKPT_ALIGN, sr__ckpt_chunk(j));
	int r, err = 0;

	if (!buf)
		return sr__ckpt_fail(j, -ENOMEM, "checkpoint: out of memory for the write buffer");
	while ((r = sr__ckpt_produce(j, buf, &pc)) > 0) {
		err = write_piece(j, &pc);
		if (err)
			goto out;
	}
	if (r < 0) {
		err = r;
		goto out;
	}
	/* The trailer goes last, after every section is written. */
	sr__ckpt_produce_trailer(j, buf, &pc);
	err = write_piece(j, &pc);
	if (err)
		goto out;
	if (fsync(sr__ckpt_fd(j)) < 0)
		err = sr__ckpt_fail(j, -errno, "checkpoint: fsync failed: %s", strerror(errno));
out:
	free(buf);
	return err;
}

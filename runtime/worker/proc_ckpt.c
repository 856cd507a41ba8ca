/*
 * Checkpoints of process workers, the trainer's side: SAVE, LOAD, COMMIT
 * (proc_internal.h; the exchange area's layout is include/stepring/proc.h's).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "proc_trainer_pvt.h"
#include "ring_internal.h"

#define XREC 32u /* struct sr__ckpt_env_rec, as include/stepring/proc.h lays it out */
_Static_assert(sizeof(struct sr__ckpt_env_rec) == XREC, "exchange record size");

/* The exchange segment holds at least @len bytes, mapped here. The
 * workers are idle (between commands): each maps the new size at its
 * next SAVE or LOAD. */
static int xchg_reserve(struct sr__procs *P, size_t len)
{
	void *m;

	if (len <= P->xlen)
		return 0;
	if (ftruncate(P->xfd, (off_t)len) ||
	    (errno = posix_fallocate(P->xfd, (off_t)P->xlen, (off_t)(len - P->xlen))))
		return sr__errorf(-errno, "checkpoint: %zu bytes of shared memory to exchange the "
				  "env states with the workers: %s", len, strerror(errno));
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, P->xfd, 0);
	if (m == MAP_FAILED)
		return sr__errorf(-errno, "checkpoint: mmap: %s", strerror(errno));
	if (P->xmap)
		munmap(P->xmap, P->xlen);
	P->xmap = m;
	P->xlen = len;
	return 0;
}

/* Lay the workers' areas out (@cap[w] bytes each, 4096-aligned) and set
 * their records for the next command. */
static int xchg_layout(struct sr__procs *P, const uint64_t *cap)
{
	size_t off = 0;
	int err;

	for (uint32_t w = 0; w < P->nworkers; w++) {
		struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

		r->xchg_off = off;
		r->xchg_cap = cap[w];
		r->xchg_len = 0;
		/* A worker program that does not know the command leaves it. */
		r->xchg_status = -ENOTSUP;
		atomic_store_explicit(&r->err_len, 0, memory_order_relaxed);
		off += (size_t)sr__align_up((size_t)cap[w], 4096);
	}
	err = xchg_reserve(P, off ? off : 4096);
	return err;
}

/* A command without rows (SAVE, LOAD, COMMIT) on every worker: each one's
 * part is empty (n = 0: a fault publishes no fault rows), @arg goes in seq
 * (COMMIT: 1 apply, 0 drop). After the commands in flight (async: the
 * pool checkpoints with none). */
static int run_xchg(struct sr__procs *P, uint32_t kind, uint64_t arg)
{
	struct sr__proc_crec *c;
	int err;

	c = sr__procs_begin(P, kind, arg, 0, &err);
	if (!c)
		return err;
	for (uint32_t w = 0; w < P->nworkers; w++)
		c->part[w] = (struct sr__proc_part){0, 0, 0, 0};
	return sr__procs_wait(P, sr__procs_post(P));
}

/* Did worker @w end during the command (restarted since @before)? Then
 * the error, naming @what. */
static int xchg_fault(struct sr__procs *P, uint32_t w, uint32_t before, const char *what)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

	if (r->restarts == before)
		return 0;
	return sr__errorf(-ECHILD, "%s: worker %u (envs %u-%u) ended meanwhile and was restarted "
			  "(its envs start over at the next step): %s",
			  what, w, r->first_env, r->first_env + r->n_envs - 1, P->last_fault);
}

/* Worker @w's refusal (-errno and its message), or 0. */
static int xchg_refused(struct sr__procs *P, uint32_t w, const char *what)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);
	uint32_t n = atomic_load_explicit(&r->err_len, memory_order_acquire);
	int st = r->xchg_status;

	if (!st || st == -ENOBUFS)
		return 0;
	atomic_store_explicit(&r->err_len, 0, memory_order_relaxed);
	if (st == -ENOTSUP && !n)
		return sr__errorf(-ENOTSUP, "%s: worker %u's program does not support "
				  "checkpoints (it ignored the command)", what, w);
	return sr__errorf(st < 0 ? st : -EIO, "%s: worker %u (envs %u-%u): %.*s", what, w,
			  r->first_env, r->first_env + r->n_envs - 1,
			  (int)(n < SR__PROC_ERR_MAX ? n : 0), r->err);
}

/* Worker @w's area after a SAVE: its records into @out, checked. */
static int xchg_parse(struct sr__procs *P, uint32_t w, struct sr__env_recs *out)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);
	const uint8_t *a = P->xmap + r->xchg_off;
	uint64_t n = r->n_envs, used = r->xchg_len, off = n * (XREC + 8);
	const uint64_t *len = (const uint64_t *)(a + n * XREC);

	if (used > r->xchg_cap || off > used)
		goto bad;
	memcpy(out->env + r->first_env, a, n * XREC);
	for (uint64_t i = 0; i < n; i++) {
		if (len[i] > used - off || sr__align_up(len[i], 8) > used - off)
			goto bad;
		out->rec[r->first_env + i] = a + off;
		out->len[r->first_env + i] = len[i];
		off += sr__align_up(len[i], 8);
	}
	return 0;
bad:
	return sr__errorf(-EBADMSG, "checkpoint: worker %u wrote a malformed exchange area "
			  "(%llu bytes of %llu)", w, (unsigned long long)used,
			  (unsigned long long)r->xchg_cap);
}

int sr__procs_save(struct sr__procs *P, struct sr__env_recs *out)
{
	uint32_t *before = calloc(P->nworkers, sizeof(uint32_t));
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (!before)
		return sr__errorf(-ENOMEM, "out of memory");
	/* Two rounds at most: the first tells the size of records the pool
	 * cannot know in advance (a Python env's pickle), the second fits. */
	for (int round = 0; round < 3; round++) {
		bool again = false;

		for (uint32_t w = 0; w < P->nworkers; w++) {
			struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

			if (!P->xcap[w])
				P->xcap[w] = (uint64_t)r->n_envs *
						     (XREC + 8 + sr__align_up(P->h->state_size, 8)) + 4096;
			before[w] = r->restarts;
		}
		err = xchg_layout(P, P->xcap);
		if (!err)
			err = run_xchg(P, SR_PROC_CMD_SAVE, 0);
		for (uint32_t w = 0; !err && w < P->nworkers; w++) {
			struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

			err = xchg_fault(P, w, before[w], "checkpoint");
			if (!err)
				err = xchg_refused(P, w, "checkpoint");
			if (!err && r->xchg_status == -ENOBUFS) {
				if (r->xchg_len > ((uint64_t)1 << 40)) {
					err = sr__errorf(-EFBIG, "checkpoint: worker %u needs %llu "
							 "bytes for its env states", w,
							 (unsigned long long)r->xchg_len);
					break;
				}
				/* Room to grow before the next checkpoint asks again. */
				P->xcap[w] = r->xchg_len + r->xchg_len / 4 + 4096;
				again = true;
			}
		}
		if (err || !again)
			break;
	}
	free(before);
	if (err)
		return err;
	err = sr__env_recs_alloc(out, P->num_envs);
	for (uint32_t w = 0; !err && w < P->nworkers; w++) {
		if (sr__proc_wrec(P->h, w)->xchg_status)
			err = sr__errorf(-EIO, "checkpoint: worker %u did not fit its env states in "
					 "the space it asked for", w);
		else
			err = xchg_parse(P, w, out);
	}
	if (err)
		sr__env_recs_free(out);
	return err;
}

int sr__procs_load(struct sr__procs *P, const struct sr__env_recs *in, uint64_t steps)
{
	uint64_t *cap = calloc(P->nworkers, sizeof(uint64_t));
	uint32_t *before = calloc(P->nworkers, sizeof(uint32_t));
	int err = 0, err2;

	if (!cap || !before) {
		err = sr__errorf(-ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t w = 0; w < P->nworkers; w++) {
		struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

		cap[w] = (uint64_t)r->n_envs * (XREC + 8);
		for (uint32_t i = 0; i < r->n_envs; i++)
			cap[w] += sr__align_up(in->len[r->first_env + i], 8);
		before[w] = r->restarts;
	}
	err = xchg_layout(P, cap);
	if (err)
		goto out;
	for (uint32_t w = 0; w < P->nworkers; w++) {
		struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);
		uint8_t *a = P->xmap + r->xchg_off;
		uint64_t n = r->n_envs, off = n * (XREC + 8);

		memcpy(a, in->env + r->first_env, n * XREC);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t l = in->len[r->first_env + i];

			memcpy(a + n * XREC + i * 8, &l, 8);
			memcpy(a + off, in->rec[r->first_env + i], l);
			memset(a + off + l, 0, sr__align_up(l, 8) - l);
			off += sr__align_up(l, 8);
		}
	}
	err = run_xchg(P, SR_PROC_CMD_LOAD, 0);
	for (uint32_t w = 0; !err && w < P->nworkers; w++) {
		err = xchg_fault(P, w, before[w], "restore");
		if (!err)
			err = xchg_refused(P, w, "restore");
	}
	/* Every worker staged its records: they become the envs; else they
	 * are dropped, and the pool is as it was. */
	err2 = run_xchg(P, SR_PROC_CMD_COMMIT, err ? 0 : 1);
	if (err || err2)
		goto out_err;
	for (uint32_t w = 0; !err && w < P->nworkers; w++)
		err = xchg_fault(P, w, before[w], "restore (while the workers took the states)");
	/* The workers are idle: the step counters restart from the
	 * checkpoint's total (worker 0's, as for threads). */
	for (uint32_t w = 0; w < P->nworkers; w++)
		atomic_store_explicit(&sr__proc_wrec(P->h, w)->steps, w ? 0 : steps,
				      memory_order_relaxed);
	goto out;
out_err:
	if (!err)
		err = err2;
out:
	free(cap);
	free(before);
	return err;
}

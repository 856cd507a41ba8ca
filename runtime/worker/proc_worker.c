/*
 * DESIGN: a process worker's side of the command block (see
 * proc_internal.h for the block and the orderings PC0..PC4,
 * proc_trainer.c for the trainer's side): the worker API of
 * include/stepring/proc.h, and the local handle of an inline worker 0.
 *
 * A worker process is started by the pool with the ring and the command
 * block as inherited descriptors. It sets PR_SET_PDEATHSIG (SIGKILL) and
 * then checks that its parent is still the pool's process (the parent may
 * have died before the prctl); while it waits for a command it wakes every
 * 200 ms to check again (the death signal follows the thread that spawned
 * it, so a pool made on a thread that exits is covered by the check).
 *
 * Waiting: spin on go while the recent waits were short (sr__spin in
 * proc_internal.h), then announce sleeping and futex_wait on go (shared
 * futex: the trainer is another process), PC2.
 *
 * The C env worker that runs on this API is proc_cworker.c.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc_internal.h"
#include "ring_internal.h"
#include "stepring/pool.h"

uint64_t sr_proc_seed(uint64_t seed, uint32_t index, uint32_t restarts)
{
	uint64_t x;

	if (!restarts)
		return seed;
	x = seed ^ (0x9e3779b97f4a7c15ull * ((uint64_t)index + 1)) ^
	    ((uint64_t)restarts << 40);
	return sr_splitmix64(&x) >> 1; /* 63 bits: Python seeds it as an int >= 0 */
}

static void fill_info(const struct sr_proc_worker *w, sr_proc_info *info)
{
	memset(info, 0, sizeof(*info));
	info->index = w->index;
	info->first_env = w->rec->first_env;
	info->n_envs = w->rec->n_envs;
	info->num_envs = w->h->num_envs;
	info->restarts = w->rec->restarts;
	info->autoreset = w->h->autoreset;
	info->obs_dim = w->h->obs_dim;
	info->act_size = w->h->act_size;
	info->seed = w->h->seed;
	info->env_base = w->h->env_base;
	info->payload = w->h->payload_len ? (char *)w->h + w->h->off_payload : NULL;
	info->payload_len = (size_t)w->h->payload_len;
	info->ring = w->ring;
	info->final_obs = w->h->keep_final ? (float *)((char *)w->h + w->h->off_final) : NULL;
	info->out = w->rec->out_size ? (char *)w->h + w->rec->off_out : NULL;
	info->out_size = (size_t)w->rec->out_size;
}

/* The producer's handle on the worker's episode queue (its record's). */
static void eps_init(struct sr_proc_worker *w)
{
	w->eps.e = (double *)((char *)w->h + w->rec->off_eps);
	w->eps.mask = w->rec->eps_cap - 1;
	w->eps.head = &w->rec->eps_head;
	w->eps.tail = &w->rec->eps_tail;
}

int sr__proc_worker_local(struct sr__proc_hdr *h, sr_ring *ring, uint32_t idx,
			  sr_proc_worker **out, sr_proc_info *info)
{
	struct sr_proc_worker *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return sr__errorf(-ENOMEM, "out of memory");
	w->h = h;
	w->rec = sr__proc_wrec(h, idx);
	eps_init(w);
	w->ring = ring;
	w->index = idx;
	w->trainer = getpid();
	w->local = true;
	w->xfd = -1;
	w->idle_t0 = sr__now_ns();
	if (info)
		fill_info(w, info);
	*out = w;
	return 0;
}

int sr__proc_worker_local_run(sr_proc_worker *w, sr_proc_inline_fn fn, void *arg,
			      const sr_proc_info *info, const sr_proc_cmd *cmd)
{
	uint64_t t0 = sr__now_ns(), t1;
	int rc;

	sr__add_relaxed(&w->rec->ns_idle, t0 - w->idle_t0);
	rc = fn(arg, w, info, cmd);
	t1 = sr__now_ns();
	if (!rc)
		sr__add_relaxed(&w->rec->steps, cmd->n);
	sr__add_relaxed(&w->rec->ns_env, t1 - t0);
	w->idle_t0 = t1;
	/* Only the trainer's thread reads this record's done_gen. */
	atomic_store_explicit(&w->rec->done_gen, cmd->gen, memory_order_relaxed);
	return rc;
}

int sr_proc_worker_open(sr_proc_worker **out, sr_proc_info *info)
{
	const char *env = getenv(SR__PROC_ENV);
	struct sr_proc_worker *w;
	struct stat st;
	unsigned idx;
	long long tp;
	int err;

	*out = NULL;
	if (!env || sscanf(env, "%u,%lld", &idx, &tp) != 2)
		return sr__errorf(-ENOENT, "not started by a stepring pool (%s is not set)",
				  SR__PROC_ENV);
	/* Die with the pool's process; if it is already gone, the parent is
	 * someone else now (a subreaper or init): leave at once. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != (pid_t)tp)
		_exit(0);
	w = calloc(1, sizeof(*w));
	if (!w)
		return sr__errorf(-ENOMEM, "out of memory");
	w->trainer = (pid_t)tp;
	w->index = idx;
	/* The exchange segment (checkpoints): kept open, mapped when needed. */
	w->xfd = fstat(SR__PROC_FD_XCHG, &st) ? -1 : SR__PROC_FD_XCHG;
	if (fstat(SR__PROC_FD_BLOCK, &st) || (size_t)st.st_size < sizeof(struct sr__proc_hdr)) {
		err = sr__errorf(-EBADMSG, "worker: no command block on fd %d", SR__PROC_FD_BLOCK);
		goto err_free;
	}
	w->len = (size_t)st.st_size;
	w->h = mmap(NULL, w->len, PROT_READ | PROT_WRITE, MAP_SHARED, SR__PROC_FD_BLOCK, 0);
	if (w->h == MAP_FAILED) {
		err = sr__errorf(-errno, "worker: mmap command block: %s", strerror(errno));
		goto err_free;
	}
	close(SR__PROC_FD_BLOCK);
	if (w->h->magic != SR__PROC_MAGIC || w->h->version != SR__PROC_VERSION ||
	    w->h->hdr_size != sizeof(struct sr__proc_hdr) || w->h->total_size != w->len ||
	    idx >= w->h->nworkers) {
		err = sr__errorf(-EBADMSG, "worker: fd %d is not a command block of version %u",
				 SR__PROC_FD_BLOCK, SR__PROC_VERSION);
		goto err_unmap;
	}
	w->rec = sr__proc_wrec(w->h, idx);
	eps_init(w);
	w->spin.max_ns = w->h->spin_ns;
	err = sr__ring_attach_fd(SR__PROC_FD_RING, false, &w->ring);
	if (err)
		goto err_unmap;
	/* PC0: commands up to start_gen were settled before this process
	 * was spawned (the pool may have issued the next one already). */
	w->last_go = w->rec->start_gen;
	if (info)
		fill_info(w, info);
	*out = w;
	return 0;

err_unmap:
	munmap(w->h, w->len);
err_free:
	free(w);
	return err;
}

void sr_proc_worker_ready(sr_proc_worker *w)
{
	w->idle_t0 = sr__now_ns();
	atomic_store_explicit(&w->rec->state, SR__PW_READY, memory_order_release);
}

/* Command @gen as worker @idx sees it (PC0: after the acquire of go). */
void sr__proc_cmd_of(struct sr__proc_hdr *h, uint32_t idx, uint32_t gen, sr_proc_cmd *cmd)
{
	const struct sr__proc_crec *r = sr__proc_crec(h, gen);
	const struct sr__proc_part *pt = &r->part[idx];

	memset(cmd, 0, sizeof(*cmd));
	cmd->kind = r->kind;
	cmd->gen = gen;
	cmd->actions = (char *)h + h->off_actions;
	cmd->mask = r->has_mask ? (const uint8_t *)((char *)h + h->off_mask) : NULL;
	cmd->n = pt->n;
	cmd->row = r->seq + pt->row;
	if (pt->lo == SR__PROC_LIST) {
		cmd->lo = 0;
		cmd->ids = sr__proc_ids(h) + pt->ids;
		cmd->seq = r->seq;
	} else {
		cmd->lo = pt->lo;
		cmd->ids = NULL;
		cmd->seq = cmd->row - pt->lo; /* env e at seq + e */
	}
	cmd->reset_flags = r->kind == SR_PROC_CMD_RESET ? r->reset_flags : 0;
	if (!cmd->reset_flags)
		return;
	cmd->reset_seed = r->reset_seed;
	cmd->seeds = (const uint64_t *)((char *)h + h->off_seeds);
	cmd->seed_mask = r->has_smask ? (const uint8_t *)((char *)h + h->off_smask) : NULL;
	cmd->reset_b[0] = r->reset_b[0];
	cmd->reset_b[1] = r->reset_b[1];
	cmd->payload = r->rpay_len ? (char *)h + h->off_rpay : NULL;
	cmd->payload_len = (size_t)r->rpay_len;
}

int sr_proc_worker_wait(sr_proc_worker *w, sr_proc_cmd *cmd)
{
	struct sr__proc_hdr *h = w->h;
	uint32_t g;
	uint64_t t0 = w->idle_t0 ? w->idle_t0 : sr__now_ns();
	uint64_t until = t0 + sr__spin_budget(&w->spin);
	bool spinning = until > t0;

	for (uint32_t i = 0;; i++) {
		/* PC0: acquire pairs with the trainer's release of go. */
		g = atomic_load_explicit(&h->go, memory_order_acquire);
		if (g != w->last_go)
			break;
		if (spinning) {
			sr__cpu_relax();
			if ((i & 31) != 31 || sr__now_ns() < until)
				continue;
			spinning = false;
		}
		/* PC2: announce, then re-check the word before sleeping. */
		atomic_store_explicit(&w->rec->sleeping, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&h->go, memory_order_seq_cst) == w->last_go &&
		    sr__futex_wait(&h->go, w->last_go, 200, true) == -ETIMEDOUT &&
		    getppid() != w->trainer) {
			atomic_store_explicit(&w->rec->sleeping, 0, memory_order_relaxed);
			return -ESHUTDOWN;
		}
		atomic_store_explicit(&w->rec->sleeping, 0, memory_order_relaxed);
	}
	/* Ordered by PC0's acquire: set before the last bump of go. */
	if (atomic_load_explicit(&h->stop, memory_order_relaxed))
		return -ESHUTDOWN;
	/* The commands up to g are posted: run them in order, one a call. */
	w->last_go++;
	w->busy_t0 = sr__now_ns();
	sr__spin_note(&w->spin, w->busy_t0 - t0);
	sr__add_relaxed(&w->rec->ns_idle, w->busy_t0 - t0);
	sr__proc_cmd_of(h, w->index, w->last_go, cmd);
	return 0;
}

void sr_proc_worker_done(sr_proc_worker *w, uint64_t steps, uint64_t ns_env)
{
	struct sr__proc_hdr *h = w->h;
	struct sr__proc_crec *r = sr__proc_crec(h, w->last_go);
	uint64_t t = sr__now_ns();

	sr__add_relaxed(&w->rec->steps, steps);
	sr__add_relaxed(&w->rec->ns_env, ns_env);
	if (t > w->busy_t0 + ns_env)
		sr__add_relaxed(&w->rec->ns_ring, t - w->busy_t0 - ns_env);
	w->idle_t0 = t;
	/* PC2: one wake-up of the trainer per command. done_left is counted
	 * down before done_gen (after done_gen the record may be rewritten,
	 * PC4), and every worker looks at it again after its done_gen: the
	 * one whose done_gen store comes last in the seq_cst order sees 0
	 * there (every count-down precedes its own worker's store), and bumps
	 * done_evt after every done_gen of the command. Two may both bump: a
	 * spare wake-up, no missed one. While the trainer waits for this
	 * command it does not rewrite its record. */
	atomic_fetch_sub_explicit(&r->done_left, 1, memory_order_seq_cst);
	/* PC1: the rows were published before this release. */
	atomic_store_explicit(&w->rec->done_gen, w->last_go, memory_order_seq_cst);
	if (atomic_load_explicit(&r->done_left, memory_order_seq_cst) != 0)
		return;
	atomic_fetch_add_explicit(&h->done_evt, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&h->trainer_sleeping, memory_order_seq_cst))
		sr__futex_wake(&h->done_evt, 1, true);
}

void sr_proc_worker_episode(sr_proc_worker *w, double ret, uint64_t len)
{
	/* PC3 (the queue's order, worker_internal.h). Full: the pool merges
	 * after every command, so never; dropped. */
	sr__eps_push(&w->eps, ret, len);
}

void sr_proc_worker_fail(sr_proc_worker *w, const char *msg)
{
	size_t n = strlen(msg);

	if (n >= SR__PROC_ERR_MAX)
		msg += n - (SR__PROC_ERR_MAX - 1); /* a traceback's end says most */
	n = strlen(msg);
	memcpy(w->rec->err, msg, n + 1);
	atomic_store_explicit(&w->rec->err_len, (uint32_t)n, memory_order_release);
	atomic_store_explicit(&w->rec->state, SR__PW_FAILED, memory_order_release);
}

void sr__proc_worker_local_xchg(sr_proc_worker *w, int fd)
{
	w->xfd = fd;
}

int sr_proc_worker_xchg(sr_proc_worker *w, void **area, size_t *cap)
{
	const struct sr__proc_wrec *r = w->rec;
	struct stat st;

	*area = NULL;
	*cap = 0;
	if (w->xfd < 0)
		return sr__errorf(-EBADF, "worker: no exchange segment (fd %d)", SR__PROC_FD_XCHG);
	/* The trainer grew it (ftruncate) before the command, if needed:
	 * map it again at its size now (PC0 ordered the size before go). */
	if (fstat(w->xfd, &st))
		return sr__errorf(-errno, "worker: exchange segment: %s", strerror(errno));
	if ((size_t)st.st_size != w->xlen) {
		void *m = MAP_FAILED;

		if (st.st_size > 0)
			m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, w->xfd,
				 0);
		if (w->xmap)
			munmap(w->xmap, w->xlen);
		w->xmap = NULL;
		w->xlen = 0;
		if (m == MAP_FAILED)
			return sr__errorf(-EIO, "worker: mmap of the exchange segment failed");
		w->xmap = m;
		w->xlen = (size_t)st.st_size;
	}
	if (r->xchg_off > w->xlen || r->xchg_cap > w->xlen - r->xchg_off)
		return sr__errorf(-EBADMSG, "worker: exchange area [%llu, +%llu) outside the "
				  "segment (%zu bytes)", (unsigned long long)r->xchg_off,
				  (unsigned long long)r->xchg_cap, w->xlen);
	*area = w->xmap + r->xchg_off;
	*cap = (size_t)r->xchg_cap;
	return 0;
}

void sr_proc_worker_xchg_end(sr_proc_worker *w, int status, uint64_t len, const char *msg)
{
	struct sr__proc_wrec *r = w->rec;

	if (msg && status) {
		size_t n = strlen(msg);

		if (n >= SR__PROC_ERR_MAX)
			n = SR__PROC_ERR_MAX - 1;
		memcpy(r->err, msg, n);
		r->err[n] = 0;
		atomic_store_explicit(&r->err_len, (uint32_t)n, memory_order_release);
	}
	r->xchg_len = len;
	/* PC1: read by the trainer after done_gen (release, in _done). */
	r->xchg_status = status;
}

void sr_proc_worker_close(sr_proc_worker *w)
{
	if (!w)
		return;
	if (w->xmap)
		munmap(w->xmap, w->xlen);
	if (!w->local) {
		sr_ring_destroy(w->ring);
		munmap(w->h, w->len);
	}
	free(w);
}

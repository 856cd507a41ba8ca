/*
 * Replay across MPI ranks (stepring/mpi.h, docs/scale.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mpi_internal.h"

/* ---------------------------------------------------------------------------
 * Replay across ranks (docs/scale.md; docs/ring.md for the seqlock). Every
 * rank's ring is an MPI window. A ring is read directly when it is mapped
 * here: this rank's own, or another rank's of this node, attached through
 * /proc/PID/fd (zero copy from the producer's columns to the caller's
 * rows). Other rings are read with passive-target MPI_Get: per batch and
 * epoch, one get per target rank, whose target datatype lists every row's
 * column pieces and whose origin datatype lists where they land.
 *
 * Small reads cost as much as kilobytes of bandwidth on every transport
 * (Open MPI's osc/pt2pt: ~8 us a piece on this machine), so the rows of a
 * rank are read in slot order and the pieces of a narrow column (action,
 * reward, flags, ..., and obs under GAP_MERGE bytes) closer than
 * GAP_MERGE bytes are read as one span into a staging buffer, then copied
 * out; wide rows (obs) go straight to the caller's rows.
 */
#define GAP_MERGE 4096
#define NCOL 8
#define HC_MAX 512 /* bytes from head to the end of cursor in the header */

struct ring_geo {
	uint64_t cap, len, first_env;
	uint64_t off_obs, off_action, off_reward, off_term, off_trunc, off_flags, off_env,
		off_prev, off_seq, off_head, off_cursor;
	uint64_t dev, ino; /* the segment's file: a rank of the node checks it opened this one */
	uint64_t cursor0;  /* the ring's cursor when the sampler was made (inserts count from it) */
	int32_t pid, fd;   /* the creator's descriptor of it, for /proc/PID/fd/FD */
	uint32_t obs_dim, act_size, node, reserved;
};

/* One side of a get's datatype: blocks in order, adjacent ones merged. */
struct blist {
	MPI_Aint *at;
	int *len;
	uint32_t n, cap;
};

/* A span of one narrow column read at once: target offset, bytes, where
 * in the staging buffer. */
struct span {
	uint64_t t, len, stage;
};

/* A column to read: at offset *(geo + at) of each rank's segment, row i's
 * piece lands at dst + i * w (dst NULL: not read). */
struct col {
	size_t at;
	uint32_t w;
	unsigned char *dst;
};

static uint64_t col_off(const struct ring_geo *g, const struct col *c)
{
	uint64_t v;

	memcpy(&v, (const unsigned char *)g + c->at, sizeof(v));
	return v;
}

/* A pending row in read order. */
struct rowkey {
	uint32_t rk;
	uint32_t i;
	uint64_t s;
	double p; /* prioritized: its leaf's value */
};

struct sr_mpi_replay {
	sr_mpi_pool *mp;
	MPI_Win win;
	struct ring_geo *geo;          /* per rank */
	unsigned char *base;           /* this rank's segment */
	const unsigned char **dbase;   /* per rank: its segment mapped here, or NULL (MPI) */
	sr_ring **att;                 /* per rank: the attached handle of another rank's ring */
	uint8_t *use;                  /* per rank: drawn from */
	uint32_t flags;
	sr_rng rng;
	uint64_t bytes, retries;
	uint32_t cap_rows;
	/* per row scratch */
	uint32_t *rk;
	uint64_t *s, *seq2, *prev, *seqp2, *pkey;
	uint8_t *flg, *ok;
	uint32_t *envl;
	struct rowkey *rows;           /* pending rows by (rank, slot) */
	uint32_t *first;               /* per rank + 1: its rows in rows[] */
	uint32_t *where;               /* per row and column: its span */
	uint64_t *delta;               /* per row and column: its offset in the span */
	struct blist tl, ol;           /* the get being built: target, origin */
	struct span *sp;
	uint32_t nsp, cap_sp;
	uint32_t *sp_first;            /* per rank + 1: its spans */
	unsigned char *stage;
	size_t stage_cap;
	unsigned char (*hcb)[HC_MAX];  /* per rank: the header bytes from head to cursor */
	uint64_t (*hc)[2];             /* per rank: head, cursor, as last read */
	int have_hc;
	/* prioritized (sr_mpi_replay_prioritize): a sum-tree over every
	 * rank's slots, rank k's slot x at leaf lbase[k] + x */
	double *tree;                  /* 2 * nleaf: node i's children 2i, 2i + 1; leaves from nleaf */
	uint64_t *lseq;                /* per leaf: the sequence it holds */
	uint64_t *lbase;               /* per rank + 1 */
	uint64_t *synced;              /* per rank: next sequence to enter the tree */
	uint64_t nleaf, live;
	double alpha, beta, eps, max_p;
	double *pw;                    /* per row: its leaf's value when drawn */
	/* counters and limiter across ranks */
	MPI_Win cwin;                  /* rank 0: the samples every sampler returned */
	uint64_t *cbuf;                /* cwin's memory */
	uint64_t acc, acc_old, fetched; /* an accumulate's origin and result; a fetch's */
	MPI_Request crq;               /* the last accumulate, or MPI_REQUEST_NULL */
	MPI_Request *rq;               /* the gets of the epoch in flight (per rank + 1) */
	int nrq;
	uint64_t samples;              /* rows this sampler returned */
	double spi, min_size, ebuf;
	int32_t timeout_ms;
	bool limited;
};

static void tree_set(struct sr_mpi_replay *r, uint64_t leaf, double v);
static int count_done(struct sr_mpi_replay *r);
static int wait_reqs(struct sr_mpi_replay *r, int n, MPI_Request *rq, const char *what);

/* Rank @k's slots to draw from, as of the last read of its head and
 * cursor: [max(head - capacity, 0) + 1, cursor) (the oldest slot is the
 * next to be lapped: left out). Returns the count, *lo the first. */
static uint64_t ring_window(const struct sr_mpi_replay *r, uint32_t k, uint64_t *lo)
{
	uint64_t h = r->hc[k][0], c = r->hc[k][1], cap = r->geo[k].cap;
	uint64_t l = h > cap ? h - cap + 1 : 0;

	if (lo)
		*lo = l;
	return c > l ? c - l : 0;
}

static int blist_room(struct blist *b, uint32_t n)
{
	MPI_Aint *at;
	int *len;

	if (n <= b->cap)
		return 0;
	at = realloc(b->at, n * sizeof(*at));
	if (at)
		b->at = at;
	len = realloc(b->len, n * sizeof(*len));
	if (len)
		b->len = len;
	if (!at || !len)
		return sr__errorf(-ENOMEM, "out of memory");
	b->cap = n;
	return 0;
}

static void blist_add(struct blist *b, MPI_Aint at, size_t len)
{
	if (b->n && b->at[b->n - 1] + b->len[b->n - 1] == at &&
	    (size_t)b->len[b->n - 1] + len <= (size_t)(1u << 30)) {
		b->len[b->n - 1] += (int)len;
		return;
	}
	b->at[b->n] = at;
	b->len[b->n] = (int)len;
	b->n++;
}

/* Queue @len bytes at target offset @t into @dst (both lists: room was
 * made by the caller). */
static void blk_add(struct sr_mpi_replay *r, uint64_t t, size_t len, void *dst)
{
	MPI_Aint a;

	MPI_Get_address(dst, &a);
	blist_add(&r->tl, (MPI_Aint)t, len);
	blist_add(&r->ol, a, len);
	r->bytes += len;
}

static int blist_type(const struct blist *b, MPI_Datatype *t)
{
	int rc;

	if (b->n == 1)
		rc = MPI_Type_create_hindexed_block(1, b->len[0], b->at, MPI_BYTE, t);
	else
		rc = MPI_Type_create_hindexed((int)b->n, b->len, b->at, MPI_BYTE, t);
	return rc == MPI_SUCCESS ? MPI_Type_commit(t) : rc;
}

/* Issue the reads queued from rank @k as one MPI_Get (an hindexed
 * datatype on each side; the origin's at absolute addresses). */
static int blk_get(struct sr_mpi_replay *r, uint32_t k)
{
	MPI_Datatype tt = MPI_DATATYPE_NULL, ot = MPI_DATATYPE_NULL;
	int rc = MPI_SUCCESS;

	if (r->tl.n == 0)
		return MPI_SUCCESS;
	rc = blist_type(&r->tl, &tt);
	if (rc == MPI_SUCCESS)
		rc = blist_type(&r->ol, &ot);
	if (rc == MPI_SUCCESS)
		rc = MPI_Rget(MPI_BOTTOM, 1, ot, (int)k, 0, 1, tt, r->win, &r->rq[r->nrq++]);
	/* Freeing a datatype leaves the operations that use it intact. */
	if (tt != MPI_DATATYPE_NULL)
		MPI_Type_free(&tt);
	if (ot != MPI_DATATYPE_NULL)
		MPI_Type_free(&ot);
	r->tl.n = r->ol.n = 0;
	return rc;
}

/* This node's rank's ring @g, mapped read-only through its creator's
 * descriptor (/proc/PID/fd/FD): NULL when that fails (another PID
 * namespace, a ptrace policy that forbids it, a file that is not the one
 * the rank named): that ring is then read through MPI. */
static sr_ring *attach_peer(const struct ring_geo *g)
{
	const struct sr__ring_hdr *h;
	char path[64];
	struct stat st;
	sr_ring *ring = NULL;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)g->pid, (int)g->fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || (uint64_t)st.st_dev != g->dev || (uint64_t)st.st_ino != g->ino ||
	    (uint64_t)st.st_size != g->len) {
		close(fd);
		return NULL;
	}
	if (sr__ring_attach_fd(fd, true, &ring)) { /* closes nothing on failure */
		close(fd);
		return NULL;
	}
	/* The columns are read at the offsets the rank sent: they must be
	 * the ones its validated header gives. */
	h = ring->hdr;
	if (h->capacity != g->cap || h->obs_dim != g->obs_dim || h->act_size != g->act_size ||
	    h->off_obs != g->off_obs || h->off_action != g->off_action ||
	    h->off_reward != g->off_reward || h->off_terminated != g->off_term ||
	    h->off_truncated != g->off_trunc || h->off_flags != g->off_flags ||
	    h->off_env_id != g->off_env || h->off_prev != g->off_prev || h->off_seq != g->off_seq) {
		sr_ring_destroy(ring);
		return NULL;
	}
	return ring;
}

static void free_rows(struct sr_mpi_replay *r)
{
	free(r->rk);
	free(r->s);
	free(r->seq2);
	free(r->prev);
	free(r->seqp2);
	free(r->flg);
	free(r->ok);
	free(r->envl);
	free(r->rows);
	free(r->where);
	free(r->delta);
	free(r->pkey);
	free(r->pw);
	r->pw = NULL;
	r->rk = r->envl = r->where = NULL;
	r->s = r->seq2 = r->prev = r->seqp2 = r->delta = r->pkey = NULL;
	r->flg = r->ok = NULL;
	r->rows = NULL;
	r->cap_rows = 0;
}

static void replay_free(struct sr_mpi_replay *r)
{
	if (r->att)
		for (uint32_t k = 0; k < r->mp->info.size; k++)
			sr_ring_destroy(r->att[k]);
	free_rows(r);
	free(r->tl.at);
	free(r->tl.len);
	free(r->ol.at);
	free(r->ol.len);
	free(r->sp);
	free(r->sp_first);
	free(r->rq);
	free(r->stage);
	free(r->tree);
	free(r->lseq);
	free(r->lbase);
	free(r->synced);
	free(r->hcb);
	free(r->att);
	free(r->dbase);
	free(r->use);
	free(r->first);
	free(r->geo);
	free(r->hc);
	free(r);
}

int sr_mpi_replay_create(sr_mpi_pool *mp, uint32_t flags, sr_mpi_replay **out)
{
	const char *what = "sr_mpi_replay_create";
	const uint32_t known = SR_MPI_REPLAY_F_FORCE_MPI | SR_MPI_REPLAY_F_NO_SHM;
	bool wlocked = false, clocked = false;
	struct sr_mpi_replay *r;
	struct ring_geo g;
	struct stat st;
	sr_ring *ring;
	uint32_t R;
	size_t len = 0;
	int err = 0, rc;

	if (!mp || !out)
		return sr__errorf(-EINVAL, "%s: NULL argument", what);
	*out = NULL;
	R = mp->info.size;
	if (flags & ~known)
		err = sr__errorf(-EINVAL, "%s: unknown flags 0x%x", what, flags & ~known);
	r = calloc(1, sizeof(*r));
	if (!r)
		return sr__errorf(-ENOMEM, "out of memory");
	r->mp = mp;
	r->flags = flags;
	r->win = MPI_WIN_NULL;
	r->cwin = MPI_WIN_NULL;
	r->geo = calloc(R, sizeof(*r->geo));
	r->hc = calloc(R, sizeof(*r->hc));
	r->hcb = calloc(R, sizeof(*r->hcb));
	r->dbase = calloc(R, sizeof(*r->dbase));
	r->att = calloc(R, sizeof(*r->att));
	r->use = malloc(R);
	r->first = calloc(R + 1, sizeof(*r->first));
	r->sp_first = calloc(R + 1, sizeof(*r->sp_first));
	r->rq = calloc(R + 1, sizeof(*r->rq));
	r->crq = MPI_REQUEST_NULL;
	if (!r->geo || !r->hc || !r->hcb || !r->dbase || !r->att || !r->use || !r->first ||
	    !r->sp_first || !r->rq)
		err = sr__errorf(-ENOMEM, "out of memory");
	else
		memset(r->use, 1, R);
	ring = mp->pool->ring.r;
	memset(&g, 0, sizeof(g));
	if (!err) {
		const struct sr__ring_hdr *h;

		r->base = ring->base;
		len = ring->len;
		h = (const struct sr__ring_hdr *)r->base;
		g.cap = h->capacity;
		g.len = len;
		g.first_env = mp->info.first_env;
		g.obs_dim = h->obs_dim;
		g.act_size = h->act_size;
		g.off_obs = h->off_obs;
		g.off_action = h->off_action;
		g.off_reward = h->off_reward;
		g.off_term = h->off_terminated;
		g.off_trunc = h->off_truncated;
		g.off_flags = h->off_flags;
		g.off_env = h->off_env_id;
		g.off_prev = h->off_prev;
		g.off_seq = h->off_seq;
		g.off_head = offsetof(struct sr__ring_hdr, head);
		g.off_cursor = offsetof(struct sr__ring_hdr, cursor);
		g.node = mp->info.node;
		g.cursor0 = atomic_load_explicit(&h->cursor, memory_order_acquire);
		g.pid = (int32_t)getpid();
		g.fd = ring->fd;
		if (ring->fd >= 0 && fstat(ring->fd, &st) == 0) {
			g.dev = (uint64_t)st.st_dev;
			g.ino = (uint64_t)st.st_ino;
		} else {
			g.fd = -1;
		}
	}
	_Static_assert(offsetof(struct sr__ring_hdr, cursor) + 8 - offsetof(struct sr__ring_hdr, head) <=
			       HC_MAX,
		       "head and cursor within HC_MAX bytes");
	rc = sr__mpi_allgather(mp->comm, &g, r->geo, (int)sizeof(g), mp->timeout_s, what);
	if (rc) {
		replay_free(r);
		return rc;
	}
	err = sr__mpi_agree(mp, err, what);
	if (!err) {
		rc = MPI_Win_create(r->base, (MPI_Aint)len, 1, MPI_INFO_NULL, mp->comm, &r->win);
		if (rc != MPI_SUCCESS) {
			err = sr__mpi_fail(rc, "MPI_Win_create");
			err = sr__errorf(err, "%s; Open MPI's one-sided component may not work over "
					 "this transport: try OMPI_MCA_osc=pt2pt (or ucx)",
					 sr_last_error());
		} else {
			MPI_Win_set_errhandler(r->win, MPI_ERRORS_RETURN);
			/* One passive-target epoch for the sampler's life; no
			 * rank ever locks exclusively. */
			rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, r->win);
			if (rc != MPI_SUCCESS)
				err = sr__mpi_fail(rc, "MPI_Win_lock_all");
			else
				wlocked = true;
		}
		err = sr__mpi_agree(mp, err, what);
	}
	/* The samples of every sampler, summed at rank 0 (MPI_Accumulate). */
	if (!err) {
		rc = MPI_Win_allocate(mp->info.rank == 0 ? 8 : 0, 8, MPI_INFO_NULL, mp->comm,
				      &r->cbuf, &r->cwin);
		if (rc == MPI_SUCCESS) {
			MPI_Win_set_errhandler(r->cwin, MPI_ERRORS_RETURN);
			if (mp->info.rank == 0)
				*r->cbuf = 0;
			rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, r->cwin);
			if (rc == MPI_SUCCESS)
				clocked = true;
		}
		if (rc != MPI_SUCCESS)
			err = sr__mpi_fail(rc, "MPI_Win_allocate");
		err = sr__mpi_agree(mp, err, what);
	}
	if (err) {
		if (wlocked)
			MPI_Win_unlock_all(r->win);
		if (r->win != MPI_WIN_NULL)
			MPI_Win_free(&r->win);
		if (clocked)
			MPI_Win_unlock_all(r->cwin);
		if (r->cwin != MPI_WIN_NULL)
			MPI_Win_free(&r->cwin);
		replay_free(r);
		return err;
	}
	/* Open the access epoch to every rank now, while every rank is in
	 * this call: Open MPI's osc/pt2pt takes the lock_all's lock on a
	 * target lazily, at the first access, and blocks in MPI_Rget until
	 * the target answers; a target that hangs later would then hang the
	 * sampler before any timeout could act. */
	for (uint32_t k = 0; k < R && !err; k++) {
		rc = MPI_Rget(&r->hc[k][0], 8, MPI_BYTE, (int)k, (MPI_Aint)r->geo[k].off_head, 8,
			      MPI_BYTE, r->win, &r->rq[r->nrq++]);
		if (rc != MPI_SUCCESS)
			err = sr__mpi_fail(rc, "MPI_Rget");
	}
	if (!err)
		err = wait_reqs(r, r->nrq, r->rq, what);
	r->nrq = 0;
	if (!err) {
		rc = MPI_Rget_accumulate(NULL, 0, MPI_UINT64_T, &r->fetched, 1, MPI_UINT64_T, 0, 0, 1,
					 MPI_UINT64_T, MPI_NO_OP, r->cwin, &r->rq[0]);
		err = rc != MPI_SUCCESS ? sr__mpi_fail(rc, "MPI_Rget_accumulate")
					: wait_reqs(r, 1, r->rq, what);
	}
	err = sr__mpi_agree(mp, err, what);
	if (err) {
		MPI_Win_unlock_all(r->win);
		MPI_Win_free(&r->win);
		MPI_Win_unlock_all(r->cwin);
		MPI_Win_free(&r->cwin);
		replay_free(r);
		return err;
	}
	/* Rings read directly: this rank's, and (unless NO_SHM) the other
	 * rings of this node that open as the file their rank named. */
	if (!(flags & SR_MPI_REPLAY_F_FORCE_MPI)) {
		r->dbase[mp->info.rank] = r->base;
		for (uint32_t k = 0; k < R && !(flags & SR_MPI_REPLAY_F_NO_SHM); k++) {
			if (k == mp->info.rank || r->geo[k].node != mp->info.node ||
			    r->geo[k].fd < 0)
				continue;
			r->att[k] = attach_peer(&r->geo[k]);
			if (r->att[k])
				r->dbase[k] = r->att[k]->base;
		}
	}
	sr_rng_seed(&r->rng, 0x5a3b1e5eedull, mp->info.rank);
	*out = r;
	return 0;
}

void sr_mpi_replay_destroy(sr_mpi_replay *r)
{
	if (!r)
		return;
	if (r->crq != MPI_REQUEST_NULL)
		count_done(r); /* an error here: the job is failing anyway */
	MPI_Win_unlock_all(r->win);
	MPI_Win_free(&r->win);
	MPI_Win_unlock_all(r->cwin);
	MPI_Win_free(&r->cwin);
	replay_free(r);
}

void sr_mpi_replay_counters(const sr_mpi_replay *r, uint64_t *bytes, uint64_t *retries)
{
	if (bytes)
		*bytes = r ? r->bytes : 0;
	if (retries)
		*retries = r ? r->retries : 0;
}

int sr_mpi_replay_direct(const sr_mpi_replay *r, uint32_t rank)
{
	if (!r || rank >= r->mp->info.size)
		return sr__errorf(-EINVAL, "sr_mpi_replay_direct: %s",
				  r ? "rank out of range" : "NULL sampler");
	return r->dbase[rank] != NULL;
}

int sr_mpi_replay_set_sources(sr_mpi_replay *r, const uint8_t *use)
{
	uint32_t any = 0;

	if (!r)
		return sr__errorf(-EINVAL, "sr_mpi_replay_set_sources: NULL sampler");
	if (use) {
		for (uint32_t k = 0; k < r->mp->info.size; k++)
			any |= use[k] != 0;
		if (!any)
			return sr__errorf(-EINVAL, "sr_mpi_replay_set_sources: no rank chosen");
	}
	for (uint32_t k = 0; k < r->mp->info.size; k++) {
		r->use[k] = use ? use[k] != 0 : 1;
		/* prioritized: a ring left out leaves the tree; taken in again,
		 * its window enters at the largest priority (tree_sync) */
		for (uint64_t x = 0; r->tree && !r->use[k] && x < r->geo[k].cap; x++) {
			if (r->tree[r->nleaf + r->lbase[k] + x] > 0)
				tree_set(r, r->lbase[k] + x, 0);
			r->lseq[r->lbase[k] + x] = UINT64_MAX;
		}
		if (r->tree && !r->use[k])
			r->synced[k] = 0;
	}
	r->have_hc = 0; /* read the rings newly chosen before drawing */
	return 0;
}

static int rows_room(struct sr_mpi_replay *r, uint32_t n)
{
	if (n <= r->cap_rows)
		return 0;
	free_rows(r);
	r->rk = malloc(n * sizeof(*r->rk));
	r->s = malloc(n * sizeof(uint64_t));
	r->seq2 = malloc(n * sizeof(uint64_t));
	r->prev = malloc(n * sizeof(uint64_t));
	r->seqp2 = malloc(n * sizeof(uint64_t));
	r->pkey = malloc(n * sizeof(uint64_t));
	r->pw = malloc(n * sizeof(double));
	r->flg = malloc(n);
	r->ok = malloc(n);
	r->envl = malloc(n * sizeof(uint32_t));
	r->rows = malloc(n * sizeof(*r->rows));
	r->where = malloc((size_t)n * NCOL * sizeof(*r->where));
	r->delta = malloc((size_t)n * NCOL * sizeof(*r->delta));
	if (!r->rk || !r->s || !r->seq2 || !r->prev || !r->seqp2 || !r->pkey || !r->pw || !r->flg ||
	    !r->ok || !r->envl || !r->rows || !r->where || !r->delta) {
		free_rows(r);
		return sr__errorf(-ENOMEM, "out of memory");
	}
	r->cap_rows = n;
	/* a get: a piece per row and column at most */
	if (blist_room(&r->tl, NCOL * n + 2) || blist_room(&r->ol, NCOL * n + 2))
		return sr__errorf(-ENOMEM, "out of memory");
	return 0;
}

#define RQ(x)                                                                              \
	do {                                                                               \
		int rc_ = (x);                                                             \
		if (rc_ != MPI_SUCCESS)                                                    \
			return sr__mpi_fail(rc_, "sr_mpi_replay_sample");                      \
	} while (0)

/*
 * Wait for @n one-sided requests, at most the pool's timeout
 * (STEPRING_MPI_TIMEOUT): a get completes when its bytes are here (so the
 * target read them), an MPI_Rget_accumulate when its result is, i.e. the
 * operation was applied at the target. MPI_Win_flush has no timeout: a
 * target rank that hangs (with osc/pt2pt its progress engine serves the
 * reads) would hang the sampler; this turns it into -ETIMEDOUT. Polls
 * (MPI progress, as a flush would) for 10 ms, then every 50 us.
 */
static int wait_reqs(struct sr_mpi_replay *r, int n, MPI_Request *rq, const char *what)
{
	double t0 = MPI_Wtime();
	unsigned polls = 0;
	int done = 0, rc;

	while (n > 0) {
		rc = MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
		if (rc != MPI_SUCCESS)
			return sr__mpi_fail(rc, what);
		if (done)
			break;
		if ((++polls & 63) == 0) {
			double dt = MPI_Wtime() - t0;

			if (dt > r->mp->timeout_s)
				return sr__errorf(-ETIMEDOUT, "%s: rank %u waited %.0f s for "
						  "one-sided reads of another rank: a rank died or "
						  "hangs (STEPRING_MPI_TIMEOUT sets the limit)",
						  what, r->mp->info.rank, r->mp->timeout_s);
			if (dt > 0.01) { /* past 10 ms: something is wrong; poll gently */
				struct timespec ts = {0, 50000};
				nanosleep(&ts, NULL);
			}
		}
	}
	return 0;
}

/* Complete the gets issued since the last epoch. */
static int epoch_end(struct sr_mpi_replay *r, bool remote)
{
	int err = 0;

	if (remote || r->nrq)
		err = wait_reqs(r, r->nrq, r->rq, "sr_mpi_replay_sample");
	r->nrq = 0;
	/* R3 for the rings read directly: the column copies above are
	 * ordered before the loads of head, cursor and seq that follow. */
	atomic_thread_fence(memory_order_acquire);
	return err;
}

static int cmp_rowkey(const void *a, const void *b)
{
	const struct rowkey *x = a, *y = b;

	if (x->rk != y->rk)
		return x->rk < y->rk ? -1 : 1;
	return (x->s > y->s) - (x->s < y->s);
}

/*
 * Read @nc columns @c of the pending rows of the rings read through MPI,
 * at the slots key[i] (rows with key[i] == SR_RING_NO_PREV skipped): one
 * get per rank, one wait. The rows of a rank are in slot order in
 * r->rows (r->first), so pieces of a narrow column that lie within
 * GAP_MERGE bytes of each other are read as one span.
 */
static int read_cols(struct sr_mpi_replay *r, const uint64_t *key, const struct col *c, int nc)
{
	const uint32_t R = r->mp->info.size;
	size_t need = 0;
	bool remote = false;
	int err;

	/* 1. Plan the spans of the narrow columns, every rank's at once (the
	 * staging buffer is sized before any address is taken). */
	r->nsp = 0;
	for (uint32_t k = 0; k < R; k++) {
		const struct ring_geo *g = &r->geo[k];

		r->sp_first[k] = r->nsp;
		if (r->dbase[k])
			continue;
		for (int ci = 0; ci < nc; ci++) {
			struct span *cur = NULL;

			if (!c[ci].dst || c[ci].w >= GAP_MERGE)
				continue;
			for (uint32_t j = r->first[k]; j < r->first[k + 1]; j++) {
				uint32_t i = r->rows[j].i;
				uint64_t t;

				if (key[i] == SR_RING_NO_PREV)
					continue;
				t = col_off(g, &c[ci]) + (key[i] & (g->cap - 1)) * c[ci].w;
				/* slot order: t grows within a column but at the
				 * ring's wrap (and, for prev slots, now and then) */
				if (!cur || t < cur->t || t > cur->t + cur->len + GAP_MERGE) {
					if (r->nsp == r->cap_sp) {
						uint32_t nc2 = r->cap_sp ? 2 * r->cap_sp : 64;
						struct span *sp = realloc(r->sp, nc2 * sizeof(*sp));

						if (!sp)
							return sr__errorf(-ENOMEM, "out of memory");
						r->sp = sp;
						r->cap_sp = nc2;
					}
					cur = &r->sp[r->nsp++];
					cur->t = t;
					cur->len = 0;
				}
				if (t + c[ci].w - cur->t > cur->len)
					cur->len = t + c[ci].w - cur->t;
				r->where[(size_t)i * NCOL + ci] = (uint32_t)(cur - r->sp);
				r->delta[(size_t)i * NCOL + ci] = t - cur->t;
			}
		}
	}
	r->sp_first[R] = r->nsp;
	for (uint32_t q = 0; q < r->nsp; q++) {
		r->sp[q].stage = need;
		need += sr__align_up(r->sp[q].len, 8);
	}
	if (need > r->stage_cap) {
		unsigned char *st = realloc(r->stage, need);

		if (!st)
			return sr__errorf(-ENOMEM, "out of memory");
		r->stage = st;
		r->stage_cap = need;
	}
	if (blist_room(&r->tl, r->nsp + (uint32_t)nc * r->cap_rows + 2) ||
	    blist_room(&r->ol, r->nsp + (uint32_t)nc * r->cap_rows + 2))
		return sr__errorf(-ENOMEM, "out of memory");
	/* 2. One get per rank: the wide columns' rows, then the spans. */
	for (uint32_t k = 0; k < R; k++) {
		const struct ring_geo *g = &r->geo[k];

		if (r->dbase[k])
			continue;
		for (int ci = 0; ci < nc; ci++) {
			if (!c[ci].dst || c[ci].w < GAP_MERGE)
				continue;
			for (uint32_t j = r->first[k]; j < r->first[k + 1]; j++) {
				uint32_t i = r->rows[j].i;

				if (key[i] != SR_RING_NO_PREV)
					blk_add(r, col_off(g, &c[ci]) + (key[i] & (g->cap - 1)) * c[ci].w,
						c[ci].w, c[ci].dst + (size_t)i * c[ci].w);
			}
		}
		for (uint32_t q = r->sp_first[k]; q < r->sp_first[k + 1]; q++)
			blk_add(r, r->sp[q].t, r->sp[q].len, r->stage + r->sp[q].stage);
		if (r->tl.n) {
			RQ(blk_get(r, k));
			remote = true;
		}
	}
	err = epoch_end(r, remote);
	if (err)
		return err;
	/* 3. The narrow columns out of the staging buffer. */
	for (uint32_t k = 0; k < R; k++) {
		if (r->dbase[k])
			continue;
		for (uint32_t j = r->first[k]; j < r->first[k + 1]; j++) {
			uint32_t i = r->rows[j].i;

			if (key[i] == SR_RING_NO_PREV)
				continue;
			for (int ci = 0; ci < nc; ci++) {
				size_t x = (size_t)i * NCOL + ci;

				if (c[ci].dst && c[ci].w < GAP_MERGE)
					memcpy(c[ci].dst + (size_t)i * c[ci].w,
					       r->stage + r->sp[r->where[x]].stage + r->delta[x],
					       c[ci].w);
			}
		}
	}
	return 0;
}

/* Read every chosen ring's head and cursor, and for the pending rows of
 * the rings mapped here their slot's seq (and their prev slot's): the
 * loads of a mapped ring directly, one contiguous get per other rank. */
static int read_check(struct sr_mpi_replay *r, bool rows, bool with_prev, bool all)
{
	const uint32_t R = r->mp->info.size;
	bool remote = false;
	int err;

	for (uint32_t k = 0; k < R; k++) {
		const struct ring_geo *g = &r->geo[k];

		if (!r->use[k] && !all)
			continue;
		if (r->dbase[k]) {
			const struct sr__ring_hdr *h = (const void *)r->dbase[k];
			_Atomic uint64_t *seq = (_Atomic uint64_t *)(r->dbase[k] + g->off_seq);

			r->hc[k][0] = atomic_load_explicit(&h->head, memory_order_acquire);
			r->hc[k][1] = atomic_load_explicit(&h->cursor, memory_order_acquire);
			for (uint32_t j = r->first[k]; rows && j < r->first[k + 1]; j++) {
				uint32_t i = r->rows[j].i;

				r->seq2[i] = atomic_load_explicit(&seq[r->s[i] & (g->cap - 1)],
								  memory_order_relaxed);
				if (with_prev && r->prev[i] < r->s[i])
					r->seqp2[i] = atomic_load_explicit(
						&seq[r->prev[i] & (g->cap - 1)], memory_order_relaxed);
			}
			continue;
		}
		r->bytes += g->off_cursor + 8 - g->off_head;
		RQ(MPI_Rget(r->hcb[k], (int)(g->off_cursor + 8 - g->off_head), MPI_BYTE, (int)k,
			    (MPI_Aint)g->off_head, (int)(g->off_cursor + 8 - g->off_head), MPI_BYTE,
			    r->win, &r->rq[r->nrq++]));
		remote = true;
	}
	err = epoch_end(r, remote);
	if (err)
		return err;
	for (uint32_t k = 0; k < R; k++) {
		const struct ring_geo *g = &r->geo[k];

		if ((!r->use[k] && !all) || r->dbase[k])
			continue;
		memcpy(&r->hc[k][0], r->hcb[k], 8);
		memcpy(&r->hc[k][1], r->hcb[k] + (g->off_cursor - g->off_head), 8);
	}
	return 0;
}

/* ---- prioritized sampling: a binary sum-tree over every rank's slots ---- */

static void tree_set(struct sr_mpi_replay *r, uint64_t leaf, double v)
{
	uint64_t i = r->nleaf + leaf;

	if ((r->tree[i] > 0) != (v > 0))
		r->live += v > 0 ? 1 : (uint64_t)-1;
	r->tree[i] = v;
	/* recomputed from the children: no drift from repeated updates */
	for (i >>= 1; i; i >>= 1)
		r->tree[i] = r->tree[2 * i] + r->tree[2 * i + 1];
}

/* The leaf where the prefix sum passes @u (never an empty right subtree). */
static uint64_t tree_find(const struct sr_mpi_replay *r, double u)
{
	uint64_t i = 1;

	while (i < r->nleaf) {
		if (u < r->tree[2 * i] || r->tree[2 * i + 1] <= 0) {
			i = 2 * i;
		} else {
			u -= r->tree[2 * i];
			i = 2 * i + 1;
		}
	}
	return i - r->nleaf;
}

static uint32_t leaf_rank(const struct sr_mpi_replay *r, uint64_t leaf)
{
	uint32_t lo = 0, hi = r->mp->info.size; /* lbase[lo] <= leaf < lbase[hi] */

	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;

		if (r->lbase[mid] <= leaf)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Enter the slots the chosen rings consumed since the last call at the
 * largest priority so far (head and cursor as last read). */
static void tree_sync(struct sr_mpi_replay *r)
{
	const double v = pow(r->max_p, r->alpha);

	for (uint32_t k = 0; k < r->mp->info.size; k++) {
		uint64_t lo, c = r->hc[k][1];

		if (!r->use[k])
			continue;
		ring_window(r, k, &lo);
		for (uint64_t q = r->synced[k] > lo ? r->synced[k] : lo; q < c; q++) {
			uint64_t leaf = r->lbase[k] + (q & (r->geo[k].cap - 1));

			r->lseq[leaf] = q;
			tree_set(r, leaf, v);
		}
		if (c > r->synced[k])
			r->synced[k] = c;
	}
}

int sr_mpi_replay_prioritize(sr_mpi_replay *r, double alpha, double beta, double eps)
{
	const uint32_t R = r ? r->mp->info.size : 0;
	uint64_t total = 0, nleaf = 1;

	if (!r)
		return sr__errorf(-EINVAL, "sr_mpi_replay_prioritize: NULL sampler");
	if (!(alpha >= 0) || !(beta >= 0 && beta <= 1) || !(eps > 0))
		return sr__errorf(-EINVAL, "sr_mpi_replay_prioritize: alpha %g (>= 0), beta %g "
				  "([0, 1]), eps %g (> 0)", alpha, beta, eps);
	if (r->tree)
		return sr__errorf(-EINVAL, "sr_mpi_replay_prioritize: already prioritized");
	for (uint32_t k = 0; k < R; k++)
		total += r->geo[k].cap;
	while (nleaf < total)
		nleaf *= 2;
	r->tree = calloc(2 * nleaf, sizeof(double));
	r->lseq = malloc(nleaf * sizeof(uint64_t));
	r->lbase = malloc((R + 1) * sizeof(uint64_t));
	r->synced = calloc(R, sizeof(uint64_t));
	if (!r->tree || !r->lseq || !r->lbase || !r->synced) {
		free(r->tree);
		free(r->lseq);
		free(r->lbase);
		free(r->synced);
		r->tree = NULL;
		r->lseq = r->lbase = r->synced = NULL;
		return sr__errorf(-ENOMEM, "sr_mpi_replay_prioritize: out of memory for a "
				  "sum-tree of %llu slots", (unsigned long long)total);
	}
	memset(r->lseq, 0xff, nleaf * sizeof(uint64_t));
	r->lbase[0] = 0;
	for (uint32_t k = 0; k < R; k++)
		r->lbase[k + 1] = r->lbase[k] + r->geo[k].cap;
	r->nleaf = nleaf;
	r->live = 0;
	r->alpha = alpha;
	r->beta = beta;
	r->eps = eps;
	r->max_p = 1.0;
	return 0;
}

int sr_mpi_replay_update(sr_mpi_replay *r, const uint32_t *rank, const uint64_t *seq,
			 const float *prio, uint32_t n)
{
	int done = 0;

	if (!r || (n && (!rank || !seq || !prio)))
		return sr__errorf(-EINVAL, "sr_mpi_replay_update: NULL argument");
	if (!r->tree)
		return sr__errorf(-EINVAL, "sr_mpi_replay_update: not a prioritized sampler "
				  "(sr_mpi_replay_prioritize)");
	for (uint32_t j = 0; j < n; j++)
		if (isnan(prio[j]) || rank[j] >= r->mp->info.size)
			return sr__errorf(-EINVAL, "sr_mpi_replay_update: row %u: %s", j,
					  isnan(prio[j]) ? "priority is NaN" : "rank out of range");
	for (uint32_t j = 0; j < n; j++) {
		uint64_t leaf = r->lbase[rank[j]] + (seq[j] & (r->geo[rank[j]].cap - 1));
		double p = fabs((double)prio[j]) + r->eps;

		/* a key whose slot was lapped (or dropped) is ignored */
		if (r->lseq[leaf] != seq[j] || r->tree[r->nleaf + leaf] <= 0)
			continue;
		if (p > r->max_p)
			r->max_p = p;
		tree_set(r, leaf, pow(p, r->alpha));
		done++;
	}
	return done;
}

/* ---- counters and the limiter across ranks ---- */

/* This sampler's last MPI_Rget_accumulate applied at rank 0. */
static int count_done(struct sr_mpi_replay *r)
{
	int err = 0;

	if (r->crq != MPI_REQUEST_NULL)
		err = wait_reqs(r, 1, &r->crq, "sr_mpi_replay counters");
	return err;
}

/* The samples every sampler returned (rank 0's counter), after this
 * sampler's own are applied there. */
static int fetch_samples(struct sr_mpi_replay *r, uint64_t *out)
{
	MPI_Request rq;
	int err = count_done(r), rc;

	if (err)
		return err;
	rc = MPI_Rget_accumulate(NULL, 0, MPI_UINT64_T, &r->fetched, 1, MPI_UINT64_T, 0, 0, 1,
				 MPI_UINT64_T, MPI_NO_OP, r->cwin, &rq);
	if (rc != MPI_SUCCESS)
		return sr__mpi_fail(rc, "sr_mpi_replay counters");
	err = wait_reqs(r, 1, &rq, "sr_mpi_replay counters");
	if (err)
		return err;
	*out = r->fetched;
	return 0;
}

/* Transitions consumed in every rank's ring since the sampler was made
 * (head and cursor of every ring read now). */
static int read_inserts(struct sr_mpi_replay *r, uint64_t *out)
{
	uint64_t sum = 0;
	int err = read_check(r, false, false, true);

	if (err)
		return err;
	for (uint32_t k = 0; k < r->mp->info.size; k++)
		sum += r->hc[k][1] - r->geo[k].cursor0;
	*out = sum;
	return 0;
}

/* Add @n to rank 0's count: an atomic fetch-and-add whose completion
 * means it was applied. With the limiter every rank must see it before
 * this call returns; without, it completes during the next call (or
 * before the next read of the counters). */
static int count_samples(struct sr_mpi_replay *r, uint32_t n)
{
	int err = count_done(r), rc;

	if (err)
		return err;
	r->samples += n;
	r->acc = n;
	rc = MPI_Rget_accumulate(&r->acc, 1, MPI_UINT64_T, &r->acc_old, 1, MPI_UINT64_T, 0, 0, 1,
				 MPI_UINT64_T, MPI_SUM, r->cwin, &r->crq);
	if (rc != MPI_SUCCESS)
		return sr__mpi_fail(rc, "sr_mpi_replay_sample");
	return r->limited ? count_done(r) : 0;
}

int sr_mpi_replay_limit(sr_mpi_replay *r, double samples_per_insert, uint64_t min_size,
			double error_buffer, int32_t timeout_ms)
{
	if (!r)
		return sr__errorf(-EINVAL, "sr_mpi_replay_limit: NULL sampler");
	if (!(samples_per_insert > 0) || !(error_buffer >= 0))
		return sr__errorf(-EINVAL, "sr_mpi_replay_limit: samples_per_insert %g (> 0), "
				  "error_buffer %g (>= 0)", samples_per_insert, error_buffer);
	r->spi = samples_per_insert;
	r->min_size = (double)min_size;
	r->ebuf = error_buffer;
	r->timeout_ms = timeout_ms;
	r->limited = true;
	return 0;
}

int sr_mpi_replay_can_insert(sr_mpi_replay *r, uint64_t n)
{
	uint64_t ins, smp;
	int err;

	if (!r)
		return sr__errorf(-EINVAL, "sr_mpi_replay_can_insert: NULL sampler");
	if (!r->limited)
		return 1;
	err = read_inserts(r, &ins);
	if (!err)
		err = fetch_samples(r, &smp);
	if (err)
		return err;
	return r->spi * (double)(ins + n) - (double)smp <= r->spi * r->min_size + r->ebuf;
}

/* The limiter's word on a sample of @n: wait (polling every 100 us) up to
 * timeout_ms, or -EAGAIN. */
static int admit(struct sr_mpi_replay *r, uint32_t n)
{
	double t0 = MPI_Wtime();
	uint64_t ins = 0, smp = 0;
	int err;

	for (;;) {
		err = read_inserts(r, &ins);
		if (!err)
			err = fetch_samples(r, &smp);
		if (err)
			return err;
		if ((double)ins >= r->min_size &&
		    r->spi * (double)ins - (double)(smp + n) >= r->spi * r->min_size - r->ebuf)
			return 0;
		if (r->timeout_ms >= 0 && (MPI_Wtime() - t0) * 1e3 >= r->timeout_ms)
			return sr__errorf(-EAGAIN, "sr_mpi_replay_sample: the limiter refused %u "
					  "samples: %llu inserts and %llu samples across ranks "
					  "(samples_per_insert %g, min_size %.0f, error_buffer %g)",
					  n, (unsigned long long)ins, (unsigned long long)smp,
					  r->spi, r->min_size, r->ebuf);
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
}

int sr_mpi_replay_counts_get(sr_mpi_replay *r, sr_mpi_replay_counts *out)
{
	uint64_t ins, smp, size = 0;
	int err;

	if (!r || !out)
		return sr__errorf(-EINVAL, "sr_mpi_replay_counts_get: NULL argument");
	err = read_inserts(r, &ins);
	if (!err)
		err = fetch_samples(r, &smp);
	if (err)
		return err;
	if (r->tree)
		size = r->live;
	else
		for (uint32_t k = 0; k < r->mp->info.size; k++)
			size += r->use[k] ? ring_window(r, k, NULL) : 0;
	memset(out, 0, sizeof(*out));
	out->inserts = ins;
	out->samples = r->samples;
	out->samples_all = smp;
	out->size = size;
	out->bytes = r->bytes;
	out->retries = r->retries;
	return 0;
}

/*
 * A sample, in two or three epochs of reads:
 *  1. the rows' columns (obs, action, reward, flags, env, prev) from slots
 *     drawn in [head - capacity + 1, cursor) of each ring, with head and
 *     cursor read in an earlier epoch: a slot below the cursor was
 *     published before that read (the consumer passes only published
 *     slots), and one above head - capacity was not yet claimed for its
 *     next lap, so its bytes are the slot's unless it was claimed since;
 *  2. with prev_obs, the previous slot's obs (published before the slot);
 *  3. every ring's head and cursor again: the copy is kept when
 *     s >= min(head - capacity, cursor), i.e. no producer claimed the
 *     slot's next lap before the copy was complete (R3 of docs/ring.md,
 *     on the copied bytes), else the row is drawn again. A ring mapped
 *     here also has its seq words read again (seq == s + 1), which the
 *     head check already implies for a slot drawn below the cursor; the
 *     rings read through MPI skip that read (a small read costs there).
 * The head and cursor of step 3 serve the next draw (and the next call).
 * A ring mapped here is copied from directly (its epochs end with an
 * acquire fence); another rank's with one MPI_Get per rank and epoch,
 * completed by waiting for those gets (MPI_Rget: with a timeout).
 *
 * The first draw of a call puts the rows in (rank, slot) order: rows are
 * independent uniform draws, so their order carries nothing, and a rank's
 * rows then land next to each other and its reads go in slot order.
 */
int sr_mpi_replay_sample(sr_mpi_replay *r, uint32_t n, const sr_mpi_sample *o)
{
	const uint32_t R = r ? r->mp->info.size : 0;
	uint32_t pending;
	int err;

	if (!r || !o || !o->seq || !o->rank)
		return sr__errorf(-EINVAL, "sr_mpi_replay_sample: NULL argument");
	if (n == 0)
		return 0;
	err = rows_room(r, n);
	if (err)
		return err;
	memset(r->ok, 0, n);
	pending = n;
	if (r->limited) {
		err = admit(r, n); /* reads every ring's head and cursor */
		if (err)
			return err;
		r->have_hc = 1;
	}
	if (!r->have_hc) {
		err = read_check(r, false, false, false);
		if (err)
			return err;
		r->have_hc = 1;
	}
	if (r->tree)
		tree_sync(r);
	for (int round = 0; pending; round++) {
		uint64_t total = 0;
		uint32_t np = 0;

		if (round > 1000)
			return sr__errorf(-EAGAIN, "sr_mpi_replay_sample: no valid slot after 1000 "
					  "draws (the rings are lapped faster than they are read)");
		for (uint32_t k = 0; k < R; k++)
			total += r->use[k] ? ring_window(r, k, NULL) : 0;
		if (total == 0 || (r->tree && !(r->tree[1] > 0))) {
			r->have_hc = 0;
			return sr__errorf(-EAGAIN, "sr_mpi_replay_sample: no ring has a consumed "
					  "slot yet");
		}
		/* Draw each pending row: uniform (a rank weighted by its slots, a
		 * slot), or prioritized (row i from the i-th of n equal slices of
		 * the tree's total; a leaf whose slot left the window is dropped
		 * and the slice drawn again). */
		for (uint32_t i = 0; i < n; i++) {
			uint64_t u, lo;
			uint32_t k = 0;

			if (r->ok[i])
				continue;
			if (r->tree) {
				uint64_t leaf = 0, sq = 0;
				int tries;

				for (tries = 0; tries < 64; tries++) {
					double T = r->tree[1], x;

					if (!(T > 0))
						break;
					x = ((double)i + sr_rng_uniform(&r->rng)) * (T / n);
					leaf = tree_find(r, x < T ? x : T * (1 - 1e-12));
					k = leaf_rank(r, leaf);
					sq = r->lseq[leaf];
					ring_window(r, k, &lo);
					if (r->tree[r->nleaf + leaf] > 0 && sq != UINT64_MAX && sq >= lo &&
					    sq < r->hc[k][1] && r->use[k])
						break;
					tree_set(r, leaf, 0); /* lapped, or a source left out */
					r->retries++;
				}
				if (tries == 64 || !(r->tree[1] > 0))
					return sr__errorf(-EAGAIN, "sr_mpi_replay_sample: no live slot "
							  "with a priority");
				r->rows[np].rk = k;
				r->rows[np].s = sq;
				r->rows[np].p = r->tree[r->nleaf + leaf];
				r->rows[np].i = i;
				np++;
				continue;
			}
			u = sr_rng_next(&r->rng) % total;
			for (;; k++) {
				uint64_t c = r->use[k] ? ring_window(r, k, &lo) : 0;
				if (u < c)
					break;
				u -= c;
			}
			r->rows[np].rk = k;
			r->rows[np].s = lo + u;
			r->rows[np].p = 1;
			r->rows[np].i = i;
			np++;
		}
		qsort(r->rows, np, sizeof(*r->rows), cmp_rowkey);
		memset(r->first, 0, (R + 1) * sizeof(*r->first));
		for (uint32_t j = 0; j < np; j++) {
			if (round == 0)
				r->rows[j].i = j; /* every row pending: take them in order */
			r->rk[r->rows[j].i] = r->rows[j].rk;
			r->s[r->rows[j].i] = r->rows[j].s;
			r->pw[r->rows[j].i] = r->rows[j].p;
			r->first[r->rows[j].rk + 1]++;
		}
		for (uint32_t k = 0; k < R; k++)
			r->first[k + 1] += r->first[k];
		/* 1. The columns: the rings mapped here now, the others through
		 * MPI. */
		for (uint32_t k = 0; k < R; k++) {
			const struct ring_geo *g = &r->geo[k];
			const unsigned char *d = r->dbase[k];

			for (uint32_t j = r->first[k]; d && j < r->first[k + 1]; j++) {
				uint32_t i = r->rows[j].i;
				uint64_t sl = r->s[i] & (g->cap - 1);
#define COL(cond, off, w, dst)                                                              \
	do {                                                                               \
		if (cond)                                                                  \
			sr__racy_copy((dst), d + (off) + sl * (w), (w));                   \
	} while (0)
				COL(o->obs, g->off_obs, 4u * g->obs_dim, o->obs + (size_t)i * g->obs_dim);
				COL(o->action, g->off_action, g->act_size,
				    o->action + (size_t)i * g->act_size);
				COL(o->reward, g->off_reward, 4u, &o->reward[i]);
				COL(o->terminated, g->off_term, 1u, &o->terminated[i]);
				COL(o->truncated, g->off_trunc, 1u, &o->truncated[i]);
				COL(1, g->off_flags, 1u, &r->flg[i]);
				COL(1, g->off_env, 4u, &r->envl[i]);
				COL(1, g->off_prev, 8u, &r->prev[i]);
#undef COL
			}
		}
		{
			const struct ring_geo *gz = r->geo; /* widths: the same on every rank */
			const struct col c[NCOL] = {
				{offsetof(struct ring_geo, off_obs), 4u * gz->obs_dim,
				 (unsigned char *)o->obs},
				{offsetof(struct ring_geo, off_action), gz->act_size, o->action},
				{offsetof(struct ring_geo, off_reward), 4, (unsigned char *)o->reward},
				{offsetof(struct ring_geo, off_term), 1, o->terminated},
				{offsetof(struct ring_geo, off_trunc), 1, o->truncated},
				{offsetof(struct ring_geo, off_flags), 1, r->flg},
				{offsetof(struct ring_geo, off_env), 4, (unsigned char *)r->envl},
				{offsetof(struct ring_geo, off_prev), 8, (unsigned char *)r->prev},
			};

			err = read_cols(r, r->s, c, NCOL);
			if (err)
				return err;
		}
		/* 2. The previous slots' obs. */
		if (o->prev_obs) {
			const struct col c = {offsetof(struct ring_geo, off_obs),
					      4u * r->geo[0].obs_dim, (unsigned char *)o->prev_obs};

			for (uint32_t k = 0; k < R; k++) {
				const struct ring_geo *g = &r->geo[k];
				const unsigned char *d = r->dbase[k];

				for (uint32_t j = r->first[k]; j < r->first[k + 1]; j++) {
					uint32_t i = r->rows[j].i;

					r->pkey[i] = SR_RING_NO_PREV;
					if (r->prev[i] == SR_RING_NO_PREV || r->prev[i] >= r->s[i])
						continue;
					if (!d) {
						r->pkey[i] = r->prev[i]; /* read through MPI */
						continue;
					}
					sr__racy_copy(o->prev_obs + (size_t)i * g->obs_dim,
						      d + g->off_obs +
							      (r->prev[i] & (g->cap - 1)) * 4 *
								      g->obs_dim,
						      4u * g->obs_dim);
				}
			}
			/* the rows of a rank stay in slot order; their prev
			 * slots are nearly so (spans only merge when sorted:
			 * the planner starts a new span otherwise) */
			err = read_cols(r, r->pkey, &c, 1);
			if (err)
				return err;
		}
		/* 3. After the copies: head / cursor (and seq where mapped), R3. */
		err = read_check(r, true, o->prev_obs != NULL, false);
		if (err)
			return err;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t k;
			uint64_t h, c, floor;
			bool good, mapped;

			if (r->ok[i])
				continue;
			k = r->rk[i];
			mapped = r->dbase[k] != NULL;
			h = r->hc[k][0];
			c = r->hc[k][1];
			floor = h > r->geo[k].cap ? h - r->geo[k].cap : 0;
			floor = floor < c ? floor : c;
			good = (!mapped || r->seq2[i] == r->s[i] + 1) && r->s[i] >= floor &&
			       !(r->flg[i] & SR_SLOT_PAD);
			if (!good) {
				r->retries++;
				if (r->tree) { /* lapped or a PAD slot: out of the tree */
					uint64_t leaf = r->lbase[k] + (r->s[i] & (r->geo[k].cap - 1));

					if (r->lseq[leaf] == r->s[i] &&
					    (r->s[i] < floor || (r->flg[i] & SR_SLOT_PAD)))
						tree_set(r, leaf, 0);
				}
				continue;
			}
			if (o->prev_valid)
				o->prev_valid[i] = o->prev_obs && r->prev[i] != SR_RING_NO_PREV &&
						   r->prev[i] < r->s[i] && r->prev[i] >= floor &&
						   (!mapped || r->seqp2[i] == r->prev[i] + 1);
			if (o->env)
				o->env[i] = r->geo[k].first_env + r->envl[i];
			o->rank[i] = k;
			o->seq[i] = r->s[i];
			r->ok[i] = 1;
			pending--;
		}
	}
	/* Importance weights (N P(i))^-beta over the batch's largest: with
	 * P(i) = p_i / total, that is (p_min / p_i)^beta. */
	if (o->weight) {
		double pmin = INFINITY;

		for (uint32_t i = 0; i < n; i++)
			pmin = r->pw[i] < pmin ? r->pw[i] : pmin;
		for (uint32_t i = 0; i < n; i++)
			o->weight[i] = r->tree ? (float)pow(pmin / r->pw[i], r->beta) : 1.0f;
	}
	err = count_samples(r, n);
	return err ? err : (int)n;
}

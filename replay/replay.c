/*
 * Replay samplers: uniform, prioritized (sum-tree), n-step, sequences,
 * samples-per-insert limiter. See include/stepring/replay.h.
 *
 * DESIGN
 * A sampler is process-local state over a ring it only reads: its RNG,
 * the sync frontier (every sequence below `synced` has been looked at),
 * the insert/sample counters and, when prioritized, a sum-tree of
 * p^alpha (double) with one leaf per ring slot plus the sequence each leaf
 * was filled for (leaf_seq). A leaf whose slot has been lapped keeps its
 * old key until sync refills it or a draw finds it stale (seq check) and
 * zeroes it.
 *
 * Reads of the ring follow the seqlock rule of ring_internal.h: begin
 * (acquire load of seq == s + 1), racy copy, end (acquire fence, re-load).
 * A transition is returned only if every slot it touched (its chain along
 * prev links) passes end; otherwise the draw is retried, so no torn or
 * mixed-lap row ever reaches the caller.
 *
 * Only the sampler's own thread writes its state; inserts and samples are
 * atomics so that a producer thread may call sr_replay_can_insert().
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "ring_internal.h"
#include "stepring/env.h"
#include "stepring/replay.h"

#define MAX_NSTEP 1024u

/*
 * The sum-tree is K-ary with K = 8: the children of a node are 8 doubles,
 * one 64-byte line, so a descent or an update touches one line per level
 * and log8(capacity) levels (6 for 65536 slots) instead of log2 (16).
 * Level L holds ceil(capacity / 8^(depth - L)) nodes, padded with zeros to
 * a multiple of 8; node i of level L has children 8i .. 8i + 7 in L + 1.
 */
#define K 8
#define MAX_LEVELS 24

struct sr_replay {
	struct sr_ring *r;
	uint32_t kind;
	uint32_t n_step;
	double gamma;
	double alpha, beta, eps;
	bool limiter;
	double spi, error_buffer;
	uint64_t min_size;
	int32_t timeout_ms;
	sr_rng rng;
	uint64_t synced;
	_Atomic uint64_t inserts; /* written by the sampler's thread only */
	_Atomic uint64_t samples;
	/* prioritized */
	double *tree;       /* all levels of the K-ary sum-tree, each 64-byte aligned */
	double *leaves;     /* the leaf level: one per ring slot (padded to K) */
	uint64_t off[MAX_LEVELS]; /* level L starts at tree + off[L]; 0 is the root */
	uint32_t depth;     /* leaf level index */
	uint64_t *leaf_seq; /* cap (padded to K) */
	uint64_t live;      /* leaves > 0 */
	double max_p;       /* largest raw priority (+eps) seen */
	double max_leaf;    /* max_p^alpha */
	double *gpow;       /* gamma^k, k = 0..n_step */
	uint64_t *chain;    /* scratch: MAX(n_step, k) + 1 sequences */
	uint32_t chain_len;
	/* batch scratch */
	uint32_t scratch_n;
	uint64_t *cand;     /* candidate end sequence per row */
	uint64_t *leaf;     /* prioritized: leaf (slot) per row */
	double *uval;       /* prioritized: draw value per row */
};

void sr_replay_opts_init(sr_replay_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->kind = SR_REPLAY_UNIFORM;
	o->n_step = 1;
	o->gamma = 0.99;
	o->alpha = 0.6;
	o->beta = 0.4;
	o->eps = 1e-6;
	o->samples_per_insert = 1.0;
	o->error_buffer = 1.0;
}

/* Copy one obs row into the caller's batch. */
static inline void copy_obs_row(float *dst, const float *src, size_t bytes)
{
	sr__racy_rows(dst, src, bytes);
}

/* Uniform integer in [0, n). */
static inline uint64_t rand_below(sr_rng *g, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)sr_rng_next(g) * n) >> 64);
}

/* x^y for priorities and weights: float precision is plenty (priorities
 * come in as float, weights go out as float) and powf is several times
 * cheaper than pow; exact shortcuts for the common exponents. */
static inline double fpow(double x, double y)
{
	if (y == 1.0)
		return x;
	if (y == 0.5)
		return sqrt(x);
	if (y == -1.0)
		return 1.0 / x;
	if (y == 0.0)
		return 1.0;
	return (double)powf((float)x, (float)y);
}

static inline double sum8(const double *c)
{
	return ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
}

static inline double tree_total(const sr_replay *s)
{
	return s->tree[s->off[0]];
}

/* Recompute the ancestors of leaf @slot from their children: no drift from
 * repeated add/subtract of deltas. */
static inline void fix_up(sr_replay *s, uint64_t slot)
{
	uint64_t i = slot;

	for (uint32_t L = s->depth; L > 0; L--) {
		i /= K;
		s->tree[s->off[L - 1] + i] = sum8(s->tree + s->off[L] + K * i);
	}
}

static void set_leaf(sr_replay *s, uint64_t slot, double v)
{
	double old = s->leaves[slot];

	s->live += (v > 0) - (old > 0);
	s->leaves[slot] = v;
	fix_up(s, slot);
}

/* Lay out the levels for @cap leaves; returns the number of doubles. */
static uint64_t tree_layout(sr_replay *s, uint64_t cap)
{
	uint64_t size[MAX_LEVELS], n = cap, total = 0;
	uint32_t levels = 0;

	/* Sizes from the leaves up, padded to whole lines of K. */
	for (;;) {
		size[levels++] = (n + K - 1) / K * K;
		if (n == 1)
			break;
		n = (n + K - 1) / K;
	}
	s->depth = levels - 1;
	for (uint32_t L = 0; L < levels; L++) {
		s->off[L] = total;
		total += size[levels - 1 - L];
	}
	return total;
}

int sr_replay_create(sr_ring *ring, const sr_replay_opts *opts, sr_replay **out)
{
	sr_replay_opts d;
	sr_replay *s;
	uint64_t cap;

	if (!ring || !out)
		return sr__errorf(-EINVAL, "replay: ring and out must not be NULL");
	*out = NULL;
	sr_replay_opts_init(&d);
	if (opts) {
		if (opts->flags & ~(uint32_t)(SR_REPLAY_F_SEED | SR_REPLAY_F_NSTEP |
					      SR_REPLAY_F_PRIORITY | SR_REPLAY_F_LIMITER))
			return sr__errorf(-EINVAL, "replay: unknown flags 0x%x", opts->flags);
		d.kind = opts->kind;
		if (opts->flags & SR_REPLAY_F_SEED)
			d.seed = opts->seed;
		if (opts->flags & SR_REPLAY_F_NSTEP) {
			d.n_step = opts->n_step;
			d.gamma = opts->gamma;
		}
		if (opts->flags & SR_REPLAY_F_PRIORITY) {
			d.alpha = opts->alpha;
			d.beta = opts->beta;
			d.eps = opts->eps;
		}
		if (opts->flags & SR_REPLAY_F_LIMITER) {
			d.samples_per_insert = opts->samples_per_insert;
			d.min_size = opts->min_size;
			d.error_buffer = opts->error_buffer;
			d.timeout_ms = opts->timeout_ms;
		}
	}
	if (d.kind != SR_REPLAY_UNIFORM && d.kind != SR_REPLAY_PRIORITIZED)
		return sr__errorf(-EINVAL, "replay: unknown kind %u", d.kind);
	if (d.n_step < 1 || d.n_step > MAX_NSTEP)
		return sr__errorf(-EINVAL, "replay: n_step=%u must be in [1, %u]", d.n_step,
				  MAX_NSTEP);
	if (!(d.gamma >= 0 && d.gamma <= 1))
		return sr__errorf(-EINVAL, "replay: gamma=%g must be in [0, 1]", d.gamma);
	if (!(d.alpha >= 0 && d.alpha <= 16) || !(d.beta >= 0 && d.beta <= 1) || !(d.eps > 0))
		return sr__errorf(-EINVAL,
				  "replay: alpha=%g (>= 0), beta=%g ([0, 1]), eps=%g (> 0)",
				  d.alpha, d.beta, d.eps);
	if ((opts && (opts->flags & SR_REPLAY_F_LIMITER)) &&
	    (!(d.samples_per_insert > 0) || !(d.error_buffer >= 0)))
		return sr__errorf(-EINVAL,
				  "replay: samples_per_insert=%g (> 0), error_buffer=%g (>= 0)",
				  d.samples_per_insert, d.error_buffer);
	s = calloc(1, sizeof(*s));
	if (!s)
		return sr__errorf(-ENOMEM, "replay: out of memory");
	s->r = ring;
	cap = ring->cap;
	s->kind = d.kind;
	s->n_step = d.n_step;
	s->gamma = d.gamma;
	s->alpha = d.alpha;
	s->beta = d.beta;
	s->eps = d.eps;
	s->limiter = opts && (opts->flags & SR_REPLAY_F_LIMITER);
	s->spi = d.samples_per_insert;
	s->min_size = d.min_size;
	s->error_buffer = d.error_buffer;
	s->timeout_ms = d.timeout_ms;
	sr_rng_seed(&s->rng, d.seed, 0);
	s->max_p = 1.0;
	s->max_leaf = 1.0;
	/* Start at the oldest live slot, so an attached sampler sees what is
	 * already in the ring. */
	s->synced = sr__ring_oldest(ring);
	s->gpow = malloc((d.n_step + 1) * sizeof(double));
	s->chain_len = d.n_step + 1;
	s->chain = malloc(s->chain_len * sizeof(uint64_t));
	if (!s->gpow || !s->chain)
		goto err_free;
	s->gpow[0] = 1.0;
	for (uint32_t k = 1; k <= d.n_step; k++)
		s->gpow[k] = s->gpow[k - 1] * d.gamma;
	if (d.kind == SR_REPLAY_PRIORITIZED) {
		uint64_t nd = tree_layout(s, cap);

		s->tree = aligned_alloc(64, nd * sizeof(double));
		s->leaf_seq = calloc(cap + K, sizeof(uint64_t));
		if (!s->tree || !s->leaf_seq)
			goto err_free;
		memset(s->tree, 0, nd * sizeof(double));
		s->leaves = s->tree + s->off[s->depth];
	}
	*out = s;
	return 0;

err_free:
	sr_replay_destroy(s);
	return sr__errorf(-ENOMEM, "replay: out of memory for %llu slots",
			  (unsigned long long)cap);
}

void sr_replay_destroy(sr_replay *s)
{
	if (!s)
		return;
	free(s->tree);
	free(s->leaf_seq);
	free(s->gpow);
	free(s->chain);
	free(s->cand);
	free(s->leaf);
	free(s->uval);
	free(s);
}

int64_t sr_replay_sync(sr_replay *s)
{
	struct sr_ring *r = s->r;
	uint64_t h = sr_ring_head(r), n = 0;

	if (h - s->synced > r->cap)
		s->synced = h - r->cap; /* fell a lap behind: those are gone */
	while (s->synced < h) {
		uint64_t q = s->synced, slot = q & r->mask;
		/* R1: acquire pairs with the producer's publish. */
		uint64_t v = atomic_load_explicit(&r->seq[slot], memory_order_acquire);
		uint64_t prev;
		uint8_t fl;
		bool ok;

		if (v < q + 1)
			break; /* reserved, not yet published: stop at the frontier */
		if (v == q + 1) {
			fl = sr__racy_u8(&r->flags[slot]);
			prev = sr__racy_u64(&r->prev[slot]);
			ok = sr__slot_end(r, q) && !(fl & (SR_SLOT_PAD | SR_SLOT_FIRST)) &&
			     prev != SR_RING_NO_PREV && prev < q;
			if (ok)
				n++;
			if (s->tree) {
				s->leaf_seq[slot] = q;
				set_leaf(s, slot, ok ? s->max_leaf : 0.0);
			}
		}
		/* v > q + 1: already lapped by a producer, skip it. */
		s->synced = q + 1;
	}
	if (n)
		atomic_store_explicit(&s->inserts,
				      atomic_load_explicit(&s->inserts, memory_order_relaxed) + n,
				      memory_order_relaxed);
	return (int64_t)n;
}

/* ---------------------------------------------------------------------------
 * Limiter
 * ------------------------------------------------------------------------- */

static bool may_sample(const sr_replay *s, uint32_t n)
{
	double ins = (double)atomic_load_explicit(&s->inserts, memory_order_relaxed);
	double smp = (double)atomic_load_explicit(&s->samples, memory_order_relaxed);

	if (ins < (double)s->min_size)
		return false;
	return s->spi * ins - smp - n >= s->spi * (double)s->min_size - s->error_buffer;
}

bool sr_replay_can_insert(const sr_replay *s, uint64_t n)
{
	double ins = (double)atomic_load_explicit(&s->inserts, memory_order_relaxed);
	double smp = (double)atomic_load_explicit(&s->samples, memory_order_relaxed);

	if (!s->limiter || ins + (double)n <= (double)s->min_size)
		return true;
	return s->spi * (ins + (double)n) - smp <= s->spi * (double)s->min_size + s->error_buffer;
}

/* Sync, and with a limiter wait until a sample of @n is allowed. */
static int admit(sr_replay *s, uint32_t n)
{
	uint64_t deadline;

	sr_replay_sync(s);
	if (!s->limiter || may_sample(s, n))
		return 0;
	deadline = sr__now_ns() / 1000000u + (uint64_t)(s->timeout_ms > 0 ? s->timeout_ms : 0);
	while (s->timeout_ms != 0) {
		struct timespec ts = {0, 100000}; /* 100 us */

		if (s->timeout_ms > 0 && sr__now_ns() / 1000000u >= deadline)
			break;
		nanosleep(&ts, NULL);
		sr_replay_sync(s);
		if (may_sample(s, n))
			return 0;
	}
	return sr__errorf(-EAGAIN,
			  "replay: samples-per-insert limiter: %llu inserts, %llu samples "
			  "(ratio %g, min_size %llu, error_buffer %g) do not allow %u more",
			  (unsigned long long)atomic_load(&s->inserts),
			  (unsigned long long)atomic_load(&s->samples), s->spi,
			  (unsigned long long)s->min_size, s->error_buffer, n);
}

static void count_samples(sr_replay *s, uint32_t n)
{
	atomic_store_explicit(&s->samples,
			      atomic_load_explicit(&s->samples, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Reading transitions
 * ------------------------------------------------------------------------- */

/* Read slot @q's small fields; false if @q is not published as q. */
struct slot_meta {
	uint64_t prev;
	uint8_t flags, term, trunc;
};

static inline bool read_meta(const struct sr_ring *r, uint64_t q, struct slot_meta *m)
{
	uint64_t i = q & r->mask;

	if (!sr__slot_begin(r, q))
		return false;
	m->prev = sr__racy_u64(&r->prev[i]);
	m->flags = sr__racy_u8(&r->flags[i]);
	m->term = sr__racy_u8(&r->terminated[i]);
	m->trunc = sr__racy_u8(&r->truncated[i]);
	return true;
}

/* Validate every slot of chain[0..m] after the copies (R3): none claimed
 * again by a producer, each still published under its sequence. */
static bool chain_valid(const struct sr_ring *r, const uint64_t *chain, uint32_t m)
{
	uint64_t floor;

	atomic_thread_fence(memory_order_acquire);
	floor = sr__lap_floor(r);
	for (uint32_t j = 0; j <= m; j++)
		if (chain[j] < floor ||
		    atomic_load_explicit(&r->seq[chain[j] & r->mask], memory_order_relaxed) !=
			    chain[j] + 1)
			return false;
	return true;
}

/* Copy the n-step transition ending at @e into row @row of @b. */
static bool read_transition(sr_replay *s, uint64_t e, uint64_t lo, uint32_t row,
			    const sr_replay_batch *b)
{
	const struct sr_ring *r = s->r;
	uint64_t *chain = s->chain, mask = r->mask;
	struct slot_meta me, mp;
	uint32_t m = 0, d = r->obs_dim;
	double ret = 0;

	if (!read_meta(r, e, &me) || (me.flags & (SR_SLOT_PAD | SR_SLOT_FIRST)))
		return false;
	chain[0] = e;
	mp = me;
	while (m < s->n_step) {
		uint64_t p = mp.prev;
		struct slot_meta mq;

		if (p == SR_RING_NO_PREV || p >= chain[m] || p < lo || !read_meta(r, p, &mq))
			break;
		/* An earlier episode's end (or filler) is never a start state.
		 * A FIRST slot always is: with same-step autoreset it carries
		 * the flags of the step that ended the previous episode. */
		if ((mq.flags & SR_SLOT_PAD) ||
		    (!(mq.flags & SR_SLOT_FIRST) && (mq.term || mq.trunc)))
			break;
		chain[++m] = p;
		if (mq.flags & SR_SLOT_FIRST)
			break;
		mp = mq;
	}
	if (m == 0)
		return false;
	/* chain[m] = x_0 (s), chain[m - 1] = x_1 (a), chain[0] = e (s'). */
	for (uint32_t k = 1; k <= m; k++)
		ret += s->gpow[k - 1] * sr__racy_f32(&r->reward[chain[m - k] & mask]);
	if (b->obs)
		copy_obs_row(b->obs + (size_t)row * d, r->obs + (chain[m] & mask) * d,
			     (size_t)d * 4);
	if (b->next_obs)
		copy_obs_row(b->next_obs + (size_t)row * d, r->obs + (e & mask) * d,
			     (size_t)d * 4);
	if (b->action)
		sr__racy_rows((uint8_t *)b->action + (size_t)row * r->act_size,
			      r->action + (chain[m - 1] & mask) * r->act_size, r->act_size);
	if (b->env_id)
		b->env_id[row] = sr__racy_u32(&r->env_id[e & mask]);
	if (!chain_valid(r, chain, m))
		return false;
	if (b->reward)
		b->reward[row] = (float)ret;
	if (b->discount)
		b->discount[row] = (float)s->gpow[m];
	if (b->terminated)
		b->terminated[row] = me.term;
	if (b->truncated)
		b->truncated[row] = me.trunc;
	if (b->seq)
		b->seq[row] = e;
	return true;
}

static uint64_t attempts_for(uint32_t n)
{
	return 64ull * n + 4096;
}

/* Scratch arrays for a batch of @n rows. */
static int ensure_scratch(sr_replay *s, uint32_t n)
{
	if (n <= s->scratch_n)
		return 0;
	free(s->cand);
	free(s->leaf);
	free(s->uval);
	s->cand = malloc(n * sizeof(uint64_t));
	s->leaf = malloc(n * sizeof(uint64_t));
	s->uval = malloc(n * sizeof(double));
	if (!s->cand || !s->leaf || !s->uval) {
		s->scratch_n = 0;
		return sr__errorf(-ENOMEM, "replay: out of memory for a batch of %u", n);
	}
	s->scratch_n = n;
	return 0;
}

/*
 * Software pipeline over a batch: the slots of row j + PF_META are
 * prefetched (seq, prev, flags), then those of row j + PF_ROW through its
 * prev link (obs of both ends, action, reward, ...), then row j is read.
 * Rows are independent, so the cache misses of many rows overlap instead
 * of being paid one after another.
 */
#define PF_META 16
#define PF_ROW 8

static inline void prefetch_meta(const struct sr_ring *r, uint64_t e)
{
	uint64_t i = e & r->mask;

	__builtin_prefetch(&r->seq[i]);
	__builtin_prefetch(&r->prev[i]);
	__builtin_prefetch(&r->flags[i]);
}

/* Large obs rows (images): fetch the whole of both rows of the next
 * transition while this one is copied, so the copy does not wait for the
 * hardware prefetcher to ramp up again on every page of a random row. */
static inline void prefetch_obs_rows(const struct sr_ring *r, uint64_t e)
{
	uint64_t i = e & r->mask, p = sr__racy_u64(&r->prev[i]) & r->mask;
	const char *a = (const char *)(r->obs + i * r->obs_dim);
	const char *b = (const char *)(r->obs + p * r->obs_dim);
	size_t bytes = (size_t)r->obs_dim * 4;

	for (size_t off = 0; off < bytes; off += 64) {
		__builtin_prefetch(a + off);
		__builtin_prefetch(b + off);
	}
}

static inline void prefetch_row(const struct sr_ring *r, uint64_t e)
{
	uint64_t i = e & r->mask, p = sr__racy_u64(&r->prev[i]) & r->mask;

	__builtin_prefetch(&r->seq[p]);
	__builtin_prefetch(&r->flags[p]);
	__builtin_prefetch(&r->terminated[p]);
	__builtin_prefetch(&r->truncated[p]);
	__builtin_prefetch(&r->obs[p * r->obs_dim]);
	__builtin_prefetch(&r->obs[i * r->obs_dim]);
	__builtin_prefetch(&r->action[i * r->act_size]);
	__builtin_prefetch(&r->reward[i]);
	__builtin_prefetch(&r->env_id[i]);
	__builtin_prefetch(&r->terminated[i]);
	__builtin_prefetch(&r->truncated[i]);
}

/* Read rows [0, n) from the candidates in s->cand (UINT64_MAX: none);
 * returns the number of rows that failed, their cand[] set to UINT64_MAX. */
static uint32_t read_candidates(sr_replay *s, uint32_t n, uint64_t lo, const sr_replay_batch *b)
{
	const struct sr_ring *r = s->r;
	uint64_t *cand = s->cand;
	uint32_t failed = 0;

	for (uint32_t j = 0; j < n && j < PF_META; j++)
		prefetch_meta(r, cand[j]);
	for (uint32_t j = 0; j < n && j < PF_ROW; j++)
		prefetch_row(r, cand[j]);
	bool big = r->obs_dim >= 256;

	for (uint32_t j = 0; j < n; j++) {
		if (j + PF_META < n)
			prefetch_meta(r, cand[j + PF_META]);
		if (j + PF_ROW < n)
			prefetch_row(r, cand[j + PF_ROW]);
		if (big && j + 1 < n)
			prefetch_obs_rows(r, cand[j + 1]);
		if (cand[j] == UINT64_MAX || !read_transition(s, cand[j], lo, j, b)) {
			cand[j] = UINT64_MAX;
			failed++;
		}
	}
	return failed;
}

static int sample_uniform(sr_replay *s, uint32_t n, const sr_replay_batch *b)
{
	const struct sr_ring *r = s->r;
	/* Draw over the whole window; unpublished slots fail the check. */
	uint64_t hi = sr_ring_head(r), lo = hi > r->cap ? hi - r->cap : 0;
	uint64_t tries = attempts_for(n);
	uint32_t failed;
	int err;

	if (hi <= lo)
		return sr__errorf(-EAGAIN, "replay: the ring holds no transitions yet");
	err = ensure_scratch(s, n);
	if (err)
		return err;
	for (uint32_t j = 0; j < n; j++)
		s->cand[j] = lo + rand_below(&s->rng, hi - lo);
	failed = read_candidates(s, n, lo, b);
	/* Rows that drew a non-transition (or a slot overwritten meanwhile):
	 * draw again, one by one. Rejection keeps the draw uniform over the
	 * live transitions. */
	for (uint32_t j = 0; failed && j < n; j++) {
		if (s->cand[j] != UINT64_MAX)
			continue;
		for (;;) {
			uint64_t e = lo + rand_below(&s->rng, hi - lo);

			if (read_transition(s, e, lo, j, b))
				break;
			if (--tries == 0)
				return sr__errorf(-EAGAIN,
						  "replay: too few live transitions in [%llu, %llu)",
						  (unsigned long long)lo, (unsigned long long)hi);
		}
		failed--;
	}
	if (b->weight)
		for (uint32_t j = 0; j < n; j++)
			b->weight[j] = 1.0f;
	return (int)n;
}

/* Child (of K at @c) whose slice holds @u; *u becomes the offset in it.
 * Branch-free: the draw is random, so a search loop would mispredict at
 * every level. A zero-sized child is never chosen unless rounding pushes u
 * to the end of the node (callers check the leaf value). */
static inline uint64_t pick_child(const double *c, double *u)
{
	double pre[K];
	uint64_t j = 0;
	double v = *u;

	pre[0] = 0.0;
#pragma GCC unroll 8
	for (int k = 1; k < K; k++)
		pre[k] = pre[k - 1] + c[k - 1];
#pragma GCC unroll 8
	for (int k = 1; k < K; k++)
		j += v >= pre[k];
	*u = v - pre[j];
	return j;
}

/* Leaf index for a value u in [0, total). May land on a zero leaf (or a
 * padding leaf) through rounding: callers check the leaf value. */
static inline uint64_t descend(const sr_replay *s, double u)
{
	uint64_t i = 0;

	for (uint32_t L = 1; L <= s->depth; L++) {
		const double *c = s->tree + s->off[L] + K * i;

		i = K * i + pick_child(c, &u);
	}
	return i;
}

/* Descend for all rows level by level: the loads of one level are
 * independent across rows and overlap. leaf[j] gets the leaf index. */
static void descend_batch(sr_replay *s, uint32_t n)
{
	uint64_t *idx = s->leaf;
	double *u = s->uval;

	for (uint32_t j = 0; j < n; j++)
		idx[j] = 0;
	for (uint32_t L = 1; L <= s->depth; L++) {
		const double *lvl = s->tree + s->off[L];
		const double *next = L < s->depth ? s->tree + s->off[L + 1] : NULL;

		for (uint32_t j = 0; j < n; j++) {
			idx[j] = K * idx[j] + pick_child(lvl + K * idx[j], &u[j]);
			/* The line this row needs at the next level (or its key at
			 * the leaves) arrives while the other rows are walked. */
			if (next)
				__builtin_prefetch(next + K * idx[j]);
			else
				__builtin_prefetch(&s->leaf_seq[idx[j]]);
		}
	}
}

static int sample_prioritized(sr_replay *s, uint32_t n, const sr_replay_batch *b)
{
	const struct sr_ring *r = s->r;
	uint64_t lo = sr__ring_oldest(r), tries = attempts_for(n);
	double wmax = 0, total = tree_total(s);
	int err;

	if (!(total > 0) || s->live == 0)
		return sr__errorf(-EAGAIN, "replay: the ring holds no transitions yet");
	err = ensure_scratch(s, n);
	if (err)
		return err;
	/* Stratified: row j draws from the j-th slice of the total. */
	for (uint32_t j = 0; j < n; j++) {
		double u = ((double)j + sr_rng_uniform(&s->rng)) * (total / n);

		s->uval[j] = u < total ? u : total * (1.0 - 0x1p-52);
	}
	descend_batch(s, n);
	for (uint32_t j = 0; j < n; j++)
		s->cand[j] = s->leaves[s->leaf[j]] > 0 ? s->leaf_seq[s->leaf[j]] : UINT64_MAX;
	if (read_candidates(s, n, lo, b)) {
		for (uint32_t j = 0; j < n; j++) {
			uint64_t leaf;

			if (s->cand[j] != UINT64_MAX)
				continue;
			/* Stale (lapped, or its prev is gone): it never comes
			 * back. Redraw this row in its slice of the new total. */
			for (leaf = s->leaf[j];;) {
				double u;

				if (s->leaves[leaf] > 0)
					set_leaf(s, leaf, 0.0);
				if (--tries == 0)
					return sr__errorf(-EAGAIN, "replay: too few live transitions");
				total = tree_total(s);
				if (!(total > 0) || s->live == 0)
					return sr__errorf(-EAGAIN,
							  "replay: the ring holds no transitions");
				u = ((double)j + sr_rng_uniform(&s->rng)) * (total / n);
				leaf = descend(s, u < total ? u : total * (1.0 - 0x1p-52));
				if (s->leaves[leaf] > 0 &&
				    read_transition(s, s->leaf_seq[leaf], lo, j, b))
					break;
			}
			s->leaf[j] = leaf;
		}
	}
	if (!b->weight)
		return (int)n;
	/* w = (N P(i))^-beta with P(i) = p_i^alpha / total, from the tree as
	 * it is after the batch (stale leaves met while drawing are gone),
	 * divided by the largest weight of the batch. */
	total = tree_total(s);
	for (uint32_t j = 0; j < n; j++) {
		double w = fpow((double)s->live * s->leaves[s->leaf[j]] / total, -s->beta);

		b->weight[j] = (float)w;
		if (w > wmax)
			wmax = w;
	}
	for (uint32_t j = 0; j < n; j++)
		b->weight[j] = (float)(b->weight[j] / wmax);
	return (int)n;
}

int sr_replay_sample(sr_replay *s, uint32_t n, const sr_replay_batch *b)
{
	int err;

	if (!s || !b || n == 0 || n > INT32_MAX)
		return sr__errorf(-EINVAL, "replay sample: need a sampler, a batch and n >= 1");
	err = admit(s, n);
	if (err)
		return err;
	err = s->kind == SR_REPLAY_PRIORITIZED ? sample_prioritized(s, n, b)
					       : sample_uniform(s, n, b);
	if (err > 0)
		count_samples(s, n);
	return err;
}

int sr_replay_update(sr_replay *s, const uint64_t *seq, const float *prio, uint32_t n)
{
	uint64_t cap, *idx;
	uint32_t k = 0;
	int err;

	if (!s || s->kind != SR_REPLAY_PRIORITIZED)
		return sr__errorf(-EINVAL, "replay update: not a prioritized sampler");
	if (n && (!seq || !prio))
		return sr__errorf(-EINVAL, "replay update: seq and prio must not be NULL");
	for (uint32_t j = 0; j < n; j++)
		if (!isfinite(prio[j]))
			return sr__errorf(-EINVAL, "replay update: priority %u is %g", j,
					  (double)prio[j]);
	err = ensure_scratch(s, n);
	if (err)
		return err;
	cap = s->r->cap;
	idx = s->cand;
	/* Leaves first, then their ancestors level by level (all leaves are at
	 * the same depth): a parent is recomputed from its K children after
	 * every touched child below it, and the loads of one level overlap.
	 * Recomputing (not adding deltas) keeps the sums free of drift. */
	for (uint32_t j = 0; j < n; j++) {
		uint64_t slot = seq[j] & (cap - 1);
		double p, v;

		/* Only the transition this leaf was filled for, and only while
		 * it is live (a zeroed leaf stays dead). */
		if (s->leaf_seq[slot] != seq[j] || !(s->leaves[slot] > 0))
			continue;
		p = fabs((double)prio[j]) + s->eps;
		v = fpow(p, s->alpha);
		if (p > s->max_p) {
			s->max_p = p;
			s->max_leaf = v;
		}
		s->leaves[slot] = v; /* > 0: live count unchanged */
		idx[k++] = slot;
	}
	for (uint32_t L = s->depth; L > 0; L--) {
		double *up = s->tree + s->off[L - 1];
		const double *lvl = s->tree + s->off[L];

		for (uint32_t j = 0; j < k; j++) {
			uint64_t i = idx[j] / K;

			up[i] = sum8(lvl + K * i);
			idx[j] = i;
		}
	}
	return (int)k;
}

/* ---------------------------------------------------------------------------
 * Sequences
 * ------------------------------------------------------------------------- */

static bool read_sequence(sr_replay *s, uint64_t e, uint64_t lo, uint32_t k, uint32_t row,
			  const sr_replay_seq_batch *b)
{
	const struct sr_ring *r = s->r;
	uint64_t *chain = s->chain, mask = r->mask;
	uint32_t d = r->obs_dim, as = r->act_size;
	struct slot_meta m, mq;

	if (!read_meta(r, e, &m) || (m.flags & SR_SLOT_PAD))
		return false;
	chain[0] = e;
	for (uint32_t j = 1; j < k; j++) {
		uint64_t p = m.prev;

		/* The sequence stays inside one episode. */
		if ((m.flags & SR_SLOT_FIRST) || p == SR_RING_NO_PREV || p >= chain[j - 1] ||
		    p < lo || !read_meta(r, p, &mq) || (mq.flags & SR_SLOT_PAD) ||
		    (!(mq.flags & SR_SLOT_FIRST) && (mq.term || mq.trunc)))
			return false;
		chain[j] = p;
		m = mq;
	}
	for (uint32_t j = 0; j < k; j++) {
		uint64_t q = chain[k - 1 - j], i = q & mask;
		size_t at = (size_t)row * k + j;

		if (b->obs)
			copy_obs_row(b->obs + at * d, r->obs + i * d, (size_t)d * 4);
		if (b->action)
			sr__racy_rows((uint8_t *)b->action + at * as, r->action + i * as, as);
		if (b->reward)
			b->reward[at] = sr__racy_f32(&r->reward[i]);
		if (b->terminated)
			b->terminated[at] = sr__racy_u8(&r->terminated[i]);
		if (b->truncated)
			b->truncated[at] = sr__racy_u8(&r->truncated[i]);
		if (b->flags)
			b->flags[at] = sr__racy_u8(&r->flags[i]);
		if (b->seq)
			b->seq[at] = q;
	}
	if (b->env_id)
		b->env_id[row] = sr__racy_u32(&r->env_id[e & mask]);
	return chain_valid(r, chain, k - 1);
}

int sr_replay_sample_seq(sr_replay *s, uint32_t n, uint32_t k, const sr_replay_seq_batch *b)
{
	uint64_t lo, hi, tries;
	uint32_t row = 0;
	int err;

	if (!s || !b || n == 0 || n > INT32_MAX || k == 0 || k > s->r->cap)
		return sr__errorf(-EINVAL, "replay sample_seq: n >= 1 and k in [1, capacity]");
	if (k + 1 > s->chain_len) {
		uint64_t *c = realloc(s->chain, (k + 1) * sizeof(uint64_t));

		if (!c)
			return sr__errorf(-ENOMEM, "replay: out of memory");
		s->chain = c;
		s->chain_len = k + 1;
	}
	err = admit(s, n);
	if (err)
		return err;
	hi = sr_ring_head(s->r);
	lo = hi > s->r->cap ? hi - s->r->cap : 0;
	tries = attempts_for(n) * 4;
	if (hi <= lo)
		return sr__errorf(-EAGAIN, "replay: the ring holds no transitions yet");
	while (row < n) {
		uint64_t e = lo + rand_below(&s->rng, hi - lo);

		if (read_sequence(s, e, lo, k, row, b))
			row++;
		else if (--tries == 0)
			return sr__errorf(-EAGAIN, "replay: too few live sequences of length %u",
					  k);
	}
	count_samples(s, n);
	return (int)n;
}

#define INFO_MIN (offsetof(sr_replay_info, samples) + sizeof(uint64_t))

int sr_replay_info_get(const sr_replay *s, sr_replay_info *info)
{
	sr_replay_info o;
	uint32_t size;
	size_t n;

	if (!s || !info || info->size < INFO_MIN)
		return sr__errorf(-EINVAL, "replay info: NULL argument, or info->size not set");
	memset(&o, 0, sizeof(o));
	o.kind = s->kind;
	o.inserts = atomic_load_explicit(&s->inserts, memory_order_relaxed);
	o.samples = atomic_load_explicit(&s->samples, memory_order_relaxed);
	o.live = s->tree ? s->live : 0;
	o.total_priority = s->tree ? tree_total(s) : 0.0;
	/* What both sides know; zeroes beyond (a newer caller's longer struct). */
	size = info->size;
	n = size < sizeof(o) ? size : sizeof(o);
	memcpy(info, &o, n);
	if (size > n)
		memset((char *)info + n, 0, size - n);
	info->size = size;
	return 0;
}

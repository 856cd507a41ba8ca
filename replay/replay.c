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
#include <string.h>
#include <time.h>

#include "ring_internal.h"
#include "stepring/env.h"
#include "stepring/replay.h"

#define MAX_NSTEP 1024u

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
	double *tree;       /* 2 * cap: tree[1] is the root, leaves at [cap, 2 cap) */
	uint64_t *leaf_seq; /* cap */
	uint64_t live;      /* leaves > 0 */
	double max_p;       /* largest raw priority (+eps) seen */
	double max_leaf;    /* max_p^alpha */
	double *gpow;       /* gamma^k, k = 0..n_step */
	uint64_t *chain;    /* scratch: MAX(n_step, k) + 1 sequences */
	uint32_t chain_len;
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

/* Uniform integer in [0, n). */
static inline uint64_t rand_below(sr_rng *g, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)sr_rng_next(g) * n) >> 64);
}

static void set_leaf(sr_replay *s, uint64_t slot, double v)
{
	uint64_t i = s->r->cap + slot;
	double old = s->tree[i];

	s->live += (v > 0) - (old > 0);
	s->tree[i] = v;
	/* Recompute parents from their children: no drift from repeated
	 * add/subtract of deltas. */
	for (i >>= 1; i; i >>= 1)
		s->tree[i] = s->tree[2 * i] + s->tree[2 * i + 1];
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
	s->synced = sr_ring_oldest(ring);
	s->gpow = malloc((d.n_step + 1) * sizeof(double));
	s->chain_len = d.n_step + 1;
	s->chain = malloc(s->chain_len * sizeof(uint64_t));
	if (!s->gpow || !s->chain)
		goto err_free;
	s->gpow[0] = 1.0;
	for (uint32_t k = 1; k <= d.n_step; k++)
		s->gpow[k] = s->gpow[k - 1] * d.gamma;
	if (d.kind == SR_REPLAY_PRIORITIZED) {
		s->tree = calloc(2 * cap, sizeof(double));
		s->leaf_seq = calloc(cap, sizeof(uint64_t));
		if (!s->tree || !s->leaf_seq)
			goto err_free;
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
			sr__racy_copy(&fl, &r->flags[slot], 1);
			sr__racy_copy(&prev, &r->prev[slot], 8);
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

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sync, and with a limiter wait until a sample of @n is allowed. */
static int admit(sr_replay *s, uint32_t n)
{
	uint64_t deadline;

	sr_replay_sync(s);
	if (!s->limiter || may_sample(s, n))
		return 0;
	deadline = now_ms() + (uint64_t)(s->timeout_ms > 0 ? s->timeout_ms : 0);
	while (s->timeout_ms != 0) {
		struct timespec ts = {0, 100000}; /* 100 us */

		if (s->timeout_ms > 0 && now_ms() >= deadline)
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
	sr__racy_copy(&m->prev, &r->prev[i], 8);
	sr__racy_copy(&m->flags, &r->flags[i], 1);
	sr__racy_copy(&m->term, &r->terminated[i], 1);
	sr__racy_copy(&m->trunc, &r->truncated[i], 1);
	return true;
}

/* Validate every slot of chain[0..m] after the copies (R3). */
static bool chain_valid(const struct sr_ring *r, const uint64_t *chain, uint32_t m)
{
	atomic_thread_fence(memory_order_acquire);
	for (uint32_t j = 0; j <= m; j++)
		if (atomic_load_explicit(&r->seq[chain[j] & r->mask], memory_order_relaxed) !=
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
		/* An earlier episode's end (or filler) is never a start state. */
		if ((mq.flags & SR_SLOT_PAD) || mq.term || mq.trunc)
			break;
		chain[++m] = p;
		if (mq.flags & SR_SLOT_FIRST)
			break;
		mp = mq;
	}
	if (m == 0)
		return false;
	/* chain[m] = x_0 (s), chain[m - 1] = x_1 (a), chain[0] = e (s'). */
	for (uint32_t k = 1; k <= m; k++) {
		float rw;

		sr__racy_copy(&rw, &r->reward[chain[m - k] & mask], 4);
		ret += s->gpow[k - 1] * rw;
	}
	if (b->obs)
		sr__racy_copy(b->obs + (size_t)row * d, r->obs + (chain[m] & mask) * d,
			      (size_t)d * 4);
	if (b->next_obs)
		sr__racy_copy(b->next_obs + (size_t)row * d, r->obs + (e & mask) * d,
			      (size_t)d * 4);
	if (b->action)
		sr__racy_copy((uint8_t *)b->action + (size_t)row * r->act_size,
			      r->action + (chain[m - 1] & mask) * r->act_size, r->act_size);
	if (b->env_id)
		sr__racy_copy(b->env_id + row, r->env_id + (e & mask), 4);
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

static int sample_uniform(sr_replay *s, uint32_t n, const sr_replay_batch *b)
{
	const struct sr_ring *r = s->r;
	/* Draw over the whole window; unpublished slots fail the check. */
	uint64_t hi = sr_ring_head(r), lo = hi > r->cap ? hi - r->cap : 0;
	uint64_t tries = attempts_for(n);
	uint32_t row = 0;

	if (hi <= lo)
		return sr__errorf(-EAGAIN, "replay: the ring holds no transitions yet");
	while (row < n) {
		uint64_t e = lo + rand_below(&s->rng, hi - lo);

		if (read_transition(s, e, lo, row, b)) {
			if (b->weight)
				b->weight[row] = 1.0f;
			row++;
		} else if (--tries == 0) {
			return sr__errorf(-EAGAIN,
					  "replay: too few live transitions in [%llu, %llu)",
					  (unsigned long long)lo, (unsigned long long)hi);
		}
	}
	return (int)n;
}

/* Leaf index for a value u in [0, total). */
static inline uint64_t descend(const sr_replay *s, double u)
{
	uint64_t i = 1, cap = s->r->cap;
	const double *t = s->tree;

	while (i < cap) {
		double l = t[2 * i];

		if (u < l) {
			i = 2 * i;
		} else {
			u -= l;
			i = 2 * i + 1;
		}
	}
	return i - cap;
}

static int sample_prioritized(sr_replay *s, uint32_t n, const sr_replay_batch *b)
{
	const struct sr_ring *r = s->r;
	uint64_t lo = sr_ring_oldest(r), tries = attempts_for(n);
	double wmax = 0, total;
	uint32_t row = 0;

	while (row < n) {
		double u;
		uint64_t leaf;

		total = s->tree[1];
		if (!(total > 0) || s->live == 0)
			return sr__errorf(-EAGAIN, "replay: the ring holds no transitions yet");
		/* Stratified: row j draws from the j-th slice of the total. */
		u = ((double)row + sr_rng_uniform(&s->rng)) * (total / n);
		if (u >= total)
			u = total * (1.0 - 0x1p-52);
		leaf = descend(s, u);
		if (s->tree[r->cap + leaf] > 0 &&
		    read_transition(s, s->leaf_seq[leaf], lo, row, b)) {
			/* Keep p^alpha; weights once the batch is drawn. */
			if (b->weight)
				b->weight[row] = (float)s->tree[r->cap + leaf];
			row++;
			continue;
		}
		/* Stale (lapped, or its prev is gone): it never comes back. */
		if (s->tree[r->cap + leaf] > 0)
			set_leaf(s, leaf, 0.0);
		if (--tries == 0)
			return sr__errorf(-EAGAIN, "replay: too few live transitions");
	}
	if (!b->weight)
		return (int)n;
	/* w = (N P(i))^-beta with P(i) = p_i^alpha / total, from the tree as
	 * it is after the batch (stale leaves met while drawing are gone),
	 * divided by the largest weight of the batch. */
	total = s->tree[1];
	for (uint32_t j = 0; j < n; j++) {
		double w = pow((double)s->live * (double)b->weight[j] / total, -s->beta);

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
	uint64_t cap;
	int done = 0;

	if (!s || s->kind != SR_REPLAY_PRIORITIZED)
		return sr__errorf(-EINVAL, "replay update: not a prioritized sampler");
	if (n && (!seq || !prio))
		return sr__errorf(-EINVAL, "replay update: seq and prio must not be NULL");
	for (uint32_t j = 0; j < n; j++)
		if (!isfinite(prio[j]))
			return sr__errorf(-EINVAL, "replay update: priority %u is %g", j,
					  (double)prio[j]);
	cap = s->r->cap;
	for (uint32_t j = 0; j < n; j++) {
		uint64_t slot = seq[j] & (cap - 1);
		double p;

		/* Only the transition this leaf was filled for, and only while
		 * it is live (a zeroed leaf stays dead). */
		if (s->leaf_seq[slot] != seq[j] || !(s->tree[cap + slot] > 0))
			continue;
		p = fabs((double)prio[j]) + s->eps;
		if (p > s->max_p) {
			s->max_p = p;
			s->max_leaf = pow(p, s->alpha);
		}
		set_leaf(s, slot, pow(p, s->alpha));
		done++;
	}
	return done;
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
		    p < lo || !read_meta(r, p, &mq) || (mq.flags & SR_SLOT_PAD) || mq.term ||
		    mq.trunc)
			return false;
		chain[j] = p;
		m = mq;
	}
	for (uint32_t j = 0; j < k; j++) {
		uint64_t q = chain[k - 1 - j], i = q & mask;
		size_t at = (size_t)row * k + j;

		if (b->obs)
			sr__racy_copy(b->obs + at * d, r->obs + i * d, (size_t)d * 4);
		if (b->action)
			sr__racy_copy((uint8_t *)b->action + at * as, r->action + i * as, as);
		if (b->reward)
			sr__racy_copy(b->reward + at, r->reward + i, 4);
		if (b->terminated)
			sr__racy_copy(b->terminated + at, r->terminated + i, 1);
		if (b->truncated)
			sr__racy_copy(b->truncated + at, r->truncated + i, 1);
		if (b->flags)
			sr__racy_copy(b->flags + at, r->flags + i, 1);
		if (b->seq)
			b->seq[at] = q;
	}
	if (b->env_id)
		sr__racy_copy(b->env_id + row, r->env_id + (e & mask), 4);
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

uint64_t sr_replay_inserts(const sr_replay *s)
{
	return atomic_load_explicit(&s->inserts, memory_order_relaxed);
}

uint64_t sr_replay_samples(const sr_replay *s)
{
	return atomic_load_explicit(&s->samples, memory_order_relaxed);
}

uint64_t sr_replay_size(const sr_replay *s)
{
	return s->tree ? s->live : 0;
}

double sr_replay_total_priority(const sr_replay *s)
{
	return s->tree ? s->tree[1] : 0.0;
}

/* Replay samplers: uniform (chi-square), prioritized (frequencies
 * proportional to priorities, weights), n-step returns against a brute-force
 * reference over episodes, sequences, the samples-per-insert limiter, and
 * no torn transition while a producer laps the ring. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/replay.h"

#define OBS 3

/* ---- a simulated set of envs writing episodes into a ring ------------- */

struct ref {
	uint32_t env, idx;     /* idx: position in the env's list of slots */
	uint32_t t;            /* step in episode (0 = reset obs) */
	uint8_t flags, term, trunc;
	float reward;
};

struct sim {
	sr_ring *r;
	uint32_t E;
	uint64_t *last;   /* last seq of each env, NO_PREV when an episode starts next */
	uint32_t *t;
	uint64_t **list;  /* per env: its slots in order */
	uint32_t *nlist;
	struct ref *ref;  /* by seq */
	uint64_t cap_ref;
	sr_rng g;
	bool no_burst; /* one slot per reserve (no SR_RESERVE_CONTIG pads) */
};

static void sim_init(struct sim *s, uint64_t cap, uint32_t E, uint64_t max_seq)
{
	sr_ring_opts o = {.obs_dim = OBS, .act_size = 4, .capacity = cap};

	memset(s, 0, sizeof(*s));
	assert_int_equal(sr_ring_create(&o, &s->r), 0);
	s->E = E;
	s->last = malloc(E * sizeof(uint64_t));
	s->t = calloc(E, sizeof(uint32_t));
	s->list = calloc(E, sizeof(uint64_t *));
	s->nlist = calloc(E, sizeof(uint32_t));
	for (uint32_t e = 0; e < E; e++) {
		s->last[e] = SR_RING_NO_PREV;
		s->list[e] = malloc(max_seq * sizeof(uint64_t));
	}
	s->cap_ref = max_seq;
	s->ref = calloc(max_seq, sizeof(struct ref));
	sr_rng_seed(&s->g, 42, 0);
}

static void sim_free(struct sim *s)
{
	for (uint32_t e = 0; e < s->E; e++)
		free(s->list[e]);
	free(s->list);
	free(s->nlist);
	free(s->last);
	free(s->t);
	free(s->ref);
	sr_ring_destroy(s->r);
}

static float obs_val(uint64_t seq, uint32_t k)
{
	return (float)(seq * 4 + k);
}

/* Write one step of env @env at slot @q. */
static void sim_write(struct sim *s, uint64_t q, uint32_t env)
{
	sr_ring *r = s->r;
	uint64_t i = q & (sr_ring_capacity(r) - 1);
	struct ref *f = &s->ref[q];
	int32_t a = (int32_t)q;

	assert_true(q < s->cap_ref);
	f->env = env;
	f->idx = s->nlist[env];
	s->list[env][s->nlist[env]++] = q;
	if (s->last[env] == SR_RING_NO_PREV) {
		f->flags = SR_SLOT_FIRST;
		f->t = s->t[env] = 0;
		f->reward = 0;
	} else {
		f->t = ++s->t[env];
		f->reward = (float)(sr_rng_uniform(&s->g) * 2 - 0.5);
		f->term = sr_rng_uniform(&s->g) < 0.06;
		f->trunc = !f->term && f->t == 25;
	}
	for (uint32_t k = 0; k < OBS; k++)
		sr_ring_obs_col(r)[i * OBS + k] = obs_val(q, k);
	memcpy(sr_ring_action_col(r) + i * 4, &a, 4);
	sr_ring_reward_col(r)[i] = f->reward;
	sr_ring_terminated_col(r)[i] = f->term;
	sr_ring_truncated_col(r)[i] = f->trunc;
	sr_ring_flags_col(r)[i] = f->flags;
	sr_ring_env_id_col(r)[i] = env;
	sr_ring_prev_col(r)[i] = s->last[env];
	s->last[env] = f->term || f->trunc ? SR_RING_NO_PREV : q;
}

/* Step @steps env-steps (random env order, some contiguous bursts). */
static void sim_run(struct sim *s, uint64_t steps)
{
	uint64_t done = 0, q, first;

	while (done < steps) {
		uint32_t n = !s->no_burst && sr_rng_uniform(&s->g) < 0.1 ? 5 : 1;
		unsigned fl = n > 1 ? SR_RESERVE_CONTIG : 0;
		uint64_t h0 = sr_ring_head(s->r);

		assert_int_equal(sr_ring_reserve(s->r, n, fl, &q), 0);
		/* [h0, q) is lap-end filler from the contiguous reserve. */
		for (uint64_t p = h0; p < q; p++) {
			assert_int_equal(sr_ring_flags_col(s->r)[p & (sr_ring_capacity(s->r) - 1)],
					 SR_SLOT_PAD);
			s->ref[p].flags = SR_SLOT_PAD;
		}
		for (uint32_t j = 0; j < n; j++)
			sim_write(s, q + j, (uint32_t)(sr_rng_next(&s->g) % s->E));
		sr_ring_publish(s->r, q, n);
		sr_ring_consume(s->r, sr_ring_peek(s->r, UINT32_MAX, &first));
		done += n;
	}
}

/* Reference: is @e a live transition, and its n-step window. Computed from
 * the episode lists, not from the ring's prev links. */
static bool ref_window(const struct sim *s, uint64_t e, uint64_t lo, uint32_t nstep,
		       uint64_t *x0, uint32_t *m)
{
	const struct ref *f = &s->ref[e];
	uint32_t t0;

	if (f->flags & (SR_SLOT_FIRST | SR_SLOT_PAD) || e < lo)
		return false;
	t0 = f->t > nstep ? f->t - nstep : 0;
	/* Slots of the episode are consecutive in the env's list. */
	while (t0 < f->t && s->list[f->env][f->idx - (f->t - t0)] < lo)
		t0++;
	if (t0 == f->t)
		return false;
	*x0 = s->list[f->env][f->idx - (f->t - t0)];
	*m = f->t - t0;
	return true;
}

static double ref_return(const struct sim *s, uint64_t e, uint32_t m, double gamma)
{
	const struct ref *f = &s->ref[e];
	double ret = 0, g = 1;

	/* x_k = list[idx - (m - k)], k = 1..m */
	for (uint32_t k = 1; k <= m; k++) {
		ret += g * s->ref[s->list[f->env][f->idx - (m - k)]].reward;
		g *= gamma;
	}
	return ret;
}

/* Check a sampled row against the reference. */
static void check_row(const struct sim *s, uint64_t e, uint64_t lo, uint32_t nstep, double gamma,
		      const float *obs, const float *nobs, int32_t act, float rew, float disc,
		      uint8_t term, uint8_t trunc, uint32_t env)
{
	uint64_t x0;
	uint32_t m;

	assert_true(ref_window(s, e, lo, nstep, &x0, &m));
	for (uint32_t k = 0; k < OBS; k++) {
		assert_true(obs[k] == obs_val(x0, k));
		assert_true(nobs[k] == obs_val(e, k));
	}
	/* a = the action of x_1. */
	assert_int_equal(act, (int32_t)s->list[s->ref[e].env][s->ref[e].idx - (m - 1)]);
	assert_true(fabs(rew - ref_return(s, e, m, gamma)) < 1e-5);
	assert_true(fabs(disc - pow(gamma, m)) < 1e-6);
	assert_int_equal(term, s->ref[e].term);
	assert_int_equal(trunc, s->ref[e].trunc);
	assert_int_equal(env, s->ref[e].env);
}

#define B 256

struct bufs {
	float obs[B * OBS], nobs[B * OBS], rew[B], disc[B], w[B];
	int32_t act[B];
	uint8_t term[B], trunc[B];
	uint32_t env[B];
	uint64_t seq[B];
	sr_replay_batch b;
};

static void bufs_init(struct bufs *u)
{
	u->b = (sr_replay_batch){.obs = u->obs, .next_obs = u->nobs, .action = u->act,
				 .reward = u->rew, .discount = u->disc, .terminated = u->term,
				 .truncated = u->trunc, .env_id = u->env, .seq = u->seq,
				 .weight = u->w};
}

/* ---- tests ------------------------------------------------------------ */

/* The sampler's counters (asserts the call succeeds). */
static sr_replay_info rinfo(const sr_replay *rp)
{
	sr_replay_info i = {.size = sizeof(i)};

	assert_int_equal(sr_replay_info_get(rp, &i), 0);
	return i;
}

/* sr_replay_info's size contract: too short is refused; a shorter (older)
 * struct gets what it knows and nothing beyond is written; a longer (newer)
 * one gets zeroes beyond. */
static void check_info_sizes(const sr_replay *rp)
{
	const size_t min = offsetof(sr_replay_info, live);
	unsigned char buf[sizeof(sr_replay_info) + 16];
	sr_replay_info full = rinfo(rp), *i = (sr_replay_info *)buf;

	memset(buf, 0xa5, sizeof(buf));
	i->size = (uint32_t)min - 1;
	assert_int_equal(sr_replay_info_get(rp, i), -EINVAL);
	assert_int_equal(sr_replay_info_get(NULL, &full), -EINVAL);
	memset(buf, 0xa5, sizeof(buf));
	i->size = (uint32_t)min;
	assert_int_equal(sr_replay_info_get(rp, i), 0);
	assert_int_equal(i->kind, full.kind);
	assert_true(i->inserts == full.inserts && i->samples == full.samples);
	for (size_t k = min; k < sizeof(buf); k++)
		assert_int_equal(buf[k], 0xa5);
	memset(buf, 0xa5, sizeof(buf));
	i->size = (uint32_t)sizeof(buf);
	assert_int_equal(sr_replay_info_get(rp, i), 0);
	assert_int_equal(i->size, sizeof(buf));
	assert_true(i->live == full.live && i->total_priority == full.total_priority);
	for (size_t k = sizeof(sr_replay_info); k < sizeof(buf); k++)
		assert_int_equal(buf[k], 0);
}

static void test_opts(void **st)
{
	struct sim s;
	sr_replay_opts o;
	sr_replay *rp = NULL;
	struct bufs u;

	(void)st;
	sim_init(&s, 64, 2, 10);
	sr_replay_opts_init(&o);
	o.kind = 7;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "kind"));
	sr_replay_opts_init(&o);
	o.flags = SR_REPLAY_F_NSTEP;
	o.n_step = 0;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), -EINVAL);
	o.flags = 1u << 20;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), -EINVAL);
	o.flags = SR_REPLAY_F_PRIORITY;
	o.kind = SR_REPLAY_PRIORITIZED;
	o.eps = 0;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), -EINVAL);
	assert_null(rp);
	assert_int_equal(sr_replay_create(s.r, NULL, &rp), 0);
	bufs_init(&u);
	/* Empty ring: nothing to sample, and update needs prioritized. */
	assert_int_equal(sr_replay_sample(rp, 4, &u.b), -EAGAIN);
	assert_int_equal(sr_replay_sample(rp, 0, &u.b), -EINVAL);
	assert_int_equal(sr_replay_update(rp, u.seq, u.rew, 1), -EINVAL);
	sr_replay_destroy(rp);
	sr_replay_destroy(NULL);
	sim_free(&s);
}

static void test_uniform_chi2(void **st)
{
	const uint64_t cap = 512;
	struct sim s;
	sr_replay_opts o;
	sr_replay *rp;
	struct bufs u;
	uint32_t *cnt = calloc(cap, sizeof(uint32_t));
	uint64_t lo, hi, K = 0, x0, total = 0;
	uint32_t m;
	double chi = 0;

	(void)st;
	sim_init(&s, cap, 7, 4000);
	sim_run(&s, 1900); /* several laps */
	hi = sr_ring_head(s.r);
	lo = hi - cap;
	sr_replay_opts_init(&o);
	o.flags = SR_REPLAY_F_SEED;
	o.seed = 7;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
	bufs_init(&u);
	for (int it = 0; it < 1000; it++) {
		assert_int_equal(sr_replay_sample(rp, B, &u.b), B);
		for (int j = 0; j < B; j++) {
			assert_true(u.seq[j] >= lo && u.seq[j] < hi);
			if (it < 20)
				check_row(&s, u.seq[j], lo, 1, 0.99, u.obs + j * OBS,
					  u.nobs + j * OBS, u.act[j], u.rew[j], u.disc[j],
					  u.term[j], u.trunc[j], u.env[j]);
			assert_true(u.w[j] == 1.0f);
			cnt[u.seq[j] & (cap - 1)]++;
			total++;
		}
	}
	for (uint64_t q = lo; q < hi; q++) {
		bool live = ref_window(&s, q, lo, 1, &x0, &m);
		if (!live) {
			/* Never drawn: FIRST, PAD, or its prev is gone. */
			assert_int_equal(cnt[q & (cap - 1)], 0);
			continue;
		}
		K++;
	}
	assert_true(K > cap / 2);
	for (uint64_t q = lo; q < hi; q++) {
		if (!ref_window(&s, q, lo, 1, &x0, &m))
			continue;
		double ex = (double)total / K, d = cnt[q & (cap - 1)] - ex;
		chi += d * d / ex;
	}
	/* chi2 with K - 1 dof: mean K - 1, sd sqrt(2 (K - 1)). */
	print_message("uniform: K=%llu chi2=%.1f (dof %llu)\n", (unsigned long long)K, chi,
		      (unsigned long long)(K - 1));
	assert_true(chi < (K - 1) + 6 * sqrt(2.0 * (K - 1)));
	assert_true(chi > (K - 1) - 6 * sqrt(2.0 * (K - 1)));
	assert_int_equal(rinfo(rp).samples, total);
	sr_replay_destroy(rp);
	free(cnt);
	sim_free(&s);
}

static void test_nstep(void **st)
{
	const uint64_t cap = 1024;
	struct sim s;
	sr_replay_opts o;
	sr_replay *rp;
	struct bufs u;
	uint64_t lo, hi;
	uint32_t nsteps[] = {1, 3, 5, 40};

	(void)st;
	sim_init(&s, cap, 5, 5000);
	sim_run(&s, 2500);
	hi = sr_ring_head(s.r);
	lo = hi - cap;
	for (unsigned v = 0; v < sizeof(nsteps) / sizeof(nsteps[0]); v++) {
		uint32_t seen_short = 0, seen_full = 0;

		sr_replay_opts_init(&o);
		o.flags = SR_REPLAY_F_NSTEP | SR_REPLAY_F_SEED;
		o.n_step = nsteps[v];
		o.gamma = 0.9;
		o.seed = v;
		o.kind = v & 1 ? SR_REPLAY_PRIORITIZED : SR_REPLAY_UNIFORM;
		assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
		bufs_init(&u);
		for (int it = 0; it < 40; it++) {
			assert_int_equal(sr_replay_sample(rp, B, &u.b), B);
			for (int j = 0; j < B; j++) {
				check_row(&s, u.seq[j], lo, nsteps[v], 0.9, u.obs + j * OBS,
					  u.nobs + j * OBS, u.act[j], u.rew[j], u.disc[j],
					  u.term[j], u.trunc[j], u.env[j]);
				if (fabs(u.disc[j] - pow(0.9, nsteps[v])) < 1e-6)
					seen_full++;
				else
					seen_short++;
			}
		}
		/* Both full windows and windows cut at an episode start. */
		if (nsteps[v] < 25) /* episodes are truncated at 25 steps */
			assert_true(seen_full > 0);
		if (nsteps[v] > 1)
			assert_true(seen_short > 0);
		sr_replay_destroy(rp);
	}
	sim_free(&s);
}

static void test_prioritized(void **st)
{
	const uint64_t cap = 256;
	struct sim s;
	sr_replay_opts o;
	sr_replay *rp;
	struct bufs u;
	uint64_t lo, hi, keys[256], x0, total = 0;
	float pr[256];
	uint32_t nk = 0, m, *cnt = calloc(cap, sizeof(uint32_t));
	double psum = 0, chi = 0;

	(void)st;
	sim_init(&s, cap, 4, 3000);
	sim_run(&s, 700);
	hi = sr_ring_head(s.r);
	lo = hi - cap;
	sr_replay_opts_init(&o);
	o.kind = SR_REPLAY_PRIORITIZED;
	o.flags = SR_REPLAY_F_PRIORITY | SR_REPLAY_F_SEED;
	o.alpha = 1.0;
	o.beta = 0.5;
	o.eps = 1e-12;
	o.seed = 3;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
	/* All live transitions enter at max priority (1). */
	sr_replay_sync(rp);
	for (uint64_t q = lo; q < hi; q++)
		if (ref_window(&s, q, lo, 1, &x0, &m)) {
			keys[nk] = q;
			pr[nk] = (float)(1 + q % 4);
			psum += pr[nk];
			nk++;
		}
	assert_true(nk > 100);
	/* sync counts inserts from the oldest slot; some early ones may have
	 * lost their prev since, so size >= the live count. */
	assert_true(rinfo(rp).live >= nk);
	assert_int_equal(sr_replay_update(rp, keys, pr, nk), (int)nk);
	/* Stale key (a lapped sequence) is ignored. */
	uint64_t stale = lo - 1;
	float one = 5;
	assert_int_equal(sr_replay_update(rp, &stale, &one, 1), 0);
	float nan = NAN;
	assert_int_equal(sr_replay_update(rp, keys, &nan, 1), -EINVAL);
	bufs_init(&u);
	for (int it = 0; it < 1500; it++) {
		double wmax = 0;

		assert_int_equal(sr_replay_sample(rp, B, &u.b), B);
		for (int j = 0; j < B; j++) {
			assert_true(ref_window(&s, u.seq[j], lo, 1, &x0, &m));
			cnt[u.seq[j] & (cap - 1)]++;
			total++;
			if (u.w[j] > wmax)
				wmax = u.w[j];
		}
		assert_true(fabs(wmax - 1.0) < 1e-6);
		/* w_j / w_k = (p_k / p_j)^beta */
		for (int j = 1; j < B; j++) {
			double pj = 1 + u.seq[j] % 4, p0 = 1 + u.seq[0] % 4;
			assert_true(fabs(u.w[j] / u.w[0] - pow(p0 / pj, 0.5)) < 1e-4);
		}
	}
	/* Stale leaves that were drawn got zeroed; the rest follow p. */
	psum = 0;
	for (uint32_t k = 0; k < nk; k++)
		psum += pr[k];
	for (uint32_t k = 0; k < nk; k++) {
		double ex = total * pr[k] / psum, d = cnt[keys[k] & (cap - 1)] - ex;
		chi += d * d / ex;
	}
	print_message("prioritized: K=%u chi2=%.1f\n", nk, chi);
	assert_true(chi < (nk - 1) + 6 * sqrt(2.0 * (nk - 1)));
	assert_true(fabs(rinfo(rp).total_priority - psum) < 1e-6 * psum);
	/* A new transition enters at the max priority (4); its slot's old
	 * transition (keyed or not) leaves the tree. */
	uint64_t q;
	int64_t added = 0;
	while (added == 0) {
		double before = rinfo(rp).total_priority, lost = 0;

		assert_int_equal(sr_ring_reserve(s.r, 1, 0, &q), 0);
		sim_write(&s, q, 0);
		sr_ring_publish(s.r, q, 1);
		sr_ring_consume(s.r, 1);
		for (uint32_t k = 0; k < nk; k++)
			if (keys[k] == q - cap)
				lost = pr[k];
		added = sr_replay_sync(rp);
		double after = rinfo(rp).total_priority;
		assert_true(fabs(after - (before - lost + (added ? 4.0 : 0.0))) < 1e-9);
	}
	assert_int_equal(rinfo(rp).kind, SR_REPLAY_PRIORITIZED);
	check_info_sizes(rp);
	sr_replay_destroy(rp);
	free(cnt);
	sim_free(&s);
}

static void test_sequences(void **st)
{
	const uint64_t cap = 512;
	struct sim s;
	sr_replay *rp;
	uint64_t lo, hi;
	enum { N = 64, K = 6 };
	static float obs[N * K * OBS], rew[N * K];
	static int32_t act[N * K];
	static uint8_t term[N * K], trunc[N * K], fl[N * K];
	static uint32_t env[N];
	static uint64_t seq[N * K];
	sr_replay_seq_batch b = {obs, act, rew, term, trunc, fl, env, seq};

	(void)st;
	sim_init(&s, cap, 3, 3000);
	sim_run(&s, 1500);
	hi = sr_ring_head(s.r);
	lo = hi - cap;
	assert_int_equal(sr_replay_create(s.r, NULL, &rp), 0);
	assert_int_equal(sr_replay_sample_seq(rp, N, 0, &b), -EINVAL);
	for (int it = 0; it < 50; it++) {
		assert_int_equal(sr_replay_sample_seq(rp, N, K, &b), N);
		for (int i = 0; i < N; i++) {
			const struct ref *last = &s.ref[seq[i * K + K - 1]];
			for (int j = 0; j < K; j++) {
				uint64_t q = seq[i * K + j];
				const struct ref *f = &s.ref[q];

				assert_true(q >= lo && q < hi);
				/* K consecutive steps of one env and episode. */
				assert_int_equal(f->env, env[i]);
				assert_int_equal(f->idx, last->idx - (K - 1 - j));
				assert_int_equal(f->t, last->t - (K - 1 - j));
				assert_true(obs[(i * K + j) * OBS + 1] == obs_val(q, 1));
				assert_int_equal(act[i * K + j], (int32_t)q);
				assert_true(rew[i * K + j] == f->reward);
				assert_int_equal(fl[i * K + j], f->flags);
				if (j < K - 1)
					assert_true(!term[i * K + j] && !trunc[i * K + j]);
				if (j > 0)
					assert_false(fl[i * K + j] & SR_SLOT_FIRST);
			}
		}
	}
	sr_replay_destroy(rp);
	sim_free(&s);
}

struct delayed {
	struct sim *s;
	uint64_t steps;
};

static void *late_producer(void *arg)
{
	struct delayed *d = arg;
	struct timespec ts = {0, 30 * 1000000};

	nanosleep(&ts, NULL);
	sim_run(d->s, d->steps);
	return NULL;
}

static void test_limiter(void **st)
{
	struct sim s;
	sr_replay_opts o;
	sr_replay *rp;
	struct bufs u;
	uint64_t ins;

	(void)st;
	sim_init(&s, 1024, 1, 3000);
	s.no_burst = true;
	sr_replay_opts_init(&o);
	o.flags = SR_REPLAY_F_LIMITER;
	o.samples_per_insert = 2;
	o.min_size = 10;
	o.error_buffer = 4;
	o.timeout_ms = 0;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
	bufs_init(&u);
	assert_int_equal(sr_replay_sample(rp, 1, &u.b), -EAGAIN);
	assert_non_null(strstr(sr_last_error(), "limiter"));
	/* Insert until at least min_size transitions are seen. */
	while (rinfo(rp).inserts < 10) {
		sim_run(&s, 1);
		sr_replay_sync(rp);
	}
	ins = rinfo(rp).inserts;
	assert_int_equal(ins, 10);
	/* diff = 2 * 10 - 0 = 20, lower bound 2 * 10 - 4 = 16: 4 samples. */
	assert_true(sr_replay_can_insert(rp, 2));
	assert_false(sr_replay_can_insert(rp, 3)); /* 2 * 13 = 26 > 24 */
	assert_int_equal(sr_replay_sample(rp, 3, &u.b), 3);
	assert_int_equal(sr_replay_sample(rp, 2, &u.b), -EAGAIN);
	assert_int_equal(sr_replay_sample(rp, 1, &u.b), 1);
	assert_int_equal(rinfo(rp).samples, 4);
	assert_true(sr_replay_can_insert(rp, 4)); /* 2 * 14 - 4 = 24 <= 24 */
	assert_false(sr_replay_can_insert(rp, 5));
	sr_replay_destroy(rp);

	/* Blocking: a producer arrives 30 ms later and unblocks the sample. */
	sr_replay_opts_init(&o);
	o.flags = SR_REPLAY_F_LIMITER;
	o.samples_per_insert = 1;
	o.min_size = 20;
	o.error_buffer = 8;
	o.timeout_ms = -1;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
	uint64_t base = rinfo(rp).inserts;
	pthread_t th;
	struct delayed d = {&s, 200};
	/* A fresh sampler counts what is already in the ring as inserts:
	 * ask for more than that. */
	o.min_size = base + 20;
	sr_replay_destroy(rp);
	assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
	assert_int_equal(pthread_create(&th, NULL, late_producer, &d), 0);
	assert_int_equal(sr_replay_sample(rp, 4, &u.b), 4);
	assert_true(rinfo(rp).inserts >= base + 20);
	pthread_join(th, NULL);
	sr_replay_destroy(rp);

	/* Timeout: gives up with -EAGAIN after about timeout_ms. */
	o.timeout_ms = 20;
	o.min_size = 1000000;
	assert_int_equal(sr_replay_create(s.r, &o, &rp), 0);
	assert_int_equal(sr_replay_sample(rp, 1, &u.b), -EAGAIN);
	sr_replay_destroy(rp);
	sim_free(&s);
}

/* ---- no torn rows while a producer laps the ring ---------------------- */

#define TD 16
#define TE 4

struct torn {
	sr_ring *r;
	_Atomic int stop;
	_Atomic uint64_t produced;
};

static void *torn_producer(void *arg)
{
	struct torn *t = arg;
	uint64_t q, first, mask = sr_ring_capacity(t->r) - 1;

	while (!atomic_load(&t->stop)) {
		assert_int_equal(sr_ring_reserve(t->r, 4, 0, &q), 0);
		for (uint64_t s = q; s < q + 4; s++) {
			uint64_t i = s & mask;
			int32_t a = (int32_t)s;

			for (uint32_t k = 0; k < TD; k++)
				sr_ring_obs_col(t->r)[i * TD + k] = (float)(s % 100000) + k * 1e-1f;
			memcpy(sr_ring_action_col(t->r) + i * 4, &a, 4);
			sr_ring_reward_col(t->r)[i] = (float)(s % 100000);
			sr_ring_flags_col(t->r)[i] = s < TE ? SR_SLOT_FIRST : 0;
			sr_ring_terminated_col(t->r)[i] = 0;
			sr_ring_truncated_col(t->r)[i] = 0;
			sr_ring_env_id_col(t->r)[i] = (uint32_t)(s % TE);
			sr_ring_prev_col(t->r)[i] = s < TE ? SR_RING_NO_PREV : s - TE;
		}
		sr_ring_publish(t->r, q, 4);
		sr_ring_consume(t->r, sr_ring_peek(t->r, UINT32_MAX, &first));
		atomic_fetch_add(&t->produced, 4);
	}
	return NULL;
}

static void test_no_torn(void **st)
{
	sr_ring_opts ro = {.obs_dim = TD, .act_size = 4, .capacity = 64};
	struct torn t = {0};
	sr_replay *rp;
	sr_replay_opts o;
	pthread_t th;
	static float obs[B * TD], nobs[B * TD], rew[B];
	static int32_t act[B];
	static uint64_t seq[B];
	static float disc[B];
	sr_replay_batch b = {.obs = obs, .next_obs = nobs, .action = act, .reward = rew,
			     .discount = disc, .seq = seq};
	uint64_t rows = 0, again = 0;
	long long ns;
	struct timespec t0, t1;

	(void)st;
	assert_int_equal(sr_ring_create(&ro, &t.r), 0);
	sr_replay_opts_init(&o);
	o.flags = SR_REPLAY_F_NSTEP;
	o.n_step = 2;
	o.gamma = 0.5;
	assert_int_equal(sr_replay_create(t.r, &o, &rp), 0);
	assert_int_equal(pthread_create(&th, NULL, torn_producer, &t), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = sr_replay_sample(rp, 32, &b);

		if (n == -EAGAIN) {
			again++;
		} else {
			assert_int_equal(n, 32);
			for (int j = 0; j < n; j++) {
				/* Two steps, or one where the window cuts it. */
				bool two = disc[j] == 0.25f;
				uint64_t e = seq[j], x0 = two ? e - 2 * TE : e - TE;

				assert_true(two || disc[j] == 0.5f);
				for (uint32_t k = 0; k < TD; k++) {
					assert_true(nobs[j * TD + k] ==
						    (float)(e % 100000) + k * 1e-1f);
					assert_true(obs[j * TD + k] ==
						    (float)(x0 % 100000) + k * 1e-1f);
				}
				assert_int_equal(act[j], (int32_t)(two ? e - TE : e));
				if (two)
					assert_true(rew[j] ==
						    (float)((double)((e - TE) % 100000) +
							    0.5 * (double)(e % 100000)));
				else
					assert_true(rew[j] == (float)(e % 100000));
			}
			rows += (uint64_t)n;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns = (t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec);
		/* 300 ms of racing, and at least a few samples: a sanitizer
		 * build on a loaded machine can stall both threads for most of
		 * that time (a stall is not what this test is about). */
	} while ((ns < 300000000ll || rows < 32 * 16) && ns < 30000000000ll);
	atomic_store(&t.stop, 1);
	pthread_join(th, NULL);
	print_message("no_torn: %llu rows checked, %llu EAGAIN, %llu produced\n",
		      (unsigned long long)rows, (unsigned long long)again,
		      (unsigned long long)atomic_load(&t.produced));
	assert_true(rows > 0);
	sr_replay_destroy(rp);
	sr_ring_destroy(t.r);
}

/* Same-step autoreset layout (as the pool writes it): the step that ends an
 * episode goes to an extra SR_SLOT_FINAL slot (the real transition), and
 * the reset obs takes the batch slot flagged SR_SLOT_FIRST while keeping
 * that step's terminated flag. The FIRST slot must still start a chain. */
static void test_same_step_layout(void **st)
{
	sr_ring_opts ro = {.obs_dim = 1, .act_size = 4, .capacity = 16};
	sr_ring *r;
	sr_replay *rp;
	sr_replay_opts o;
	uint64_t q;
	/* seq: 0 FIRST(reset), 1 step, 2 FIRST(reset obs, term=1 kept),
	 *      3 FINAL(final obs of ep 1, prev 1, term), 4 step (prev 2). */
	struct {
		uint8_t flags, term;
		uint64_t prev;
		float rew;
	} sl[5] = {{SR_SLOT_FIRST, 0, SR_RING_NO_PREV, 0},
		   {0, 0, 0, 1},
		   {SR_SLOT_FIRST, 1, SR_RING_NO_PREV, 2},
		   {SR_SLOT_FINAL, 1, 1, 2},
		   {0, 0, 2, 4}};
	float obs[64], nobs[64], rew[64], disc[64];
	uint8_t term[64];
	uint64_t seq[64];
	sr_replay_batch b = {.obs = obs, .next_obs = nobs, .reward = rew, .discount = disc,
			     .terminated = term, .seq = seq};
	int seen[5] = {0};

	(void)st;
	assert_int_equal(sr_ring_create(&ro, &r), 0);
	assert_int_equal(sr_ring_reserve(r, 5, 0, &q), 0);
	for (int i = 0; i < 5; i++) {
		sr_ring_obs_col(r)[i] = (float)(10 + i);
		sr_ring_flags_col(r)[i] = sl[i].flags;
		sr_ring_terminated_col(r)[i] = sl[i].term;
		sr_ring_truncated_col(r)[i] = 0;
		sr_ring_prev_col(r)[i] = sl[i].prev;
		sr_ring_reward_col(r)[i] = sl[i].rew;
		sr_ring_env_id_col(r)[i] = 0;
	}
	sr_ring_publish(r, q, 5);
	sr_replay_opts_init(&o);
	o.flags = SR_REPLAY_F_NSTEP;
	o.n_step = 3;
	o.gamma = 0.5;
	assert_int_equal(sr_replay_create(r, &o, &rp), 0);
	assert_int_equal(sr_replay_sync(rp), 3); /* slots 1, 3, 4 */
	assert_int_equal(sr_replay_sample(rp, 64, &b), 64);
	for (int j = 0; j < 64; j++) {
		seen[seq[j]]++;
		switch (seq[j]) {
		case 1: /* reset obs 10 -> 11 */
			assert_true(obs[j] == 10 && nobs[j] == 11 && rew[j] == 1 && disc[j] == 0.5f);
			break;
		case 3: /* 10 -> 11 -> final 13, cut at the episode start */
			assert_true(obs[j] == 10 && nobs[j] == 13 && term[j] == 1);
			assert_true(rew[j] == 1 + 0.5f * 2 && disc[j] == 0.25f);
			break;
		case 4: /* the new episode starts at FIRST slot 2 despite its term flag */
			assert_true(obs[j] == 12 && nobs[j] == 14 && rew[j] == 4 && term[j] == 0);
			break;
		default:
			fail();
		}
	}
	assert_true(seen[1] && seen[3] && seen[4]);
	/* Sequences of 2 inside the new episode: (2, 4). */
	static float sobs[8];
	static uint64_t sseq[8];
	sr_replay_seq_batch sb = {.obs = sobs, .seq = sseq};
	for (int it = 0; it < 20; it++) {
		assert_int_equal(sr_replay_sample_seq(rp, 4, 2, &sb), 4);
		for (int i = 0; i < 4; i++)
			assert_true((sseq[2 * i] == 0 && sseq[2 * i + 1] == 1) ||
				    (sseq[2 * i] == 1 && sseq[2 * i + 1] == 3) ||
				    (sseq[2 * i] == 2 && sseq[2 * i + 1] == 4));
	}
	sr_replay_destroy(rp);
	sr_ring_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opts),        cmocka_unit_test(test_uniform_chi2),
		cmocka_unit_test(test_nstep),       cmocka_unit_test(test_prioritized),
		cmocka_unit_test(test_sequences),   cmocka_unit_test(test_limiter),
		cmocka_unit_test(test_no_torn),     cmocka_unit_test(test_same_step_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

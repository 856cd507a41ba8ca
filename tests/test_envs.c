/*
 * Built-in envs against Gymnasium's reference trajectories (tests/refdata),
 * reset distributions, seeding, lookup and spec validation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/config.h"
#include "refcsv.h"
#include "envs.h"
#include "np_random.h"
#include "helpers.h"

/* Cache-line aligned memory (C11 aligned_alloc wants a multiple of 64). */
static void *alloc64(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) / 64 * 64);

	assert_non_null(p);
	return p;
}

struct ref_env {
	const char *id;
	const char *csv;
};

static const struct ref_env ref_envs[] = {
	{"CartPole-v1", SR_REFDATA_DIR "/CartPole-v1.csv"},
	{"Pendulum-v1", SR_REFDATA_DIR "/Pendulum-v1.csv"},
	{"MountainCar-v0", SR_REFDATA_DIR "/MountainCar-v0.csv"},
	{"MountainCarContinuous-v0", SR_REFDATA_DIR "/MountainCarContinuous-v0.csv"},
	{"Acrobot-v1", SR_REFDATA_DIR "/Acrobot-v1.csv"},
};
#define N_REF (sizeof(ref_envs) / sizeof(ref_envs[0]))

static void load(const struct ref_env *e, sr_env_spec *spec, struct refcsv *csv)
{
	int err = sr_env_find(e->id, spec);

	if (err)
		fail_msg("sr_env_find(%s): %s", e->id, sr_last_error());
	err = refcsv_load(e->csv, spec, csv);
	if (err)
		fail_msg("load %s: %s", e->csv, refcsv_error());
	assert_true(csv->rows > 100);
}

static void report(const char *what, const char *id, const struct refcheck *r)
{
	print_message("%-26s %-8s rows=%zu max_obs_err=%.3g max_rew_err=%.3g flags=%zu "
		      "state_err=%.3g first_bad=%zd\n",
		      id, what, r->rows, r->max_obs_err, r->max_rew_err, r->flag_mismatches,
		      r->max_state_err, r->first_bad_row == SIZE_MAX ? -1 : (ssize_t)r->first_bad_row);
}

/* Reset rows: obs computed from the t = 0 state equals the reference. */
static void test_reset_rows(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct refcsv csv;
		void *s;
		float obs[16];
		size_t n = 0;

		load(&ref_envs[i], &spec, &csv);
		s = alloc64(spec.state_size);
		spec.seed(&spec, s, 1, 1, 0);
		for (size_t r = 0; r < csv.rows; r++) {
			if (csv.t[r] != 0)
				continue;
			spec.set_phys(&spec, s, &csv.phys[r * csv.n_phys]);
			spec.observe(&spec, s, obs);
			for (uint32_t k = 0; k < spec.obs_dim; k++)
				assert_true(fabs(obs[k] - csv.obs[r * csv.obs_dim + k]) <= 1e-5);
			n++;
		}
		assert_int_equal(n, 20);
		free(s);
		refcsv_free(&csv);
	}
}

/* Every step row from its own state: obs, reward, flags, and the new state
 * against the next row's state (the README's 1e-12). */
static void test_one_step(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct refcsv csv;
		struct refcheck r;

		load(&ref_envs[i], &spec, &csv);
		assert_int_equal(refcsv_check(&spec, &csv, REFCHECK_ONESTEP, &r), 0);
		report("one-step", spec.id, &r);
		assert_true(refcheck_ok(&r));
		assert_true(r.max_state_err <= 1e-12);
		refcsv_free(&csv);
	}
}

/* Every episode replayed from its t = 0 state with the recorded actions. */
static void test_rollout(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct refcsv csv;
		struct refcheck r;

		load(&ref_envs[i], &spec, &csv);
		assert_int_equal(refcsv_check(&spec, &csv, REFCHECK_ROLLOUT, &r), 0);
		report("rollout", spec.id, &r);
		assert_true(refcheck_ok(&r));
		refcsv_free(&csv);
	}
}

/* The comparison can fail: change one action of each file and the replay
 * must notice (a wrong obs, reward or flag at that row). */
static void test_perturbed_action_detected(void **st)
{
	for (size_t i = 0; i < N_REF; i++) {
		sr_env_spec spec;
		struct refcsv csv;
		struct refcheck r;
		size_t row = 0;

		load(&ref_envs[i], &spec, &csv);
		for (size_t k = csv.rows / 2; k < csv.rows; k++)
			if (csv.t[k] >= 1) {
				row = k;
				break;
			}
		assert_true(row > 0);
		if (csv.discrete)
			csv.act_i[row] = (csv.act_i[row] + 1) % (int32_t)spec.act_n;
		else
			csv.act_f[row] = csv.act_f[row] > 0 ? -0.75f : 0.75f;
		assert_int_equal(refcsv_check(&spec, &csv, REFCHECK_ONESTEP, &r), 0);
		assert_false(refcheck_ok(&r));
		assert_int_equal(r.first_bad_row, row);
		refcsv_free(&csv);
	}
}


/* ---- reset distributions ------------------------------------------------ */

struct reset_dist {
	const char *id;
	double lo[4], hi[4]; /* lo == hi: a constant */
	bool f32;            /* values are float32 (Acrobot) */
};

static const struct reset_dist dists[] = {
	{"CartPole-v1", {-0.05, -0.05, -0.05, -0.05}, {0.05, 0.05, 0.05, 0.05}, false},
	{"Pendulum-v1", {-M_PI, -1.0}, {M_PI, 1.0}, false},
	{"MountainCar-v0", {-0.6, 0.0}, {-0.4, 0.0}, false},
	{"MountainCarContinuous-v0", {-0.6, 0.0}, {-0.4, 0.0}, false},
	{"Acrobot-v1", {-0.1, -0.1, -0.1, -0.1}, {0.1, 0.1, 0.1, 0.1}, true},
};

/* Gymnasium draws each component uniformly in (lo, hi): check the bounds,
 * the mean and the variance over many seeds, that components are not
 * correlated, and that the obs lies in the observation space. */
static void test_reset_distribution(void **st)
{
	enum { N = 20000 };

	for (size_t e = 0; e < sizeof(dists) / sizeof(dists[0]); e++) {
		const struct reset_dist *d = &dists[e];
		sr_env_spec spec;
		double sum[4] = {0}, sq[4] = {0}, cross = 0, phys[4];
		float *obs;
		char *s;

		assert_int_equal(sr_env_find(d->id, &spec), 0);
		s = alloc64((size_t)N * spec.state_size);
		obs = malloc(sizeof(float) * N * spec.obs_dim);
		spec.seed(&spec, s, N, 12345, 0);
		spec.reset(&spec, s, N, obs);
		for (size_t i = 0; i < N; i++) {
			spec.get_phys(&spec, s + i * spec.state_size, phys);
			for (uint32_t k = 0; k < spec.n_phys; k++) {
				if (d->lo[k] == d->hi[k]) {
					assert_true(phys[k] == d->lo[k]);
				} else {
					assert_true(phys[k] >= d->lo[k] && phys[k] < d->hi[k]);
				}
				if (d->f32)
					assert_true(phys[k] == (double)(float)phys[k]);
				sum[k] += phys[k];
				sq[k] += phys[k] * phys[k];
			}
			cross += phys[0] * phys[spec.n_phys - 1];
			for (uint32_t k = 0; k < spec.obs_dim; k++) {
				float o = obs[i * spec.obs_dim + k];
				assert_true(o >= spec.obs_low[k] && o <= spec.obs_high[k]);
			}
		}
		for (uint32_t k = 0; k < spec.n_phys; k++) {
			double w = d->hi[k] - d->lo[k], c = (d->hi[k] + d->lo[k]) / 2;
			double mean = sum[k] / N, var = sq[k] / N - mean * mean;

			if (w == 0)
				continue;
			/* sd of the mean is w / sqrt(12 N) ~ 0.002 w: allow 5 sd. */
			assert_true(fabs(mean - c) < 0.011 * w);
			assert_true(fabs(var / (w * w / 12) - 1) < 0.05);
		}
		if (d->lo[spec.n_phys - 1] != d->hi[spec.n_phys - 1]) {
			double m0 = sum[0] / N, m1 = sum[spec.n_phys - 1] / N;
			double cov = cross / N - m0 * m1;
			double sd0 = sqrt(sq[0] / N - m0 * m0);
			double sd1 = sqrt(sq[spec.n_phys - 1] / N - m1 * m1);
			assert_true(fabs(cov / (sd0 * sd1)) < 0.05);
		}
		free(s);
		free(obs);
	}
}

/* ---- seeding ------------------------------------------------------------ */

static void run_steps(const sr_env_spec *spec, char *s, size_t n, int steps, float *obs,
		      double *rew, uint8_t *term, uint64_t act_seed)
{
	size_t asz = sr_env_action_size(spec);
	char *act = malloc(asz * n);
	sr_rng r;

	sr_rng_seed(&r, act_seed, 0);
	for (int t = 0; t < steps; t++) {
		for (size_t i = 0; i < n; i++) {
			if (spec->act_kind == SR_SPACE_DISCRETE) {
				int32_t a = (int32_t)(sr_rng_next(&r) % spec->act_n);
				memcpy(act + i * asz, &a, 4);
			} else {
				float a = (float)sr_rng_range(&r, -1.5, 1.5);
				memcpy(act + i * asz, &a, 4);
			}
		}
		spec->step(spec, s, n, act, obs + (size_t)t * n * spec->obs_dim, rew + t * n,
			   term + t * n);
		/* Reset terminated instances one by one, as the runtime does. */
		for (size_t i = 0; i < n; i++)
			if (term[t * n + i]) {
				float tmp[64];
				spec->reset(spec, s + i * spec->state_size, 1, tmp);
			}
	}
	free(act);
}

/* (seed, index) alone decides an instance's trajectory: seeding a batch or
 * each instance alone gives the same bytes; other indices or seeds differ. */
static void test_seeding(void **st)
{
	enum { N = 8, T = 60 };

	for (size_t e = 0; e < sr_env_count(); e++) {
		sr_env_spec spec = *sr_env_at(e);
		/* Opaque states (Box2D) are not byte-copyable: test_box2d. */
		if (sr_env_is_opaque(&spec))
			continue;
		size_t od = spec.obs_dim, ss = spec.state_size;
		char *a = alloc64(N * ss), *b = alloc64(N * ss);
		char *c = alloc64(N * ss);
		float *oa = malloc(sizeof(float) * (T + 1) * N * od);
		float *ob = malloc(sizeof(float) * (T + 1) * N * od);
		float *oc = malloc(sizeof(float) * (T + 1) * N * od);
		double ra[T * N], rb[T * N];
		uint8_t ta[T * N], tb[T * N];

		spec.seed(&spec, a, N, 99, 1000);
		spec.reset(&spec, a, N, oa);
		for (size_t i = 0; i < N; i++) { /* alone, in reverse order */
			size_t j = N - 1 - i;
			spec.seed(&spec, b + j * ss, 1, 99, 1000 + j);
			spec.reset(&spec, b + j * ss, 1, ob + j * od);
		}
		assert_memory_equal(a, b, N * ss);
		assert_memory_equal(oa, ob, sizeof(float) * N * od);
		/* Neighbouring instances start differently. */
		assert_memory_not_equal(oa, oa + od, sizeof(float) * od);
		/* Another seed gives other starts for the same index. */
		spec.seed(&spec, c, N, 100, 1000);
		spec.reset(&spec, c, N, oc);
		assert_memory_not_equal(oa, oc, sizeof(float) * N * od);

		/* Same actions: identical trajectories, including autoresets. */
		run_steps(&spec, a, N, T, oa + N * od, ra, ta, 5);
		run_steps(&spec, b, N, T, ob + N * od, rb, tb, 5);
		assert_memory_equal(oa, ob, sizeof(float) * (T + 1) * N * od);
		assert_memory_equal(ra, rb, sizeof(ra));
		assert_memory_equal(ta, tb, sizeof(ta));
		assert_memory_equal(a, b, N * ss);
		/* Other actions: another trajectory (the test can fail). */
		run_steps(&spec, b, N, 5, ob, rb, tb, 6);
		run_steps(&spec, a, N, 5, oa, ra, ta, 7);
		assert_memory_not_equal(oa, ob, sizeof(float) * 5 * N * od);

		/* The state is plain data: a byte copy resumes bit-exactly. */
		memcpy(c, a, N * ss);
		run_steps(&spec, a, N, 20, oa, ra, ta, 8);
		run_steps(&spec, c, N, 20, oc, rb, tb, 8);
		assert_memory_equal(oa, oc, sizeof(float) * 20 * N * od);
		assert_memory_equal(ra, rb, sizeof(double) * 20 * N);

		free(a);
		free(b);
		free(c);
		free(oa);
		free(ob);
		free(oc);
	}
}

/* ---- lookup and validation ---------------------------------------------- */

static void test_find(void **st)
{
	static const char *const ids[] = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0",
					  "MountainCarContinuous-v0", "Acrobot-v1", "Spin-v0"};
	static const char *const names[] = {"cartpole", "pendulum", "mountaincar",
					    "mountaincar_continuous", "acrobot", "spin"};
	sr_env_spec a, b;

	/* 6 plain-data envs, the 3 Box2D ones when built with Box2D, the 22
	 * MuJoCo ones when built with MuJoCo. */
	size_t n_all = 6 + 3 * (size_t)SR_CONFIG_WITH_BOX2D + 22 * (size_t)SR_CONFIG_WITH_MUJOCO;
	assert_int_equal(sr_env_count(), n_all);
	assert_null(sr_env_at(n_all));
	for (size_t i = 0; i < n_all; i++)
		assert_int_equal(sr_env_validate(sr_env_at(i)), 0);
	for (size_t i = 0; i < 6; i++) {
		assert_int_equal(sr_env_find(ids[i], &a), 0);
		assert_int_equal(sr_env_find(names[i], &b), 0);
		assert_memory_equal(&a, &b, sizeof(a));
		assert_string_equal(a.id, ids[i]);
		assert_string_equal(a.name, names[i]);
	}
	assert_int_equal(sr_env_find("CartPole-v0", &a), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "unknown env 'CartPole-v0'"));
	for (size_t i = 0; i < 6; i++) {
		assert_non_null(strstr(sr_last_error(), ids[i]));
		assert_non_null(strstr(sr_last_error(), names[i]));
	}
	assert_int_equal(sr_env_find("", &a), -ENOENT);
	assert_int_equal(sr_env_find("cart", &a), -ENOENT);
	assert_int_equal(sr_env_find(NULL, &a), -EINVAL);
	/* Parameters: the classic-control envs take rng= alone (test_env_rng). */
	assert_int_equal(sr_env_find("cartpole:x=1", &a), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "it takes rng=stepring|numpy"));
}

static void test_spin_params(void **st)
{
	sr_env_spec s;

	assert_int_equal(sr_env_find("spin", &s), 0);
	assert_int_equal(s.obs_dim, 16);
	assert_int_equal(s.max_episode_steps, 0);
	assert_int_equal(s.act_n, 2);
	assert_int_equal(sr_env_find("spin:cost_us=50,obs_dim=64,ep_len=7", &s), 0);
	assert_int_equal(s.obs_dim, 64);
	assert_int_equal(s.obs_shape[0], 64);
	assert_int_equal(s.params[0], 50);
	assert_int_equal(s.params[2], 7);
	assert_int_equal(sr_env_validate(&s), 0);
	assert_int_equal(sr_env_find("spin:cost_ns=250,cost_us=1", &s), 0);
	assert_int_equal(s.params[0], 1);
	assert_int_equal(s.params[4], 250);
	assert_int_equal(sr_env_find("spin:cost_ns=10000000001", &s), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "cost_ns"));
	assert_int_equal(sr_env_find("Spin-v0:act_n=5", &s), 0);
	assert_int_equal(s.act_n, 5);
	assert_int_equal(sr_env_find("spin:obs_dim=0", &s), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "obs_dim"));
	assert_int_equal(sr_env_find("spin:cost_us=-1", &s), -EINVAL);
	assert_int_equal(sr_env_find("spin:cost_us=1x", &s), -EINVAL);
	assert_int_equal(sr_env_find("spin:cost_us=", &s), -EINVAL);
	assert_int_equal(sr_env_find("spin:speed=3", &s), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "unknown parameter 'speed'"));
	assert_int_equal(sr_env_find("spin:cost_us", &s), -EINVAL);
}

/* Seed and reset @n instances of @s in @st, then time one step of them
 * (ns, monotonic clock). */
static uint64_t seeded_step_ns(const sr_env_spec *s, void *st, size_t n, const int32_t *act,
			       float *obs, double *rew, uint8_t *term)
{
	struct timespec x, y;

	s->seed(s, st, n, 3, 0);
	s->reset(s, st, n, obs);
	clock_gettime(CLOCK_MONOTONIC, &x);
	s->step(s, st, n, act, obs, rew, term);
	clock_gettime(CLOCK_MONOTONIC, &y);
	return (uint64_t)(y.tv_sec - x.tv_sec) * 1000000000ull + (uint64_t)y.tv_nsec -
	       (uint64_t)x.tv_nsec;
}

/* spin: terminated exactly every ep_len steps, and trajectories do not
 * depend on the cost (the calibration never reaches the obs). */
static void test_spin_behaviour(void **st)
{
	enum { N = 4, T = 25 };
	sr_env_spec s0, s1;
	char a[N * 64] __attribute__((aligned(64))), b[N * 64] __attribute__((aligned(64)));
	float oa[N * 8], ob[N * 8];
	double ra[N], rb[N];
	uint8_t ta[N], tb[N];
	int32_t act[N] = {0, 1, 1, 0};
	uint64_t t0;

	assert_int_equal(sr_env_find("spin:obs_dim=8,ep_len=10", &s0), 0);
	assert_int_equal(sr_env_find("spin:obs_dim=8,ep_len=10,cost_us=20", &s1), 0);
	assert_true(s0.state_size * N <= sizeof(a));
	s0.seed(&s0, a, N, 3, 0);
	s1.seed(&s1, b, N, 3, 0);
	s0.reset(&s0, a, N, oa);
	s1.reset(&s1, b, N, ob);
	assert_memory_equal(oa, ob, sizeof(oa));
	for (int t = 1; t <= T; t++) {
		s0.step(&s0, a, N, act, oa, ra, ta);
		s1.step(&s1, b, N, act, ob, rb, tb);
		assert_memory_equal(oa, ob, sizeof(oa));
		assert_memory_equal(ra, rb, sizeof(ra));
		for (int i = 0; i < N; i++) {
			assert_int_equal(ta[i], t % 10 == 0);
			assert_int_equal(tb[i], t % 10 == 0);
			assert_true(oa[i * 8] >= -1 && oa[i * 8] < 1);
		}
		if (t % 10 == 0) {
			s0.reset(&s0, a, N, oa);
			s1.reset(&s1, b, N, ob);
		}
	}
	/* The cost is real: 4 steps of 2000 us take at least ~half of 8 ms
	 * (more when the machine is busy, never much less). */
	assert_true(sr__spin_iters_per_us() > 0);
	assert_int_equal(sr_env_find("spin:cost_us=2000,obs_dim=8", &s1), 0);
	t0 = seeded_step_ns(&s1, b, N, act, ob, rb, tb);
	print_message("spin: %.0f iterations/us; 4 x 2000 us took %.2f ms\n",
		      sr__spin_iters_per_us(), t0 / 1e6);
	assert_true(t0 >= 4000000);
	/* cost_ns adds to cost_us: 500 us + 1500000 ns = 2 ms a step (4 steps
	 * of cost_us alone would take 2 ms, below the bound). */
	assert_int_equal(sr_env_find("spin:cost_us=500,cost_ns=1500000,obs_dim=8", &s1), 0);
	t0 = seeded_step_ns(&s1, b, N, act, ob, rb, tb);
	print_message("spin: 4 x (500 us + 1500000 ns) took %.2f ms\n", t0 / 1e6);
	assert_true(t0 >= 4000000);
}

static int fake_check(const sr_env_spec *spec, const void *state)
{
	return 0;
}

static int fake_create(const sr_env_spec *spec, void *state)
{
	return 0;
}

static void fake_destroy(const sr_env_spec *spec, void *state)
{
}

static int fake_save(const sr_env_spec *spec, const void *state, void *buf, size_t cap,
		     size_t *len)
{
	return -ENOSPC;
}

static int fake_load(const sr_env_spec *spec, void *state, const void *buf, size_t len)
{
	return -EINVAL;
}

static void test_validate(void **st)
{
	const sr_env_spec *cp = sr_env_at(0);
	sr_env_spec s;
	static const float lo[1] = {-1}, hi[1] = {1};
	static const double lo64[4] = {0, 0, 0, 0}, hi64[4] = {3, 1, 1, 2.5};
	static const double lo1[1] = {2}, hi1[1] = {17};

	assert_int_equal(sr_env_validate(NULL), -EINVAL);
#define BAD(mutation, code, text)                                                          \
	do {                                                                               \
		s = *cp;                                                                   \
		mutation;                                                                  \
		assert_int_equal(sr_env_validate(&s), code);                               \
		assert_non_null(strstr(sr_last_error(), text));                            \
	} while (0)
	BAD(s.abi_version = 7, -EPROTO, "version 7");
	BAD(s.abi_version = 7, -EPROTO, "version 2");
	BAD(s.abi_version = 7, -EPROTO, "version 1");
	BAD(s.abi_version = 0, -EPROTO, "version 0");
	BAD(s.spec_size = 16, -EPROTO, "size");
	BAD(s.abi_version = 7, -EPROTO, "version 3");
	BAD(s.abi_version = 1, -EPROTO, "size"); /* v1 with the v3 size */
	BAD(s.abi_version = 2, -EPROTO, "size"); /* v2 with the v3 size */
	BAD(s.spec_size = SR_ENV_SPEC_SIZE_V1, -EPROTO, "size"); /* v3 with the v1 size */
	BAD(s.spec_size = SR_ENV_SPEC_SIZE_V2, -EPROTO, "size"); /* v3 with the v2 size */
	BAD(s.obs_dtype = SR_DTYPE_COUNT, -EINVAL, "unknown obs_dtype");
	BAD(s.obs_kind = 5, -EINVAL, "unknown obs_kind");
	BAD(s.obs_kind = SR_SPACE_MULTI_DISCRETE, -EINVAL, "integer or bool obs_dtype");
	BAD((s.obs_kind = SR_SPACE_MULTI_DISCRETE, s.obs_dtype = SR_DTYPE_INT64, s.obs_low = NULL),
	    -EINVAL, "needs its bounds");
	BAD(s.obs_low64 = lo64, -EINVAL, "both or neither");
	BAD((s.obs_kind = SR_SPACE_DISCRETE, s.obs_dtype = SR_DTYPE_INT64), -EINVAL, "obs_ndim");
	BAD(s.flags = 4, -EINVAL, "unknown flags");
	BAD(s.flags = SR_ENV_F_OPAQUE | SR_ENV_F_FOREIGN, -EINVAL, "one or the other");
	BAD(s.flags = SR_ENV_F_OPAQUE, -EINVAL, "create, destroy, save and load");
	BAD((s.save_max = 64, s.flags = 0), -EINVAL, "SR_ENV_F_OPAQUE");
	BAD(s.id = NULL, -EINVAL, "no id");
	BAD(s.name = "", -EINVAL, "no id");
	BAD(s.step = NULL, -EINVAL, "required");
	BAD(s.seed = NULL, -EINVAL, "required");
	BAD(s.state_size = 12, -EINVAL, "multiple of 8");
	BAD(s.state_size = 0, -EINVAL, "multiple of 8");
	BAD(s.obs_ndim = 0, -EINVAL, "obs_ndim");
	BAD(s.obs_ndim = 5, -EINVAL, "obs_ndim");
	BAD(s.obs_dim = 5, -EINVAL, "shape");
	BAD(s.act_n = 0, -EINVAL, "discrete");
	BAD(s.act_dim = 2, -EINVAL, "discrete");
	BAD((s.act_kind = SR_SPACE_BOX, s.act_low = NULL), -EINVAL, "bounds");
	BAD(s.act_kind = 9, -EINVAL, "unknown action kind");
	BAD(s.get_phys = NULL, -EINVAL, "get_phys");
	s = *cp;
	s.act_kind = SR_SPACE_BOX;
	s.act_low = lo;
	s.act_high = hi;
	assert_int_equal(sr_env_validate(&s), 0);
	s = *cp;
	s.n_phys = 0;
	s.get_phys = NULL;
	s.set_phys = NULL;
	assert_int_equal(sr_env_validate(&s), 0);
	/* check_state alone is fine for plain data. */
	s = *cp;
	s.check_state = fake_check;
	assert_int_equal(sr_env_validate(&s), 0);
	/* An opaque spec with every hook and a save bound. */
	s.flags = SR_ENV_F_OPAQUE;
	s.create = fake_create;
	s.destroy = fake_destroy;
	s.save = fake_save;
	s.load = fake_load;
	BAD((s.flags = SR_ENV_F_OPAQUE, s.create = fake_create, s.destroy = fake_destroy,
	     s.save = fake_save, s.load = fake_load),
	    -EINVAL, "save_max > 0");
	s.save_max = 64;
	assert_int_equal(sr_env_validate(&s), 0);
	assert_true(sr_env_is_opaque(&s));
	BAD((s.flags = SR_ENV_F_OPAQUE, s.create = fake_create, s.destroy = fake_destroy,
	     s.save = fake_save, s.load = NULL, s.save_max = 64),
	    -EINVAL, "opaque state needs");
	/* The v3 tail: exact double bounds, integer spaces. CartPole's obs is 4
	 * wide; hi64[3] = 2.5 is not an integer. */
	s = *cp;
	s.obs_dtype = SR_DTYPE_FLOAT64;
	s.obs_low64 = lo64;
	s.obs_high64 = hi64;
	assert_int_equal(sr_env_validate(&s), 0);
	assert_int_equal(sr_env_obs_size(&s), 32);
	s.obs_dtype = SR_DTYPE_INT16;
	assert_int_equal(sr_env_validate(&s), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "not an integer"));
	s.obs_kind = SR_SPACE_MULTI_BINARY;
	s.obs_dtype = SR_DTYPE_BOOL;
	assert_int_equal(sr_env_validate(&s), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "[0, 1]"));
	s = *cp;
	s.obs_kind = SR_SPACE_DISCRETE;
	s.obs_dtype = SR_DTYPE_INT64;
	s.obs_ndim = 0;
	s.obs_dim = 1;
	s.obs_low64 = lo1;
	s.obs_high64 = hi1;
	assert_int_equal(sr_env_validate(&s), 0);
	assert_int_equal(sr_env_obs_size(&s), 8);
	/* Until the pool carries other dtypes it refuses them, naming the dtype. */
	{
		sr_pool_opts po;
		sr_pool *pool = NULL;

		s = *cp;
		s.obs_dtype = SR_DTYPE_FLOAT64;
		sr_pool_opts_init(&po);
		po.spec = &s;
		po.num_envs = 2;
		po.num_threads = 1;
		assert_int_equal(sr_pool_create(&po, &pool), -ENOTSUP);
		assert_non_null(strstr(sr_last_error(), "float64"));
		assert_null(pool);
	}
#undef BAD
}

/* A version 1 spec, in a buffer that ends where the v2 tail would start
 * (ASan reports any read past it), validates and upgrades with a zero
 * tail; a bad one leaves the output untouched. */
static void test_validate_v1(void **st)
{
	const sr_env_spec *cp = sr_env_at(0);
	sr_env_spec *v1 = malloc(SR_ENV_SPEC_SIZE_V1), out;

	assert_non_null(v1);
	memcpy(v1, cp, SR_ENV_SPEC_SIZE_V1);
	v1->abi_version = 1;
	v1->spec_size = SR_ENV_SPEC_SIZE_V1;
	assert_int_equal(sr_env_validate(v1), 0);
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(sr_env_spec_upgrade(v1, &out), 0);
	assert_int_equal(out.abi_version, SR_ENV_ABI_VERSION);
	assert_int_equal(out.spec_size, sizeof(sr_env_spec));
	assert_int_equal(out.flags, 0);
	assert_int_equal(out.save_max, 0);
	assert_null(out.check_state);
	assert_null(out.create);
	assert_null(out.load);
	assert_ptr_equal(out.step, cp->step);
	assert_int_equal(sr_env_validate(&out), 0);
	/* A pool takes a v1 spec too (it upgrades its copy). */
	sr_pool_opts po;
	sr_pool *pool;
	sr_pool_opts_init(&po);
	po.spec = v1;
	po.num_envs = 4;
	po.num_threads = 1;
	assert_int_equal(sr_pool_create(&po, &pool), 0);
	assert_int_equal(t_pool_info(pool).spec->abi_version, SR_ENV_ABI_VERSION);
	assert_null(t_pool_info(pool).spec->create);
	sr_pool_destroy(pool);
	v1->spec_size = 16;
	memset(&out, 0x5a, sizeof(out));
	assert_int_equal(sr_env_spec_upgrade(v1, &out), -EPROTO);
	assert_int_equal(out.abi_version, 0x5a5a5a5au);
	assert_int_equal(sr_env_spec_upgrade(cp, NULL), -EINVAL);
	free(v1);
}

/* A version 2 spec, in a buffer that ends where the v3 tail would start,
 * validates and upgrades with a float32 box observation. */
static void test_validate_v2(void **st)
{
	const sr_env_spec *cp = sr_env_at(0);
	sr_env_spec *v2 = malloc(SR_ENV_SPEC_SIZE_V2), out;

	assert_non_null(v2);
	memcpy(v2, cp, SR_ENV_SPEC_SIZE_V2);
	v2->abi_version = 2;
	v2->spec_size = SR_ENV_SPEC_SIZE_V2;
	assert_int_equal(sr_env_validate(v2), 0);
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(sr_env_spec_upgrade(v2, &out), 0);
	assert_int_equal(out.abi_version, SR_ENV_ABI_VERSION);
	assert_int_equal(out.spec_size, sizeof(sr_env_spec));
	assert_int_equal(out.obs_dtype, SR_DTYPE_FLOAT32);
	assert_int_equal(out.obs_kind, 0);
	assert_null(out.obs_low64);
	assert_null(out.obs_high64);
	assert_int_equal(out.flags, cp->flags);
	assert_int_equal(sr_env_obs_size(&out), 4u * cp->obs_dim);
	free(v2);
}

static void test_dtype_table(void **st)
{
	assert_int_equal(sr_dtype_size(SR_DTYPE_FLOAT32), 4);
	assert_int_equal(sr_dtype_size(SR_DTYPE_FLOAT64), 8);
	assert_int_equal(sr_dtype_size(SR_DTYPE_UINT8), 1);
	assert_int_equal(sr_dtype_size(SR_DTYPE_INT8), 1);
	assert_int_equal(sr_dtype_size(SR_DTYPE_INT16), 2);
	assert_int_equal(sr_dtype_size(SR_DTYPE_INT32), 4);
	assert_int_equal(sr_dtype_size(SR_DTYPE_INT64), 8);
	assert_int_equal(sr_dtype_size(SR_DTYPE_BOOL), 1);
	assert_int_equal(sr_dtype_size(SR_DTYPE_COUNT), 0);
	assert_string_equal(sr_dtype_name(SR_DTYPE_INT16), "int16");
	assert_string_equal(sr_dtype_name(SR_DTYPE_BOOL), "bool");
	assert_string_equal(sr_dtype_name(99), "?");
}

/* Disjoint slices may be stepped from different threads at once, and
 * spin's lazy calibration is entered from all of them together: the result
 * equals one thread stepping everything. (Run under TSan too.) */
struct slice_arg {
	const sr_env_spec *spec;
	char *states;
	size_t n;
	float *obs;
	double *rew;
	uint8_t *term;
	int steps;
};

static void *slice_thread(void *p)
{
	struct slice_arg *a = p;

	run_steps(a->spec, a->states, a->n, a->steps, a->obs, a->rew, a->term, 11);
	return NULL;
}

static void test_threads_disjoint(void **st)
{
	enum { THREADS = 4, PER = 8, T = 30 };
	static const char *const envs[] = {"spin:cost_us=1,obs_dim=4,ep_len=7", "CartPole-v1",
					   "Acrobot-v1"};

	for (size_t e = 0; e < sizeof(envs) / sizeof(envs[0]); e++) {
		sr_env_spec spec;
		size_t n = THREADS * PER, od, ss;
		char *a, *b;
		float *oa, *ob, tmp[THREADS * PER * 8];
		double *ra, *rb;
		uint8_t *ta, *tb;
		pthread_t th[THREADS];
		struct slice_arg args[THREADS];

		assert_int_equal(sr_env_find(envs[e], &spec), 0);
		od = spec.obs_dim;
		ss = spec.state_size;
		a = alloc64(n * ss);
		b = alloc64(n * ss);
		oa = calloc((size_t)T * n * od, sizeof(float));
		ob = calloc((size_t)T * n * od, sizeof(float));
		ra = calloc((size_t)T * n, sizeof(double));
		rb = calloc((size_t)T * n, sizeof(double));
		ta = calloc((size_t)T * n, 1);
		tb = calloc((size_t)T * n, 1);
		spec.seed(&spec, a, n, 5, 0);
		spec.reset(&spec, a, n, tmp);
		memcpy(b, a, n * ss);
		/* One thread, slice by slice (the same action stream per slice). */
		for (int t = 0; t < THREADS; t++)
			run_steps(&spec, a + t * PER * ss, PER, T, oa + (size_t)t * T * PER * od,
				  ra + t * T * PER, ta + t * T * PER, 11);
		for (int t = 0; t < THREADS; t++) {
			args[t] = (struct slice_arg){&spec, b + t * PER * ss, PER,
						     ob + (size_t)t * T * PER * od, rb + t * T * PER,
						     tb + t * T * PER, T};
			assert_int_equal(pthread_create(&th[t], NULL, slice_thread, &args[t]), 0);
		}
		for (int t = 0; t < THREADS; t++)
			pthread_join(th[t], NULL);
		assert_memory_equal(a, b, n * ss);
		assert_memory_equal(oa, ob, sizeof(float) * T * n * od);
		assert_memory_equal(ra, rb, sizeof(double) * T * n);
		assert_memory_equal(ta, tb, (size_t)T * n);
		free(a);
		free(b);
		free(oa);
		free(ob);
		free(ra);
		free(rb);
		free(ta);
		free(tb);
	}
}

/*
 * np_random.h reproduces NumPy's Generator(PCG64(SeedSequence(s))): the
 * actions of Gymnasium 1.3.0's random-policy episodes with seeds 0 and 1
 * (refdata/box2d/trajectories: action_space.seed(s), then sample() each
 * step) come out of sr_np_integers(0, 4) (Discrete(4)) and
 * (float)sr_np_uniform(-1, 1) (Box(-1, 1, (4,)) and (2,)), in order.
 * Integer draws use the buffered half word: two integers(4) per raw draw.
 */
static void test_np_random(void **st)
{
	static const int disc[2][6] = {{3, 2, 2, 1, 1, 0}, {1, 2, 3, 3, 0, 0}};
	/* BipedalWalker's first two actions (the lander's continuous actions
	 * are the same stream two at a time) */
	static const float box[2][8] = {
		{0.273923367f, -0.460426569f, -0.918052971f, -0.966944754f, 0.626540482f,
		 0.825511158f, 0.213271558f, 0.458993107f},
		{0.0236432496f, 0.900927365f, -0.71168077f, 0.897298872f, -0.376337081f,
		 -0.153347105f, 0.655405164f, -0.181601733f},
	};
	sr_np_pcg64 g;

	for (int s = 0; s < 2; s++) {
		sr_np_seed(&g, (uint64_t)s);
		for (int k = 0; k < 6; k++)
			assert_int_equal(sr_np_integers(&g, 0, 4), disc[s][k]);
		sr_np_seed(&g, (uint64_t)s);
		for (int k = 0; k < 8; k++)
			assert_true((float)sr_np_uniform(&g, -1, 1) == box[s][k]);
	}
	/* A seed of two 32-bit words: numpy.random.default_rng(2**32 + 5)
	 * .bit_generator.random_raw() */
	sr_np_seed(&g, 5 + (1ull << 32));
	assert_true(sr_np_next64(&g) == 14281546376153053393ull);
}

/* Env parameters: the tables, "id:name=value" at create, sr_pool_set_params
 * on a live pool (the same steps as a pool made with the value), and what
 * each refuses without changing anything. */
static void test_params(void **st)
{
	static const char *const ids[] = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0",
					  "MountainCarContinuous-v0", "Acrobot-v1"};
	sr_env_spec a, b;
	sr_env_param pa;
	char buf[128];

	for (size_t e = 0; e < sizeof(ids) / sizeof(ids[0]); e++) {
		size_t n = 0, live = 0;

		assert_int_equal(sr_env_find(ids[e], &a), 0);
		for (int k = 0; k < 8; k++)
			assert_true(a.params[k] == 0); /* defaults keep the slots zero */
		while (sr_env_param_at(&a, n, &pa) == 0) {
			sr_env_param q;

			assert_int_equal(sr_env_param_find(&a, pa.name, &q), 0);
			assert_string_equal(q.name, pa.name);
			if (pa.flags & SR_ENV_PARAM_LIVE) {
				double v = pa.value * 1.5 + 0.25;

				live++;
				assert_null(pa.note);
				snprintf(buf, sizeof(buf), "%s:%s=%.17g", ids[e], pa.name, v);
				assert_int_equal(sr_env_find(buf, &b), 0);
				assert_int_equal(sr_env_param_find(&b, pa.name, &q), 0);
				assert_true(q.value == v);
			} else {
				assert_non_null(pa.note);
				snprintf(buf, sizeof(buf), "%s:%s=1", ids[e], pa.name);
				assert_int_equal(sr_env_find(buf, &b), -EINVAL);
				assert_non_null(strstr(sr_last_error(), pa.note));
			}
			n++;
		}
		assert_true(live >= 6);
		assert_int_equal(sr_env_param_at(&a, n, &pa), -ENOENT);
	}
	assert_int_equal(sr_env_find("CartPole-v1", &a), 0);
	assert_int_equal(sr_env_param_find(&a, "gravity", &pa), 0);
	assert_true(pa.value == 9.8);
	assert_int_equal(sr_env_param_find(&a, "x_threshold", &pa), 0);
	assert_true(pa.value == 2.4 && pa.flags == 0);
	assert_int_equal(sr_env_param_find(&a, "grav", &pa), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "gravity, masspole"));
	/* gravity = 0 is a value like any other (slots hold bits ^ default) */
	assert_int_equal(sr_env_find("CartPole-v1:gravity=0,rng=numpy", &a), 0);
	assert_int_equal(sr_env_param_find(&a, "gravity", &pa), 0);
	assert_true(pa.value == 0.0 && a.params[SR__P_RNG] == 1);
	assert_int_equal(sr_env_find("CartPole-v1:gravity=nan", &a), -EINVAL);
	assert_int_equal(sr_env_find("CartPole-v1:gravity=", &a), -EINVAL);
	assert_int_equal(sr_env_find("CartPole-v1:gravity=1x", &a), -EINVAL);
	assert_int_equal(sr_env_find("Spin-v0", &a), 0);
	assert_int_equal(sr_env_param_at(&a, 0, &pa), -ENOENT);

	/* A live pool: set before the first step, the rows are those of a
	 * pool made with the value; the others stay the defaults'. */
	sr_pool *p[3];
	const sr_batch *bt[3];
	const char *envs[3] = {"CartPole-v1", "CartPole-v1:gravity=12.5,tau=0.03",
			       "CartPole-v1"};
	for (int i = 0; i < 3; i++) {
		sr_pool_opts o;

		sr_pool_opts_init(&o);
		o.env = envs[i];
		o.num_envs = 4;
		o.num_threads = 2; /* the workers read the slots set between steps (TSan) */
		o.flags |= SR_POOL_F_SEED;
		o.seed = 7;
		assert_int_equal(sr_pool_create(&o, &p[i]), 0);
		assert_int_equal(sr_pool_reset(p[i], &bt[i]), 0);
	}
	assert_int_equal(sr_pool_set_params(p[0], "gravity=12.5,tau=0.03"), 0);
	sr_pool_info info;
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	assert_int_equal(sr_pool_info_get(p[0], &info), 0);
	assert_int_equal(sr_env_param_find(info.spec, "tau", &pa), 0);
	assert_true(pa.value == 0.03);
	/* refused, nothing changed */
	assert_int_equal(sr_pool_set_params(p[0], "gravity=1,x_threshold=3"), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "x_threshold cannot be set"));
	assert_int_equal(sr_pool_set_params(p[0], "gravity=1,tau=inf"), -EINVAL);
	assert_int_equal(sr_pool_set_params(p[0], "rng=numpy"), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "rng cannot change"));
	assert_int_equal(sr_pool_set_params(p[0], "gravity"), -EINVAL);
	assert_int_equal(sr_env_param_find(info.spec, "gravity", &pa), 0);
	assert_true(pa.value == 12.5);
	int32_t act[4] = {0, 1, 1, 0};
	bool differ = false;
	for (int t = 0; t < 40; t++) {
		for (int i = 0; i < 3; i++)
			assert_int_equal(sr_pool_step(p[i], act, &bt[i]), 0);
		assert_memory_equal(bt[0]->obs, bt[1]->obs, 4 * 4 * sizeof(float));
		differ |= memcmp(bt[0]->obs, bt[2]->obs, 4 * 4 * sizeof(float)) != 0;
		act[t % 4] ^= 1;
	}
	assert_true(differ);
	for (int i = 0; i < 3; i++)
		sr_pool_destroy(p[i]);

	/* async pools have envs in flight: refused */
	sr_pool_opts o;
	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 4;
	o.batch_size = 2;
	o.num_threads = 1;
	assert_int_equal(sr_pool_create(&o, &p[0]), 0);
	assert_int_equal(sr_pool_set_params(p[0], "gravity=1"), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "sync pools only"));
	sr_pool_destroy(p[0]);
	assert_int_equal(sr_pool_set_params(NULL, "gravity=1"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reset_rows),
		cmocka_unit_test(test_one_step),
		cmocka_unit_test(test_rollout),
		cmocka_unit_test(test_perturbed_action_detected),
		cmocka_unit_test(test_reset_distribution),
		cmocka_unit_test(test_seeding),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_spin_params),
		cmocka_unit_test(test_spin_behaviour),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_validate_v1),
		cmocka_unit_test(test_validate_v2),
		cmocka_unit_test(test_dtype_table),
		cmocka_unit_test(test_threads_disjoint),
		cmocka_unit_test(test_np_random),
		cmocka_unit_test(test_params),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

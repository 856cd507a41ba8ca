/* Pool tests: options, autoreset semantics against a hand-made env,
 * determinism across thread counts, async readiness, action validation,
 * statistics and the shared-memory stats block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/pool.h"
#include "stepring/stats.h"
#include "pool_internal.h"
#include "helpers.h"

/* ---- hand-made env: x starts at 10 * index (from the seed call), each
 * step adds the action (0, 1 or 2) and rewards it; terminated when the
 * episode's sum reaches params[0]. obs = [x, sum, index]. ---- */
struct cnt {
	uint64_t index;
	double x, sum;
	uint64_t resets;
};

static void cnt_seed(const sr_env_spec *s, void *st, size_t n, uint64_t seed, uint64_t first)
{
	struct cnt *c = st;
	for (size_t i = 0; i < n; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].index = first + i;
	}
}

static void cnt_obs(const sr_env_spec *s, const void *st, float *obs)
{
	const struct cnt *c = st;
	obs[0] = (float)c->x;
	obs[1] = (float)c->sum;
	obs[2] = (float)c->index;
}

static void cnt_reset(const sr_env_spec *s, void *st, size_t n, float *obs)
{
	struct cnt *c = st;
	for (size_t i = 0; i < n; i++) {
		c[i].resets++;
		c[i].x = 10.0 * (double)c[i].index + (double)c[i].resets;
		c[i].sum = 0;
		cnt_obs(s, &c[i], obs + 3 * i);
	}
}

static void cnt_step(const sr_env_spec *s, void *st, size_t n, const void *actions, float *obs,
		     double *reward, uint8_t *term)
{
	struct cnt *c = st;
	const int32_t *a = actions;
	for (size_t i = 0; i < n; i++) {
		c[i].x += a[i];
		c[i].sum += a[i];
		reward[i] = a[i];
		term[i] = c[i].sum >= (double)s->params[0];
		cnt_obs(s, &c[i], obs + 3 * i);
	}
}

static sr_env_spec cnt_spec(uint64_t term_at, uint32_t max_steps)
{
	sr_env_spec s;
	memset(&s, 0, sizeof(s));
	s.abi_version = SR_ENV_ABI_VERSION;
	s.spec_size = sizeof(s);
	s.id = "Counter-v0";
	s.name = "counter";
	s.state_size = sizeof(struct cnt);
	s.max_episode_steps = max_steps;
	s.obs_ndim = 1;
	s.obs_shape[0] = 3;
	s.obs_dim = 3;
	s.act_kind = SR_SPACE_DISCRETE;
	s.act_n = 3;
	s.act_dim = 1;
	s.params[0] = term_at;
	s.seed = cnt_seed;
	s.reset = cnt_reset;
	s.step = cnt_step;
	s.observe = cnt_obs;
	return s;
}

/* A pool with experiment knobs @knobs (SR__KNOB_*, pool_internal.h). */
static sr_pool *mk_k(const sr_env_spec *spec, uint32_t envs, uint32_t threads, uint32_t batch,
		     uint32_t autoreset, uint32_t knobs)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	int err;

	sr_pool_opts_init(&o);
	o.spec = spec;
	o.num_envs = envs;
	o.num_threads = threads;
	o.batch_size = batch;
	o.autoreset = autoreset;
	o.bind = SR_BIND_NONE;
	err = sr__pool_create_knobs(&o, knobs, &p);
	if (err)
		fprintf(stderr, "create: %s\n", sr_last_error());
	assert_int_equal(err, 0);
	return p;
}

static sr_pool *mk(const sr_env_spec *spec, uint32_t envs, uint32_t threads, uint32_t batch,
		   uint32_t autoreset)
{
	return mk_k(spec, envs, threads, batch, autoreset, 0);
}

/* The CPU worker @w is bound to (sr_pool_worker_stats.cpu), or the
 * -errno of sr_pool_worker_stats_get (-EINVAL: no such worker). */
static int worker_cpu(const sr_pool *p, uint32_t w)
{
	sr_pool_worker_stats ws;
	int err = sr_pool_worker_stats_get(p, w, &ws);

	return err ? err : ws.cpu;
}

/* Threads the machine allows: 3-thread tests need 3 PUs for bind none too. */
static uint32_t cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (uint32_t)n : 1;
}

static uint32_t thr(uint32_t want)
{
	return want <= cpus() ? want : cpus();
}

/* ---------------------------------------------------------------------- */

static void test_bad_options(void **st)
{
	sr_pool_opts o;
	sr_pool *p = (sr_pool *)0x1;
	sr_env_spec s = cnt_spec(3, 0);

	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 0;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(sr_last_error(), "num_envs"));

	o.num_envs = 4;
	o.batch_size = 5;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "batch_size"));

	o.batch_size = 0;
	o.spec = NULL;
	o.env = "NoSuchEnv-v9";
	assert_int_equal(sr_pool_create(&o, &p), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "NoSuchEnv-v9"));

	o.spec = &s;
	o.flags = SR_POOL_F_CPUSET;
	o.cpuset = "0";
	o.num_threads = 2;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "2 threads"));

	o.flags = SR_POOL_F_CPUSET;
	o.cpuset = "banana";
	o.num_threads = 1;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "cpuset"));

	o.flags = 1u << 30;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	o.flags = 0;
	o.ring_capacity = 100;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	o.ring_capacity = 8; /* < 4 * num_envs */
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	o.ring_capacity = 0;
	o.autoreset = 7;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	o.autoreset = SR_AUTORESET_DISABLED;
	o.batch_size = 2; /* async */
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "sync"));
	o.batch_size = 0;
	o.autoreset = 0;
	sr_pool_destroy(NULL);
}

static void test_next_step(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool *p = mk(&s, 2, thr(2), 0, SR_AUTORESET_NEXT_STEP);
	const sr_batch *b;
	int32_t act[2] = {1, 2};
	sr_ring *r = t_pool_info(p).ring;
	uint64_t mask = sr_ring_capacity(r) - 1;

	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(b->n, 2);
	assert_int_equal(b->obs_dim, 3);
	assert_float_equal(b->obs[0], 1.0, 0);    /* env 0: 10*0 + 1 reset */
	assert_float_equal(b->obs[3], 11.0, 0);   /* env 1 */
	assert_int_equal(b->env_id[1], 1);
	assert_int_equal(sr_ring_flags_col(r)[b->first_seq & mask], SR_SLOT_FIRST);

	/* env 1 (action 2) terminates at step 2, env 0 (action 1) at step 3 */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_float_equal(b->obs[0], 2.0, 0);
	assert_float_equal(b->reward[1], 2.0, 0);
	assert_int_equal(b->terminated[1], 0);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(b->terminated[0], 0);
	assert_int_equal(b->terminated[1], 1);
	assert_int_equal(b->truncated[1], 0);
	assert_float_equal(b->obs[3], 15.0, 0); /* final obs: 11 + 2 + 2 */
	assert_null(b->final_obs);
	{
		uint64_t q = b->first_seq + 1;
		uint64_t prev = sr_ring_prev_col(r)[q & mask];
		assert_true(prev != SR_RING_NO_PREV);
		assert_int_equal(sr_ring_env_id_col(r)[prev & mask], 1);
		assert_int_equal(sr_ring_action_col(r)[(q & mask) * 4], 2);
	}
	/* next step: env 1 shows its reset obs, reward 0, no flags */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(b->terminated[0], 1);
	assert_float_equal(b->obs[3], 12.0, 0); /* second reset of env 1 */
	assert_float_equal(b->reward[1], 0.0, 0);
	assert_int_equal(b->terminated[1], 0);
	assert_int_equal(sr_ring_flags_col(r)[(b->first_seq + 1) & mask], SR_SLOT_FIRST);
	assert_int_equal(sr_ring_prev_col(r)[(b->first_seq + 1) & mask], SR_RING_NO_PREV);
	/* stats: one finished episode of env 1 (len 2, return 4) and env 0 (3, 3) */
	{
		sr_pool_stats ps;
		assert_int_equal(sr_pool_stats_get(p, &ps), 0);
		assert_int_equal(ps.episodes, 2);
		assert_float_equal(ps.mean_length, 2.5, 1e-9);
		assert_float_equal(ps.mean_return, 3.5, 1e-9);
		assert_int_equal(ps.steps, 2 * 4);
		assert_int_equal(ps.ns_send, 0); /* sync: no sr_pool_send */
	}
	sr_pool_destroy(p);
}

static void test_same_step(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool *p = mk(&s, 3, thr(2), 0, SR_AUTORESET_SAME_STEP);
	const sr_batch *b;
	int32_t act[3] = {1, 2, 0};
	sr_ring *r = t_pool_info(p).ring;
	uint64_t mask = sr_ring_capacity(r) - 1, q, h;

	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_non_null(b->final_obs);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	/* env 1 ended: batch shows the reset obs with the final step's flags */
	assert_int_equal(b->terminated[1], 1);
	assert_float_equal(b->reward[1], 2.0, 0);
	assert_float_equal(b->obs[3], 12.0, 0);        /* reset obs */
	assert_float_equal(b->final_obs[3], 15.0, 0);  /* final obs */
	assert_float_equal(b->final_obs[4], 4.0, 0);
	q = b->first_seq + 1;
	assert_int_equal(sr_ring_flags_col(r)[q & mask], SR_SLOT_FIRST);
	/* the transition lives in a FINAL slot after the batch */
	h = sr_ring_head(r);
	{
		bool found = false;
		for (uint64_t e = b->first_seq + 3; e < h; e++) {
			uint64_t se = e & mask;
			if (sr_ring_flags_col(r)[se] == SR_SLOT_FINAL) {
				found = true;
				assert_int_equal(sr_ring_env_id_col(r)[se], 1);
				assert_float_equal(sr_ring_obs_col(r)[se * 3], 15.0, 0);
				assert_int_equal(sr_ring_terminated_col(r)[se], 1);
				assert_float_equal(sr_ring_reward_col(r)[se], 2.0, 0);
				/* prev: the env's previous step (obs 13) */
				assert_float_equal(sr_ring_obs_col(r)[(sr_ring_prev_col(r)[se] & mask) * 3],
						   13.0, 0);
			}
		}
		assert_true(found);
	}
	/* following step links to the reset slot */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(b->terminated[1], 0);
	assert_float_equal(b->obs[3], 14.0, 0);
	assert_int_equal(sr_ring_prev_col(r)[(b->first_seq + 1) & mask], q);
	{
		sr_pool_stats ps;
		sr_pool_stats_get(p, &ps);
		assert_int_equal(ps.episodes, 2); /* env 0 ended at step 3 too */
	}
	sr_pool_destroy(p);
}

static void test_disabled_and_truncation(void **st)
{
	sr_env_spec s = cnt_spec(100, 2);
	sr_pool *p = mk(&s, 2, 1, 0, SR_AUTORESET_DISABLED);
	const sr_batch *b;
	int32_t act[2] = {1, 1};
	uint8_t mask[2] = {1, 0};

	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(b->truncated[0], 0);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(b->truncated[0], 1);
	assert_int_equal(b->terminated[0], 0);
	assert_float_equal(b->obs[0], 3.0, 0);
	/* not reset by itself: same obs, flags kept, no reward */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_float_equal(b->obs[0], 3.0, 0);
	assert_int_equal(b->truncated[0], 1);
	assert_float_equal(b->reward[0], 0.0, 0);
	assert_int_equal(sr_pool_reset_mask(p, mask, &b), 0);
	assert_float_equal(b->obs[0], 2.0, 0);  /* env 0 reset (second reset) */
	assert_float_equal(b->obs[3], 13.0, 0); /* env 1 untouched */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(b->truncated[0], 0);
	assert_float_equal(b->obs[0], 3.0, 0);
	sr_pool_destroy(p);
}

/* FNV-1a over obs, reward, flags of every step with per-env seeded actions. */
static uint64_t hash_run_f(const char *env, const sr_env_spec *spec, uint32_t envs,
			   uint32_t threads, uint32_t steps, uint32_t autoreset, uint32_t knobs)
{
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;
	uint64_t h = T_FNV_INIT;
	sr_rng *rng = calloc(envs, sizeof(*rng));
	int32_t *act = calloc(envs, 4 * 8);
	const sr_env_spec *sp;

	sr_pool_opts_init(&o);
	o.env = env;
	o.spec = spec;
	o.num_envs = envs;
	o.num_threads = threads;
	/* A described 4-core topology: 3 threads even on a 2-CPU machine (plan
	 * only, no binding). */
	o.flags = SR_POOL_F_SEED | SR_POOL_F_TOPOLOGY;
	o.topology = "core:4 pu:1";
	o.seed = 42;
	o.autoreset = autoreset;
	o.bind = SR_BIND_NONE;
	assert_int_equal(sr__pool_create_knobs(&o, knobs, &p), 0);
	sp = t_pool_info(p).spec;
	for (uint32_t i = 0; i < envs; i++)
		sr_rng_seed(&rng[i], 7, i);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t t = 0; t <= steps; t++) {
		const unsigned char *parts[4] = {(const void *)b->obs, (const void *)b->reward,
						 b->terminated, b->truncated};
		size_t len[4] = {(size_t)b->n * b->obs_dim * 4, (size_t)b->n * 4, b->n, b->n};
		for (int k = 0; k < 4; k++)
			h = t_fnv(h, parts[k], len[k]);
		if (t == steps)
			break;
		for (uint32_t i = 0; i < envs; i++) {
			if (sp->act_kind == SR_SPACE_DISCRETE)
				act[i] = (int32_t)(sr_rng_next(&rng[i]) % sp->act_n);
			else
				for (uint32_t d = 0; d < sp->act_dim; d++)
					((float *)act)[i * sp->act_dim + d] = (float)sr_rng_range(
						&rng[i], sp->act_low[d], sp->act_high[d]);
		}
		assert_int_equal(sr_pool_step(p, act, &b), 0);
	}
	sr_pool_destroy(p);
	free(rng);
	free(act);
	return h;
}

static uint64_t hash_run(const char *env, const sr_env_spec *spec, uint32_t envs,
			 uint32_t threads, uint32_t steps, uint32_t autoreset)
{
	return hash_run_f(env, spec, envs, threads, steps, autoreset, 0);
}

static void test_determinism(void **st)
{
	sr_env_spec s = cnt_spec(7, 5);
	/* The Box2D envs (opaque state, created by each worker) when built. */
	const char *envs[] = {"CartPole-v1", "Pendulum-v1", "LunarLander-v3",
			      "LunarLanderContinuous-v3", "BipedalWalker-v3"};
	const uint32_t env_steps[] = {300, 300, 200, 200, 80};

	for (uint32_t m = 0; m < 3; m++) {
		uint64_t h1 = hash_run(NULL, &s, 37, 1, 40, m);
		assert_int_equal(h1, hash_run(NULL, &s, 37, 2, 40, m));
		assert_int_equal(h1, hash_run(NULL, &s, 37, 3, 40, m));
		/* every worker a thread (the calling thread only drives) */
		assert_int_equal(h1, hash_run_f(NULL, &s, 37, 2, 40, m, SR__KNOB_NO_INLINE));
	}
	for (int e = 0; e < 5; e++) {
		sr_env_spec tmp;
		uint64_t h1;
		uint32_t n = env_steps[e];
		if (sr_env_find(envs[e], &tmp))
			continue;
		h1 = hash_run(envs[e], NULL, 37, 1, n, SR_AUTORESET_NEXT_STEP);
		assert_int_equal(h1, hash_run(envs[e], NULL, 37, 2, n, SR_AUTORESET_NEXT_STEP));
		assert_int_equal(h1, hash_run(envs[e], NULL, 37, 3, n, SR_AUTORESET_NEXT_STEP));
		assert_true(h1 != hash_run(envs[e], NULL, 36, 1, n, SR_AUTORESET_NEXT_STEP));
	}
}

static void test_action_validation(void **st)
{
	sr_env_spec s = cnt_spec(3, 0), ps;
	sr_pool *p = mk(&s, 8, thr(2), 0, SR_AUTORESET_NEXT_STEP);
	const sr_batch *b;
	int32_t act[8] = {0};
	sr_pool_stats a, c;

	assert_int_equal(sr_pool_reset(p, &b), 0);
	sr_pool_stats_get(p, &a);
	act[5] = 3;
	assert_int_equal(sr_pool_step(p, act, &b), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "env 5"));
	act[5] = -1;
	assert_int_equal(sr_pool_step(p, act, &b), -EINVAL);
	sr_pool_stats_get(p, &c);
	assert_int_equal(a.steps, c.steps); /* nothing stepped */
	assert_int_equal(sr_pool_send(p, act, NULL, 8), -EINVAL); /* sync pool */
	sr_pool_destroy(p);

	if (sr_env_find("Pendulum-v1", &ps) == 0) {
		float fa[4] = {0, 0, 0, 0};
		p = mk(&ps, 4, 1, 0, SR_AUTORESET_NEXT_STEP);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		sr_pool_stats_get(p, &a);
		fa[2] = NAN;
		assert_int_equal(sr_pool_step(p, fa, &b), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "env 2"));
		fa[2] = INFINITY;
		assert_int_equal(sr_pool_step(p, fa, &b), -EINVAL);
		fa[2] = -INFINITY;
		assert_int_equal(sr_pool_step(p, fa, &b), -EINVAL);
		sr_pool_stats_get(p, &c);
		assert_int_equal(a.steps, c.steps); /* nothing stepped */
		sr_pool_destroy(p);

		/* Out of bounds: clipped by the env, as Gymnasium's Pendulum
		 * does (high is 2): 2.5 and 1e30 step exactly like 2, -7 like -2. */
		float big[4] = {2.5f, 1e30f, -7.0f, 0.5f}, clip[4] = {2.0f, 2.0f, -2.0f, 0.5f};
		sr_pool *q = mk(&ps, 4, 1, 0, SR_AUTORESET_NEXT_STEP);
		p = mk(&ps, 4, 1, 0, SR_AUTORESET_NEXT_STEP);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		assert_int_equal(sr_pool_reset(q, &b), 0);
		for (int k = 0; k < 5; k++) {
			const sr_batch *bq;
			assert_int_equal(sr_pool_step(p, big, &b), 0);
			assert_int_equal(sr_pool_step(q, clip, &bq), 0);
			assert_memory_equal(b->obs, bq->obs, 4 * 3 * sizeof(float));
			assert_memory_equal(b->reward, bq->reward, 4 * sizeof(float));
		}
		sr_pool_destroy(q);
		sr_pool_destroy(p);
	}
}

static sr_pool *mk_seeded(const char *env, uint32_t envs, uint32_t threads, uint32_t batch,
			  uint64_t seed)
{
	sr_pool_opts o;
	sr_pool *p = NULL;

	sr_pool_opts_init(&o);
	o.env = env;
	o.num_envs = envs;
	o.num_threads = threads;
	o.batch_size = batch;
	o.bind = SR_BIND_NONE;
	o.flags |= SR_POOL_F_SEED;
	o.seed = seed;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	return p;
}

/* sr_pool_reset_ex: reseeding like a fresh pool, per-env seeds, Gymnasium's
 * reset options, masks, and every bad option refused before anything
 * changes. */
static void test_reset_ex(void **st)
{
	const uint32_t N = 6;
	sr_pool *p = mk_seeded("CartPole-v1", N, thr(2), 0, 1);
	sr_pool *twin = mk_seeded("CartPole-v1", N, thr(2), 0, 1);
	sr_pool *fresh = mk_seeded("CartPole-v1", N, 1, 0, 7), *q;
	const sr_batch *b, *bt;
	sr_pool_reset_opts ro;
	float o0[6 * 4], keep[6 * 4];
	int32_t act[6] = {0, 1, 0, 1, 1, 0};
	uint64_t seeds[6] = {5, 5, 9, 5, 0, 0};
	uint8_t smask[6] = {1, 1, 1, 1, 0, 0}, mask[6] = {1, 0, 1, 0, 1, 0};

	assert_int_equal(sr_pool_reset(fresh, &b), 0);
	memcpy(o0, b->obs, sizeof(o0));
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(sr_pool_reset(twin, &b), 0);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sr_pool_step(p, act, &b), 0);
		assert_int_equal(sr_pool_step(twin, act, &b), 0);
	}

	/* Bad options: -EINVAL, nothing changes (p still steps like twin). */
	sr_pool_reset_opts_init(&ro);
	ro.flags = 1u << 9;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	ro.flags = SR_RESET_F_OPTIONS;
	ro.options = "low=0.3,high=0.2";
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "low"));
	ro.options = "wind=1";
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "wind"));
	ro.options = "low=nan";
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	ro.options = "low=1,low=2";
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	ro.options = "low=0.1x";
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	ro.options = NULL;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	ro.flags = SR_RESET_F_SEED | SR_RESET_F_SEEDS;
	ro.seeds = seeds;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	ro.flags = SR_RESET_F_MASK;
	ro.mask = NULL;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(sr_pool_step(twin, act, &bt), 0);
	assert_memory_equal(b->obs, bt->obs, sizeof(o0));

	/* SEED: the episodes a fresh pool of that seed starts. */
	sr_pool_reset_opts_init(&ro);
	ro.flags = SR_RESET_F_SEED;
	ro.seed = 7;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
	assert_memory_equal(b->obs, o0, sizeof(o0));
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(sr_pool_step(fresh, act, &bt), 0);
	assert_memory_equal(b->obs, bt->obs, sizeof(o0));

	/* SEEDS: equal seeds, equal episodes; seed_mask 0 keeps the RNG. */
	memcpy(keep, b->obs, sizeof(keep));
	ro.flags = SR_RESET_F_SEEDS;
	ro.seeds = seeds;
	ro.seed_mask = smask;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
	assert_memory_equal(b->obs, b->obs + 4, 4 * sizeof(float));      /* env 0 == env 1 */
	assert_memory_equal(b->obs, b->obs + 3 * 4, 4 * sizeof(float));  /* env 0 == env 3 */
	assert_memory_not_equal(b->obs, b->obs + 2 * 4, 4 * sizeof(float));
	for (uint32_t i = 0; i < N; i++)
		for (int k = 0; k < 4; k++)
			assert_true(fabsf(b->obs[i * 4 + k]) <= 0.05f);

	/* OPTIONS: Gymnasium's low/high, for this reset only. */
	ro.flags = SR_RESET_F_OPTIONS;
	ro.options = "low=0.2,high=0.3";
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
	for (uint32_t i = 0; i < N * 4; i++)
		assert_true(b->obs[i] >= 0.2f && b->obs[i] <= 0.3f);
	ro.options = "high=-0.2,low=-0.2"; /* any order; low == high is one point */
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
	for (uint32_t i = 0; i < N * 4; i++)
		assert_true(b->obs[i] == -0.2f);

	/* MASK with SEED: only the masked envs are reseeded and reset. */
	memcpy(keep, b->obs, sizeof(keep));
	ro.flags = SR_RESET_F_MASK | SR_RESET_F_SEED;
	ro.mask = mask;
	ro.seed = 7;
	assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
	for (uint32_t i = 0; i < N; i++)
		assert_memory_equal(b->obs + i * 4, mask[i] ? o0 + i * 4 : keep + i * 4,
				    4 * sizeof(float));
	sr_pool_destroy(p);
	sr_pool_destroy(twin);
	sr_pool_destroy(fresh);

	/* Pendulum's options are x_init / y_init. */
	q = mk_seeded("Pendulum-v1", 4, 1, 0, 3);
	sr_pool_reset_opts_init(&ro);
	ro.flags = SR_RESET_F_OPTIONS;
	ro.options = "x_init=0.1,y_init=0";
	assert_int_equal(sr_pool_reset_ex(q, &ro, &b), 0);
	for (uint32_t i = 0; i < 4; i++) {
		assert_true(b->obs[i * 3] >= cosf(0.1f) - 1e-6f);
		assert_true(b->obs[i * 3 + 2] == 0.0f);
	}
	ro.options = "low=0";
	assert_int_equal(sr_pool_reset_ex(q, &ro, &b), -EINVAL);
	sr_pool_destroy(q);

	/* An env without reset options, and an async pool. */
	q = mk_seeded("spin:cost_us=0", 4, 1, 0, 3);
	ro.options = "low=0";
	assert_int_equal(sr_pool_reset_ex(q, &ro, &b), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "no reset options"));
	sr_pool_destroy(q);
	q = mk_seeded("CartPole-v1", 4, 1, 2, 3);
	ro.flags = SR_RESET_F_SEED;
	assert_int_equal(sr_pool_reset_ex(q, &ro, &b), -EINVAL);
	sr_pool_destroy(q);
}

/* num_threads 0: chosen from the work (num_envs x the measured step cost):
 * a few cheap envs run on the calling thread, costly ones spread. */
static void test_default_threads(void **st)
{
	sr_pool_opts o;
	sr_pool *p;

	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 8;
	o.bind = SR_BIND_NONE;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(t_pool_info(p).num_threads, 1);
	assert_non_null(strstr(t_pool_info(p).threads_note, "1 (default: 8 envs x "));
	assert_non_null(strstr(t_pool_info(p).threads_note, "calling thread"));
	sr_pool_destroy(p);

	o.env = "spin:cost_us=300";
	o.num_envs = 16; /* 4.8 ms a batch: one per core */
	assert_int_equal(sr_pool_create(&o, &p), 0);
	if (cpus() >= 2) {
		assert_true(t_pool_info(p).num_threads >= 2);
		assert_non_null(strstr(t_pool_info(p).threads_note, "up to one per core"));
	}
	sr_pool_destroy(p);

	o.num_threads = 1; /* asked for: said so */
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_string_equal(t_pool_info(p).threads_note, "1 (asked for)");
	{
		/* The info's size contract: an older, shorter struct gets its
		 * prefix; a newer, longer one zeroes beyond what we know. */
		struct {
			sr_pool_info in;
			uint64_t more;
		} big;
		sr_pool_info in;

		memset(&in, 0xa5, sizeof(in));
		in.size = offsetof(sr_pool_info, batch_size);
		assert_int_equal(sr_pool_info_get(p, &in), 0);
		assert_int_equal(in.num_envs, 16);
		assert_int_equal(in.num_threads, 1);
		assert_int_equal(in.batch_size, 0xa5a5a5a5u);
		memset(&big, 0xa5, sizeof(big));
		big.in.size = sizeof(big);
		assert_int_equal(sr_pool_info_get(p, &big.in), 0);
		assert_int_equal(big.in.size, sizeof(big));
		assert_int_equal(big.in.batch_size, 16);
		assert_int_equal(big.more, 0);
		in.size = 4;
		assert_int_equal(sr_pool_info_get(p, &in), -EINVAL);
		in.size = sizeof(in);
		assert_int_equal(sr_pool_info_get(NULL, &in), -EINVAL);
	}
	sr_pool_destroy(p);
}

static void async_ready_run(uint32_t knobs)
{
	sr_env_spec s = cnt_spec(5, 0);
	const uint32_t N = 16, B = 5;
	sr_pool *p = mk_k(&s, N, thr(3), B, SR_AUTORESET_NEXT_STEP, knobs);
	const sr_batch *b;
	uint32_t sent[16] = {0}, got[16] = {0}, ids[16];
	int32_t act[16];
	sr_rng rng;

	sr_rng_seed(&rng, 1, 0);
	for (uint32_t i = 0; i < N; i++)
		sent[i] = 1; /* reset counts as a send */
	assert_int_equal(sr_pool_reset(p, NULL), 0);
	for (int it = 0; it < 400; it++) {
		uint32_t k = 0;
		assert_int_equal(sr_pool_recv(p, &b), 0);
		assert_int_equal(b->n, B);
		for (uint32_t i = 0; i < B; i++) {
			uint32_t e = b->env_id[i];
			assert_true(e < N);
			got[e]++;
			/* never returned twice without a send */
			assert_int_equal(got[e], sent[e]);
			assert_float_equal(b->obs[i * 3 + 2], (float)e, 0);
		}
		/* send to a random subset of the returned envs; the rest later */
		for (uint32_t i = 0; i < B; i++)
			if (it % 3 == 0 || (sr_rng_next(&rng) & 1))
				ids[k++] = b->env_id[i];
		for (uint32_t i = 0; i < k; i++)
			act[i] = (int32_t)(sr_rng_next(&rng) % 3);
		assert_int_equal(sr_pool_send(p, act, ids, k), 0);
		for (uint32_t i = 0; i < k; i++)
			sent[ids[i]]++;
		if (k) /* in flight twice: refused */
			assert_int_equal(sr_pool_send(p, act, ids, 1), -EINVAL);
		/* keep enough in flight: send the envs never re-sent */
		{
			uint32_t n2 = 0, ids2[16];
			for (uint32_t e = 0; e < N; e++)
				if (got[e] == sent[e] && n2 < 16)
					ids2[n2++] = e;
			for (uint32_t i = 0; i < n2; i++)
				act[i] = 1;
			if (n2)
				assert_int_equal(sr_pool_send(p, act, ids2, n2), 0);
			for (uint32_t i = 0; i < n2; i++)
				sent[ids2[i]]++;
		}
	}
	/* bad: out-of-range id, bad action */
	ids[0] = N;
	assert_int_equal(sr_pool_send(p, act, ids, 1), -EINVAL);
	sr_pool_destroy(p);
}

static void test_async_ready(void **st)
{
	(void)st;
	async_ready_run(0);
}

/* The experiment knobs: a list of names, from the environment at create. */
static void test_knobs(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p = NULL;
	uint32_t k;

	(void)st;
	assert_int_equal(sr__pool_knobs_parse(NULL, &k), 0);
	assert_int_equal(k, 0);
	assert_int_equal(sr__pool_knobs_parse("no-inline,no-rebalance", &k), 0);
	assert_int_equal(k, SR__KNOB_NO_INLINE | SR__KNOB_NO_REBALANCE);
	assert_int_equal(sr__pool_knobs_parse("no-batch-groups,", &k), 0);
	assert_int_equal(k, SR__KNOB_NO_BATCH_GROUPS);
	assert_int_equal(sr__pool_knobs_parse("no-inline,,no-rebalance", &k), -EINVAL);
	assert_int_equal(sr__pool_knobs_parse("no-inlin", &k), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "'no-inlin'"));

	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 8;
	o.num_threads = 2;
	o.batch_size = 4;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_TOPOLOGY; /* two threads on any machine */
	o.topology = "core:4 pu:1";
	assert_int_equal(setenv("STEPRING_POOL_KNOBS", "fast", 1), 0);
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(sr_last_error(), "STEPRING_POOL_KNOBS"));
	assert_int_equal(setenv("STEPRING_POOL_KNOBS", "no-batch-groups", 1), 0);
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(unsetenv("STEPRING_POOL_KNOBS"), 0);
	assert_int_equal(t_pool_info(p).batch_groups, 0); /* 4 tiles 8: groups but for the knob */
	sr_pool_destroy(p);
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(t_pool_info(p).batch_groups, 2);
	sr_pool_destroy(p);
}

/* send(NULL) re-sends the last batch once; anything already in flight,
 * or a duplicate in one call, is refused and nothing of that call is
 * queued. */
static void async_send_last_run(uint32_t knobs)
{
	sr_env_spec s = cnt_spec(3, 0);
	const uint32_t N = 8, B = 4;
	sr_pool *p = mk_k(&s, N, thr(2), B, SR_AUTORESET_NEXT_STEP, knobs);
	const sr_batch *b;
	int32_t act[8] = {0};
	uint32_t ids[8], e;

	assert_int_equal(sr_pool_reset(p, NULL), 0);
	assert_int_equal(sr_pool_recv(p, &b), 0);
	assert_int_equal(sr_pool_send(p, act, NULL, B), 0);
	assert_int_equal(sr_pool_send(p, act, NULL, B), -EINVAL); /* twice */
	assert_non_null(strstr(sr_last_error(), "in flight"));
	assert_int_equal(sr_pool_recv(p, &b), 0);
	/* one env of the batch explicitly, then the whole batch: refused */
	e = b->env_id[0];
	ids[0] = e;
	assert_int_equal(sr_pool_send(p, act, ids, 1), 0);
	assert_int_equal(sr_pool_send(p, act, NULL, B), -EINVAL);
	/* duplicate in one call: refused, and the other id was not queued */
	ids[0] = b->env_id[1];
	ids[1] = b->env_id[2];
	ids[2] = b->env_id[1];
	assert_int_equal(sr_pool_send(p, act, ids, 3), -EINVAL);
	ids[0] = b->env_id[1];
	ids[1] = b->env_id[2];
	ids[2] = b->env_id[3];
	assert_int_equal(sr_pool_send(p, act, ids, 3), 0);
	/* all 8 in flight again: batches keep coming, no env twice in one */
	for (int k = 0; k < 4; k++) {
		uint32_t seen[8] = {0};

		assert_int_equal(sr_pool_recv(p, &b), 0);
		for (uint32_t i = 0; i < B; i++)
			assert_int_equal(++seen[b->env_id[i]], 1);
		assert_int_equal(sr_pool_send(p, act, NULL, B), 0);
	}
	sr_pool_destroy(p);
}

static void test_async_send_last(void **st)
{
	(void)st;
	async_send_last_run(0);
}

/*
 * Async recv returns the oldest published rows in ring order: each batch
 * starts where the last one ended, the cursor moves exactly past it, and
 * (no same-step extras, batches that never straddle the ring's end) every
 * batch is a view of the ring's own slots.
 */
static void async_ring_order_run(uint32_t knobs)
{
	sr_env_spec s = cnt_spec(7, 0);
	const uint32_t N = 64, B = 16;
	sr_pool *p = mk_k(&s, N, thr(2), B, SR_AUTORESET_NEXT_STEP, knobs);
	sr_ring *r = t_pool_info(p).ring;
	const uint64_t mask = sr_ring_capacity(r) - 1;
	const sr_batch *b;
	int32_t act[16] = {0};
	uint64_t end;

	assert_int_equal(sr_pool_reset(p, NULL), 0);
	end = sr_ring_cursor(r);
	for (int it = 0; it < 300; it++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		assert_int_equal(b->n, B);
		assert_int_equal(sr_ring_cursor(r), end + B);
		assert_int_equal(b->first_seq, end);
		assert_ptr_equal(b->obs, sr_ring_obs_col(r) + (end & mask) * 3);
		assert_ptr_equal(b->env_id, sr_ring_env_id_col(r) + (end & mask));
		end += B;
		act[it % B] = it % 3;
		assert_int_equal(sr_pool_send(p, act, NULL, B), 0);
	}
	sr_pool_destroy(p);
}

static void test_async_ring_order(void **st)
{
	(void)st;
	async_ring_order_run(0);
}

static sr_pool *mk3(const sr_env_spec *s, uint32_t envs, uint32_t batch, uint32_t knobs);
static sr_pool *mk3_ar(const sr_env_spec *s, uint32_t envs, uint32_t batch, uint32_t knobs,
		       uint32_t autoreset);

/*
 * Async batch groups (batch_size divides num_envs): the env ids of group
 * @g in batch row order, from the workers' slices (each worker has
 * num_envs / G envs, its g-th run of batch_size / T of them in group g).
 */
static void group_ids(sr_pool *p, uint32_t G, uint32_t g, uint32_t *ids)
{
	uint32_t row = 0;

	for (uint32_t w = 0; w < t_pool_info(p).num_threads; w++) {
		sr_pool_worker_stats ws;
		uint32_t m;

		assert_int_equal(sr_pool_worker_stats_get(p, w, &ws), 0);
		assert_int_equal(ws.num_envs % G, 0);
		m = ws.num_envs / G;
		for (uint32_t j = 0; j < m; j++)
			ids[row++] = ws.first_env + g * m + j;
	}
	assert_int_equal(row, t_pool_info(p).batch_size);
}

/* Check batch @b: the rows are group @g (a view of the ring's own slots,
 * the cursor just past them), each env's counter at its expected @sum,
 * which then takes the action sent next (in @act). */
static void check_group(sr_pool *p, const sr_batch *b, uint32_t G, uint32_t g, double *sum,
			int32_t *act, int it)
{
	sr_ring *r = t_pool_info(p).ring;
	const uint64_t mask = sr_ring_capacity(r) - 1;
	uint32_t ids[64];

	group_ids(p, G, g, ids);
	assert_int_equal(b->n, t_pool_info(p).batch_size);
	assert_ptr_equal(b->obs, sr_ring_obs_col(r) + (b->first_seq & mask) * 3);
	assert_int_equal(sr_ring_cursor(r), b->first_seq + b->n);
	for (uint32_t i = 0; i < b->n; i++) {
		uint32_t e = b->env_id[i];

		assert_int_equal(e, ids[i]);
		assert_float_equal(b->obs[i * 3 + 2], (float)e, 0);
		assert_float_equal(b->obs[i * 3 + 1], (float)sum[e], 0);
		act[i] = (int32_t)((e + (uint32_t)it) % 3);
		sum[e] += act[i];
	}
}

/* Sends not yet answered by a recv, over @n envs. */
static uint32_t outstanding(const uint32_t *sent, const uint32_t *got, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t e = 0; e < n; e++)
		k += sent[e] - got[e];
	return k;
}

/*
 * Sending back each batch (env ids NULL or the same ids), batch k is
 * group k % G. Sending part of a batch leaves group mode: the groups in
 * flight come back as rows, nothing lost or repeated. Whole groups sent
 * with nothing in flight are group mode again, received in send order.
 */
static void groups_run(uint32_t knobs)
{
	sr_env_spec s = cnt_spec(1000000, 0);
	const uint32_t N = 64, B = 16, G = 4;
	sr_pool *p;
	const sr_batch *b;
	double sum[64] = {0};
	uint32_t ids[64], sent[64], got[64] = {0};
	int32_t act[64];
	sr_rng rng;

	p = mk_k(&s, N, thr(2), B, SR_AUTORESET_NEXT_STEP, knobs);
	assert_int_equal(sr_pool_reset(p, NULL), 0);
	for (int it = 0; it < 200; it++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		check_group(p, b, G, (uint32_t)it % G, sum, act, it);
		memcpy(ids, b->env_id, B * sizeof(*ids));
		assert_int_equal(sr_pool_send(p, act, it % 2 ? NULL : ids, B), 0);
	}
	/* Leave: half of a batch. Then rows, each env once per send. */
	assert_int_equal(sr_pool_recv(p, &b), 0);
	check_group(p, b, G, 200 % G, sum, act, 200);
	memcpy(ids, b->env_id, B * sizeof(*ids));
	assert_int_equal(sr_pool_send(p, act, ids, B / 2), 0);
	for (uint32_t e = 0; e < N; e++)
		sent[e] = 1;
	for (uint32_t i = B / 2; i < B; i++) {
		sum[ids[i]] -= act[i]; /* not sent */
		sent[ids[i]] = 0;
	}
	sr_rng_seed(&rng, 3, 0);
	for (int it = 0; it < 100; it++) {
		uint32_t k = 0;

		/* Keep at least a batch in flight: send what is not. */
		for (uint32_t e = 0; e < N; e++)
			if (got[e] == sent[e] && !(sr_rng_next(&rng) & 3))
				ids[k++] = e;
		for (uint32_t i = 0; i < k; i++) {
			act[i] = (int32_t)(sr_rng_next(&rng) % 3);
			sum[ids[i]] += act[i];
			sent[ids[i]]++;
		}
		if (k)
			assert_int_equal(sr_pool_send(p, act, ids, k), 0);
		if (outstanding(sent, got, N) < B)
			continue;
		assert_int_equal(sr_pool_recv(p, &b), 0);
		assert_int_equal(b->n, B);
		for (uint32_t i = 0; i < B; i++) {
			uint32_t e = b->env_id[i];

			assert_int_equal(++got[e], sent[e]);
			assert_float_equal(b->obs[i * 3 + 1], (float)sum[e], 0);
		}
	}
	/* Receive everything, then send whole groups by ids: group mode. */
	while (outstanding(sent, got, N) >= B) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		for (uint32_t i = 0; i < B; i++)
			assert_int_equal(++got[b->env_id[i]], sent[b->env_id[i]]);
	}
	{
		/* Less than a batch in flight: make it one with envs that
		 * are not, and receive it, so that nothing is in flight. */
		uint32_t k = 0, inflight = outstanding(sent, got, N);

		if (inflight) {
			for (uint32_t e = 0; e < N && k + inflight < B; e++)
				if (got[e] == sent[e])
					ids[k++] = e;
			for (uint32_t i = 0; i < k; i++) {
				act[i] = 0;
				sent[ids[i]]++;
			}
			assert_int_equal(sr_pool_send(p, act, ids, k), 0);
			assert_int_equal(sr_pool_recv(p, &b), 0);
			for (uint32_t i = 0; i < B; i++)
				assert_int_equal(++got[b->env_id[i]], sent[b->env_id[i]]);
		}
	}
	{
		static const uint32_t order[4] = {1, 3, 0, 2};

		for (uint32_t k = 0; k < G; k++) {
			group_ids(p, G, order[k], ids);
			for (uint32_t i = 0; i < B; i++)
				act[i] = 1;
			assert_int_equal(sr_pool_send(p, act, ids, B), 0);
			for (uint32_t i = 0; i < B; i++)
				sum[ids[i]] += 1;
		}
		for (int it = 0; it < 40; it++) {
			uint32_t g = order[it % 4];

			assert_int_equal(sr_pool_recv(p, &b), 0);
			check_group(p, b, G, g, sum, act, it);
			assert_int_equal(sr_pool_send(p, act, NULL, B), 0);
		}
	}
	sr_pool_destroy(p);
}

static void test_async_groups(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool *p;

	(void)st;
	groups_run(0);
	groups_run(SR__KNOB_NO_INLINE);
	/* Which pools have groups: the batch tiles the envs, and has a row
	 * for every thread. */
	p = mk(&s, 64, thr(2), 16, SR_AUTORESET_NEXT_STEP);
	assert_int_equal(t_pool_info(p).batch_groups, 4);
	sr_pool_destroy(p);
	p = mk(&s, 64, thr(2), 24, SR_AUTORESET_NEXT_STEP); /* 64 % 24 != 0 */
	assert_int_equal(t_pool_info(p).batch_groups, 0);
	sr_pool_destroy(p);
	p = mk(&s, 64, thr(2), 0, SR_AUTORESET_NEXT_STEP); /* sync */
	assert_int_equal(t_pool_info(p).batch_groups, 0);
	sr_pool_destroy(p);
	p = mk3(&s, 12, 2, 0); /* 2 rows, 3 threads */
	assert_int_equal(t_pool_info(p).batch_groups, 0);
	sr_pool_destroy(p);
	p = mk3(&s, 12, 3, 0); /* 3 threads, 4 envs each: 4 groups */
	assert_int_equal(t_pool_info(p).batch_groups, 4);
	sr_pool_destroy(p);
	p = mk3(&s, 12, 3, SR__KNOB_NO_BATCH_GROUPS); /* asked not to */
	assert_int_equal(t_pool_info(p).batch_groups, 0);
	sr_pool_destroy(p);
}

/*
 * Random sequences of async calls on a pool with batch groups: recv, sends
 * of the last batch (NULL or its ids), of a random set of the envs not in
 * flight in a random order, of a whole group by its ids, and async resets,
 * so that the pool goes in and out of group mode in every way. Each env
 * comes back exactly once per send, with its counter at the sum of the
 * actions sent to it since its last reset; recv with less than a batch in
 * flight is refused. With @same_step, episodes end when the sum reaches 5
 * (same-step extras in the ring): the row then has the reset obs and
 * final_obs the sum.
 */
static void mixed_run(uint32_t knobs, uint64_t seed, bool same_step)
{
	sr_env_spec s = cnt_spec(same_step ? 5 : 1000000, 0);
	enum { N = 24, B = 8, G = 3 };
	sr_pool *p;
	const sr_batch *b;
	double sum[N] = {0};
	uint32_t sent[N], got[N] = {0}, ids[N], last[B], nlast = 0, inflight = N;
	int32_t act[N];
	sr_rng rng;

	p = mk_k(&s, N, thr(2), B, same_step ? SR_AUTORESET_SAME_STEP : SR_AUTORESET_NEXT_STEP,
		 knobs);
	assert_int_equal(t_pool_info(p).batch_groups, G);
	sr_rng_seed(&rng, seed, 0);
	assert_int_equal(sr_pool_reset(p, NULL), 0);
	for (uint32_t e = 0; e < N; e++)
		sent[e] = 1;
	for (int it = 0; it < 3000; it++) {
		uint32_t op = (uint32_t)(sr_rng_next(&rng) % 100), n = 0;
		bool free_last = nlast > 0;

		for (uint32_t i = 0; i < nlast; i++)
			free_last &= sent[last[i]] == got[last[i]];
		if (op < 45) { /* recv */
			if (inflight < B) {
				assert_int_equal(sr_pool_recv(p, &b), -EINVAL);
				continue;
			}
			assert_int_equal(sr_pool_recv(p, &b), 0);
			assert_int_equal(b->n, B);
			for (uint32_t i = 0; i < B; i++) {
				uint32_t e = b->env_id[i];

				assert_true(e < N);
				assert_int_equal(++got[e], sent[e]);
				assert_int_equal(b->terminated[i], same_step && sum[e] >= 5);
				if (b->terminated[i]) {
					assert_float_equal(b->final_obs[i * 3 + 1], (float)sum[e], 0);
					assert_float_equal(b->final_obs[i * 3 + 2], (float)e, 0);
					sum[e] = 0;
				}
				assert_float_equal(b->obs[i * 3 + 1], (float)sum[e], 0);
				last[i] = e;
			}
			nlast = B;
			inflight -= B;
			continue;
		}
		if (op < 98 && op >= 45 + 30 && free_last) { /* the last batch again */
			memcpy(ids, last, sizeof(last));
			n = B;
		} else if (op < 98 && op >= 45 + 15) { /* a whole group by its ids */
			uint32_t g = (uint32_t)(sr_rng_next(&rng) % G);
			bool ok = true;

			group_ids(p, G, g, ids);
			for (uint32_t i = 0; i < B; i++)
				ok &= sent[ids[i]] == got[ids[i]];
			n = ok ? B : 0;
		} else if (op < 98) { /* envs not in flight, random order */
			for (uint32_t e = 0; e < N; e++)
				if (sent[e] == got[e] && (sr_rng_next(&rng) & 1))
					ids[n++] = e;
			for (uint32_t i = n; i > 1; i--) {
				uint32_t j = (uint32_t)(sr_rng_next(&rng) % i), t = ids[i - 1];
				ids[i - 1] = ids[j];
				ids[j] = t;
			}
		} else { /* async reset: what is in flight is dropped */
			assert_int_equal(sr_pool_reset(p, NULL), 0);
			for (uint32_t e = 0; e < N; e++) {
				sent[e] = got[e] + 1;
				sum[e] = 0;
			}
			inflight = N;
			nlast = 0;
			continue;
		}
		if (!n)
			continue;
		for (uint32_t i = 0; i < n; i++) {
			act[i] = (int32_t)(sr_rng_next(&rng) % 3);
			sum[ids[i]] += act[i];
			sent[ids[i]]++;
		}
		/* The last batch by NULL half the time. */
		if (n == B && !memcmp(ids, last, sizeof(last)) && (sr_rng_next(&rng) & 1))
			assert_int_equal(sr_pool_send(p, act, NULL, B), 0);
		else
			assert_int_equal(sr_pool_send(p, act, ids, n), 0);
		inflight += n;
	}
	sr_pool_destroy(p);
}

static void test_async_mixed(void **st)
{
	(void)st;
	mixed_run(0, 1, false);
	mixed_run(0, 2, true);
	mixed_run(SR__KNOB_NO_INLINE, 3, false);
	mixed_run(SR__KNOB_NO_INLINE, 4, true);
}

static void test_async_ready_no_inline(void **st)
{
	(void)st;
	async_ready_run(SR__KNOB_NO_INLINE);
}

/* Three workers, whatever the machine: a described topology (4 cores),
 * unbound. @batch 0: sync. mk3: next-step autoreset. */
static sr_pool *mk3_ar(const sr_env_spec *s, uint32_t envs, uint32_t batch, uint32_t knobs,
		       uint32_t autoreset)
{
	sr_pool_opts o;
	sr_pool *p;

	sr_pool_opts_init(&o);
	o.spec = s;
	o.num_envs = envs;
	o.num_threads = 3;
	o.batch_size = batch;
	o.autoreset = autoreset;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_TOPOLOGY;
	o.topology = "core:4 pu:1";
	assert_int_equal(sr__pool_create_knobs(&o, knobs, &p), 0);
	assert_int_equal(t_pool_info(p).num_threads, 3);
	return p;
}

static sr_pool *mk3(const sr_env_spec *s, uint32_t envs, uint32_t batch, uint32_t knobs)
{
	return mk3_ar(s, envs, batch, knobs, SR_AUTORESET_NEXT_STEP);
}

/*
 * Async fairness: sending back exactly the envs of each batch (the usual
 * loop), every env keeps coming back. Three workers, worker 0 on this
 * thread. Before, a recv that stepped worker 0 only while the batch could
 * not be formed, and took the first rows published, starved worker 0's
 * envs. Now recv returns rows in ring order (nothing published is passed
 * over) and worker 0 steps at least half its share every recv, so with
 * threads that keep up every env returns about every N / B batches; the
 * bounds leave room for a descheduled thread (sanitizers, a busy machine).
 */
static void fairness_run(uint32_t knobs)
{
	sr_env_spec s = cnt_spec(1000000, 0);
	const uint32_t N = 48, B = 12, K = 600;
	sr_pool *p = mk3(&s, N, B, knobs);
	const sr_batch *b;
	uint32_t count[48] = {0}, per_worker[3] = {0}, ids[48];
	int32_t act[48];

	assert_int_equal(sr_pool_reset(p, NULL), 0);
	for (uint32_t it = 1; it <= K; it++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		assert_int_equal(b->n, B);
		for (uint32_t i = 0; i < B; i++) {
			uint32_t e = b->env_id[i];
			assert_true(e < N);
			count[e]++;
			per_worker[e / (N / 3)]++;
			ids[i] = e;
			act[i] = 1;
		}
		assert_int_equal(sr_pool_send(p, act, ids, B), 0);
		/* The trainer's own work: with 3 workers on fewer CPUs, the
		 * threads get to run (a thread that never runs has nothing
		 * ready, and recv serves the ready envs). */
		nanosleep(&(struct timespec){0, 20000}, NULL);
	}
	/* K * B / N = 150 turns each on average; a worker's share 2400. The
	 * bug this guards against gave a worker no row at all. The bounds
	 * are loose because a worker thread that the kernel deschedules (4
	 * threads on 2 CPUs, next to other tests under ctest -j) publishes
	 * nothing meanwhile and the batches fill with the others' rows: a
	 * third of the share failed 2 runs in 15 with two copies of this test
	 * at once. */
	for (uint32_t w = 0; w < 3; w++)
		assert_true(per_worker[w] >= K * B / 3 / 8);
	for (uint32_t e = 0; e < N; e++)
		assert_true(count[e] >= K * B / N / 10);
	{
		/* The sends are timed (the breakdown's send share). */
		sr_pool_stats ps;
		assert_int_equal(sr_pool_stats_get(p, &ps), 0);
		assert_true(ps.ns_send > 0);
	}
	sr_pool_destroy(p);
}

/* Fewer batch rows than workers: nobody is left out. */
static void small_batch_run(void)
{
	sr_env_spec s = cnt_spec(1000000, 0);
	const uint32_t N = 12, B = 2, K = 600;
	sr_pool *p = mk3(&s, N, B, 0);
	const sr_batch *b;
	uint32_t count[12] = {0}, ids[2];
	int32_t act[2] = {1, 1};

	assert_int_equal(sr_pool_reset(p, NULL), 0);
	for (uint32_t it = 0; it < K; it++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		for (uint32_t i = 0; i < B; i++) {
			ids[i] = b->env_id[i];
			count[ids[i]]++;
		}
		assert_int_equal(sr_pool_send(p, act, ids, B), 0);
		nanosleep(&(struct timespec){0, 20000}, NULL); /* see fairness_run */
	}
	for (uint32_t e = 0; e < N; e++)
		assert_true(count[e] >= K * B / N / 4);
	sr_pool_destroy(p);
}

static void test_async_fair(void **st)
{
	fairness_run(0);
	fairness_run(SR__KNOB_NO_INLINE);
	small_batch_run();
}

/* The fairness and ring-order tests divide their envs into batch groups;
 * the same with per-env queues only. */
static void test_async_no_groups(void **st)
{
	(void)st;
	async_ring_order_run(SR__KNOB_NO_BATCH_GROUPS);
	async_send_last_run(SR__KNOB_NO_BATCH_GROUPS);
	fairness_run(SR__KNOB_NO_BATCH_GROUPS);
}

/* Async: each env's trajectory depends only on its own actions, so it
 * matches the sync pool's trajectory for the same env and seed. */
static void test_async_matches_sync(void **st)
{
	sr_env_spec cp;
	const uint32_t N = 12, B = 4, K = 60;
	sr_pool_opts o;
	sr_pool *ps, *pa;
	const sr_batch *b;
	float *ref = calloc((size_t)N * (K + 1) * 4, sizeof(float));
	uint32_t cnt[12] = {0};
	int32_t act[12];
	sr_rng rs[12], ra[12];
	uint32_t done = 0;

	if (sr_env_find("CartPole-v1", &cp)) {
		free(ref);
		skip();
	}
	sr_pool_opts_init(&o);
	o.spec = &cp;
	o.num_envs = N;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_SEED;
	o.seed = 9;
	assert_int_equal(sr_pool_create(&o, &ps), 0);
	o.num_threads = thr(2);
	o.batch_size = B;
	assert_int_equal(sr_pool_create(&o, &pa), 0);
	for (uint32_t i = 0; i < N; i++) {
		sr_rng_seed(&rs[i], 3, i);
		sr_rng_seed(&ra[i], 3, i);
	}
	assert_int_equal(sr_pool_reset(ps, &b), 0);
	for (uint32_t t = 0; t <= K; t++) {
		memcpy(ref + (size_t)t * N * 4, b->obs, (size_t)N * 4 * sizeof(float));
		if (t == K)
			break;
		for (uint32_t i = 0; i < N; i++)
			act[i] = (int32_t)(sr_rng_next(&rs[i]) % 2);
		assert_int_equal(sr_pool_step(ps, act, &b), 0);
	}
	assert_int_equal(sr_pool_reset(pa, NULL), 0);
	while (done < N) {
		uint32_t ids[12], k = 0;
		assert_int_equal(sr_pool_recv(pa, &b), 0);
		for (uint32_t i = 0; i < b->n; i++) {
			uint32_t e = b->env_id[i];
			assert_memory_equal(b->obs + i * 4, ref + ((size_t)cnt[e] * N + e) * 4,
					    4 * sizeof(float));
			if (++cnt[e] > K) {
				done++;
				continue;
			}
			act[k] = (int32_t)(sr_rng_next(&ra[e]) % 2);
			ids[k++] = e;
		}
		if (done < N && k)
			assert_int_equal(sr_pool_send(pa, act, ids, k), 0);
		if (done < N) {
			/* envs past K still need to go around: park them with action 0
			 * never; instead stop when too few remain in flight */
			uint32_t inflight = 0;
			for (uint32_t e = 0; e < N; e++)
				inflight += cnt[e] <= K;
			if (inflight < B)
				break;
		}
	}
	sr_pool_destroy(pa);
	sr_pool_destroy(ps);
	free(ref);
}

static void test_stats_shm(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;
	char name[64], path[96];
	int32_t act[4] = {1, 1, 1, 1};
	const struct sr_stats_shm *sh;
	int fd;

	snprintf(name, sizeof(name), "sr-test-pool-%d", (int)getpid());
	snprintf(path, sizeof(path), "/%s.stats", name);
	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 4;
	o.num_threads = thr(2);
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_RING_NAME;
	o.ring_name = name;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (int i = 0; i < 5; i++) {
		struct timespec ts = {0, 200000}; /* the caller's own work between steps */
		nanosleep(&ts, NULL);
		assert_int_equal(sr_pool_step(p, act, &b), 0);
	}
	fd = shm_open(path, O_RDONLY, 0);
	assert_true(fd >= 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(sh != MAP_FAILED);
	assert_int_equal(sh->magic, SR_STATS_MAGIC);
	assert_int_equal(sh->num_envs, 4);
	assert_int_equal(sh->state, SR_STATS_STATE_RUNNING);
	assert_string_equal(sh->env_id, "Counter-v0");
	assert_true(sh->workers[0].steps >= 4);
	/* worker 0 is the calling thread: the time between calls is idle */
	assert_true(sh->workers[0].ns_idle >= 4 * 200000);
	sr_pool_destroy(p);
	assert_int_equal(sh->state, SR_STATS_STATE_ENDED);
	munmap((void *)sh, sizeof(*sh));
	assert_true(shm_open(path, O_RDONLY, 0) < 0); /* unlinked */
}

static void test_many_envs_threads(void **st)
{
	sr_env_spec s = cnt_spec(4, 9);
	/* more threads than envs: capped */
	sr_pool *p = mk(&s, 1, thr(2), 0, SR_AUTORESET_NEXT_STEP);
	const sr_batch *b;
	int32_t a = 1;

	assert_int_equal(t_pool_info(p).num_threads, 1);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(sr_pool_step(p, &a, &b), 0);
	sr_pool_destroy(p);
}

/* Async + SAME_STEP: done rows show the reset obs, final_obs rows the
 * final obs (gathered in batch order). @N envs, batch @B: with B dividing
 * N, batch groups (the same-step extras land between the groups' slots).
 * At iteration @split (< 0: never) only half of the batch is sent, the
 * rest with the next one: the pool leaves group mode with a group and
 * its extras still in flight, and goes on by rows. */
static void final_obs_async(uint32_t N, uint32_t B, int split)
{
	sr_env_spec s = cnt_spec(4, 0);
	sr_pool *p = mk(&s, N, thr(2), B, SR_AUTORESET_SAME_STEP);
	const sr_batch *b;
	int32_t act[32];
	uint32_t ids[32], seen_done = 0, held = 0, held_ids[16];
	int32_t held_act[16];
	uint32_t sent[16], got[16] = {0};
	double sum[16] = {0};

	for (uint32_t e = 0; e < N; e++)
		sent[e] = 1; /* the reset */

	assert_int_equal(sr_pool_reset(p, NULL), 0);
	for (int it = 0; it < 200; it++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		assert_non_null(b->final_obs);
		for (uint32_t i = 0; i < b->n; i++) {
			uint32_t e = b->env_id[i];
			if (b->terminated[i]) {
				/* final obs: the episode's sum reached 4; obs is a reset */
				assert_float_equal(b->final_obs[i * 3 + 1], (float)sum[e] + b->reward[i], 0);
				assert_true(b->final_obs[i * 3 + 1] >= 4.0f);
				assert_float_equal(b->final_obs[i * 3 + 2], (float)e, 0);
				assert_float_equal(b->obs[i * 3 + 1], 0.0f, 0);
				sum[e] = 0;
				seen_done++;
			} else {
				sum[e] = b->obs[i * 3 + 1];
			}
			assert_int_equal(++got[e], sent[e]);
			ids[i] = e;
			act[i] = (int32_t)((e + it) % 3);
		}
		{
			uint32_t n = b->n, k = held;

			/* the rows held back last time go with this batch */
			for (uint32_t j = 0; j < k; j++) {
				ids[n + j] = held_ids[j];
				act[n + j] = held_act[j];
			}
			n += k;
			held = 0;
			if (it == split) {
				held = b->n / 2;
				n -= held;
				memcpy(held_ids, ids + n, held * sizeof(*ids));
				memcpy(held_act, act + n, held * sizeof(*act));
			}
			for (uint32_t j = 0; j < n; j++)
				sent[ids[j]]++;
			assert_int_equal(sr_pool_send(p, act, ids, n), 0);
		}
	}
	assert_true(seen_done > 10);
	sr_pool_destroy(p);
}

/* final_obs_async, then NEXT_STEP + SR_POOL_F_FINAL_OBS in sync:
 * final_obs row = the obs of the finishing step. */
static void test_final_obs(void **st)
{
	sr_env_spec s = cnt_spec(4, 0);
	sr_pool *p;
	const sr_batch *b;

	(void)st;
	final_obs_async(9, 4, -1);
	final_obs_async(16, 8, -1);
	final_obs_async(16, 8, 50);
	{
		sr_pool_opts o;
		int32_t a2[2] = {2, 2};
		sr_pool_opts_init(&o);
		o.spec = &s;
		o.num_envs = 2;
		o.num_threads = 1;
		o.bind = SR_BIND_NONE;
		o.flags = SR_POOL_F_FINAL_OBS;
		assert_int_equal(sr_pool_create(&o, &p), 0);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		assert_non_null(b->final_obs);
		assert_int_equal(sr_pool_step(p, a2, &b), 0);
		assert_int_equal(sr_pool_step(p, a2, &b), 0);
		assert_int_equal(b->terminated[1], 1);
		assert_memory_equal(b->final_obs + 3, b->obs + 3, 3 * sizeof(float));
		sr_pool_destroy(p);
	}
}

/* SR_POOL_F_BIND_CALLER pins the calling thread where worker 0 goes. */
static void test_bind_caller(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p;
	cpu_set_t before, after;
	const sr_batch *b;

	assert_int_equal(sched_getaffinity(0, sizeof(before), &before), 0);
	if (!CPU_ISSET(0, &before))
		skip();
	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 4;
	o.num_threads = 1;
	o.bind = SR_BIND_CORE;
	o.flags = SR_POOL_F_BIND_CALLER | SR_POOL_F_CPUSET;
	o.cpuset = "0";
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(sched_getaffinity(0, sizeof(after), &after), 0);
	assert_int_equal(CPU_COUNT(&after), 1);
	assert_true(CPU_ISSET(0, &after));
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(worker_cpu(p, 0), 0);
	assert_int_equal(worker_cpu(p, 1), -EINVAL);
	sr_pool_destroy(p);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);
}

/* ---- sync rebalancing ---- */

/* The counter env, with the envs from params[1] on busy for 100 us a step. */
static void slow_step(const sr_env_spec *s, void *st, size_t n, const void *actions, float *obs,
		      double *reward, uint8_t *term)
{
	const struct cnt *c = st;

	cnt_step(s, st, n, actions, obs, reward, term);
	for (size_t i = 0; i < n; i++) {
		struct timespec a, b;

		if (c[i].index < s->params[1])
			continue;
		clock_gettime(CLOCK_MONOTONIC, &a);
		do
			clock_gettime(CLOCK_MONOTONIC, &b);
		while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 100000);
	}
}

/* Two batches with the same rows, bit for bit. */
static void same_batch(const sr_batch *x, const sr_batch *y)
{
	assert_int_equal(x->n, y->n);
	assert_memory_equal(x->obs, y->obs, (size_t)x->n * 3 * sizeof(float));
	assert_memory_equal(x->reward, y->reward, x->n * sizeof(float));
	assert_memory_equal(x->terminated, y->terminated, x->n);
	assert_memory_equal(x->truncated, y->truncated, x->n);
	assert_memory_equal(x->env_id, y->env_id, x->n * sizeof(uint32_t));
	for (uint32_t i = 0; i < x->n; i++)
		if (x->terminated[i] || x->truncated[i])
			assert_memory_equal(x->final_obs + 3 * i, y->final_obs + 3 * i,
					    3 * sizeof(float));
}

/*
 * Worker 2's envs cost 100 us a step, the others' next to nothing: the
 * boundaries move towards worker 2 (rows), as far as a quarter of a share
 * (how far worker 0, the trainer thread, takes rows depends on its own
 * send and collect time in async mode, and on the machine), and every
 * batch (obs, reward, flags, env ids, final obs) and the episode
 * statistics are those of the same pool with the no-rebalance knob.
 * @batch 0: sync (shares: the slices); 24: async, two batch groups (each
 * worker's 8 envs of a group).
 */
static void rebalance_run(uint32_t batch)
{
	sr_env_spec s = cnt_spec(5, 7);
	const uint32_t N = 48, K = 300;
	sr_pool *a, *b;
	const sr_batch *ba, *bb;
	sr_pool_worker_stats ws;
	sr_pool_stats sa, sb;
	int32_t act[48];
	uint32_t rows[3], sum = 0;

	s.step = slow_step;
	s.params[1] = 32; /* worker 2 owns envs 32-47 */
	a = mk3_ar(&s, N, batch, 0, SR_AUTORESET_SAME_STEP);
	b = mk3_ar(&s, N, batch, SR__KNOB_NO_REBALANCE, SR_AUTORESET_SAME_STEP);
	assert_int_equal(t_pool_info(a).batch_groups, batch ? 2 : 0);
	assert_int_equal(sr_pool_reset(a, &ba), 0);
	assert_int_equal(sr_pool_reset(b, &bb), 0);
	for (uint32_t k = 0; k < K; k++) {
		for (uint32_t i = 0; i < N; i++)
			act[i] = (int32_t)((i * 7 + k * 3 + k / 5) % 3);
		if (batch) {
			assert_int_equal(sr_pool_recv(a, &ba), 0);
			assert_int_equal(sr_pool_recv(b, &bb), 0);
			assert_int_equal(ba->n, batch);
			same_batch(ba, bb);
			assert_int_equal(sr_pool_send(a, act, NULL, batch), 0);
			assert_int_equal(sr_pool_send(b, act, NULL, batch), 0);
		} else {
			assert_int_equal(sr_pool_step(a, act, &ba), 0);
			assert_int_equal(sr_pool_step(b, act, &bb), 0);
			assert_int_equal(ba->n, N);
			same_batch(ba, bb);
		}
	}
	for (uint32_t w = 0; w < 3; w++) {
		assert_int_equal(sr_pool_worker_stats_get(a, w, &ws), 0);
		assert_int_equal(ws.num_envs, 16);
		rows[w] = ws.rows;
		sum += ws.rows;
		assert_int_equal(sr_pool_worker_stats_get(b, w, &ws), 0);
		assert_int_equal(ws.rows, ws.num_envs);
	}
	assert_int_equal(sum, N);
	/* At most a quarter of a share moves at each boundary (sync: 4 of
	 * 16 envs; groups: 2 of 8, in each of the 2 groups). */
	assert_true(rows[2] < 16 && rows[2] >= 12);
	assert_true(rows[0] >= 12 && rows[0] <= 20);
	assert_int_equal(sr_pool_stats_get(a, &sa), 0);
	assert_int_equal(sr_pool_stats_get(b, &sb), 0);
	assert_true(sa.episodes > 0);
	if (!batch) {
		/* Async: the worker threads may have stepped the next group
		 * already, so only sync counts match exactly. */
		assert_int_equal(sa.episodes, sb.episodes);
		assert_int_equal(sa.steps, sb.steps);
		assert_true(sa.mean_return == sb.mean_return);
		assert_true(sa.mean_length == sb.mean_length);
	}
	sr_pool_destroy(a);
	sr_pool_destroy(b);
}

static void test_rebalance(void **st)
{
	(void)st;
	rebalance_run(0);
}

static void test_rebalance_groups(void **st)
{
	(void)st;
	rebalance_run(24);
}

/* sr_pool_worker_stats_get: each worker's slice and counters, which add
 * up to the pool's. */
static void test_worker_stats(void **st)
{
	sr_env_spec s = cnt_spec(1000000, 0);
	const uint32_t N = 10, K = 50;
	sr_pool *p = mk3(&s, N, 0, 0);
	const sr_batch *b;
	sr_pool_stats all;
	sr_pool_worker_stats ws;
	int32_t act[10] = {0};
	uint64_t steps = 0, env = 0, ring = 0;
	uint32_t next = 0;

	(void)st;
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t k = 0; k < K; k++)
		assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(sr_pool_stats_get(p, &all), 0);
	for (uint32_t w = 0; w < 3; w++) {
		assert_int_equal(sr_pool_worker_stats_get(p, w, &ws), 0);
		/* Contiguous slices covering every env, sizes 4, 3, 3. */
		assert_int_equal(ws.first_env, next);
		assert_int_equal(ws.num_envs, w == 0 ? 4 : 3);
		next += ws.num_envs;
		/* Sync: every worker steps its whole slice each batch (and the
		 * reset counts). */
		assert_int_equal(ws.steps, (uint64_t)ws.num_envs * (K + 1));
		assert_true(ws.ns_env_step > 0);
		assert_int_equal(ws.cpu, -ENOENT); /* bind none */
		assert_int_equal(ws.rows, ws.num_envs); /* 3-4 envs: nothing moves */
		steps += ws.steps;
		env += ws.ns_env_step;
		ring += ws.ns_ring_publish;
	}
	assert_int_equal(next, N);
	assert_int_equal(steps, all.steps);
	assert_int_equal(env, all.ns_env_step);
	assert_int_equal(ring, all.ns_ring_publish);
	assert_int_equal(sr_pool_worker_stats_get(p, 3, &ws), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "worker 3"));
	assert_int_equal(sr_pool_worker_stats_get(p, 0, NULL), -EINVAL);
	assert_int_equal(sr_pool_worker_stats_get(NULL, 0, &ws), -EINVAL);
	sr_pool_destroy(p);
}

/* sr_pool_worker_stats.cpu: where each worker runs, and when it is not one
 * CPU. */
static void test_worker_cpu(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p;
	cpu_set_t before;
	int c0, c1;

	(void)st;
	assert_int_equal(sched_getaffinity(0, sizeof(before), &before), 0);
	if (CPU_COUNT(&before) < 2)
		skip();
	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 4;
	o.num_threads = 2;
	o.bind = SR_BIND_CORE;
	o.flags = SR_POOL_F_BIND_CALLER;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	c0 = worker_cpu(p, 0);
	c1 = worker_cpu(p, 1);
	assert_true(c0 >= 0 && c1 >= 0 && c0 != c1);
	assert_true(CPU_ISSET(c0, &before) && CPU_ISSET(c1, &before));
	assert_int_equal(worker_cpu(p, 2), -EINVAL);
	assert_int_equal(worker_cpu(NULL, 0), -EINVAL);
	sr_pool_destroy(p);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);

	/* The calling thread, not bound: no CPU to report. */
	o.flags = 0;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(worker_cpu(p, 0), -ENOENT);
	assert_true(worker_cpu(p, 1) >= 0);
	sr_pool_destroy(p);

	/* bind none: nobody is. */
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_BIND_CALLER;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(worker_cpu(p, 0), -ENOENT);
	assert_int_equal(worker_cpu(p, 1), -ENOENT);
	sr_pool_destroy(p);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);
}

/* SR_POOL_F_FIRST_ENV: a pool of envs [4, 10) of a run steps exactly like
 * those envs of one pool of all 10 (seeded from the global index), and
 * only that index changes (a pool without it is envs [0, 6)). */
static void test_first_env(void **st)
{
	sr_pool_opts o;
	sr_pool *a = NULL, *b = NULL, *c = NULL;
	const sr_batch *ba, *bb, *bc;
	int32_t act[10];
	bool differs = false;

	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.flags = SR_POOL_F_SEED;
	o.seed = 11;
	o.bind = SR_BIND_NONE;
	o.num_threads = 1;
	o.num_envs = 10;
	assert_int_equal(sr_pool_create(&o, &a), 0);
	o.num_envs = 6;
	assert_int_equal(sr_pool_create(&o, &c), 0);
	o.flags |= SR_POOL_F_FIRST_ENV;
	o.first_env = 4;
	assert_int_equal(sr_pool_create(&o, &b), 0);
	assert_int_equal(sr_pool_reset(a, &ba), 0);
	assert_int_equal(sr_pool_reset(b, &bb), 0);
	assert_int_equal(sr_pool_reset(c, &bc), 0);
	for (int t = 0; t < 300; t++) {
		assert_int_equal(bb->n, 6);
		for (uint32_t i = 0; i < 6; i++) {
			assert_int_equal(bb->env_id[i], i); /* ids stay local */
			assert_memory_equal(bb->obs + i * 4, ba->obs + (4 + i) * 4, 4 * sizeof(float));
			assert_int_equal(bb->terminated[i], ba->terminated[4 + i]);
			differs |= memcmp(bc->obs + i * 4, bb->obs + i * 4, 4 * sizeof(float)) != 0;
		}
		for (int e = 0; e < 10; e++)
			act[e] = (t * 7 + e * 3) % 5 < 2;
		assert_int_equal(sr_pool_step(a, act, &ba), 0);
		assert_int_equal(sr_pool_step(b, act + 4, &bb), 0);
		assert_int_equal(sr_pool_step(c, act + 4, &bc), 0);
	}
	assert_true(differs);
	sr_pool_destroy(a);
	sr_pool_destroy(b);
	sr_pool_destroy(c);
	o.first_env = UINT64_MAX - 2;
	assert_int_equal(sr_pool_create(&o, &b), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "overflows"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_first_env),
		cmocka_unit_test(test_next_step),
		cmocka_unit_test(test_same_step),
		cmocka_unit_test(test_disabled_and_truncation),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_action_validation),
		cmocka_unit_test(test_reset_ex),
		cmocka_unit_test(test_default_threads),
		cmocka_unit_test(test_knobs),
		cmocka_unit_test(test_async_ready),
		cmocka_unit_test(test_async_ready_no_inline),
		cmocka_unit_test(test_async_send_last),
		cmocka_unit_test(test_async_fair),
		cmocka_unit_test(test_async_ring_order),
		cmocka_unit_test(test_async_groups),
		cmocka_unit_test(test_async_mixed),
		cmocka_unit_test(test_async_no_groups),
		cmocka_unit_test(test_async_matches_sync),
		cmocka_unit_test(test_stats_shm),
		cmocka_unit_test(test_many_envs_threads),
		cmocka_unit_test(test_bind_caller),
		cmocka_unit_test(test_worker_cpu),
		cmocka_unit_test(test_worker_stats),
		cmocka_unit_test(test_rebalance),
		cmocka_unit_test(test_rebalance_groups),
		cmocka_unit_test(test_final_obs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

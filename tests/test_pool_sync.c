/* Pool tests, sync stepping: options, autoreset semantics against a
 * hand-made env, determinism across thread counts, action validation,
 * reset_ex, a pool of a run's envs [first, first + n). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/pool.h"
#include "helpers.h"
#include "pool_env.h"

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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * What the pool tests (test_pool_sync.c, test_pool_async.c,
 * test_pool_workers.c) share: the hand-made counter env and pools built
 * from it. Include after <cmocka.h> and helpers.h.
 */
#ifndef SR_TEST_POOL_ENV_H
#define SR_TEST_POOL_ENV_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stepring/pool.h"
#include "pool_internal.h" /* sr__pool_create_knobs, SR__KNOB_* */

/* ---- hand-made env: x starts at 10 * index (from the seed call), each
 * step adds the action (0, 1 or 2) and rewards it; terminated when the
 * episode's sum reaches params[0]. obs = [x, sum, index]. ---- */
struct cnt {
	uint64_t index;
	double x, sum;
	uint64_t resets;
};

static inline void cnt_seed(const sr_env_spec *s, void *st, size_t n, uint64_t seed,
			    uint64_t first)
{
	struct cnt *c = st;
	for (size_t i = 0; i < n; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].index = first + i;
	}
}

static inline void cnt_obs(const sr_env_spec *s, const void *st, float *obs)
{
	const struct cnt *c = st;
	obs[0] = (float)c->x;
	obs[1] = (float)c->sum;
	obs[2] = (float)c->index;
}

static inline void cnt_reset(const sr_env_spec *s, void *st, size_t n, float *obs)
{
	struct cnt *c = st;
	for (size_t i = 0; i < n; i++) {
		c[i].resets++;
		c[i].x = 10.0 * (double)c[i].index + (double)c[i].resets;
		c[i].sum = 0;
		cnt_obs(s, &c[i], obs + 3 * i);
	}
}

static inline void cnt_step(const sr_env_spec *s, void *st, size_t n, const void *actions,
			    float *obs, double *reward, uint8_t *term)
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

static inline sr_env_spec cnt_spec(uint64_t term_at, uint32_t max_steps)
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
static inline sr_pool *mk_k(const sr_env_spec *spec, uint32_t envs, uint32_t threads,
			    uint32_t batch, uint32_t autoreset, uint32_t knobs)
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

static inline sr_pool *mk(const sr_env_spec *spec, uint32_t envs, uint32_t threads,
			  uint32_t batch, uint32_t autoreset)
{
	return mk_k(spec, envs, threads, batch, autoreset, 0);
}

/* Three workers, whatever the machine: a described topology (4 cores),
 * unbound. @batch 0: sync. mk3: next-step autoreset. */
static inline sr_pool *mk3_ar(const sr_env_spec *s, uint32_t envs, uint32_t batch,
			      uint32_t knobs, uint32_t autoreset)
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

static inline sr_pool *mk3(const sr_env_spec *s, uint32_t envs, uint32_t batch,
			   uint32_t knobs)
{
	return mk3_ar(s, envs, batch, knobs, SR_AUTORESET_NEXT_STEP);
}

/* Threads the machine allows: 3-thread tests need 3 PUs for bind none too. */
static inline uint32_t cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (uint32_t)n : 1;
}

static inline uint32_t thr(uint32_t want)
{
	return want <= cpus() ? want : cpus();
}

#endif

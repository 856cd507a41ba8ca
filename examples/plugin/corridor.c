/*
 * A minimal stepring env plugin: Corridor-v0.
 *
 * The agent stands on one of 10 cells; action 0 steps left, 1 steps right.
 * Reaching the last cell ends the episode with reward +1; every other step
 * costs 0.01. It needs only <stepring/env.h> (the RNG there is header-only)
 * and exports one symbol, SR_ENV_PLUGIN_SYMBOL, with default visibility.
 *
 * Build: cc -O2 -shared -fPIC -I<prefix>/include corridor.c -o corridor.so
 * Use:   stepring envs --plugin ./corridor.so
 *        sr_env_load_plugin("./corridor.so", &spec)
 */
#include <stepring/env.h>

#ifndef CORRIDOR_ABI_VERSION /* the wrong-ABI and v1 test builds override it */
#define CORRIDOR_ABI_VERSION SR_ENV_ABI_VERSION
#endif
/* A spec built for ABI version 1 ends where the v2 tail starts. */
#if CORRIDOR_ABI_VERSION == 1
#define CORRIDOR_SPEC_SIZE SR_ENV_SPEC_SIZE_V1
#else
#define CORRIDOR_SPEC_SIZE sizeof(sr_env_spec)
#endif

#define CELLS 10

/* Plain data only: the runtime copies, checkpoints and moves it. */
struct corridor {
	sr_rng rng;   /* the instance's own RNG: results never depend on threads */
	int64_t pos;
};

static const float obs_low[1] = {0.0f};
static const float obs_high[1] = {CELLS - 1};

static void corridor_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
			  uint64_t first_index)
{
	struct corridor *s = states;

	for (size_t i = 0; i < n; i++)
		sr_rng_seed(&s[i].rng, seed, first_index + i);
}

static void corridor_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	struct corridor *s = states;

	for (size_t i = 0; i < n; i++) {
		s[i].pos = (int64_t)(sr_rng_next(&s[i].rng) % (CELLS / 2));
		obs[i] = (float)s[i].pos;
	}
}

static void corridor_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
			  float *obs, double *reward, uint8_t *terminated)
{
	struct corridor *s = states;
	const int32_t *act = actions;

	for (size_t i = 0; i < n; i++) {
		if (act[i] == 1 && s[i].pos < CELLS - 1)
			s[i].pos++;
		else if (act[i] == 0 && s[i].pos > 0)
			s[i].pos--;
		terminated[i] = s[i].pos == CELLS - 1;
		reward[i] = terminated[i] ? 1.0 : -0.01;
		obs[i] = (float)s[i].pos;
	}
}

static void corridor_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	obs[0] = (float)((const struct corridor *)state)->pos;
}

static void corridor_get_phys(const sr_env_spec *spec, const void *state, double *phys)
{
	phys[0] = (double)((const struct corridor *)state)->pos;
}

static void corridor_set_phys(const sr_env_spec *spec, void *state, const double *phys)
{
	((struct corridor *)state)->pos = (int64_t)phys[0];
}

__attribute__((visibility("default"))) const sr_env_spec sr_env_plugin_spec = {
	.abi_version = CORRIDOR_ABI_VERSION,
	.spec_size = CORRIDOR_SPEC_SIZE,
	.id = "Corridor-v0",
	.name = "corridor",
	.state_size = sizeof(struct corridor),
	.max_episode_steps = 100,
	.obs_ndim = 1,
	.obs_shape = {1},
	.obs_dim = 1,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 2,
	.act_dim = 1,
	.n_phys = 1,
	.seed = corridor_seed,
	.reset = corridor_reset,
	.step = corridor_step,
	.observe = corridor_observe,
	.get_phys = corridor_get_phys,
	.set_phys = corridor_set_phys,
};

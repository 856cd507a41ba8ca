/*
 * spin: a synthetic env whose step costs a chosen amount of CPU time, for
 * benchmarks ("spin:cost_us=50,obs_dim=64,ep_len=1000").
 *
 * Parameters (spec->params): cost_us (default 0), obs_dim (16), ep_len
 * (1000), act_n (2), cost_ns (0), rng (stepring; numpy draws NumPy's PCG64
 * stream of seed + index instead, as every built-in env can: envs.h). Each step burns cost_us microseconds plus
 * cost_ns nanoseconds (an env as cheap as CartPole's 30-40 ns, for
 * benchmarks of the runtime's own cost per step) of dependent
 * floating-point arithmetic: the iterations per microsecond are calibrated
 * once per process (lazily, pthread_once). The obs never depends on the
 * calibration: it is drawn from the instance RNG (one 64-bit draw per step,
 * mixed with the action, expanded by an LCG), so trajectories are the same
 * on every machine. An episode terminates after ep_len steps; there is no
 * time limit (max_episode_steps = 0), so the runtime's truncation stays out
 * of the way.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sr_base.h"
#include "envs.h"

enum { P_COST_US, P_OBS_DIM, P_EP_LEN, P_ACT_N, P_COST_NS }; /* and SR__P_RNG (5) */
_Static_assert((int)P_COST_NS < (int)SR__P_RNG, "spin's parameters leave the RNG's slot free");

struct spin {
	sr_rng rng;
	uint64_t t;   /* steps since reset */
	uint64_t pad;
};

static pthread_once_t calib_once = PTHREAD_ONCE_INIT;
static double iters_per_us; /* written once under calib_once, read after it */

/* The busy loop: a dependent multiply-add chain the compiler must keep.
 * The empty asms hide the start value (else constant propagation finds the
 * fixed point and deletes the loop) and consume the result. */
static inline void burn(uint64_t iters)
{
	double acc = 1.0;

	__asm__ volatile("" : "+x"(acc));

	for (uint64_t i = 0; i < iters; i++)
		acc = acc * 0.9999999 + 1e-7;
	__asm__ volatile("" : : "x"(acc));
}

static void calibrate(void)
{
	uint64_t iters = 1u << 14, best = UINT64_MAX;

	/* Grow until one run takes >= 1 ms, then keep the fastest of 5 runs
	 * (the least disturbed by other threads). */
	for (;;) {
		uint64_t t0 = sr__now_ns();
		burn(iters);
		if (sr__now_ns() - t0 >= 1000000 || iters >= (1ull << 34))
			break;
		iters *= 2;
	}
	for (int r = 0; r < 5; r++) {
		uint64_t t0 = sr__now_ns(), dt;
		burn(iters);
		dt = sr__now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	iters_per_us = (double)iters * 1000.0 / (double)(best ? best : 1);
}

double sr__spin_iters_per_us(void)
{
	pthread_once(&calib_once, calibrate);
	return iters_per_us;
}

static inline void write_obs(uint64_t x, uint32_t obs_dim, float *obs)
{
	for (uint32_t k = 0; k < obs_dim; k++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		obs[k] = (float)(int32_t)(x >> 32) * 0x1p-31f; /* [-1, 1) */
	}
}

static void spin_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		      uint64_t first_index)
{
	struct spin *s = states;
	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++) {
		sr__rng_slot_seed(np, &s[i].rng, seed, first_index + i);
		s[i].t = 0;
		s[i].pad = 0;
	}
}

static void spin_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	struct spin *s = states;
	uint32_t d = (uint32_t)spec->params[P_OBS_DIM];
	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++) {
		s[i].t = 0;
		write_obs(sr__rng_slot_next(np, &s[i].rng), d, obs + (size_t)d * i);
	}
}

/* One loop per RNG kind (@np is a constant in each call below), so the
 * default one draws as it did before rng=numpy existed. */
static inline __attribute__((always_inline)) void
spin_step_rng(const sr_env_spec *spec, void *states, size_t n, const void *actions, float *obs,
	      double *reward, uint8_t *terminated, bool np)
{
	struct spin *s = states;
	const int32_t *act = actions;
	uint32_t d = (uint32_t)spec->params[P_OBS_DIM];
	uint64_t ep_len = spec->params[P_EP_LEN], iters = 0;

	if (spec->params[P_COST_US] || spec->params[P_COST_NS])
		iters = (uint64_t)(((double)spec->params[P_COST_US] +
				    (double)spec->params[P_COST_NS] / 1000.0) *
				   sr__spin_iters_per_us());
	for (size_t i = 0; i < n; i++) {
		uint64_t r = sr__rng_slot_next(np, &s[i].rng);

		if (iters)
			burn(iters);
		/* Reward 1 when the action guesses the draw: learnable, cheap. */
		reward[i] = (uint64_t)(uint32_t)act[i] == (r >> 60) % spec->params[P_ACT_N] ? 1.0 : 0.0;
		write_obs(r ^ ((uint64_t)(uint32_t)act[i] * 0x9e3779b97f4a7c15ull), d,
			  obs + (size_t)d * i);
		s[i].t++;
		terminated[i] = s[i].t >= ep_len;
	}
}

static void spin_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		      float *obs, double *reward, uint8_t *terminated)
{
	if (sr__np_rng(spec))
		spin_step_rng(spec, states, n, actions, obs, reward, terminated, true);
	else
		spin_step_rng(spec, states, n, actions, obs, reward, terminated, false);
}

/* The obs of the current state: a function of the RNG state that does not
 * advance it. */
static void spin_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	const struct spin *s = state;

	write_obs(s->rng.s[0] ^ s->rng.s[3], (uint32_t)spec->params[P_OBS_DIM], obs);
}

/* Any step count is fine (it only compares with ep_len); the RNG must be
 * a seeded one of the spec's kind. */
static int spin_check_state(const sr_env_spec *spec, const void *state)
{
	const struct spin *s = state;

	return sr__rng_slot_ok(sr__np_rng(spec), &s->rng) && s->pad == 0 ? 0 : -EINVAL;
}

const sr_env_spec sr__env_spin = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "Spin-v0",
	.name = "spin",
	.state_size = sizeof(struct spin),
	.max_episode_steps = 0,
	.obs_ndim = 1,
	.obs_shape = {16},
	.obs_dim = 16,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 2,
	.act_dim = 1,
	.n_phys = 0,
	.params = {[P_COST_US] = 0, [P_OBS_DIM] = 16, [P_EP_LEN] = 1000, [P_ACT_N] = 2,
		   [P_COST_NS] = 0},
	.seed = spin_seed,
	.reset = spin_reset,
	.step = spin_step,
	.observe = spin_observe,
	.check_state = spin_check_state,
};

int sr__spin_configure(sr_env_spec *spec, const char *params)
{
	static const struct {
		const char *key;
		uint64_t lo, hi;
		int slot;
	} keys[] = {
		{"cost_us", 0, 10000000, P_COST_US},
		{"obs_dim", 1, 1u << 20, P_OBS_DIM},
		{"ep_len", 1, UINT32_MAX, P_EP_LEN},
		{"act_n", 1, 1u << 20, P_ACT_N},
		{"cost_ns", 0, 10000000000ull, P_COST_NS},
	};
	char buf[256], *save = NULL, *tok;

	if (strlen(params) >= sizeof(buf))
		return sr__errorf(-EINVAL, "spin: parameter string too long");
	strcpy(buf, params);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		unsigned long long v;
		size_t k;

		if (!eq)
			return sr__errorf(-EINVAL, "spin: '%s' is not key=value", tok);
		*eq = '\0';
		if (!strcmp(tok, "rng")) {
			int err = sr__rng_param(spec, eq + 1);

			if (err)
				return err;
			continue;
		}
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (!strcmp(tok, keys[k].key))
				break;
		if (k == sizeof(keys) / sizeof(keys[0]))
			return sr__errorf(-EINVAL,
					  "spin: unknown parameter '%s' (known: cost_us, obs_dim, "
					  "ep_len, act_n, cost_ns, rng)",
					  tok);
		errno = 0;
		v = strtoull(eq + 1, &end, 10);
		if (!eq[1] || *end || errno || eq[1] == '-' || v < keys[k].lo || v > keys[k].hi)
			return sr__errorf(-EINVAL, "spin: %s='%s' is not an integer in [%llu, %llu]",
					  tok, eq + 1, (unsigned long long)keys[k].lo,
					  (unsigned long long)keys[k].hi);
		spec->params[keys[k].slot] = v;
	}
	spec->obs_shape[0] = (uint32_t)spec->params[P_OBS_DIM];
	spec->obs_dim = (uint32_t)spec->params[P_OBS_DIM];
	spec->act_n = (uint32_t)spec->params[P_ACT_N];
	return 0;
}

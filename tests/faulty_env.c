/*
 * Faulty-v0: a test env plugin that fails on command, for the process
 * worker tests (tests/test_procs.c).
 *
 * A random walk: obs = (x, t, id), x moves by a uniform step from the
 * instance's RNG; reward 1 per step; the episode terminates after a length
 * drawn at reset (8 .. 39 steps). Actions 0 and 1 are ordinary (1 doubles
 * the step); action 2 makes the step fail the way params[0] says:
 * 1 SIGSEGV, 2 exit(3), 3 hang (sleep forever), 4 abort(); or it writes
 * what no env should (the finite check's tests, tests/test_nonfinite.c):
 * 5 x becomes NaN (every obs is NaN until the episode ends: it still
 * terminates on time), 6 a NaN reward, 7 an infinite reward, 8 the
 * episode terminates now and the next reset's obs is NaN (x only: the
 * steps after it are finite again). params[0] = 0: the environment
 * variable FAULTY_MODE says, else action 2 is ordinary. Everything is a function of (seed, index) and the
 * actions, so runs are reproducible.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <stepring/env.h>

struct faulty {
	sr_rng rng;
	double x;
	uint32_t t, len;
	uint64_t id;
	uint32_t nan_reset; /* mode 8: the next reset's obs is NaN */
};

static const float act_unused[1] = {0.0f};

static void f_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		   uint64_t first_index)
{
	struct faulty *s = states;

	for (size_t i = 0; i < n; i++) {
		sr_rng_seed(&s[i].rng, seed, first_index + i);
		s[i].id = first_index + i;
		s[i].nan_reset = 0; /* the state is not zeroed by every caller (a test's stack buffer) */
	}
}

static void f_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	const struct faulty *s = state;

	obs[0] = (float)s->x;
	obs[1] = (float)s->t;
	obs[2] = (float)s->id;
}

static void f_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	struct faulty *s = states;

	for (size_t i = 0; i < n; i++) {
		s[i].x = sr_rng_range(&s[i].rng, -1.0, 1.0);
		s[i].t = 0;
		s[i].len = 8 + (uint32_t)(sr_rng_next(&s[i].rng) % 32);
		f_observe(spec, &s[i], obs + 3 * i);
		if (s[i].nan_reset) {
			s[i].nan_reset = 0;
			obs[3 * i] = NAN;
		}
	}
}

/* params[0], or (a loader that cannot set params: the Python binding) the
 * environment variable FAULTY_MODE. */
static uint64_t fault_mode(const sr_env_spec *spec)
{
	const char *s = getenv("FAULTY_MODE");

	return spec->params[0] ? spec->params[0] : s ? strtoull(s, NULL, 10) : 0;
}

static void fail_now(uint64_t mode)
{
	switch (mode) {
	case 1:
		raise(SIGSEGV);
		break;
	case 2:
		exit(3);
	case 3:
		for (;;)
			pause();
	case 4:
		abort();
	default:
		break;
	}
}

static void f_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		   float *obs, double *reward, uint8_t *terminated)
{
	struct faulty *s = states;
	const int32_t *a = actions;

	for (size_t i = 0; i < n; i++) {
		uint64_t mode = a[i] == 2 ? fault_mode(spec) : 0;

		fail_now(mode);
		s[i].x += (a[i] == 1 ? 2.0 : 1.0) * sr_rng_range(&s[i].rng, -0.1, 0.1);
		s[i].t++;
		reward[i] = mode == 6 ? NAN : mode == 7 ? INFINITY : 1.0;
		if (mode == 5)
			s[i].x = NAN;
		if (mode == 8) {
			s[i].t = s[i].len;
			s[i].nan_reset = 1;
		}
		terminated[i] = s[i].t >= s[i].len;
		f_observe(spec, &s[i], obs + 3 * i);
	}
}

__attribute__((visibility("default"))) const sr_env_spec sr_env_plugin_spec = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "Faulty-v0",
	.name = "faulty",
	.state_size = sizeof(struct faulty),
	.max_episode_steps = 30,
	.obs_ndim = 1,
	.obs_shape = {3},
	.obs_dim = 3,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 3,
	.act_dim = 1,
	.act_low = act_unused,
	.act_high = act_unused,
	.seed = f_seed,
	.reset = f_reset,
	.step = f_step,
	.observe = f_observe,
};

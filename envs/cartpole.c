/*
 * CartPole-v1 (Gymnasium 1.4.0), bit-exact against the reference data in
 * tests/refdata: double-precision state, explicit Euler, float32 obs.
 *
 * State (64 bytes, one cache line): the instance RNG (sr_rng, or PCG64 with
 * rng=numpy, in the same 32 bytes: envs.h), then x, x_dot, theta,
 * theta_dot as doubles. Termination is decided on the doubles before the
 * obs is rounded.
 */
#include <math.h>

#include "envs.h"

struct cartpole {
	sr_rng rng;
	double x, x_dot, theta, theta_dot;
};

_Static_assert(sizeof(struct cartpole) == 64, "cartpole state is one cache line");

/* Gymnasium's defaults; total_mass and polemass_length are its derived
 * attributes (masspole + masscart, masspole * length, computed once in its
 * constructor: setting masspole later leaves them as they are, here too). */
#define GRAVITY 9.8
#define MASSCART 1.0
#define MASSPOLE 0.1
#define TOTAL_MASS (0.1 + 1.0)
#define LENGTH 0.5
#define POLEMASS_LENGTH (0.1 * 0.5)
#define FORCE_MAG 10.0
#define TAU 0.02
#define THETA_THRESHOLD (12 * 2 * M_PI / 360)
#define X_THRESHOLD 2.4

/* spec->params slots of the parameters (SR__PK_XOR; 5 is the RNG's). */
enum { P_GRAVITY, P_MASSPOLE, P_TOTAL_MASS, P_LENGTH, P_POLEMASS_LENGTH, P_FORCE_MAG = 6, P_TAU };

#define LIVE (SR_ENV_PARAM_CREATE | SR_ENV_PARAM_LIVE)
static const struct sr__param params[] = {
	{"gravity", GRAVITY, SR__PK_XOR, P_GRAVITY, LIVE, NULL},
	{"masspole", MASSPOLE, SR__PK_XOR, P_MASSPOLE, LIVE, NULL},
	{"total_mass", TOTAL_MASS, SR__PK_XOR, P_TOTAL_MASS, LIVE, NULL},
	{"length", LENGTH, SR__PK_XOR, P_LENGTH, LIVE, NULL},
	{"polemass_length", POLEMASS_LENGTH, SR__PK_XOR, P_POLEMASS_LENGTH, LIVE, NULL},
	{"force_mag", FORCE_MAG, SR__PK_XOR, P_FORCE_MAG, LIVE, NULL},
	{"tau", TAU, SR__PK_XOR, P_TAU, LIVE, NULL},
	{"masscart", MASSCART, SR__PK_FIXED, -1, 0,
	 "Gymnasium's CartPole reads it only in its constructor (total_mass = masspole + "
	 "masscart), so setting it changes nothing there either: set total_mass"},
	{"x_threshold", X_THRESHOLD, SR__PK_FIXED, -1, 0,
	 "the termination bounds are compiled in (they also bound the observation space)"},
	{"theta_threshold_radians", THETA_THRESHOLD, SR__PK_FIXED, -1, 0,
	 "the termination bounds are compiled in (they also bound the observation space)"},
};
#undef LIVE

const struct sr__params sr__cartpole_params = {params, sizeof(params) / sizeof(params[0])};

static const float obs_high[4] = {4.8f, INFINITY, (float)(2 * THETA_THRESHOLD), INFINITY};
static const float obs_low[4] = {-4.8f, -INFINITY, -(float)(2 * THETA_THRESHOLD), -INFINITY};

static inline void write_obs(const struct cartpole *s, float *obs)
{
	obs[0] = (float)s->x;
	obs[1] = (float)s->x_dot;
	obs[2] = (float)s->theta;
	obs[3] = (float)s->theta_dot;
}

static void cp_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		    uint64_t first_index)
{
	struct cartpole *s = states;

	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++)
		sr__rng_slot_seed(np, &s[i].rng, seed, first_index + i);
}

/* Gymnasium: np_random.uniform(low, high, size=(4,)), reset options "low"
 * and "high" (default -0.05, 0.05). */
static void cp_reset_in(const sr_env_spec *spec, void *states, size_t n, const double *b,
			float *obs)
{
	struct cartpole *s = states;
	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++) {
		s[i].x = sr__rng_slot_range(np, &s[i].rng, b[0], b[1]);
		s[i].x_dot = sr__rng_slot_range(np, &s[i].rng, b[0], b[1]);
		s[i].theta = sr__rng_slot_range(np, &s[i].rng, b[0], b[1]);
		s[i].theta_dot = sr__rng_slot_range(np, &s[i].rng, b[0], b[1]);
		write_obs(&s[i], obs + 4 * i);
	}
}

const struct sr__reset_opt sr__cartpole_reset_opt = {
	{"low", "high"}, {-0.05, 0.05}, true, cp_reset_in};

static void cp_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	cp_reset_in(spec, states, n, sr__cartpole_reset_opt.defaults, obs);
}

static void cp_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		    float *obs, double *reward, uint8_t *terminated)
{
	struct cartpole *s = states;
	const int32_t *act = actions;
	/* The parameters, once per batch (Gymnasium's attributes, in its
	 * expressions' order: the defaults give the same doubles as the
	 * constants did). */
	const double force_mag = sr__pget(spec, P_FORCE_MAG, FORCE_MAG);
	const double pml = sr__pget(spec, P_POLEMASS_LENGTH, POLEMASS_LENGTH);
	const double total_mass = sr__pget(spec, P_TOTAL_MASS, TOTAL_MASS);
	const double gravity = sr__pget(spec, P_GRAVITY, GRAVITY);
	const double length = sr__pget(spec, P_LENGTH, LENGTH);
	const double masspole = sr__pget(spec, P_MASSPOLE, MASSPOLE);
	const double tau = sr__pget(spec, P_TAU, TAU);

	for (size_t i = 0; i < n; i++) {
		struct cartpole *c = &s[i];
		double force = act[i] == 1 ? force_mag : -force_mag;
		double costheta = cos(c->theta), sintheta = sin(c->theta);
		double temp = (force + (pml * (c->theta_dot * c->theta_dot)) * sintheta) / total_mass;
		double thetaacc = (gravity * sintheta - costheta * temp) /
				  (length * (4.0 / 3.0 - (masspole * (costheta * costheta)) / total_mass));
		double xacc = temp - ((pml * thetaacc) * costheta) / total_mass;

		c->x = c->x + tau * c->x_dot;
		c->x_dot = c->x_dot + tau * xacc;
		c->theta = c->theta + tau * c->theta_dot;
		c->theta_dot = c->theta_dot + tau * thetaacc;
		terminated[i] = (c->x < -X_THRESHOLD) | (c->x > X_THRESHOLD) |
				(c->theta < -THETA_THRESHOLD) | (c->theta > THETA_THRESHOLD);
		reward[i] = 1.0;
		write_obs(c, obs + 4 * i);
	}
}

static void cp_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	write_obs(state, obs);
}

static void cp_get_phys(const sr_env_spec *spec, const void *state, double *phys)
{
	const struct cartpole *c = state;

	phys[0] = c->x;
	phys[1] = c->x_dot;
	phys[2] = c->theta;
	phys[3] = c->theta_dot;
}

static void cp_set_phys(const sr_env_spec *spec, void *state, const double *phys)
{
	struct cartpole *c = state;

	c->x = phys[0];
	c->x_dot = phys[1];
	c->theta = phys[2];
	c->theta_dot = phys[3];
}

/* Any finite state can be stepped (a terminated pole keeps falling when
 * autoreset is disabled), so finiteness and a seeded RNG (of the spec's
 * kind) are the bounds. */
static int cp_check_state(const sr_env_spec *spec, const void *state)
{
	const struct cartpole *c = state;

	if (!sr__rng_slot_ok(sr__np_rng(spec), &c->rng) || !isfinite(c->x) || !isfinite(c->x_dot) ||
	    !isfinite(c->theta) || !isfinite(c->theta_dot))
		return -EINVAL;
	return 0;
}

const sr_env_spec sr__env_cartpole = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "CartPole-v1",
	.name = "cartpole",
	.state_size = sizeof(struct cartpole),
	.max_episode_steps = 500,
	.obs_ndim = 1,
	.obs_shape = {4},
	.obs_dim = 4,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 2,
	.act_dim = 1,
	.n_phys = 4,
	.seed = cp_seed,
	.reset = cp_reset,
	.step = cp_step,
	.observe = cp_observe,
	.get_phys = cp_get_phys,
	.set_phys = cp_set_phys,
	.check_state = cp_check_state,
};

/*
 * MountainCar-v0 and MountainCarContinuous-v0 (Gymnasium 1.4.0),
 * bit-exact against tests/refdata.
 *
 * State: the instance RNG (sr_rng, or PCG64 with rng=numpy: envs.h), then
 * position and velocity as doubles. The continuous variant rounds its state
 * to float32 at the end of every step (as Gymnasium stores it), after the
 * termination test on the doubles.
 * Clipping order: velocity update, velocity clip, position update, position
 * clip, left-wall stop, termination test.
 */
#include <math.h>

#include "envs.h"

struct mountaincar {
	sr_rng rng;
	double pos, vel;
};

/* Gymnasium's defaults (its attributes min_position, max_position,
 * max_speed, goal_position, goal_velocity, force, gravity; the continuous
 * env's power, min_action, max_action). */
#define MIN_POS -1.2
#define MAX_POS 0.6
#define MAX_SPEED 0.07
#define GOAL_POS 0.5
#define GOAL_POS_C 0.45
#define GOAL_VEL 0.0
#define FORCE 0.001
#define GRAVITY 0.0025
#define POWER 0.0015

/* spec->params slots of the parameters (SR__PK_XOR; 5 is the RNG's). The
 * shared reset and check_state read the first three, which both envs have
 * with the same defaults. */
enum { P_MIN_POS, P_MAX_POS, P_MAX_SPEED, P_GOAL_POS, P_GOAL_VEL, P_FORCE = 6, P_GRAVITY };
enum { P_POWER = P_FORCE };

#define LIVE (SR_ENV_PARAM_CREATE | SR_ENV_PARAM_LIVE)
static const struct sr__param mc_params[] = {
	{"min_position", MIN_POS, SR__PK_XOR, P_MIN_POS, LIVE, NULL},
	{"max_position", MAX_POS, SR__PK_XOR, P_MAX_POS, LIVE, NULL},
	{"max_speed", MAX_SPEED, SR__PK_XOR, P_MAX_SPEED, LIVE, NULL},
	{"goal_position", GOAL_POS, SR__PK_XOR, P_GOAL_POS, LIVE, NULL},
	{"goal_velocity", GOAL_VEL, SR__PK_XOR, P_GOAL_VEL, LIVE, NULL},
	{"force", FORCE, SR__PK_XOR, P_FORCE, LIVE, NULL},
	{"gravity", GRAVITY, SR__PK_XOR, P_GRAVITY, LIVE, NULL},
};

static const struct sr__param mcc_params[] = {
	{"min_position", MIN_POS, SR__PK_XOR, P_MIN_POS, LIVE, NULL},
	{"max_position", MAX_POS, SR__PK_XOR, P_MAX_POS, LIVE, NULL},
	{"max_speed", MAX_SPEED, SR__PK_XOR, P_MAX_SPEED, LIVE, NULL},
	{"goal_position", GOAL_POS_C, SR__PK_XOR, P_GOAL_POS, LIVE, NULL},
	{"goal_velocity", GOAL_VEL, SR__PK_XOR, P_GOAL_VEL, LIVE, NULL},
	{"power", POWER, SR__PK_XOR, P_POWER, LIVE, NULL},
	{"min_action", -1.0, SR__PK_FIXED, -1, 0,
	 "the action bounds are the action space's (compiled in)"},
	{"max_action", 1.0, SR__PK_FIXED, -1, 0,
	 "the action bounds are the action space's (compiled in)"},
};
#undef LIVE

const struct sr__params sr__mountaincar_params = {mc_params,
						  sizeof(mc_params) / sizeof(mc_params[0])};
const struct sr__params sr__mountaincar_continuous_params = {
	mcc_params, sizeof(mcc_params) / sizeof(mcc_params[0])};

static const float obs_high[2] = {0.6f, 0.07f};
static const float obs_low[2] = {-1.2f, -0.07f};
static const float act_high[1] = {1.0f};
static const float act_low[1] = {-1.0f};

static inline void write_obs(const struct mountaincar *s, float *obs)
{
	obs[0] = (float)s->pos;
	obs[1] = (float)s->vel;
}

static void mc_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		    uint64_t first_index)
{
	struct mountaincar *s = states;

	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++)
		sr__rng_slot_seed(np, &s[i].rng, seed, first_index + i);
}

/* Gymnasium: [uniform(low, high), 0], reset options "low" and "high"
 * (default -0.6, -0.4); the continuous variant keeps the double until its
 * first step. */
static void mc_reset_in(const sr_env_spec *spec, void *states, size_t n, const double *b,
			float *obs)
{
	struct mountaincar *s = states;
	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++) {
		s[i].pos = sr__rng_slot_range(np, &s[i].rng, b[0], b[1]);
		s[i].vel = 0.0;
		write_obs(&s[i], obs + 2 * i);
	}
}

const struct sr__reset_opt sr__mountaincar_reset_opt = {
	{"low", "high"}, {-0.6, -0.4}, true, mc_reset_in};

static void mc_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	mc_reset_in(spec, states, n, sr__mountaincar_reset_opt.defaults, obs);
}

static void mc_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		    float *obs, double *reward, uint8_t *terminated)
{
	struct mountaincar *s = states;
	const int32_t *act = actions;
	/* The parameters, once per batch (Gymnasium's expressions). */
	const double min_pos = sr__pget(spec, P_MIN_POS, MIN_POS);
	const double max_pos = sr__pget(spec, P_MAX_POS, MAX_POS);
	const double max_speed = sr__pget(spec, P_MAX_SPEED, MAX_SPEED);
	const double goal_pos = sr__pget(spec, P_GOAL_POS, GOAL_POS);
	const double goal_vel = sr__pget(spec, P_GOAL_VEL, GOAL_VEL);
	const double force = sr__pget(spec, P_FORCE, FORCE);
	const double gravity = sr__pget(spec, P_GRAVITY, GRAVITY);

	for (size_t i = 0; i < n; i++) {
		struct mountaincar *m = &s[i];
		double v = m->vel + ((double)(act[i] - 1) * force + cos(3 * m->pos) * (-gravity));
		double p;

		v = v < -max_speed ? -max_speed : v;
		v = v > max_speed ? max_speed : v;
		p = m->pos + v;
		p = p < min_pos ? min_pos : p;
		p = p > max_pos ? max_pos : p;
		if (p == min_pos && v < 0)
			v = 0.0;
		m->pos = p;
		m->vel = v;
		terminated[i] = p >= goal_pos && v >= goal_vel;
		reward[i] = -1.0;
		write_obs(m, obs + 2 * i);
	}
}

static void mcc_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		     float *obs, double *reward, uint8_t *terminated)
{
	struct mountaincar *s = states;
	const float *act = actions;
	const double min_pos = sr__pget(spec, P_MIN_POS, MIN_POS);
	const double max_pos = sr__pget(spec, P_MAX_POS, MAX_POS);
	const double max_speed = sr__pget(spec, P_MAX_SPEED, MAX_SPEED);
	const double goal_pos = sr__pget(spec, P_GOAL_POS, GOAL_POS_C);
	const double goal_vel = sr__pget(spec, P_GOAL_VEL, GOAL_VEL);
	const double power = sr__pget(spec, P_POWER, POWER);

	for (size_t i = 0; i < n; i++) {
		struct mountaincar *m = &s[i];
		double a = (double)act[i];
		double f = fmin(fmax(a, -1.0), 1.0);
		double v = m->vel + (f * power - 0.0025 * cos(3 * m->pos));
		double p;
		bool term;

		if (v > max_speed)
			v = max_speed;
		if (v < -max_speed)
			v = -max_speed;
		p = m->pos + v;
		if (p > max_pos)
			p = max_pos;
		if (p < min_pos)
			p = min_pos;
		if (p == min_pos && v < 0)
			v = 0.0;
		term = p >= goal_pos && v >= goal_vel;
		terminated[i] = term;
		reward[i] = (term ? 100.0 : 0.0) - (a * a) * 0.1;
		m->pos = (double)(float)p;
		m->vel = (double)(float)v;
		write_obs(m, obs + 2 * i);
	}
}

static void mc_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	write_obs(state, obs);
}

static void mc_get_phys(const sr_env_spec *spec, const void *state, double *phys)
{
	const struct mountaincar *m = state;

	phys[0] = m->pos;
	phys[1] = m->vel;
}

static void mc_set_phys(const sr_env_spec *spec, void *state, const double *phys)
{
	struct mountaincar *m = state;

	m->pos = phys[0];
	m->vel = phys[1];
}

/* Every step clips the position to [min_position, max_position] ([-1.2,
 * 0.6]) and the velocity to [-max_speed, max_speed] ([-0.07, 0.07]);
 * reset draws inside them. The continuous version keeps them as float32
 * values, which may round just outside (float)-1.2 is -1.2000000477:
 * hence the 1e-6 of slack. */
static int mc_check_state(const sr_env_spec *spec, const void *state)
{
	const struct mountaincar *m = state;
	const double lo = sr__pget(spec, P_MIN_POS, MIN_POS), hi = sr__pget(spec, P_MAX_POS, MAX_POS);

	if (!sr__rng_slot_ok(sr__np_rng(spec), &m->rng) || !(m->pos >= lo - 1e-6 && m->pos <= hi + 1e-6) ||
	    !(fabs(m->vel) <= sr__pget(spec, P_MAX_SPEED, MAX_SPEED) + 1e-6))
		return -EINVAL;
	return 0;
}

const sr_env_spec sr__env_mountaincar = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "MountainCar-v0",
	.name = "mountaincar",
	.state_size = sizeof(struct mountaincar),
	.max_episode_steps = 200,
	.obs_ndim = 1,
	.obs_shape = {2},
	.obs_dim = 2,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 3,
	.act_dim = 1,
	.n_phys = 2,
	.seed = mc_seed,
	.reset = mc_reset,
	.step = mc_step,
	.observe = mc_observe,
	.get_phys = mc_get_phys,
	.set_phys = mc_set_phys,
	.check_state = mc_check_state,
};

const sr_env_spec sr__env_mountaincar_continuous = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "MountainCarContinuous-v0",
	.name = "mountaincar_continuous",
	.state_size = sizeof(struct mountaincar),
	.max_episode_steps = 999,
	.obs_ndim = 1,
	.obs_shape = {2},
	.obs_dim = 2,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_BOX,
	.act_n = 0,
	.act_dim = 1,
	.act_low = act_low,
	.act_high = act_high,
	.n_phys = 2,
	.seed = mc_seed,
	.reset = mc_reset,
	.step = mcc_step,
	.observe = mc_observe,
	.get_phys = mc_get_phys,
	.set_phys = mc_set_phys,
	.check_state = mc_check_state,
};

/*
 * Pendulum-v1 (Gymnasium 1.4.0), bit-exact against tests/refdata.
 *
 * State: the instance RNG (sr_rng, or PCG64 with rng=numpy: envs.h), then
 * theta (not wrapped: it accumulates freely, only the cost normalises it)
 * and theta_dot, doubles. The float32 action is
 * clipped in float32, then widened to double. Squares Gymnasium writes as
 * x**2 are pow(x, 2.0) with an exponent the compiler cannot fold (glibc's
 * pow differs from x*x by an ulp for a few inputs).
 */
#include <math.h>

#include "envs.h"

struct pendulum {
	sr_rng rng;
	double th, thdot;
};

/* Gymnasium's defaults (its attributes max_speed, max_torque, dt, g, m, l). */
#define MAX_SPEED 8.0
#define MAX_TORQUE 2.0
#define DT 0.05
#define G 10.0
#define M 1.0
#define L 1.0

/* spec->params slots of the parameters (SR__PK_XOR; 5 is the RNG's). */
enum { P_MAX_SPEED, P_MAX_TORQUE, P_DT, P_G, P_M, P_L = 6 };

#define LIVE (SR_ENV_PARAM_CREATE | SR_ENV_PARAM_LIVE)
static const struct sr__param params[] = {
	{"max_speed", MAX_SPEED, SR__PK_XOR, P_MAX_SPEED, LIVE, NULL},
	{"max_torque", MAX_TORQUE, SR__PK_XOR, P_MAX_TORQUE, LIVE, NULL},
	{"dt", DT, SR__PK_XOR, P_DT, LIVE, NULL},
	{"g", G, SR__PK_XOR, P_G, LIVE, NULL},
	{"m", M, SR__PK_XOR, P_M, LIVE, NULL},
	{"l", L, SR__PK_XOR, P_L, LIVE, NULL},
};
#undef LIVE

const struct sr__params sr__pendulum_params = {params, sizeof(params) / sizeof(params[0])};

static const float obs_high[3] = {1.0f, 1.0f, 8.0f};
static const float obs_low[3] = {-1.0f, -1.0f, -8.0f};
static const float act_high[1] = {2.0f};
static const float act_low[1] = {-2.0f};

static inline void write_obs(const struct pendulum *s, float *obs)
{
	obs[0] = (float)cos(s->th);
	obs[1] = (float)sin(s->th);
	obs[2] = (float)s->thdot;
}

/* NumPy's floored modulo of ((x + pi) % (2 pi)) - pi. */
static inline double angle_normalize(double x)
{
	double r = fmod(x + M_PI, 2 * M_PI);

	if (r != 0 && r < 0)
		r += 2 * M_PI;
	else if (r == 0)
		r = 0.0; /* Python returns +0.0 */
	return r - M_PI;
}

static void pd_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		    uint64_t first_index)
{
	struct pendulum *s = states;

	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++)
		sr__rng_slot_seed(np, &s[i].rng, seed, first_index + i);
}

/* Gymnasium: high = [x_init, y_init], uniform(low=-high, high=high);
 * reset options "x_init" and "y_init" (default pi, 1). */
static void pd_reset_in(const sr_env_spec *spec, void *states, size_t n, const double *b,
			float *obs)
{
	struct pendulum *s = states;
	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++) {
		s[i].th = sr__rng_slot_range(np, &s[i].rng, -b[0], b[0]);
		s[i].thdot = sr__rng_slot_range(np, &s[i].rng, -b[1], b[1]);
		write_obs(&s[i], obs + 3 * i);
	}
}

const struct sr__reset_opt sr__pendulum_reset_opt = {
	{"x_init", "y_init"}, {M_PI, 1.0}, false, pd_reset_in};

static void pd_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	pd_reset_in(spec, states, n, sr__pendulum_reset_opt.defaults, obs);
}

static void pd_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		    float *obs, double *reward, uint8_t *terminated)
{
	struct pendulum *s = states;
	const float *act = actions;
	const double two = sr__pow_two;
	/* The parameters, once per batch, and Gymnasium's sub-expressions of
	 * them: 3 * g / (2 * l) and 3.0 / (m * l**2) (15 and 3 by default). The
	 * torque bound clips the float32 action in float32, as np.clip does. */
	const double max_speed = sr__pget(spec, P_MAX_SPEED, MAX_SPEED);
	const float max_torque = (float)sr__pget(spec, P_MAX_TORQUE, MAX_TORQUE);
	const double dt = sr__pget(spec, P_DT, DT);
	const double g = sr__pget(spec, P_G, G), m = sr__pget(spec, P_M, M);
	const double l = sr__pget(spec, P_L, L);
	const double kg = 3 * g / (2 * l), ku = 3.0 / (m * pow(l, two));

	for (size_t i = 0; i < n; i++) {
		struct pendulum *p = &s[i];
		float uf = act[i];
		double u, cost, newthdot;

		uf = uf < -max_torque ? -max_torque : uf;
		uf = uf > max_torque ? max_torque : uf;
		u = (double)uf;
		cost = pow(angle_normalize(p->th), two) + 0.1 * pow(p->thdot, two) +
		       0.001 * (u * u);
		newthdot = p->thdot + (kg * sin(p->th) + ku * u) * dt;
		newthdot = newthdot < -max_speed ? -max_speed : newthdot;
		newthdot = newthdot > max_speed ? max_speed : newthdot;
		p->th = p->th + newthdot * dt;
		p->thdot = newthdot;
		reward[i] = -cost;
		terminated[i] = 0;
		write_obs(p, obs + 3 * i);
	}
}

static void pd_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	write_obs(state, obs);
}

static void pd_get_phys(const sr_env_spec *spec, const void *state, double *phys)
{
	const struct pendulum *p = state;

	phys[0] = p->th;
	phys[1] = p->thdot;
}

static void pd_set_phys(const sr_env_spec *spec, void *state, const double *phys)
{
	struct pendulum *p = state;

	p->th = phys[0];
	p->thdot = phys[1];
}

/* The angle is not wrapped by a step (any finite one is fine), the speed
 * is clipped to [-max_speed, max_speed] ([-8, 8]). */
static int pd_check_state(const sr_env_spec *spec, const void *state)
{
	const struct pendulum *p = state;

	if (!sr__rng_slot_ok(sr__np_rng(spec), &p->rng) || !isfinite(p->th) ||
	    !(fabs(p->thdot) <= sr__pget(spec, P_MAX_SPEED, MAX_SPEED)))
		return -EINVAL;
	return 0;
}

const sr_env_spec sr__env_pendulum = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "Pendulum-v1",
	.name = "pendulum",
	.state_size = sizeof(struct pendulum),
	.max_episode_steps = 200,
	.obs_ndim = 1,
	.obs_shape = {3},
	.obs_dim = 3,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_BOX,
	.act_n = 0,
	.act_dim = 1,
	.act_low = act_low,
	.act_high = act_high,
	.n_phys = 2,
	.seed = pd_seed,
	.reset = pd_reset,
	.step = pd_step,
	.observe = pd_observe,
	.get_phys = pd_get_phys,
	.set_phys = pd_set_phys,
	.check_state = pd_check_state,
};

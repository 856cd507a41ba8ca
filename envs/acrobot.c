/*
 * Acrobot-v1 (Gymnasium 1.4.0, "book" dynamics, no torque noise),
 * bit-exact against tests/refdata.
 *
 * State: the instance RNG (sr_rng, or PCG64 with rng=numpy: envs.h), then
 * theta1, theta2, dtheta1, dtheta2 as doubles (float32 values right after
 * reset, as Gymnasium casts them). One step is one classical RK4 step of
 * h = 0.2 on (theta1, theta2, dtheta1, dtheta2, torque), evaluated in
 * exactly the operation order of the reference (see tests/refdata/README.md);
 * then the angles are wrapped into [-pi, pi] and the velocities clipped.
 */
#include <math.h>

#include "envs.h"

struct acrobot {
	sr_rng rng;
	double s[4];
};

#define MAX_VEL_1 (4 * M_PI)
#define MAX_VEL_2 (9 * M_PI)
#define PI_2 1.5707963267948966

/* Gymnasium's class attributes the dynamics read (the defaults). */
#define DT 0.2
#define LINK_LENGTH_1 1.0
#define LINK_MASS_1 1.0
#define LINK_MASS_2 1.0
#define LINK_COM_POS_1 0.5
#define LINK_COM_POS_2 0.5
#define LINK_MOI 1.0

/* spec->params slots of the parameters (SR__PK_XOR; 5 is the RNG's). */
enum { P_DT, P_L1, P_M1, P_M2, P_LC1, P_LC2 = 6, P_MOI };

#define LIVE (SR_ENV_PARAM_CREATE | SR_ENV_PARAM_LIVE)
static const struct sr__param params[] = {
	{"dt", DT, SR__PK_XOR, P_DT, LIVE, NULL},
	{"LINK_LENGTH_1", LINK_LENGTH_1, SR__PK_XOR, P_L1, LIVE, NULL},
	{"LINK_MASS_1", LINK_MASS_1, SR__PK_XOR, P_M1, LIVE, NULL},
	{"LINK_MASS_2", LINK_MASS_2, SR__PK_XOR, P_M2, LIVE, NULL},
	{"LINK_COM_POS_1", LINK_COM_POS_1, SR__PK_XOR, P_LC1, LIVE, NULL},
	{"LINK_COM_POS_2", LINK_COM_POS_2, SR__PK_XOR, P_LC2, LIVE, NULL},
	{"LINK_MOI", LINK_MOI, SR__PK_XOR, P_MOI, LIVE, NULL},
	{"LINK_LENGTH_2", 1.0, SR__PK_FIXED, -1, 0,
	 "Gymnasium's dynamics do not read it (only its rendering does)"},
	{"MAX_VEL_1", MAX_VEL_1, SR__PK_FIXED, -1, 0,
	 "the velocity bounds are compiled in (they also bound the observation space)"},
	{"MAX_VEL_2", MAX_VEL_2, SR__PK_FIXED, -1, 0,
	 "the velocity bounds are compiled in (they also bound the observation space)"},
	{"torque_noise_max", 0.0, SR__PK_FIXED, -1, 0,
	 "stepring's Acrobot has no torque noise (Gymnasium's default)"},
};
#undef LIVE

const struct sr__params sr__acrobot_params = {params, sizeof(params) / sizeof(params[0])};

/* The parameters of one batch and the products of them Gymnasium's
 * _dsdt forms, in its order (from the defaults they are the constants the
 * reference's folded expressions give: 0.25, 1.25, 4.9, 14.700000000000001,
 * ...; tests/refdata/README.md). */
struct ac_par {
	double dt, dt2, dt6;
	double m2, i1, i2;
	double m1lc1sq, l1sq_lc2sq, tl1lc2, lc2sq, l1lc2, den0; /* of d1, d2, ddth2 */
	double m2lc2g, m1lc1m2l1g, m2l1lc2, nm2l1lc2, tm2l1lc2;
};

static inline void ac_par_load(const sr_env_spec *spec, double two, struct ac_par *q)
{
	const double g = 9.8;
	const double m1 = sr__pget(spec, P_M1, LINK_MASS_1), m2 = sr__pget(spec, P_M2, LINK_MASS_2);
	const double l1 = sr__pget(spec, P_L1, LINK_LENGTH_1);
	const double lc1 = sr__pget(spec, P_LC1, LINK_COM_POS_1);
	const double lc2 = sr__pget(spec, P_LC2, LINK_COM_POS_2);

	q->dt = sr__pget(spec, P_DT, DT);
	q->dt2 = q->dt / 2.0;
	q->dt6 = q->dt / 6.0;
	q->m2 = m2;
	q->i1 = q->i2 = sr__pget(spec, P_MOI, LINK_MOI);
	/* The sub-expressions of parameters alone, once per batch (the
	 * same operations, so the same doubles, as inside _dsdt). */
	q->m1lc1sq = m1 * pow(lc1, two);
	q->l1sq_lc2sq = pow(l1, two) + pow(lc2, two);
	q->tl1lc2 = (2 * l1) * lc2;
	q->lc2sq = pow(lc2, two);
	q->l1lc2 = l1 * lc2;
	q->den0 = m2 * pow(lc2, two) + q->i2;
	q->m2lc2g = m2 * lc2 * g;
	q->m1lc1m2l1g = (m1 * lc1 + m2 * l1) * g;
	q->m2l1lc2 = m2 * l1 * lc2;
	q->nm2l1lc2 = -m2 * l1 * lc2;
	q->tm2l1lc2 = 2 * m2 * l1 * lc2;
}

static const float obs_high[6] = {1.0f, 1.0f, 1.0f, 1.0f, (float)MAX_VEL_1, (float)MAX_VEL_2};
static const float obs_low[6] = {-1.0f, -1.0f, -1.0f, -1.0f, -(float)MAX_VEL_1, -(float)MAX_VEL_2};

static inline void write_obs(const struct acrobot *a, float *obs)
{
	obs[0] = (float)cos(a->s[0]);
	obs[1] = (float)sin(a->s[0]);
	obs[2] = (float)cos(a->s[1]);
	obs[3] = (float)sin(a->s[1]);
	obs[4] = (float)a->s[2];
	obs[5] = (float)a->s[3];
}

/* Derivative of (theta1, theta2, dtheta1, dtheta2) under torque @tau:
 * Gymnasium's _dsdt ("book"), term by term in its evaluation order:
 *   d1 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos th2) + I1 + I2
 *   d2 = m2 (lc2^2 + l1 lc2 cos th2) + I2
 *   phi2 = m2 lc2 g cos(th1 + th2 - pi/2)
 *   phi1 = -m2 l1 lc2 w2^2 sin th2 - 2 m2 l1 lc2 w2 w1 sin th2
 *          + (m1 lc1 + m2 l1) g cos(th1 - pi/2) + phi2
 *   ddth2 = (a + d2/d1 phi1 - m2 l1 lc2 w1^2 sin th2 - phi2)
 *           / (m2 lc2^2 + I2 - d2^2/d1)
 *   ddth1 = -(d2 ddth2 + phi1) / d1 */
static inline void dsdt(const struct ac_par *q, const double *y, double tau, double two,
			double *dy)
{
	double th1 = y[0], th2 = y[1], w1 = y[2], w2 = y[3];
	double c2 = cos(th2), s2 = sin(th2);
	double d1 = ((q->m1lc1sq + q->m2 * (q->l1sq_lc2sq + q->tl1lc2 * c2)) + q->i1) + q->i2;
	double d2 = q->m2 * (q->lc2sq + q->l1lc2 * c2) + q->i2;
	double phi2 = q->m2lc2g * cos((th1 + th2) - PI_2);
	double phi1 = (((q->nm2l1lc2 * pow(w2, two)) * s2 - ((q->tm2l1lc2 * w2) * w1) * s2) +
		       q->m1lc1m2l1g * cos(th1 - PI_2)) +
		      phi2;
	double ddth2 = (((tau + (d2 / d1) * phi1) - (q->m2l1lc2 * pow(w1, two)) * s2) - phi2) /
		       (q->den0 - pow(d2, two) / d1);
	double ddth1 = -(d2 * ddth2 + phi1) / d1;

	dy[0] = w1;
	dy[1] = w2;
	dy[2] = ddth1;
	dy[3] = ddth2;
}

static inline double wrap(double x)
{
	const double diff = M_PI - (-M_PI);

	/* The reference subtracts 2 pi until the angle is in range: bit-exact
	 * for the angles one step makes (a few turns at most). A huge or
	 * infinite angle (a corrupt state, a bad CSV row) would loop forever
	 * (x - diff == x): reduce it first, NaN for a non-finite one. */
	if (__builtin_expect(!(fabs(x) <= 64 * M_PI), 0)) {
		if (!isfinite(x))
			return NAN;
		x = fmod(x, diff);
	}
	while (x > M_PI)
		x = x - diff;
	while (x < -M_PI)
		x = x + diff;
	return x;
}

static void ac_seed(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		    uint64_t first_index)
{
	struct acrobot *s = states;

	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++)
		sr__rng_slot_seed(np, &s[i].rng, seed, first_index + i);
}

/* Gymnasium: uniform(low, high, size=(4,)).astype(float32), reset options
 * "low" and "high" (default -0.1, 0.1). */
static void ac_reset_in(const sr_env_spec *spec, void *states, size_t n, const double *b,
			float *obs)
{
	struct acrobot *s = states;
	bool np = sr__np_rng(spec);

	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < 4; k++)
			s[i].s[k] = (double)(float)sr__rng_slot_range(np, &s[i].rng, b[0], b[1]);
		write_obs(&s[i], obs + 6 * i);
	}
}

const struct sr__reset_opt sr__acrobot_reset_opt = {
	{"low", "high"}, {-0.1, 0.1}, true, ac_reset_in};

static void ac_reset(const sr_env_spec *spec, void *states, size_t n, float *obs)
{
	ac_reset_in(spec, states, n, sr__acrobot_reset_opt.defaults, obs);
}

static void ac_step(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		    float *obs, double *reward, uint8_t *terminated)
{
	struct acrobot *s = states;
	const int32_t *act = actions;
	const double two = sr__pow_two;
	struct ac_par q;

	ac_par_load(spec, two, &q);
	for (size_t i = 0; i < n; i++) {
		struct acrobot *a = &s[i];
		double tau = (double)(act[i] - 1);
		double *y0 = a->s, k1[4], k2[4], k3[4], k4[4], y[4];
		bool term;

		/* rk4 over [0, dt]: dt2 = dt / 2, then dt / 6 */
		dsdt(&q, y0, tau, two, k1);
		for (int k = 0; k < 4; k++)
			y[k] = y0[k] + q.dt2 * k1[k];
		dsdt(&q, y, tau, two, k2);
		for (int k = 0; k < 4; k++)
			y[k] = y0[k] + q.dt2 * k2[k];
		dsdt(&q, y, tau, two, k3);
		for (int k = 0; k < 4; k++)
			y[k] = y0[k] + q.dt * k3[k];
		dsdt(&q, y, tau, two, k4);
		for (int k = 0; k < 4; k++)
			y[k] = y0[k] + q.dt6 * (((k1[k] + 2 * k2[k]) + 2 * k3[k]) + k4[k]);

		a->s[0] = wrap(y[0]);
		a->s[1] = wrap(y[1]);
		a->s[2] = fmin(fmax(y[2], -MAX_VEL_1), MAX_VEL_1);
		a->s[3] = fmin(fmax(y[3], -MAX_VEL_2), MAX_VEL_2);
		term = -cos(a->s[0]) - cos(a->s[1] + a->s[0]) > 1.0;
		terminated[i] = term;
		reward[i] = term ? 0.0 : -1.0;
		write_obs(a, obs + 6 * i);
	}
}

static void ac_observe(const sr_env_spec *spec, const void *state, float *obs)
{
	write_obs(state, obs);
}

static void ac_get_phys(const sr_env_spec *spec, const void *state, double *phys)
{
	const struct acrobot *a = state;

	for (int k = 0; k < 4; k++)
		phys[k] = a->s[k];
}

static void ac_set_phys(const sr_env_spec *spec, void *state, const double *phys)
{
	struct acrobot *a = state;

	for (int k = 0; k < 4; k++)
		a->s[k] = phys[k];
}

/* What a step leaves: angles wrapped into [-pi, pi], velocities clipped;
 * reset draws all four in [-0.1, 0.1]. */
static int ac_check_state(const sr_env_spec *spec, const void *state)
{
	const struct acrobot *a = state;

	if (!sr__rng_slot_ok(sr__np_rng(spec), &a->rng) || !(fabs(a->s[0]) <= M_PI) || !(fabs(a->s[1]) <= M_PI) ||
	    !(fabs(a->s[2]) <= MAX_VEL_1) || !(fabs(a->s[3]) <= MAX_VEL_2))
		return -EINVAL;
	return 0;
}

const sr_env_spec sr__env_acrobot = {
	.abi_version = SR_ENV_ABI_VERSION,
	.spec_size = sizeof(sr_env_spec),
	.id = "Acrobot-v1",
	.name = "acrobot",
	.state_size = sizeof(struct acrobot),
	.max_episode_steps = 500,
	.obs_ndim = 1,
	.obs_shape = {6},
	.obs_dim = 6,
	.obs_low = obs_low,
	.obs_high = obs_high,
	.act_kind = SR_SPACE_DISCRETE,
	.act_n = 3,
	.act_dim = 1,
	.n_phys = 4,
	.seed = ac_seed,
	.reset = ac_reset,
	.step = ac_step,
	.observe = ac_observe,
	.get_phys = ac_get_phys,
	.set_phys = ac_set_phys,
	.check_state = ac_check_state,
};

/* Built-in env types (internal). Add an env: define its spec in
 * envs/<name>.c and list it in SR_BUILTIN_ENVS. */
#ifndef SR_ENVS_H
#define SR_ENVS_H

#include <errno.h>
#include <math.h>

#include "stepring/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Box2D envs (C++, envs/box2d_*.cc) exist when CMake found Box2D
 * (SR_HAVE_BOX2D); without it their names give a "built without Box2D"
 * error (registry.c). */
#ifdef SR_HAVE_BOX2D
#define SR_BOX2D_ENVS(X)                                                                   \
	X(sr__env_lunarlander)                                                             \
	X(sr__env_lunarlander_continuous)                                                  \
	X(sr__env_bipedalwalker)
#else
#define SR_BOX2D_ENVS(X)
#endif

#define SR_BUILTIN_ENVS(X)                                                                 \
	X(sr__env_cartpole)                                                                \
	X(sr__env_pendulum)                                                                \
	X(sr__env_mountaincar)                                                             \
	X(sr__env_mountaincar_continuous)                                                  \
	X(sr__env_acrobot)                                                                 \
	SR_BOX2D_ENVS(X)                                                                   \
	X(sr__env_spin)

#define SR_ENV_DECLARE(sym) extern const sr_env_spec sym;
SR_BUILTIN_ENVS(SR_ENV_DECLARE)
#undef SR_ENV_DECLARE

/* A seeded xoshiro256** state is never all zero (that state would only
 * ever draw zeros): check_state hooks refuse it. */
static inline int sr__rng_ok(const sr_rng *r)
{
	return (r->s[0] | r->s[1] | r->s[2] | r->s[3]) != 0;
}

/* Parameters of the Box2D envs (box2d_*.cc). */
int sr__lunar_configure(sr_env_spec *spec, const char *params);
int sr__biped_configure(sr_env_spec *spec, const char *params);
/* Time b2World::Step alone on this thread (bench env's ceiling): returns
 * the ns and world steps counted since the last call in *ns, *steps, then
 * counts from 0 when @on. Box2D builds only. */
void sr__box2d_world_timing(int on, uint64_t *ns, uint64_t *steps);

/* 2.0, read through a volatile so that pow(x, two) is not folded into x*x:
 * Gymnasium's x**2 is glibc pow, which differs from x*x by an ulp for a few
 * inputs. Read it into a local once per batch. */
extern volatile double sr__pow_two;

/* Reset options of a built-in env (Gymnasium's reset(options=...)): two
 * numbers with Gymnasium's names and defaults, and a reset that draws the
 * initial state from them. */
struct sr__reset_opt {
	const char *keys[2];
	double defaults[2];
	bool ordered; /* keys[0] <= keys[1] required ("low" <= "high") */
	void (*reset)(const sr_env_spec *spec, void *states, size_t n, const double *b,
		      float *obs);
};
extern const struct sr__reset_opt sr__cartpole_reset_opt, sr__acrobot_reset_opt,
	sr__mountaincar_reset_opt, sr__pendulum_reset_opt;

/* The reset options of @spec's env type (by its reset function), NULL for
 * an env without (spin, plugins). */
const struct sr__reset_opt *sr__env_reset_opt(const sr_env_spec *spec);
/* Parse "key=value,..." (the keys of @ro, each at most once, finite
 * numbers) into b[2], the defaults where a key is absent. 0 or -EINVAL. */
int sr__env_parse_reset_opts(const sr_env_spec *spec, const struct sr__reset_opt *ro,
			     const char *options, double b[2]);

/* Apply "key=value,..." parameters to a copy of a spec (spin); -EINVAL for
 * an env that takes none or a bad key. */
int sr__env_configure(sr_env_spec *spec, const char *params);
/* spin's parameters: cost_us, obs_dim, ep_len, act_n. */
int sr__spin_configure(sr_env_spec *spec, const char *params);
/* spin's calibration: busy-loop iterations per microsecond on this machine
 * (measured once per process, thread safe). */
double sr__spin_iters_per_us(void);

#ifdef __cplusplus
}
#endif

#endif

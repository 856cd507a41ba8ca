/* Built-in env types (internal). Add an env: define its spec in
 * envs/<name>.c and list it in SR_BUILTIN_ENVS. */
#ifndef SR_ENVS_H
#define SR_ENVS_H

#include "stepring/env.h"

#define SR_BUILTIN_ENVS(X)                                                                 \
	X(sr__env_cartpole)                                                                \
	X(sr__env_pendulum)                                                                \
	X(sr__env_mountaincar)                                                             \
	X(sr__env_mountaincar_continuous)                                                  \
	X(sr__env_acrobot)                                                                 \
	X(sr__env_spin)

#define SR_ENV_DECLARE(sym) extern const sr_env_spec sym;
SR_BUILTIN_ENVS(SR_ENV_DECLARE)
#undef SR_ENV_DECLARE

/* 2.0, read through a volatile so that pow(x, two) is not folded into x*x:
 * Gymnasium's x**2 is glibc pow, which differs from x*x by an ulp for a few
 * inputs. Read it into a local once per batch. */
extern volatile double sr__pow_two;

/* Apply "key=value,..." parameters to a copy of a spec (spin); -EINVAL for
 * an env that takes none or a bad key. */
int sr__env_configure(sr_env_spec *spec, const char *params);
/* spin's parameters: cost_us, obs_dim, ep_len, act_n. */
int sr__spin_configure(sr_env_spec *spec, const char *params);
/* spin's calibration: busy-loop iterations per microsecond on this machine
 * (measured once per process, thread safe). */
double sr__spin_iters_per_us(void);

#endif

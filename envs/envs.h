/* Built-in env types (internal). Add an env: define its spec in
 * envs/<name>.c and list it in SR_BUILTIN_ENVS. */
#ifndef SR_ENVS_H
#define SR_ENVS_H

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "stepring/env.h"
#include "np_random.h"

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

/* The MuJoCo envs (envs/mujoco/) exist when CMake found libmujoco 2.2.2
 * (SR_HAVE_MUJOCO); without it their names give a "built without MuJoCo"
 * error (registry.c). */
#ifdef SR_HAVE_MUJOCO
#define SR_MUJOCO_ENVS(X)                                                                  \
	X(sr__env_halfcheetah)                                                             \
	X(sr__env_halfcheetah_v4)                                                          \
	X(sr__env_hopper)                                                                  \
	X(sr__env_hopper_v4)                                                               \
	X(sr__env_walker2d)                                                                \
	X(sr__env_walker2d_v4)                                                             \
	X(sr__env_ant)                                                                     \
	X(sr__env_ant_v4)                                                                  \
	X(sr__env_humanoid)                                                                \
	X(sr__env_humanoid_v4)                                                             \
	X(sr__env_humanoidstandup)                                                         \
	X(sr__env_humanoidstandup_v4)                                                      \
	X(sr__env_invertedpendulum)                                                        \
	X(sr__env_invertedpendulum_v4)                                                     \
	X(sr__env_inverteddoublependulum)                                                  \
	X(sr__env_inverteddoublependulum_v4)                                               \
	X(sr__env_reacher)                                                                 \
	X(sr__env_reacher_v4)                                                              \
	X(sr__env_swimmer)                                                                 \
	X(sr__env_swimmer_v4)                                                              \
	X(sr__env_pusher)                                                                  \
	X(sr__env_pusher_v4)
#else
#define SR_MUJOCO_ENVS(X)
#endif

#define SR_BUILTIN_ENVS(X)                                                                 \
	X(sr__env_cartpole)                                                                \
	X(sr__env_pendulum)                                                                \
	X(sr__env_mountaincar)                                                             \
	X(sr__env_mountaincar_continuous)                                                  \
	X(sr__env_acrobot)                                                                 \
	SR_BOX2D_ENVS(X)                                                                   \
	SR_MUJOCO_ENVS(X)                                                                  \
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

/*
 * The instance RNG of a built-in env, chosen by spec->params[SR__P_RNG]
 * (the parameter rng=stepring|numpy; the same slot in every built-in env):
 * 0, the default, sr_rng seeded from (seed, index); 1, NumPy's
 * Generator(PCG64(SeedSequence(seed + index))), so that instance i seeded
 * with s draws what Gymnasium's env.reset(seed=s + i) draws.
 *
 * The plain-data envs keep either in the same 32-byte sr_rng slot of their
 * state (np_random.h: sr_np_load / sr_np_store; the state does not grow):
 * PCG64 is a 128-bit state and a 128-bit increment, and NumPy's buffered
 * 32-bit half stays empty because they draw 64 bits at a time. A valid
 * PCG64 slot has an odd increment (SeedSequence's seeding makes it odd,
 * and the LCG's period needs it); any state value is valid.
 *
 * The functions take the choice as a bool, read once per batch: the
 * default path costs one well-predicted branch per draw, and step() of the
 * classic-control envs draws nothing.
 */
enum { SR__P_RNG = 5 };

static inline bool sr__np_rng(const sr_env_spec *spec)
{
	return spec->params[SR__P_RNG] != 0;
}

static inline void sr__rng_slot_seed(bool np, sr_rng *r, uint64_t seed, uint64_t index)
{
	if (np) {
		sr_np_pcg64 g;
		uint64_t lo = seed + index;

		/* seed + index as Python adds them: past 2^64 it carries */
		sr_np_seed128(&g, lo, lo < seed);
		sr_np_store(&g, r->s);
	} else {
		sr_rng_seed(r, seed, index);
	}
}

static inline uint64_t sr__rng_slot_next(bool np, sr_rng *r)
{
	if (np) {
		sr_np_pcg64 g;
		uint64_t v;

		sr_np_load(&g, r->s);
		v = sr_np_next64(&g);
		sr_np_store(&g, r->s);
		return v;
	}
	return sr_rng_next(r);
}

/* uniform(lo, hi): lo + (hi - lo) * (53 bits / 2^53), NumPy's formula and
 * sr_rng_range's. */
static inline double sr__rng_slot_range(bool np, sr_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * ((double)(sr__rng_slot_next(np, r) >> 11) * 0x1.0p-53);
}

static inline int sr__rng_slot_ok(bool np, const sr_rng *r)
{
	return np ? (r->s[2] & 1) != 0 : sr__rng_ok(r);
}

/*
 * Env parameters (sr_env_param_at, include/stepring/env.h): the attributes
 * of Gymnasium's env of the same id that the implementation reads. A
 * settable one lives in a spec->params slot, so a pool's copy of the spec
 * (p->cfg.spec) carries it and the functions read it through @spec, once
 * per batch: one value for every env of a pool. SR__PK_XOR: the double's
 * bits XOR the default's bits (0 is the default, so a spec with default
 * parameters keeps all-zero slots, as before they existed: checkpoints and
 * spec comparisons are unchanged); SR__PK_RAW: the double's bits;
 * SR__PK_BOOL: 0 or 1; SR__PK_FIXED: no slot, always @def (compiled in).
 */
enum { SR__PK_XOR, SR__PK_RAW, SR__PK_BOOL, SR__PK_FIXED };

struct sr__param {
	const char *name;
	double def;       /* the default; SR__PK_FIXED: the value */
	uint8_t kind;     /* SR__PK_* */
	int8_t slot;      /* spec->params[slot]; -1 for SR__PK_FIXED */
	uint8_t flags;    /* SR_ENV_PARAM_CREATE, SR_ENV_PARAM_LIVE */
	const char *note; /* not LIVE: why */
};

struct sr__params {
	const struct sr__param *v;
	size_t n;
};

extern const struct sr__params sr__cartpole_params, sr__pendulum_params,
	sr__mountaincar_params, sr__mountaincar_continuous_params, sr__acrobot_params;
#ifdef SR_HAVE_BOX2D
extern const struct sr__params sr__lunar_params, sr__biped_params;
#endif

/* The parameter table of @spec's env type (by its step function), NULL for
 * an env without (spin, plugins). */
const struct sr__params *sr__env_params(const sr_env_spec *spec);
/* Apply "name=value,..." to @spec's parameter slots: keys with
 * SR_ENV_PARAM_LIVE when @live, else with SR_ENV_PARAM_CREATE (and rng=);
 * finite numbers (0/1, true/false for a bool). All or nothing: 0, or
 * -EINVAL with @spec unchanged (the message names the key and why). */
int sr__env_set_params(sr_env_spec *spec, const char *params, bool live);

/* A SR__PK_XOR parameter in slot @slot with default @def (the step
 * functions read theirs through this, once per batch). */
static inline double sr__pget(const sr_env_spec *spec, int slot, double def)
{
	uint64_t b;
	double v;

	memcpy(&b, &def, sizeof(b));
	b ^= spec->params[slot];
	memcpy(&v, &b, sizeof(v));
	return v;
}

/* Parse "rng=stepring|numpy" and the env's SR_ENV_PARAM_CREATE parameters
 * (the classic-control envs) into @spec; -EINVAL for another key or value. */
int sr__rng_configure(sr_env_spec *spec, const char *params);
/* The value of one "rng" key: 0 or -EINVAL (message names the env). */
int sr__rng_param(sr_env_spec *spec, const char *val);

/* Parameters of the Box2D envs (box2d_*.cc). */
int sr__lunar_configure(sr_env_spec *spec, const char *params);
int sr__biped_configure(sr_env_spec *spec, const char *params);
/* Time b2World::Step alone on this thread (bench env's ceiling): returns
 * the ns and world steps counted since the last call in *ns, *steps, then
 * counts from 0 when @on. Box2D builds only. */
void sr__box2d_world_timing(int on, uint64_t *ns, uint64_t *steps);

/* The MuJoCo envs' internals (envs/mujoco/; MuJoCo builds only). */
/* True when @spec is one of the MuJoCo env types. */
bool sr__is_mujoco(const sr_env_spec *spec);
/* Gymnasium's constructor arguments: "ctrl_cost_weight=0.002,...". */
int sr__mujoco_configure(sr_env_spec *spec, const char *params);
/* The info terms of the last reset or step of one instance: their names
 * (*names, Gymnasium's keys; arrays as key_0, key_1) and up to @cap values
 * (NaN for a term the last call did not give: reset gives fewer). Returns
 * the number of terms or -EINVAL. @state may be NULL (names only). */
int sr__mujoco_info(const sr_env_spec *spec, const void *state, const char *const **names,
		    double *values, size_t cap);
/* The observation entries computed with sin/cos ([*first, *first + *count)). */
int sr__mujoco_trig(const sr_env_spec *spec, uint32_t *first, uint32_t *count);
/* Time the mj_step x frame_skip loops alone on this thread (bench env's
 * ceiling): as sr__box2d_world_timing. */
void sr__mujoco_physics_timing(int on, uint64_t *ns, uint64_t *steps);
/* Reset n instances the ordinary way (how 0), through mj_resetData (1), or
 * after filling each mjData buffer with garbage bytes (2): the tests'
 * proof that the ordinary reset writes everything a step reads. */
int sr__mujoco_reset_how(const sr_env_spec *spec, void *states, size_t n, void *obs, int how);
/* One instance's mjData sizes: main buffer, stack (bytes), the constraint
 * and contact counts now. */
int sr__mujoco_sizes(const void *state, size_t *buffer_bytes, size_t *stack_bytes, int *nefc,
		     int *ncon);
/* Where save() puts its parts: a header, the state now, the last
 * operation's inputs, the info terms (bytes each; in that order). */
int sr__mujoco_save_layout(const sr_env_spec *spec, size_t *hdr, size_t *cur, size_t *pre,
			   size_t *info);
/* The embedded model file names in the envs' order, NULL past the end. */
const char *sr__mujoco_xml_name(unsigned x);

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

/*
 * stepring env ABI.
 *
 * An env type is a versioned, constant spec: spaces, the size of one
 * instance's state, and batched functions over n contiguous instances.
 * The state is plain data (no pointers, no handles): copying its bytes is a
 * checkpoint, and restoring them resumes the instance bit-exactly. Every
 * instance carries its own RNG inside its state, seeded from
 * (seed, instance index), so results never depend on which thread steps it.
 *
 * Truncation (max_episode_steps) is the runtime's job, never the env's: an
 * env only reports terminated.
 *
 * Instance i of a batch lives at (char *)states + i * spec->state_size.
 * Observations are obs_dim elements per instance, contiguous, of the
 * spec's obs_dtype (ABI v3; float32 for v1 and v2 specs and whenever
 * obs_dtype is 0): the `float *obs` parameters below point to elements of
 * that type (an env with float64 observations casts them to double *).
 * Actions: discrete -> one int32 per instance, in [0, act_n); box -> act_dim
 * float32 per instance, finite but possibly outside [act_low, act_high]:
 * the env clips them as its reference does (the runtime refuses NaN and
 * inf). sr_env_action_size() gives the byte size of one action.
 * Rewards are written as double (Gymnasium returns Python floats); the
 * runtime stores float32 in the ring.
 *
 * Thread safety: the functions touch only the instances passed in, so
 * disjoint slices may be stepped concurrently.
 *
 * Opaque state (ABI v2, SR_ENV_F_OPAQUE): an env whose instance is not
 * plain data (a physics engine's heap of bodies and contacts) keeps a
 * handle in its state_size bytes, and declares create/destroy (called once
 * per instance by the runtime, before seed and after the last use) and
 * save/load (serialize one instance to at most save_max bytes and back; a
 * loaded instance continues bit-exactly). Such states must never be copied
 * with memcpy: checkpoints and exact resume go through save/load. The
 * runtime may move a whole opaque state (the handle bytes) to another slot
 * of the same env type, so an env must not keep the address of its state
 * bytes.
 *
 * Observation dtype (ABI v3): obs_dtype says the element type of the
 * observations (float64 for MuJoCo, uint8 for images, int64 for a
 * discrete observation space), obs_kind the space, obs_low64/obs_high64
 * exact bounds.
 *
 * Plugins: a shared object exporting `const sr_env_spec sr_env_plugin_spec`
 * (SR_ENV_PLUGIN_SYMBOL) with abi_version = SR_ENV_ABI_VERSION (version 1
 * and 2 specs, without the later tails, still load: the tails read as
 * zero). See docs/envs.md.
 */
#ifndef STEPRING_ENV_H
#define STEPRING_ENV_H

#include "stepring/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any change of sr_env_spec's layout or of a function's contract.
 * Version 2 appended the tail after set_phys (flags .. load), version 3
 * the observation's element type and space (obs_dtype .. obs_high64).
 * Older specs (spec_size SR_ENV_SPEC_SIZE_V1 or SR_ENV_SPEC_SIZE_V2) are
 * still accepted, their missing tails reading as zero. */
#define SR_ENV_ABI_VERSION 3u
#define SR_ENV_ABI_VERSION_MIN 1u
#define SR_ENV_PLUGIN_SYMBOL "sr_env_plugin_spec"
#define SR_ENV_MAX_DIMS 4
/* Bounds sr_env_validate enforces on any spec (a plugin's too). */
#define SR_ENV_ID_MAX 63                 /* bytes of id and name (checkpoints keep 64) */
#define SR_ENV_MAX_STATE_SIZE (1u << 20) /* bytes per instance */
#define SR_ENV_MAX_PHYS 64               /* n_phys */

enum sr_space_kind {
	SR_SPACE_DISCRETE = 1, /* action: int32 in [0, act_n); obs (v3): one integer */
	SR_SPACE_BOX = 2,      /* act_dim float32, bounds act_low, act_high (the env clips) */
	SR_SPACE_MULTI_DISCRETE = 3, /* obs only (v3): obs_dim integers, each in its bounds */
	SR_SPACE_MULTI_BINARY = 4,   /* obs only (v3): obs_dim values, each 0 or 1 */
};

/*
 * Element types of observations (ABI v3, sr_env_spec.obs_dtype), as NumPy
 * names them. Float32 is 0, so a v1 or v2 spec (whose tail reads as zero)
 * is float32, the fast path. SR_DTYPE_BOOL is one byte holding 0 or 1.
 */
enum sr_dtype {
	SR_DTYPE_FLOAT32 = 0,
	SR_DTYPE_FLOAT64 = 1,
	SR_DTYPE_UINT8 = 2,
	SR_DTYPE_INT8 = 3,
	SR_DTYPE_INT16 = 4,
	SR_DTYPE_INT32 = 5,
	SR_DTYPE_INT64 = 6,
	SR_DTYPE_BOOL = 7,
};
#define SR_DTYPE_COUNT 8u

/** Bytes of one element of @dtype (enum sr_dtype), 0 for an unknown one. */
static inline size_t sr_dtype_size(uint32_t dtype)
{
	static const unsigned char size[SR_DTYPE_COUNT] = {4, 8, 1, 1, 2, 4, 8, 1};

	return dtype < SR_DTYPE_COUNT ? size[dtype] : 0;
}

/** NumPy's name of @dtype ("float32", ..., "bool"), "?" for an unknown one. */
static inline const char *sr_dtype_name(uint32_t dtype)
{
	static const char *const name[SR_DTYPE_COUNT] = {"float32", "float64", "uint8", "int8",
							 "int16",   "int32",   "int64", "bool"};

	return dtype < SR_DTYPE_COUNT ? name[dtype] : "?";
}

typedef struct sr_env_spec sr_env_spec;

struct sr_env_spec {
	uint32_t abi_version;  /* SR_ENV_ABI_VERSION */
	uint32_t spec_size;    /* sizeof(sr_env_spec) as compiled by the plugin */
	const char *id;        /* Gymnasium id, "CartPole-v1" */
	const char *name;      /* short name, "cartpole" */
	uint32_t state_size;   /* bytes per instance (multiple of 8) */
	uint32_t max_episode_steps; /* TimeLimit applied by the runtime; 0 = none */

	/* Observation space: float32 box. */
	uint32_t obs_ndim;
	uint32_t obs_shape[SR_ENV_MAX_DIMS];
	uint32_t obs_dim;        /* product of obs_shape */
	const float *obs_low;    /* obs_dim values, or NULL for (-inf, inf) */
	const float *obs_high;

	/* Action space. */
	uint32_t act_kind;       /* enum sr_space_kind */
	uint32_t act_n;          /* discrete: number of actions */
	uint32_t act_dim;        /* box: float32 per action; discrete: 1 */
	const float *act_low;    /* box: act_dim values */
	const float *act_high;

	/* Physical state as doubles, for reference replays (envcheck): the
	 * Gymnasium internal state (x, x_dot, theta, theta_dot for CartPole).
	 * 0 if the env has none (spin). */
	uint32_t n_phys;
	uint32_t reserved0;

	/* Type parameters, read by the functions through @spec (the spin env
	 * keeps its cost, obs size and episode length here). */
	uint64_t params[8];

	/* Seed instances [0, n): instance i gets an RNG seeded from
	 * (seed, first_index + i). Does not reset; call reset next. */
	void (*seed)(const sr_env_spec *spec, void *states, size_t n, uint64_t seed,
		     uint64_t first_index);
	/* Reset n instances: draw an initial state from the instance RNG and
	 * write obs (n * obs_dim floats). */
	void (*reset)(const sr_env_spec *spec, void *states, size_t n, float *obs);
	/* Step n instances with n actions; write obs, reward, terminated
	 * (0/1). Stepping a terminated instance without reset is undefined but
	 * must not crash. */
	void (*step)(const sr_env_spec *spec, void *states, size_t n, const void *actions,
		     float *obs, double *reward, uint8_t *terminated);
	/* Observation of one instance from its current state. */
	void (*observe)(const sr_env_spec *spec, const void *state, float *obs);
	/* Read/write the n_phys physical doubles of one instance (NULL when
	 * n_phys == 0). set_phys leaves the RNG alone. */
	void (*get_phys)(const sr_env_spec *spec, const void *state, double *phys);
	void (*set_phys)(const sr_env_spec *spec, void *state, const double *phys);

	/* ---- ABI v2 (absent, i.e. zero, in a v1 spec) ---- */
	uint32_t flags;      /* SR_ENV_F_OPAQUE: the state holds pointers; use the hooks */
	uint32_t save_max;   /* SR_ENV_F_OPAQUE: upper bound of save()'s bytes per instance */
	/* 0 when @state is one step() may take (finite, within the env's bounds), else -EINVAL.
	 * Used by checkpoint restore and set_phys callers. NULL: every state is accepted. */
	int (*check_state)(const sr_env_spec *spec, const void *state);
	/* SR_ENV_F_OPAQUE: create/destroy per instance (state_size bytes hold the handle).
	 * create returns 0 or -errno (-ENOMEM) and leaves nothing to destroy on
	 * failure; destroy accepts an instance whose create failed or that was
	 * zeroed and never created (a no-op then). */
	int (*create)(const sr_env_spec *spec, void *state);
	void (*destroy)(const sr_env_spec *spec, void *state);
	/* SR_ENV_F_OPAQUE: serialize one instance, RNG included (a loaded instance
	 * continues bit-exactly). save writes *len <= save_max bytes, -ENOSPC if
	 * cap is too small. load takes a created instance and returns -EINVAL for
	 * bytes that are not a save of this env type (the instance then stays
	 * valid, in an unspecified state). */
	int (*save)(const sr_env_spec *spec, const void *state, void *buf, size_t cap, size_t *len);
	int (*load)(const sr_env_spec *spec, void *state, const void *buf, size_t len);

	/* ---- ABI v3 (absent, i.e. zero, in a v1 or v2 spec) ---- */
	/* Element type of the observation (enum sr_dtype; 0: float32). */
	uint32_t obs_dtype;
	/* Kind of the observation space (enum sr_space_kind; 0 reads as
	 * SR_SPACE_BOX). SR_SPACE_DISCRETE: obs_dim 1 (obs_ndim 0, a scalar),
	 * an integer dtype, bounds [start, start + n - 1]. MULTI_DISCRETE: an
	 * integer dtype, bounds [start_j, start_j + nvec_j - 1] per element.
	 * MULTI_BINARY: an integer or bool dtype, bounds [0, 1]. */
	uint32_t obs_kind;
	/* Bounds as doubles (obs_dim each; exact for float64 and for integers
	 * up to 2^53), used instead of obs_low/obs_high when not NULL. Both or
	 * neither; an integer space needs them (or float obs_low/obs_high). */
	const double *obs_low64;
	const double *obs_high64;
};

/* flags */
#define SR_ENV_F_OPAQUE 1u /* state holds pointers: create/destroy/save/load required */
/* The envs live in worker programs of another language (SR_POOL_F_PROCS with
 * worker_argv or proc_inline, e.g. Python envs): the spec describes their
 * spaces only, its functions are never called, and a checkpoint holds each
 * env's state as its worker program serializes it (a length and bytes). */
#define SR_ENV_F_FOREIGN 2u
#define SR_ENV_F_KNOWN 3u

/* The size of a version 1 spec: everything before the v2 tail; of a
 * version 2 spec: everything before the v3 tail. */
#define SR_ENV_SPEC_SIZE_V1 ((uint32_t)offsetof(sr_env_spec, flags))
#define SR_ENV_SPEC_SIZE_V2 ((uint32_t)offsetof(sr_env_spec, obs_dtype))

/** True when instances of @spec are opaque (never memcpy them). */
static inline int sr_env_is_opaque(const sr_env_spec *spec)
{
	return (spec->flags & SR_ENV_F_OPAQUE) != 0;
}

/** Bytes of one action: 4 for discrete (int32), 4 * act_dim for box. */
static inline size_t sr_env_action_size(const sr_env_spec *spec)
{
	return spec->act_kind == SR_SPACE_DISCRETE ? 4u : 4u * (size_t)spec->act_dim;
}

/** Bytes of one observation: obs_dim elements of obs_dtype (v3). */
static inline size_t sr_env_obs_size(const sr_env_spec *spec)
{
	return (size_t)spec->obs_dim * sr_dtype_size(spec->obs_dtype);
}

/**
 * Check a spec for consistency (ABI version, sizes, function pointers).
 * Version 1 and 2 specs (spec_size SR_ENV_SPEC_SIZE_V1 / _V2) are checked
 * without reading the tails they lack. Returns 0, -EPROTO on an ABI version or spec_size
 * mismatch (the message names both versions), -EINVAL otherwise, with the
 * reason in sr_last_error().
 */
SR_EXPORT int sr_env_validate(const sr_env_spec *spec);

/**
 * Copy a valid spec of any accepted ABI version into a current one: a v1
 * spec gets its tail zeroed, and @out says version SR_ENV_ABI_VERSION with
 * spec_size sizeof(sr_env_spec). Returns sr_env_validate's result; @out is
 * untouched on error.
 */
SR_EXPORT int sr_env_spec_upgrade(const sr_env_spec *in, sr_env_spec *out);

/**
 * Find an env type by Gymnasium id ("CartPole-v1") or short name
 * ("cartpole") and copy its spec into @out. Parameters follow a colon:
 * every built-in env takes rng=stepring (the default: sr_rng seeded from
 * (seed, index)) or rng=numpy (NumPy's Generator(PCG64(SeedSequence(seed +
 * index))), so instance i draws what Gymnasium's env.reset(seed=seed + i)
 * draws: "CartPole-v1:rng=numpy"); the spin benchmark env takes more:
 * "spin:cost_us=50,obs_dim=64,ep_len=1000".
 * Returns 0 or -ENOENT (message lists the known envs), -EINVAL for bad
 * parameters.
 */
SR_EXPORT int sr_env_find(const char *name, sr_env_spec *out);

/**
 * Make @n instances of @spec usable in @states (n * state_size bytes): the
 * bytes are zeroed, then an opaque env's create is called for each (on the
 * calling thread: call it from the thread whose NUMA node should hold the
 * instances). On failure the ones created are destroyed and the error of
 * create is returned (-ENOMEM). Plain-data envs: zeroing only.
 */
SR_EXPORT int sr_env_create_instances(const sr_env_spec *spec, void *states, size_t n);
/** Destroy @n instances made by sr_env_create_instances (no-op for plain data). */
SR_EXPORT void sr_env_destroy_instances(const sr_env_spec *spec, void *states, size_t n);

/** Number of built-in env types, and the i-th one (NULL if out of range). */
SR_EXPORT size_t sr_env_count(void);
SR_EXPORT const sr_env_spec *sr_env_at(size_t i);

/**
 * Load an env plugin: dlopen @path, find SR_ENV_PLUGIN_SYMBOL, check its ABI
 * version and validate it; copy the spec into @out. The library stays
 * loaded for the life of the process. Returns 0, -ENOENT (no file or no
 * symbol), -EPROTO (ABI version mismatch: the message names both versions),
 * -EINVAL (invalid spec).
 */
SR_EXPORT int sr_env_load_plugin(const char *path, sr_env_spec *out);

/*
 * Env parameters: the attributes of Gymnasium's env of the same id that
 * stepring's implementation reads (CartPole's gravity, masspole, ...,
 * Pendulum's g, LunarLander's wind_power), by Gymnasium's attribute names,
 * with their value in a spec. A settable one is a spec->params slot: every
 * env of a pool shares its value (the pool's copy of the spec). The
 * built-in envs have them; spin and plugins have none. See docs/envs.md.
 */
typedef struct sr_env_param {
	const char *name; /* Gymnasium's attribute name ("gravity") */
	double value;     /* its value in the spec asked about (a bool is 0 or 1) */
	uint32_t flags;   /* SR_ENV_PARAM_*; 0: read-only (compiled in) */
	uint32_t reserved0;
	const char *note; /* not settable on a live pool: why (else NULL) */
} sr_env_param;

#define SR_ENV_PARAM_CREATE 1u /* a parameter of sr_env_find: "CartPole-v1:gravity=12" */
#define SR_ENV_PARAM_LIVE 2u   /* sr_pool_set_params changes it on a live pool */
#define SR_ENV_PARAM_BOOL 4u   /* a bool attribute: value is 0 or 1 */

/**
 * The @i-th parameter of @spec's env type, with its value in @spec, into
 * @out. Returns 0, or -ENOENT past the last one (an env without parameters
 * has none), -EINVAL for NULL arguments.
 */
SR_EXPORT int sr_env_param_at(const sr_env_spec *spec, size_t i, sr_env_param *out);
/** The parameter @name of @spec's env type: 0, or -ENOENT (the message lists its parameters). */
SR_EXPORT int sr_env_param_find(const sr_env_spec *spec, const char *name, sr_env_param *out);

/* The per-instance RNG every built-in env uses (xoshiro256** seeded by
 * splitmix64). Plugins may use it too: it is inline and header-only. */
typedef struct sr_rng {
	uint64_t s[4];
} sr_rng;

static inline uint64_t sr_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Seed from (seed, index): independent streams per instance. */
static inline void sr_rng_seed(sr_rng *r, uint64_t seed, uint64_t index)
{
	uint64_t x = seed ^ (0xd1b54a32d192ed03ull * (index + 1));
	for (int i = 0; i < 4; i++)
		r->s[i] = sr_splitmix64(&x);
}

static inline uint64_t sr_rng_next(sr_rng *r)
{
	uint64_t *s = r->s;
	uint64_t t = s[1] << 17;
	uint64_t x = s[1] * 5;
	uint64_t res = ((x << 7) | (x >> 57)) * 9;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = (s[3] << 45) | (s[3] >> 19);
	return res;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double sr_rng_uniform(sr_rng *r)
{
	return (double)(sr_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform double in [lo, hi). */
static inline double sr_rng_range(sr_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * sr_rng_uniform(r);
}

#ifdef __cplusplus
}
#endif
#endif

/*
 * Shared parts of the Box2D envs (C++, internal): the instance RNG, the
 * parameter parser, the per-episode action log that save/load replays, and
 * the serialized form of an instance.
 *
 * An instance's RNG is either the stepring one (sr_rng, seeded from
 * (seed, index), the default) or, with the parameter rng=numpy, a copy of
 * NumPy's Generator(PCG64(SeedSequence(seed + index))) with NumPy's
 * uniform() and integers() (the 32-bit Lemire path with its buffered half
 * word), so that instance i seeded with s draws what Gymnasium's
 * env.reset(seed=s + i) draws: the reference trajectories can then be
 * replayed with the same terrain, initial force and engine dispersion.
 *
 * Save/load: an instance is a function of its RNG at the start of the
 * episode and the actions of the episode so far (each reset builds a new
 * world; Box2D is deterministic for the same inputs in one build). save
 * writes both, with the current RNG and a hash of the current obs as
 * checks; load rebuilds the episode, replays the actions and compares both
 * (bytes that are not a save of this build's env give -EINVAL).
 */
#ifndef SR_BOX2D_COMMON_H
#define SR_BOX2D_COMMON_H

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#include <box2d/box2d.h>

#include "envs.h"
#include "np_random.h"

extern "C" int sr__errorf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

namespace sr_b2 {

/* ---- timing of b2World::Step alone (bench env's ceiling) ------------------ */

extern thread_local bool world_timing;
extern thread_local uint64_t world_ns, world_steps;

static inline uint64_t mono_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust on a shared machine */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Gymnasium's world.Step(1 / FPS, 6 * 30, 2 * 30), timed when asked. */
static inline void world_step(b2World *w)
{
	if (!world_timing) {
		w->Step((float)(1.0 / 50), 6 * 30, 2 * 30);
		return;
	}
	uint64_t t0 = mono_ns();
	w->Step((float)(1.0 / 50), 6 * 30, 2 * 30);
	world_ns += mono_ns() - t0;
	world_steps++;
}

/* ---- the instance RNG ---------------------------------------------------- */

struct Rng {
	uint32_t numpy; /* 0: sr_rng; 1: NumPy PCG64 */
	uint32_t pad;
	sr_rng x;
	sr_np_pcg64 pcg;

	void seed(bool np, uint64_t seed, uint64_t index)
	{
		memset(this, 0, sizeof(*this));
		numpy = np;
		if (np)
			sr_np_seed(&pcg, seed + index);
		else
			sr_rng_seed(&x, seed, index);
	}
	/* NumPy's uniform(lo, hi): lo + (hi - lo) * (53 bits / 2^53). */
	double uniform(double lo, double hi)
	{
		uint64_t r = numpy ? sr_np_next64(&pcg) : sr_rng_next(&x);
		return lo + (hi - lo) * ((double)(r >> 11) * 0x1.0p-53);
	}
	/* Integer in [lo, hi), hi - lo < 2^32: NumPy's Lemire method on 32-bit
	 * draws (rejecting the few biased ones). */
	int64_t integers(int64_t lo, int64_t hi)
	{
		uint32_t r;
		SR_NP_LEMIRE32((uint32_t)(hi - lo), draw32(), r);
		return lo + (int64_t)r;
	}
	uint32_t draw32() { return numpy ? sr_np_next32(&pcg) : (uint32_t)(sr_rng_next(&x) >> 32); }
	bool same(const Rng &o) const { return !memcmp(this, &o, sizeof(*this)); }
};

/* ---- parameters: "key=value,..." ----------------------------------------- */

static inline uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static inline double bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* Calls fn(key, value) for each pair; fn returns 0 or -EINVAL (it sets the
 * message). */
template <typename F>
static int parse_params(const char *id, const char *params, F fn)
{
	char key[32], val[64];
	const char *p = params;

	while (*p) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || eq == p || (size_t)(eq - p) >= sizeof(key) ||
		    (size_t)(end - eq - 1) >= sizeof(val) || end == eq + 1)
			return sr__errorf(-EINVAL, "env '%s': bad parameter '%.*s' (key=value)", id,
					  (int)(end - p), p);
		memcpy(key, p, (size_t)(eq - p));
		key[eq - p] = '\0';
		memcpy(val, eq + 1, (size_t)(end - eq - 1));
		val[end - eq - 1] = '\0';
		int err = fn(key, val);
		if (err)
			return err;
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* A finite double, or -EINVAL. */
static inline int parse_double(const char *id, const char *key, const char *val, double *out)
{
	char *e;
	double d = strtod(val, &e);

	if (*e || e == val || !std::isfinite(d))
		return sr__errorf(-EINVAL, "env '%s': %s='%s' is not a finite number", id, key, val);
	*out = d;
	return 0;
}

static inline int parse_bool(const char *id, const char *key, const char *val, bool *out)
{
	if (!strcmp(val, "1") || !strcmp(val, "true")) {
		*out = true;
		return 0;
	}
	if (!strcmp(val, "0") || !strcmp(val, "false")) {
		*out = false;
		return 0;
	}
	return sr__errorf(-EINVAL, "env '%s': %s='%s' must be 0 or 1", id, key, val);
}

/* ---- save format ---------------------------------------------------------- */

/* Header of a saved instance; the episode's actions follow (n_actions *
 * action_size bytes). */
struct SaveHeader {
	uint32_t magic;       /* per env type */
	uint32_t version;     /* 1 */
	uint32_t action_size; /* bytes per logged action */
	uint32_t flags;       /* SAVE_F_WORLD: an episode is running */
	uint32_t n_actions;
	uint32_t spec_hash;   /* the type's parameters, folded */
	uint64_t obs_hash;    /* hash of the obs now (a check after the replay) */
	Rng rng_start;        /* RNG before the reset that began the episode */
	Rng rng_now;          /* RNG now (a check after the replay) */
};

/* FNV-1a over the bytes of an obs. */
static inline uint64_t obs_hash(const float *obs, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const unsigned char *p = (const unsigned char *)obs;
	for (size_t i = 0; i < n * sizeof(float); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

enum { SAVE_F_WORLD = 1 };

static inline uint32_t params_hash(const sr_env_spec *spec)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 8; i++)
		h = (h ^ spec->params[i]) * 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* The actions of the running episode, as the bytes the runtime passed. */
struct ActionLog {
	std::vector<unsigned char> bytes;
	uint32_t n = 0;
	bool overflow = false;

	void clear()
	{
		n = 0;
		overflow = false;
		bytes.clear();
	}
	void push(const void *a, size_t size, uint32_t cap)
	{
		if (n >= cap) {
			overflow = true;
			return;
		}
		const unsigned char *p = (const unsigned char *)a;
		bytes.insert(bytes.end(), p, p + size);
		n++;
	}
};

} // namespace sr_b2

#endif

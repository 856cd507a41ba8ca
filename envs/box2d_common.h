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

/* ---- NumPy's PCG64 and SeedSequence (for rng=numpy) ---------------------- */

typedef unsigned __int128 u128;

static inline uint32_t ss_hashmix(uint32_t value, uint32_t *hash_const)
{
	value ^= *hash_const;
	*hash_const *= 0x931e8875u;
	value *= *hash_const;
	value ^= value >> 16;
	return value;
}

static inline uint32_t ss_mix(uint32_t x, uint32_t y)
{
	uint32_t r = 0xca01f9ddu * x - 0x4973f715u * y;
	return r ^ (r >> 16);
}

struct Pcg64 {
	u128 state, inc;
	uint32_t has32, u32;

	void step() { state = state * (((u128)2549297995355413924ull << 64) | 4865540595714422341ull) + inc; }
	uint64_t next64()
	{
		step();
		uint64_t x = (uint64_t)(state >> 64) ^ (uint64_t)state;
		unsigned rot = (unsigned)(state >> 122);
		return (x >> rot) | (x << ((64 - rot) & 63));
	}
	uint32_t next32()
	{
		if (has32) {
			has32 = 0;
			return u32;
		}
		uint64_t v = next64();
		has32 = 1;
		u32 = (uint32_t)(v >> 32);
		return (uint32_t)v;
	}
	/* SeedSequence(entropy).generate_state(4, uint64), then PCG64's seeding. */
	void seed(uint64_t entropy)
	{
		uint32_t pool[4], words[2], hc = 0x43b0d7e5u, st[8];
		size_t nw = 0;

		do { /* the int as little-endian 32-bit words; 0 is one word */
			words[nw++] = (uint32_t)entropy;
			entropy >>= 32;
		} while (entropy);
		for (int i = 0; i < 4; i++)
			pool[i] = ss_hashmix(i < (int)nw ? words[i] : 0, &hc);
		for (int s = 0; s < 4; s++)
			for (int d = 0; d < 4; d++)
				if (s != d)
					pool[d] = ss_mix(pool[d], ss_hashmix(pool[s], &hc));
		hc = 0x8b51f9ddu;
		for (int i = 0; i < 8; i++) {
			uint32_t v = pool[i % 4] ^ hc;
			hc *= 0x58f38dedu;
			v *= hc;
			st[i] = v ^ (v >> 16);
		}
		uint64_t v64[4];
		for (int i = 0; i < 4; i++)
			v64[i] = (uint64_t)st[2 * i] | ((uint64_t)st[2 * i + 1] << 32);
		u128 initstate = ((u128)v64[0] << 64) | v64[1];
		u128 initseq = ((u128)v64[2] << 64) | v64[3];
		state = 0;
		inc = (initseq << 1) | 1;
		step();
		state += initstate;
		step();
		has32 = 0;
		u32 = 0;
	}
};

/* ---- the instance RNG ---------------------------------------------------- */

struct Rng {
	uint32_t numpy; /* 0: sr_rng; 1: NumPy PCG64 */
	uint32_t pad;
	sr_rng x;
	Pcg64 pcg;

	void seed(bool np, uint64_t seed, uint64_t index)
	{
		memset(this, 0, sizeof(*this));
		numpy = np;
		if (np)
			pcg.seed(seed + index);
		else
			sr_rng_seed(&x, seed, index);
	}
	/* NumPy's uniform(lo, hi): lo + (hi - lo) * (53 bits / 2^53). */
	double uniform(double lo, double hi)
	{
		uint64_t r = numpy ? pcg.next64() : sr_rng_next(&x);
		return lo + (hi - lo) * ((double)(r >> 11) * 0x1.0p-53);
	}
	/* Integer in [lo, hi), hi - lo < 2^32: NumPy's Lemire method on 32-bit
	 * draws (rejecting the few biased ones). */
	int64_t integers(int64_t lo, int64_t hi)
	{
		uint32_t n = (uint32_t)(hi - lo);
		uint64_t m = (uint64_t)draw32() * n;
		uint32_t left = (uint32_t)m;

		if (left < n) {
			uint32_t threshold = (uint32_t)(0u - n) % n;
			while (left < threshold) {
				m = (uint64_t)draw32() * n;
				left = (uint32_t)m;
			}
		}
		return lo + (int64_t)(m >> 32);
	}
	uint32_t draw32() { return numpy ? pcg.next32() : (uint32_t)(sr_rng_next(&x) >> 32); }
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

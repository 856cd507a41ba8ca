/*
 * NumPy's default generator, Generator(PCG64(SeedSequence(seed))), for
 * replaying Gymnasium's random streams (internal; C and C++).
 *
 * What is reproduced, from NumPy's documented algorithms:
 *  - SeedSequence(entropy) for a non-negative integer entropy below 2^128,
 *    generate_state(4, uint64), and PCG64's seeding from those words;
 *  - PCG64 (128-bit LCG, XSL-RR output) and its next_uint32, which returns
 *    the low half of a fresh 64-bit draw and keeps the high half for the
 *    next 32-bit draw (uniform() draws do not disturb that buffered half);
 *  - uniform(lo, hi) = lo + (hi - lo) * (53 random bits / 2^53);
 *  - integers(lo, hi) for hi - lo < 2^32: Lemire's multiply-shift on 32-bit
 *    draws, rejecting the few biased ones (NumPy's unmasked default);
 *  - standard_normal(): NumPy's 256-level ziggurat (one 64-bit word per try:
 *    8 bits of layer, a sign bit, 52 bits of |x|; the wedges and the tail
 *    beyond r = 3.654... draw more), on the tables of envs/np_ziggurat.c.
 *
 * Used by every built-in env's rng=numpy parameter (so instance i seeded
 * with s draws what Gymnasium's env.reset(seed=s + i) draws: the initial
 * states of the classic-control envs, the Box2D envs' terrain, forces and
 * dispersion, the MuJoCo envs' reset noise: uniform and standard_normal)
 * and by `stepring envstats --paired` (Gymnasium's action_space.seed(i)
 * and sample() for Discrete and bounded Box spaces).
 */
#ifndef SR_NP_RANDOM_H
#define SR_NP_RANDOM_H

#include <math.h>
#include <stdint.h>

typedef unsigned __int128 sr_np_u128;

typedef struct sr_np_pcg64 {
	sr_np_u128 state, inc;
	uint32_t has32, u32; /* the buffered high half for next_uint32 */
} sr_np_pcg64;

static inline uint32_t sr_np__hashmix(uint32_t value, uint32_t *hash_const)
{
	value ^= *hash_const;
	*hash_const *= 0x931e8875u;
	value *= *hash_const;
	value ^= value >> 16;
	return value;
}

static inline uint32_t sr_np__mix(uint32_t x, uint32_t y)
{
	uint32_t r = 0xca01f9ddu * x - 0x4973f715u * y;
	return r ^ (r >> 16);
}

static inline void sr_np__step(sr_np_pcg64 *g)
{
	const sr_np_u128 mult = ((sr_np_u128)2549297995355413924ull << 64) | 4865540595714422341ull;
	g->state = g->state * mult + g->inc;
}

static inline uint64_t sr_np_next64(sr_np_pcg64 *g)
{
	sr_np__step(g);
	uint64_t x = (uint64_t)(g->state >> 64) ^ (uint64_t)g->state;
	unsigned rot = (unsigned)(g->state >> 122);
	return (x >> rot) | (x << ((64 - rot) & 63));
}

static inline uint32_t sr_np_next32(sr_np_pcg64 *g)
{
	if (g->has32) {
		g->has32 = 0;
		return g->u32;
	}
	uint64_t v = sr_np_next64(g);
	g->has32 = 1;
	g->u32 = (uint32_t)(v >> 32);
	return (uint32_t)v;
}

/*
 * Generator(PCG64(SeedSequence(entropy))) for an entropy below 2^128, given
 * as its low and high 64 bits. SeedSequence hashes the int's little-endian
 * 32-bit words into a pool of 4, padding with zero words: for up to 4 words
 * the padding is the same hash as the int's own high zero words, so the
 * 4 words of (lo, hi) are the int whatever its length.
 */
static inline void sr_np_seed128(sr_np_pcg64 *g, uint64_t lo, uint64_t hi)
{
	uint32_t pool[4], hc = 0x43b0d7e5u, st[8];
	const uint32_t words[4] = {(uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi,
				   (uint32_t)(hi >> 32)};

	for (int i = 0; i < 4; i++)
		pool[i] = sr_np__hashmix(words[i], &hc);
	for (int s = 0; s < 4; s++)
		for (int d = 0; d < 4; d++)
			if (s != d)
				pool[d] = sr_np__mix(pool[d], sr_np__hashmix(pool[s], &hc));
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
	sr_np_u128 initstate = ((sr_np_u128)v64[0] << 64) | v64[1];
	sr_np_u128 initseq = ((sr_np_u128)v64[2] << 64) | v64[3];
	g->state = 0;
	g->inc = (initseq << 1) | 1;
	sr_np__step(g);
	g->state += initstate;
	sr_np__step(g);
	g->has32 = 0;
	g->u32 = 0;
}

/* Generator(PCG64(SeedSequence(entropy))). */
static inline void sr_np_seed(sr_np_pcg64 *g, uint64_t entropy)
{
	sr_np_seed128(g, entropy, 0);
}

/*
 * PCG64 in four 64-bit words, the 32 bytes of a plain-data env's sr_rng
 * slot (the classic-control envs' rng=numpy): w[0], w[1] the state's low
 * and high halves, w[2], w[3] the increment's (always odd). NumPy's
 * buffered 32-bit half is not kept: it is only set by a 32-bit draw, and
 * those envs draw 64 bits at a time (uniform, next64), so it stays empty,
 * as it does in NumPy for the same draws.
 */
static inline void sr_np_load(sr_np_pcg64 *g, const uint64_t w[4])
{
	g->state = ((sr_np_u128)w[1] << 64) | w[0];
	g->inc = ((sr_np_u128)w[3] << 64) | w[2];
	g->has32 = 0;
	g->u32 = 0;
}

static inline void sr_np_store(const sr_np_pcg64 *g, uint64_t w[4])
{
	w[0] = (uint64_t)g->state;
	w[1] = (uint64_t)(g->state >> 64);
	w[2] = (uint64_t)g->inc;
	w[3] = (uint64_t)(g->inc >> 64);
}

/* Generator.uniform(lo, hi). */
static inline double sr_np_uniform(sr_np_pcg64 *g, double lo, double hi)
{
	return lo + (hi - lo) * ((double)(sr_np_next64(g) >> 11) * 0x1.0p-53);
}

/* Lemire's bounded draw in [0, n), 0 < n < 2^32, on 32-bit draws from
 * @draw32 (NumPy's, or another generator's). */
#define SR_NP_LEMIRE32(n, draw32_expr, out)                                                \
	do {                                                                               \
		uint32_t n_ = (n);                                                         \
		uint64_t m_ = (uint64_t)(draw32_expr) * n_;                                \
		uint32_t left_ = (uint32_t)m_;                                             \
		if (left_ < n_) {                                                          \
			uint32_t thr_ = (uint32_t)(0u - n_) % n_;                          \
			while (left_ < thr_) {                                             \
				m_ = (uint64_t)(draw32_expr) * n_;                         \
				left_ = (uint32_t)m_;                                      \
			}                                                                  \
		}                                                                          \
		(out) = (uint32_t)(m_ >> 32);                                              \
	} while (0)

/* Generator.integers(lo, hi), 0 < hi - lo < 2^32. */
static inline int64_t sr_np_integers(sr_np_pcg64 *g, int64_t lo, int64_t hi)
{
	uint32_t r;
	SR_NP_LEMIRE32((uint32_t)(hi - lo), sr_np_next32(g), r);
	return lo + (int64_t)r;
}

/* Generator.random(): 53 random bits / 2^53, in [0, 1). */
static inline double sr_np_next_double(sr_np_pcg64 *g)
{
	return (double)(sr_np_next64(g) >> 11) * 0x1.0p-53;
}

#ifdef __cplusplus
extern "C" {
#endif
/* The ziggurat's tables (envs/np_ziggurat.c): per layer the bound of the
 * fast test, the width per unit of |x| bits, the density at the edge. */
extern const uint64_t sr__np_zig_ki[256];
extern const double sr__np_zig_wi[256], sr__np_zig_fi[256];
#ifdef __cplusplus
}
#endif

/*
 * Generator.standard_normal() with the 64-bit words of @next(@ctx): NumPy's
 * ziggurat. A word is 8 bits of layer, then a sign bit, then 52 bits of |x|
 * in units of the layer's width. Inside the layer's inner rectangle (the
 * fast test, 99% of the words) that is the draw; layer 0's outside is the
 * tail beyond r, drawn by Marsaglia's method on log1p of two uniforms (1 - U
 * keeps log away from 0); the other layers' outside is a wedge, kept when a
 * uniform height under the layer falls below the density. Any word source
 * works: NumPy's PCG64 (sr_np_standard_normal) or another generator's.
 */
static inline double sr_np_normal_from(uint64_t (*next)(void *), void *ctx)
{
	const double r = 3.6541528853610088, inv_r = 0.27366123732975828;

	for (;;) {
		uint64_t w = next(ctx);
		unsigned idx = (unsigned)(w & 0xff);
		uint64_t rabs = (w >> 9) & 0x000fffffffffffffull;
		double x = (double)rabs * sr__np_zig_wi[idx];

		if ((w >> 8) & 1)
			x = -x;
		if (rabs < sr__np_zig_ki[idx])
			return x;
		if (idx == 0) {
			for (;;) {
				double u1 = (double)(next(ctx) >> 11) * 0x1.0p-53;
				double u2 = (double)(next(ctx) >> 11) * 0x1.0p-53;
				double xx = -inv_r * log1p(-u1), yy = -log1p(-u2);
				if (yy + yy > xx * xx)
					return ((rabs >> 8) & 1) ? -(r + xx) : r + xx;
			}
		}
		double u = (double)(next(ctx) >> 11) * 0x1.0p-53;
		if ((sr__np_zig_fi[idx - 1] - sr__np_zig_fi[idx]) * u + sr__np_zig_fi[idx] <
		    exp(-0.5 * x * x))
			return x;
	}
}

static inline uint64_t sr_np__next64_cb(void *g)
{
	return sr_np_next64((sr_np_pcg64 *)g);
}

/* Generator.standard_normal() of @g. */
static inline double sr_np_standard_normal(sr_np_pcg64 *g)
{
	return sr_np_normal_from(sr_np__next64_cb, g);
}

#endif

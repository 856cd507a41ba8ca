/*
 * The one out-of-line routine of the stepping both C workers share
 * (book_pvt.h has the rest, inline): a multiversioned function must have
 * one definition (clang makes its ifunc resolver a global symbol).
 */
#include <string.h>

#include "book_pvt.h"

/*
 * The finite check's test of obs just written (sr__book_env_calls): a
 * function of its own so that it gets the AVX2 clone, called once per
 * SR__NF_CHUNK floats or so, not once per env call. sr__nonfinite_any's
 * loop, unrolled: four vectors (32 floats) per round of the loop's own
 * counting.
 */
SR_VECTOR_CLONES_NOINLINE
static uint32_t obs_nonfinite(const float *a, size_t n)
{
	uint32_t acc = 0;

#pragma GCC unroll 4
	for (size_t i = 0; i < n; i++) {
		uint32_t bits;

		memcpy(&bits, &a[i], sizeof(bits));
		acc |= (bits & 0x7f800000u) + 0x00800000u; /* see sr__nonfinite_any */
	}
	return acc >> 31;
}

/* The clones stay static: GCC gives the ifunc of an extern target_clones
 * function default visibility, whatever -fvisibility says, so it would be
 * exported from the library. */
uint32_t sr__book_obs_nonfinite(const float *a, size_t n)
{
	return obs_nonfinite(a, n);
}

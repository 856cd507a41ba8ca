/*
 * The one out-of-line routine of the stepping both C workers share
 * (book_pvt.h has the rest, inline): a multiversioned function must have
 * one definition (its ifunc resolver is a global symbol).
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
uint32_t sr__book_obs_nonfinite(const float *a, size_t n)
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

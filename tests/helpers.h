/*
 * What the C tests share: a pool's description in one expression, the
 * FNV-1a hash the determinism tests compare runs with, a scratch
 * directory. The cmocka tests' helpers exist when <cmocka.h> was included
 * first; the MPI tests, which do not use cmocka, get the hash alone.
 */
#ifndef SR_TEST_HELPERS_H
#define SR_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "stepring/pool.h"

#ifdef assert_int_equal
/* sr_pool_info of @p; fails the test if it cannot be read. */
static inline sr_pool_info t_pool_info(const sr_pool *p)
{
	sr_pool_info in = {.size = sizeof(in)};

	assert_int_equal(sr_pool_info_get(p, &in), 0);
	return in;
}

/* A fresh directory $TMPDIR/@prefix-XXXXXX (TMPDIR unset: /tmp) into
 * @dir (@len bytes); 0 or -1. Removed with its contents by t_rmtree. */
static inline int t_mkdtemp(char *dir, size_t len, const char *prefix)
{
	const char *t = getenv("TMPDIR");

	snprintf(dir, len, "%s/%s-XXXXXX", t && t[0] ? t : "/tmp", prefix);
	return mkdtemp(dir) ? 0 : -1;
}

static inline int t_rmtree(const char *dir)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}
#endif

/* FNV-1a, 64 bits: start from T_FNV_INIT, fold in bytes. */
#define T_FNV_INIT 0xcbf29ce484222325ull

static inline uint64_t t_fnv(uint64_t h, const void *data, size_t n)
{
	const unsigned char *c = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

/* Fold every column of a batch (and where it starts in the ring). */
static inline uint64_t t_hash_batch(uint64_t h, const sr_batch *b)
{
	h = t_fnv(h, b->obs, (size_t)b->n * b->obs_dim * sizeof(float));
	h = t_fnv(h, b->reward, (size_t)b->n * sizeof(float));
	h = t_fnv(h, b->terminated, b->n);
	h = t_fnv(h, b->truncated, b->n);
	h = t_fnv(h, b->env_id, (size_t)b->n * sizeof(uint32_t));
	return t_fnv(h, &b->first_seq, sizeof(b->first_seq));
}

#endif

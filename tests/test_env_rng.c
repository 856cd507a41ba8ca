/*
 * The built-in envs' rng=numpy: an instance seeded with (s, index) holds
 * NumPy's Generator(PCG64(SeedSequence(s + index))) in its 32-byte RNG
 * slot and draws its reset as Gymnasium's env.reset(seed=s + index) does;
 * the parameter's parsing; pools of threads and of processes seed by the
 * global env index; checkpoints keep the PCG64 state bit-exactly; and
 * check_state refuses RNG states that no seeding makes.
 *
 * Expected values are NumPy's (1.24, Debian), from the one-liners quoted
 * above each table; python/tests/test_seed_parity.py compares the same
 * streams with NumPy and Gymnasium directly.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/checkpoint.h"
#include "envs.h"
#include "np_random.h"
#include "ckpt_craft.h"
#include "helpers.h"

static char dir[256];

static int setup(void **st)
{
	(void)st;
	return t_mkdtemp(dir, sizeof(dir), "sr-envrng");
}

static int teardown(void **st)
{
	(void)st;
	return t_rmtree(dir);
}

static sr_env_spec find(const char *name)
{
	sr_env_spec s;

	if (sr_env_find(name, &s))
		fail_msg("sr_env_find(%s): %s", name, sr_last_error());
	return s;
}

static const char *const classic[] = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0",
				      "MountainCarContinuous-v0", "Acrobot-v1"};
#define N_CLASSIC (sizeof(classic) / sizeof(classic[0]))

/*
 * The slot after seeding, and its first draws, are NumPy's: for entropy e,
 *   g = numpy.random.default_rng(e); st = g.bit_generator.state["state"]
 *   words: st["state"] & (2**64-1), st["state"] >> 64, the same of st["inc"]
 *   draws: g.bit_generator.random_raw(3)
 * e = 0 (seed 0, index 0), 45 (seed 42, index 3) and 2^64 (seed 2^64 - 1,
 * index 1: seed + index carries past 64 bits, as Python's int does).
 */
static void test_seed_is_numpys(void **st)
{
	static const struct {
		uint64_t seed, index, words[4], raw[3];
	} want[] = {
		{0, 0,
		 {0x09585eb7a69561e3ull, 0x1aa1b5345996452dull, 0x588133bc447873a9ull,
		  0x418ddadb3af71a82ull},
		 {11749869230777074271ull, 4976686463289251617ull, 755828109848996024ull}},
		{42, 3,
		 {0x4582998d447fe0d5ull, 0x281a40b36efd5dd3ull, 0x61e1f385676dc983ull,
		  0x5c3ff03b96ac4e7bull},
		 {10572394549507662620ull, 9748940900176413681ull, 14086860535453058132ull}},
		{UINT64_MAX, 1,
		 {0x06e48f7ba888665full, 0xa9accc95fbef0b60ull, 0x6fb87b076eab3685ull,
		  0x0a735a66d6cc20ffull},
		 {8286993518594409552ull, 7213445024538350215ull, 10643195521338302242ull}},
	};

	(void)st;
	for (size_t e = 0; e < N_CLASSIC + 1; e++) {
		char name[64];
		sr_env_spec s;

		snprintf(name, sizeof(name), "%s:rng=numpy", e < N_CLASSIC ? classic[e] : "spin");
		s = find(name);
		assert_int_equal(s.params[SR__P_RNG], 1);
		for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			char *state = calloc(5, s.state_size);
			sr_np_pcg64 g;

			assert_non_null(state);
			/* a batch of 4 from first index @index, then instance 3
			 * alone: the same as the batch's instance 3 */
			s.seed(&s, state, 4, want[k].seed, want[k].index);
			s.seed(&s, state + 4 * s.state_size, 1, want[k].seed, want[k].index + 3);
			assert_memory_equal(state + 3 * s.state_size, state + 4 * s.state_size, 32);
			const sr_rng *r = (const sr_rng *)state;
			assert_memory_equal(r->s, want[k].words, sizeof(want[k].words));
			assert_int_equal(s.check_state(&s, r), 0);
			sr_np_load(&g, r->s);
			for (int d = 0; d < 3; d++)
				assert_true(sr_np_next64(&g) == want[k].raw[d]);
			free(state);
		}
	}
}

/* A double from its bits as NumPy prints them (float.hex()). */
static double hex(const char *s)
{
	return strtod(s, NULL);
}

/*
 * Each env's reset draws NumPy's values in Gymnasium's order:
 *   CartPole, seed 42 index 3: default_rng(45).uniform(-0.05, 0.05, size=4),
 *     and the slot after it is that generator's state;
 *   Pendulum, seed 7: default_rng(7).uniform([-pi, -1], [pi, 1]);
 *   Acrobot, seed 8: default_rng(8).uniform(-0.1, 0.1, size=4).astype(float32);
 *   MountainCar(Continuous), seed 9: [default_rng(9).uniform(-0.6, -0.4), 0],
 *     and with the reset options low=-0.9, high=-0.1 uniform(-0.9, -0.1).
 */
static void test_reset_draws_are_numpys(void **st)
{
	static const uint64_t cp_after[4] = {0xb314dc1488f6d959ull, 0x25251d7df2d7eac6ull,
					     0x61e1f385676dc983ull, 0x5c3ff03b96ac4e7bull};
	const double cp[4] = {hex("0x1.df44e1fe11698p-8"), hex("0x1.75706b58a88d0p-9"),
			      hex("0x1.aff6ecf034268p-6"), hex("0x1.fead6c0484ba0p-6")};
	const double pd[2] = {hex("0x1.926e545e3f060p-1"), hex("0x1.96bf36f2bc99ap-1")};
	const double ac[4] = {hex("-0x1.1b7d160000000p-5"), hex("0x1.8f2d5c0000000p-4"),
			      hex("-0x1.2906300000000p-5"), hex("0x1.d8c2320000000p-5")};
	const double mc = hex("-0x1.b42c474e10114p-2"), mc_opt = hex("-0x1.a1623a7080898p-3");
	uint64_t state[16];
	double phys[8];
	float obs[8];
	sr_env_spec s;

	(void)st;
	s = find("CartPole-v1:rng=numpy");
	s.seed(&s, state, 1, 42, 3);
	s.reset(&s, state, 1, obs);
	s.get_phys(&s, state, phys);
	assert_memory_equal(phys, cp, sizeof(cp));
	assert_memory_equal(state, cp_after, sizeof(cp_after));
	for (int k = 0; k < 4; k++)
		assert_true(obs[k] == (float)cp[k]);

	s = find("Pendulum-v1:rng=numpy");
	s.seed(&s, state, 1, 7, 0);
	s.reset(&s, state, 1, obs);
	s.get_phys(&s, state, phys);
	assert_memory_equal(phys, pd, sizeof(pd));

	s = find("Acrobot-v1:rng=numpy");
	s.seed(&s, state, 1, 8, 0);
	s.reset(&s, state, 1, obs);
	s.get_phys(&s, state, phys);
	assert_memory_equal(phys, ac, sizeof(ac));

	for (int c = 0; c < 2; c++) {
		const struct sr__reset_opt *ro;
		double b[2];

		s = find(c ? "MountainCarContinuous-v0:rng=numpy" : "MountainCar-v0:rng=numpy");
		s.seed(&s, state, 1, 9, 0);
		s.reset(&s, state, 1, obs);
		s.get_phys(&s, state, phys);
		assert_true(phys[0] == mc && phys[1] == 0.0);
		/* reset options draw from the same generator: reseed first */
		ro = sr__env_reset_opt(&s);
		assert_non_null(ro);
		assert_int_equal(sr__env_parse_reset_opts(&s, ro, "low=-0.9,high=-0.1", b), 0);
		s.seed(&s, state, 1, 9, 0);
		ro->reset(&s, state, 1, b, obs);
		s.get_phys(&s, state, phys);
		assert_true(phys[0] == mc_opt && phys[1] == 0.0);
	}
}

/* rng=stepring is the default spec itself (same params: checkpoints of
 * either load in the other); rng=numpy is another type (checkpoints
 * refuse each other, below). Bad values and keys are refused. */
static void test_params(void **st)
{
	static const char *const bad[] = {
		"CartPole-v1:rng=mt",	   "cartpole:x=1",	 "Pendulum-v1:rng=",
		"Acrobot-v1:rng=numpy,rng=numpy", "mountaincar:rng=numpy,low=1", "spin:rng=pcg",
		"MountainCarContinuous-v0:rng=numpy0",
	};
	sr_env_spec a, b;

	(void)st;
	for (size_t e = 0; e < N_CLASSIC; e++) {
		char name[64];

		a = find(classic[e]);
		snprintf(name, sizeof(name), "%s:rng=stepring", classic[e]);
		b = find(name);
		assert_memory_equal(&a, &b, sizeof(a));
		snprintf(name, sizeof(name), "%s:rng=numpy", classic[e]);
		b = find(name);
		assert_int_equal(b.params[SR__P_RNG], 1);
		assert_int_equal(a.state_size, b.state_size); /* the state does not grow */
		b.params[SR__P_RNG] = 0;
		assert_memory_equal(&a, &b, sizeof(a));
	}
	b = find("spin:obs_dim=4,rng=numpy,ep_len=7");
	assert_int_equal(b.params[SR__P_RNG], 1);
	assert_int_equal(b.obs_dim, 4);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		assert_int_equal(sr_env_find(bad[k], &a), -EINVAL);
		assert_true(strstr(sr_last_error(), "rng") || strstr(sr_last_error(), "parameter"));
	}
	assert_int_equal(sr_env_find("NoSuch-v0:rng=numpy", &a), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "unknown env 'NoSuch-v0'"));
}

/* An RNG slot no seeding makes is refused by check_state: all-zero
 * xoshiro256** (the default) and, with rng=numpy, an even PCG64
 * increment (its LCG needs an odd one; any state value is fine, and
 * xoshiro's all-zero rule does not apply). */
static void test_check_state_rng(void **st)
{
	(void)st;
	for (size_t e = 0; e < N_CLASSIC + 1; e++) {
		const char *id = e < N_CLASSIC ? classic[e] : "spin";
		char name[64];
		uint64_t state[16];
		float obs[16];
		sr_env_spec d = find(id), s;

		snprintf(name, sizeof(name), "%s:rng=numpy", id);
		s = find(name);
		s.seed(&s, state, 1, 5, 0);
		s.reset(&s, state, 1, obs);
		assert_int_equal(s.check_state(&s, state), 0);
		state[2] &= ~1ull; /* even increment */
		assert_int_equal(s.check_state(&s, state), -EINVAL);
		memset(state, 0, 32);
		assert_int_equal(s.check_state(&s, state), -EINVAL);
		state[2] = 1; /* state 0, increment 1: a valid PCG64 */
		assert_int_equal(s.check_state(&s, state), 0);
		/* the default: an all-zero slot refused, an even word fine */
		d.seed(&d, state, 1, 5, 0);
		d.reset(&d, state, 1, obs);
		state[2] &= ~1ull;
		assert_int_equal(d.check_state(&d, state), 0);
		memset(state, 0, 32);
		assert_int_equal(d.check_state(&d, state), -EINVAL);
	}
}

/* --- pools ---------------------------------------------------------------- */

enum { K_THREADS, K_INLINE, K_PROCS };

static sr_pool *mk(const char *env, uint32_t n, int kind, uint32_t autoreset, uint64_t seed)
{
	sr_pool_opts o;
	sr_pool *p = NULL;

	sr_pool_opts_init(&o);
	o.env = env;
	o.num_envs = n;
	o.num_threads = 2;
	o.bind = SR_BIND_NONE;
	o.autoreset = autoreset;
	o.flags = SR_POOL_F_SEED | (kind != K_THREADS ? SR_POOL_F_PROCS : 0) |
		  (kind == K_INLINE ? SR_POOL_F_PROC_INLINE : 0);
	o.seed = seed;
	o.ring_capacity = 1u << 12;
	if (sr_pool_create(&o, &p))
		fail_msg("pool %s: %s", env, sr_last_error());
	return p;
}

static void actions_for(const sr_env_spec *sp, uint64_t step, void *act, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t x = step * 7919 + i;
		uint64_t r = sr_splitmix64(&x);

		if (sp->act_kind == SR_SPACE_DISCRETE)
			((int32_t *)act)[i] = (int32_t)((r >> 32) % sp->act_n);
		else
			((float *)act)[i] = (float)(-2.0 + 4.0 * (double)(r >> 11) * 0x1.0p-53);
	}
}

/* Step @m times from step number @k (resetting ended envs when autoreset
 * is disabled); the hash of every batch, and how many episodes ended. */
static uint64_t run(sr_pool *p, uint64_t k, uint64_t m, uint64_t *ended)
{
	sr_pool_info in = t_pool_info(p);
	uint32_t n = in.num_envs;
	void *a = malloc(n * sr_env_action_size(in.spec));
	uint8_t *mask = calloc(n, 1);
	const sr_batch *b;
	uint64_t h = T_FNV_INIT;

	assert_non_null(a);
	assert_non_null(mask);
	for (uint64_t s = k; s < k + m; s++) {
		bool any = false;

		actions_for(in.spec, s, a, n);
		assert_int_equal(sr_pool_step(p, a, &b), 0);
		h = t_hash_batch(h, b);
		for (uint32_t i = 0; i < b->n; i++) {
			mask[b->env_id[i]] = b->terminated[i] | b->truncated[i];
			any |= mask[b->env_id[i]];
			if (ended)
				*ended += mask[b->env_id[i]];
		}
		if (any && in.autoreset == SR_AUTORESET_DISABLED) {
			assert_int_equal(sr_pool_reset_mask(p, mask, &b), 0);
			h = t_hash_batch(h, b);
		}
	}
	free(mask);
	free(a);
	return h;
}

/* Env i of a pool seeded with s starts from NumPy's generator of s + i,
 * whatever thread or process steps it; threads and processes give the
 * same rows (the parameter reaches the worker processes). */
static void test_pools_seed_by_global_index(void **st)
{
	const int kinds = getenv("STEPRING_WORKER") ? 3 : 2;

	(void)st;
	for (size_t e = 0; e < N_CLASSIC; e++) {
		char name[64];
		uint64_t h[3];

		snprintf(name, sizeof(name), "%s:rng=numpy", classic[e]);
		for (int kind = 0; kind < kinds; kind++) {
			sr_pool *p = mk(name, 6, kind, SR_AUTORESET_NEXT_STEP, 1000);
			sr_env_spec s = find(name);
			const sr_batch *b;
			uint64_t state[16];
			float want[8];

			assert_int_equal(sr_pool_reset(p, &b), 0);
			for (uint32_t i = 0; i < b->n; i++) {
				/* the oracle: the env alone, seeded with 1000 + i
				 * (test_seed_is_numpys ties that to NumPy) */
				s.seed(&s, state, 1, 1000 + b->env_id[i], 0);
				s.reset(&s, state, 1, want);
				assert_memory_equal(b->obs + (size_t)i * b->obs_dim, want,
						    b->obs_dim * sizeof(float));
			}
			h[kind] = run(p, 0, 600, NULL);
			sr_pool_destroy(p);
		}
		for (int kind = 1; kind < kinds; kind++)
			assert_true(h[kind] == h[0]);
	}
}

/* The env states section of checkpoint @path into @out (@len bytes). */
static void env_states(const char *path, uint8_t *out, size_t len)
{
	struct craft c;
	int i;

	assert_int_equal(craft_load(&c, path), 0);
	i = craft_find(&c, SR_CKPT_SECT_ENV_STATES);
	assert_true(i >= 0);
	assert_true(c.s[i].len == len);
	memcpy(out, c.s[i].data, len);
	craft_free(&c);
}

/*
 * Mid-episode checkpoint of an rng=numpy pool, in each autoreset mode:
 * restored into a pool seeded otherwise, it continues with the same rows
 * (autoresets included, so the PCG64 states came back), and a checkpoint
 * of the restored pool holds the same env state bytes. A pool of the
 * other RNG refuses it ("the env parameters ... differ"), and a crafted copy whose env 1 has
 * an even PCG64 increment is refused by check_state, the pool untouched.
 */
static void test_checkpoint_round_trip(void **st)
{
	static const uint32_t modes[] = {SR_AUTORESET_NEXT_STEP, SR_AUTORESET_SAME_STEP,
					 SR_AUTORESET_DISABLED};
	const uint32_t n = 8;
	char path[300], again[300], bad[300];
	uint8_t s1[8 * 64], s2[8 * 64];
	sr_ckpt_opts o;

	(void)st;
	snprintf(path, sizeof(path), "%s/np.ckpt", dir);
	snprintf(again, sizeof(again), "%s/again.ckpt", dir);
	snprintf(bad, sizeof(bad), "%s/bad.ckpt", dir);
	sr_ckpt_opts_init(&o);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		const sr_batch *b;
		uint64_t ended = 0, tail, tail2;
		sr_pool *p = mk("CartPole-v1:rng=numpy", n, K_THREADS, modes[m], 3), *q, *x;

		assert_int_equal(sr_pool_reset(p, &b), 0);
		run(p, 0, 137, &ended); /* CartPole episodes end in ~20 random steps */
		assert_true(ended > n);
		assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
		assert_int_equal(sr_pool_checkpoint_wait(p, NULL), 0);
		ended = 0;
		tail = run(p, 137, 300, &ended);
		assert_true(ended > n);
		sr_pool_destroy(p);

		q = mk("CartPole-v1:rng=numpy", n, K_THREADS, modes[m], 77);
		assert_int_equal(sr_pool_reset(q, &b), 0);
		assert_int_equal(sr_pool_restore(q, path), 0);
		assert_int_equal(sr_pool_checkpoint(q, again, &o), 0);
		assert_int_equal(sr_pool_checkpoint_wait(q, NULL), 0);
		env_states(path, s1, sizeof(s1));
		env_states(again, s2, sizeof(s2));
		assert_memory_equal(s1, s2, sizeof(s1));
		for (uint32_t i = 0; i < n; i++)
			assert_true(((const uint64_t *)(s1 + 64 * i))[2] & 1);
		tail2 = run(q, 137, 300, NULL);
		assert_true(tail2 == tail);
		sr_pool_destroy(q);

		x = mk("CartPole-v1", n, K_THREADS, modes[m], 3);
		assert_int_equal(sr_pool_restore(x, path), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "env parameters"));
		sr_pool_destroy(x);
	}

	/* An even increment, checksums made right: check_state refuses it and
	 * the pool goes on as its twin. */
	struct craft c;
	int i;
	/* the last checkpoint's pool: autoreset disabled, seed 3 */
	sr_pool *x = mk("CartPole-v1:rng=numpy", n, K_THREADS, SR_AUTORESET_DISABLED, 3);
	sr_pool *twin = mk("CartPole-v1:rng=numpy", n, K_THREADS, SR_AUTORESET_DISABLED, 3);
	const sr_batch *b;

	assert_int_equal(craft_load(&c, path), 0);
	i = craft_find(&c, SR_CKPT_SECT_ENV_STATES);
	assert_true(i >= 0);
	c.s[i].data[64 + 16] &= 0xfe; /* env 1: increment's low word, bit 0 */
	assert_int_equal(craft_write(&c, bad), 0);
	craft_free(&c);
	assert_int_equal(sr_pool_reset(x, &b), 0);
	assert_int_equal(sr_pool_reset(twin, &b), 0);
	run(x, 0, 10, NULL);
	run(twin, 0, 10, NULL);
	if (sr_pool_restore(x, bad) != -EBADMSG || !strstr(sr_last_error(), "check_state"))
		fail_msg("restore of an even increment: %s", sr_last_error());
	assert_true(run(x, 10, 100, NULL) == run(twin, 10, 100, NULL));
	sr_pool_destroy(x);
	sr_pool_destroy(twin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_is_numpys),
		cmocka_unit_test(test_reset_draws_are_numpys),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_check_state_rng),
		cmocka_unit_test(test_pools_seed_by_global_index),
		cmocka_unit_test(test_checkpoint_round_trip),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

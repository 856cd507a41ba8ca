/* Multi-producer stress: more producer threads than cores, each
 * transition carries a unique id (producer, counter) and a checksum; the
 * consumer accounts for each exactly once, in per-producer order, and
 * checks the prev links; a sampler thread reads the replay window at the
 * same time and never sees a torn transition. Run it under TSan too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/replay.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif

#define D 5
#define MAXP 16

struct ctx {
	sr_ring *r;
	uint32_t nprod;
	uint64_t per_prod;
	uint32_t mode; /* 0 reserve, 1 try_reserve, 2 contig, 3 mixed */
	_Atomic uint32_t done_prod;
	_Atomic int stop_sampler;
	uint64_t sampled;
};

struct prod {
	struct ctx *c;
	uint32_t id;
};

static float cks(uint32_t p, uint64_t i, uint32_t k)
{
	return (float)((i * 31 + p * 7 + k * 13) % 65521);
}

static void pin(uint32_t i)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return;
	CPU_ZERO(&set);
	CPU_SET(i % (uint32_t)n, &set);
	/* Best effort: a restricted cpuset just leaves the thread floating. */
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void write_slot(sr_ring *r, uint64_t q, uint32_t p, uint64_t i, uint64_t prev)
{
	uint64_t s = q & (sr_ring_capacity(r) - 1);
	uint32_t a = (uint32_t)i;

	for (uint32_t k = 0; k < D; k++)
		sr_ring_obs_col(r)[s * D + k] = cks(p, i, k);
	memcpy(sr_ring_action_col(r) + s * 4, &a, 4);
	sr_ring_reward_col(r)[s] = (float)(i % 1000);
	sr_ring_terminated_col(r)[s] = 0;
	sr_ring_truncated_col(r)[s] = 0;
	sr_ring_flags_col(r)[s] = prev == SR_RING_NO_PREV ? SR_SLOT_FIRST : 0;
	sr_ring_env_id_col(r)[s] = p;
	sr_ring_prev_col(r)[s] = prev;
}

static void *producer(void *arg)
{
	struct prod *pp = arg;
	struct ctx *c = pp->c;
	uint64_t i = 0, prev = SR_RING_NO_PREV, q;

	pin(pp->id + 1);
	while (i < c->per_prod) {
		uint32_t n = 1 + (uint32_t)((i * 2654435761u + pp->id) % 19);
		uint32_t mode = c->mode == 3 ? (uint32_t)(i + pp->id) % 3 : c->mode;
		int err;

		if (n > c->per_prod - i)
			n = (uint32_t)(c->per_prod - i);
		if (mode == 1) {
			while ((err = sr_ring_try_reserve(c->r, n, 0, &q)) == -EAGAIN)
				sched_yield();
		} else {
			err = sr_ring_reserve(c->r, n, mode == 2 ? SR_RESERVE_CONTIG : 0, &q);
		}
		assert_int_equal(err, 0);
		if (mode == 2)
			assert_true((q & (sr_ring_capacity(c->r) - 1)) + n <= sr_ring_capacity(c->r));
		for (uint32_t j = 0; j < n; j++) {
			write_slot(c->r, q + j, pp->id, i + j, prev);
			prev = q + j;
		}
		/* Publish in two pieces, the second first, to exercise
		 * out-of-order publication inside one reservation. */
		if (n > 1) {
			sr_ring_publish(c->r, q + n / 2, n - n / 2);
			sr_ring_publish(c->r, q, n / 2);
		} else {
			sr_ring_publish(c->r, q, n);
		}
		i += n;
	}
	atomic_fetch_add(&c->done_prod, 1);
	return NULL;
}

static void *sampler(void *arg)
{
	struct ctx *c = arg;
	sr_replay *rp;
	enum { N = 32 };
	float obs[N * D], nobs[N * D];
	uint32_t act[N], env[N];
	uint64_t seq[N];
	sr_replay_batch b = {.obs = obs, .next_obs = nobs, .action = act, .env_id = env,
			     .seq = seq};

	pin(0);
	assert_int_equal(sr_replay_create(c->r, NULL, &rp), 0);
	while (!atomic_load(&c->stop_sampler)) {
		int n = sr_replay_sample(rp, N, &b);

		if (n < 0) {
			assert_int_equal(n, -EAGAIN);
			sched_yield();
			continue;
		}
		for (int j = 0; j < n; j++) {
			/* s' belongs to (env, act); s to (env, act - 1). */
			assert_true(env[j] < c->nprod);
			assert_true(act[j] >= 1);
			for (uint32_t k = 0; k < D; k++) {
				assert_true(nobs[j * D + k] == cks(env[j], act[j], k));
				assert_true(obs[j * D + k] == cks(env[j], act[j] - 1, k));
			}
		}
		c->sampled += (uint64_t)n;
		sched_yield(); /* leave the cores to producers and consumer */
	}
	sr_replay_destroy(rp);
	return NULL;
}

static void run(uint32_t mode, uint32_t nprod, uint64_t cap, uint64_t per_prod)
{
	sr_ring_opts o = {.obs_dim = D, .act_size = 4, .capacity = cap};
	struct ctx c = {.nprod = nprod, .per_prod = per_prod, .mode = mode};
	struct prod pp[MAXP];
	pthread_t th[MAXP], sth;
	uint64_t next[MAXP] = {0}, last[MAXP], total = 0, pads = 0, first;
	uint32_t maxbatch = 0;

	assert_true(nprod <= MAXP);
	assert_int_equal(sr_ring_create(&o, &c.r), 0);
	for (uint32_t p = 0; p < nprod; p++) {
		last[p] = SR_RING_NO_PREV;
		pp[p] = (struct prod){&c, p};
		assert_int_equal(pthread_create(&th[p], NULL, producer, &pp[p]), 0);
	}
	assert_int_equal(pthread_create(&sth, NULL, sampler, &c), 0);
	pin(0);
	/* The consumer: account for every transition exactly once. */
	while (total < per_prod * nprod) {
		uint32_t n = sr_ring_peek(c.r, 64, &first);
		uint64_t mask = cap - 1;

		if (n == 0) {
			sched_yield();
			continue;
		}
		if (n > maxbatch)
			maxbatch = n;
		for (uint32_t j = 0; j < n; j++) {
			uint64_t q = first + j, s = q & mask;
			uint32_t p, i;

			assert_true(sr_ring_slot_valid(c.r, q));
			if (sr_ring_flags_col(c.r)[s] & SR_SLOT_PAD) {
				assert_int_equal(mode == 2 || mode == 3, 1);
				pads++;
				continue;
			}
			p = sr_ring_env_id_col(c.r)[s];
			assert_true(p < nprod);
			memcpy(&i, sr_ring_action_col(c.r) + s * 4, 4);
			/* Exactly once, in the producer's order. */
			assert_int_equal(i, next[p]);
			next[p]++;
			assert_int_equal(sr_ring_prev_col(c.r)[s], last[p]);
			last[p] = q;
			for (uint32_t k = 0; k < D; k++)
				assert_true(sr_ring_obs_col(c.r)[s * D + k] == cks(p, i, k));
			assert_true(sr_ring_reward_col(c.r)[s] == (float)(i % 1000));
			total++;
		}
		sr_ring_consume(c.r, n);
	}
	for (uint32_t p = 0; p < nprod; p++) {
		pthread_join(th[p], NULL);
		assert_int_equal(next[p], per_prod);
	}
	atomic_store(&c.stop_sampler, 1);
	pthread_join(sth, NULL);
	/* Nothing left over: head == cursor, and every slot was consumed. */
	assert_int_equal(sr_ring_head(c.r), sr_ring_cursor(c.r));
	assert_int_equal(sr_ring_head(c.r), total + pads);
	assert_int_equal(sr_ring_peek(c.r, 64, &first), 0);
	print_message("mode %u: %u producers, capacity %llu: %llu transitions, %llu pads, "
		      "max batch %u, %llu sampled\n",
		      mode, nprod, (unsigned long long)cap, (unsigned long long)total,
		      (unsigned long long)pads, maxbatch, (unsigned long long)c.sampled);
	sr_ring_destroy(c.r);
}

static uint64_t scale(uint64_t n)
{
	return SLOW_BUILD ? n / 10 : n;
}

static void test_reserve(void **st)
{
	(void)st;
	run(0, 6, 256, scale(150000));
}

static void test_try_reserve(void **st)
{
	(void)st;
	run(1, 5, 128, scale(80000));
}

static void test_contig(void **st)
{
	(void)st;
	run(2, 6, 64, scale(80000));
}

static void test_mixed(void **st)
{
	(void)st;
	run(3, 8, 1024, scale(100000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_try_reserve),
		cmocka_unit_test(test_contig),
		cmocka_unit_test(test_mixed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

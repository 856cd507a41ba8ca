/*
 * The finite check (SR_POOL_F_CHECK_FINITE): an env plugin (Faulty-v0,
 * tests/faulty_env.c) writes a NaN or an infinity into one env's obs or
 * reward at a chosen step; the row is flagged SR_SLOT_NONFINITE, the batch
 * and the statistics count exactly the non-finite rows, the first one's env
 * is named (sr_last_error, the stats, the stats block), and mean_return
 * stays finite. In every pool kind: sync and async thread workers, every
 * autoreset mode and reset path, process workers; off by flag or by
 * STEPRING_CHECK_FINITE=0.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "stepring.h"
#include "stepring/stats.h"
#include "helpers.h"
#include "pool_internal.h" /* SR__KNOB_*, sr__pool_create_knobs */

enum { M_NAN_X = 5, M_NAN_REW = 6, M_INF_REW = 7, M_NAN_RESET = 8 };

static sr_env_spec faulty(uint64_t mode)
{
	sr_env_spec s;

	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_FAULTY, &s), 0);
	s.params[0] = mode;
	return s;
}

/* @knobs: the pool's experiment knobs (SR__KNOB_*, pool_internal.h). */
static sr_pool *mk_k(const sr_env_spec *spec, uint32_t n, uint32_t batch, uint32_t flags,
		     uint32_t autoreset, const char *ring_name, uint32_t knobs)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	int err;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | flags | (ring_name ? SR_POOL_F_RING_NAME : 0);
	o.seed = 99;
	o.num_envs = n;
	o.batch_size = batch;
	o.num_threads = 2;
	o.bind = SR_BIND_NONE;
	o.spec = spec;
	o.autoreset = autoreset;
	o.ring_name = ring_name;
	err = sr__pool_create_knobs(&o, knobs, &p);
	if (err)
		fprintf(stderr, "pool: %s\n", sr_last_error());
	assert_int_equal(err, 0);
	return p;
}

static sr_pool *mk(const sr_env_spec *spec, uint32_t n, uint32_t batch, uint32_t flags,
		   uint32_t autoreset, const char *ring_name)
{
	return mk_k(spec, n, batch, flags, autoreset, ring_name, 0);
}

static bool row_nonfinite(const sr_batch *b, uint32_t i)
{
	if (!isfinite(b->reward[i]))
		return true;
	for (uint32_t k = 0; k < b->obs_dim; k++)
		if (!isfinite(b->obs[(size_t)i * b->obs_dim + k]))
			return true;
	return false;
}

/* The batch's count is its non-finite rows; where the rows are ring slots
 * (a view), exactly those carry the flag. Returns the count. */
static uint32_t check_batch(sr_pool *p, const sr_batch *b)
{
	const sr_ring *r = t_pool_info(p).ring;
	const uint8_t *fl = sr_ring_flags_col(r);
	uint64_t mask = sr_ring_capacity(r) - 1;
	uint32_t k = 0;

	for (uint32_t i = 0; i < b->n; i++) {
		bool bad = row_nonfinite(b, i);

		k += bad;
		if (b->first_seq != UINT64_MAX)
			assert_int_equal(!!(fl[(b->first_seq + i) & mask] & SR_SLOT_NONFINITE), bad);
	}
	assert_int_equal(b->nonfinite, k);
	return k;
}

static sr_pool_stats stats(sr_pool *p)
{
	sr_pool_stats s;

	assert_int_equal(sr_pool_stats_get(p, &s), 0);
	assert_true(isfinite(s.mean_return));
	return s;
}

/* Sync pool, thread workers (or process workers): env 5 misbehaves once at
 * step 3; every batch's count matches its rows, the total matches the
 * stats, env 5 is named, mean_return stays finite and (a reward of 1 per
 * step) an excluded reward shows as exactly one missing unit. */
static void run_sync(uint64_t mode, uint32_t flags, bool on)
{
	const uint32_t N = 16, BAD = 5;
	sr_env_spec spec = faulty(mode);
	sr_pool *p = mk(&spec, N, 0, flags, SR_AUTORESET_NEXT_STEP, NULL);
	const sr_batch *b;
	int32_t a[16];
	uint64_t total = 0;
	sr_pool_stats s;

	assert_int_equal(sr_pool_reset(p, &b), 0);
	total += check_batch(p, b);
	for (uint32_t t = 0; t < 120; t++) {
		for (uint32_t i = 0; i < N; i++)
			a[i] = (t == 3 && i == BAD) ? 2 : (int32_t)((t + i) & 1);
		assert_int_equal(sr_pool_step(p, a, &b), 0);
		if (t == 3) {
			assert_true(row_nonfinite(b, BAD));
			if (on) {
				char want[64];

				snprintf(want, sizeof(want), "env %u (Faulty-v0)", BAD);
				assert_non_null(strstr(sr_last_error(), want));
				assert_non_null(strstr(sr_last_error(), mode == M_NAN_X ? "observation"
											: "reward"));
			}
		}
		if (on) {
			total += check_batch(p, b);
		} else {
			assert_int_equal(b->nonfinite, 0);
			for (uint32_t i = 0; i < N; i++)
				assert_false(sr_ring_flags_col(t_pool_info(p).ring)[(b->first_seq + i) &
					(sr_ring_capacity(t_pool_info(p).ring) - 1)] & SR_SLOT_NONFINITE);
		}
	}
	s = stats(p);
	assert_int_equal(s.check_finite, on);
	assert_int_equal(s.nonfinite_rows, on ? total : 0);
	assert_int_equal(s.nonfinite_env, on ? (int64_t)BAD : -1);
	if (on && mode != M_NAN_X)
		assert_int_equal(total, 1); /* one bad reward, one row */
	if (on && mode == M_NAN_X)
		assert_true(total >= 2); /* NaN state until the episode ends */
	/* Rewards are 1 a step: a return is at most its length. */
	assert_true(s.episodes > 16);
	assert_true(s.mean_return > 0 && s.mean_return <= s.mean_length);
	sr_pool_destroy(p);
}

static void sync_nan_obs(void **st)
{
	(void)st;
	run_sync(M_NAN_X, 0, true);
}

static void sync_nan_reward(void **st)
{
	(void)st;
	run_sync(M_NAN_REW, 0, true);
}

static void sync_inf_reward(void **st)
{
	(void)st;
	run_sync(M_INF_REW, SR_POOL_F_CHECK_FINITE, true);
}

static void sync_off(void **st)
{
	(void)st;
	run_sync(M_NAN_X, SR_POOL_F_NO_CHECK_FINITE, false);
	run_sync(M_NAN_REW, SR_POOL_F_NO_CHECK_FINITE, false);
}

/* Process workers check their own rows (the C env worker), with every
 * worker a process and with worker 0 (env 5's worker) inline. */
static void procs_nan_reward(void **st)
{
	(void)st;
	run_sync(M_NAN_REW, SR_POOL_F_PROCS, true);
	run_sync(M_NAN_X, SR_POOL_F_PROCS, true);
	run_sync(M_NAN_REW, SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE, true);
	run_sync(M_NAN_X, SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE, true);
	run_sync(M_INF_REW, SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE, true);
	run_sync(M_NAN_X, SR_POOL_F_PROCS | SR_POOL_F_NO_CHECK_FINITE, false);
	run_sync(M_NAN_REW, SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE | SR_POOL_F_NO_CHECK_FINITE,
		 false);
}

/* A non-finite reward is left out of the episode's return, check on or
 * off: with every reward 1, return = length - 1 for that episode alone. */
static void excluded_reward(void **st)
{
	for (int on = 0; on < 2; on++) {
		const uint32_t N = 4;
		sr_env_spec spec = faulty(M_NAN_REW);
		sr_pool *p = mk(&spec, N, 0, on ? 0 : SR_POOL_F_NO_CHECK_FINITE,
				SR_AUTORESET_NEXT_STEP, NULL);
		const sr_batch *b;
		int32_t a[4] = {0, 0, 0, 0};
		sr_pool_stats s;

		(void)st;
		assert_int_equal(sr_pool_reset(p, &b), 0);
		for (uint32_t t = 0; t < 60; t++) {
			a[1] = t == 0 ? 2 : 0;
			assert_int_equal(sr_pool_step(p, a, &b), 0);
		}
		s = stats(p);
		assert_true(s.episodes >= 4 && s.episodes < 100);
		assert_true(fabs((s.mean_length - s.mean_return) * (double)s.episodes - 1.0) < 1e-6);
		sr_pool_destroy(p);
	}
}

/* Reset paths: the reset obs of a NEXT_STEP autoreset, of a SAME_STEP
 * autoreset (the batch slot; the FINAL extra holds the finite final obs,
 * unflagged), and of sr_pool_reset; env BAD of 8 (2 workers of 4 envs),
 * pool @flags. */
static void reset_obs_in(uint32_t flags, uint32_t BAD)
{
	const uint32_t N = 8;
	sr_env_spec spec = faulty(M_NAN_RESET);
	int32_t a[8] = {0};

	for (uint32_t how = 0; how < 3; how++) {
		sr_pool *p = mk(&spec, N, 0, flags,
				how == 1 ? SR_AUTORESET_SAME_STEP : SR_AUTORESET_NEXT_STEP, NULL);
		const sr_ring *r = t_pool_info(p).ring;
		const uint8_t *fl = sr_ring_flags_col(r);
		uint64_t mask = sr_ring_capacity(r) - 1;
		const sr_batch *b;
		uint64_t total = 0;

		assert_int_equal(sr_pool_reset(p, &b), 0);
		a[BAD] = 2;
		assert_int_equal(sr_pool_step(p, a, &b), 0);
		a[BAD] = 0;
		assert_true(b->terminated[BAD]);
		total += check_batch(p, b);
		if (how == 1) {
			/* Same step: the batch slot is the NaN reset obs; the
			 * FINAL extra after the batch, the finite final obs. */
			uint64_t q = b->first_seq + N;

			assert_int_equal(total, 1);
			assert_true(fl[(b->first_seq + BAD) & mask] & SR_SLOT_FIRST);
			assert_true(isfinite(b->final_obs[BAD * b->obs_dim]));
			assert_int_equal(sr_ring_env_id_col(r)[q & mask], BAD);
			assert_int_equal(fl[q & mask], SR_SLOT_FINAL);
		} else {
			assert_int_equal(total, 0);
			if (how == 0)
				assert_int_equal(sr_pool_step(p, a, &b), 0);
			else
				assert_int_equal(sr_pool_reset(p, &b), 0);
			total += check_batch(p, b);
			assert_int_equal(total, 1);
			assert_true(fl[(b->first_seq + BAD) & mask] & SR_SLOT_FIRST);
		}
		assert_true(isnan(b->obs[BAD * b->obs_dim]));
		for (uint32_t t = 0; t < 10; t++) {
			assert_int_equal(sr_pool_step(p, a, &b), 0);
			total += check_batch(p, b);
		}
		assert_int_equal(total, 1);
		assert_int_equal(stats(p).nonfinite_rows, 1);
		assert_int_equal(stats(p).nonfinite_env, BAD);
		sr_pool_destroy(p);
	}
}

static void reset_obs(void **st)
{
	(void)st;
	reset_obs_in(0, 4);
}

/* The same in process workers: a worker process's env (4) and, with
 * worker 0 inline, an env of the calling thread's slice (1). */
static void procs_reset_obs(void **st)
{
	(void)st;
	reset_obs_in(SR_POOL_F_PROCS, 4);
	reset_obs_in(SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE, 4);
	reset_obs_in(SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE, 1);
}

/* Async: batches of 8 of 16 envs (batch groups, then per-env queues). */
static void async_pool(void **st)
{
	(void)st;
	for (int groups = 0; groups < 2; groups++) {
		const uint32_t N = 16, B = 8;
		sr_env_spec spec = faulty(M_NAN_X);
		sr_pool *p = mk_k(&spec, N, B, 0, SR_AUTORESET_NEXT_STEP, NULL,
				  groups ? 0 : SR__KNOB_NO_BATCH_GROUPS);
		const sr_batch *b;
		int32_t a[8];
		uint64_t total = 0;
		bool sent_bad = false;

		assert_int_equal(sr_pool_reset(p, NULL), 0);
		for (uint32_t t = 0; t < 200; t++) {
			assert_int_equal(sr_pool_recv(p, &b), 0);
			total += check_batch(p, b);
			for (uint32_t i = 0; i < B; i++) {
				a[i] = 0;
				if (t > 4 && !sent_bad && b->env_id[i] == 3) {
					a[i] = 2;
					sent_bad = true;
				}
			}
			assert_int_equal(sr_pool_send(p, a, NULL, B), 0);
		}
		assert_true(sent_bad);
		assert_true(total >= 1);
		assert_true(stats(p).nonfinite_rows >= total); /* some still in flight */
		assert_int_equal(stats(p).nonfinite_env, 3);
		sr_pool_destroy(p);
	}
}

/* STEPRING_CHECK_FINITE sets the default, the flags override it. */
static void switches(void **st)
{
	sr_env_spec spec = faulty(0);
	sr_pool_opts o;
	sr_pool *p;

	(void)st;
	setenv("STEPRING_CHECK_FINITE", "0", 1);
	p = mk(&spec, 2, 0, 0, SR_AUTORESET_NEXT_STEP, NULL);
	assert_int_equal(stats(p).check_finite, 0);
	sr_pool_destroy(p);
	p = mk(&spec, 2, 0, SR_POOL_F_CHECK_FINITE, SR_AUTORESET_NEXT_STEP, NULL);
	assert_int_equal(stats(p).check_finite, 1);
	sr_pool_destroy(p);
	setenv("STEPRING_CHECK_FINITE", "1", 1);
	p = mk(&spec, 2, 0, SR_POOL_F_NO_CHECK_FINITE, SR_AUTORESET_NEXT_STEP, NULL);
	assert_int_equal(stats(p).check_finite, 0);
	sr_pool_destroy(p);
	unsetenv("STEPRING_CHECK_FINITE");
	p = mk(&spec, 2, 0, 0, SR_AUTORESET_NEXT_STEP, NULL);
	assert_int_equal(stats(p).check_finite, 1);
	sr_pool_destroy(p);

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_CHECK_FINITE | SR_POOL_F_NO_CHECK_FINITE;
	o.num_envs = 2;
	o.spec = &spec;
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "both"));
}

/* The stats block (what `stepring top` reads) counts and names them too. */
static void stats_block(void **st)
{
	char name[64], path[96];
	sr_env_spec spec = faulty(M_NAN_X);
	sr_pool *p;
	const sr_batch *b;
	int32_t a[8] = {0};
	sr_stats_shm blk;
	int fd;

	(void)st;
	snprintf(name, sizeof(name), "/sr-test-nonfinite-%d", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm%s.stats", name);
	p = mk(&spec, 8, 0, 0, SR_AUTORESET_NEXT_STEP, name);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t t = 0; t < 70; t++) { /* the block is written every 64 batches */
		a[6] = t == 1 ? 2 : 0;
		assert_int_equal(sr_pool_step(p, a, &b), 0);
	}
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &blk, sizeof(blk), 0), (ssize_t)sizeof(blk));
	close(fd);
	assert_true(blk.nonfinite_rows >= 1);
	assert_true(blk.nonfinite_rows <= stats(p).nonfinite_rows);
	assert_int_equal(blk.nonfinite_env, 6 + 1);
	assert_true(isfinite(blk.mean_return));
	sr_pool_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sync_nan_obs),
		cmocka_unit_test(sync_nan_reward),
		cmocka_unit_test(sync_inf_reward),
		cmocka_unit_test(sync_off),
		cmocka_unit_test(excluded_reward),
		cmocka_unit_test(reset_obs),
		cmocka_unit_test(async_pool),
		cmocka_unit_test(switches),
		cmocka_unit_test(stats_block),
		cmocka_unit_test(procs_nan_reward),
		cmocka_unit_test(procs_reset_obs),
	};

	unsetenv("STEPRING_CHECK_FINITE");
	return cmocka_run_group_tests(tests, NULL, NULL);
}

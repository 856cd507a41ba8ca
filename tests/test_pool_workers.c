/* Pool tests, the workers: the default thread count, experiment knobs,
 * the shared-memory stats block, many envs, where workers and the caller
 * run, per-worker statistics, sync rebalancing. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/pool.h"
#include "stepring/stats.h"
#include "helpers.h"
#include "pool_env.h"

/* The CPU worker @w is bound to (sr_pool_worker_stats.cpu), or the
 * -errno of sr_pool_worker_stats_get (-EINVAL: no such worker). */
static int worker_cpu(const sr_pool *p, uint32_t w)
{
	sr_pool_worker_stats ws;
	int err = sr_pool_worker_stats_get(p, w, &ws);

	return err ? err : ws.cpu;
}

/* num_threads 0: chosen from the work (num_envs x the measured step cost):
 * a few cheap envs run on the calling thread, costly ones spread. */
static void test_default_threads(void **st)
{
	sr_pool_opts o;
	sr_pool *p;

	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 8;
	o.bind = SR_BIND_NONE;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(t_pool_info(p).num_threads, 1);
	assert_non_null(strstr(t_pool_info(p).threads_note, "1 (default: 8 envs x "));
	assert_non_null(strstr(t_pool_info(p).threads_note, "calling thread"));
	sr_pool_destroy(p);

	o.env = "spin:cost_us=300";
	o.num_envs = 16; /* 4.8 ms a batch: one per core */
	assert_int_equal(sr_pool_create(&o, &p), 0);
	if (cpus() >= 2) {
		assert_true(t_pool_info(p).num_threads >= 2);
		assert_non_null(strstr(t_pool_info(p).threads_note, "up to one per core"));
	}
	sr_pool_destroy(p);

	o.num_threads = 1; /* asked for: said so */
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_string_equal(t_pool_info(p).threads_note, "1 (asked for)");
	{
		/* The info's size contract: an older, shorter struct gets its
		 * prefix; a newer, longer one zeroes beyond what we know. */
		struct {
			sr_pool_info in;
			uint64_t more;
		} big;
		sr_pool_info in;

		memset(&in, 0xa5, sizeof(in));
		in.size = offsetof(sr_pool_info, batch_size);
		assert_int_equal(sr_pool_info_get(p, &in), 0);
		assert_int_equal(in.num_envs, 16);
		assert_int_equal(in.num_threads, 1);
		assert_int_equal(in.batch_size, 0xa5a5a5a5u);
		memset(&big, 0xa5, sizeof(big));
		big.in.size = sizeof(big);
		assert_int_equal(sr_pool_info_get(p, &big.in), 0);
		assert_int_equal(big.in.size, sizeof(big));
		assert_int_equal(big.in.batch_size, 16);
		assert_int_equal(big.more, 0);
		in.size = 4;
		assert_int_equal(sr_pool_info_get(p, &in), -EINVAL);
		in.size = sizeof(in);
		assert_int_equal(sr_pool_info_get(NULL, &in), -EINVAL);
	}
	sr_pool_destroy(p);
}

/* The experiment knobs: a list of names, from the environment at create. */
static void test_knobs(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p = NULL;
	uint32_t k;

	(void)st;
	assert_int_equal(sr__pool_knobs_parse(NULL, &k), 0);
	assert_int_equal(k, 0);
	assert_int_equal(sr__pool_knobs_parse("no-inline,no-rebalance", &k), 0);
	assert_int_equal(k, SR__KNOB_NO_INLINE | SR__KNOB_NO_REBALANCE);
	assert_int_equal(sr__pool_knobs_parse("no-batch-groups,", &k), 0);
	assert_int_equal(k, SR__KNOB_NO_BATCH_GROUPS);
	assert_int_equal(sr__pool_knobs_parse("no-inline,,no-rebalance", &k), -EINVAL);
	assert_int_equal(sr__pool_knobs_parse("no-inlin", &k), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "'no-inlin'"));

	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 8;
	o.num_threads = 2;
	o.batch_size = 4;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_TOPOLOGY; /* two threads on any machine */
	o.topology = "core:4 pu:1";
	assert_int_equal(setenv("STEPRING_POOL_KNOBS", "fast", 1), 0);
	assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(sr_last_error(), "STEPRING_POOL_KNOBS"));
	assert_int_equal(setenv("STEPRING_POOL_KNOBS", "no-batch-groups", 1), 0);
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(unsetenv("STEPRING_POOL_KNOBS"), 0);
	assert_int_equal(t_pool_info(p).batch_groups, 0); /* 4 tiles 8: groups but for the knob */
	sr_pool_destroy(p);
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(t_pool_info(p).batch_groups, 2);
	sr_pool_destroy(p);
}

static void test_stats_shm(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;
	char name[64], path[96];
	int32_t act[4] = {1, 1, 1, 1};
	const struct sr_stats_shm *sh;
	int fd;

	snprintf(name, sizeof(name), "sr-test-pool-%d", (int)getpid());
	snprintf(path, sizeof(path), "/%s.stats", name);
	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 4;
	o.num_threads = thr(2);
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_RING_NAME;
	o.ring_name = name;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (int i = 0; i < 5; i++) {
		struct timespec ts = {0, 200000}; /* the caller's own work between steps */
		nanosleep(&ts, NULL);
		assert_int_equal(sr_pool_step(p, act, &b), 0);
	}
	fd = shm_open(path, O_RDONLY, 0);
	assert_true(fd >= 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(sh != MAP_FAILED);
	assert_int_equal(sh->magic, SR_STATS_MAGIC);
	assert_int_equal(sh->num_envs, 4);
	assert_int_equal(sh->state, SR_STATS_STATE_RUNNING);
	assert_string_equal(sh->env_id, "Counter-v0");
	assert_true(sh->workers[0].steps >= 4);
	/* worker 0 is the calling thread: the time between calls is idle */
	assert_true(sh->workers[0].ns_idle >= 4 * 200000);
	sr_pool_destroy(p);
	assert_int_equal(sh->state, SR_STATS_STATE_ENDED);
	munmap((void *)sh, sizeof(*sh));
	assert_true(shm_open(path, O_RDONLY, 0) < 0); /* unlinked */
}

static void test_many_envs_threads(void **st)
{
	sr_env_spec s = cnt_spec(4, 9);
	/* more threads than envs: capped */
	sr_pool *p = mk(&s, 1, thr(2), 0, SR_AUTORESET_NEXT_STEP);
	const sr_batch *b;
	int32_t a = 1;

	assert_int_equal(t_pool_info(p).num_threads, 1);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(sr_pool_step(p, &a, &b), 0);
	sr_pool_destroy(p);
}

/* SR_POOL_F_BIND_CALLER pins the calling thread where worker 0 goes. */
static void test_bind_caller(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p;
	cpu_set_t before, after;
	const sr_batch *b;

	assert_int_equal(sched_getaffinity(0, sizeof(before), &before), 0);
	if (!CPU_ISSET(0, &before))
		skip();
	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 4;
	o.num_threads = 1;
	o.bind = SR_BIND_CORE;
	o.flags = SR_POOL_F_BIND_CALLER | SR_POOL_F_CPUSET;
	o.cpuset = "0";
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(sched_getaffinity(0, sizeof(after), &after), 0);
	assert_int_equal(CPU_COUNT(&after), 1);
	assert_true(CPU_ISSET(0, &after));
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(worker_cpu(p, 0), 0);
	assert_int_equal(worker_cpu(p, 1), -EINVAL);
	sr_pool_destroy(p);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);
}

/* ---- sync rebalancing ---- */

/* The counter env, with the envs from params[1] on busy for 100 us a step. */
static void slow_step(const sr_env_spec *s, void *st, size_t n, const void *actions, float *obs,
		      double *reward, uint8_t *term)
{
	const struct cnt *c = st;

	cnt_step(s, st, n, actions, obs, reward, term);
	for (size_t i = 0; i < n; i++) {
		struct timespec a, b;

		if (c[i].index < s->params[1])
			continue;
		clock_gettime(CLOCK_MONOTONIC, &a);
		do
			clock_gettime(CLOCK_MONOTONIC, &b);
		while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 100000);
	}
}

/* Two batches with the same rows, bit for bit. */
static void same_batch(const sr_batch *x, const sr_batch *y)
{
	assert_int_equal(x->n, y->n);
	assert_memory_equal(x->obs, y->obs, (size_t)x->n * 3 * sizeof(float));
	assert_memory_equal(x->reward, y->reward, x->n * sizeof(float));
	assert_memory_equal(x->terminated, y->terminated, x->n);
	assert_memory_equal(x->truncated, y->truncated, x->n);
	assert_memory_equal(x->env_id, y->env_id, x->n * sizeof(uint32_t));
	for (uint32_t i = 0; i < x->n; i++)
		if (x->terminated[i] || x->truncated[i])
			assert_memory_equal(x->final_obs + 3 * i, y->final_obs + 3 * i,
					    3 * sizeof(float));
}

/*
 * Worker 2's envs cost 100 us a step, the others' next to nothing: the
 * boundaries move towards worker 2 (rows), as far as a quarter of a share
 * (how far worker 0, the trainer thread, takes rows depends on its own
 * send and collect time in async mode, and on the machine), and every
 * batch (obs, reward, flags, env ids, final obs) and the episode
 * statistics are those of the same pool with the no-rebalance knob.
 * @batch 0: sync (shares: the slices); 24: async, two batch groups (each
 * worker's 8 envs of a group).
 */
static void rebalance_run(uint32_t batch)
{
	sr_env_spec s = cnt_spec(5, 7);
	const uint32_t N = 48, K = 300;
	sr_pool *a, *b;
	const sr_batch *ba, *bb;
	sr_pool_worker_stats ws;
	sr_pool_stats sa, sb;
	int32_t act[48];
	uint32_t rows[3], sum = 0;

	s.step = slow_step;
	s.params[1] = 32; /* worker 2 owns envs 32-47 */
	a = mk3_ar(&s, N, batch, 0, SR_AUTORESET_SAME_STEP);
	b = mk3_ar(&s, N, batch, SR__KNOB_NO_REBALANCE, SR_AUTORESET_SAME_STEP);
	assert_int_equal(t_pool_info(a).batch_groups, batch ? 2 : 0);
	assert_int_equal(sr_pool_reset(a, &ba), 0);
	assert_int_equal(sr_pool_reset(b, &bb), 0);
	for (uint32_t k = 0; k < K; k++) {
		for (uint32_t i = 0; i < N; i++)
			act[i] = (int32_t)((i * 7 + k * 3 + k / 5) % 3);
		if (batch) {
			assert_int_equal(sr_pool_recv(a, &ba), 0);
			assert_int_equal(sr_pool_recv(b, &bb), 0);
			assert_int_equal(ba->n, batch);
			same_batch(ba, bb);
			assert_int_equal(sr_pool_send(a, act, NULL, batch), 0);
			assert_int_equal(sr_pool_send(b, act, NULL, batch), 0);
		} else {
			assert_int_equal(sr_pool_step(a, act, &ba), 0);
			assert_int_equal(sr_pool_step(b, act, &bb), 0);
			assert_int_equal(ba->n, N);
			same_batch(ba, bb);
		}
	}
	for (uint32_t w = 0; w < 3; w++) {
		assert_int_equal(sr_pool_worker_stats_get(a, w, &ws), 0);
		assert_int_equal(ws.num_envs, 16);
		rows[w] = ws.rows;
		sum += ws.rows;
		assert_int_equal(sr_pool_worker_stats_get(b, w, &ws), 0);
		assert_int_equal(ws.rows, ws.num_envs);
	}
	assert_int_equal(sum, N);
	/* At most a quarter of a share moves at each boundary (sync: 4 of
	 * 16 envs; groups: 2 of 8, in each of the 2 groups). */
	assert_true(rows[2] < 16 && rows[2] >= 12);
	assert_true(rows[0] >= 12 && rows[0] <= 20);
	assert_int_equal(sr_pool_stats_get(a, &sa), 0);
	assert_int_equal(sr_pool_stats_get(b, &sb), 0);
	assert_true(sa.episodes > 0);
	if (!batch) {
		/* Async: the worker threads may have stepped the next group
		 * already, so only sync counts match exactly. */
		assert_int_equal(sa.episodes, sb.episodes);
		assert_int_equal(sa.steps, sb.steps);
		assert_true(sa.mean_return == sb.mean_return);
		assert_true(sa.mean_length == sb.mean_length);
	}
	sr_pool_destroy(a);
	sr_pool_destroy(b);
}

static void test_rebalance(void **st)
{
	(void)st;
	rebalance_run(0);
}

static void test_rebalance_groups(void **st)
{
	(void)st;
	rebalance_run(24);
}

/* sr_pool_worker_stats_get: each worker's slice and counters, which add
 * up to the pool's. */
static void test_worker_stats(void **st)
{
	sr_env_spec s = cnt_spec(1000000, 0);
	const uint32_t N = 10, K = 50;
	sr_pool *p = mk3(&s, N, 0, 0);
	const sr_batch *b;
	sr_pool_stats all;
	sr_pool_worker_stats ws;
	int32_t act[10] = {0};
	uint64_t steps = 0, env = 0, ring = 0;
	uint32_t next = 0;

	(void)st;
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t k = 0; k < K; k++)
		assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(sr_pool_stats_get(p, &all), 0);
	for (uint32_t w = 0; w < 3; w++) {
		assert_int_equal(sr_pool_worker_stats_get(p, w, &ws), 0);
		/* Contiguous slices covering every env, sizes 4, 3, 3. */
		assert_int_equal(ws.first_env, next);
		assert_int_equal(ws.num_envs, w == 0 ? 4 : 3);
		next += ws.num_envs;
		/* Sync: every worker steps its whole slice each batch (and the
		 * reset counts). */
		assert_int_equal(ws.steps, (uint64_t)ws.num_envs * (K + 1));
		assert_true(ws.ns_env_step > 0);
		assert_int_equal(ws.cpu, -ENOENT); /* bind none */
		assert_int_equal(ws.rows, ws.num_envs); /* 3-4 envs: nothing moves */
		steps += ws.steps;
		env += ws.ns_env_step;
		ring += ws.ns_ring_publish;
	}
	assert_int_equal(next, N);
	assert_int_equal(steps, all.steps);
	assert_int_equal(env, all.ns_env_step);
	assert_int_equal(ring, all.ns_ring_publish);
	assert_int_equal(sr_pool_worker_stats_get(p, 3, &ws), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "worker 3"));
	assert_int_equal(sr_pool_worker_stats_get(p, 0, NULL), -EINVAL);
	assert_int_equal(sr_pool_worker_stats_get(NULL, 0, &ws), -EINVAL);
	sr_pool_destroy(p);
}

/* sr_pool_worker_stats.cpu: where each worker runs, and when it is not one
 * CPU. */
static void test_worker_cpu(void **st)
{
	sr_env_spec s = cnt_spec(3, 0);
	sr_pool_opts o;
	sr_pool *p;
	cpu_set_t before;
	int c0, c1;

	(void)st;
	assert_int_equal(sched_getaffinity(0, sizeof(before), &before), 0);
	if (CPU_COUNT(&before) < 2)
		skip();
	sr_pool_opts_init(&o);
	o.spec = &s;
	o.num_envs = 4;
	o.num_threads = 2;
	o.bind = SR_BIND_CORE;
	o.flags = SR_POOL_F_BIND_CALLER;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	c0 = worker_cpu(p, 0);
	c1 = worker_cpu(p, 1);
	assert_true(c0 >= 0 && c1 >= 0 && c0 != c1);
	assert_true(CPU_ISSET(c0, &before) && CPU_ISSET(c1, &before));
	assert_int_equal(worker_cpu(p, 2), -EINVAL);
	assert_int_equal(worker_cpu(NULL, 0), -EINVAL);
	sr_pool_destroy(p);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);

	/* The calling thread, not bound: no CPU to report. */
	o.flags = 0;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(worker_cpu(p, 0), -ENOENT);
	assert_true(worker_cpu(p, 1) >= 0);
	sr_pool_destroy(p);

	/* bind none: nobody is. */
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_BIND_CALLER;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(worker_cpu(p, 0), -ENOENT);
	assert_int_equal(worker_cpu(p, 1), -ENOENT);
	sr_pool_destroy(p);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_threads),
		cmocka_unit_test(test_knobs),
		cmocka_unit_test(test_stats_shm),
		cmocka_unit_test(test_many_envs_threads),
		cmocka_unit_test(test_bind_caller),
		cmocka_unit_test(test_worker_cpu),
		cmocka_unit_test(test_worker_stats),
		cmocka_unit_test(test_rebalance),
		cmocka_unit_test(test_rebalance_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

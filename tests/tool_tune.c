/* Tuning logic of sweep and diagnose on synthetic numbers: the bound
 * classification, the diagnose verdicts, the table layout, the
 * `--envs auto` series and the JSONL context. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench_pool.h"
#include "machine.h"
#include "../tools/tune.h"

static void test_classify(void **st)
{
	struct tune_shares env = {.env = 0.7, .ring = 0.05, .copy = 0.05, .policy = 0.1, .wait = 0.1};
	struct tune_shares pol = {.env = 0.2, .ring = 0.0, .copy = 0.05, .policy = 0.6, .wait = 0.15};
	/* ring and copy add up: 0.25 + 0.2 beats env's 0.4 */
	struct tune_shares copy = {.env = 0.4, .ring = 0.25, .copy = 0.2, .policy = 0.1, .wait = 0.05};
	struct tune_shares sync = {.env = 0.3, .ring = 0.02, .copy = 0.03, .policy = 0.1, .wait = 0.55};
	struct tune_shares junk = {.env = NAN, .ring = -1, .copy = 0, .policy = 0.01, .wait = 0};
	struct tune_shares tie = {.env = 0.5, .policy = 0.5};

	(void)st;
	assert_int_equal(tune_classify(&env), TUNE_BOUND_ENV);
	assert_int_equal(tune_classify(&pol), TUNE_BOUND_POLICY);
	assert_int_equal(tune_classify(&copy), TUNE_BOUND_COPY);
	assert_int_equal(tune_classify(&sync), TUNE_BOUND_SYNC);
	assert_int_equal(tune_classify(&junk), TUNE_BOUND_POLICY);
	assert_int_equal(tune_classify(&tie), TUNE_BOUND_ENV);
	assert_string_equal(tune_bound_name(TUNE_BOUND_COPY), "copy");
	assert_string_equal(tune_verdict_name(TUNE_BOUND_POLICY), "policy/GPU-bound");
	assert_string_equal(tune_bound_name(TUNE_BOUND_COUNT), "?");
}

static void test_wall_shares(void **st)
{
	struct tune_shares s;

	(void)st;
	/* 2 workers: 1200 ns of env work in a 1000 ns batch is 600 ns each. */
	tune_wall_shares(1200, 200, 100, 50, 2, 1000, &s);
	assert_true(fabs(s.env - 0.6) < 1e-9);
	assert_true(fabs(s.ring - 0.1) < 1e-9);
	assert_true(fabs(s.copy - 0.1) < 1e-9);
	assert_true(fabs(s.policy - 0.05) < 1e-9);
	assert_true(fabs(s.wait - 0.15) < 1e-9);
	/* Unbalanced or overlapping figures never give a negative wait. */
	tune_wall_shares(3000, 0, 500, 800, 1, 1000, &s);
	assert_true(fabs(s.env - 1.0 / 2.3) < 1e-9 && s.wait == 0.0);
	assert_true(fabs(s.env + s.ring + s.copy + s.policy - 1.0) < 1e-9);
	tune_wall_shares(1, 1, 1, 1, 0, 0, &s);
	assert_true(s.env == 0 && s.wait == 0);
}

static void test_table(void **st)
{
	struct tune_row r = {
		.envs = 256, .threads = 2, .batch = 128, .async = 1, .steps_per_sec = 1234567.4,
		.p50_us = 80.04, .p90_us = 95.55, .p99_us = 190.0, .efficiency = 0.871,
		.sh = {.env = 0.6, .ring = 0.05, .copy = 0.05, .policy = 0.2, .wait = 0.1},
	};
	size_t len;
	FILE *f;
	char *buf;
	const char *want =
		"num_envs threads batch  mode      steps/s    p50_us    p90_us    p99_us   eff  env "
		"ring copy policy wait  bound\n"
		"-------- ------- ----- ----- ------------ --------- --------- --------- ----- ---- "
		"---- ---- ------ ---- ------\n"
		"     256       2   128 async      1234567      80.0      95.5     190.0   87%  60% "
		"  5%   5%    20%  10%    env\n";

	(void)st;
	buf = NULL;
	f = open_memstream(&buf, &len);
	tune_table_header(f);
	tune_table_row(f, &r);
	fclose(f);
	assert_string_equal(buf, want);
	free(buf);
}

/* Throughput that rises, flattens for two steps, rises again, then
 * flattens: a plateau of two steps does not stop the series, three steps
 * without a >5% gain do. */
static void test_auto_stops_when_flat(void **st)
{
	struct tune_auto a;
	uint32_t envs, seen[16];
	double sps = -1;
	int n = 0;
	const double curve[] = {100, 200, 400, 410, 415, 1000, 2000, 2010, 2020, 2030, 5000};

	(void)st;
	tune_auto_init(&a, 2, 4096);
	while (tune_auto_next(&a, sps, &envs)) {
		assert_true(n < 11);
		seen[n] = envs;
		sps = curve[n++];
	}
	assert_int_equal(n, 10);
	assert_int_equal(seen[0], 2);
	assert_int_equal(seen[5], 64);  /* past the plateau at 16-32 */
	assert_int_equal(seen[9], 1024); /* 2010, 2020, 2030 after 2000: done */
}

/* One dip resets nothing, a gain resets the patience; the series ends at
 * max when throughput keeps growing. */
static void test_auto_reaches_max(void **st)
{
	struct tune_auto a;
	uint32_t envs, last = 0;
	double sps = -1;
	int n = 0;

	(void)st;
	tune_auto_init(&a, 3, 64); /* 4, 8, 16, 32, 64 */
	while (tune_auto_next(&a, sps, &envs)) {
		last = envs;
		sps = n == 1 ? 50 : 100.0 * (n + 1); /* a dip at 8, then growth */
		n++;
	}
	assert_int_equal(n, 5);
	assert_int_equal(last, 64);

	tune_auto_init(&a, 5000, 4096); /* start beyond max: nothing to run */
	assert_false(tune_auto_next(&a, -1, &envs));
}

static bool has(const struct tune_verdict *v, const char *needle)
{
	for (int i = 0; i < v->nadvice; i++)
		if (strstr(v->advice[i], needle))
			return true;
	for (int i = 0; i < v->nwhy; i++)
		if (strstr(v->why[i], needle))
			return true;
	return false;
}

static void test_verdict_env(void **st)
{
	/* Cheap policy, envs take most of the time, one of two cores used. */
	struct tune_diag_in in = {
		.envs = 8, .threads = 1, .batch = 8, .cores = 2,
		.env_only_sps = 1e6, .policy_only_sps = 2e7, .loop_sps = 9e5,
		.loop = {.env = 0.8, .ring = 0.03, .copy = 0.02, .policy = 0.05, .wait = 0.1},
	};
	struct tune_verdict v;

	(void)st;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_ENV);
	assert_true(has(&v, "more threads (--threads 2)"));
	assert_true(has(&v, "more envs per thread (8 now"));
	/* sync: 1/(1/1e6 + 1/2e7) */
	assert_true(fabs(v.expected_sps - 1.0 / (1e-6 + 5e-8)) < 1);
	assert_true(has(&v, "envs alone: 1000000 steps/s; policy alone: 20000000 rows/s"));
}

static void test_verdict_policy(void **st)
{
	struct tune_diag_in in = {
		.envs = 256, .threads = 2, .batch = 256, .cores = 2,
		.env_only_sps = 2e6, .policy_only_sps = 3e5, .loop_sps = 2.5e5,
		.loop = {.env = 0.1, .ring = 0.01, .copy = 0.01, .policy = 0.85, .wait = 0.03},
	};
	struct tune_verdict v;
	FILE *f;
	char *buf = NULL;
	size_t len;

	(void)st;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_POLICY);
	assert_true(has(&v, "bigger batch"));
	assert_true(has(&v, "async mode"));
	assert_true(has(&v, "GPU"));
	assert_false(has(&v, "no-inline")); /* sync: nothing to step meanwhile */
	f = open_memstream(&buf, &len);
	tune_print_verdict(f, &v);
	fclose(f);
	assert_true(strncmp(buf, "verdict: policy/GPU-bound\n  because ", 36) == 0);
	assert_non_null(strstr(buf, "\n  try     "));
	free(buf);

	/* Policy not measured on its own: its share decides. On a GPU already
	 * and in async mode, neither of those is suggested again. */
	in.policy_only_sps = 0;
	in.async = 1;
	in.cuda = 1;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_POLICY);
	assert_false(has(&v, "async mode:"));
	assert_false(has(&v, "device cuda"));
	assert_true(has(&v, "not measured"));
	/* Async with two threads: the trainer thread steps its envs after
	 * the policy; one thread fewer without inline stepping is advised. */
	assert_true(has(&v, "--threads 1"));
	assert_true(has(&v, "no-inline"));
	in.threads = 1;
	tune_diagnose(&in, &v);
	assert_false(has(&v, "no-inline"));
	in.threads = 2; /* env 1% of the batch: nothing to gain */
	in.loop = (struct tune_shares){.env = 0.01, .ring = 0.0, .copy = 0.0, .policy = 0.99};
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_POLICY);
	assert_false(has(&v, "no-inline"));
}

static void test_verdict_copy(void **st)
{
	struct tune_diag_in in = {
		.envs = 1024, .threads = 2, .batch = 1024, .cores = 2,
		.env_only_sps = 3e6, .policy_only_sps = 5e7, .loop_sps = 2.4e6,
		.loop = {.env = 0.3, .ring = 0.2, .copy = 0.3, .policy = 0.1, .wait = 0.1},
	};
	struct tune_verdict v;

	(void)st;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_COPY);
	assert_true(has(&v, "pinned memory"));
	assert_true(has(&v, "ring + copy take 50%"));
	assert_false(has(&v, "send + collect"));
	assert_false(has(&v, "--mode sync"));

	/* Async: send + collect on the trainer thread; sync measured faster
	 * is suggested, slower is not. */
	in.async = 1;
	in.batch = 512;
	in.batch_groups = 2; /* as the pool makes them: 512 divides 1024 */
	in.other_mode_sps = 3.6e6;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_COPY);
	assert_true(has(&v, "send + collect"));
	assert_true(has(&v, "sync mode: 3600000 steps/s (1.50x)"));
	assert_true(has(&v, "--mode sync"));
	assert_true(has(&v, "each batch"));
	assert_false(has(&v, "batch groups"));
	in.other_mode_sps = 1.2e6;
	tune_diagnose(&in, &v);
	assert_false(has(&v, "--mode sync"));
	/* A batch that does not divide the envs: per-env work, and the
	 * advice to make it divide them. */
	in.batch = 500;
	in.batch_groups = 0;
	tune_diagnose(&in, &v);
	assert_true(has(&v, "every row"));
	assert_true(has(&v, "batch groups"));
}

/* A sync loop whose workers step at different speeds names the slow one;
 * async (no lockstep) and a small spread do not. */
static void test_verdict_slow_worker(void **st)
{
	struct tune_diag_in in = {
		.envs = 1024, .threads = 2, .batch = 1024, .cores = 2,
		.env_only_sps = 3e7, .loop_sps = 3e7,
		.loop = {.env = 0.8, .ring = 0.1, .copy = 0.01, .policy = 0, .wait = 0.09},
		.worker_fast_ns = 45.0, .worker_slow_ns = 56.0, .worker_fast = 0,
		.worker_slow = 1, .worker_slow_cpu = 1,
	};
	struct tune_verdict v;

	(void)st;
	tune_diagnose(&in, &v);
	assert_true(has(&v, "worker 1 (cpu 1) takes 56.0 ns a step (env + ring) against 45.0 on "
			    "worker 0"));
	assert_true(has(&v, "look for other work on worker 1's CPU"));
	in.worker_slow_cpu = -2; /* not bound to one CPU */
	tune_diagnose(&in, &v);
	assert_true(has(&v, "worker 1 takes 56.0 ns"));
	in.worker_slow_ns = 50.0; /* 11% apart: not called out */
	tune_diagnose(&in, &v);
	assert_false(has(&v, "ns a step (env + ring)"));
	in.worker_slow_ns = 56.0;
	in.async = 1;
	in.batch = 512;
	tune_diagnose(&in, &v);
	assert_false(has(&v, "ns a step (env + ring)"));
	in.async = 0;
	in.worker_fast_ns = 0; /* not measured */
	tune_diagnose(&in, &v);
	assert_false(has(&v, "ns a step (env + ring)"));
	/* Policy-bound: the workers' pace is not what to change. */
	in.worker_fast_ns = 45.0;
	in.loop = (struct tune_shares){.env = 0.02, .ring = 0.01, .copy = 0, .policy = 0.95,
				       .wait = 0.02};
	in.policy_only_sps = 1e6;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_POLICY);
	assert_false(has(&v, "ns a step (env + ring)"));
}

/* Raw loops on the workers' CPUs at once that ran at different speeds:
 * the CPUs themselves are named as the pace of a sync loop; balanced CPUs,
 * async, one thread or no measurement are not. */
static void test_verdict_unequal_cpus(void **st)
{
	struct tune_diag_in in = {
		.envs = 1024, .threads = 2, .batch = 1024, .cores = 2,
		.env_only_sps = 3e7, .loop_sps = 3e7,
		.loop = {.env = 0.8, .ring = 0.1, .copy = 0.01, .policy = 0, .wait = 0.09},
		.cpu_balance = 0.665,
	};
	struct tune_verdict v;

	(void)st;
	tune_diagnose(&in, &v);
	assert_true(has(&v, "the CPUs themselves step at different speeds: raw env loops on "
			    "every worker's CPU at once ran at 0.67 of the fastest on the slowest"));
	in.cpu_balance = 0.9; /* within TUNE_WORKER_SPREAD */
	tune_diagnose(&in, &v);
	assert_false(has(&v, "CPUs themselves"));
	in.cpu_balance = 0; /* not measured */
	tune_diagnose(&in, &v);
	assert_false(has(&v, "CPUs themselves"));
	in.cpu_balance = 0.665;
	in.async = 1;
	in.batch = 512;
	tune_diagnose(&in, &v);
	assert_false(has(&v, "CPUs themselves"));
	in.async = 0;
	in.batch = 1024;
	in.threads = 1;
	tune_diagnose(&in, &v);
	assert_false(has(&v, "CPUs themselves"));
}

/* The wall shares of a benchmark result: copy is collect plus send; the
 * collect time already leaves out the envs recv steps inline, so nothing
 * is subtracted from it. */
static void test_result_shares(void **st)
{
	struct bench_pool_result r;
	struct tune_shares sh;

	(void)st;
	memset(&r, 0, sizeof(r));
	r.threads_used = 2;
	r.batches = 1000;
	r.seconds = 0.02; /* 20 us a batch */
	r.ns_env_step = 20000; /* 10 us per worker */
	r.ns_ring = 4000;      /* 2 us */
	r.ns_copy = 5000;
	r.ns_send = 3000;
	tune_result_shares(&r, &sh);
	assert_true(fabs(sh.env - 0.5) < 1e-9);
	assert_true(fabs(sh.ring - 0.1) < 1e-9);
	assert_true(fabs(sh.copy - 0.4) < 1e-9);
	assert_true(fabs(sh.wait) < 1e-9);
	tune_result_shares(&r, &sh); /* again: the result is not changed by the call */
	assert_true(fabs(sh.copy - 0.4) < 1e-9);
	/* No batches: the benchmark's own shares, send counted with copy. */
	r.batches = 0;
	r.share_env = 0.5;
	r.share_ring = 0.1;
	r.share_copy = 0.15;
	r.share_send = 0.05;
	r.share_wait = 0.2;
	tune_result_shares(&r, &sh);
	assert_true(fabs(sh.copy - 0.2) < 1e-9);
	assert_true(fabs(sh.wait - 0.2) < 1e-9);
}

static void test_verdict_sync(void **st)
{
	/* Both alone are fast, the loop is not, and it mostly waits. */
	struct tune_diag_in in = {
		.envs = 4, .threads = 4, .batch = 4, .cores = 2,
		.env_only_sps = 1e6, .policy_only_sps = 1e7, .loop_sps = 2e5,
		.loop = {.env = 0.2, .ring = 0.02, .copy = 0.03, .policy = 0.05, .wait = 0.7},
		.other_mode_sps = 5e5,
	};
	struct tune_verdict v;

	(void)st;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_SYNC);
	assert_true(v.loop_vs_expected < 0.6);
	assert_true(has(&v, "--mode async"));
	assert_true(has(&v, "fewer threads (4 > 2 cores)"));
	assert_true(has(&v, "more envs per thread (1 now"));
	assert_true(has(&v, "async mode: 500000 steps/s (2.50x)"));

	/* Waiting is the largest share: sync-bound even when the loop is near
	 * what the (equally waiting) runs alone allow. */
	in.loop_sps = 8.5e5;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_SYNC);

	/* Waiting 35% but env larger, loop near expected: env-bound. */
	in.loop = (struct tune_shares){.env = 0.5, .ring = 0.05, .copy = 0.05, .policy = 0.05,
				       .wait = 0.35};
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_ENV);
	/* ... but sync-bound when the loop falls far below it. */
	in.loop_sps = 3e5;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_SYNC);
	/* A busy machine and slow outliers are named, with quiet cores advised. */
	in.loop = (struct tune_shares){.env = 0.2, .wait = 0.7, .policy = 0.1};
	in.loadavg = 8.5;
	in.cpus = 2;
	in.median_batch_us = 10;
	in.mean_batch_us = 40;
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_SYNC);
	assert_true(has(&v, "load average 8.5 on 2 CPUs"));
	assert_true(has(&v, "75% of the time is in slow outliers"));
	assert_true(has(&v, "quiet cores"));
	in.loadavg = 1.0;
	in.mean_batch_us = 12;
	tune_diagnose(&in, &v);
	assert_false(has(&v, "load average"));
	assert_false(has(&v, "outliers"));
	assert_false(has(&v, "quiet cores"));
	in.loadavg = 0;
	in.median_batch_us = in.mean_batch_us = 0;

	/* Waiting under 30% is never the verdict. */
	in.loop = (struct tune_shares){.env = 0.2, .ring = 0.25, .copy = 0.3, .policy = 0.0,
				       .wait = 0.25};
	tune_diagnose(&in, &v);
	assert_int_equal(v.bound, TUNE_BOUND_COPY);
}

static void test_json_context(void **st)
{
	FILE *f;
	char *buf = NULL;
	size_t len;

	(void)st;
	f = open_memstream(&buf, &len);
	bench_json_str(f, "a\"b\\c\n");
	fputc(' ', f);
	bench_json_machine(f);
	fputc(' ', f);
	bench_json_build(f);
	fclose(f);
	assert_true(strncmp(buf, "\"a\\\"b\\\\c\\u000a\" ", 16) == 0);
	assert_non_null(strstr(buf, "\"machine\":{\"cpu_model\":\""));
	assert_non_null(strstr(buf, ",\"numa_nodes\":"));
	assert_non_null(strstr(buf, ",\"gpu\":\""));
	assert_non_null(strstr(buf, ",\"loadavg_1m\":"));
	assert_non_null(strstr(buf, "\"build\":{\"version\":\""));
	assert_non_null(strstr(buf, "\"backends\":[\"host\""));
	free(buf);
	assert_true(bench_allowed_cpus() >= 1);
	assert_true(bench_physical_cores() >= 1);
	assert_true(bench_numa_nodes() >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_wall_shares),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_auto_stops_when_flat),
		cmocka_unit_test(test_auto_reaches_max),
		cmocka_unit_test(test_verdict_env),
		cmocka_unit_test(test_verdict_policy),
		cmocka_unit_test(test_verdict_copy),
		cmocka_unit_test(test_result_shares),
		cmocka_unit_test(test_verdict_slow_worker),
		cmocka_unit_test(test_verdict_unequal_cpus),
		cmocka_unit_test(test_verdict_sync),
		cmocka_unit_test(test_json_context),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

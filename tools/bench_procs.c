/*
 * bench-procs: thread workers against process workers (SR_POOL_F_PROCS) on
 * the same env, envs and worker count, in interleaved rounds (the machine
 * is shared: each round times every contender, the ratios are taken per
 * round, and their medians are reported). Contenders: threads (worker 0
 * inline, the others threads), processes (every worker a process: each
 * slice isolated) and processes with SR_POOL_F_PROC_INLINE (worker 0's
 * slice on the calling thread, the others processes). Goal
 * (docs/procs.md): process workers >= 0.8x threads for CartPole at 1024
 * envs x 2 workers. Each round also times the three in async mode
 * (sr_pool_send / sr_pool_recv, batch B, each batch sent back whole: batch
 * groups), the "async" rows; --batch 0 leaves them out.
 *
 *   bench-procs [--env ID] [--envs N] [--threads W] [--steps K] [--rounds R]
 *               [--batch B] [--only threads|processes|inline]
 *
 * Prints a line per round and mode and a JSON summary line. --only runs one
 * contender and prints its rate per round (for a profiler: perf record
 * -g build/bench-procs --only inline).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "cli.h"
#include "stepring.h"

enum { THREADS, PROCS, PROCS_INLINE, NKIND };
static const char *const kind_name[NKIND] = {"threads", "processes", "processes+inline"};

static double now_s(void)
{
	return 1e-9 * (double)bench_now_ns();
}

static int verbose; /* --only: each worker's time per step, from its counters */

/* Env steps per second of a pool stepping @k times (after a warm-up);
 * @batch < @n: async, @k batches of @batch (recv, then send it back). */
static double run(const char *env, uint32_t n, uint32_t w, uint32_t k, int kind,
		  const int32_t *acts, uint32_t batch)
{
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;
	double t0 = 0, t1;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED;
	if (kind != THREADS)
		o.flags |= SR_POOL_F_PROCS;
	if (kind == PROCS_INLINE)
		o.flags |= SR_POOL_F_PROC_INLINE;
	o.env = env;
	o.num_envs = n;
	o.num_threads = w;
	o.batch_size = batch < n ? batch : 0;
	if (sr_pool_create(&o, &p)) {
		fprintf(stderr, "bench-procs: %s\n", sr_last_error());
		exit(1);
	}
	sr_pool_reset(p, &b);
	if (batch < n) {
		for (uint32_t i = 0; i < k + 50; i++) {
			if (i == 50)
				t0 = now_s();
			if (sr_pool_recv(p, &b) ||
			    sr_pool_send(p, acts + (size_t)(i % 64) * n, NULL, b->n)) {
				fprintf(stderr, "bench-procs: %s\n", sr_last_error());
				exit(1);
			}
		}
		t1 = now_s();
		sr_pool_destroy(p);
		return (double)batch * k / (t1 - t0);
	}
	for (uint32_t i = 0; i < 50; i++)
		sr_pool_step(p, acts + (size_t)(i % 64) * n, &b);
	t0 = now_s();
	for (uint32_t i = 0; i < k; i++)
		if (sr_pool_step(p, acts + (size_t)(i % 64) * n, &b)) {
			fprintf(stderr, "bench-procs: %s\n", sr_last_error());
			exit(1);
		}
	t1 = now_s();
	if (verbose) {
		/* Microseconds per step of each worker (over the whole run, warm-up
		 * included): in the env, in the bookkeeping, waiting. Worker 0
		 * inline: "env" is its whole slice, "idle" the rest of the calling
		 * thread's time (the serial part of a step and the wait). */
		for (uint32_t i = 0; i < w; i++) {
			sr_pool_worker_stats ws;
			double steps = (double)(k + 50);

			if (sr_pool_worker_stats_get(p, i, &ws))
				continue;
			printf("  worker %u: %u envs  env %.2f us  ring %.2f us  idle %.2f us per step\n",
			       i, ws.num_envs, 1e-3 * (double)ws.ns_env_step / steps,
			       1e-3 * (double)ws.ns_ring_publish / steps,
			       1e-3 * (double)ws.ns_idle / steps);
		}
	}
	sr_pool_destroy(p);
	return (double)n * k / (t1 - t0);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench-procs [--env ID] [--envs N] [--threads W] [--steps K] "
		   "[--rounds R]\n                   [--batch B] [--only threads|processes|inline]\n"
		   "  --threads W   workers (default 2; --workers W is the same)\n"
		   "  --batch B     the async rows' batch (default envs / 2; 0: no async rows)\n");
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, uint32_t n)
{
	qsort(v, n, sizeof(double), cmp);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
	const char *env = "CartPole-v1";
	uint32_t n = 1024, w = 2, k = 2000, rounds = 5, batch = UINT32_MAX;
	double *rate[NKIND], *ratio[NKIND], lo[NKIND], hi[NKIND];
	double *arate[NKIND], *aratio[NKIND], alo[NKIND], ahi[NKIND];
	int32_t *acts;
	uint64_t x = 1;
	int only = -1;

	const char *v;
	const struct cli_run_opts opts = {.env = &env, .envs = &n, .threads = &w};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &opts)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--workers", &v)) {
			/* The name this program had for --threads. */
			w = (uint32_t)cli_int("--workers", v, 1, CLI_THREADS_MAX);
		} else if (cli_opt(argc, argv, &i, "--steps", &v)) {
			k = (uint32_t)cli_int("--steps", v, 1, UINT32_MAX);
		} else if (cli_opt(argc, argv, &i, "--batch", &v)) {
			batch = (uint32_t)cli_int("--batch", v, 0, UINT32_MAX);
		} else if (cli_opt(argc, argv, &i, "--rounds", &v)) {
			rounds = (uint32_t)cli_int("--rounds", v, 1, 1 << 20);
		} else if (cli_opt(argc, argv, &i, "--only", &v)) {
			for (int c = 0; c < NKIND; c++)
				if (!strcmp(v, kind_name[c]) ||
				    (c == PROCS_INLINE && !strcmp(v, "inline")))
					only = c;
			if (only < 0)
				cli_die("--only: '%s' is not threads, processes or inline", v);
		} else {
			usage(stderr);
			return SR_CLI_EXIT_USAGE;
		}
	}
	if (!w)
		cli_die("--threads: bench-procs needs at least 1 worker");
	if (batch == UINT32_MAX)
		batch = n / 2;
	if (batch >= n)
		cli_die("--batch %u: the async rows need a batch below --envs %u (0: none)", batch, n);
	acts = malloc(sizeof(*acts) * 64 * n);
	if (!acts)
		return 1;
	for (int c = 0; c < NKIND; c++) {
		rate[c] = calloc(rounds, sizeof(double));
		ratio[c] = calloc(rounds, sizeof(double));
		arate[c] = calloc(rounds, sizeof(double));
		aratio[c] = calloc(rounds, sizeof(double));
		if (!rate[c] || !ratio[c] || !arate[c] || !aratio[c])
			return 1;
		lo[c] = alo[c] = 1e300;
		hi[c] = ahi[c] = 0;
	}
	for (size_t i = 0; i < 64 * (size_t)n; i++)
		acts[i] = (int32_t)(sr_splitmix64(&x) & 1);
	if (only >= 0) {
		verbose = 1;
		for (uint32_t r = 0; r < rounds; r++) {
			rate[only][r] = run(env, n, w, k, only, acts, n);
			printf("round %u:  %s %.0f env steps/s\n", r, kind_name[only], rate[only][r]);
			fflush(stdout);
		}
		printf("{\"bench\":\"procs\",\"env\":\"%s\",\"envs\":%u,\"workers\":%u,"
		       "\"steps\":%u,\"rounds\":%u,\"only\":\"%s\",\"steps_per_s\":%.0f}\n",
		       env, n, w, k, rounds, kind_name[only], median(rate[only], rounds));
		return 0;
	}
	for (uint32_t r = 0; r < rounds; r++) {
		/* Rotate the order, so that none always runs first. */
		for (int j = 0; j < NKIND; j++) {
			int c = (int)((r + (uint32_t)j) % NKIND);

			rate[c][r] = run(env, n, w, k, c, acts, n);
			if (batch)
				arate[c][r] = run(env, n, w, k * (n / batch), c, acts, batch);
		}
		printf("round %u:", r);
		for (int c = 0; c < NKIND; c++) {
			ratio[c][r] = rate[c][r] / rate[THREADS][r];
			lo[c] = ratio[c][r] < lo[c] ? ratio[c][r] : lo[c];
			hi[c] = ratio[c][r] > hi[c] ? ratio[c][r] : hi[c];
			printf("  %s %.0f", kind_name[c], rate[c][r]);
		}
		printf(" env steps/s  ratios %.3f (processes) %.3f (inline)\n", ratio[PROCS][r],
		       ratio[PROCS_INLINE][r]);
		if (batch) {
			printf("round %u async batch %u:", r, batch);
			for (int c = 0; c < NKIND; c++) {
				aratio[c][r] = arate[c][r] / arate[THREADS][r];
				alo[c] = aratio[c][r] < alo[c] ? aratio[c][r] : alo[c];
				ahi[c] = aratio[c][r] > ahi[c] ? aratio[c][r] : ahi[c];
				printf("  %s %.0f", kind_name[c], arate[c][r]);
			}
			printf(" env steps/s  ratios %.3f (processes) %.3f (inline)\n",
			       aratio[PROCS][r], aratio[PROCS_INLINE][r]);
		}
		fflush(stdout);
	}
	printf("{\"bench\":\"procs\",\"mode\":\"sync\",\"env\":\"%s\",\"envs\":%u,\"workers\":%u,\"steps\":%u,"
	       "\"rounds\":%u,\"threads_steps_per_s\":%.0f,\"procs_steps_per_s\":%.0f,"
	       "\"procs_inline_steps_per_s\":%.0f,\"ratio_median\":%.3f,\"ratio_min\":%.3f,"
	       "\"ratio_max\":%.3f,\"ratio_inline_median\":%.3f,\"ratio_inline_min\":%.3f,"
	       "\"ratio_inline_max\":%.3f,\"goal\":0.8}\n",
	       env, n, w, k, rounds, median(rate[THREADS], rounds), median(rate[PROCS], rounds),
	       median(rate[PROCS_INLINE], rounds), median(ratio[PROCS], rounds), lo[PROCS],
	       hi[PROCS], median(ratio[PROCS_INLINE], rounds), lo[PROCS_INLINE],
	       hi[PROCS_INLINE]);
	if (batch)
		printf("{\"bench\":\"procs\",\"mode\":\"async\",\"env\":\"%s\",\"envs\":%u,"
		       "\"workers\":%u,\"batch\":%u,\"rounds\":%u,\"threads_steps_per_s\":%.0f,"
		       "\"procs_steps_per_s\":%.0f,\"procs_inline_steps_per_s\":%.0f,"
		       "\"ratio_median\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,"
		       "\"ratio_inline_median\":%.3f,\"ratio_inline_min\":%.3f,"
		       "\"ratio_inline_max\":%.3f}\n",
		       env, n, w, batch, rounds, median(arate[THREADS], rounds),
		       median(arate[PROCS], rounds), median(arate[PROCS_INLINE], rounds),
		       median(aratio[PROCS], rounds), alo[PROCS], ahi[PROCS],
		       median(aratio[PROCS_INLINE], rounds), alo[PROCS_INLINE], ahi[PROCS_INLINE]);
	return 0;
}

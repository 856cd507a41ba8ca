/*
 * bench-procs: thread workers against process workers (SR_POOL_F_PROCS) on
 * the same env, envs and worker count, in interleaved rounds (the machine
 * is shared: each round times both, the ratio is taken per round, and the
 * median is reported). Goal (docs/procs.md): process workers >= 0.8x
 * threads for CartPole at 1024 envs x 2 workers.
 *
 *   bench-procs [--env ID] [--envs N] [--workers W] [--steps K] [--rounds R]
 *
 * Prints a line per round and a JSON summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stepring.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Env steps per second of a pool stepping @k times (after a warm-up). */
static double run(const char *env, uint32_t n, uint32_t w, uint32_t k, bool procs,
		  const int32_t *acts)
{
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;
	double t0, t1;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | (procs ? SR_POOL_F_PROCS : 0);
	o.env = env;
	o.num_envs = n;
	o.num_threads = w;
	if (sr_pool_create(&o, &p)) {
		fprintf(stderr, "bench-procs: %s\n", sr_last_error());
		exit(1);
	}
	sr_pool_reset(p, &b);
	for (uint32_t i = 0; i < 50; i++)
		sr_pool_step(p, acts + (size_t)(i % 64) * n, &b);
	t0 = now_s();
	for (uint32_t i = 0; i < k; i++)
		if (sr_pool_step(p, acts + (size_t)(i % 64) * n, &b)) {
			fprintf(stderr, "bench-procs: %s\n", sr_last_error());
			exit(1);
		}
	t1 = now_s();
	sr_pool_destroy(p);
	return (double)n * k / (t1 - t0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	const char *env = "CartPole-v1";
	uint32_t n = 1024, w = 2, k = 2000, rounds = 5;
	double *thr, *prc, *ratio;
	int32_t *acts;
	uint64_t x = 1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--env"))
			env = argv[i + 1];
		else if (!strcmp(argv[i], "--envs"))
			n = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--workers"))
			w = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--steps"))
			k = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else {
			fprintf(stderr, "usage: bench-procs [--env ID] [--envs N] [--workers W] "
					"[--steps K] [--rounds R]\n");
			return 2;
		}
	}
	acts = malloc(sizeof(*acts) * 64 * n);
	thr = calloc(rounds, sizeof(double));
	prc = calloc(rounds, sizeof(double));
	ratio = calloc(rounds, sizeof(double));
	if (!acts || !thr || !prc || !ratio)
		return 1;
	for (size_t i = 0; i < 64 * (size_t)n; i++)
		acts[i] = (int32_t)(sr_splitmix64(&x) & 1);
	for (uint32_t r = 0; r < rounds; r++) {
		/* Alternate the order, so that neither always runs first. */
		if (r & 1) {
			prc[r] = run(env, n, w, k, true, acts);
			thr[r] = run(env, n, w, k, false, acts);
		} else {
			thr[r] = run(env, n, w, k, false, acts);
			prc[r] = run(env, n, w, k, true, acts);
		}
		ratio[r] = prc[r] / thr[r];
		printf("round %u: threads %.0f  processes %.0f env steps/s  ratio %.3f\n", r, thr[r],
		       prc[r], ratio[r]);
	}
	qsort(thr, rounds, sizeof(double), cmp);
	qsort(prc, rounds, sizeof(double), cmp);
	qsort(ratio, rounds, sizeof(double), cmp);
	printf("{\"bench\":\"procs\",\"env\":\"%s\",\"envs\":%u,\"workers\":%u,\"steps\":%u,"
	       "\"rounds\":%u,\"threads_steps_per_s\":%.0f,\"procs_steps_per_s\":%.0f,"
	       "\"ratio_median\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,\"goal\":0.8}\n",
	       env, n, w, k, rounds, thr[rounds / 2], prc[rounds / 2], ratio[rounds / 2], ratio[0],
	       ratio[rounds - 1]);
	return 0;
}

/*
 * stepring bench pool under mpirun / srun (more than one rank): a pool
 * across the ranks, measured in rounds, one table at rank 0 (or JSON
 * lines: a row per rank and a summary row).
 *
 * A round has two slices of --seconds: rank 0 steps its envs alone while
 * the others wait at a barrier (T_1: one rank), then every rank steps its
 * envs at once (T_N: the sum of the ranks' steps/s). The scaling
 * efficiency E = T_N / (N x T_1) of docs/tuning.md is the median of the
 * rounds' ratios, so a machine whose speed drifts does not bias it. Batch
 * latencies of the all-ranks slices go into a log-bucket histogram per
 * rank; the percentiles of the run are read from the sum of the ranks'
 * histograms (merged, not averaged).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "cli.h"
#include "cli_mpi.h"
#include "stepring.h"

int bench_mpi_pool(int argc, char **argv);

/* Latency histogram: bucket k holds [1.02^k, 1.02^(k+1)) ns, 2% wide. */
#define HB 1400 /* up to 1.02^1400 ns: far past any batch */

static int hbucket(double ns)
{
	int k = ns < 1 ? 0 : (int)(log(ns) / log(1.02));
	return k < HB ? k : HB - 1;
}

static double hpct(const double *h, double q)
{
	double tot = 0, acc = 0;

	for (int k = 0; k < HB; k++)
		tot += h[k];
	for (int k = 0; k < HB; k++) {
		acc += h[k];
		if (tot > 0 && acc >= q * tot)
			return pow(1.02, k + 0.5) / 1e3; /* bucket middle, us */
	}
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

struct stepper {
	sr_pool *p;
	const sr_env_spec *spec;
	unsigned char *acts;
	size_t asz;
	uint32_t n;
	sr_rng rng;
};

static void fill_actions(struct stepper *s)
{
	const sr_env_spec *sp = s->spec;

	for (uint32_t e = 0; e < s->n; e++) {
		unsigned char *a = s->acts + (size_t)e * s->asz;
		if (sp->act_kind == SR_SPACE_DISCRETE) {
			int32_t v = (int32_t)(sr_rng_next(&s->rng) % sp->act_n);
			memcpy(a, &v, 4);
		} else {
			for (uint32_t d = 0; d < sp->act_dim; d++) {
				float v = (float)sr_rng_range(&s->rng, sp->act_low[d], sp->act_high[d]);
				memcpy(a + 4 * d, &v, 4);
			}
		}
	}
}

/* Step for @sec seconds; returns steps/s, adds batch latencies to @h. */
static double run_slice(struct stepper *s, double sec, double *h)
{
	const sr_batch *b;
	uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)(sec * 1e9), t = t0, steps = 0;

	while (t < end) {
		uint64_t a;
		int err;

		fill_actions(s);
		a = bench_now_ns();
		err = sr_pool_step(s->p, s->acts, &b);
		if (err)
			cli_die("bench pool: step: %s", sr_last_error());
		t = bench_now_ns();
		if (h)
			h[hbucket((double)(t - a))] += 1;
		steps += b->n;
	}
	return (double)steps / ((double)(t - t0) / 1e9);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpirun -np N stepring bench pool [--env ID] [--envs-per-rank N | --envs N]\n"
		"                                  [--threads T] [--seconds S] [--rounds R]\n"
		"                                  [--seed S] [--json]\n"
		"A pool across the ranks (sync, random actions). Each round: rank 0 alone\n"
		"(T_1), then every rank at once (T_N); E = T_N / (N x T_1), the median\n"
		"of the rounds. One table at rank 0; --json: a JSON line per rank and a\n"
		"summary line.\n"
		"  --envs-per-rank N  envs of each rank (default 1024); --envs: the global count\n"
		"  --threads T        workers per rank (default 1)\n"
		"  --seconds S        each slice (default 0.5)\n"
		"  --rounds R         rounds (default 5)\n");
}

struct rank_row {
	double sps;        /* median of the all-ranks slices */
	double solo_sps;   /* rank 0: median of its solo slices */
	double p50, p99;   /* its own latency, us */
	double envs, threads, first_env;
	char cpus[64];
};

int bench_mpi_pool(int argc, char **argv)
{
	const char *v, *env = "CartPole-v1";
	uint32_t per_rank = 1024, glob = 0, threads = 1, rounds = 5;
	double sec = 0.5;
	/* --envs here is the global count, so its bound is the sum of the ranks'. */
	const struct cli_run_opts run = {
		.env = &env, .envs = &glob, .envs_max = 1u << 30, .threads = &threads,
	};
	uint64_t seed = 0, first;
	sr_pool_info pi;
	bool json = false;
	int N = cli_mpi_size(), me = cli_mpi_rank();
	sr_pool_opts o;
	struct cli_mpi_pool *mp;
	struct stepper s;
	const sr_batch *b;
	double *h, *hall, *solo, *all, *mine_sps, E[64], tn[64], t1[64];
	struct rank_row row, *rows = NULL;
	sr_env_spec spec;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			if (me == 0)
				usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--envs-per-rank", &v)) {
			per_rank = (uint32_t)cli_int("--envs-per-rank", v, 1, CLI_ENVS_MAX);
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			sec = cli_double("--seconds", v, 0.01, 600);
		} else if (cli_opt(argc, argv, &i, "--rounds", &v)) {
			rounds = (uint32_t)cli_int("--rounds", v, 1, 64);
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else {
			cli_die("bench pool: '%s': under mpirun it takes --env, --envs-per-rank, "
				"--envs, --threads, --seconds, --rounds, --seed, --json (see "
				"--help)", argv[i]);
		}
	}
	cli_env(env, &spec);
	sr_pool_opts_init(&o);
	o.env = env;
	o.num_envs = glob ? glob : per_rank * (uint32_t)N;
	o.num_threads = threads;
	o.flags = SR_POOL_F_SEED;
	o.seed = seed;
	mp = cli_mpi_pool_create("bench pool", &o, &s.p, &first);
	pi = cli_pool_info(s.p);
	s.spec = pi.spec;
	s.n = pi.num_envs;
	s.asz = sr_env_action_size(s.spec);
	s.acts = malloc((size_t)s.n * s.asz);
	h = calloc(HB, sizeof(*h));
	hall = calloc(HB, sizeof(*hall));
	solo = calloc(rounds, sizeof(*solo));
	all = calloc(rounds, sizeof(*all));
	mine_sps = calloc(rounds, sizeof(*mine_sps));
	rows = calloc((size_t)N, sizeof(*rows));
	if (!s.acts || !h || !hall || !solo || !all || !mine_sps || !rows)
		cli_die("bench pool: out of memory");
	sr_rng_seed(&s.rng, seed ^ 0xbe7c4ull, first);
	if (sr_pool_reset(s.p, &b))
		cli_die("bench pool: reset: %s", sr_last_error());

	/* Warm-up: every rank at once. */
	cli_mpi_barrier();
	run_slice(&s, sec < 0.3 ? sec : 0.3, NULL);
	for (uint32_t r = 0; r < rounds; r++) {
		double tot;

		cli_mpi_barrier();
		solo[r] = me == 0 ? run_slice(&s, sec, NULL) : 0;
		cli_mpi_barrier();
		mine_sps[r] = run_slice(&s, sec, h);
		tot = mine_sps[r];
		cli_mpi_allreduce(&tot, 1, '+');
		cli_mpi_allreduce(&solo[r], 1, '+'); /* rank 0's, on every rank */
		all[r] = tot;
		tn[r] = tot;
		t1[r] = solo[r];
		E[r] = solo[r] > 0 ? tot / ((double)N * solo[r]) : 0;
	}

	/* Per-rank rows, and the merged latency histogram. */
	memset(&row, 0, sizeof(row));
	{
		double tmp[64];
		memcpy(tmp, mine_sps, rounds * sizeof(double));
		row.sps = median(tmp, (int)rounds);
		memcpy(tmp, solo, rounds * sizeof(double));
		row.solo_sps = me == 0 ? median(tmp, (int)rounds) : 0;
	}
	row.p50 = hpct(h, 0.50);
	row.p99 = hpct(h, 0.99);
	row.envs = s.n;
	row.threads = pi.num_threads;
	row.first_env = (double)first;
	snprintf(row.cpus, sizeof(row.cpus), "%s", cli_mpi_pool_cpus(mp));
	cli_mpi_gather(&row, sizeof(row), rows);
	memcpy(hall, h, HB * sizeof(double));
	cli_mpi_allreduce(hall, HB, '+');

	if (me == 0) {
		double Em = median(E, (int)rounds), T1 = median(t1, (int)rounds),
		       TN = median(tn, (int)rounds), slow = rows[0].sps, fast = rows[0].sps;
		int slowest = 0;

		for (int r = 1; r < N; r++) {
			if (rows[r].sps < slow) {
				slow = rows[r].sps;
				slowest = r;
			}
			if (rows[r].sps > fast)
				fast = rows[r].sps;
		}
		if (json) {
			for (int r = 0; r < N; r++)
				printf("{\"bench\":\"pool_mpi\",\"row\":\"rank\",\"rank\":%d,\"ranks\":%d,"
				       "\"env\":\"%s\",\"envs\":%.0f,\"first_env\":%.0f,\"threads\":%.0f,"
				       "\"cpus\":\"%s\",\"steps_per_sec\":%.1f,\"p50_us\":%.2f,"
				       "\"p99_us\":%.2f}\n",
				       r, N, spec.id, rows[r].envs, rows[r].first_env, rows[r].threads,
				       rows[r].cpus, rows[r].sps, rows[r].p50, rows[r].p99);
			printf("{\"bench\":\"pool_mpi\",\"row\":\"total\",\"ranks\":%d,\"env\":\"%s\","
			       "\"envs\":%u,\"rounds\":%u,\"seconds\":%g,\"steps_per_sec\":%.1f,"
			       "\"one_rank_steps_per_sec\":%.1f,\"efficiency\":%.4f,"
			       "\"efficiency_min\":%.4f,\"efficiency_max\":%.4f,\"slowest_rank\":%d,"
			       "\"slowest_over_fastest\":%.4f,\"p50_us\":%.2f,\"p90_us\":%.2f,"
			       "\"p99_us\":%.2f}\n",
			       N, spec.id, o.num_envs, rounds, sec, TN, T1, Em,
			       E[0], E[rounds - 1], slowest, fast > 0 ? slow / fast : 0,
			       hpct(hall, 0.5), hpct(hall, 0.9), hpct(hall, 0.99));
		} else {
			printf("bench pool across %d ranks: %s, %u envs (%s), %u rounds of 2 x %g s\n",
			       N, spec.id, o.num_envs, glob ? "global" : "per rank x ranks",
			       rounds, sec);
			printf("%5s %8s %10s %8s %8s %14s %10s %10s\n", "rank", "envs", "first_env",
			       "threads", "cpus", "steps/s", "p50 us", "p99 us");
			for (int r = 0; r < N; r++)
				printf("%5d %8.0f %10.0f %8.0f %8s %14.0f %10.1f %10.1f%s\n", r,
				       rows[r].envs, rows[r].first_env, rows[r].threads, rows[r].cpus,
				       rows[r].sps, rows[r].p50, rows[r].p99,
				       r == slowest ? "  (slowest)" : "");
			printf("total %.0f steps/s; rank 0 alone %.0f steps/s\n", TN, T1);
			printf("scaling efficiency E = T_N / (N x T_1) = %.3f (rounds: %.3f .. %.3f)\n",
			       Em, E[0], E[rounds - 1]);
			printf("batch latency, all ranks merged: p50 %.1f us, p90 %.1f us, p99 %.1f us\n",
			       hpct(hall, 0.5), hpct(hall, 0.9), hpct(hall, 0.99));
		}
		fflush(stdout);
	}
	cli_mpi_barrier();
	cli_mpi_pool_destroy(mp);
	free(s.acts);
	free(h);
	free(hall);
	free(solo);
	free(all);
	free(mine_sps);
	free(rows);
	return 0;
}

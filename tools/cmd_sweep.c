/*
 * `stepring sweep`: measure a grid of configurations (num_envs x threads x
 * batch x mode) through the shared pool benchmark (bench_pool_run: warm-up,
 * active window, cool-down), print one table row per configuration with
 * its bound, and write one JSON line per configuration (machine, build,
 * configuration, results, and the command that reproduces it).
 *
 * Runs are strictly one after the other: a sweep measures the machine, so
 * it never overlaps two pools.
 *
 * Under mpirun / srun (more than one rank) every rank runs each
 * configuration at the same time (num_envs and threads per rank), each
 * in its block of the node's CPUs (split as a pool across ranks splits
 * them, unless --cpuset); rank 0 prints one table whose rows sum the
 * ranks' steps/s and show the slowest rank's latency percentiles, and
 * --out gets a JSON line per rank and configuration and a total line.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_mpi.h"
#include "machine.h"
#include "mlp.h"
#include "stepring.h"
#include "tune.h"

int cmd_sweep(int argc, char **argv);

#include "bench_pool.h"
#include "stepring/device.h"

#define MAX_LIST 64

struct sweep {
	const char *env;
	long long envs[MAX_LIST], threads[MAX_LIST], batch[MAX_LIST];
	int n_envs, n_threads, n_batch; /* n_envs 0: auto; n_batch 0: num_envs/2 */
	bool sync, async;
	const char *policy;
	const char *device_name;
	int device;
	double seconds, warmup, cooldown;
	uint64_t seed;
	const char *bind_name;
	int bind;
	const char *cpuset;
	uint32_t max_envs;
	const char *out_path;
	FILE *out;
	bool append;          /* --append: add to --out instead of replacing it */
	int repeat;           /* --repeat: passes over the grid */
	bool progress;
	int ranks, rank;      /* MPI: every rank runs each configuration at once */
	/* results */
	unsigned runs, failures;
	double best_sps[2];
	struct bench_pool_cfg best_cfg[2];
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring sweep [--env ID] [--envs N,N,...|auto] [--threads T,...]\n"
		"                      [--batch B,...] [--mode sync|async|sync,async]\n"
		"                      [--policy none|mlp:WxD] [--seconds S] [--out FILE.jsonl]\n"
		"\n"
		"Run the pool once per configuration (warm-up, active window, cool-down) and\n"
		"print a table: steps/s, batch latency P50/P90/P99, efficiency, where the\n"
		"time goes (env, ring, copy, policy, wait) and what bounds it.\n"
		"\n"
		"  --env ID          env id or short name (default CartPole-v1)\n"
		"  --envs LIST|auto  num_envs values; auto: powers of two from the thread\n"
		"                    count up to --max-envs, stopping once throughput gains\n"
		"                    <= 5%% twice in a row (default auto)\n"
		"  --max-envs N      upper end of auto (default 4096)\n"
		"  --threads LIST    worker threads (default 0: one per core)\n"
		"  --batch LIST      async batch sizes, each < num_envs (default num_envs/2);\n"
		"                    sync batches are always num_envs\n"
		"  --mode LIST       sync, async or sync,async (default sync)\n"
		"  --policy P        none or mlp:WxD (synthetic MLP in the loop; default none)\n"
		"  --device D        host, cuda or auto (default host)\n"
		"  --seconds S       active window per configuration (default 1)\n"
		"  --warmup S        warm-up before it (default 0.2)\n"
		"  --cooldown S      cool-down after it (default 0.1)\n"
		"  --seed N          pool seed (default 0)\n"
		"  --bind B          core, numa or none (default core)\n"
		"  --cpuset LIST     CPUs the workers may use, like taskset -c\n"
		"  --out FILE        write one JSON line per configuration\n"
		"  --append          add the lines to FILE instead of replacing it\n"
		"  --repeat N        run the whole grid N times, one pass after the other\n"
		"                    (needs an --envs list): repeats for 'stepring compare'\n"
		"  --no-progress     no progress on stderr\n"
		"\n"
		"Plot a JSONL file: /usr/bin/python3 tools/plot_sweep.py FILE.jsonl\n");
}

/* "none" or what mlp_parse takes ("mlp:WxD[:tanh|:relu]"); dies otherwise. */
static void check_policy(const char *p)
{
	struct mlp_opts po;

	if (!strcmp(p, "none"))
		return;
	if (mlp_parse(p, &po))
		cli_die("--policy: %s", mlp_error());
}

static void parse_mode(struct sweep *s, const char *v)
{
	char buf[64], *save = NULL, *tok;

	if (strlen(v) >= sizeof(buf) || !v[0] || v[0] == ',' || v[strlen(v) - 1] == ',' ||
	    strstr(v, ",,"))
		cli_die("--mode: '%s' is not sync, async or sync,async", v);
	strcpy(buf, v);
	s->sync = s->async = false;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "sync"))
			s->sync = true;
		else if (!strcmp(tok, "async"))
			s->async = true;
		else
			cli_die("--mode: '%s' is not sync or async", tok);
	}
	if (!s->sync && !s->async)
		cli_die("--mode: empty list");
}

/* The command line that reproduces one configuration. */
static void json_command(FILE *f, const struct sweep *s, const struct bench_pool_cfg *c)
{
	char cmd[512], batch[32] = "";

	if (c->async)
		snprintf(batch, sizeof(batch), " --batch %u", c->batch);
	snprintf(cmd, sizeof(cmd),
		 "stepring sweep --env %s --envs %u --threads %u%s --mode %s --policy %s "
		 "--device %s --seconds %g --warmup %g --cooldown %g --seed %llu --bind %s%s%s",
		 c->env, c->envs, c->threads, batch, c->async ? "async" : "sync", c->policy,
		 s->device_name, c->seconds, c->warmup,
		 c->cooldown, (unsigned long long)c->seed, s->bind_name,
		 c->cpuset ? " --cpuset " : "", c->cpuset ? c->cpuset : "");
	bench_json_str(f, cmd);
}

static void write_json(struct sweep *s, const struct bench_pool_cfg *c,
		       const struct bench_pool_result *r, const struct tune_shares *sh, int rank)
{
	FILE *f = s->out;
	char when[32];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fputs("{\"schema\":\"stepring.sweep/1\",\"time\":", f);
	bench_json_str(f, when);
	if (rank >= 0)
		fprintf(f, ",\"row\":\"rank\",\"rank\":%d,\"ranks\":%d", rank, s->ranks);
	fputs(",\"command\":", f);
	json_command(f, s, c);
	fputc(',', f);
	bench_json_machine(f);
	fputc(',', f);
	bench_json_build(f);
	fputs(",\"config\":{\"env\":", f);
	bench_json_str(f, c->env);
	fprintf(f, ",\"num_envs\":%u,\"threads\":%u,\"batch\":%u,\"mode\":\"%s\",\"policy\":",
		c->envs, r->threads_used ? r->threads_used : c->threads, c->batch,
		c->async ? "async" : "sync");
	bench_json_str(f, c->policy);
	fprintf(f, ",\"device\":\"%s\",\"seconds\":%g,\"warmup\":%g,\"cooldown\":%g,"
		   "\"seed\":%llu,\"bind\":\"%s\",\"cpuset\":",
		s->device_name, c->seconds, c->warmup, c->cooldown, (unsigned long long)c->seed,
		s->bind_name);
	bench_json_str(f, c->cpuset ? c->cpuset : "");
	fprintf(f, ",\"threads_requested\":%u,\"batch_rule\":\"%s\"}", c->threads,
		!c->async ? "num_envs" : s->n_batch ? "fixed" : "num_envs/2");
	fprintf(f,
		",\"result\":{\"steps_per_sec\":%.1f,\"raw_steps_per_sec\":%.1f,"
		"\"efficiency\":%.4f,\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,"
		"\"cpu_pct\":%.1f,\"rss_kb\":%llu,\"threads_used\":%u,\"batch_groups\":%u,"
		"\"ns_per_batch\":{\"env\":%.0f,\"ring\":%.0f,\"copy\":%.0f,\"send\":%.0f,"
		"\"policy\":%.0f,\"wait\":%.0f},"
		"\"shares\":{\"env\":%.4f,\"ring\":%.4f,\"copy\":%.4f,\"policy\":%.4f,\"wait\":%.4f},"
		"\"worker_shares\":{\"env\":%.4f,\"ring\":%.4f,\"copy\":%.4f,\"send\":%.4f,"
		"\"policy\":%.4f,\"wait\":%.4f},"
		"\"batches\":%llu,\"window_s\":%.4f,\"bound\":\"%s\",",
		r->steps_per_sec, r->raw_steps_per_sec, r->efficiency, r->p50_us, r->p90_us,
		r->p99_us, r->cpu_pct, (unsigned long long)r->rss_kb, r->threads_used,
		r->batch_groups, r->ns_env_step,
		r->ns_ring, r->ns_copy, r->ns_send, r->ns_policy, r->ns_wait, sh->env, sh->ring,
		sh->copy, sh->policy, sh->wait, r->share_env, r->share_ring, r->share_copy,
		r->share_send, r->share_policy, r->share_wait, (unsigned long long)r->batches,
		r->seconds, tune_bound_name(tune_classify(sh)));
	/* Each round's pool slice: the spread `stepring compare` weighs. */
	fputs("\"rounds\":{\"steps_per_sec\":[", f);
	for (uint32_t k = 0; k < r->nround_figs; k++)
		fprintf(f, "%s%.1f", k ? "," : "", r->round_figs[k].steps_per_sec);
	fputs("],\"p99_us\":[", f);
	for (uint32_t k = 0; k < r->nround_figs; k++)
		fprintf(f, "%s%.2f", k ? "," : "", r->round_figs[k].p99_us);
	fputs("]}}}\n", f);
	fflush(f);
}

/* Configuration errors end the sweep (exit 2); others count as a failure. */
static bool config_error(int err)
{
	return err == -EINVAL || err == -ENOENT || err == -ENOSYS || err == -ENODEV;
}

/*
 * MPI: one configuration ran on every rank at once. Every rank learns
 * whether any failed and the total steps/s (the same on all, so --envs
 * auto takes the same path everywhere); rank 0 prints the row (steps/s
 * summed, the slowest rank's percentiles, the lowest efficiency, the
 * ranks' mean shares) and writes a JSON line per rank and a total line.
 */
static double ranks_done(struct sweep *s, const struct bench_pool_cfg *c,
			 struct bench_pool_result *r, int err, const char *what)
{
	struct bench_pool_result *all = NULL;
	double f[2] = {err ? 1 : 0, err && config_error(err) ? 1 : 0};
	double tot = err ? 0 : r->steps_per_sec;

	r->err = err;
	if (err && !r->msg[0])
		snprintf(r->msg, sizeof(r->msg), "%s", sr_strerror(err));
	char cpus[64] = "", (*allcpus)[64] = NULL;

	if (s->rank == 0 && (!(all = calloc((size_t)s->ranks, sizeof(*all))) ||
			     !(allcpus = calloc((size_t)s->ranks, sizeof(*allcpus)))))
		cli_die("sweep: out of memory");
	snprintf(cpus, sizeof(cpus), "%s", c->cpuset ? c->cpuset : "");
	cli_mpi_gather(r, sizeof(*r), all);
	cli_mpi_gather(cpus, sizeof(cpus), allcpus);
	cli_mpi_allreduce(f, 2, '>');
	cli_mpi_allreduce(&tot, 1, '+');
	if (f[0]) {
		for (int k = 0; s->rank == 0 && k < s->ranks; k++)
			if (all[k].err)
				fprintf(stderr, "stepring: sweep: %s: rank %d: %s\n", what, k,
					all[k].msg);
		free(all);
		free(allcpus);
		if (f[1])
			cli_die("sweep: %s: a configuration error (above)", what);
		s->failures++;
		return -1;
	}
	s->runs++;
	if (s->rank == 0) {
		struct tune_row row;
		struct tune_shares sh;
		int slow = 0;

		memset(&row, 0, sizeof(row));
		row.envs = c->envs;
		row.threads = all[0].threads_used ? all[0].threads_used : c->threads;
		row.batch = c->batch;
		row.async = c->async;
		row.steps_per_sec = tot;
		row.efficiency = all[0].efficiency;
		for (int k = 0; k < s->ranks; k++) {
			const struct bench_pool_result *q = &all[k];

			row.p50_us = q->p50_us > row.p50_us ? q->p50_us : row.p50_us;
			row.p90_us = q->p90_us > row.p90_us ? q->p90_us : row.p90_us;
			row.p99_us = q->p99_us > row.p99_us ? q->p99_us : row.p99_us;
			row.efficiency = q->efficiency < row.efficiency ? q->efficiency
									: row.efficiency;
			if (q->steps_per_sec < all[slow].steps_per_sec)
				slow = k;
			tune_result_shares(q, &sh);
			row.sh.env += sh.env / s->ranks;
			row.sh.ring += sh.ring / s->ranks;
			row.sh.copy += sh.copy / s->ranks;
			row.sh.policy += sh.policy / s->ranks;
			row.sh.wait += sh.wait / s->ranks;
		}
		tune_table_row(stdout, &row);
		fflush(stdout);
		if (s->out) {
			for (int k = 0; k < s->ranks; k++) {
				struct bench_pool_cfg ck = *c;

				ck.cpuset = allcpus[k][0] ? allcpus[k] : NULL;
				tune_result_shares(&all[k], &sh);
				write_json(s, &ck, &all[k], &sh, k);
			}
			fprintf(s->out,
				"{\"schema\":\"stepring.sweep/1\",\"row\":\"total\",\"ranks\":%d,"
				"\"config\":{\"env\":", s->ranks);
			bench_json_str(s->out, c->env);
			fprintf(s->out,
				",\"num_envs_per_rank\":%u,\"threads\":%u,\"batch\":%u,\"mode\":\"%s\"},"
				"\"result\":{\"steps_per_sec\":%.1f,\"slowest_rank\":%d,"
				"\"slowest_steps_per_sec\":%.1f,\"p50_us_max\":%.2f,\"p90_us_max\":%.2f,"
				"\"p99_us_max\":%.2f,\"efficiency_min\":%.4f,\"bound\":\"%s\"}}\n",
				c->envs, row.threads, c->batch, c->async ? "async" : "sync", tot, slow,
				all[slow].steps_per_sec, row.p50_us, row.p90_us, row.p99_us,
				row.efficiency, tune_bound_name(tune_classify(&row.sh)));
			fflush(s->out);
		}
	}
	free(all);
	free(allcpus);
	if (tot > s->best_sps[c->async]) {
		s->best_sps[c->async] = tot;
		s->best_cfg[c->async] = *c;
		s->best_cfg[c->async].threads = r->threads_used ? r->threads_used : c->threads;
	}
	return tot;
}

/* Run one configuration; returns its steps/s, or -1 after a failure that
 * leaves the sweep going. Configuration errors end the sweep (exit 2). */
static double run_one(struct sweep *s, struct tune_progress *pg, uint32_t envs, uint32_t threads,
		      uint32_t batch, bool async)
{
	struct bench_pool_cfg c;
	struct bench_pool_result r;
	struct tune_row row;
	char what[160];
	int err;

	bench_pool_cfg_init(&c);
	c.env = s->env;
	c.envs = envs;
	c.threads = threads;
	c.batch = async ? batch : envs;
	c.async = async;
	c.seconds = s->seconds;
	c.warmup = s->warmup;
	c.cooldown = s->cooldown;
	c.policy = s->policy;
	c.device = s->device;
	c.seed = s->seed;
	c.bind = s->bind;
	c.cpuset = s->cpuset;

	if (threads)
		snprintf(what, sizeof(what), "%s num_envs=%u threads=%u batch=%u",
			 async ? "async" : "sync", envs, threads, c.batch);
	else
		snprintf(what, sizeof(what), "%s num_envs=%u threads=auto batch=%u",
			 async ? "async" : "sync", envs, c.batch);
	tune_progress_step(pg, what);
	memset(&r, 0, sizeof(r));
	if (s->ranks > 1)
		cli_mpi_barrier(); /* every rank's pool runs at the same time */
	err = bench_pool_run(&c, &r);
	tune_progress_end(pg);
	if (s->ranks > 1)
		return ranks_done(s, &c, &r, err, what);
	if (err) {
		const char *msg = r.msg[0] ? r.msg : sr_strerror(err);

		if (config_error(err))
			cli_die("sweep: %s: %s", what, msg);
		fprintf(stderr, "stepring: sweep: %s: %s\n", what, msg);
		s->failures++;
		return -1;
	}
	s->runs++;
	row.envs = envs;
	row.threads = r.threads_used ? r.threads_used : threads;
	row.batch = c.batch;
	row.async = async;
	row.steps_per_sec = r.steps_per_sec;
	row.p50_us = r.p50_us;
	row.p90_us = r.p90_us;
	row.p99_us = r.p99_us;
	row.efficiency = r.efficiency;
	tune_result_shares(&r, &row.sh);
	tune_table_row(stdout, &row);
	fflush(stdout);
	if (s->out)
		write_json(s, &c, &r, &row.sh, -1);
	if (r.steps_per_sec > s->best_sps[async]) {
		s->best_sps[async] = r.steps_per_sec;
		s->best_cfg[async] = c;
		s->best_cfg[async].threads = row.threads;
	}
	return r.steps_per_sec;
}

static uint32_t auto_start(const struct sweep *s, uint32_t threads, uint32_t batch, bool async)
{
	uint32_t start = threads;

	if (!start) {
		uint32_t cores = bench_physical_cores(), cpus = bench_allowed_cpus();

		start = cores < cpus ? cores : cpus;
	}
	if (async)
		start = start > 2 ? start : 2; /* async needs batch < num_envs */
	if (async && batch && start <= batch)
		start = batch + 1;
	return start;
}

static void run_series(struct sweep *s, struct tune_progress *pg, uint32_t threads, uint32_t batch,
		       bool async)
{
	if (s->n_envs) {
		for (int i = 0; i < s->n_envs; i++) {
			uint32_t envs = (uint32_t)s->envs[i];
			uint32_t b = batch ? batch : envs / 2;

			if (async && (b == 0 || b >= envs)) {
				if (s->progress)
					fprintf(stderr, "stepring: sweep: skipping async num_envs=%u: "
							"batch %u must be in [1, num_envs)\n",
						envs, b);
				continue;
			}
			run_one(s, pg, envs, threads, async ? b : envs, async);
		}
		return;
	}
	{
		struct tune_auto a;
		uint32_t envs;
		double sps = -1;

		tune_auto_init(&a, auto_start(s, threads, batch, async), s->max_envs);
		while (tune_auto_next(&a, sps, &envs)) {
			uint32_t b = batch ? batch : envs / 2;

			sps = run_one(s, pg, envs, threads, async ? b : envs, async);
			if (sps < 0)
				sps = 0;
		}
	}
}

int cmd_sweep(int argc, char **argv)
{
	struct sweep s = {
		.env = "CartPole-v1",
		.sync = true,
		.policy = "none",
		.device_name = "host",
		.device = SR_DEVICE_HOST,
		.seconds = 1.0,
		.warmup = 0.2,
		.cooldown = 0.1,
		.bind_name = "core",
		.bind = SR_BIND_CORE,
		.max_envs = 4096,
		.progress = true,
	};
	struct tune_progress pg;
	struct sr_env_spec spec;
	const char *val;
	unsigned total = 0;
	const struct cli_run_opts run = {.env = &s.env, .bind = &s.bind, .bind_name = &s.bind_name};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--envs", &val)) {
			s.n_envs = strcmp(val, "auto")
					   ? cli_int_list("--envs", val, s.envs, MAX_LIST, 1, CLI_ENVS_MAX)
					   : 0;
		} else if (cli_opt(argc, argv, &i, "--max-envs", &val)) {
			s.max_envs = (uint32_t)cli_int("--max-envs", val, 1, 1 << 24);
		} else if (cli_opt(argc, argv, &i, "--threads", &val)) {
			s.n_threads = cli_int_list("--threads", val, s.threads, MAX_LIST, 0,
						   CLI_THREADS_MAX);
		} else if (cli_opt(argc, argv, &i, "--batch", &val)) {
			s.n_batch = cli_int_list("--batch", val, s.batch, MAX_LIST, 1, CLI_BATCH_MAX);
		} else if (cli_opt(argc, argv, &i, "--mode", &val)) {
			parse_mode(&s, val);
		} else if (cli_opt(argc, argv, &i, "--policy", &val)) {
			check_policy(val);
			s.policy = val;
		} else if (cli_opt(argc, argv, &i, "--device", &val)) {
			s.device = cli_device(val);
			s.device_name = val;
		} else if (cli_opt(argc, argv, &i, "--seconds", &val)) {
			s.seconds = cli_double("--seconds", val, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--warmup", &val)) {
			s.warmup = cli_double("--warmup", val, 0, 3600);
		} else if (cli_opt(argc, argv, &i, "--cooldown", &val)) {
			s.cooldown = cli_double("--cooldown", val, 0, 3600);
		} else if (cli_opt(argc, argv, &i, "--seed", &val)) {
			s.seed = (uint64_t)cli_int("--seed", val, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--cpuset", &val)) {
			s.cpuset = val;
		} else if (cli_opt(argc, argv, &i, "--out", &val)) {
			s.out_path = val;
		} else if (cli_opt(argc, argv, &i, "--append", NULL)) {
			s.append = true;
		} else if (cli_opt(argc, argv, &i, "--repeat", &val)) {
			s.repeat = (int)cli_int("--repeat", val, 1, 1000);
		} else if (cli_opt(argc, argv, &i, "--no-progress", NULL)) {
			s.progress = false;
		} else {
			cli_unknown("sweep", argv[i]);
		}
	}
	if (s.repeat > 1 && !s.n_envs)
		cli_die("sweep: --repeat needs an --envs list (auto picks its series from the "
			"figures, so passes could differ)");
	if (s.append && !s.out_path)
		cli_die("sweep: --append needs --out FILE");
	if (s.repeat < 1)
		s.repeat = 1;
	cli_env(s.env, &spec);
	if (s.device == SR_DEVICE_CUDA && !sr_device_cuda_available(0))
		cli_die("--device cuda: no CUDA device answers (a build without CUDA, no driver "
			"or no GPU); use host or auto");
	if (!s.n_threads) {
		s.threads[0] = 0;
		s.n_threads = 1;
	}
	s.ranks = cli_mpi_size();
	s.rank = cli_mpi_rank();
	if (s.ranks > 1) {
		if (s.rank != 0)
			s.progress = false;
		if (!s.cpuset) {
			/* This rank's block of the node's CPUs, as a pool across
			 * the ranks places itself (docs/scale.md). */
			static char cpus[256];
			sr_pool_opts po;
			sr_pool *lp;
			uint64_t fe;
			struct cli_mpi_pool *mp;

			sr_pool_opts_init(&po);
			po.env = s.env;
			po.num_envs = (uint32_t)s.ranks;
			po.num_threads = 1;
			po.bind = SR_BIND_NONE;
			mp = cli_mpi_pool_create("sweep", &po, &lp, &fe);
			snprintf(cpus, sizeof(cpus), "%s", cli_mpi_pool_cpus(mp));
			cli_mpi_pool_destroy(mp);
			if (cpus[0])
				s.cpuset = cpus;
		}
		if (s.rank != 0)
			s.out_path = NULL; /* rank 0 writes every rank's lines */
	}
	if (s.out_path) {
		s.out = fopen(s.out_path, s.append ? "a" : "w");
		if (!s.out)
			cli_die("--out: cannot write '%s': %s", s.out_path, strerror(errno));
	}
	if (s.n_envs)
		total = (unsigned)(s.n_envs * s.n_threads * s.repeat *
				   ((s.sync ? 1 : 0) + (s.async ? (s.n_batch ? s.n_batch : 1) : 0)));
	tune_progress_init(&pg, total, s.progress);

	if (s.rank == 0) {
		printf("sweep %s: policy %s, device %s, %gs per configuration (+%gs warm-up, %gs "
		       "cool-down)\n",
		       spec.id, s.policy, s.device_name, s.seconds, s.warmup, s.cooldown);
		if (s.ranks > 1)
			printf("%d ranks, each running every configuration at once (num_envs and "
			       "threads per rank): steps/s summed over the ranks, latency of the "
			       "slowest rank, efficiency of the lowest, shares the ranks' mean\n",
			       s.ranks);
		tune_table_header(stdout);
		fflush(stdout);
	}
	for (int pass = 0; pass < s.repeat; pass++) {
		for (int m = 0; m < 2; m++) {
			bool async = m == 1;

			if ((async && !s.async) || (!async && !s.sync))
				continue;
			for (int t = 0; t < s.n_threads; t++) {
				if (!async) {
					run_series(&s, &pg, (uint32_t)s.threads[t], 0, false);
					continue;
				}
				if (!s.n_batch)
					run_series(&s, &pg, (uint32_t)s.threads[t], 0, true);
				for (int b = 0; b < s.n_batch; b++)
					run_series(&s, &pg, (uint32_t)s.threads[t],
						   (uint32_t)s.batch[b], true);
			}
		}
	}
	for (int m = 0; m < 2 && s.rank == 0; m++)
		if (s.best_sps[m] > 0)
			printf("best %-5s %.0f steps/s at num_envs=%u threads=%u batch=%u\n",
			       m ? "async" : "sync", s.best_sps[m], s.best_cfg[m].envs,
			       s.best_cfg[m].threads, s.best_cfg[m].batch);
	if (s.out) {
		/* A full disk or /dev/full shows up here, at the flush, or as
		 * the stream's error flag: never say "wrote" then. */
		bool bad = ferror(s.out) != 0;
		int e = errno;

		if (fclose(s.out) != 0) {
			bad = true;
			e = errno;
		}
		if (bad) {
			fprintf(stderr, "stepring: sweep: --out: writing '%s' failed: %s\n",
				s.out_path, strerror(e));
			return 1;
		}
		printf("%s %u JSON lines to %s (plot: /usr/bin/python3 tools/plot_sweep.py %s)\n",
		       s.append ? "appended" : "wrote",
		       s.ranks > 1 ? s.runs * (unsigned)(s.ranks + 1) : s.runs, s.out_path,
		       s.out_path);
	}
	if (s.runs == 0) {
		fprintf(stderr, "stepring: sweep: no configuration ran (%u failed, the rest "
				"were skipped: see the messages above)\n",
			s.failures);
		return 1;
	}
	if (s.failures) {
		fprintf(stderr, "stepring: sweep: %u of %u configurations failed\n", s.failures,
			s.failures + s.runs);
		return 1;
	}
	return 0;
}

/*
 * stepring bench pool: the command line of the pool benchmark
 * (tools/bench/bench_pool.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "bench_pool.h"
#include "cli.h"
#include "stepring.h"
#include "env_probe.h"
#include "stepring/config.h"

int bench_pool(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring bench pool --env ID --envs N [--threads T] [--batch B]\n"
		"                           [--mode sync|async] [--seconds S] [--warmup S]\n"
		"                           [--cooldown S] [--bind core|numa|none] [--cpuset LIST]\n"
		"                           [--seed S] [--policy none|mlp:WxD] [--device host|cuda|auto]\n"
		"                           [--checkpoint-every S] [--checkpoint-backend B] [--json]\n"
		"Run the pool end to end and, in the same run, the raw single-thread env loop;\n"
		"print steps/s, efficiency = steps/s / (threads x raw steps/s), batch latency\n"
		"P50/P90/P99, the time breakdown, CPU %% and RSS. The active window alternates\n"
		"pool and raw loop in rounds (and, with T threads, T raw loops at once on the\n"
		"workers' CPUs: the hardware's own ceiling; and T raw loops in lockstep, a\n"
		"barrier after each one's share of a batch: the ceiling when the slowest CPU\n"
		"sets the pace); efficiencies are round medians.\n"
		"  --env ID       env id or short name (default CartPole-v1)\n"
		"  --envs N       env instances (default 1024)\n"
		"  --threads T    workers, the calling thread included (default: one per core)\n"
		"  --batch B      async batch size (default envs/2); implies --mode async if < N\n"
		"  --mode M       sync (default) or async\n"
		"  --seconds S    active window (default 3); --warmup/--cooldown (default 0.5)\n"
		"  --no-inline    worker 0 is a thread too (the calling thread only drives)\n"
		"  --no-groups    async: per-env queues only, no batch groups\n"
		"  --no-rebalance each worker steps exactly its own envs (sync, batch groups)\n"
		"  --check-finite on|off  the pool's NaN / infinity check of every row (default:\n"
		"                 on unless STEPRING_CHECK_FINITE=0; docs/envs.md)\n"
		"  --ring-capacity N  ring slots, a power of two >= 4 x envs (default: 4 x envs,\n"
		"                 at least 1024)\n"
		"  --json         one JSON object\n"
		"Box2D envs (text output): then a one-thread loop timing b2World::Step alone,\n"
		"its ns per step and the ceiling it sets on steps per CPU-second.\n");
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Box2D envs: after the pool's run, in the same process, a single-thread
 * loop of @n instances (random actions, autoreset) for @seconds of CPU time
 * with b2World::Step timed alone (thread CPU time, as bench env does):
 * returns its ns per world step, 0 for other envs, and the world step's
 * share of the loop's CPU time in *share. 1e9 / ns is the ceiling of steps
 * per CPU-second that any port on this engine could reach.
 */
static double world_step_ns(const sr_env_spec *s, uint32_t n, double seconds, uint64_t seed,
			    double *share)
{
	*share = 0;
#if SR_CONFIG_WITH_BOX2D
	if (!sr_env_is_opaque(s) ||
	    (strncmp(s->name, "lunarlander", 11) && strcmp(s->name, "bipedalwalker")))
		return 0;
	size_t asz = sr_env_action_size(s);
	char *st = aligned_alloc(64, ((size_t)n * s->state_size + 63) / 64 * 64);
	float *obs = malloc((size_t)n * s->obs_dim * sizeof(float));
	double *rew = malloc(n * sizeof(double));
	uint8_t *term = malloc(n);
	uint32_t *el = calloc(n, sizeof(uint32_t));
	unsigned char *act = malloc((size_t)n * asz);
	uint64_t wns = 0, wsteps = 0;
	sr_rng arng;

	if (!st || !obs || !rew || !term || !el || !act || sr_env_create_instances(s, st, n))
		cli_die("bench pool: out of memory for the world-step loop");
	s->seed(s, st, n, seed, 0);
	s->reset(s, st, n, obs);
	sr_rng_seed(&arng, seed, 7);
	double c0 = thread_cpu_s(), c1;
	bench_world_timing(1, NULL, NULL);
	do {
		for (uint32_t i = 0; i < n; i++) {
			if (s->act_kind == SR_SPACE_DISCRETE) {
				int32_t a = (int32_t)(sr_rng_next(&arng) % s->act_n);
				memcpy(act + i * asz, &a, 4);
			} else {
				for (uint32_t d = 0; d < s->act_dim; d++) {
					float a = (float)sr_rng_range(&arng, s->act_low[d],
								      s->act_high[d]);
					memcpy(act + i * asz + 4 * d, &a, 4);
				}
			}
		}
		s->step(s, st, n, act, obs, rew, term);
		for (uint32_t i = 0; i < n; i++)
			if (term[i] || ++el[i] >= s->max_episode_steps) {
				el[i] = 0;
				s->reset(s, st + (size_t)i * s->state_size, 1,
					 obs + (size_t)i * s->obs_dim);
			}
		c1 = thread_cpu_s();
	} while (c1 - c0 < seconds);
	bench_world_timing(0, &wns, &wsteps);
	*share = (double)wns / ((c1 - c0) * 1e9);
	sr_env_destroy_instances(s, st, n);
	free(st);
	free(obs);
	free(rew);
	free(term);
	free(el);
	free(act);
	return wsteps ? (double)wns / (double)wsteps : 0;
#else
	(void)s;
	(void)n;
	(void)seconds;
	(void)seed;
	return 0;
#endif
}

int bench_pool(int argc, char **argv)
{
	struct bench_pool_cfg c;
	struct bench_pool_result r;
	sr_env_spec spec;
	const char *v, *mode = NULL;
	bool json = false;
	int err;
	const struct cli_run_opts run = {
		.env = &c.env, .envs = &c.envs, .threads = &c.threads, .batch = &c.batch,
		.bind = &c.bind,
	};

	bench_pool_cfg_init(&c);
	c.lockstep = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--mode", &v)) {
			if (strcmp(v, "sync") && strcmp(v, "async"))
				cli_die("--mode: '%s' is not sync or async", v);
			mode = v;
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			c.seconds = cli_double("--seconds", v, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--warmup", &v)) {
			c.warmup = cli_double("--warmup", v, 0, 3600);
		} else if (cli_opt(argc, argv, &i, "--cooldown", &v)) {
			c.cooldown = cli_double("--cooldown", v, 0, 3600);
		} else if (cli_opt(argc, argv, &i, "--cpuset", &v)) {
			c.cpuset = v;
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			c.seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--policy", &v)) {
			c.policy = v;
		} else if (cli_opt(argc, argv, &i, "--device", &v)) {
			c.device = cli_device(v);
		} else if (cli_opt(argc, argv, &i, "--checkpoint-every", &v)) {
			c.checkpoint_every = cli_double("--checkpoint-every", v, 0, 3600);
		} else if (cli_opt(argc, argv, &i, "--checkpoint-backend", &v)) {
			if (bench_ckpt_backend_parse(v) < 0)
				cli_die("--checkpoint-backend: '%s' is not auto, uring, pwrite or sync",
					v);
			c.checkpoint_backend = v;
		} else if (cli_opt(argc, argv, &i, "--no-inline", NULL)) {
			c.no_inline = 1;
		} else if (cli_opt(argc, argv, &i, "--ring-capacity", &v)) {
			c.ring_capacity = (uint64_t)cli_int("--ring-capacity", v, 1, 1ll << 40);
		} else if (cli_opt(argc, argv, &i, "--no-groups", NULL)) {
			c.no_groups = 1;
		} else if (cli_opt(argc, argv, &i, "--no-rebalance", NULL)) {
			c.no_rebalance = 1;
		} else if (cli_opt(argc, argv, &i, "--check-finite", &v)) {
			if (strcmp(v, "on") && strcmp(v, "off"))
				cli_die("--check-finite: '%s' is not on or off", v);
			c.check_finite = !strcmp(v, "on") ? 1 : 2;
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else {
			cli_unknown("bench pool", argv[i]);
		}
	}
	cli_env(c.env, &spec);
	if (mode)
		c.async = !strcmp(mode, "async");
	else if (c.batch && c.batch < c.envs)
		c.async = 1;
	if (c.async) {
		if (!c.batch)
			c.batch = c.envs / 2 ? c.envs / 2 : 1;
		if (c.batch >= c.envs)
			cli_die("bench pool: async needs --batch < --envs (%u >= %u)", c.batch, c.envs);
	} else {
		if (c.batch && c.batch != c.envs)
			cli_die("bench pool: --batch %u with --mode sync (sync batches are all %u envs)",
				c.batch, c.envs);
		c.batch = c.envs;
	}
	err = bench_pool_run(&c, &r);
	if (err) {
		fprintf(stderr, "stepring: bench pool: %s\n", r.msg[0] ? r.msg : sr_strerror(err));
		return err == -EINVAL || err == -ENOENT || err == -ENOSYS ? SR_CLI_EXIT_USAGE : 1;
	}
	if (json) {
		bench_pool_print_json(stdout, &c, &r);
		putchar('\n');
		return 0;
	}
	double wshare, wns = world_step_ns(&spec, (c.envs + r.threads_used - 1) / r.threads_used,
					   1.0, c.seed, &wshare);
	printf("pool %s: %u envs, %u threads, %s, batch %u, %.2f s\n", spec.id, c.envs,
	       r.threads_used, c.async ? "async" : "sync", c.batch, r.seconds);
	if (c.async && r.batch_groups)
		printf("  async sends   by batch group (%u groups of %u envs; the loop sends back "
		       "each batch)\n", r.batch_groups, c.batch);
	else if (c.async && c.no_groups)
		printf("  async sends   per env (--no-groups)\n");
	else if (c.async)
		printf("  async sends   per env (batch %u does not divide %u envs, or is below the "
		       "thread count: no batch groups)\n", c.batch, c.envs);
	printf("  steps/s       %.0f\n", r.steps_per_sec);
	printf("  raw steps/s   %.0f  (one thread, %u envs)\n", r.raw_steps_per_sec,
	       (c.envs + r.threads_used - 1) / r.threads_used);
	printf("  efficiency    %.3f  (steps/s / (%u x raw); median of %u rounds, %.3f-%.3f)\n",
	       r.efficiency, r.threads_used, r.rounds, r.efficiency_min, r.efficiency_max);
	if (r.threads_used > 1)
		printf("  raw x%u at once %.0f  (scaling %.3f of %u x raw; pool / this: %.3f)\n",
		       r.threads_used, r.raw_parallel_steps_per_sec, r.parallel_scaling,
		       r.threads_used, r.efficiency_parallel);
	if (r.cpu_balance > 0)
		printf("  cpu balance   %.3f  (slowest / fastest CPU, raw loops at once%s)\n",
		       r.cpu_balance,
		       r.cpu_balance >= 0.9 ? ""
		       : (c.async && !r.batch_groups) || c.no_rebalance
			       ? ": batches wait for the slowest"
			       : ": rebalancing moves rows to the faster (worker lines)");
	if (r.raw_lockstep_steps_per_sec > 0) {
		uint32_t per = c.batch / r.threads_used ? c.batch / r.threads_used : 1;

		printf("  raw x%u lockstep %.0f  (a barrier every %u envs each: scaling %.3f; pool / "
		       "this: %.3f)\n", r.threads_used, r.raw_lockstep_steps_per_sec, per,
		       r.lockstep_scaling, r.efficiency_lockstep);
	}
	if (r.threads_used > 1 && r.threads_used <= BENCH_MAX_WORKERS) {
		if (r.equal_rounds)
			printf("  equal CPUs    %.3f  (efficiency in the %u of %u rounds whose raw loops at "
			       "once\n                scaled >= %.2f with balance >= %.2f; pool / "
			       "lockstep there: %.3f)\n",
			       r.efficiency_equal, r.equal_rounds, r.rounds, BENCH_EQUAL, BENCH_EQUAL,
			       r.efficiency_lockstep_equal);
		else
			printf("  equal CPUs    no round  (none of the %u rounds' raw loops at once "
			       "scaled >= %.2f\n                with balance >= %.2f)\n",
			       r.rounds, BENCH_EQUAL, BENCH_EQUAL);
	}
	printf("  from medians  %.0f steps/s vs raw %.0f: efficiency %.3f (batch p50s; robust\n"
	       "                on a shared machine)\n", r.p50_steps_per_sec,
	       r.raw_p50_steps_per_sec, r.efficiency_p50);
	printf("  per CPU-second %.0f steps vs raw %.0f: efficiency %.3f (spinning counts)\n",
	       r.steps_per_cpu_sec, r.raw_steps_per_cpu_sec, r.efficiency_cpu);
	if (wns > 0)
		printf("  raw b2World::Step %.0f ns/step (%.0f%% of the raw loop's CPU time; the "
		       "ceiling\n                %.0f steps per CPU-second: pool per CPU-second %.3f "
		       "of it)\n",
		       wns, 100 * wshare, 1e9 / wns, r.steps_per_cpu_sec * wns / 1e9);
	printf("  batch latency p50 %.1f us  p90 %.1f us  p99 %.1f us\n", r.p50_us, r.p90_us,
	       r.p99_us);
	printf("  finite check  %s  (%llu non-finite rows)\n", r.check_finite ? "on" : "off",
	       (unsigned long long)r.nonfinite_rows);
	printf("  breakdown     env %.1f%%  ring %.1f%%  collect %.1f%%  send %.1f%%  "
	       "policy %.1f%%  wait %.1f%%\n", 100 * r.share_env, 100 * r.share_ring,
	       100 * r.share_copy, 100 * r.share_send, 100 * r.share_policy, 100 * r.share_wait);
	printf("  per batch     env %.0f ns  ring %.0f ns  collect %.0f ns  send %.0f ns  "
	       "wait %.0f ns\n", r.ns_env_step, r.ns_ring, r.ns_copy, r.ns_send, r.ns_wait);
	for (uint32_t w = 0; w < r.nworkers; w++) {
		char cpu[16] = "-";

		if (r.workers[w].cpu >= 0)
			snprintf(cpu, sizeof(cpu), "%d", r.workers[w].cpu);
		printf("  worker %-3u    cpu %s  %u envs", w, cpu, r.workers[w].envs);
		if (r.workers[w].rows != r.workers[w].envs)
			printf(" (steps %u)", r.workers[w].rows);
		printf("  env %.1f ns/step  ring %.1f ns/step  busy %.0f%%",
		       r.workers[w].ns_env_per_step, r.workers[w].ns_ring_per_step,
		       100 * r.workers[w].busy_share);
		if (r.workers[w].raw_parallel_steps_per_sec > 0)
			printf("  raw %.1f ns/step", 1e9 / r.workers[w].raw_parallel_steps_per_sec);
		putchar('\n');
	}
	printf("  cpu           %.0f%%   rss %llu kB\n", r.cpu_pct, (unsigned long long)r.rss_kb);
	return 0;
}

/*
 * stepring bench env: the raw single-thread batched step loop of one env
 * type, the ceiling any runtime can reach per core.
 *
 * N instances in one contiguous array; each iteration steps all of them with
 * one call, then resets the ones whose episode ended (terminated, or the
 * time limit counted here as the runtime does) one by one. Actions come
 * from a precomputed random buffer of a prime number of batches, so picking
 * them costs nothing and they do not repeat in step with the episodes.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "cli.h"
#include "machine.h"
#include "stepring.h"
#include "env_probe.h"
#include "stepring/config.h"

/* Called by the dispatcher (tools/stepring.c). */
int bench_env(int argc, char **argv);

#define ACT_BATCHES 61 /* prime */

static void usage(FILE *f)
{
	fprintf(f, "usage: stepring bench env --env ID [--n N] [--seconds S] [--repeat R]\n"
		   "                          [--cpu K] [--seed S] [--json]\n"
		   "Step N instances of env ID in one thread, batched, with autoreset;\n"
		   "print steps/s and ns/step (median of R runs of S seconds), and steps\n"
		   "per second of this thread's CPU time (steadier on a shared machine).\n"
		   "  --env ID       env id or short name (spin:cost_us=50,obs_dim=64)\n"
		   "  --n N          instances (default 256; MuJoCo envs 16)\n"
		   "  --seconds S    seconds per run (default 1)\n"
		   "  --repeat R     runs (default 3); figures are the median\n"
		   "  --cpu K        pin the thread to CPU K first\n"
		   "  --seed S       seed (default 1)\n"
		   "  --json         one JSON object\n"
		   "Box2D and MuJoCo envs: a further run times the physics engine's step alone\n"
		   "(b2World::Step; mj_step x frame_skip) inside the same loop, on the same\n"
		   "trajectories, and prints that ceiling and the env's fraction of it; MuJoCo\n"
		   "envs also time a reset, with and without mj_resetData. --env may be given\n"
		   "several times (one result each); --table prints them as a Markdown table.\n");
}

struct run {
	double steps_per_sec;     /* wall clock */
	double steps_per_cpu_sec; /* this thread's CPU time: robust on a shared machine */
	uint64_t steps, episodes;
	double seconds, cpu_seconds;
};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct ctx {
	sr_env_spec spec;
	size_t n;
	char *states;
	char *obs; /* n observations of sr_env_obs_size() bytes */
	double *rew;
	uint8_t *term;
	uint32_t *elapsed;
	char *actions; /* ACT_BATCHES * n actions */
	size_t act_size;
};

/* One batch: step, then autoreset. Ends are rare next to steps, so the
 * scan reads the flags 8 at a time and only looks closer at a nonzero word. */
static inline uint64_t batch(struct ctx *c, const void *act)
{
	const sr_env_spec *s = &c->spec;
	uint32_t limit = s->max_episode_steps ? s->max_episode_steps : UINT32_MAX;
	uint64_t ends = 0;
	size_t n = c->n;

	s->step(s, c->states, n, act, (float *)(void *)c->obs, c->rew, c->term);
	for (size_t i = 0; i < n; i++)
		c->term[i] |= ++c->elapsed[i] >= limit;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t w = 0;
		size_t m = n - i < 8 ? n - i : 8;

		memcpy(&w, c->term + i, m);
		if (!w)
			continue;
		for (size_t j = i; j < i + m; j++) {
			if (!c->term[j])
				continue;
			s->reset(s, c->states + j * s->state_size, 1,
				 (float *)(void *)(c->obs + j * sr_env_obs_size(s)));
			c->elapsed[j] = 0;
			ends++;
		}
	}
	return ends;
}

static struct run run_once(struct ctx *c, double seconds)
{
	uint64_t t0, t1, c0, deadline, iters = 0, ends = 0;
	size_t k = 0;
	struct run r;

	c0 = thread_cpu_ns();
	t0 = bench_now_ns();
	deadline = t0 + (uint64_t)(seconds * 1e9);
	do {
		/* Check the clock every 16 batches: a vDSO call is ~20 ns. */
		for (int j = 0; j < 16; j++) {
			ends += batch(c, c->actions + k * c->n * c->act_size);
			k = k + 1 == ACT_BATCHES ? 0 : k + 1;
		}
		iters += 16;
		t1 = bench_now_ns();
	} while (t1 < deadline);
	r.steps = iters * c->n;
	r.episodes = ends;
	r.seconds = (double)(t1 - t0) / 1e9;
	r.steps_per_sec = (double)r.steps / r.seconds;
	r.cpu_seconds = (double)(thread_cpu_ns() - c0) / 1e9;
	r.steps_per_cpu_sec = (double)r.steps / r.cpu_seconds;
	return r;
}

static int cmp_run(const void *a, const void *b)
{
	double x = ((const struct run *)a)->steps_per_sec, y = ((const struct run *)b)->steps_per_sec;
	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* One env's figures. */
struct result {
	const char *env;
	sr_env_spec spec;
	struct run med;
	double med_cpu;           /* steps per CPU-second, median */
	double min_sps, max_sps;
	double sps_runs[64];      /* every run's steps/s, sorted */
	double phys_ns;           /* physics engine per env step (0: not timed) */
	double phys_share;        /* of the loop's CPU time, in the timed run */
	bool mujoco;
	double reset_us, full_reset_us; /* MuJoCo: a reset, and one through mj_resetData */
	size_t buffer_bytes;
	size_t n;                 /* instances */
};

struct opts {
	long long n, repeat, cpu, seed;
	double seconds;
	bool json, table, n_set;
};

/* A MuJoCo instance holds a 3.2-3.5 MB mjData: 16 by default (256 would be
 * 0.9 GB of Humanoids), enough batch for a step of 20-500 us. */
#define MUJOCO_DEFAULT_N 16

static double reset_cost_us(struct ctx *c, int how)
{
	const size_t k = c->n < 64 ? c->n : 64;
	uint64_t c0 = thread_cpu_ns();
	int rounds = 0;

	do { /* at least 0.1 s of resets */
		bench_mujoco_reset_how(&c->spec, c->states, k, c->obs, how);
		rounds++;
	} while (thread_cpu_ns() - c0 < 100000000ull);
	return (double)(thread_cpu_ns() - c0) / 1e3 / ((double)rounds * (double)k);
}

static void bench_one(const char *env, const struct opts *o, struct result *res)
{
	struct run runs[64];
	struct ctx c;
	sr_rng rng;
	long long repeat = o->repeat;

	memset(res, 0, sizeof(*res));
	res->env = env;
	cli_env(env, &c.spec);
	c.n = (size_t)o->n;
	if (!o->n_set && bench_is_mujoco(&c.spec))
		c.n = MUJOCO_DEFAULT_N;
	res->n = c.n;
	c.act_size = sr_env_action_size(&c.spec);
	c.states = aligned_alloc(64, (c.n * c.spec.state_size + 63) / 64 * 64);
	c.obs = malloc(c.n * sr_env_obs_size(&c.spec));
	c.rew = malloc(sizeof(double) * c.n);
	c.term = malloc(c.n + 8);
	c.elapsed = calloc(c.n, sizeof(uint32_t));
	c.actions = malloc(ACT_BATCHES * c.n * c.act_size);
	if (!c.states || !c.obs || !c.rew || !c.term || !c.elapsed || !c.actions)
		cli_die("bench env: out of memory for %lld instances", o->n);
	sr_rng_seed(&rng, (uint64_t)o->seed, UINT64_MAX);
	for (size_t i = 0; i < ACT_BATCHES * c.n; i++) {
		if (c.spec.act_kind == SR_SPACE_DISCRETE) {
			int32_t a = (int32_t)(sr_rng_next(&rng) % c.spec.act_n);
			memcpy(c.actions + i * c.act_size, &a, 4);
		} else {
			for (uint32_t d = 0; d < c.spec.act_dim; d++) {
				float lo = c.spec.act_low[d], hi = c.spec.act_high[d];
				float a = lo + (hi - lo) * (float)sr_rng_uniform(&rng);
				memcpy(c.actions + i * c.act_size + 4 * d, &a, 4);
			}
		}
	}
	if (sr_env_create_instances(&c.spec, c.states, c.n))
		cli_die("bench env: %s", sr_last_error());
	c.spec.seed(&c.spec, c.states, c.n, (uint64_t)o->seed, 0);
	c.spec.reset(&c.spec, c.states, c.n, (float *)(void *)c.obs);

	run_once(&c, fmin(0.2, o->seconds)); /* warm-up: caches, frequency, spin calibration */
	/* The physics engine's step alone (Box2D: b2World::Step; MuJoCo: the
	 * mj_step x frame_skip loop of every env step), timed inside the same
	 * loop in runs of their own (two clock reads per env step, so outside
	 * the figures above), interleaved with the untimed runs: its share of
	 * the loop's CPU time, the ceiling of any port. */
	bool box2d = SR_CONFIG_WITH_BOX2D && sr_env_is_opaque(&c.spec) &&
		     (!strncmp(c.spec.name, "lunarlander", 11) ||
		      !strcmp(c.spec.name, "bipedalwalker"));
	res->mujoco = bench_is_mujoco(&c.spec);
	double phys[64], share[64];
	for (long long r = 0; r < repeat; r++) {
		runs[r] = run_once(&c, o->seconds);
		if (!box2d && !res->mujoco)
			continue;
		uint64_t wns, wsteps;
		if (box2d)
			bench_world_timing(1, NULL, NULL);
		else
			bench_mujoco_timing(1, NULL, NULL);
		struct run wr = run_once(&c, o->seconds);
		if (box2d)
			bench_world_timing(0, &wns, &wsteps);
		else
			bench_mujoco_timing(0, &wns, &wsteps);
		phys[r] = wsteps ? (double)wns / (double)wsteps : 0;
		share[r] = phys[r] * (double)wr.steps / (wr.cpu_seconds * 1e9);
	}
	{
		double cpu_rates[64];
		for (long long r = 0; r < repeat; r++)
			cpu_rates[r] = runs[r].steps_per_cpu_sec;
		qsort(cpu_rates, (size_t)repeat, sizeof(double), cmp_double);
		res->med_cpu = cpu_rates[repeat / 2];
	}
	if (box2d || res->mujoco) {
		qsort(phys, (size_t)repeat, sizeof(double), cmp_double);
		qsort(share, (size_t)repeat, sizeof(double), cmp_double);
		res->phys_ns = phys[repeat / 2];
		res->phys_share = share[repeat / 2];
	}
	qsort(runs, (size_t)repeat, sizeof(runs[0]), cmp_run);
	res->med = runs[repeat / 2];
	res->min_sps = runs[0].steps_per_sec;
	res->max_sps = runs[repeat - 1].steps_per_sec;
	for (long long r = 0; r < repeat; r++)
		res->sps_runs[r] = runs[r].steps_per_sec;
	res->spec = c.spec;
	if (res->mujoco) {
		res->reset_us = reset_cost_us(&c, 0);
		res->full_reset_us = reset_cost_us(&c, 1);
		bench_mujoco_sizes(c.states, &res->buffer_bytes, NULL, NULL, NULL);
	}
	sr_env_destroy_instances(&c.spec, c.states, c.n);
	free(c.states);
	free(c.obs);
	free(c.rew);
	free(c.term);
	free(c.elapsed);
	free(c.actions);
}

static void print_result(const struct result *r, const struct opts *o)
{
	const struct run *med = &r->med;
	const char *what = r->mujoco ? "mj_step x frame_skip" : "b2World::Step";

	if (o->json) {
		printf("{\"bench\":\"env\",\"env\":\"%s\",\"spec\":\"%s\",\"n_instances\":%lld,"
		       "\"repeat\":%lld,\"seconds\":%.3f,\"steps_per_sec\":%.0f,\"ns_per_step\":%.3f,"
		       "\"steps_per_sec_min\":%.0f,\"steps_per_sec_max\":%.0f,\"steps\":%llu,"
		       "\"episodes\":%llu,\"cpu\":%lld,\"steps_per_cpu_sec\":%.0f,"
		       "\"cpu_share\":%.3f,",
		       r->spec.id, r->env, (long long)r->n, o->repeat, med->seconds, med->steps_per_sec,
		       1e9 / med->steps_per_sec, r->min_sps, r->max_sps,
		       (unsigned long long)med->steps, (unsigned long long)med->episodes, o->cpu,
		       r->med_cpu, med->cpu_seconds / med->seconds);
		if (r->phys_ns > 0 && !r->mujoco)
			printf("\"world_step_ns\":%.1f,\"world_share\":%.3f,", r->phys_ns,
			       r->phys_share);
		if (r->phys_ns > 0 && r->mujoco)
			printf("\"physics_ns\":%.1f,\"physics_steps_per_cpu_sec\":%.0f,"
			       "\"vs_physics\":%.3f,\"reset_us\":%.2f,\"mj_resetData_reset_us\":%.2f,"
			       "\"mjdata_buffer_bytes\":%zu,",
			       r->phys_ns, 1e9 / r->phys_ns, r->med_cpu * r->phys_ns / 1e9,
			       r->reset_us, r->full_reset_us, r->buffer_bytes);
		/* Every run (sorted): the spread `stepring compare` weighs. */
		printf("\"steps_per_sec_runs\":[");
		for (long long k = 0; k < o->repeat; k++)
			printf("%s%.0f", k ? "," : "", r->sps_runs[k]);
		printf("],");
		bench_json_machine(stdout);
		printf(",\"build\":\"%s\"}\n", sr_build_info());
		return;
	}
	if (o->table)
		return;
	printf("env=%s n=%lld steps/s=%.3fM ns/step=%.2f episodes/s=%.0f "
	       "(median of %lld x %.2f s; min %.3fM max %.3fM) "
	       "per-cpu-second=%.4fM cpu-share=%.2f\n",
	       r->env, (long long)r->n, med->steps_per_sec / 1e6, 1e9 / med->steps_per_sec,
	       (double)med->episodes / med->seconds, o->repeat, o->seconds, r->min_sps / 1e6,
	       r->max_sps / 1e6, r->med_cpu / 1e6, med->cpu_seconds / med->seconds);
	if (r->phys_ns > 0)
		printf("env=%s raw %s ns/step=%.0f (%.0f%% of the env step's CPU time; the "
		       "ceiling: %.4fM steps per CPU-second; the env: %.3f of it)\n",
		       r->env, what, r->phys_ns, 100 * r->phys_share, 1e3 / r->phys_ns,
		       r->med_cpu * r->phys_ns / 1e9);
	if (r->mujoco)
		printf("env=%s reset %.1f us (through mj_resetData: %.1f us); mjData buffer %zu "
		       "bytes an instance\n",
		       r->env, r->reset_us, r->full_reset_us, r->buffer_bytes);
}

int bench_env(int argc, char **argv)
{
	const char *envs[64];
	int n_envs = 0;
	struct opts o = {.n = 256, .repeat = 3, .cpu = -1, .seed = 1, .seconds = 1.0};

	for (int i = 1; i < argc; i++) {
		const char *v;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--env", &v)) {
			if (n_envs == 64)
				cli_die("bench env: at most 64 --env");
			envs[n_envs++] = v;
		} else if (cli_opt(argc, argv, &i, "--n", &v)) {
			o.n = cli_int("--n", v, 1, 1 << 24);
			o.n_set = true;
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			o.seconds = cli_double("--seconds", v, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--repeat", &v)) {
			o.repeat = cli_int("--repeat", v, 1, 64);
		} else if (cli_opt(argc, argv, &i, "--cpu", &v)) {
			o.cpu = cli_int("--cpu", v, 0, CPU_SETSIZE - 1);
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			o.seed = cli_int("--seed", v, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			o.json = true;
		} else if (cli_opt(argc, argv, &i, "--table", NULL)) {
			o.table = true;
		} else {
			cli_unknown("bench env", argv[i]);
		}
	}
	if (!n_envs)
		cli_die("bench env: --env is required (see 'stepring bench env --help')");
	for (int k = 0; k < n_envs; k++) { /* unknown names fail before any run */
		sr_env_spec s;
		cli_env(envs[k], &s);
	}
	if (o.cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((int)o.cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			cli_die("bench env: --cpu %lld: cannot pin: %s", o.cpu, strerror(errno));
	}
	struct result *res = calloc((size_t)n_envs, sizeof(*res));
	if (!res)
		cli_die("bench env: out of memory");
	for (int k = 0; k < n_envs; k++) {
		bench_one(envs[k], &o, &res[k]);
		print_result(&res[k], &o);
		fflush(stdout);
	}
	if (o.table && !o.json) {
		printf("| env | n | env steps per CPU-s | raw physics steps per CPU-s | env / raw | "
		       "physics share (same run) | physics ns/step | reset us | mj_resetData reset "
		       "us |\n"
		       "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
		for (int k = 0; k < n_envs; k++) {
			const struct result *r = &res[k];
			printf("| %s | %zu | %.0f | ", r->env, r->n, r->med_cpu);
			if (r->phys_ns > 0)
				printf("%.0f | %.3f | %.3f | %.0f | ", 1e9 / r->phys_ns,
				       r->med_cpu * r->phys_ns / 1e9, r->phys_share, r->phys_ns);
			else
				printf("- | - | - | - | ");
			if (r->mujoco)
				printf("%.1f | %.1f |\n", r->reset_us, r->full_reset_us);
			else
				printf("- | - |\n");
		}
	}
	free(res);
	return 0;
}

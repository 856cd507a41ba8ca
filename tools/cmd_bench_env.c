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
		   "  --n N          instances (default 256)\n"
		   "  --seconds S    seconds per run (default 1)\n"
		   "  --repeat R     runs (default 3); figures are the median\n"
		   "  --cpu K        pin the thread to CPU K first\n"
		   "  --seed S       seed (default 1)\n"
		   "  --json         one JSON object\n");
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
	float *obs;
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

	s->step(s, c->states, n, act, c->obs, c->rew, c->term);
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
			s->reset(s, c->states + j * s->state_size, 1, c->obs + j * s->obs_dim);
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

int bench_env(int argc, char **argv)
{
	const char *env = NULL;
	long long n = 256, repeat = 3, cpu = -1, seed = 1;
	double seconds = 1.0;
	bool json = false;
	struct run runs[64], med;
	double med_cpu;
	struct ctx c;
	sr_rng rng;

	for (int i = 1; i < argc; i++) {
		const char *v;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--env", &env)) {
		} else if (cli_opt(argc, argv, &i, "--n", &v)) {
			n = cli_int("--n", v, 1, 1 << 24);
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			seconds = cli_double("--seconds", v, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--repeat", &v)) {
			repeat = cli_int("--repeat", v, 1, 64);
		} else if (cli_opt(argc, argv, &i, "--cpu", &v)) {
			cpu = cli_int("--cpu", v, 0, CPU_SETSIZE - 1);
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			seed = cli_int("--seed", v, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else {
			cli_unknown("bench env", argv[i]);
		}
	}
	if (!env)
		cli_die("bench env: --env is required (see 'stepring bench env --help')");
	cli_env(env, &c.spec);
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((int)cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			cli_die("bench env: --cpu %lld: cannot pin: %s", cpu, strerror(errno));
	}

	c.n = (size_t)n;
	c.act_size = sr_env_action_size(&c.spec);
	c.states = aligned_alloc(64, (c.n * c.spec.state_size + 63) / 64 * 64);
	c.obs = malloc(sizeof(float) * c.n * c.spec.obs_dim);
	c.rew = malloc(sizeof(double) * c.n);
	c.term = malloc(c.n + 8);
	c.elapsed = calloc(c.n, sizeof(uint32_t));
	c.actions = malloc(ACT_BATCHES * c.n * c.act_size);
	if (!c.states || !c.obs || !c.rew || !c.term || !c.elapsed || !c.actions)
		cli_die("bench env: out of memory for %lld instances", n);
	sr_rng_seed(&rng, (uint64_t)seed, UINT64_MAX);
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
	c.spec.seed(&c.spec, c.states, c.n, (uint64_t)seed, 0);
	c.spec.reset(&c.spec, c.states, c.n, c.obs);

	run_once(&c, fmin(0.2, seconds)); /* warm-up: caches, frequency, spin calibration */
	for (long long r = 0; r < repeat; r++)
		runs[r] = run_once(&c, seconds);
	{
		double cpu_rates[64];
		for (long long r = 0; r < repeat; r++)
			cpu_rates[r] = runs[r].steps_per_cpu_sec;
		qsort(cpu_rates, (size_t)repeat, sizeof(double), cmp_double);
		med_cpu = cpu_rates[repeat / 2];
	}
	qsort(runs, (size_t)repeat, sizeof(runs[0]), cmp_run);
	med = runs[repeat / 2];
	/* Box2D envs: one more run timing b2World::Step alone (two clock reads
	 * per step, so outside the figures above): the physics engine's share,
	 * the ceiling of any port. */
	double world_ns = 0, world_share = 0;
#if SR_CONFIG_WITH_BOX2D
	if (sr_env_is_opaque(&c.spec) && (!strncmp(c.spec.name, "lunarlander", 11) ||
					  !strcmp(c.spec.name, "bipedalwalker"))) {
		uint64_t wns, wsteps;
		bench_world_timing(1, NULL, NULL);
		struct run wr = run_once(&c, seconds);
		bench_world_timing(0, &wns, &wsteps);
		world_ns = wsteps ? (double)wns / (double)wsteps : 0;
		world_share = world_ns * (double)wr.steps / (wr.cpu_seconds * 1e9);
	}
#endif

	if (json) {
		printf("{\"bench\":\"env\",\"env\":\"%s\",\"spec\":\"%s\",\"n_instances\":%zu,"
		       "\"repeat\":%lld,\"seconds\":%.3f,\"steps_per_sec\":%.0f,\"ns_per_step\":%.3f,"
		       "\"steps_per_sec_min\":%.0f,\"steps_per_sec_max\":%.0f,\"steps\":%llu,"
		       "\"episodes\":%llu,\"cpu\":%lld,\"steps_per_cpu_sec\":%.0f,"
		       "\"cpu_share\":%.3f,",
		       c.spec.id, env, c.n, repeat, med.seconds, med.steps_per_sec,
		       1e9 / med.steps_per_sec, runs[0].steps_per_sec,
		       runs[repeat - 1].steps_per_sec, (unsigned long long)med.steps,
		       (unsigned long long)med.episodes, cpu, med_cpu,
		       med.cpu_seconds / med.seconds);
		if (world_ns > 0)
			printf("\"world_step_ns\":%.1f,\"world_share\":%.3f,", world_ns, world_share);
		/* Every run (sorted): the spread `stepring compare` weighs. */
		printf("\"steps_per_sec_runs\":[");
		for (long long r = 0; r < repeat; r++)
			printf("%s%.0f", r ? "," : "", runs[r].steps_per_sec);
		printf("],");
		bench_json_machine(stdout);
		printf(",\"build\":\"%s\"}\n", sr_build_info());
	} else {
		printf("env=%s n=%zu steps/s=%.3fM ns/step=%.2f episodes/s=%.0f "
		       "(median of %lld x %.2f s; min %.3fM max %.3fM) "
		       "per-cpu-second=%.3fM cpu-share=%.2f\n",
		       env, c.n, med.steps_per_sec / 1e6, 1e9 / med.steps_per_sec,
		       (double)med.episodes / med.seconds, repeat, seconds,
		       runs[0].steps_per_sec / 1e6, runs[repeat - 1].steps_per_sec / 1e6,
		       med_cpu / 1e6, med.cpu_seconds / med.seconds);
		if (world_ns > 0)
			printf("env=%s raw b2World::Step ns/step=%.0f (%.0f%% of the env step's "
			       "CPU time; the ceiling: %.4fM steps per CPU-second)\n",
			       env, world_ns, 100 * world_share, 1e3 / world_ns);
	}
	sr_env_destroy_instances(&c.spec, c.states, c.n);
	free(c.states);
	free(c.obs);
	free(c.rew);
	free(c.term);
	free(c.elapsed);
	free(c.actions);
	return 0;
}

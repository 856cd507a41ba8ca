/*
 * stepring bench pool: the pool end to end (bench_pool_run, shared with
 * sweep and diagnose), and its raw single-thread ceiling in the same run.
 *
 * Phases: raw loop (envs/threads instances stepped in one thread, batched,
 * with autoreset), then the pool: warm-up, active window, cool-down, then
 * the raw loop again (the faster of the two raw windows counts).
 * Actions come from a precomputed random buffer (policy "none"), so
 * choosing them costs nothing. Latency is per batch: one sr_pool_step, or
 * from sr_pool_send to the sr_pool_recv that returns (async).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_loop.h"
#include "bench_pool.h"
#include "cli.h"
#include "stepring.h"
#include "stepring/checkpoint.h"

/* The checkpoint engine may be absent from a build: weak reference. */
#pragma weak sr_pool_checkpoint
#pragma weak sr_pool_checkpoint_wait
#pragma weak sr_ckpt_backend_parse

int bench_pool(int argc, char **argv);

#define ACT_BATCHES 61 /* prime: actions do not repeat in step with episodes */
#define MAX_LAT (1u << 22)

void bench_pool_cfg_init(struct bench_pool_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->env = "CartPole-v1";
	c->envs = 1024;
	c->seconds = 3.0;
	c->warmup = 0.5;
	c->cooldown = 0.5;
	c->policy = "none";
	c->device = SR_DEVICE_HOST;
	c->bind = SR_BIND_CORE;
}

static int fail(struct bench_pool_result *r, int err, const char *fmt, const char *detail)
{
	r->err = err;
	snprintf(r->msg, sizeof(r->msg), fmt, detail);
	return err;
}

/* Random valid actions for @rows envs x ACT_BATCHES. */
static void *make_actions(const sr_env_spec *s, uint32_t rows, uint64_t seed)
{
	size_t asz = sr_env_action_size(s), n = (size_t)rows * ACT_BATCHES;
	unsigned char *a = malloc(n * asz);
	sr_rng rng;

	if (!a)
		return NULL;
	sr_rng_seed(&rng, seed ^ 0xacdcull, 0);
	for (size_t i = 0; i < n; i++) {
		if (s->act_kind == SR_SPACE_DISCRETE) {
			int32_t v = (int32_t)(sr_rng_next(&rng) % s->act_n);
			memcpy(a + i * asz, &v, 4);
		} else {
			for (uint32_t d = 0; d < s->act_dim; d++) {
				float v = (float)sr_rng_range(&rng, s->act_low[d], s->act_high[d]);
				memcpy(a + i * asz + d * 4, &v, 4);
			}
		}
	}
	return a;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

#define RAW_LAT 65536

/* The raw loop: one thread, n instances, step all then reset the ended.
 * Returns steps/s over the whole run; *p50_rate gets n / the median time
 * of one batch (robust against preemption on a shared machine). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double raw_loop(const sr_env_spec *s, uint32_t n, double seconds, uint64_t seed,
		       double *p50_rate, double *cpu_rate)
{
	uint64_t c0 = thread_cpu_ns();
	float *lat = malloc(RAW_LAT * sizeof(float));
	uint32_t nlat = 0;
	size_t ss = s->state_size, asz = sr_env_action_size(s);
	char *st = aligned_alloc(64, ((size_t)n * ss + 63) & ~(size_t)63);
	float *obs = malloc((size_t)n * s->obs_dim * sizeof(float));
	double *rew = malloc(n * sizeof(double));
	uint8_t *term = malloc(n);
	uint32_t *el = calloc(n, sizeof(uint32_t));
	unsigned char *acts = make_actions(s, n, seed);
	uint64_t t0, t, tb, steps = 0, it = 0;
	double rate = 0;

	*p50_rate = 0;
	*cpu_rate = 0;
	if (!st || !obs || !rew || !term || !el || !acts || !lat)
		goto out;
	s->seed(s, st, n, seed, 0);
	/* One untimed batch first: one-time costs (the spin env calibrates
	 * on its first step, 5-12 ms) and cold caches stay out of the rate,
	 * as the pool's warm-up keeps them out of its own. */
	s->reset(s, st, n, obs);
	s->step(s, st, n, acts, obs, rew, term);
	s->reset(s, st, n, obs);
	t0 = cli_now_ns();
	tb = t0;
	do {
		for (int k = 0; k < 8; k++, it++) {
			uint64_t te;
			s->step(s, st, n, acts + (it % ACT_BATCHES) * n * asz, obs, rew, term);
			for (uint32_t i = 0; i < n; i++) {
				el[i]++;
				if (term[i] || (s->max_episode_steps && el[i] >= s->max_episode_steps)) {
					s->reset(s, st + i * ss, 1, obs + (size_t)i * s->obs_dim);
					el[i] = 0;
				}
			}
			steps += n;
			te = cli_now_ns();
			if (nlat < RAW_LAT)
				lat[nlat++] = (float)(te - tb);
			tb = te;
		}
		t = tb;
	} while ((double)(t - t0) < seconds * 1e9);
	rate = (double)steps / ((double)(t - t0) / 1e9);
	*cpu_rate = (double)steps / ((double)(thread_cpu_ns() - c0) / 1e9);
	qsort(lat, nlat, sizeof(float), cmp_float);
	if (nlat && lat[nlat / 2] > 0)
		*p50_rate = (double)n / (lat[nlat / 2] / 1e9);
out:
	free(lat);
	free(st);
	free(obs);
	free(rew);
	free(term);
	free(el);
	free(acts);
	return rate;
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

int bench_pool_run(const struct bench_pool_cfg *cfg, struct bench_pool_result *r)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	sr_env_spec spec;
	const sr_batch *b;
	sr_pool_stats s0, s1;
	unsigned char *acts = NULL;
	float *lat = NULL;
	uint32_t nlat = 0, rows, T;
	uint64_t it = 0, t_end, w0 = 0, w1 = 0, c0 = 0, c1 = 0, b0 = 0, b1 = 0, next_ckpt = 0;
	struct bench_policy *bp = NULL; /* "mlp:WxD" (bench_loop.h), or NULL */
	uint64_t pol_ns = 0;
	size_t asz;
	int err, phase;
	char ckpt_path[64];
	double raw_secs;
	cpu_set_t aff;
	bool have_aff;

	memset(r, 0, sizeof(*r));
	if (!cfg->env || sr_env_find(cfg->env, &spec))
		return fail(r, -ENOENT, "%s", sr_last_error());
	if (cfg->checkpoint_every > 0 && (cfg->async || !sr_pool_checkpoint))
		return fail(r, -ENOSYS, "%s", cfg->async ? "checkpoint_every needs sync mode"
							: "no checkpoint engine in this build");
	/* The pool binds this thread as worker 0 (SR_POOL_F_BIND_CALLER):
	 * give it back its affinity at the end, or the next pool made in this
	 * process would plan all its workers inside that one CPU. */
	have_aff = pthread_getaffinity_np(pthread_self(), sizeof(aff), &aff) == 0;
	sr_pool_opts_init(&o);
	o.env = cfg->env;
	o.num_envs = cfg->envs;
	o.num_threads = cfg->threads;
	o.batch_size = cfg->async ? (cfg->batch ? cfg->batch : cfg->envs / 2) : cfg->envs;
	if (cfg->async && o.batch_size >= cfg->envs)
		return fail(r, -EINVAL, "%s", "async needs batch < envs");
	o.bind = (uint32_t)cfg->bind;
	/* With a policy, the policy's device takes the batches from the ring. */
	o.device = (uint32_t)(cfg->policy && strcmp(cfg->policy, "none") ? SR_DEVICE_HOST
									  : cfg->device);
	/* The calling thread steps worker 0's envs: bind it like a worker. */
	o.flags = SR_POOL_F_SEED | (cfg->no_inline ? SR_POOL_F_NO_INLINE : SR_POOL_F_BIND_CALLER);
	o.seed = cfg->seed;
	if (cfg->cpuset) {
		o.flags |= SR_POOL_F_CPUSET;
		o.cpuset = cfg->cpuset;
	}
	err = sr_pool_create(&o, &p);
	if (err) {
		fail(r, err, "%s", sr_last_error());
		goto out;
	}
	err = bench_policy_open(cfg->policy, p, cfg->device, cfg->seed, &bp, r->msg,
				sizeof(r->msg));
	if (err) {
		r->err = err;
		goto out;
	}
	T = sr_pool_num_threads(p);
	r->threads_used = T;
	rows = sr_pool_batch_size(p);
	asz = sr_env_action_size(&spec);
	acts = make_actions(&spec, rows, cfg->seed);
	lat = malloc(MAX_LAT * sizeof(float));
	if (!acts || !lat) {
		err = fail(r, -ENOMEM, "%s", "out of memory");
		goto out;
	}

	/* Raw ceiling first, while the pool's workers sleep; measured again
	 * after the pool (raw_again), keeping the faster of the two: a
	 * single short window that another process or the host slowed down
	 * would understate it and give an efficiency above 1. */
	raw_secs = fmin(fmax(cfg->seconds / 6, 0.2), 0.5);
	r->raw_steps_per_sec = raw_loop(&spec, (cfg->envs + T - 1) / T, raw_secs, cfg->seed,
					&r->raw_p50_steps_per_sec, &r->raw_steps_per_cpu_sec);

	err = sr_pool_reset(p, &b);
	if (err)
		goto fail_pool;
	if (cfg->async) {
		err = sr_pool_recv(p, &b);
		if (err)
			goto fail_pool;
	}
	/* phase 0 warm-up, 1 active, 2 cool-down */
	for (phase = 0; phase < 3; phase++) {
		double secs = phase == 0 ? cfg->warmup : phase == 1 ? cfg->seconds : cfg->cooldown;
		uint64_t t = cli_now_ns();
		t_end = t + (uint64_t)(fmax(secs, phase == 1 ? 0.05 : 0) * 1e9);
		if (phase == 1) {
			sr_pool_stats_get(p, &s0);
			w0 = t;
			c0 = cpu_ns();
			b0 = it;
			next_ckpt = t + (uint64_t)(cfg->checkpoint_every * 1e9);
		}
		while (cli_now_ns() < t_end) {
			for (int k = 0; k < 4; k++, it++) {
				const unsigned char *a = acts + (it % ACT_BATCHES) * rows * asz;
				uint64_t t0;
				if (bp) {
					const void *pa;
					uint64_t nc, np;
					err = bench_policy_act(bp, b, &pa, &nc, &np);
					if (err)
						goto fail_pool;
					a = pa;
					if (phase == 1)
						pol_ns += nc + np;
				}
				t0 = cli_now_ns();
				if (cfg->async) {
					err = sr_pool_send(p, a, NULL, b->n);
					if (!err)
						err = sr_pool_recv(p, &b);
				} else {
					err = sr_pool_step(p, a, &b);
				}
				if (err)
					goto fail_pool;
				if (phase == 1 && nlat < MAX_LAT)
					lat[nlat++] = (float)((double)(cli_now_ns() - t0) / 1e3);
			}
			if (phase == 1 && cfg->checkpoint_every > 0 && cli_now_ns() >= next_ckpt) {
				sr_ckpt_opts co;
				sr_ckpt_opts_init(&co);
				if (cfg->checkpoint_backend && sr_ckpt_backend_parse &&
				    sr_ckpt_backend_parse(cfg->checkpoint_backend) >= 0) {
					co.flags |= SR_CKPT_F_BACKEND;
					co.backend = (uint32_t)sr_ckpt_backend_parse(cfg->checkpoint_backend);
				}
				snprintf(ckpt_path, sizeof(ckpt_path), "/tmp/sr-bench-pool-%d.ckpt",
					 (int)getpid());
				co.flags |= SR_CKPT_F_NOWAIT; /* still writing the last one: skip */
				err = sr_pool_checkpoint(p, ckpt_path, &co);
				if (err == -EBUSY)
					err = 0;
				if (err)
					goto fail_pool;
				next_ckpt = cli_now_ns() + (uint64_t)(cfg->checkpoint_every * 1e9);
			}
		}
		if (phase == 1) {
			w1 = cli_now_ns();
			c1 = cpu_ns();
			b1 = it;
			sr_pool_stats_get(p, &s1);
		}
	}
	if (cfg->checkpoint_every > 0 && sr_pool_checkpoint_wait) {
		sr_pool_checkpoint_wait(p, NULL);
		unlink(ckpt_path);
	}
	{
		double p50, cpu, raw = raw_loop(&spec, (cfg->envs + T - 1) / T, raw_secs, cfg->seed,
						&p50, &cpu);
		r->raw_steps_per_sec = fmax(r->raw_steps_per_sec, raw);
		r->raw_p50_steps_per_sec = fmax(r->raw_p50_steps_per_sec, p50);
		r->raw_steps_per_cpu_sec = fmax(r->raw_steps_per_cpu_sec, cpu);
	}
	{
		double win = (double)(w1 - w0), tot = win * T, nb = (double)(b1 - b0);
		struct rusage ru;

		r->seconds = win / 1e9;
		r->batches = b1 - b0;
		r->episodes = s1.episodes - s0.episodes;
		r->steps_per_sec = (double)(s1.steps - s0.steps) / r->seconds;
		r->efficiency = r->raw_steps_per_sec > 0
					? r->steps_per_sec / (T * r->raw_steps_per_sec) : 0;
		r->cpu_pct = 100.0 * (double)(c1 - c0) / win;
		r->steps_per_cpu_sec = (double)(s1.steps - s0.steps) / ((double)(c1 - c0) / 1e9);
		r->efficiency_cpu = r->raw_steps_per_cpu_sec > 0
					    ? r->steps_per_cpu_sec / r->raw_steps_per_cpu_sec : 0;
		getrusage(RUSAGE_SELF, &ru);
		r->rss_kb = (uint64_t)ru.ru_maxrss;
		r->ns_env_step = (double)(s1.ns_env_step - s0.ns_env_step) / nb;
		r->ns_ring = (double)(s1.ns_ring_publish - s0.ns_ring_publish) / nb;
		r->ns_copy = (double)(s1.ns_collect - s0.ns_collect) / nb;
		r->ns_policy = (double)pol_ns / nb;
		r->share_env = (double)(s1.ns_env_step - s0.ns_env_step) / tot;
		r->share_ring = (double)(s1.ns_ring_publish - s0.ns_ring_publish) / tot;
		r->share_copy = (double)(s1.ns_collect - s0.ns_collect) / tot;
		r->share_policy = (double)pol_ns / tot;
		/* The rest of the window: spinning, sleeping, and the caller's
		 * own work between calls (choosing actions). */
		r->share_wait = fmax(0.0, 1.0 - r->share_env - r->share_ring - r->share_copy -
					     r->share_policy);
		r->ns_wait = r->share_wait * tot / nb;
		qsort(lat, nlat, sizeof(float), cmp_float);
		if (nlat) {
			r->p50_us = lat[nlat / 2];
			r->p90_us = lat[(uint64_t)nlat * 90 / 100];
			r->p99_us = lat[(uint64_t)nlat * 99 / 100];
			r->p50_steps_per_sec = rows / (r->p50_us / 1e6);
			if (r->raw_p50_steps_per_sec > 0)
				r->efficiency_p50 = r->p50_steps_per_sec /
						    (T * r->raw_p50_steps_per_sec);
		}
	}
	err = 0;
	goto out;
fail_pool:
	fail(r, err, "%s", sr_last_error());
out:
	bench_policy_close(bp);
	sr_pool_destroy(p);
	if (have_aff)
		pthread_setaffinity_np(pthread_self(), sizeof(aff), &aff);
	free(acts);
	free(lat);
	return err;
}

static const char *json_str(const char *s)
{
	return s ? s : "";
}

void bench_pool_print_json(FILE *f, const struct bench_pool_cfg *c,
			   const struct bench_pool_result *r)
{
	static const char *const bind[] = {"core", "numa", "none"};
	static const char *const dev[] = {"host", "cuda", "auto"};

	fprintf(f, "{\"bench\":\"pool\",\"env\":\"%s\",\"envs\":%u,\"threads\":%u,"
		   "\"threads_used\":%u,\"batch\":%u,\"mode\":\"%s\",\"policy\":\"%s\","
		   "\"device\":\"%s\",\"bind\":\"%s\",\"cpuset\":\"%s\",\"seed\":%llu,"
		   "\"seconds\":%.3f,\"warmup\":%.3f,\"cooldown\":%.3f,\"checkpoint_every\":%g,"
		   "\"no_inline\":%s,",
		json_str(c->env), c->envs, c->threads, r->threads_used,
		c->async ? (c->batch ? c->batch : c->envs / 2) : c->envs,
		c->async ? "async" : "sync", json_str(c->policy ? c->policy : "none"),
		dev[c->device >= 0 && c->device <= 2 ? c->device : 0],
		bind[c->bind >= 0 && c->bind <= 2 ? c->bind : 0], json_str(c->cpuset),
		(unsigned long long)c->seed, r->seconds, c->warmup, c->cooldown, c->checkpoint_every,
		c->no_inline ? "true" : "false");
	fprintf(f, "\"steps_per_sec\":%.1f,\"raw_steps_per_sec\":%.1f,\"efficiency\":%.4f,"
		   "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"cpu_pct\":%.1f,"
		   "\"rss_kb\":%llu,\"batches\":%llu,\"episodes\":%llu,"
		   "\"p50_steps_per_sec\":%.1f,\"raw_p50_steps_per_sec\":%.1f,"
		   "\"efficiency_p50\":%.4f,\"steps_per_cpu_sec\":%.1f,"
		   "\"raw_steps_per_cpu_sec\":%.1f,\"efficiency_cpu\":%.4f,",
		r->steps_per_sec, r->raw_steps_per_sec, r->efficiency, r->p50_us, r->p90_us,
		r->p99_us, r->cpu_pct, (unsigned long long)r->rss_kb,
		(unsigned long long)r->batches, (unsigned long long)r->episodes,
		r->p50_steps_per_sec, r->raw_p50_steps_per_sec, r->efficiency_p50,
		r->steps_per_cpu_sec, r->raw_steps_per_cpu_sec, r->efficiency_cpu);
	fprintf(f, "\"breakdown\":{\"ns_env_step\":%.1f,\"ns_ring\":%.1f,\"ns_copy\":%.1f,"
		   "\"ns_policy\":%.1f,\"ns_wait\":%.1f,\"share_env\":%.4f,\"share_ring\":%.4f,"
		   "\"share_copy\":%.4f,\"share_policy\":%.4f,\"share_wait\":%.4f},",
		r->ns_env_step, r->ns_ring, r->ns_copy, r->ns_policy, r->ns_wait, r->share_env,
		r->share_ring, r->share_copy, r->share_policy, r->share_wait);
	fprintf(f, "\"build\":\"%s\",", sr_build_info());
	cli_json_machine(f);
	fputc('}', f);
}

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
		"P50/P90/P99, the time breakdown, CPU %% and RSS.\n"
		"  --env ID       env id or short name (default CartPole-v1)\n"
		"  --envs N       env instances (default 1024)\n"
		"  --threads T    workers, the calling thread included (default: one per core)\n"
		"  --batch B      async batch size (default envs/2); implies --mode async if < N\n"
		"  --mode M       sync (default) or async\n"
		"  --seconds S    active window (default 3); --warmup/--cooldown (default 0.5)\n"
		"  --no-inline    worker 0 is a thread too (the calling thread only drives)\n"
		"  --json         one JSON object\n");
}

static int parse_bind(const char *s)
{
	if (!strcmp(s, "core"))
		return SR_BIND_CORE;
	if (!strcmp(s, "numa"))
		return SR_BIND_NUMA;
	if (!strcmp(s, "none"))
		return SR_BIND_NONE;
	cli_die("--bind: '%s' is not core, numa or none", s);
}

int bench_pool(int argc, char **argv)
{
	struct bench_pool_cfg c;
	struct bench_pool_result r;
	sr_env_spec spec;
	const char *v, *mode = NULL;
	bool json = false;
	int err;

	bench_pool_cfg_init(&c);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--env", &v)) {
			c.env = v;
		} else if (cli_opt(argc, argv, &i, "--envs", &v)) {
			c.envs = (uint32_t)cli_int("--envs", v, 1, 1 << 24);
		} else if (cli_opt(argc, argv, &i, "--threads", &v)) {
			c.threads = (uint32_t)cli_int("--threads", v, 0, 4096);
		} else if (cli_opt(argc, argv, &i, "--batch", &v)) {
			c.batch = (uint32_t)cli_int("--batch", v, 1, 1 << 24);
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
		} else if (cli_opt(argc, argv, &i, "--bind", &v)) {
			c.bind = parse_bind(v);
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
			if (sr_ckpt_backend_parse && sr_ckpt_backend_parse(v) < 0)
				cli_die("--checkpoint-backend: %s", sr_last_error());
			c.checkpoint_backend = v;
		} else if (cli_opt(argc, argv, &i, "--no-inline", NULL)) {
			c.no_inline = 1;
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
	printf("pool %s: %u envs, %u threads, %s, batch %u, %.2f s\n", spec.id, c.envs,
	       r.threads_used, c.async ? "async" : "sync", c.batch, r.seconds);
	printf("  steps/s       %.0f\n", r.steps_per_sec);
	printf("  raw steps/s   %.0f  (one thread, %u envs)\n", r.raw_steps_per_sec,
	       (c.envs + r.threads_used - 1) / r.threads_used);
	printf("  efficiency    %.3f  (steps/s / (%u x raw))\n", r.efficiency, r.threads_used);
	printf("  from medians  %.0f steps/s vs raw %.0f: efficiency %.3f (batch p50s; robust\n"
	       "                on a shared machine)\n", r.p50_steps_per_sec,
	       r.raw_p50_steps_per_sec, r.efficiency_p50);
	printf("  per CPU-second %.0f steps vs raw %.0f: efficiency %.3f (spinning counts)\n",
	       r.steps_per_cpu_sec, r.raw_steps_per_cpu_sec, r.efficiency_cpu);
	printf("  batch latency p50 %.1f us  p90 %.1f us  p99 %.1f us\n", r.p50_us, r.p90_us,
	       r.p99_us);
	printf("  breakdown     env %.1f%%  ring %.1f%%  collect %.1f%%  policy %.1f%%  "
	       "wait %.1f%%\n", 100 * r.share_env, 100 * r.share_ring, 100 * r.share_copy,
	       100 * r.share_policy, 100 * r.share_wait);
	printf("  per batch     env %.0f ns  ring %.0f ns  collect %.0f ns  wait %.0f ns\n",
	       r.ns_env_step, r.ns_ring, r.ns_copy, r.ns_wait);
	printf("  cpu           %.0f%%   rss %llu kB\n", r.cpu_pct, (unsigned long long)r.rss_kb);
	return 0;
}

/*
 * The pool benchmark (bench_pool.h): the pool end to end, and its raw
 * single-thread ceiling in the same run. `stepring bench pool`, sweep,
 * tune and diagnose all measure through bench_pool_run().
 *
 * Phases: the pool's warm-up, the active window, a cool-down. The active
 * window is R rounds (about 0.25 s of pool each): the pool, then the raw
 * loop (envs/threads instances stepped in one thread, batched, with
 * autoreset) on worker 0's CPU, then with T threads the raw loop on all T
 * workers' CPUs at once. Efficiencies are medians of the rounds' ratios.
 * Actions come from a precomputed random buffer (policy "none"), so
 * choosing them costs nothing. Latency is per batch: one sr_pool_step, or
 * from sr_pool_send to the sr_pool_recv that returns (async).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "bench_pool.h"
#include "machine.h"
#include "policy_step.h"
#include "stepring.h"
#include "stepring/checkpoint.h"

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

/* The raw loop's figures, accumulated over its windows. */
struct raw_acc {
	uint64_t steps, ns, cpu_ns;
	float *lat; /* per-batch wall time, ns (main thread's windows only) */
	uint32_t nlat, cap;
};

int bench_ckpt_backend_parse(const char *name)
{
	for (uint32_t b = SR_CKPT_BACKEND_AUTO; name && b <= SR_CKPT_BACKEND_SYNC; b++)
		if (!strcmp(name, sr_ckpt_backend_name(b)))
			return (int)b;
	return -EINVAL;
}

/* A pause for spin loops: tells the core a spin is on (x86 PAUSE, Arm
 * YIELD), so a sibling hyperthread gets the execution units. */
static inline void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * T raw loops in lockstep: each steps its share of a batch, then waits at a
 * barrier for the others, as a sync pool's workers (and a batch group's)
 * do. Thread 0 keeps the time: it sets stop before it arrives at a
 * barrier. The last thread to arrive reads stop and releases the others
 * with it in bit 0 of the new generation, so all leave at the same
 * barrier. (Reading stop after the barrier is not enough: a thread still
 * on its way out of the barrier before would see thread 0's stop too, and
 * leave one barrier early, with thread 0 waiting for it forever.)
 */
struct lockstep {
	_Atomic uint32_t arrived;
	_Atomic uint32_t gen; /* += 2 per barrier; bit 0: stop there */
	_Atomic int stop;
	uint32_t T;
	uint32_t chunk; /* envs per thread and batch */
};

/* Returns false when the threads are to stop (at this barrier, for all). */
static bool lockstep_wait(struct lockstep *ls)
{
	uint32_t g = atomic_load(&ls->gen), v;

	if (atomic_fetch_add(&ls->arrived, 1) == ls->T - 1) {
		/* Every thread has arrived, thread 0 after any store of stop. */
		atomic_store(&ls->arrived, 0);
		v = (g + 2) | (atomic_load(&ls->stop) ? 1u : 0u);
		atomic_store(&ls->gen, v);
	} else {
		/* Spin as the pool's workers do, then yield: on a CPU shared
		 * with other work, a thread that only spun would hold it from
		 * the one it waits for until the scheduler's tick. */
		for (uint32_t i = 0; (v = atomic_load(&ls->gen)) == g; i++) {
			if (i < (1u << 14))
				bench_cpu_relax();
			else
				sched_yield();
		}
	}
	return !(v & 1);
}

/* One raw step of instances [off, off + k) with @acts (the first one's
 * action), then a reset of those whose episode ended (terminated, or
 * max_episode_steps by the elapsed counts @el). */
static void raw_step(const sr_env_spec *s, char *st, const unsigned char *acts, float *obs,
		     double *rew, uint8_t *term, uint32_t *el, uint32_t off, uint32_t k)
{
	s->step(s, st + (size_t)off * s->state_size, k, acts, obs + (size_t)off * s->obs_dim,
		rew + off, term + off);
	for (uint32_t i = off; i < off + k; i++) {
		el[i]++;
		if (term[i] || (s->max_episode_steps && el[i] >= s->max_episode_steps)) {
			s->reset(s, st + (size_t)i * s->state_size, 1, obs + (size_t)i * s->obs_dim);
			el[i] = 0;
		}
	}
}

/* The raw loop: one thread, n instances, step all then reset the ended,
 * for @seconds; adds steps, wall and CPU time (and batch times) to @acc.
 * With @ls (lockstep, thread @idx): step ls->chunk instances at a time,
 * cycling over the n, and wait at the barrier after each chunk.
 * Returns 0 or -ENOMEM. */
static int raw_loop_ls(const sr_env_spec *s, uint32_t n, double seconds, uint64_t seed,
		       struct raw_acc *acc, struct lockstep *ls, uint32_t idx)
{
	size_t ss = s->state_size, asz = sr_env_action_size(s);
	char *st = aligned_alloc(64, ((size_t)n * ss + 63) & ~(size_t)63);
	float *obs = malloc((size_t)n * s->obs_dim * sizeof(float));
	double *rew = malloc(n * sizeof(double));
	uint8_t *term = malloc(n);
	uint32_t *el = calloc(n, sizeof(uint32_t));
	unsigned char *acts = make_actions(s, n, seed);
	uint64_t c0, t0, t, tb, steps = 0, it = 0;
	int err = -ENOMEM;
	/* Opaque envs (Box2D): instances are made, on this thread, and destroyed. */
	int made = st && sr_env_create_instances(s, st, n) == 0;

	if (!made || !obs || !rew || !term || !el || !acts) {
		if (ls) {
			/* Arrive once with stop set: the others leave there. */
			atomic_store(&ls->stop, 1);
			lockstep_wait(ls);
		}
		goto out;
	}
	s->seed(s, st, n, seed, 0);
	/* One untimed batch first: one-time costs (the spin env calibrates
	 * on its first step, 5-12 ms) and cold caches stay out of the rate,
	 * as the pool's warm-up keeps them out of its own. */
	s->reset(s, st, n, obs);
	s->step(s, st, n, acts, obs, rew, term);
	s->reset(s, st, n, obs);
	c0 = thread_cpu_ns();
	t0 = bench_now_ns();
	tb = t0;
	if (ls) {
		uint32_t m = ls->chunk < n ? ls->chunk : n, off = 0;

		for (;;) {
			uint32_t k = n - off < m ? n - off : m;

			raw_step(s, st, acts + ((it++ % ACT_BATCHES) * n + off) * asz, obs, rew, term,
				 el, off, k);
			steps += k;
			off = off + k < n ? off + k : 0;
			t = bench_now_ns();
			if (idx == 0 && (double)(t - t0) >= seconds * 1e9)
				atomic_store(&ls->stop, 1);
			if (!lockstep_wait(ls))
				break;
		}
		t = bench_now_ns();
		goto done;
	}
	do {
		for (int k = 0; k < 8; k++, it++) {
			uint64_t te;

			raw_step(s, st, acts + (it % ACT_BATCHES) * n * asz, obs, rew, term, el, 0, n);
			steps += n;
			te = bench_now_ns();
			if (acc->lat && acc->nlat < acc->cap)
				acc->lat[acc->nlat++] = (float)(te - tb);
			tb = te;
		}
		t = tb;
	} while ((double)(t - t0) < seconds * 1e9);
done:
	acc->steps += steps;
	acc->ns += t - t0;
	acc->cpu_ns += thread_cpu_ns() - c0;
	err = 0;
out:
	if (made)
		sr_env_destroy_instances(s, st, n);
	free(st);
	free(obs);
	free(rew);
	free(term);
	free(el);
	free(acts);
	return err;
}

static int raw_loop(const sr_env_spec *s, uint32_t n, double seconds, uint64_t seed,
		    struct raw_acc *acc)
{
	return raw_loop_ls(s, n, seconds, seed, acc, NULL, 0);
}

/*
 * The raw loop on every worker's CPU at once: the hardware's own ceiling
 * for T threads (shared caches, memory, SMT siblings, a hypervisor that
 * slows one vCPU down), which a pool cannot beat. Thread k runs on the
 * CPU that worker k is bound to (the calling thread is worker 0).
 */
struct raw_par {
	const sr_env_spec *spec;
	uint32_t n;
	double seconds;
	uint64_t seed;
	int cpu;
	_Atomic int *go; /* 0 wait, 1 run, -1 give up */
	struct lockstep *ls; /* or NULL: free running */
	uint32_t idx;
	struct raw_acc acc;
	int err;
};

static void *raw_par_main(void *arg)
{
	struct raw_par *rp = arg;

	if (rp->cpu >= 0) {
		cpu_set_t cs;

		CPU_ZERO(&cs);
		CPU_SET(rp->cpu, &cs);
		pthread_setaffinity_np(pthread_self(), sizeof(cs), &cs);
	}
	while (!atomic_load(rp->go))
		sched_yield();
	if (atomic_load(rp->go) > 0)
		rp->err = raw_loop_ls(rp->spec, rp->n, rp->seconds, rp->seed, &rp->acc, rp->ls,
				      rp->idx);
	return NULL;
}

/* Returns the summed steps/s of T concurrent raw loops (in lockstep, with
 * a barrier after every @chunk envs each, when @chunk > 0), or < 0 (-errno);
 * with @per, each loop's own steps/s in per[0 .. T-1]. */
static double raw_parallel(sr_pool *p, const sr_env_spec *s, uint32_t T, uint32_t n,
			   double seconds, uint64_t seed, uint32_t chunk, double *per)
{
	struct lockstep ls = {.T = T, .chunk = chunk};
	struct raw_par *rp = calloc(T, sizeof(*rp));
	pthread_t *th = calloc(T, sizeof(*th));
	_Atomic int go = 0;
	uint32_t started = 0;
	double rate = 0;
	int err = 0;

	if (!rp || !th) {
		free(rp);
		free(th);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < T; k++) {
		sr_pool_worker_stats ws;

		sr_pool_worker_stats_get(p, k, &ws);
		rp[k] = (struct raw_par){.spec = s, .n = n, .seconds = seconds,
					 .seed = seed + k, .cpu = ws.cpu,
					 .go = &go, .ls = chunk ? &ls : NULL, .idx = k};
	}
	/* Worker 0's share runs here, on the calling thread (bound already). */
	for (uint32_t k = 1; k < T; k++) {
		if (pthread_create(&th[k], NULL, raw_par_main, &rp[k]))
			break;
		started++;
	}
	if (started == T - 1) {
		atomic_store(&go, 1);
		rp[0].err = raw_loop_ls(s, n, seconds, seed, &rp[0].acc, rp[0].ls, 0);
	} else {
		err = -EAGAIN;
		atomic_store(&go, -1);
	}
	for (uint32_t k = 1; k <= started; k++)
		pthread_join(th[k], NULL);
	for (uint32_t k = 0; k < T && !err; k++) {
		if (rp[k].err || !rp[k].acc.ns) {
			err = rp[k].err ? rp[k].err : -EIO;
		} else {
			double rk = (double)rp[k].acc.steps / ((double)rp[k].acc.ns / 1e9);

			rate += rk;
			if (per)
				per[k] = rk;
		}
	}
	free(rp);
	free(th);
	return err ? err : rate;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* What bench_pool_run drives the pool with, across its windows. */
struct drive {
	const struct bench_pool_cfg *cfg;
	sr_pool *p;
	struct bench_policy *bp;
	const sr_batch *b;
	const unsigned char *acts;
	uint32_t rows;
	size_t asz;
	uint64_t it;           /* batches so far */
	uint64_t next_ckpt;
	char ckpt_path[64];
	bool ckpt_started;
	/* measured windows only */
	float *lat;
	uint32_t nlat;
	uint64_t pol_ns;
};

static int checkpoint_now(struct drive *d)
{
	sr_ckpt_opts co;
	int err;

	sr_ckpt_opts_init(&co);
	if (d->cfg->checkpoint_backend &&
	    bench_ckpt_backend_parse(d->cfg->checkpoint_backend) >= 0) {
		co.flags |= SR_CKPT_F_BACKEND;
		co.backend = (uint32_t)bench_ckpt_backend_parse(d->cfg->checkpoint_backend);
	}
	snprintf(d->ckpt_path, sizeof(d->ckpt_path), "/tmp/sr-bench-pool-%d.ckpt", (int)getpid());
	d->ckpt_started = true;
	co.flags |= SR_CKPT_F_NOWAIT; /* still writing the last one: skip */
	err = sr_pool_checkpoint(d->p, d->ckpt_path, &co);
	return err == -EBUSY ? 0 : err;
}

/* Step the pool for @secs; with @measure, keep batch latencies and the
 * policy's time. 0 or -errno. */
static int drive_for(struct drive *d, double secs, bool measure)
{
	uint64_t t_end = bench_now_ns() + (uint64_t)(fmax(secs, 0) * 1e9);
	int err;

	while (bench_now_ns() < t_end) {
		for (int k = 0; k < 4; k++, d->it++) {
			const unsigned char *a = d->acts + (d->it % ACT_BATCHES) * d->rows * d->asz;
			uint64_t t0;

			if (d->bp) {
				const void *pa;
				uint64_t nc, np;

				err = bench_policy_act(d->bp, d->b, &pa, &nc, &np);
				if (err)
					return err;
				a = pa;
				if (measure)
					d->pol_ns += nc + np;
			}
			t0 = bench_now_ns();
			if (d->cfg->async) {
				err = sr_pool_send(d->p, a, NULL, d->b->n);
				if (!err)
					err = sr_pool_recv(d->p, &d->b);
			} else {
				err = sr_pool_step(d->p, a, &d->b);
			}
			if (err)
				return err;
			if (measure && d->nlat < MAX_LAT)
				d->lat[d->nlat++] = (float)((double)(bench_now_ns() - t0) / 1e3);
		}
		if (measure && d->cfg->checkpoint_every > 0 && bench_now_ns() >= d->next_ckpt) {
			err = checkpoint_now(d);
			if (err)
				return err;
			d->next_ckpt = bench_now_ns() + (uint64_t)(d->cfg->checkpoint_every * 1e9);
		}
	}
	return 0;
}

/* Rounds of the active window: about 0.25 s of pool each, 4 to 40. */
static uint32_t rounds_for(double seconds)
{
	double r = round(seconds / 0.25);

	return r < 4 ? 4 : r > 40 ? 40 : (uint32_t)r;
}

/*
 * The pool's experiment knobs are environment variables (docs/tuning.md):
 * --no-inline, --no-groups and --no-rebalance add theirs to whatever
 * STEPRING_POOL_KNOBS says, for this create only.
 */
static int create_with_knobs(const struct bench_pool_cfg *cfg, const sr_pool_opts *o,
			     sr_pool **out)
{
	const char *env = getenv("STEPRING_POOL_KNOBS");
	char *saved = env ? strdup(env) : NULL;
	char knobs[256];
	int err;

	snprintf(knobs, sizeof(knobs), "%s%s%s%s", env && *env ? env : "",
		 cfg->no_inline ? ",no-inline" : "", cfg->no_groups ? ",no-batch-groups" : "",
		 cfg->no_rebalance ? ",no-rebalance" : "");
	if (env && !saved)
		return -ENOMEM;
	/* No leading comma: an empty word is refused. */
	setenv("STEPRING_POOL_KNOBS", knobs[0] == ',' ? knobs + 1 : knobs, 1);
	err = sr_pool_create(o, out);
	if (saved)
		setenv("STEPRING_POOL_KNOBS", saved, 1);
	else
		unsetenv("STEPRING_POOL_KNOBS");
	free(saved);
	return err;
}

/* The ratios of one round of the active window (see bench_pool_run). */
struct round {
	double eff;  /* pool / (T x raw loop alone) */
	double effp; /* pool / raw loop on every worker's CPU at once */
	double scal; /* parallel raw loop / (T x raw loop alone) */
	double rawp; /* parallel raw loop, steps/s */
	double lsr;  /* lockstep raw loop, steps/s (T > 1 and cfg->lockstep) */
	double lss;  /* lockstep raw loop / (T x raw loop alone) */
	double lse;  /* pool / lockstep raw loop */
	double bal;  /* slowest / fastest CPU of the parallel raw loop */
	double pw[BENCH_MAX_WORKERS]; /* per worker: its CPU's parallel raw loop */
};

/* Sums over the pool slices of the active window. */
struct window {
	uint64_t ns, cpu_ns, steps, batches, episodes;
	uint64_t ns_env, ns_ring, ns_copy, ns_send;
	uint64_t wacc[BENCH_MAX_WORKERS][3]; /* per worker: steps, env and ring ns */
	sr_pool_stats last;                  /* the pool's stats after the last slice */
};

/* One bench_pool_run: what it set up, and what it has measured so far. */
struct run {
	const struct bench_pool_cfg *cfg;
	sr_env_spec spec;
	sr_pool *p;
	struct drive d;
	struct raw_acc raw;
	struct round *rounds; /* R of them */
	struct window win;
	uint32_t T, R, n_per; /* threads, rounds, envs per thread */
	double slice, raw_slice;
};

/* The pool's options for @cfg. 0 or -EINVAL. */
static int pool_opts_for(const struct bench_pool_cfg *cfg, sr_pool_opts *o)
{
	sr_pool_opts_init(o);
	o->env = cfg->env;
	o->num_envs = cfg->envs;
	o->num_threads = cfg->threads;
	o->batch_size = cfg->async ? (cfg->batch ? cfg->batch : cfg->envs / 2) : cfg->envs;
	if (cfg->async && o->batch_size >= cfg->envs)
		return -EINVAL;
	o->bind = (uint32_t)cfg->bind;
	/* With a policy, the policy's device takes the batches from the ring. */
	o->device = (uint32_t)(cfg->policy && strcmp(cfg->policy, "none") ? SR_DEVICE_HOST
									   : cfg->device);
	/* The calling thread steps worker 0's envs: bind it like a worker. */
	o->flags = SR_POOL_F_SEED | (cfg->no_inline ? 0 : SR_POOL_F_BIND_CALLER) |
		   (cfg->check_finite == 1 ? SR_POOL_F_CHECK_FINITE : 0) |
		   (cfg->check_finite == 2 ? SR_POOL_F_NO_CHECK_FINITE : 0) |
		   (cfg->procs ? SR_POOL_F_PROCS : 0) | (cfg->procs == 2 ? SR_POOL_F_PROC_INLINE : 0);
	o->seed = cfg->seed;
	o->ring_capacity = cfg->ring_capacity;
	if (cfg->cpuset) {
		o->flags |= SR_POOL_F_CPUSET;
		o->cpuset = cfg->cpuset;
	}
	return 0;
}

/* Create the pool and the policy, allocate the buffers. 0 or -errno, with
 * @r's message set. */
static int run_setup(struct run *x, const sr_pool_opts *o, struct bench_pool_result *r)
{
	const struct bench_pool_cfg *cfg = x->cfg;
	sr_pool_info pi = {.size = sizeof(pi)};
	int err;

	err = create_with_knobs(cfg, o, &x->p);
	if (err)
		return fail(r, err, "%s", sr_last_error());
	x->d.p = x->p;
	err = bench_policy_open(cfg->policy, x->p, cfg->device, cfg->seed, &x->d.bp, r->msg,
				sizeof(r->msg));
	if (err) {
		r->err = err;
		return err;
	}
	sr_pool_info_get(x->p, &pi);
	x->T = pi.num_threads;
	r->threads_used = x->T;
	r->ring_capacity = pi.ring ? sr_ring_capacity(pi.ring) : 0;
	x->n_per = (cfg->envs + x->T - 1) / x->T;
	x->d.rows = pi.batch_size;
	r->batch_groups = pi.batch_groups;
	x->d.asz = sr_env_action_size(&x->spec);
	x->d.acts = make_actions(&x->spec, x->d.rows, cfg->seed);
	x->d.lat = malloc(MAX_LAT * sizeof(float));
	x->R = rounds_for(cfg->seconds);
	x->raw.cap = RAW_LAT;
	x->raw.lat = malloc(RAW_LAT * sizeof(float));
	x->rounds = calloc(x->R, sizeof(*x->rounds));
	if (!x->d.acts || !x->d.lat || !x->raw.lat || !x->rounds)
		return fail(r, -ENOMEM, "%s", "out of memory");
	return 0;
}

/* One pool slice of the active window, added to x->win; *@rate gets the
 * pool's steps/s over it. 0 or -errno. */
static int run_pool_slice(struct run *x, double *rate)
{
	struct window *w = &x->win;
	sr_pool_worker_stats w0[BENCH_MAX_WORKERS], w1;
	sr_pool_stats s0, *s1 = &w->last;
	uint64_t t0, t1, c0, c1, it0 = x->d.it;
	int err;

	sr_pool_stats_get(x->p, &s0);
	for (uint32_t i = 0; i < x->T && i < BENCH_MAX_WORKERS; i++)
		sr_pool_worker_stats_get(x->p, i, &w0[i]);
	t0 = bench_now_ns();
	c0 = cpu_ns();
	err = drive_for(&x->d, x->slice, true);
	if (err)
		return err;
	w->batches += x->d.it - it0;
	t1 = bench_now_ns();
	c1 = cpu_ns();
	sr_pool_stats_get(x->p, s1);
	for (uint32_t i = 0; i < x->T && i < BENCH_MAX_WORKERS; i++) {
		sr_pool_worker_stats_get(x->p, i, &w1);
		w->wacc[i][0] += w1.steps - w0[i].steps;
		w->wacc[i][1] += w1.ns_env_step - w0[i].ns_env_step;
		w->wacc[i][2] += w1.ns_ring_publish - w0[i].ns_ring_publish;
	}
	w->ns += t1 - t0;
	w->cpu_ns += c1 - c0;
	w->steps += s1->steps - s0.steps;
	w->episodes += s1->episodes - s0.episodes;
	w->ns_env += s1->ns_env_step - s0.ns_env_step;
	w->ns_ring += s1->ns_ring_publish - s0.ns_ring_publish;
	w->ns_copy += s1->ns_collect - s0.ns_collect;
	w->ns_send += s1->ns_send - s0.ns_send;
	*rate = (double)(s1->steps - s0.steps) / ((double)(t1 - t0) / 1e9);
	return 0;
}

/* P99 of @n latencies (sorted in a copy: the window's P99 sorts them all
 * at the end); 0 for none or when out of memory. */
static double slice_p99(const float *lat, uint32_t n)
{
	float *c;
	double v;

	if (!n || !(c = malloc(n * sizeof(*c))))
		return 0;
	memcpy(c, lat, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_float);
	v = c[(uint64_t)n * 99 / 100];
	free(c);
	return v;
}

/* Round @k of the active window: a pool slice, the raw loop alone, the raw
 * loop on every worker's CPU (and in lockstep). 0 or -errno, with @r's
 * message set. */
static int run_round(struct run *x, uint32_t k, struct bench_pool_result *r)
{
	const struct bench_pool_cfg *cfg = x->cfg;
	struct round *q = &x->rounds[k];
	uint64_t rs = x->raw.steps, rn = x->raw.ns;
	uint32_t T = x->T, lat0 = x->d.nlat;
	double pool_rate, r1, rt, p99;
	int err;

	err = run_pool_slice(x, &pool_rate);
	p99 = err ? 0 : slice_p99(x->d.lat + lat0, x->d.nlat - lat0);
	if (!err)
		err = raw_loop(&x->spec, x->n_per, x->raw_slice, cfg->seed, &x->raw);
	if (err)
		return fail(r, err, "%s", sr_last_error());
	r1 = (double)(x->raw.steps - rs) / ((double)(x->raw.ns - rn) / 1e9);
	rt = T > 1 ? raw_parallel(x->p, &x->spec, T, x->n_per, x->raw_slice, cfg->seed, 0,
				  T <= BENCH_MAX_WORKERS ? q->pw : NULL)
		   : r1;
	if (rt < 0)
		return fail(r, (int)rt, "%s", "cannot start the parallel raw loop's threads");
	q->rawp = rt;
	if (T > 1 && T <= BENCH_MAX_WORKERS) {
		double lo = q->pw[0], hi = q->pw[0];

		for (uint32_t w = 1; w < T; w++) {
			lo = fmin(lo, q->pw[w]);
			hi = fmax(hi, q->pw[w]);
		}
		q->bal = hi > 0 ? lo / hi : 0;
	}
	q->eff = pool_rate / (T * r1);
	q->effp = pool_rate / rt;
	q->scal = rt / (T * r1);
	if (T > 1 && cfg->lockstep) {
		uint32_t chunk = x->d.rows / T ? x->d.rows / T : 1;
		double rl = raw_parallel(x->p, &x->spec, T, x->n_per, x->raw_slice, cfg->seed,
					 chunk, NULL);

		if (rl < 0)
			return fail(r, (int)rl, "%s",
				    "cannot start the lockstep raw loop's threads");
		q->lsr = rl;
		q->lss = rl / (T * r1);
		q->lse = pool_rate / rl;
	}
	if (k < BENCH_MAX_ROUNDS) {
		r->round_figs[k] = (struct bench_round){
			.efficiency = q->eff, .efficiency_parallel = q->effp,
			.parallel_scaling = q->scal, .cpu_balance = q->bal,
			.lockstep_scaling = q->lss, .efficiency_lockstep = q->lse,
			.steps_per_sec = pool_rate, .p99_us = p99};
		r->nround_figs = k + 1;
	}
	return 0;
}

/* Median over the first @n rounds of the double at @off in struct round. */
static double rounds_median(const struct round *rd, uint32_t n, size_t off)
{
	double col[BENCH_MAX_ROUNDS];

	if (n > BENCH_MAX_ROUNDS)
		n = BENCH_MAX_ROUNDS;
	for (uint32_t k = 0; k < n; k++)
		col[k] = *(const double *)((const char *)&rd[k] + off);
	return median(col, n);
}
#define ROUNDS_MEDIAN(x, field) rounds_median((x)->rounds, (x)->R, offsetof(struct round, field))

/* Per worker: placement, cost per step, busy share, parallel raw loop. */
static void summarize_workers(const struct run *x, struct bench_pool_result *r)
{
	const struct window *w = &x->win;
	sr_pool_worker_stats ws;

	r->nworkers = x->T < BENCH_MAX_WORKERS ? x->T : BENCH_MAX_WORKERS;
	for (uint32_t i = 0; i < r->nworkers; i++) {
		struct bench_worker_result *br = &r->workers[i];
		double st = w->wacc[i][0] ? (double)w->wacc[i][0] : 1.0;

		sr_pool_worker_stats_get(x->p, i, &ws);
		br->cpu = ws.cpu;
		br->envs = ws.num_envs;
		br->rows = ws.rows;
		br->ns_env_per_step = (double)w->wacc[i][1] / st;
		br->ns_ring_per_step = (double)w->wacc[i][2] / st;
		/* Not the idle counter: a wait is accounted when it ends, so the
		 * sleep through a raw-loop phase would land in the next pool
		 * slice. */
		br->busy_share = fmin(1.0, (double)(w->wacc[i][1] + w->wacc[i][2]) / (double)w->ns);
		if (x->T > 1 && x->T <= BENCH_MAX_WORKERS)
			br->raw_parallel_steps_per_sec =
				rounds_median(x->rounds, x->R,
					      offsetof(struct round, pw) + i * sizeof(double));
	}
}

/* The rounds' medians over those where every CPU ran alike (BENCH_EQUAL). */
static void summarize_equal_rounds(const struct run *x, struct bench_pool_result *r)
{
	double qe[BENCH_MAX_ROUNDS], ql[BENCH_MAX_ROUNDS];
	uint32_t m = 0;

	for (uint32_t k = 0; k < r->nround_figs; k++) {
		const struct bench_round *q = &r->round_figs[k];

		if (q->parallel_scaling < BENCH_EQUAL || q->cpu_balance < BENCH_EQUAL)
			continue;
		qe[m] = q->efficiency;
		ql[m++] = q->efficiency_lockstep;
	}
	r->equal_rounds = m;
	r->efficiency_equal = median(qe, m);
	r->efficiency_lockstep_equal = median(ql, m);
	r->cpu_balance = ROUNDS_MEDIAN(x, bal);
}

/* The result's figures from the active window's sums and rounds. */
static void run_summarize(struct run *x, struct bench_pool_result *r)
{
	const struct window *w = &x->win;
	uint32_t T = x->T;
	double win = (double)w->ns, tot = win * T, nb = (double)w->batches;
	double cpu_raw =
		x->raw.cpu_ns ? (double)x->raw.steps / ((double)x->raw.cpu_ns / 1e9) : 0;
	struct rusage ru;

	r->rounds = x->R;
	r->check_finite = w->last.check_finite;
	r->nonfinite_rows = w->last.nonfinite_rows;
	r->seconds = win / 1e9;
	r->batches = w->batches;
	r->episodes = w->episodes;
	r->steps_per_sec = (double)w->steps / r->seconds;
	r->raw_steps_per_sec = (double)x->raw.steps / ((double)x->raw.ns / 1e9);
	r->raw_parallel_steps_per_sec = ROUNDS_MEDIAN(x, rawp);
	r->efficiency_min = r->efficiency_max = x->rounds[0].eff;
	for (uint32_t k = 1; k < x->R; k++) {
		r->efficiency_min = fmin(r->efficiency_min, x->rounds[k].eff);
		r->efficiency_max = fmax(r->efficiency_max, x->rounds[k].eff);
	}
	r->efficiency = ROUNDS_MEDIAN(x, eff);
	r->efficiency_parallel = ROUNDS_MEDIAN(x, effp);
	r->parallel_scaling = ROUNDS_MEDIAN(x, scal);
	if (T > 1 && x->cfg->lockstep) {
		r->raw_lockstep_steps_per_sec = ROUNDS_MEDIAN(x, lsr);
		r->lockstep_scaling = ROUNDS_MEDIAN(x, lss);
		r->efficiency_lockstep = ROUNDS_MEDIAN(x, lse);
	}
	r->cpu_pct = 100.0 * (double)w->cpu_ns / win;
	r->steps_per_cpu_sec = (double)w->steps / ((double)w->cpu_ns / 1e9);
	r->raw_steps_per_cpu_sec = cpu_raw;
	r->efficiency_cpu = cpu_raw > 0 ? r->steps_per_cpu_sec / cpu_raw : 0;
	getrusage(RUSAGE_SELF, &ru);
	r->rss_kb = (uint64_t)ru.ru_maxrss;
	r->ns_env_step = (double)w->ns_env / nb;
	r->ns_ring = (double)w->ns_ring / nb;
	r->ns_copy = (double)w->ns_copy / nb;
	r->ns_policy = (double)x->d.pol_ns / nb;
	r->share_env = (double)w->ns_env / tot;
	r->share_ring = (double)w->ns_ring / tot;
	r->share_copy = (double)w->ns_copy / tot;
	r->share_policy = (double)x->d.pol_ns / tot;
	r->ns_send = (double)w->ns_send / nb;
	r->share_send = (double)w->ns_send / tot;
	summarize_workers(x, r);
	if (T > 1 && T <= BENCH_MAX_WORKERS)
		summarize_equal_rounds(x, r);
	/* The rest of the window: spinning, sleeping, and the caller's own
	 * work between calls (choosing actions). */
	r->share_wait = fmax(0.0, 1.0 - r->share_env - r->share_ring - r->share_copy -
				     r->share_send - r->share_policy);
	r->ns_wait = r->share_wait * tot / nb;
	qsort(x->d.lat, x->d.nlat, sizeof(float), cmp_float);
	if (x->d.nlat) {
		r->p50_us = x->d.lat[x->d.nlat / 2];
		r->p90_us = x->d.lat[(uint64_t)x->d.nlat * 90 / 100];
		r->p99_us = x->d.lat[(uint64_t)x->d.nlat * 99 / 100];
		r->p50_steps_per_sec = x->d.rows / (r->p50_us / 1e6);
	}
	qsort(x->raw.lat, x->raw.nlat, sizeof(float), cmp_float);
	if (x->raw.nlat && x->raw.lat[x->raw.nlat / 2] > 0)
		r->raw_p50_steps_per_sec =
			(double)x->n_per / (x->raw.lat[x->raw.nlat / 2] / 1e9);
	if (r->raw_p50_steps_per_sec > 0)
		r->efficiency_p50 = r->p50_steps_per_sec / (T * r->raw_p50_steps_per_sec);
}

/* Warm-up, the R rounds of the active window, cool-down. 0 or -errno,
 * with @r's message set. */
static int run_windows(struct run *x, struct bench_pool_result *r)
{
	const struct bench_pool_cfg *cfg = x->cfg;
	int err;

	err = sr_pool_reset(x->p, &x->d.b);
	if (!err && cfg->async)
		err = sr_pool_recv(x->p, &x->d.b);
	if (!err)
		err = drive_for(&x->d, cfg->warmup, false);
	if (err)
		return fail(r, err, "%s", sr_last_error());

	/*
	 * The active window, in R rounds: a pool slice, then the raw loop
	 * alone on this thread (worker 0's CPU), then, with T > 1, the raw
	 * loop on every worker's CPU at once. The pool's workers sleep while
	 * the raw loops run. A machine whose speed drifts (a shared host, a
	 * VM whose vCPUs speed up and slow down for seconds at a time) then
	 * drifts under both sides of each ratio alike, and the median ratio
	 * over the rounds is the figure.
	 */
	x->slice = fmax(cfg->seconds, 0.05) / x->R;
	x->raw_slice = fmax(x->slice / 2, 0.02);
	x->d.next_ckpt = bench_now_ns() + (uint64_t)(cfg->checkpoint_every * 1e9);
	for (uint32_t k = 0; k < x->R; k++) {
		err = run_round(x, k, r);
		if (err)
			return err;
	}
	if (x->d.ckpt_started)
		sr_pool_checkpoint_wait(x->p, NULL);
	err = drive_for(&x->d, cfg->cooldown, false);
	if (err)
		return fail(r, err, "%s", sr_last_error());
	if (x->d.ckpt_started) {
		sr_pool_checkpoint_wait(x->p, NULL);
		unlink(x->d.ckpt_path);
	}
	return 0;
}

/* The process workers' faults into @r; the policy, the pool, the buffers
 * freed. */
static void run_teardown(struct run *x, struct bench_pool_result *r)
{
	if (x->p && x->cfg->procs) {
		sr_pool_faults pf;

		if (!sr_pool_faults_get(x->p, &pf)) {
			r->faults = pf.faults;
			r->restarts = pf.restarts;
			r->fault_rows = pf.fault_rows;
			snprintf(r->last_fault, sizeof(r->last_fault), "%s", pf.last);
		}
	}
	bench_policy_close(x->d.bp);
	sr_pool_destroy(x->p);
	free((void *)x->d.acts);
	free(x->d.lat);
	free(x->raw.lat);
	free(x->rounds);
}

int bench_pool_run(const struct bench_pool_cfg *cfg, struct bench_pool_result *r)
{
	struct run x = {.cfg = cfg, .d = {.cfg = cfg}};
	sr_pool_opts o;
	cpu_set_t aff;
	bool have_aff;
	int err;

	memset(r, 0, sizeof(*r));
	if (!cfg->env || sr_env_find(cfg->env, &x.spec))
		return fail(r, -ENOENT, "%s", sr_last_error());
	if (cfg->checkpoint_every > 0 && cfg->async)
		return fail(r, -ENOSYS, "%s", "checkpoint_every needs sync mode");
	if (pool_opts_for(cfg, &o))
		return fail(r, -EINVAL, "%s", "async needs batch < envs");
	/* The pool binds this thread as worker 0 (SR_POOL_F_BIND_CALLER):
	 * give it back its affinity at the end, or the next pool made in this
	 * process would plan all its workers inside that one CPU. */
	have_aff = pthread_getaffinity_np(pthread_self(), sizeof(aff), &aff) == 0;
	err = run_setup(&x, &o, r);
	if (!err)
		err = run_windows(&x, r);
	if (!err)
		run_summarize(&x, r);
	run_teardown(&x, r);
	if (have_aff)
		pthread_setaffinity_np(pthread_self(), sizeof(aff), &aff);
	return err;
}

void bench_pool_print_json(FILE *f, const struct bench_pool_cfg *c,
			   const struct bench_pool_result *r)
{
	static const char *const bind[] = {"core", "numa", "none"};
	static const char *const dev[] = {"host", "cuda", "auto"};
	char e_env[256], e_pol[256], e_cpus[256];

	bench_json_escape(e_env, sizeof(e_env), c->env);
	bench_json_escape(e_pol, sizeof(e_pol), c->policy ? c->policy : "none");
	bench_json_escape(e_cpus, sizeof(e_cpus), c->cpuset);
	fprintf(f, "{\"bench\":\"pool\",\"env\":\"%s\",\"envs\":%u,\"threads\":%u,"
		   "\"threads_used\":%u,\"batch\":%u,\"mode\":\"%s\",\"policy\":\"%s\","
		   "\"device\":\"%s\",\"bind\":\"%s\",\"cpuset\":\"%s\",\"seed\":%llu,"
		   "\"seconds\":%.3f,\"warmup\":%.3f,\"cooldown\":%.3f,\"checkpoint_every\":%g,"
		   "\"no_inline\":%s,\"no_groups\":%s,\"no_rebalance\":%s,\"ring_capacity\":%llu,"
		   "\"check_finite\":%s,\"nonfinite_rows\":%llu,",
		e_env, c->envs, c->threads, r->threads_used,
		c->async ? (c->batch ? c->batch : c->envs / 2) : c->envs,
		c->async ? "async" : "sync", e_pol,
		dev[c->device >= 0 && c->device <= 2 ? c->device : 0],
		bind[c->bind >= 0 && c->bind <= 2 ? c->bind : 0], e_cpus,
		(unsigned long long)c->seed, r->seconds, c->warmup, c->cooldown, c->checkpoint_every,
		c->no_inline ? "true" : "false", c->no_groups ? "true" : "false",
		c->no_rebalance ? "true" : "false",
		(unsigned long long)r->ring_capacity, r->check_finite ? "true" : "false",
		(unsigned long long)r->nonfinite_rows);
	fprintf(f, "\"steps_per_sec\":%.1f,\"raw_steps_per_sec\":%.1f,\"efficiency\":%.4f,"
		   "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"cpu_pct\":%.1f,"
		   "\"rss_kb\":%llu,\"batches\":%llu,\"episodes\":%llu,"
		   "\"p50_steps_per_sec\":%.1f,\"raw_p50_steps_per_sec\":%.1f,"
		   "\"efficiency_p50\":%.4f,\"steps_per_cpu_sec\":%.1f,"
		   "\"raw_steps_per_cpu_sec\":%.1f,\"efficiency_cpu\":%.4f,"
		   "\"rounds\":%u,\"efficiency_min\":%.4f,\"efficiency_max\":%.4f,"
		   "\"raw_parallel_steps_per_sec\":%.1f,\"efficiency_parallel\":%.4f,"
		   "\"parallel_scaling\":%.4f,\"batch_groups\":%u,"
		   "\"raw_lockstep_steps_per_sec\":%.1f,\"lockstep_scaling\":%.4f,"
		   "\"efficiency_lockstep\":%.4f,\"cpu_balance\":%.4f,",
		r->steps_per_sec, r->raw_steps_per_sec, r->efficiency, r->p50_us, r->p90_us,
		r->p99_us, r->cpu_pct, (unsigned long long)r->rss_kb,
		(unsigned long long)r->batches, (unsigned long long)r->episodes,
		r->p50_steps_per_sec, r->raw_p50_steps_per_sec, r->efficiency_p50,
		r->steps_per_cpu_sec, r->raw_steps_per_cpu_sec, r->efficiency_cpu, r->rounds,
		r->efficiency_min, r->efficiency_max, r->raw_parallel_steps_per_sec,
		r->efficiency_parallel, r->parallel_scaling, r->batch_groups,
		r->raw_lockstep_steps_per_sec, r->lockstep_scaling, r->efficiency_lockstep,
		r->cpu_balance);
	fprintf(f, "\"breakdown\":{\"ns_env_step\":%.1f,\"ns_ring\":%.1f,\"ns_copy\":%.1f,"
		   "\"ns_policy\":%.1f,\"ns_wait\":%.1f,\"share_env\":%.4f,\"share_ring\":%.4f,"
		   "\"share_copy\":%.4f,\"share_policy\":%.4f,\"share_wait\":%.4f,"
		   "\"ns_send\":%.1f,\"share_send\":%.4f},",
		r->ns_env_step, r->ns_ring, r->ns_copy, r->ns_policy, r->ns_wait, r->share_env,
		r->share_ring, r->share_copy, r->share_policy, r->share_wait, r->ns_send,
		r->share_send);
	fputs("\"workers\":[", f);
	for (uint32_t w = 0; w < r->nworkers; w++)
		fprintf(f, "%s{\"worker\":%u,\"cpu\":%d,\"envs\":%u,\"ns_env_per_step\":%.2f,"
			   "\"ns_ring_per_step\":%.2f,\"busy_share\":%.4f,"
			   "\"raw_parallel_steps_per_sec\":%.1f,\"rows\":%u}",
			w ? "," : "", w, r->workers[w].cpu, r->workers[w].envs,
			r->workers[w].ns_env_per_step, r->workers[w].ns_ring_per_step,
			r->workers[w].busy_share, r->workers[w].raw_parallel_steps_per_sec,
			r->workers[w].rows);
	fputs("],", f);
	/* Rows of numbers under one list of names, so that a reader that
	 * looks for the first "efficiency" key still finds the run's. */
	fprintf(f, "\"equal_cpu_rounds\":%u,\"efficiency_equal_cpus\":%.4f,"
		   "\"efficiency_lockstep_equal_cpus\":%.4f,\"round_fields\":[\"efficiency\","
		   "\"efficiency_parallel\",\"parallel_scaling\",\"cpu_balance\","
		   "\"lockstep_scaling\",\"efficiency_lockstep\"],\"round_figures\":[",
		r->equal_rounds, r->efficiency_equal, r->efficiency_lockstep_equal);
	for (uint32_t k = 0; k < r->nround_figs; k++) {
		const struct bench_round *q = &r->round_figs[k];

		fprintf(f, "%s[%.4f,%.4f,%.4f,%.4f,%.4f,%.4f]", k ? "," : "", q->efficiency,
			q->efficiency_parallel, q->parallel_scaling, q->cpu_balance,
			q->lockstep_scaling, q->efficiency_lockstep);
	}
	fputs("],\"round_steps_per_sec\":[", f);
	for (uint32_t k = 0; k < r->nround_figs; k++)
		fprintf(f, "%s%.1f", k ? "," : "", r->round_figs[k].steps_per_sec);
	fputs("],\"round_p99_us\":[", f);
	for (uint32_t k = 0; k < r->nround_figs; k++)
		fprintf(f, "%s%.2f", k ? "," : "", r->round_figs[k].p99_us);
	fputs("],", f);
	fprintf(f, "\"build\":\"%s\",", sr_build_info());
	bench_json_machine(f);
	fputc('}', f);
}


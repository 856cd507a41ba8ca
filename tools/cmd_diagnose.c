/*
 * `stepring diagnose`: where is the time going, and what should change?
 *
 * For each env it measures, one after the other:
 *   1. envs only: the pool with no policy (bench_pool_run, policy "none");
 *   2. policy only: the synthetic MLP on batch-sized inputs, alone, on the
 *      chosen device (host forward pass, or on CUDA submit + forward +
 *      actions back, i.e. what the loop pays per batch on the device);
 *   3. the closed loop: the pool with the policy in the chosen mode;
 *   4. the closed loop in the other mode, for comparison.
 * and hands the figures to tune_diagnose() (tools/cmd_tune.c), whose rules
 * docs/tuning.md explains with measured examples.
 *
 * Under mpirun / srun (more than one rank) every rank runs each of these
 * at the same time, with its own pool of --envs envs in its block of the
 * node's CPUs (split as a pool across ranks splits them); rank 0 prints
 * one table whose rows sum the ranks' steps/s (latency: the slowest
 * rank's; efficiency: the lowest; shares: the ranks' mean), a row per
 * rank, and the verdict on the slowest rank's closed loop; --out gets a
 * JSON line per rank and env and a total line.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "cli.h"
#include "cli_mpi.h"
#include "machine.h"
#include "stepring.h"
#include "mlp.h"
#include "tune.h"

int cmd_diagnose(int argc, char **argv);

#include "bench_pool.h"

#include "stepring/device.h"

#define MAX_ENVS 16

struct diag {
	const char *envs_id[MAX_ENVS];
	int n_env;
	uint32_t num_envs, threads, batch;
	bool async;
	const char *policy;
	const char *device_name;
	int device;
	double seconds, warmup, cooldown;
	uint64_t seed;
	int ranks, rank;     /* MPI: every rank runs each measurement at once */
	const char *cpuset;  /* MPI: this rank's block of the node's CPUs */
	const char *out_path;
	FILE *out;           /* rank 0: JSON lines */
	int procs; /* 1: --procs, 2: --proc-inline */
};

/* Say how a pool of these options picks its threads (the default comes
 * from the work: sr_pool_info.threads_note). */
static void threads_note(const struct diag *d, const char *env_id, uint32_t batch)
{
	sr_pool_opts o;
	sr_pool *p;

	sr_pool_opts_init(&o);
	o.env = env_id;
	o.num_envs = d->num_envs;
	o.num_threads = d->threads;
	o.batch_size = d->async ? batch : d->num_envs;
	o.flags = SR_POOL_F_SEED;
	o.seed = d->seed;
	if (sr_pool_create(&o, &p) == 0) {
		printf("(threads: %s)\n", cli_pool_info(p).threads_note);
		sr_pool_destroy(p);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring diagnose [--env ID ...] [--envs N] [--threads T] [--batch B]\n"
		"                         [--mode sync|async] [--policy mlp:WxD]\n"
		"                         [--device host|cuda|auto] [--seconds S]\n"
		"                         [--procs | --proc-inline]\n"
		"\n"
		"Measure envs alone, the policy alone and the closed loop, then say what\n"
		"bounds the loop (env-bound, policy/GPU-bound, copy-bound or sync-bound),\n"
		"with the numbers behind the verdict and what to change.\n"
		"\n"
		"  --env ID      env id or short name; repeat for several (default CartPole-v1)\n"
		"  --envs N      num_envs (default 256)\n"
		"  --threads T   worker threads (default 0: chosen from the work, see the\n"
		"                \"(threads: ...)\" line)\n"
		"  --batch B     async batch size (default num_envs/2); sync uses num_envs\n"
		"  --mode M      sync or async (default sync); the other mode is run too\n"
		"  --policy P    mlp:WxD synthetic policy (default mlp:64x2)\n"
		"  --device D    host, cuda or auto (default host)\n"
		"  --seconds S   active window of each run (default 1)\n"
		"  --seed N      seed (default 0)\n"
		"  --out FILE    write a JSON line per env (under mpirun: per rank and env,\n"
		"                and a total line)\n"
		"  --procs       worker processes (sync only; docs/procs.md): also their\n"
		"                faults, restarts and fault rows\n"
		"  --proc-inline worker processes, worker 0's envs on the calling thread\n");
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/*
 * The closed loop measured here, for builds whose pool benchmark has no
 * policy: the same phases as bench_pool_run (warm-up, active window,
 * cool-down), the MLP on the host between pool calls. Latency is the pool
 * call alone, as in the benchmark; the policy's time is ns_policy.
 */
static int own_loop(const struct bench_pool_cfg *c, struct bench_pool_result *r)
{
	enum { MAX_LAT = 1 << 16 };
	sr_pool_opts o;
	sr_pool *p = NULL;
	struct mlp *pol = NULL;
	struct mlp_opts po;
	sr_pool_stats s0, s1;
	const sr_batch *b;
	sr_env_spec spec;
	float *lat = NULL;
	void *acts = NULL;
	uint64_t w0 = 0, w1 = 0, nb = 0, ns_pol = 0, nlat = 0;
	uint32_t T;
	int err;

	memset(&s0, 0, sizeof(s0));
	memset(&s1, 0, sizeof(s1));
	if ((err = sr_env_find(c->env, &spec)))
		goto fail;
	memset(&po, 0, sizeof(po));
	po.seed = c->seed;
	if ((err = mlp_parse(c->policy, &po)) || (err = mlp_create(&spec, &po, &pol))) {
		snprintf(r->msg, sizeof(r->msg), "%s", mlp_error());
		goto out;
	}
	sr_pool_opts_init(&o);
	o.env = c->env;
	o.num_envs = c->envs;
	o.num_threads = c->threads;
	o.batch_size = c->async ? c->batch : c->envs;
	o.bind = (uint32_t)c->bind;
	o.flags = SR_POOL_F_SEED;
	o.seed = c->seed;
	if ((err = sr_pool_create(&o, &p)))
		goto fail;
	T = cli_pool_info(p).num_threads;
	acts = malloc((size_t)c->envs * sr_env_action_size(&spec));
	lat = malloc(MAX_LAT * sizeof(float));
	if (!acts || !lat) {
		err = -ENOMEM;
		goto out;
	}
	if ((err = sr_pool_reset(p, &b)))
		goto fail;
	if (c->async && (err = sr_pool_recv(p, &b)))
		goto fail;
	if ((err = mlp_forward(pol, b->obs, b->n, acts)))
		goto fail;
	for (int phase = 0; phase < 3; phase++) {
		double secs = phase == 0 ? c->warmup : phase == 1 ? c->seconds : c->cooldown;
		uint64_t t_end = bench_now_ns() + (uint64_t)(secs * 1e9);

		if (phase == 1) {
			sr_pool_stats_get(p, &s0);
			w0 = bench_now_ns();
		}
		while (bench_now_ns() < t_end) {
			uint64_t t0 = bench_now_ns(), t1, t2;

			err = c->async ? sr_pool_send(p, acts, NULL, b->n) : sr_pool_step(p, acts, &b);
			if (!err && c->async)
				err = sr_pool_recv(p, &b);
			if (err)
				goto fail;
			t1 = bench_now_ns();
			if ((err = mlp_forward(pol, b->obs, b->n, acts)))
				goto fail;
			t2 = bench_now_ns();
			if (phase == 1) {
				nb++;
				ns_pol += t2 - t1;
				if (nlat < MAX_LAT)
					lat[nlat++] = (float)((double)(t1 - t0) / 1e3);
			}
		}
		if (phase == 1) {
			w1 = bench_now_ns();
			sr_pool_stats_get(p, &s1);
		}
	}
	{
		double win = (double)(w1 - w0), tot = win * T, n = nb ? (double)nb : 1;

		r->threads_used = T;
		r->seconds = win / 1e9;
		r->batches = nb;
		r->steps_per_sec = (double)(s1.steps - s0.steps) / r->seconds;
		r->ns_env_step = (double)(s1.ns_env_step - s0.ns_env_step) / n;
		r->ns_ring = (double)(s1.ns_ring_publish - s0.ns_ring_publish) / n;
		r->ns_copy = (double)(s1.ns_collect - s0.ns_collect) / n;
		r->ns_send = (double)(s1.ns_send - s0.ns_send) / n;
		r->share_send = r->ns_send * n / tot;
		r->ns_policy = (double)ns_pol / n;
		r->share_env = r->ns_env_step * n / tot;
		r->share_ring = r->ns_ring * n / tot;
		r->share_copy = r->ns_copy * n / tot;
		r->share_policy = (double)ns_pol / tot;
		r->share_wait = fmax(0, 1 - r->share_env - r->share_ring - r->share_copy -
						 r->share_send - r->share_policy);
		r->ns_wait = r->share_wait * tot / n;
		r->check_finite = s1.check_finite;
		r->nonfinite_rows = s1.nonfinite_rows;
		qsort(lat, nlat, sizeof(float), cmp_float);
		if (nlat) {
			r->p50_us = lat[nlat / 2];
			r->p90_us = lat[nlat * 90 / 100];
			r->p99_us = lat[nlat * 99 / 100];
		}
	}
	err = 0;
	goto out;
fail:
	snprintf(r->msg, sizeof(r->msg), "%s", sr_last_error()[0] ? sr_last_error()
								  : sr_strerror(err));
out:
	sr_pool_destroy(p);
	mlp_destroy(pol);
	free(acts);
	free(lat);
	r->err = err;
	return err;
}

/* Returns true when the loop was measured by own_loop(). */
static bool bench(const struct diag *d, const char *env, const char *policy, bool async,
		  struct bench_pool_result *r, const char *what)
{
	struct bench_pool_cfg c;
	bool own = false;
	int err;

	bench_pool_cfg_init(&c);
	c.env = env;
	c.envs = d->num_envs;
	c.threads = d->threads;
	c.async = async;
	c.batch = async ? (d->batch && d->batch < d->num_envs ? d->batch : d->num_envs / 2)
			: d->num_envs;
	c.policy = policy;
	c.device = d->device;
	c.seconds = d->seconds;
	c.warmup = d->warmup;
	c.cooldown = d->cooldown;
	c.seed = d->seed;
	c.cpuset = d->cpuset;
	c.procs = d->procs;
	memset(r, 0, sizeof(*r));
	if (d->rank == 0)
		fprintf(stderr, "diagnose %s: %s ...\n", env, what);
	if (d->ranks > 1)
		cli_mpi_barrier(); /* the ranks' pools run at the same time */
	err = bench_pool_run(&c, r);
	if (err == -ENOSYS && strcmp(policy, "none") != 0) {
		/* This build's pool benchmark cannot put a policy in the loop. */
		memset(r, 0, sizeof(*r));
		err = own_loop(&c, r);
		own = true;
	}
	if (err)
		cli_die("diagnose: %s (%s): %s", env, what, r->msg[0] ? r->msg : sr_strerror(err));
	return own;
}

/* Policy alone on @rows inputs: rows per second, or 0 with @note set when
 * it cannot be measured in this build. @us_per_call gets the time of one
 * forward (plus transfers on CUDA). */
static double policy_alone(const struct diag *d, const sr_env_spec *spec, uint32_t rows,
			   double *us_per_call, const char **where, char *note, size_t note_len)
{
	struct mlp_opts po;
	struct mlp *pol = NULL;
	sr_device *dev = NULL;
	float *obs = NULL;
	void *act = NULL;
	uint64_t t0, t_end, calls = 0, rng = d->seed ^ 0x9e3779b97f4a7c15ull;
	double rate = 0;
	bool cuda;
	int err;

	memset(&po, 0, sizeof(po));
	po.seed = d->seed;
	if (mlp_parse(d->policy, &po))
		cli_die("--policy: %s", mlp_error());
	err = mlp_create(spec, &po, &pol);
	if (err) {
		snprintf(note, note_len, "policy not created: %s", mlp_error());
		return 0;
	}
	cuda = d->device == SR_DEVICE_CUDA ||
	       (d->device == SR_DEVICE_AUTO && sr_device_cuda_available(0));
	*where = cuda ? "cuda" : "host";
	obs = malloc((size_t)rows * spec->obs_dim * sizeof(float));
	act = malloc((size_t)rows * sr_env_action_size(spec));
	if (!obs || !act)
		cli_die("diagnose: out of memory");
	for (size_t i = 0; i < (size_t)rows * spec->obs_dim; i++)
		obs[i] = (float)(sr_splitmix64(&rng) >> 40) / (float)(1u << 24) * 2.0f - 1.0f;

	if (cuda) {
		sr_device_opts o;
		static float reward[1 << 16];
		static uint8_t flags[1 << 16];
		static uint32_t ids[1 << 16];
		sr_batch b = {0};

		if (rows > (1u << 16)) {
			snprintf(note, note_len, "batch too big for the policy-only probe");
			goto out;
		}
		sr_device_opts_init(&o);
		o.kind = SR_DEVICE_CUDA;
		o.max_rows = rows;
		o.obs_dim = spec->obs_dim;
		o.act_kind = spec->act_kind;
		o.act_dim = spec->act_dim;
		o.flags = SR_DEVICE_F_QUIET;
		err = sr_device_open(&o, &dev);
		if (err) {
			snprintf(note, note_len, "CUDA device: %s", sr_last_error());
			goto out;
		}
		b.n = rows;
		b.obs_dim = spec->obs_dim;
		b.obs = obs;
		b.reward = reward;
		b.terminated = flags;
		b.truncated = flags;
		b.env_id = ids;
		/* Warm-up, then the active window: submit (copy in), forward,
		 * actions back: what the loop pays per batch on the device. */
		for (int phase = 0; phase < 2; phase++) {
			double len = phase ? d->seconds : d->warmup;

			t0 = bench_now_ns();
			t_end = t0 + (uint64_t)(len * 1e9);
			calls = 0;
			do {
				sr_device_batch *db;
				const void *h;

				if (sr_device_submit(dev, &b, 0, &db)) {
					snprintf(note, note_len, "CUDA submit: %s", sr_last_error());
					goto out;
				}
				if (mlp_forward_batch(pol, dev, db)) {
					snprintf(note, note_len, "CUDA policy: %s", mlp_error());
					sr_device_release(dev, db);
					goto out;
				}
				if (sr_device_actions(dev, db, NULL, &h) || sr_device_release(dev, db)) {
					snprintf(note, note_len, "CUDA actions: %s", sr_last_error());
					goto out;
				}
				calls++;
			} while (bench_now_ns() < t_end);
		}
	} else {
		for (int phase = 0; phase < 2; phase++) {
			double len = phase ? d->seconds : d->warmup;

			t0 = bench_now_ns();
			t_end = t0 + (uint64_t)(len * 1e9);
			calls = 0;
			do {
				if (mlp_forward(pol, obs, rows, act))
					cli_die("diagnose: policy forward: %s", mlp_error());
				calls++;
			} while (bench_now_ns() < t_end);
		}
	}
	{
		double secs = (double)(bench_now_ns() - t0) / 1e9;

		rate = (double)calls * rows / secs;
		*us_per_call = secs / (double)calls * 1e6;
	}
out:
	sr_device_close(dev);
	mlp_destroy(pol);
	free(obs);
	free(act);
	return rate;
}

static void print_row(const char *name, const struct bench_pool_result *r)
{
	struct tune_shares sh;

	tune_result_shares(r, &sh);

	char eff[16] = "    -"; /* own_loop() runs no raw loop: no efficiency */

	if (r->efficiency > 0)
		snprintf(eff, sizeof(eff), "%4.0f%%", 100 * r->efficiency);
	printf("%-24s %12.0f %9.1f %9.1f %5s %3.0f%% %3.0f%% %3.0f%% %5.0f%% %3.0f%% %6s\n",
	       name, r->steps_per_sec, r->p50_us, r->p99_us, eff, 100 * sh.env,
	       100 * sh.ring, 100 * sh.copy, 100 * sh.policy, 100 * sh.wait,
	       tune_bound_name(tune_classify(&sh)));
}

/* The ranks' results of one run merged into one row: steps/s summed, the
 * slowest rank's percentiles, the lowest efficiency, per-batch times
 * averaged (so the shares are the ranks' mean). */
static void merge_ranks(const struct bench_pool_result *all, int n, struct bench_pool_result *m)
{
	*m = all[0];
	m->steps_per_sec = 0;
	m->ns_env_step = m->ns_ring = m->ns_copy = m->ns_policy = m->ns_wait = m->ns_send = 0;
	for (int k = 0; k < n; k++) {
		const struct bench_pool_result *q = &all[k];

		m->steps_per_sec += q->steps_per_sec;
		m->p50_us = q->p50_us > m->p50_us ? q->p50_us : m->p50_us;
		m->p90_us = q->p90_us > m->p90_us ? q->p90_us : m->p90_us;
		m->p99_us = q->p99_us > m->p99_us ? q->p99_us : m->p99_us;
		m->efficiency = q->efficiency < m->efficiency ? q->efficiency : m->efficiency;
		m->ns_env_step += q->ns_env_step / n;
		m->ns_ring += q->ns_ring / n;
		m->ns_copy += q->ns_copy / n;
		m->ns_policy += q->ns_policy / n;
		m->ns_wait += q->ns_wait / n;
		m->ns_send += q->ns_send / n;
	}
}

static void json_run(FILE *f, const char *name, const struct bench_pool_result *r)
{
	struct tune_shares sh;

	tune_result_shares(r, &sh);
	fprintf(f, ",\"%s\":{\"steps_per_sec\":%.1f,\"p50_us\":%.2f,\"p99_us\":%.2f,"
		   "\"efficiency\":%.4f,\"threads_used\":%u,\"shares\":{\"env\":%.4f,\"ring\":%.4f,"
		   "\"copy\":%.4f,\"policy\":%.4f,\"wait\":%.4f},\"bound\":\"%s\"}",
		name, r->steps_per_sec, r->p50_us, r->p99_us, r->efficiency, r->threads_used,
		sh.env, sh.ring, sh.copy, sh.policy, sh.wait, tune_bound_name(tune_classify(&sh)));
}

/* One JSON line: rank @rank's runs (-1: the total over the ranks). */
static void json_line(const struct diag *d, const sr_env_spec *spec, int rank, const char *cpus,
		      const struct bench_pool_result *env_only, double policy_sps,
		      const struct bench_pool_result *loop, const struct bench_pool_result *other,
		      const struct tune_verdict *v)
{
	FILE *f = d->out;

	fprintf(f, "{\"schema\":\"stepring.diagnose/1\",\"row\":\"%s\"",
		rank < 0 ? "total" : "rank");
	if (rank >= 0)
		fprintf(f, ",\"rank\":%d", rank);
	fprintf(f, ",\"ranks\":%d,\"env\":", d->ranks);
	bench_json_str(f, spec->id);
	fprintf(f, ",\"num_envs\":%u,\"mode\":\"%s\",\"policy\":", d->num_envs,
		d->async ? "async" : "sync");
	bench_json_str(f, d->policy);
	if (cpus) {
		fputs(",\"cpuset\":", f);
		bench_json_str(f, cpus);
	}
	json_run(f, "envs_only", env_only);
	fprintf(f, ",\"policy_only_rows_per_sec\":%.1f", policy_sps);
	json_run(f, "closed_loop", loop);
	if (other)
		json_run(f, "other_mode", other);
	if (v)
		fprintf(f, ",\"verdict\":\"%s\"", tune_verdict_name(v->bound));
	fputs("}\n", f);
	fflush(f);
}

/* The verdict's inputs from one rank's runs (as diagnose_env has them). */
static void diag_inputs(const struct diag *d, uint32_t batch, const char *where,
			const struct bench_pool_result *env_only, double policy_sps,
			const struct bench_pool_result *loop, const struct bench_pool_result *other,
			struct tune_diag_in *in)
{
	uint32_t cores = bench_physical_cores(), cpus = bench_allowed_cpus();

	memset(in, 0, sizeof(*in));
	in->envs = d->num_envs;
	in->threads = loop->threads_used ? loop->threads_used : d->threads;
	in->batch = batch;
	in->cores = cores < cpus ? cores : cpus;
	in->async = d->async;
	in->cuda = !strcmp(where, "cuda");
	in->env_only_sps = env_only->steps_per_sec;
	in->policy_only_sps = policy_sps;
	in->loop_sps = loop->steps_per_sec;
	in->batch_groups = loop->batch_groups;
	tune_result_shares(loop, &in->loop);
	in->other_mode_sps = other ? other->steps_per_sec : 0;
	in->loadavg = bench_loadavg();
	in->cpus = cpus;
	if (loop->batches && loop->seconds > 0) {
		in->median_batch_us = loop->p50_us + loop->ns_policy / 1e3;
		in->mean_batch_us = loop->seconds * 1e6 / (double)loop->batches;
	}
	in->cpu_balance = env_only->cpu_balance;
	for (uint32_t w = 0; w < env_only->nworkers; w++) {
		const struct bench_worker_result *br = &env_only->workers[w];
		double ns = br->ns_env_per_step + br->ns_ring_per_step;

		if (!(ns > 0))
			continue;
		if (!(in->worker_fast_ns > 0) || ns < in->worker_fast_ns) {
			in->worker_fast_ns = ns;
			in->worker_fast = w;
		}
		if (ns > in->worker_slow_ns) {
			in->worker_slow_ns = ns;
			in->worker_slow = w;
			in->worker_slow_cpu = br->cpu;
		}
	}
}

/*
 * MPI: every rank measured the same runs at once. Rank 0 prints the runs
 * merged over the ranks, a row per rank, and the verdict on the slowest
 * rank's closed loop (the one every synchronous step of a data-parallel
 * job waits for); --out gets a line per rank and a total.
 */
static void diagnose_ranks(const struct diag *d, const sr_env_spec *spec, uint32_t batch,
			   const struct bench_pool_result *env_only, double policy_sps,
			   double us_call, const char *where, const char *note,
			   const struct bench_pool_result *loop,
			   const struct bench_pool_result *other, bool own)
{
	const int N = d->ranks;
	struct bench_pool_result *all = NULL, m_env, m_loop, m_other;
	double *pol = NULL, pol_sum = policy_sps;
	char cpus[64] = "", (*allcpus)[64] = NULL, name[64];
	struct tune_diag_in in;
	struct tune_verdict v;
	int slow = 0;

	if (d->rank == 0 && (!(all = calloc(3 * (size_t)N, sizeof(*all))) ||
			     !(pol = calloc((size_t)N, sizeof(*pol))) ||
			     !(allcpus = calloc((size_t)N, sizeof(*allcpus)))))
		cli_die("diagnose: out of memory");
	snprintf(cpus, sizeof(cpus), "%s", d->cpuset ? d->cpuset : "");
	cli_mpi_gather(env_only, sizeof(*env_only), all);
	cli_mpi_gather(loop, sizeof(*loop), all ? all + N : NULL);
	if (other)
		cli_mpi_gather(other, sizeof(*other), all ? all + 2 * N : NULL);
	cli_mpi_gather(&policy_sps, sizeof(policy_sps), pol);
	cli_mpi_gather(cpus, sizeof(cpus), allcpus);
	cli_mpi_allreduce(&pol_sum, 1, '+');
	if (d->rank != 0)
		return;
	merge_ranks(all, N, &m_env);
	merge_ranks(all + N, N, &m_loop);
	if (other)
		merge_ranks(all + 2 * N, N, &m_other);
	for (int k = 1; k < N; k++)
		if (all[N + k].steps_per_sec < all[N + slow].steps_per_sec)
			slow = k;

	printf("\ndiagnose %s across %d ranks: %u envs, %u threads, batch %u per rank, %s, "
	       "policy %s on %s, %gs per run\n", spec->id, N, d->num_envs,
	       loop->threads_used ? loop->threads_used : d->threads, batch,
	       d->async ? "async" : "sync", d->policy, where, d->seconds);
	printf("(every rank ran each measurement at once: steps/s summed over the ranks, latency "
	       "of the slowest rank, efficiency of the lowest, shares the ranks' mean)\n\n");
	printf("%-24s %12s %9s %9s %5s %4s %4s %4s %6s %4s %6s\n", "run", "steps/s", "p50_us",
	       "p99_us", "eff", "env", "ring", "copy", "policy", "wait", "bound");
	print_row("envs only (no policy)", &m_env);
	snprintf(name, sizeof(name), "policy only (%u rows)", batch);
	if (pol_sum > 0)
		printf("%-24s %12.0f   rows/s summed, %.1f us per forward on %s (rank 0)%s%s\n",
		       name, pol_sum, us_call, where, note[0] ? "; " : "", note);
	else
		printf("%-24s %12s   (%s)\n", name, "-", note[0] ? note : "not measured");
	snprintf(name, sizeof(name), "closed loop (%s)", d->async ? "async" : "sync");
	print_row(name, &m_loop);
	if (other) {
		snprintf(name, sizeof(name), "closed loop (%s)", d->async ? "sync" : "async");
		print_row(name, &m_other);
	}
	if (own)
		printf("(closed loops measured by diagnose itself, policy on the host: this "
		       "build's pool benchmark has no policy)\n");
	printf("\n%-5s %-10s %14s %14s %9s %9s %6s\n", "rank", "cpus", "envs only/s",
	       "closed loop/s", "p50_us", "p99_us", "bound");
	for (int k = 0; k < N; k++) {
		struct tune_shares sh;

		tune_result_shares(&all[N + k], &sh);
		printf("%-5d %-10s %14.0f %14.0f %9.1f %9.1f %6s%s\n", k,
		       allcpus[k][0] ? allcpus[k] : "-", all[k].steps_per_sec,
		       all[N + k].steps_per_sec, all[N + k].p50_us, all[N + k].p99_us,
		       tune_bound_name(tune_classify(&sh)), k == slow ? "  (slowest)" : "");
	}
	printf("\nverdict on rank %d's closed loop (the slowest):\n", slow);
	diag_inputs(d, batch, where, &all[slow], pol[slow], &all[N + slow],
		    other ? &all[2 * N + slow] : NULL, &in);
	tune_diagnose(&in, &v);
	tune_print_verdict(stdout, &v);
	fflush(stdout);
	if (d->out) {
		for (int k = 0; k < N; k++)
			json_line(d, spec, k, allcpus[k], &all[k], pol[k], &all[N + k],
				  other ? &all[2 * N + k] : NULL, NULL);
		json_line(d, spec, -1, NULL, &m_env, pol_sum, &m_loop, other ? &m_other : NULL,
			  &v);
	}
	free(all);
	free(pol);
	free(allcpus);
}

static void diagnose_env(const struct diag *d, const char *env_id)
{
	struct bench_pool_result env_only, loop, other;
	struct tune_diag_in in;
	struct tune_verdict v;
	sr_env_spec spec;
	char note[256] = "", name[64];
	const char *where = d->device_name;
	double policy_sps, us_call = 0;
	uint32_t batch = d->async ? (d->batch ? d->batch : d->num_envs / 2) : d->num_envs;
	uint32_t cores = bench_physical_cores(), cpus = bench_allowed_cpus();
	bool have_other = d->num_envs >= 2 && !d->procs, own; /* processes: sync only */

	cli_env(env_id, &spec);
	bench(d, env_id, "none", d->async, &env_only, "envs only");
	policy_sps = policy_alone(d, &spec, batch, &us_call, &where, note, sizeof(note));
	own = bench(d, env_id, d->policy, d->async, &loop, "closed loop");
	if (have_other)
		bench(d, env_id, d->policy, !d->async, &other, "closed loop, other mode");
	if (policy_sps <= 0 && loop.ns_policy > 0) {
		/* Fallback: the loop's own policy time per batch. */
		policy_sps = batch / (loop.ns_policy * 1e-9);
		us_call = loop.ns_policy / 1e3;
	}
	if (d->ranks > 1) {
		diagnose_ranks(d, &spec, batch, &env_only, policy_sps, us_call, where, note, &loop,
			       have_other ? &other : NULL, own);
		return;
	}

	printf("\ndiagnose %s: %u envs, %u threads, batch %u, %s, policy %s on %s, %gs per run\n",
	       spec.id, d->num_envs, loop.threads_used ? loop.threads_used : d->threads, batch,
	       d->async ? "async" : "sync", d->policy, where, d->seconds);
	threads_note(d, env_id, batch);
	putchar('\n');
	printf("%-24s %12s %9s %9s %5s %4s %4s %4s %6s %4s %6s\n", "run", "steps/s", "p50_us",
	       "p99_us", "eff", "env", "ring", "copy", "policy", "wait", "bound");
	print_row("envs only (no policy)", &env_only);
	snprintf(name, sizeof(name), "policy only (%u rows)", batch);
	if (policy_sps > 0)
		printf("%-24s %12.0f   rows/s, %.1f us per forward on %s%s%s\n", name, policy_sps,
		       us_call, where, note[0] ? "; " : "", note);
	else
		printf("%-24s %12s   (%s)\n", name, "-", note[0] ? note : "not measured");
	snprintf(name, sizeof(name), "closed loop (%s)", d->async ? "async" : "sync");
	print_row(name, &loop);
	if (have_other) {
		snprintf(name, sizeof(name), "closed loop (%s)", d->async ? "sync" : "async");
		print_row(name, &other);
	}
	if (own)
		printf("(closed loops measured by diagnose itself, policy on the host: this "
		       "build's pool benchmark has no policy)\n");
	if (env_only.nonfinite_rows + loop.nonfinite_rows + (have_other ? other.nonfinite_rows : 0))
		printf("warning: %s wrote NaN or infinity: %llu rows flagged SR_SLOT_NONFINITE "
		       "(envs only %llu, closed loops %llu); trainers must mask them "
		       "(docs/envs.md)\n", spec.id,
		       (unsigned long long)(env_only.nonfinite_rows + loop.nonfinite_rows +
					    (have_other ? other.nonfinite_rows : 0)),
		       (unsigned long long)env_only.nonfinite_rows,
		       (unsigned long long)(loop.nonfinite_rows +
					    (have_other ? other.nonfinite_rows : 0)));
	else if (env_only.check_finite)
		printf("finite check: no NaN or infinity in any obs or reward\n");
	if (d->procs) {
		const struct bench_pool_result *rs[2] = {&env_only, &loop};
		const char *nm[2] = {"envs only", "closed loop"};

		printf("\nworker processes (%s):\n",
		       d->procs == 2 ? "worker 0 inline" : "every worker a process");
		for (int k = 0; k < 2; k++)
			printf("  %-12s faults %llu   restarts %llu   fault rows %llu%s%s\n", nm[k],
			       (unsigned long long)rs[k]->faults, (unsigned long long)rs[k]->restarts,
			       (unsigned long long)rs[k]->fault_rows,
			       rs[k]->last_fault[0] ? "   last: " : "", rs[k]->last_fault);
	}
	putchar('\n');

	memset(&in, 0, sizeof(in));
	in.envs = d->num_envs;
	in.threads = loop.threads_used ? loop.threads_used : d->threads;
	in.batch = batch;
	in.cores = cores < cpus ? cores : cpus;
	in.async = d->async;
	in.cuda = !strcmp(where, "cuda");
	in.env_only_sps = env_only.steps_per_sec;
	in.policy_only_sps = policy_sps;
	in.loop_sps = loop.steps_per_sec;
	in.batch_groups = loop.batch_groups;
	tune_result_shares(&loop, &in.loop);
	in.other_mode_sps = have_other ? other.steps_per_sec : 0;
	in.loadavg = bench_loadavg();
	in.cpus = cpus;
	if (loop.batches && loop.seconds > 0) {
		in.median_batch_us = loop.p50_us + loop.ns_policy / 1e3;
		in.mean_batch_us = loop.seconds * 1e6 / (double)loop.batches;
	}
	in.cpu_balance = env_only.cpu_balance;
	/* Workers of the envs-only run (no policy to blur them). */
	for (uint32_t w = 0; w < env_only.nworkers; w++) {
		const struct bench_worker_result *br = &env_only.workers[w];
		double ns = br->ns_env_per_step + br->ns_ring_per_step;

		if (!(ns > 0))
			continue;
		if (!(in.worker_fast_ns > 0) || ns < in.worker_fast_ns) {
			in.worker_fast_ns = ns;
			in.worker_fast = w;
		}
		if (ns > in.worker_slow_ns) {
			in.worker_slow_ns = ns;
			in.worker_slow = w;
			in.worker_slow_cpu = br->cpu;
		}
	}
	tune_diagnose(&in, &v);
	tune_print_verdict(stdout, &v);
	fflush(stdout);
	if (d->out)
		json_line(d, &spec, 0, NULL, &env_only, policy_sps, &loop,
			  have_other ? &other : NULL, &v);
}

int cmd_diagnose(int argc, char **argv)
{
	struct diag d = {
		.num_envs = 256,
		.policy = "mlp:64x2",
		.device_name = "host",
		.device = SR_DEVICE_HOST,
		.seconds = 1.0,
		.warmup = 0.2,
		.cooldown = 0.1,
	};
	const char *val;
	sr_env_spec spec;
	/* --env is a list here (one per --env), parsed below. */
	const struct cli_run_opts run = {
		.envs = &d.num_envs, .threads = &d.threads, .batch = &d.batch,
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--env", &val)) {
			if (d.n_env == MAX_ENVS)
				cli_die("--env: at most %d envs", MAX_ENVS);
			d.envs_id[d.n_env++] = val;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--mode", &val)) {
			if (!strcmp(val, "sync"))
				d.async = false;
			else if (!strcmp(val, "async"))
				d.async = true;
			else
				cli_die("--mode: '%s' is not sync or async", val);
		} else if (cli_opt(argc, argv, &i, "--policy", &val)) {
			d.policy = val;
		} else if (cli_opt(argc, argv, &i, "--device", &val)) {
			d.device = cli_device(val);
			d.device_name = val;
		} else if (cli_opt(argc, argv, &i, "--seconds", &val)) {
			d.seconds = cli_double("--seconds", val, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--seed", &val)) {
			d.seed = (uint64_t)cli_int("--seed", val, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--out", &val)) {
			d.out_path = val;
		} else if (cli_opt(argc, argv, &i, "--procs", NULL)) {
			d.procs = d.procs ? d.procs : 1;
		} else if (cli_opt(argc, argv, &i, "--proc-inline", NULL)) {
			d.procs = 2;
		} else {
			cli_unknown("diagnose", argv[i]);
		}
	}
	if (!d.n_env)
		d.envs_id[d.n_env++] = "CartPole-v1";
	/* Check everything before the first run. */
	for (int i = 0; i < d.n_env; i++)
		cli_env(d.envs_id[i], &spec);
	if (strncmp(d.policy, "mlp:", 4) != 0)
		cli_die("--policy: '%s' is not mlp:WxD (e.g. mlp:64x2); diagnose needs a policy",
			d.policy);
	{
		struct mlp_opts po;

		if (mlp_parse(d.policy, &po))
			cli_die("--policy: %s", mlp_error());
	}
	if (d.device == SR_DEVICE_CUDA && !sr_device_cuda_available(0))
		cli_die("--device cuda: no CUDA device answers (a build without CUDA, no driver "
			"or no GPU); use host or auto");
	if (d.async && d.batch && d.batch >= d.num_envs)
		cli_die("--batch: %u must be < num_envs (%u) in async mode", d.batch, d.num_envs);
	if (d.async && d.procs)
		cli_die("--procs: worker processes step sync pools only (--mode sync)");
	if (d.async && d.num_envs < 2)
		cli_die("--envs: async mode needs at least 2 envs");
	d.ranks = cli_mpi_size();
	d.rank = cli_mpi_rank();
	if (d.ranks > 1) {
		/* This rank's block of the node's CPUs, as a pool across the
		 * ranks places itself (docs/scale.md). */
		static char cpus[256];
		sr_pool_opts po;
		sr_pool *lp;
		uint64_t fe;
		struct cli_mpi_pool *mp;

		sr_pool_opts_init(&po);
		po.env = d.envs_id[0];
		po.num_envs = (uint32_t)d.ranks;
		po.num_threads = 1;
		po.bind = SR_BIND_NONE;
		mp = cli_mpi_pool_create("diagnose", &po, &lp, &fe);
		snprintf(cpus, sizeof(cpus), "%s", cli_mpi_pool_cpus(mp));
		cli_mpi_pool_destroy(mp);
		d.cpuset = cpus[0] ? cpus : NULL;
	}
	if (d.out_path && d.rank == 0) {
		d.out = fopen(d.out_path, "w");
		if (!d.out)
			cli_die("--out: cannot write '%s': %s", d.out_path, strerror(errno));
	}
	for (int i = 0; i < d.n_env; i++)
		diagnose_env(&d, d.envs_id[i]);
	if (d.out && (ferror(d.out) | fclose(d.out))) {
		fprintf(stderr, "stepring: diagnose: --out: writing '%s' failed\n", d.out_path);
		return 1;
	}
	return 0;
}

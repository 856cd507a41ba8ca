/*
 * stepring bench loop: the closed loop env -> ring -> device -> policy ->
 * actions -> env, and the env-only throughput of the same pool in the same
 * run, so the ratio says what the policy and the transfers cost.
 *
 * The pool runs on its host device (batches are views of the ring); this
 * benchmark moves each batch to the chosen device itself through the public
 * device API: straight from the ring (sr_device_submit_ring, one copy per
 * column from the registered ring) when the batch is a ring range, else
 * from the batch's host columns. Then the MLP runs where the batch is, the
 * actions come back to the host, and go to the pool.
 *
 * Sync mode steps every env, then runs the policy: env and policy time add
 * up. Async mode (batch = envs / 2 by default) overlaps them: while the
 * policy works on one half, the workers step the other.
 *
 * --h2d measures instead the host-to-device bandwidth of a batch submitted
 * from a registered ring against cudaMemcpy from a pinned buffer of the
 * same size (and through the staging path, for reference).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "cli.h"
#include "mlp.h"
#include "policy_step.h"
#include "stepring.h"
#include "placement.h"
#include "stepring/config.h"
#include "stepring/device.h"

int bench_loop(int argc, char **argv);

struct loop_cfg {
	const char *env, *policy;
	uint32_t envs, threads, batch;
	int async, device;
	double seconds, warmup;
	uint64_t seed;
	bool json, h2d;
	double mib;
};

struct loop_res {
	double env_sps, loop_sps, ratio;
	double us_env, us_copy, us_policy; /* per batch, closed loop */
	uint64_t batches;
	uint32_t threads, rows;
	char device[96];
	char near[128];   /* CPUs near the GPU this thread was bound to */
	bool registered, staging;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring bench loop [--env ID] [--envs N] [--threads T]\n"
		"                           [--policy mlp:WxD[:relu]] [--device host|cuda|auto]\n"
		"                           [--mode sync|async] [--batch B] [--seconds S]\n"
		"                           [--warmup S] [--seed S] [--json]\n"
		"       stepring bench loop --h2d [--mib M] [--device cuda] [--json]\n"
		"\n"
		"Closed loop env -> ring -> device -> policy -> actions -> env, and the\n"
		"env-only throughput of the same pool in the same run.\n"
		"\n"
		"  --env ID        env id or short name (default CartPole-v1)\n"
		"  --envs N        env instances (default 1024)\n"
		"  --threads T     worker threads (default: one per core)\n"
		"  --policy P      synthetic MLP: width W, depth D (default mlp:64x2)\n"
		"  --device D      where the policy runs (default auto: cuda if a GPU answers)\n"
		"  --mode M        sync (step all, then the policy) or async (default: two\n"
		"                  halves overlap env stepping and the policy)\n"
		"  --batch B       async batch size (default envs / 2)\n"
		"  --seconds S     each measured window (default 3)\n"
		"  --warmup S      before each window (default 0.5)\n"
		"  --json          one JSON object on stdout\n"
		"  --h2d           bandwidth: ring -> GPU vs pinned cudaMemcpy (needs a GPU)\n"
		"  --mib M         --h2d batch size in MiB (default 64)\n");
}

/* Fixed valid actions for the env-only phase: a cheap alternating
 * pattern (discrete) or the middle of the box. */
static void *fixed_actions(const sr_env_spec *s, uint32_t rows)
{
	size_t asz = sr_env_action_size(s);
	unsigned char *a = malloc((size_t)rows * asz);

	if (!a)
		cli_die("bench loop: out of memory");
	for (uint32_t i = 0; i < rows; i++) {
		if (s->act_kind == SR_SPACE_DISCRETE) {
			int32_t v = (int32_t)(i % (s->act_n ? s->act_n : 1));

			memcpy(a + i * asz, &v, 4);
		} else {
			for (uint32_t k = 0; k < s->act_dim; k++) {
				float lo = s->act_low ? s->act_low[k] : 0.0f;
				float hi = s->act_high ? s->act_high[k] : 0.0f;
				float v = isfinite(lo) && isfinite(hi) ? (lo + hi) / 2 : 0.0f;

				memcpy(a + i * asz + 4 * k, &v, 4);
			}
		}
	}
	return a;
}

static double window(const struct loop_cfg *c, sr_pool *p, const sr_batch **b,
		     struct bench_policy *bp, const void *fixed, struct loop_res *r, bool measure)
{
	double secs = measure ? c->seconds : c->warmup;
	uint64_t t_end = bench_now_ns() + (uint64_t)(fmax(secs, measure ? 0.05 : 0) * 1e9);
	uint64_t ns_env = 0, ns_copy = 0, ns_pol = 0, nb = 0, t0, nc, np;
	sr_pool_stats s0, s1;
	uint64_t w0;
	int err;

	sr_pool_stats_get(p, &s0);
	w0 = bench_now_ns();
	do {
		const void *act = fixed;

		if (bp) {
			if (bench_policy_act(bp, *b, &act, &nc, &np))
				cli_die("bench loop: policy: %s", bench_policy_error(bp));
			ns_copy += nc;
			ns_pol += np;
		}
		t0 = bench_now_ns();
		if (c->async) {
			err = sr_pool_send(p, act, NULL, (*b)->n);
			if (!err)
				err = sr_pool_recv(p, b);
		} else {
			err = sr_pool_step(p, act, b);
		}
		if (err)
			cli_die("bench loop: pool: %s", sr_last_error());
		ns_env += bench_now_ns() - t0;
		nb++;
	} while (bench_now_ns() < t_end);
	sr_pool_stats_get(p, &s1);
	if (measure && bp) {
		r->batches = nb;
		r->us_env = (double)ns_env / (double)nb / 1e3;
		r->us_copy = (double)ns_copy / (double)nb / 1e3;
		r->us_policy = (double)ns_pol / (double)nb / 1e3;
	}
	return (double)(s1.steps - s0.steps) / ((double)(bench_now_ns() - w0) / 1e9);
}

static void run_loop(const struct loop_cfg *c)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	sr_pool_info pi;
	sr_env_spec spec;
	struct bench_policy *bp = NULL;
	sr_device_info info;
	const struct mlp *pol;
	const sr_batch *b;
	struct loop_res r;
	char msg[512];
	void *fixed;
	int err;

	memset(&r, 0, sizeof(r));
	cli_env(c->env, &spec);
	if (c->device == SR_DEVICE_CUDA && !sr_device_cuda_available(0))
		cli_die("--device cuda: no GPU answers (%s)",
			SR_CONFIG_WITH_CUDA ? "no driver or no device" : "built without CUDA");

	sr_pool_opts_init(&o);
	o.env = c->env;
	o.num_envs = c->envs;
	o.num_threads = c->threads;
	o.batch_size = c->async ? (c->batch ? c->batch : c->envs / 2) : c->envs;
	if (c->async && (o.batch_size < 1 || o.batch_size >= c->envs))
		cli_die("--batch: async needs 1 <= batch < envs");
	o.flags = SR_POOL_F_SEED;
	o.seed = c->seed;
	o.device = SR_DEVICE_HOST; /* the pool hands ring views; we move them */
	err = sr_pool_create(&o, &p);
	if (err)
		cli_die("bench loop: %s", sr_last_error());
	pi = cli_pool_info(p);
	r.threads = pi.num_threads;
	r.rows = pi.batch_size;

	err = bench_policy_open(c->policy, p, c->device, c->seed, &bp, msg, sizeof(msg));
	if (err || !bp)
		cli_die("bench loop: %s", err ? msg : "--policy none has no loop to close");
	pol = bench_policy_mlp(bp);
	info = *bench_policy_device(bp);
	snprintf(r.device, sizeof(r.device), "%s", info.name);
	/* This thread runs the collector and drives the GPU: put it near
	 * the GPU (the workers are bound already). */
	if (info.kind == SR_DEVICE_CUDA &&
	    bench_bind_near_gpu(info.index, r.near, sizeof(r.near)) != 0)
		snprintf(r.near, sizeof(r.near), "unbound");
	r.registered = info.ring_registered;
	r.staging = info.staging;

	fixed = fixed_actions(&spec, r.rows);
	if (sr_pool_reset(p, &b) || (c->async && sr_pool_recv(p, &b)))
		cli_die("bench loop: reset: %s", sr_last_error());
	/* Env only, then the closed loop, each after a warm-up. */
	window(c, p, &b, NULL, fixed, &r, false);
	r.env_sps = window(c, p, &b, NULL, fixed, &r, true);
	window(c, p, &b, bp, fixed, &r, false);
	r.loop_sps = window(c, p, &b, bp, fixed, &r, true);
	r.ratio = r.env_sps > 0 ? r.loop_sps / r.env_sps : 0;

	if (c->json) {
		printf("{\"bench\":\"loop\",\"env\":\"%s\",\"envs\":%u,\"threads\":%u,\"batch\":%u,"
		       "\"mode\":\"%s\",\"policy\":\"%s\",\"policy_macs\":%llu,\"device\":\"%s\","
		       "\"device_name\":\"%s\",\"ring_registered\":%s,\"seed\":%llu,"
		       "\"seconds\":%g,\"env_only_steps_per_sec\":%.1f,\"loop_steps_per_sec\":%.1f,"
		       "\"ratio\":%.4f,\"batches\":%llu,\"us_env\":%.2f,\"us_copy\":%.2f,"
		       "\"us_policy\":%.2f,\"collector_cpus\":\"%s\",\"build\":\"%s\"}\n",
		       spec.id, c->envs, r.threads, r.rows, c->async ? "async" : "sync", c->policy,
		       (unsigned long long)mlp_macs(pol),
		       info.kind == SR_DEVICE_CUDA ? "cuda" : "host", r.device,
		       r.registered ? "true" : "false", (unsigned long long)c->seed, c->seconds,
		       r.env_sps, r.loop_sps, r.ratio, (unsigned long long)r.batches, r.us_env,
		       r.us_copy, r.us_policy, r.near[0] ? r.near : "unbound", sr_build_info());
	} else {
		printf("bench loop: %s, %u envs, %u threads, %s batches of %u, policy %s "
		       "(%llu MACs/row) on %s%s\n",
		       spec.id, c->envs, r.threads, c->async ? "async" : "sync", r.rows, c->policy,
		       (unsigned long long)mlp_macs(pol), r.device,
		       info.kind == SR_DEVICE_CUDA
			       ? (r.registered ? " (ring pinned)" : " (pinned staging)")
			       : "");
		printf("  env only      %12.0f steps/s\n", r.env_sps);
		printf("  closed loop   %12.0f steps/s   (%.2f of env only)\n", r.loop_sps, r.ratio);
		printf("  per batch     env %.1f us   copy %.1f us   policy+actions %.1f us\n",
		       r.us_env, r.us_copy, r.us_policy);
		if (r.near[0])
			printf("  collector     on CPUs %s (near the GPU)\n", r.near);
	}
	free(fixed);
	bench_policy_close(bp);
	sr_pool_destroy(p);
}

/* Bandwidth of one batch from a registered ring vs pinned cudaMemcpy. */
static void run_h2d(const struct loop_cfg *c)
{
	const uint32_t od = 64; /* 256-byte observations */
	const size_t row = od * 4 + 4 + 1 + 1 + 1 + 4;
	uint32_t rows = (uint32_t)fmax(1024, c->mib * 1048576.0 / (double)row);
	uint64_t cap = 1;
	sr_ring_opts ro = {.obs_dim = od, .act_size = 4};
	sr_ring *ring = NULL;
	double ring_gbs[2] = {0, 0}, pinned = 0;
	bool reg[2] = {false, false};
	int reps = 10, err;

	if (!sr_device_cuda_available(0))
		cli_die("--h2d: no GPU answers (%s)",
			SR_CONFIG_WITH_CUDA ? "no driver or no device" : "built without CUDA");
	while (cap < rows)
		cap <<= 1;
	ro.capacity = cap;
	if (sr_ring_create(&ro, &ring))
		cli_die("--h2d: ring: %s", sr_last_error());
	memset(sr_ring_obs_col(ring), 1, (size_t)cap * od * 4);
	/* 0: registered ring (direct); 1: the staging path, for reference. */
	for (int m = 0; m < 2; m++) {
		sr_device_opts o;
		sr_device *d = NULL;
		sr_device_info info;
		double best = 1e30;

		sr_device_opts_init(&o);
		o.kind = SR_DEVICE_CUDA;
		o.max_rows = rows;
		o.obs_dim = od;
		o.in_flight = 2;
		o.flags = SR_DEVICE_F_RING | SR_DEVICE_F_QUIET | (m ? SR_DEVICE_F_NO_REGISTER : 0);
		o.ring = ring;
		if (sr_device_open(&o, &d))
			cli_die("--h2d: device: %s", sr_last_error());
		sr_device_info_get(d, &info);
		reg[m] = info.ring_registered;
		for (int i = 0; i <= reps; i++) {
			sr_device_batch *b;
			uint64_t t0 = bench_now_ns();

			if (sr_device_submit_ring(d, ring, 0, rows, 0, &b) || sr_device_batch_sync(b))
				cli_die("--h2d: submit: %s", sr_last_error());
			if (i > 0 && (double)(bench_now_ns() - t0) < best)
				best = (double)(bench_now_ns() - t0);
			sr_device_release(d, b);
		}
		ring_gbs[m] = (double)rows * (double)row / best; /* bytes/ns = GB/s */
		sr_device_close(d);
	}
	err = bench_cuda_pinned_h2d(0, (size_t)rows * row, reps, &pinned);
	if (err)
		cli_die("--h2d: pinned reference: %s", mlp_error());
	if (c->json) {
		printf("{\"bench\":\"h2d\",\"bytes\":%zu,\"rows\":%u,\"ring_registered\":%s,"
		       "\"ring_gbs\":%.2f,\"staging_gbs\":%.2f,\"pinned_gbs\":%.2f,"
		       "\"ring_over_pinned\":%.3f}\n",
		       (size_t)rows * row, rows, reg[0] ? "true" : "false", ring_gbs[0],
		       ring_gbs[1], pinned, pinned > 0 ? ring_gbs[0] / pinned : 0);
	} else {
		printf("bench loop --h2d: one batch of %u rows, %.1f MiB, 6 columns\n", rows,
		       (double)rows * row / 1048576.0);
		printf("  from the ring (%s)  %8.2f GB/s\n",
		       reg[0] ? "registered" : "NOT registered", ring_gbs[0]);
		printf("  via pinned staging        %8.2f GB/s\n", ring_gbs[1]);
		printf("  cudaMemcpy, pinned buffer %8.2f GB/s\n", pinned);
		printf("  ring / pinned             %8.3f\n", pinned > 0 ? ring_gbs[0] / pinned : 0);
	}
	sr_ring_destroy(ring);
}

int bench_loop(int argc, char **argv)
{
	struct loop_cfg c = {
		.env = "CartPole-v1",
		.policy = "mlp:64x2",
		.envs = 1024,
		.async = 1,
		.device = SR_DEVICE_AUTO,
		.seconds = 3,
		.warmup = 0.5,
		.mib = 64,
	};
	const char *v;
	const struct cli_run_opts run = {
		.env = &c.env, .envs = &c.envs, .threads = &c.threads, .batch = &c.batch,
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--policy", &v)) {
			struct mlp_opts po;

			if (mlp_parse(v, &po))
				cli_die("--policy: %s", mlp_error());
			c.policy = v;
		} else if (cli_opt(argc, argv, &i, "--device", &v)) {
			c.device = cli_device(v);
		} else if (cli_opt(argc, argv, &i, "--mode", &v)) {
			if (strcmp(v, "sync") && strcmp(v, "async"))
				cli_die("--mode: '%s' is not sync or async", v);
			c.async = !strcmp(v, "async");
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			c.seconds = cli_double("--seconds", v, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--warmup", &v)) {
			c.warmup = cli_double("--warmup", v, 0, 3600);
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			c.seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--mib", &v)) {
			c.mib = cli_double("--mib", v, 0.01, 4096);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			c.json = true;
		} else if (cli_opt(argc, argv, &i, "--h2d", NULL)) {
			c.h2d = true;
		} else {
			cli_unknown("bench loop", argv[i]);
		}
	}
	if (c.h2d) {
		if (c.device == SR_DEVICE_HOST)
			cli_die("--h2d measures host-to-GPU copies: it needs --device cuda or auto");
		run_h2d(&c);
	} else {
		if (c.async && c.envs < 2)
			cli_die("--envs: async mode needs at least 2 envs (or --mode sync)");
		run_loop(&c);
	}
	return 0;
}

/*
 * stepring rollout: run a pool with seeded random actions and hash every
 * obs, reward and flag (a determinism check anyone can run).
 * stepring topo: print the worker placement plan.
 *
 * The rollout hash is per env: env e's stream (its reset obs, then obs,
 * reward, terminated, truncated of each of its K steps) is hashed with
 * FNV-1a 64, and the K+1 per-env hashes are hashed in env order. Actions
 * come from one RNG per env seeded from (seed, e), so the hash does not
 * depend on the thread count, the binding, or sync versus async mode.
 *
 * Under mpirun / srun (tools/cli_mpi.h) --envs is the global count: rank r
 * steps the block of envs sr_mpi_env_range gives it, env e seeded (and
 * its actions drawn) from (seed, global e); rank 0 gathers the per-env
 * hashes in global env order and hashes them the same way, so the hash
 * equals the one-rank hash for any number of ranks.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_mpi.h"
#include "placement.h"
#include "stepring.h"

int cmd_rollout(int argc, char **argv);
int cmd_topo(int argc, char **argv);

#define FNV_OFF 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * FNV_PRIME;
	return h;
}

static void rollout_usage(FILE *f)
{
	fprintf(f,
		"usage: stepring rollout --env ID [--envs N] [--threads T] [--seed S] [--steps K]\n"
		"                        [--mode sync|async] [--batch B]\n"
		"                        [--autoreset next|same|disabled] [--bind core|numa|none]\n"
		"                        [--cpuset LIST] [--synthetic DESC] [--hash]\n"
		"                        [--procs [--proc-inline]] [--ring-name NAME] [--seconds S]\n"
		"Step N envs K times with actions from a seeded RNG per env. With --hash,\n"
		"print one 64-bit hash of every obs, reward, terminated and truncated (per\n"
		"env, in env order): the same for any --threads, --bind and --mode.\n"
		"  --envs N        env instances (default 16)\n"
		"  --threads T     workers (default: one per core)\n"
		"  --seed S        pool seed (default 0); actions use (S, env)\n"
		"  --steps K       steps per env (default 100)\n"
		"  --procs         worker processes instead of threads (docs/procs.md)\n"
		"  --proc-inline   with --procs: worker 0's envs on this thread, in this\n"
		"                  process (T - 1 processes; no crash isolation for them)\n"
		"  --synthetic D   plan on an hwloc synthetic topology (no binding; tests)\n"
		"  --ring-name N   publish the pool's ring and statistics as N and N.stats in\n"
		"                  /dev/shm, for 'stepring top' and 'stepring metrics' (under\n"
		"                  mpirun: N-rR on rank R)\n"
		"  --seconds S     stop after S seconds if the K steps are not done by then\n"
		"                  (the hash then covers fewer steps); SIGINT and SIGTERM stop\n"
		"                  it too, the pool removed cleanly\n");
}

static volatile sig_atomic_t roll_stop;

static void roll_on_signal(int sig)
{
	(void)sig;
	roll_stop = 1;
}

static uint64_t roll_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct roll {
	uint32_t n, od;
	uint64_t *h;   /* per-env hash */
	uint32_t *cnt; /* rows hashed per env */
	sr_rng *rng;
	const sr_env_spec *spec;
	size_t asz;
};

static void roll_row(struct roll *R, const sr_batch *b, uint32_t i)
{
	uint32_t e = b->env_id[i];

	R->h[e] = fnv(R->h[e], b->obs + (size_t)i * R->od, R->od * sizeof(float));
	R->h[e] = fnv(R->h[e], &b->reward[i], sizeof(float));
	R->h[e] = fnv(R->h[e], &b->terminated[i], 1);
	R->h[e] = fnv(R->h[e], &b->truncated[i], 1);
	R->cnt[e]++;
}

static void roll_action(struct roll *R, uint32_t e, unsigned char *out)
{
	const sr_env_spec *s = R->spec;

	if (s->act_kind == SR_SPACE_DISCRETE) {
		int32_t v = (int32_t)(sr_rng_next(&R->rng[e]) % s->act_n);
		memcpy(out, &v, 4);
	} else {
		for (uint32_t d = 0; d < s->act_dim; d++) {
			float v = (float)sr_rng_range(&R->rng[e], s->act_low[d], s->act_high[d]);
			memcpy(out + 4 * d, &v, 4);
		}
	}
}

int cmd_rollout(int argc, char **argv)
{
	sr_pool_opts o;
	sr_pool *p;
	sr_pool_info pi;
	sr_env_spec spec;
	const sr_batch *b;
	const char *v, *env = NULL, *mode = "sync", *ring_name = NULL;
	char rname[256];
	uint64_t steps = 100, seed = 0, all, first_env, *hall = NULL, done = 0, t0, t_end = 0;
	double seconds = 0;
	struct cli_mpi_pool *mp;
	uint32_t nglob;
	bool hash = false;
	struct roll R;
	unsigned char *acts;
	uint32_t *ids;
	sr_pool_stats st;
	int err;

	int bind = SR_BIND_CORE;
	const struct cli_run_opts run = {
		.env = &env, .envs = &o.num_envs, .threads = &o.num_threads,
		.batch = &o.batch_size, .bind = &bind,
	};

	sr_pool_opts_init(&o);
	o.num_envs = 16;
	bind = (int)o.bind;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			rollout_usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--seed", &v)) {
			seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
		} else if (cli_opt(argc, argv, &i, "--steps", &v)) {
			steps = (uint64_t)cli_int("--steps", v, 0, 1ll << 40);
		} else if (cli_opt(argc, argv, &i, "--mode", &v)) {
			if (strcmp(v, "sync") && strcmp(v, "async"))
				cli_die("--mode: '%s' is not sync or async", v);
			mode = v;
		} else if (cli_opt(argc, argv, &i, "--autoreset", &v)) {
			if (!strcmp(v, "next"))
				o.autoreset = SR_AUTORESET_NEXT_STEP;
			else if (!strcmp(v, "same"))
				o.autoreset = SR_AUTORESET_SAME_STEP;
			else if (!strcmp(v, "disabled"))
				o.autoreset = SR_AUTORESET_DISABLED;
			else
				cli_die("--autoreset: '%s' is not next, same or disabled", v);
		} else if (cli_opt(argc, argv, &i, "--cpuset", &v)) {
			o.flags |= SR_POOL_F_CPUSET;
			o.cpuset = v;
		} else if (cli_opt(argc, argv, &i, "--synthetic", &v)) {
			o.flags |= SR_POOL_F_TOPOLOGY;
			o.topology = v;
		} else if (cli_opt(argc, argv, &i, "--hash", NULL)) {
			hash = true;
		} else if (cli_opt(argc, argv, &i, "--procs", NULL)) {
			o.flags |= SR_POOL_F_PROCS; /* worker processes (docs/procs.md) */
		} else if (cli_opt(argc, argv, &i, "--proc-inline", NULL)) {
			o.flags |= SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE;
		} else if (cli_opt(argc, argv, &i, "--ring-name", &v)) {
			if (!v[0] || strlen(v) > 180 || strchr(v + (v[0] == '/'), '/'))
				cli_die("--ring-name: '%s' is not a shm name (1 to 180 characters, "
					"no '/' inside)", v);
			ring_name = v;
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			seconds = cli_double("--seconds", v, 0.001, 1e7);
		} else {
			cli_unknown("rollout", argv[i]);
		}
	}
	o.bind = (uint32_t)bind;
	if (!env)
		cli_die("rollout: --env ID is required (see 'stepring envs')");
	cli_env(env, &spec);
	o.env = env;
	o.flags |= SR_POOL_F_SEED;
	o.seed = seed;
	if (!strcmp(mode, "async")) {
		if (!o.batch_size)
			o.batch_size = o.num_envs / 2 ? o.num_envs / 2 : 1;
		if (o.batch_size >= o.num_envs)
			cli_die("rollout: async needs --batch < --envs (%u >= %u)", o.batch_size,
				o.num_envs);
		if (o.autoreset == SR_AUTORESET_DISABLED)
			cli_die("rollout: --autoreset disabled needs --mode sync");
	} else {
		if (o.batch_size && o.batch_size != o.num_envs)
			cli_die("rollout: --batch %u with --mode sync (sync batches are all %u envs)",
				o.batch_size, o.num_envs);
		o.batch_size = 0;
	}
	if (ring_name) {
		/* One name per rank: ranks on one node share /dev/shm. */
		if (cli_mpi_size() > 1)
			snprintf(rname, sizeof(rname), "%s-r%d", ring_name, cli_mpi_rank());
		else
			snprintf(rname, sizeof(rname), "%s", ring_name);
		o.flags |= SR_POOL_F_RING_NAME;
		o.ring_name = rname;
	}
	if (ring_name || seconds > 0) {
		/* A long run is stopped by a signal: remove the pool cleanly. */
		signal(SIGINT, roll_on_signal);
		signal(SIGTERM, roll_on_signal);
	}
	nglob = o.num_envs;
	mp = cli_mpi_pool_create("rollout", &o, &p, &first_env);

	pi = cli_pool_info(p);
	R.n = pi.num_envs;
	R.od = spec.obs_dim;
	R.spec = pi.spec;
	R.asz = sr_env_action_size(R.spec);
	R.h = malloc(R.n * sizeof(*R.h));
	R.cnt = calloc(R.n, sizeof(*R.cnt));
	R.rng = malloc(R.n * sizeof(*R.rng));
	acts = malloc((size_t)R.n * R.asz);
	ids = malloc(R.n * sizeof(*ids));
	if (!R.h || !R.cnt || !R.rng || !acts || !ids)
		cli_die("rollout: out of memory");
	for (uint32_t e = 0; e < R.n; e++) {
		R.h[e] = FNV_OFF;
		sr_rng_seed(&R.rng[e], seed ^ 0x5ca1ab1eull, first_env + e);
	}

	t0 = roll_now_ns();
	if (seconds > 0)
		t_end = t0 + (uint64_t)(seconds * 1e9);
	err = sr_pool_reset(p, &b);
	if (err)
		goto fail;
	if (!strcmp(mode, "sync")) {
		for (uint64_t t = 0;; t++) {
			for (uint32_t i = 0; i < b->n; i++)
				roll_row(&R, b, i);
			if (t == steps || roll_stop || (t_end && roll_now_ns() >= t_end))
				break;
			for (uint32_t e = 0; e < R.n; e++)
				roll_action(&R, e, acts + (size_t)e * R.asz);
			err = sr_pool_step(p, acts, &b);
			if (err)
				goto fail;
		}
	} else {
		/* Every returned env is sent again (so enough stay in flight);
		 * rows past an env's K-th step are not hashed. */
		uint32_t left = R.n;
		while (left && !roll_stop && !(t_end && roll_now_ns() >= t_end)) {
			err = sr_pool_recv(p, &b);
			if (err)
				goto fail;
			for (uint32_t i = 0; i < b->n; i++) {
				uint32_t e = b->env_id[i];
				if (R.cnt[e] <= steps) {
					roll_row(&R, b, i);
					if (R.cnt[e] == steps + 1)
						left--;
				}
				roll_action(&R, e, acts + (size_t)i * R.asz);
				ids[i] = e;
			}
			err = sr_pool_send(p, acts, ids, b->n);
			if (err)
				goto fail;
		}
	}
	if (cli_mpi_rank() == 0 && !(hall = malloc((size_t)nglob * sizeof(*hall))))
		cli_die("rollout: out of memory");
	cli_mpi_gather_envs(mp, R.h, sizeof(*R.h), hall);
	all = FNV_OFF;
	for (uint32_t e = 0; cli_mpi_rank() == 0 && e < nglob; e++)
		all = fnv(all, &hall[e], sizeof(hall[e]));
	free(hall);
	sr_pool_stats_get(p, &st);
	done = roll_now_ns() - t0;
	if (cli_mpi_rank() != 0) {
		/* rank 0 prints */
	} else if (hash) {
		printf("%016llx\n", (unsigned long long)all);
	} else {
		printf("rollout %s: %u envs x %llu steps, %u threads, %s", spec.id, nglob,
		       (unsigned long long)steps, pi.num_threads, mode);
		if (cli_mpi_size() > 1)
			printf(", %d ranks (rank 0: %u envs, %u threads; statistics below are "
			       "rank 0's)", cli_mpi_size(), R.n, pi.num_threads);
		printf("\n");
		printf("  episodes %llu  mean return %.3f  mean length %.1f (last 100)\n",
		       (unsigned long long)st.episodes, st.mean_return, st.mean_length);
		printf("  steps %llu in %.3f s: %.0f steps/s%s\n", (unsigned long long)st.steps,
		       (double)done / 1e9, done ? (double)st.steps / ((double)done / 1e9) : 0.0,
		       roll_stop ? " (stopped by a signal)" : "");
		printf("  hash %016llx\n", (unsigned long long)all);
	}
	cli_mpi_pool_destroy(mp);
	free(R.h);
	free(R.cnt);
	free(R.rng);
	free(acts);
	free(ids);
	return 0;
fail:
	fprintf(stderr, "stepring: rollout: %s\n", sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
	cli_mpi_pool_destroy(mp);
	return 1;
}

static void topo_usage(FILE *f)
{
	fprintf(f,
		"usage: stepring topo [--synthetic DESC | --xml FILE] [--threads T] [--cpuset LIST]\n"
		"                     [--bind core|numa|none] [--near LIST | --near-gpu N]\n"
		"Print the placement plan of the pool's workers: which CPU (or NUMA node)\n"
		"each worker is bound to. Worker 0 is the calling thread.\n"
		"  --synthetic DESC  an hwloc synthetic topology, \"pack:2 numa:2 core:8 pu:2\"\n"
		"  --xml FILE        an hwloc XML export (lstopo file.xml)\n"
		"  --threads T       workers (default: one per allowed physical core)\n"
		"  --cpuset LIST     restrict to these CPUs, \"0-3,8\" (like taskset -c)\n"
		"  --bind B          core (default), numa or none\n"
		"  --near LIST       the CPUs near the batches' device (a GPU's local CPUs):\n"
		"                    worker 0, the collector, goes to one of them (a pool\n"
		"                    on a GPU asks hwloc for that list itself)\n"
		"  --near-gpu N      that list for CUDA device N, from hwloc (this machine)\n");
}

int cmd_topo(int argc, char **argv)
{
	const char *v, *topo = NULL, *cpuset = NULL, *near = NULL;
	char gpu_cpus[256];
	uint32_t threads = 0;
	int bind = SR_BIND_CORE, gpu = -1;
	int err;
	const struct cli_run_opts run = {.threads = &threads, .bind = &bind};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			topo_usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--synthetic", &v)) {
			topo = v;
		} else if (cli_opt(argc, argv, &i, "--xml", &v)) {
			size_t n = strlen(v);
			if (n < 4 || strcmp(v + n - 4, ".xml"))
				cli_die("--xml: '%s' does not end in .xml", v);
			topo = v;
		} else if (cli_opt(argc, argv, &i, "--cpuset", &v)) {
			cpuset = v;
		} else if (cli_opt(argc, argv, &i, "--near", &v)) {
			near = v;
		} else if (cli_opt(argc, argv, &i, "--near-gpu", &v)) {
			gpu = (int)cli_int("--near-gpu", v, 0, 1024);
		} else {
			cli_unknown("topo", argv[i]);
		}
	}
	if (gpu >= 0) {
		if (near || topo)
			cli_die("topo: --near-gpu is for this machine; not with --near, --synthetic "
				"or --xml");
		err = bench_gpu_local_cpus(gpu, gpu_cpus, sizeof(gpu_cpus));
		if (err == -ENOSYS)
			cli_die("topo: --near-gpu: no CUDA in this build");
		if (err)
			cli_die("topo: --near-gpu %d: no such GPU, or hwloc does not know its CPUs",
				gpu);
		near = gpu_cpus;
	}
	err = bench_placement_print(topo, cpuset, near, threads, (uint32_t)bind, stdout);
	if (err)
		cli_die("topo: %s", sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
	return 0;
}

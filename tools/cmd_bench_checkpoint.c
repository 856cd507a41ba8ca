/*
 * stepring bench checkpoint: what a checkpoint costs the step loop, and how
 * fast it writes.
 *
 * A sync pool (CartPole by default) whose ring holds a replay window of at
 * least --replay-mib MiB is filled, then measured in phases:
 *   none    batch latency with no checkpoint
 *   uring   batch latency while io_uring checkpoints (with the window) run
 *   pwrite  the same with the pwrite-thread writer
 *   sync    the same with a naive synchronous write (the loop stalls)
 * then, with the pool idle, the write throughput of one io_uring checkpoint
 * against a plain sequential write (write(2) of 4 MiB pieces + fsync) of the
 * same number of bytes to the same directory. Files are deleted at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_clock.h"
#include "cli.h"
#include "bench_pool.h" /* bench_ckpt_backend_parse */
#include "machine.h"
#include "stepring.h"
#include "stepring/checkpoint.h"

int bench_checkpoint(int argc, char **argv);

struct phase {
	const char *name;
	double p50_us, p99_us, max_us;
	uint64_t samples;
	uint64_t ckpts;
	double mib_per_s;   /* mean write throughput of its checkpoints */
	double write_s;     /* mean background write time */
	double snapshot_us; /* mean stall for the snapshot */
	uint64_t dropped;   /* replay slots lapped while written */
	uint32_t backend_used;
	int err;
};

struct lat {
	double *v;
	size_t n, cap;
};

static void lat_add(struct lat *l, double us)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1 << 16;
		l->v = realloc(l->v, l->cap * sizeof(double));
		if (!l->v)
			cli_die("bench checkpoint: out of memory");
	}
	l->v[l->n++] = us;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void lat_fill(struct lat *l, struct phase *ph)
{
	ph->samples = l->n;
	if (!l->n)
		return;
	qsort(l->v, l->n, sizeof(double), cmp_d);
	ph->p50_us = l->v[(l->n - 1) / 2];
	ph->p99_us = l->v[(size_t)((double)(l->n - 1) * 0.99)];
	ph->max_us = l->v[l->n - 1];
	l->n = 0;
}

static uint64_t rng_state = 12345;

static void random_actions(int32_t *a, uint32_t n, uint32_t act_n)
{
	for (uint32_t i = 0; i < n; i++)
		a[i] = (int32_t)((sr_splitmix64(&rng_state) >> 33) % act_n);
}

static void step(sr_pool *p, int32_t *a, uint32_t n, uint32_t act_n)
{
	const sr_batch *b;
	int err;

	random_actions(a, n, act_n);
	err = sr_pool_step(p, a, &b);
	if (err)
		cli_die("bench checkpoint: step failed: %s", sr_last_error());
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring bench checkpoint [OPTIONS]\n\n"
		"Batch latency of a running sync pool without and during checkpoints (io_uring,\n"
		"pwrite thread, naive synchronous write), with a replay window of REPLAY MiB, and\n"
		"the checkpoint write throughput against a plain sequential write of the same bytes.\n\n"
		"  --env ID           env (default CartPole-v1)\n"
		"  --envs N           envs in the pool (default 1024)\n"
		"  --threads N        worker threads (default: CPUs - 1, leaving one to the\n"
		"                     checkpoint writer; 0: one per core)\n"
		"  --replay-mib N     replay window to save, MiB (default 1024; 0: no window)\n"
		"  --seconds S        minimum length of each measured phase (default 3)\n"
		"  --backends LIST    phases to run among uring,pwrite,sync (default all)\n"
		"  --chunk-mib N      bytes per write, MiB (default 4)\n"
		"  --direct           O_DIRECT writes (no page-cache copy)\n"
		"  --nice N           nice value of the writer thread while stepping (default: the\n"
		"                     library's: 0 on CPUs no worker uses, else 10)\n"
		"  --dir DIR          where to write (default $TMPDIR or /var/tmp); files are removed\n"
		"  --json             one JSON line instead of the table\n");
}

static double now_s(void)
{
	return (double)bench_now_ns() / 1e9;
}

/* Plain sequential write of @bytes to @path: write(2) 4 MiB at a time,
 * fsync, close. Returns MiB/s or a negative errno. */
static double plain_write(const char *path, uint64_t bytes)
{
	size_t chunk = 4u << 20;
	char *buf = malloc(chunk);
	int fd;
	double t0, t;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < chunk; i++)
		buf[i] = (char)(i * 31);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	t0 = now_s();
	for (uint64_t off = 0; off < bytes;) {
		size_t n = bytes - off < chunk ? (size_t)(bytes - off) : chunk;
		ssize_t r = write(fd, buf, n);
		if (r <= 0) {
			int e = r < 0 ? -errno : -EIO;
			close(fd);
			unlink(path);
			free(buf);
			return e;
		}
		off += (uint64_t)r;
	}
	if (fsync(fd) < 0) {
		int e = -errno;
		close(fd);
		unlink(path);
		free(buf);
		return e;
	}
	close(fd);
	t = now_s() - t0;
	unlink(path);
	free(buf);
	return (double)bytes / (1 << 20) / t;
}

int bench_checkpoint(int argc, char **argv)
{
	const char *env = "CartPole-v1", *dirv = NULL, *backends = "uring,pwrite,sync";
	uint32_t envs = 1024, threads = UINT32_MAX;
	uint64_t replay_mib = 1024, chunk_mib = 4;
	double seconds = 3;
	bool json = false, direct = false;
	int nice = 99; /* 99: the library's default */
	const char *v;
	sr_env_spec spec;
	const struct cli_run_opts run = {
		.env = &env, .envs = &envs, .envs_max = 1u << 20, .threads = &threads,
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--replay-mib", &v)) {
			replay_mib = (uint64_t)cli_int("--replay-mib", v, 0, 1 << 20);
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			seconds = cli_double("--seconds", v, 0.1, 3600);
		} else if (cli_opt(argc, argv, &i, "--backends", &v)) {
			backends = v;
		} else if (cli_opt(argc, argv, &i, "--chunk-mib", &v)) {
			chunk_mib = (uint64_t)cli_int("--chunk-mib", v, 1, 256);
		} else if (cli_opt(argc, argv, &i, "--dir", &v)) {
			dirv = v;
		} else if (cli_opt(argc, argv, &i, "--direct", NULL)) {
			direct = true;
		} else if (cli_opt(argc, argv, &i, "--nice", &v)) {
			nice = (int)cli_int("--nice", v, -20, 19);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else {
			cli_unknown("bench checkpoint", argv[i]);
		}
	}
	cli_env(env, &spec);
	if (threads == UINT32_MAX) {
		/* Leave one CPU to the checkpoint writer and the kernel. */
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 1 ? (uint32_t)(n - 1) : 1;
	}
	if (spec.act_kind != SR_SPACE_DISCRETE)
		cli_die("bench checkpoint: --env must have a discrete action space (got '%s')",
			spec.id);
	/* Validate the backend list before spending a minute. */
	int order[3], nb = 0;
	{
		char tmp[128], *save = NULL;
		snprintf(tmp, sizeof(tmp), "%s", backends);
		for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			int b = bench_ckpt_backend_parse(t);
			if (b < 0 || b == SR_CKPT_BACKEND_AUTO)
				cli_die("--backends: unknown backend '%s' (uring, pwrite, sync)", t);
			if (nb == 3)
				cli_die("--backends: at most 3 entries");
			order[nb++] = b;
		}
		if (!nb)
			cli_die("--backends: empty list");
	}
	if (!dirv) {
		dirv = getenv("TMPDIR");
		if (!dirv || !dirv[0])
			dirv = "/var/tmp";
	}
	char path[4096], plain[4096];
	snprintf(path, sizeof(path), "%s/stepring-bench-%ld.ckpt", dirv, (long)getpid());
	snprintf(plain, sizeof(plain), "%s/stepring-bench-%ld.plain", dirv, (long)getpid());
	if (access(dirv, W_OK) < 0)
		cli_die("--dir: cannot write to '%s': %s", dirv, strerror(errno));

	/* Ring capacity: a power of two whose saved window is >= replay_mib. */
	size_t slot = (size_t)spec.obs_dim * 4 + sr_env_action_size(&spec) + 4 + 3 + 4 + 8;
	uint64_t cap = 1;
	while (cap * slot < replay_mib * (1ull << 20) || cap < 4ull * envs)
		cap <<= 1;

	sr_pool_opts o;
	sr_pool *p;
	sr_pool_opts_init(&o);
	o.env = env;
	o.num_envs = envs;
	o.num_threads = threads;
	o.ring_capacity = cap;
	o.flags |= SR_POOL_F_SEED;
	o.seed = 1;
	if (sr_pool_create(&o, &p))
		cli_die("bench checkpoint: %s", sr_last_error());
	int32_t *acts = malloc(envs * sizeof(int32_t));
	const sr_batch *b;
	if (!acts || sr_pool_reset(p, &b))
		cli_die("bench checkpoint: reset failed: %s", sr_last_error());
	if (!json)
		fprintf(stderr, "filling a %llu-slot ring (%.0f MiB window) with %s x %u...\n",
			(unsigned long long)cap, (double)(cap * slot) / (1 << 20), spec.id, envs);
	while (sr_ring_head(cli_pool_info(p).ring) < cap)
		step(p, acts, envs, spec.act_n);

	sr_ckpt_opts co;
	sr_ckpt_opts_init(&co);
	co.flags = SR_CKPT_F_BACKEND | SR_CKPT_F_CHUNK | (nice != 99 ? SR_CKPT_F_NICE : 0) |
		   (replay_mib ? SR_CKPT_F_REPLAY : 0) | (direct ? SR_CKPT_F_DIRECT : 0);
	co.chunk_size = chunk_mib << 20;
	co.nice = nice;
	uint64_t ckpt_bytes = 0;

	/* Throughput with the pool idle: an io_uring checkpoint against a
	 * plain sequential write of the same bytes, same directory. The first
	 * checkpoint also maps and first-touches the staging memory (kept for
	 * the next ones): timed apart. */
	double plain_mibs = 0, idle_mibs = 0, first_s = 0;
	int failed = 0;
	sr_ckpt_status st;
	if (!json)
		fprintf(stderr, "throughput (pool idle)...\n");
	co.backend = SR_CKPT_BACKEND_URING;
	for (int k = 0; k < 2; k++) {
		if (sr_pool_checkpoint(p, path, &co) || sr_pool_checkpoint_wait(p, &st)) {
			fprintf(stderr, "stepring: bench checkpoint: %s\n", sr_last_error());
			failed++;
			break;
		}
		if (k == 0)
			first_s = (double)st.ns_write / 1e9;
		idle_mibs = (double)st.bytes / (1 << 20) / ((double)st.ns_write / 1e9);
		ckpt_bytes = st.bytes;
	}
	unlink(path);
	plain_mibs = plain_write(plain, ckpt_bytes);
	if (plain_mibs < 0) {
		fprintf(stderr, "stepring: bench checkpoint: plain write failed: %s\n",
			sr_strerror((int)plain_mibs));
		failed++;
	}

	struct phase ph[5];
	struct lat lat = {0};
	int nph = 0;
	memset(ph, 0, sizeof(ph));

	/* No checkpoint. */
	ph[nph].name = "none";
	for (double t0 = now_s(); now_s() - t0 < seconds;) {
		uint64_t s = bench_now_ns();
		step(p, acts, envs, spec.act_n);
		lat_add(&lat, (double)(bench_now_ns() - s) / 1e3);
	}
	lat_fill(&lat, &ph[nph++]);


	for (int k = 0; k < nb; k++) {
		struct phase *f = &ph[nph++];
		double sum_mibs = 0, sum_w = 0, sum_snap = 0;
		bool inflight = false;

		co.backend = (uint32_t)order[k];
		f->name = sr_ckpt_backend_name(co.backend);
		if (!json)
			fprintf(stderr, "phase %s...\n", f->name);
		/* Latency of every batch while a checkpoint is in flight (the
		 * iteration that starts one included); a new one starts when the
		 * last one ends, for at least @seconds. */
		double t0 = now_s();
		for (;;) {
			bool start = !inflight && now_s() - t0 < seconds;
			uint64_t s;
			if (!inflight && !start)
				break;
			s = bench_now_ns();
			if (start) {
				int err = sr_pool_checkpoint(p, path, &co);
				if (err) {
					f->err = err;
					fprintf(stderr, "stepring: bench checkpoint: %s\n",
						sr_last_error());
					break;
				}
				inflight = true;
			}
			step(p, acts, envs, spec.act_n);
			lat_add(&lat, (double)(bench_now_ns() - s) / 1e3);
			if (sr_pool_checkpoint_poll(p, NULL) == -EINPROGRESS)
				continue;
			inflight = false;
			sr_pool_checkpoint_wait(p, &st);
			if (st.result) {
				f->err = st.result;
				fprintf(stderr, "stepring: bench checkpoint: %s failed: %s\n",
					f->name, sr_strerror(st.result));
				break;
			}
			f->ckpts++;
			f->backend_used = st.backend;
			f->dropped += st.replay_dropped;
			ckpt_bytes = st.bytes;
			sum_mibs += (double)st.bytes / (1 << 20) / ((double)st.ns_write / 1e9);
			sum_w += (double)st.ns_write / 1e9;
			sum_snap += (double)st.ns_snapshot / 1e3;
		}
		lat_fill(&lat, f);
		if (f->ckpts) {
			f->mib_per_s = sum_mibs / (double)f->ckpts;
			f->write_s = sum_w / (double)f->ckpts;
			f->snapshot_us = sum_snap / (double)f->ckpts;
		}
	}

	unlink(path);
	uint32_t used_threads = cli_pool_info(p).num_threads;
	sr_pool_destroy(p);
	free(acts);
	free(lat.v);

	const struct phase *base = &ph[0], *ur = NULL;
	for (int i = 1; i < nph; i++)
		if (!strcmp(ph[i].name, "uring"))
			ur = &ph[i];
	double p99_ratio = ur && base->p99_us > 0 ? ur->p99_us / base->p99_us : 0;
	double tp_ratio = plain_mibs > 0 ? idle_mibs / plain_mibs : 0;
	/* A goal is only met by runs that happened: a phase whose every
	 * checkpoint failed has no latency to compare. */
	for (int i = 1; i < nph; i++)
		failed += ph[i].err != 0;
	bool p99_met = ur && !ur->err && ur->ckpts > 0 && base->samples > 0 && p99_ratio <= 1.1;
	bool tp_met = idle_mibs > 0 && plain_mibs > 0 && tp_ratio >= 0.8;

	if (json) {
		printf("{\"bench\":\"checkpoint\",\"env\":\"%s\",\"envs\":%u,\"threads\":%u,"
		       "\"ring_capacity\":%llu,\"replay_mib\":%.1f,\"checkpoint_bytes\":%llu,"
		       "\"chunk_mib\":%llu,\"seconds\":%g,\"phases\":[",
		       spec.id, envs, used_threads, (unsigned long long)cap,
		       replay_mib ? (double)(cap * slot) / (1 << 20) : 0.0,
		       (unsigned long long)ckpt_bytes, (unsigned long long)chunk_mib, seconds);
		for (int i = 0; i < nph; i++)
			printf("%s{\"checkpoint\":\"%s\",\"p50_us\":%.2f,\"p99_us\":%.2f,"
			       "\"max_us\":%.1f,\"batches\":%llu,\"checkpoints\":%llu,"
			       "\"write_mib_s\":%.1f,\"write_s\":%.3f,\"snapshot_us\":%.1f,"
			       "\"replay_dropped\":%llu,\"backend_used\":\"%s\",\"err\":%d}",
			       i ? "," : "", ph[i].name, ph[i].p50_us, ph[i].p99_us, ph[i].max_us,
			       (unsigned long long)ph[i].samples, (unsigned long long)ph[i].ckpts,
			       ph[i].mib_per_s, ph[i].write_s, ph[i].snapshot_us,
			       (unsigned long long)ph[i].dropped,
			       i ? sr_ckpt_backend_name(ph[i].backend_used) : "none", ph[i].err);
		printf("],\"throughput\":{\"uring_idle_mib_s\":%.1f,\"plain_write_mib_s\":%.1f,"
		       "\"ratio\":%.3f,\"first_checkpoint_s\":%.2f},\"goals\":{\"p99_uring_over_none\":%.3f,"
		       "\"p99_goal_met\":%s,\"throughput_ratio\":%.3f,\"throughput_goal_met\":%s},",
		       idle_mibs, plain_mibs, tp_ratio, first_s, p99_ratio,
		       p99_met ? "true" : "false", tp_ratio, tp_met ? "true" : "false");
		printf("\"build\":\"%s\",", sr_build_info());
		bench_json_machine(stdout);
		printf("}\n");
	} else {
		printf("pool: %s x %u envs, %u threads, ring %llu slots; checkpoint %.1f MiB "
		       "(replay window %.0f MiB)\n",
		       spec.id, envs, used_threads, (unsigned long long)cap,
		       (double)ckpt_bytes / (1 << 20),
		       replay_mib ? (double)(cap * slot) / (1 << 20) : 0.0);
		printf("%-8s %10s %10s %12s %8s %6s %10s %9s %12s %9s\n", "during", "p50_us",
		       "p99_us", "max_us", "batches", "ckpts", "MiB/s", "write_s", "snapshot_us",
		       "dropped");
		for (int i = 0; i < nph; i++)
			printf("%-8s %10.1f %10.1f %12.1f %8llu %6llu %10.1f %9.2f %12.1f %9llu\n",
			       ph[i].name, ph[i].p50_us, ph[i].p99_us, ph[i].max_us,
			       (unsigned long long)ph[i].samples, (unsigned long long)ph[i].ckpts,
			       ph[i].mib_per_s, ph[i].write_s, ph[i].snapshot_us,
			       (unsigned long long)ph[i].dropped);
		printf("throughput, pool idle: io_uring checkpoint %.1f MiB/s, plain sequential "
		       "write %.1f MiB/s: ratio %.2f (goal >= 0.8: %s); first checkpoint "
		       "(staging memory first touched) %.2f s\n",
		       idle_mibs, plain_mibs, tp_ratio, tp_met ? "met" : "NOT met",
		       first_s);
		if (ur)
			printf("p99 during io_uring checkpoints / without: %.2f (goal <= 1.1: %s)\n",
			       p99_ratio, p99_met ? "met" : "NOT met");
	}
	if (failed) {
		fprintf(stderr, "stepring: bench checkpoint: %d part%s failed (err in the "
				"output); the figures are incomplete\n",
			failed, failed == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

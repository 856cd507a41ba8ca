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
 *
 * With --procs it measures instead what a checkpoint of a process pool
 * (SR_POOL_F_PROCS: the workers hand their env states over through shared
 * memory) costs against a thread pool's of the same envs and workers: both
 * pools side by side, checkpointed in turn (interleaved rounds, synchronous
 * writes, no replay window: the window costs both the same), the step loop's
 * stall (the snapshot) and the whole checkpoint; medians and ranges.
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
		"  --json             one JSON line instead of the table\n"
		"  --procs            compare a process pool's checkpoint with a thread pool's\n"
		"                     (the same envs, --threads workers, default 2; no replay window)\n"
		"  --proc-inline      with --procs: worker 0 inline (SR_POOL_F_PROC_INLINE)\n"
		"  --rounds N         with --procs: checkpoints of each pool (default 21)\n");
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

/* One `stepring bench checkpoint`: its options, its pool, its figures. */
struct ckbench {
	/* options */
	const char *env, *dir, *backends;
	uint32_t envs, threads;
	uint64_t replay_mib, chunk_mib;
	double seconds;
	bool json, direct;
	bool procs, proc_inline;
	uint32_t rounds;
	int nice; /* 99: the library's default */
	/* resolved */
	sr_env_spec spec;
	int order[3], nb; /* the backends' phases, in order */
	char path[4096], plain[4096];
	size_t slot;  /* bytes per ring slot */
	uint64_t cap; /* ring capacity, slots */
	/* running */
	sr_pool *p;
	int32_t *acts;
	sr_ckpt_opts co;
	struct lat lat;
	/* figures */
	uint64_t ckpt_bytes;
	uint32_t used_threads;
	double plain_mibs, idle_mibs, first_s;
	struct phase ph[5];
	int nph, failed;
};

/* Options into @c; dies on bad ones. false: --help was printed. */
static bool ckb_parse(struct ckbench *c, int argc, char **argv)
{
	const char *v;
	const struct cli_run_opts run = {
		.env = &c->env, .envs = &c->envs, .envs_max = 1u << 20, .threads = &c->threads,
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return false;
		} else if (cli_run_opt(argc, argv, &i, &run)) {
			continue;
		} else if (cli_opt(argc, argv, &i, "--replay-mib", &v)) {
			c->replay_mib = (uint64_t)cli_int("--replay-mib", v, 0, 1 << 20);
		} else if (cli_opt(argc, argv, &i, "--seconds", &v)) {
			c->seconds = cli_double("--seconds", v, 0.1, 3600);
		} else if (cli_opt(argc, argv, &i, "--backends", &v)) {
			c->backends = v;
		} else if (cli_opt(argc, argv, &i, "--chunk-mib", &v)) {
			c->chunk_mib = (uint64_t)cli_int("--chunk-mib", v, 1, 256);
		} else if (cli_opt(argc, argv, &i, "--dir", &v)) {
			c->dir = v;
		} else if (cli_opt(argc, argv, &i, "--direct", NULL)) {
			c->direct = true;
		} else if (cli_opt(argc, argv, &i, "--nice", &v)) {
			c->nice = (int)cli_int("--nice", v, -20, 19);
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			c->json = true;
		} else if (cli_opt(argc, argv, &i, "--procs", NULL)) {
			c->procs = true;
		} else if (cli_opt(argc, argv, &i, "--proc-inline", NULL)) {
			c->procs = c->proc_inline = true;
		} else if (cli_opt(argc, argv, &i, "--rounds", &v)) {
			c->rounds = (uint32_t)cli_int("--rounds", v, 1, 100000);
		} else {
			cli_unknown("bench checkpoint", argv[i]);
		}
	}
	return true;
}

/* The env, the thread count, the backend list, the files, the ring's
 * capacity: everything checked before spending a minute. Dies on bad
 * input. */
static void ckb_resolve(struct ckbench *c)
{
	char tmp[128], *save = NULL;

	cli_env(c->env, &c->spec);
	if (c->threads == UINT32_MAX) {
		/* Leave one CPU to the checkpoint writer and the kernel. */
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = n > 1 ? (uint32_t)(n - 1) : 1;
	}
	if (c->spec.act_kind != SR_SPACE_DISCRETE)
		cli_die("bench checkpoint: --env must have a discrete action space (got '%s')",
			c->spec.id);
	snprintf(tmp, sizeof(tmp), "%s", c->backends);
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int b = bench_ckpt_backend_parse(t);
		if (b < 0 || b == SR_CKPT_BACKEND_AUTO)
			cli_die("--backends: unknown backend '%s' (uring, pwrite, sync)", t);
		if (c->nb == 3)
			cli_die("--backends: at most 3 entries");
		c->order[c->nb++] = b;
	}
	if (!c->nb)
		cli_die("--backends: empty list");
	if (!c->dir) {
		c->dir = getenv("TMPDIR");
		if (!c->dir || !c->dir[0])
			c->dir = "/var/tmp";
	}
	snprintf(c->path, sizeof(c->path), "%s/stepring-bench-%ld.ckpt", c->dir, (long)getpid());
	snprintf(c->plain, sizeof(c->plain), "%s/stepring-bench-%ld.plain", c->dir,
		 (long)getpid());
	if (access(c->dir, W_OK) < 0)
		cli_die("--dir: cannot write to '%s': %s", c->dir, strerror(errno));

	/* Ring capacity: a power of two whose saved window is >= replay_mib. */
	c->slot = (size_t)c->spec.obs_dim * 4 + sr_env_action_size(&c->spec) + 4 + 3 + 4 + 8;
	c->cap = 1;
	while (c->cap * c->slot < c->replay_mib * (1ull << 20) || c->cap < 4ull * c->envs)
		c->cap <<= 1;
}

/* The pool, its ring filled once over; the checkpoint options. Dies on
 * failure. */
static void ckb_open(struct ckbench *c)
{
	sr_pool_opts o;
	const sr_batch *b;

	sr_pool_opts_init(&o);
	o.env = c->env;
	o.num_envs = c->envs;
	o.num_threads = c->threads;
	o.ring_capacity = c->cap;
	o.flags |= SR_POOL_F_SEED;
	o.seed = 1;
	if (sr_pool_create(&o, &c->p))
		cli_die("bench checkpoint: %s", sr_last_error());
	c->acts = malloc(c->envs * sizeof(int32_t));
	if (!c->acts || sr_pool_reset(c->p, &b))
		cli_die("bench checkpoint: reset failed: %s", sr_last_error());
	if (!c->json)
		fprintf(stderr, "filling a %llu-slot ring (%.0f MiB window) with %s x %u...\n",
			(unsigned long long)c->cap, (double)(c->cap * c->slot) / (1 << 20),
			c->spec.id, c->envs);
	while (sr_ring_head(cli_pool_info(c->p).ring) < c->cap)
		step(c->p, c->acts, c->envs, c->spec.act_n);

	sr_ckpt_opts_init(&c->co);
	c->co.flags = SR_CKPT_F_BACKEND | SR_CKPT_F_CHUNK |
		      (c->nice != 99 ? SR_CKPT_F_NICE : 0) |
		      (c->replay_mib ? SR_CKPT_F_REPLAY : 0) | (c->direct ? SR_CKPT_F_DIRECT : 0);
	c->co.chunk_size = c->chunk_mib << 20;
	c->co.nice = c->nice;
}

/* Throughput with the pool idle: an io_uring checkpoint against a plain
 * sequential write of the same bytes, same directory. The first checkpoint
 * also maps and first-touches the staging memory (kept for the next ones):
 * timed apart. */
static void ckb_idle_throughput(struct ckbench *c)
{
	sr_ckpt_status st;

	if (!c->json)
		fprintf(stderr, "throughput (pool idle)...\n");
	c->co.backend = SR_CKPT_BACKEND_URING;
	for (int k = 0; k < 2; k++) {
		if (sr_pool_checkpoint(c->p, c->path, &c->co) ||
		    sr_pool_checkpoint_wait(c->p, &st)) {
			fprintf(stderr, "stepring: bench checkpoint: %s\n", sr_last_error());
			c->failed++;
			break;
		}
		if (k == 0)
			c->first_s = (double)st.ns_write / 1e9;
		c->idle_mibs = (double)st.bytes / (1 << 20) / ((double)st.ns_write / 1e9);
		c->ckpt_bytes = st.bytes;
	}
	unlink(c->path);
	c->plain_mibs = plain_write(c->plain, c->ckpt_bytes);
	if (c->plain_mibs < 0) {
		fprintf(stderr, "stepring: bench checkpoint: plain write failed: %s\n",
			sr_strerror((int)c->plain_mibs));
		c->failed++;
	}
}

/* The baseline phase: batch latency without a checkpoint. */
static void ckb_phase_none(struct ckbench *c)
{
	c->ph[c->nph].name = "none";
	for (double t0 = now_s(); now_s() - t0 < c->seconds;) {
		uint64_t s = bench_now_ns();
		step(c->p, c->acts, c->envs, c->spec.act_n);
		lat_add(&c->lat, (double)(bench_now_ns() - s) / 1e3);
	}
	lat_fill(&c->lat, &c->ph[c->nph++]);
}

/* The phase of @backend: latency of every batch while a checkpoint is in
 * flight (the iteration that starts one included); a new one starts when
 * the last one ends, for at least c->seconds. */
static void ckb_phase(struct ckbench *c, int backend)
{
	struct phase *f = &c->ph[c->nph++];
	double sum_mibs = 0, sum_w = 0, sum_snap = 0;
	bool inflight = false;
	sr_ckpt_status st;

	c->co.backend = (uint32_t)backend;
	f->name = sr_ckpt_backend_name(c->co.backend);
	if (!c->json)
		fprintf(stderr, "phase %s...\n", f->name);
	double t0 = now_s();
	for (;;) {
		bool start = !inflight && now_s() - t0 < c->seconds;
		uint64_t s;
		if (!inflight && !start)
			break;
		s = bench_now_ns();
		if (start) {
			int err = sr_pool_checkpoint(c->p, c->path, &c->co);
			if (err) {
				f->err = err;
				fprintf(stderr, "stepring: bench checkpoint: %s\n", sr_last_error());
				break;
			}
			inflight = true;
		}
		step(c->p, c->acts, c->envs, c->spec.act_n);
		lat_add(&c->lat, (double)(bench_now_ns() - s) / 1e3);
		if (sr_pool_checkpoint_poll(c->p, NULL) == -EINPROGRESS)
			continue;
		inflight = false;
		sr_pool_checkpoint_wait(c->p, &st);
		if (st.result) {
			f->err = st.result;
			fprintf(stderr, "stepring: bench checkpoint: %s failed: %s\n", f->name,
				sr_strerror(st.result));
			break;
		}
		f->ckpts++;
		f->backend_used = st.backend;
		f->dropped += st.replay_dropped;
		c->ckpt_bytes = st.bytes;
		sum_mibs += (double)st.bytes / (1 << 20) / ((double)st.ns_write / 1e9);
		sum_w += (double)st.ns_write / 1e9;
		sum_snap += (double)st.ns_snapshot / 1e3;
	}
	lat_fill(&c->lat, f);
	if (f->ckpts) {
		f->mib_per_s = sum_mibs / (double)f->ckpts;
		f->write_s = sum_w / (double)f->ckpts;
		f->snapshot_us = sum_snap / (double)f->ckpts;
	}
}

static void ckb_close(struct ckbench *c)
{
	unlink(c->path);
	c->used_threads = cli_pool_info(c->p).num_threads;
	sr_pool_destroy(c->p);
	free(c->acts);
	free(c->lat.v);
}

/* The goals: p99 during io_uring checkpoints within 10% of none, idle
 * checkpoint throughput >= 0.8 of a plain write. */
struct ckb_goals {
	const struct phase *ur; /* the uring phase, if run */
	double p99_ratio, tp_ratio;
	bool p99_met, tp_met;
};

static struct ckb_goals ckb_goals(struct ckbench *c)
{
	const struct phase *base = &c->ph[0];
	struct ckb_goals g = {0};

	for (int i = 1; i < c->nph; i++)
		if (!strcmp(c->ph[i].name, "uring"))
			g.ur = &c->ph[i];
	g.p99_ratio = g.ur && base->p99_us > 0 ? g.ur->p99_us / base->p99_us : 0;
	g.tp_ratio = c->plain_mibs > 0 ? c->idle_mibs / c->plain_mibs : 0;
	/* A goal is only met by runs that happened: a phase whose every
	 * checkpoint failed has no latency to compare. */
	for (int i = 1; i < c->nph; i++)
		c->failed += c->ph[i].err != 0;
	g.p99_met = g.ur && !g.ur->err && g.ur->ckpts > 0 && base->samples > 0 &&
		    g.p99_ratio <= 1.1;
	g.tp_met = c->idle_mibs > 0 && c->plain_mibs > 0 && g.tp_ratio >= 0.8;
	return g;
}

static void ckb_print_json(const struct ckbench *c, const struct ckb_goals *g)
{
	const struct phase *ph = c->ph;

	printf("{\"bench\":\"checkpoint\",\"env\":\"%s\",\"envs\":%u,\"threads\":%u,"
	       "\"ring_capacity\":%llu,\"replay_mib\":%.1f,\"checkpoint_bytes\":%llu,"
	       "\"chunk_mib\":%llu,\"seconds\":%g,\"phases\":[",
	       c->spec.id, c->envs, c->used_threads, (unsigned long long)c->cap,
	       c->replay_mib ? (double)(c->cap * c->slot) / (1 << 20) : 0.0,
	       (unsigned long long)c->ckpt_bytes, (unsigned long long)c->chunk_mib, c->seconds);
	for (int i = 0; i < c->nph; i++)
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
	       c->idle_mibs, c->plain_mibs, g->tp_ratio, c->first_s, g->p99_ratio,
	       g->p99_met ? "true" : "false", g->tp_ratio, g->tp_met ? "true" : "false");
	printf("\"build\":\"%s\",", sr_build_info());
	bench_json_machine(stdout);
	printf("}\n");
}

static void ckb_print_table(const struct ckbench *c, const struct ckb_goals *g)
{
	const struct phase *ph = c->ph;

	printf("pool: %s x %u envs, %u threads, ring %llu slots; checkpoint %.1f MiB "
	       "(replay window %.0f MiB)\n",
	       c->spec.id, c->envs, c->used_threads, (unsigned long long)c->cap,
	       (double)c->ckpt_bytes / (1 << 20),
	       c->replay_mib ? (double)(c->cap * c->slot) / (1 << 20) : 0.0);
	printf("%-8s %10s %10s %12s %8s %6s %10s %9s %12s %9s\n", "during", "p50_us", "p99_us",
	       "max_us", "batches", "ckpts", "MiB/s", "write_s", "snapshot_us", "dropped");
	for (int i = 0; i < c->nph; i++)
		printf("%-8s %10.1f %10.1f %12.1f %8llu %6llu %10.1f %9.2f %12.1f %9llu\n",
		       ph[i].name, ph[i].p50_us, ph[i].p99_us, ph[i].max_us,
		       (unsigned long long)ph[i].samples, (unsigned long long)ph[i].ckpts,
		       ph[i].mib_per_s, ph[i].write_s, ph[i].snapshot_us,
		       (unsigned long long)ph[i].dropped);
	printf("throughput, pool idle: io_uring checkpoint %.1f MiB/s, plain sequential "
	       "write %.1f MiB/s: ratio %.2f (goal >= 0.8: %s); first checkpoint "
	       "(staging memory first touched) %.2f s\n",
	       c->idle_mibs, c->plain_mibs, g->tp_ratio, g->tp_met ? "met" : "NOT met",
	       c->first_s);
	if (g->ur)
		printf("p99 during io_uring checkpoints / without: %.2f (goal <= 1.1: %s)\n",
		       g->p99_ratio, g->p99_met ? "met" : "NOT met");
}

/* ---- --procs: a process pool's checkpoint against a thread pool's -------- */

static sr_pool *ckp_pool(const struct ckbench *c, bool procs)
{
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;

	sr_pool_opts_init(&o);
	o.env = c->env;
	o.num_envs = c->envs;
	o.num_threads = c->threads;
	o.bind = SR_BIND_NONE; /* the same for both kinds (process workers are not bound) */
	o.flags = SR_POOL_F_SEED | (procs ? SR_POOL_F_PROCS : 0) |
		  (procs && c->proc_inline ? SR_POOL_F_PROC_INLINE : 0);
	o.seed = 1;
	if (sr_pool_create(&o, &p))
		cli_die("bench checkpoint --procs: %s", sr_last_error());
	if (sr_pool_reset(p, &b))
		cli_die("bench checkpoint --procs: reset: %s", sr_last_error());
	return p;
}

static double median_of(double *v, uint32_t n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int ckb_procs(struct ckbench *c)
{
	const uint32_t R = c->rounds;
	sr_pool *pool[2];
	double *snap[2], *tot[2], med_s[2], med_t[2], lo_s[2], hi_s[2], lo_t[2], hi_t[2];
	uint64_t bytes[2] = {0, 0};
	sr_ckpt_opts co;
	const char *kname[2] = {"threads", c->proc_inline ? "processes (inline 0)" : "processes"};

	if (c->threads == UINT32_MAX)
		c->threads = 2;
	pool[0] = ckp_pool(c, false);
	pool[1] = ckp_pool(c, true);
	c->acts = malloc(c->envs * sizeof(int32_t));
	for (int k = 0; k < 2; k++) {
		snap[k] = calloc(R, sizeof(double));
		tot[k] = calloc(R, sizeof(double));
		if (!c->acts || !snap[k] || !tot[k])
			cli_die("bench checkpoint: out of memory");
	}
	sr_ckpt_opts_init(&co);
	co.flags = SR_CKPT_F_BACKEND;
	co.backend = SR_CKPT_BACKEND_SYNC;
	if (!c->json)
		fprintf(stderr, "%u rounds: a synchronous checkpoint of %s x %u on %u threads, "
				"then on %u %s...\n",
			R, c->spec.id, c->envs, c->threads, c->threads, kname[1]);
	for (uint32_t r = 0; r < R; r++) {
		/* Some steps between checkpoints (the same actions for both). */
		for (int s = 0; s < 20; s++) {
			uint64_t keep = rng_state;

			step(pool[0], c->acts, c->envs, c->spec.act_n);
			rng_state = keep;
			step(pool[1], c->acts, c->envs, c->spec.act_n);
		}
		for (int k = 0; k < 2; k++) {
			int kk = (r & 1) ? 1 - k : k; /* alternate who goes first */
			sr_ckpt_status st;
			double t0 = now_s();

			if (sr_pool_checkpoint(pool[kk], c->path, &co) ||
			    sr_pool_checkpoint_wait(pool[kk], &st))
				cli_die("bench checkpoint --procs: %s checkpoint: %s", kname[kk],
					sr_last_error());
			tot[kk][r] = (now_s() - t0) * 1e3;
			snap[kk][r] = (double)st.ns_snapshot / 1e3;
			bytes[kk] = st.bytes;
		}
	}
	for (int k = 0; k < 2; k++) {
		med_s[k] = median_of(snap[k], R);
		lo_s[k] = snap[k][0];
		hi_s[k] = snap[k][R - 1];
		med_t[k] = median_of(tot[k], R);
		lo_t[k] = tot[k][0];
		hi_t[k] = tot[k][R - 1];
	}
	if (c->json) {
		printf("{\"what\":\"bench checkpoint --procs\",\"env\":\"%s\",\"envs\":%u,"
		       "\"workers\":%u,\"inline0\":%s,\"rounds\":%u",
		       c->spec.id, c->envs, c->threads, c->proc_inline ? "true" : "false", R);
		for (int k = 0; k < 2; k++)
			printf(",\"%s\":{\"snapshot_us\":%.1f,\"snapshot_us_min\":%.1f,"
			       "\"snapshot_us_max\":%.1f,\"checkpoint_ms\":%.3f,"
			       "\"checkpoint_ms_min\":%.3f,\"checkpoint_ms_max\":%.3f,\"bytes\":%llu}",
			       k ? "procs" : "threads", med_s[k], lo_s[k], hi_s[k], med_t[k], lo_t[k],
			       hi_t[k], (unsigned long long)bytes[k]);
		printf(",\"snapshot_ratio\":%.2f,\"checkpoint_ratio\":%.2f}\n",
		       med_s[1] / med_s[0], med_t[1] / med_t[0]);
	} else {
		printf("%s x %u, %u workers, %u rounds (medians [min-max]), sync backend, no "
		       "replay window:\n",
		       c->spec.id, c->envs, c->threads, R);
		printf("%-22s %28s %30s %10s\n", "pool", "snapshot (loop stall) us",
		       "whole checkpoint ms", "bytes");
		for (int k = 0; k < 2; k++)
			printf("%-22s %10.1f [%7.1f-%7.1f] %10.3f [%7.3f-%7.3f] %10llu\n", kname[k],
			       med_s[k], lo_s[k], hi_s[k], med_t[k], lo_t[k], hi_t[k],
			       (unsigned long long)bytes[k]);
		printf("processes / threads: snapshot %.2fx, whole checkpoint %.2fx\n",
		       med_s[1] / med_s[0], med_t[1] / med_t[0]);
	}
	unlink(c->path);
	for (int k = 0; k < 2; k++) {
		sr_pool_destroy(pool[k]);
		free(snap[k]);
		free(tot[k]);
	}
	free(c->acts);
	return 0;
}

int bench_checkpoint(int argc, char **argv)
{
	static struct ckbench c; /* 8 KiB of paths: off the stack */
	struct ckb_goals g;

	memset(&c, 0, sizeof(c));
	c.env = "CartPole-v1";
	c.backends = "uring,pwrite,sync";
	c.envs = 1024;
	c.threads = UINT32_MAX;
	c.replay_mib = 1024;
	c.chunk_mib = 4;
	c.seconds = 3;
	c.nice = 99;
	c.rounds = 21;
	if (!ckb_parse(&c, argc, argv))
		return 0;
	if (c.procs) {
		bool threads_given = c.threads != UINT32_MAX;

		c.replay_mib = 0;
		ckb_resolve(&c);
		if (!threads_given)
			c.threads = 2;
		return ckb_procs(&c);
	}
	ckb_resolve(&c);
	ckb_open(&c);
	ckb_idle_throughput(&c);
	ckb_phase_none(&c);
	for (int k = 0; k < c.nb; k++)
		ckb_phase(&c, c.order[k]);
	ckb_close(&c);
	g = ckb_goals(&c);
	if (c.json)
		ckb_print_json(&c, &g);
	else
		ckb_print_table(&c, &g);
	if (c.failed) {
		fprintf(stderr, "stepring: bench checkpoint: %d part%s failed (err in the "
				"output); the figures are incomplete\n",
			c.failed, c.failed == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

/*
 * `stepring top [NAME]`: a live view of a running pool, from another
 * process.
 *
 * DESIGN
 * A pool created with SR_POOL_F_RING_NAME publishes its statistics block
 * (include/stepring/stats.h) in the shared-memory segment "NAME.stats".
 * top reads it with pread(2), never through a mapping: nothing it does can
 * disturb the pool, and a segment truncated under it (by its owner, or a
 * planted one) gives a short read, not SIGBUS. Only segments owned by
 * top's own effective uid are read: another user's block is not trusted,
 * not even by root (a user could plant "x.stats" for root's top to pick).
 * Each refresh takes a snapshot:
 *   - the aggregate fields under the block's seqlock: pread `seq`, pread
 *     the fields, pread `seq` again; retry when the two differ or the
 *     first was odd (an update was in progress). Each pread is a system
 *     call, a full barrier for this process, and the kernel's copy reads
 *     the writer's stores in the order the writer's release fences give
 *     them, as a load from a mapping would;
 *   - the per-worker counters in one pread after that: they are
 *     monotonic 8-byte words, written with relaxed atomics, so a value may
 *     be a little stale but is never torn.
 * Rates are differences between two snapshots over the block's own clock
 * (now_ns), so they do not depend on when top happens to wake up.
 *
 * The pool has ended, and top exits with status 0, when the block says
 * SR_STATS_STATE_ENDED, when the segment name is gone (the pool unlinks it
 * on destroy), or when nobody holds the block's creator lock any more (a
 * crash; the lock works across PID namespaces, a pid does not).
 *
 * Output: with stdout on a terminal, the screen is redrawn in place with
 * ANSI escapes; otherwise (or with --plain) one line per refresh.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "stepring.h"
#include "stepring/stats.h"

int cmd_top(int argc, char **argv);

#define SEG_SUFFIX ".stats"
#define SHM_DIR "/dev/shm"

struct snap {
	sr_stats_shm agg; /* aggregate fields; workers[] not filled */
	sr_stats_worker w[SR_STATS_MAX_WORKERS];
	uint32_t nw;
};

struct top {
	char seg[256]; /* shm name with the leading '/' */
	char name[256]; /* ring name as the user knows it */
	int fd;                  /* open read-only, never mapped */
	sr_stats_shm id;         /* identity fields read at attach */
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring top [NAME] [--interval S] [--once] [--count N] [--plain]\n"
		"\n"
		"Live view of a running pool's statistics (steps/s, batch latency P50/P99,\n"
		"per-worker utilisation, ring fill, checkpoint state), read-only from shared\n"
		"memory. NAME is the pool's ring name (its statistics are in NAME.stats);\n"
		"without NAME, the only running pool is used. Exits 0 when the pool ends.\n"
		"\n"
		"  --interval S  seconds between refreshes (default 1)\n"
		"  --once        print one snapshot and exit\n"
		"  --count N     exit after N refreshes\n"
		"  --plain       one line per refresh even on a terminal\n");
}

/* "name", "/name", "name.stats" -> seg "/name.stats", name "name". */
static void set_names(struct top *t, const char *arg)
{
	size_t n;

	while (*arg == '/')
		arg++;
	n = strlen(arg);
	if (n > strlen(SEG_SUFFIX) && !strcmp(arg + n - strlen(SEG_SUFFIX), SEG_SUFFIX))
		n -= strlen(SEG_SUFFIX);
	if (n == 0 || n > 200 || memchr(arg, '/', n))
		cli_die("top: '%s' is not a valid pool name", arg);
	snprintf(t->name, sizeof(t->name), "%.*s", (int)n, arg);
	snprintf(t->seg, sizeof(t->seg), "/%.*s%s", (int)n, arg, SEG_SUFFIX);
}

/* Read @len bytes at @off of the block: 0, or -ENODATA when the segment
 * was truncated under us, -errno. */
static int rd(const struct top *t, void *buf, size_t len, size_t off)
{
	ssize_t got = pread(t->fd, buf, len, (off_t)off);

	if (got < 0)
		return -errno;
	return (size_t)got == len ? 0 : -ENODATA;
}

/* Open the segment read-only and check it. 0 or -errno with *why set. */
static int attach(struct top *t, const char **why)
{
	struct stat st;
	int fd;

	t->fd = -1;
	fd = shm_open(t->seg, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0) {
		int err = -errno;

		*why = err == -ENOENT ? "no such segment"
		       : err == -EACCES ? "permission denied (another user's segment)"
					: strerror(-err);
		return err;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		*why = "not a regular shared-memory file";
		return -EPROTO;
	}
	if (st.st_uid != geteuid()) {
		close(fd);
		*why = "owned by another user (not trusted)";
		return -EPERM;
	}
	if ((size_t)st.st_size < sizeof(sr_stats_shm)) {
		close(fd);
		*why = "segment too small for a statistics block";
		return -EPROTO;
	}
	t->fd = fd;
	if (rd(t, &t->id, offsetof(sr_stats_shm, workers), 0)) {
		*why = "segment truncated while reading it";
		goto err_close;
	}
	if (t->id.magic != SR_STATS_MAGIC) {
		*why = "not a stepring statistics block (bad magic)";
		goto err_close;
	}
	if (t->id.version != SR_STATS_VERSION) {
		*why = "statistics block of another format version";
		goto err_close;
	}
	return 0;

err_close:
	close(t->fd);
	t->fd = -1;
	return -EPROTO;
}

static void detach(struct top *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

/* Does the pool still hold the block's creator lock? A block whose name
 * is gone belongs to a pool that ended; unknown: assume alive. */
static bool pool_alive(const struct top *t)
{
	sr_ring_info info = {.size = sizeof(info)};
	int err = sr_ring_probe(t->seg, &info);

	if (err)
		return err != -ENOENT;
	return info.flags & SR_RING_INFO_ALIVE;
}

static bool seg_exists(const char *seg)
{
	int fd = shm_open(seg, O_RDONLY, 0);

	if (fd < 0)
		return errno != ENOENT;
	close(fd);
	return true;
}

/* Seqlock read of the aggregate fields, then the workers. Returns false if
 * no consistent copy was had in many tries (a writer that died mid-update
 * leaves seq odd forever) or the segment was truncated. */
static bool snapshot(const struct top *t, struct snap *out)
{
	const size_t agg = offsetof(sr_stats_shm, workers);
	bool ok = false;

	for (int tries = 0; tries < 1000 && !ok; tries++) {
		uint64_t s1, s2;

		if (rd(t, &s1, sizeof(s1), offsetof(sr_stats_shm, seq)))
			return false;
		if (s1 & 1) {
			struct timespec ts = {0, 1000};

			nanosleep(&ts, NULL);
			continue;
		}
		if (rd(t, &out->agg, agg, 0) ||
		    rd(t, &s2, sizeof(s2), offsetof(sr_stats_shm, seq)))
			return false;
		ok = s2 == s1;
	}
	out->nw = out->agg.num_threads < SR_STATS_MAX_WORKERS ? out->agg.num_threads
							      : SR_STATS_MAX_WORKERS;
	if (out->nw && rd(t, out->w, out->nw * sizeof(sr_stats_worker), agg))
		return false;
	return ok;
}

/* Every live pool's name (auto-find). Returns the count; names in @names. */
static int find_live(char names[][256], int max)
{
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct top t = {0};
		const char *why;

		if (len <= strlen(SEG_SUFFIX) ||
		    strcmp(e->d_name + len - strlen(SEG_SUFFIX), SEG_SUFFIX) || len > 200)
			continue;
		/* Names with bytes a terminal would interpret are not ours. */
		if (strspn(e->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				      "0123456789._-+=@,:") != len)
			continue;
		set_names(&t, e->d_name);
		/* attach() refuses other users' blocks: only ours are found. */
		if (attach(&t, &why) == 0) {
			if (t.id.state == SR_STATS_STATE_RUNNING && pool_alive(&t) && n < max)
				snprintf(names[n++], 256, "%s", t.name);
			detach(&t);
		}
	}
	closedir(d);
	return n;
}

static const char *ckpt_name(uint32_t s)
{
	switch (s) {
	case SR_CKPT_STATE_IDLE:
		return "idle";
	case SR_CKPT_STATE_SNAPSHOT:
		return "snapshot";
	case SR_CKPT_STATE_WRITING:
		return "writing";
	case SR_CKPT_STATE_FAILED:
		return "FAILED";
	}
	return "?";
}

static void human(char *buf, size_t len, double v)
{
	if (v >= 1e9)
		snprintf(buf, len, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.0f", v);
}

/* Rates between @prev (NULL: since start) and @cur. */
struct rates {
	double steps_per_sec, avg_steps_per_sec;
	double util[SR_STATS_MAX_WORKERS], wsps[SR_STATS_MAX_WORKERS];
	double util_mean;
	double pending_frac, replay_frac;
	double uptime_s;
};

static void compute(const struct snap *prev, const struct snap *cur, struct rates *r)
{
	const sr_stats_shm *a = &cur->agg;
	double dt, up = a->now_ns > a->start_ns ? (double)(a->now_ns - a->start_ns) / 1e9 : 0;
	double sum = 0;

	memset(r, 0, sizeof(*r));
	r->uptime_s = up;
	r->avg_steps_per_sec = up > 0 ? (double)a->steps / up : 0;
	if (prev && cur->agg.now_ns > prev->agg.now_ns) {
		dt = (double)(cur->agg.now_ns - prev->agg.now_ns) / 1e9;
		r->steps_per_sec = (double)(a->steps - prev->agg.steps) / dt;
	} else {
		dt = up;
		r->steps_per_sec = prev ? 0 : r->avg_steps_per_sec;
	}
	for (uint32_t i = 0; i < cur->nw; i++) {
		uint64_t busy = cur->w[i].ns_busy, idle = cur->w[i].ns_idle, steps = cur->w[i].steps;

		if (prev && i < prev->nw) {
			busy -= prev->w[i].ns_busy;
			idle -= prev->w[i].ns_idle;
			steps -= prev->w[i].steps;
		}
		r->util[i] = busy + idle ? (double)busy / (double)(busy + idle) : 0;
		r->wsps[i] = dt > 0 ? (double)steps / dt : 0;
		sum += r->util[i];
	}
	r->util_mean = cur->nw ? sum / cur->nw : 0;
	if (a->ring_capacity) {
		uint64_t pend = a->ring_head >= a->ring_cursor ? a->ring_head - a->ring_cursor : 0;
		uint64_t live = a->ring_head < a->ring_capacity ? a->ring_head : a->ring_capacity;

		r->pending_frac = (double)pend / (double)a->ring_capacity;
		r->replay_frac = (double)live / (double)a->ring_capacity;
	}
}

/* Process workers: every worker a process, or worker 0 inline. */
static const char *kind_name(const sr_stats_shm *a)
{
	return a->worker_kind == SR_STATS_WORKERS_PROCS_INLINE ? "inline" : "all";
}

static void print_plain(FILE *f, const struct top *t, const struct snap *s, const struct rates *r)
{
	const sr_stats_shm *a = &s->agg;

	fprintf(f,
		"top %s: t=%.1fs steps=%llu steps/s=%.0f p50_us=%.1f p99_us=%.1f episodes=%llu "
		"return=%.2f util=%.0f%% ring_pending=%.0f%% replay_fill=%.0f%% ckpt=%s/%llu "
		"nonfinite=%llu ",
		t->name, r->uptime_s, (unsigned long long)a->steps, r->steps_per_sec, a->p50_us,
		a->p99_us, (unsigned long long)a->episodes, a->mean_return, 100 * r->util_mean,
		100 * r->pending_frac, 100 * r->replay_frac, ckpt_name(a->ckpt_state),
		(unsigned long long)a->ckpt_count, (unsigned long long)a->nonfinite_rows);
	if (a->worker_kind != SR_STATS_WORKERS_THREADS)
		fprintf(f, "procs=%s faults=%llu restarts=%llu fault_rows=%llu ", kind_name(a),
			(unsigned long long)a->faults, (unsigned long long)a->restarts,
			(unsigned long long)a->fault_rows);
	fputs("workers=", f);
	for (uint32_t i = 0; i < s->nw; i++)
		fprintf(f, "%s%.0f%%", i ? "," : "", 100 * r->util[i]);
	fputc('\n', f);
	fflush(f);
}

static void print_screen(FILE *f, const struct top *t, const struct snap *s, const struct rates *r,
			 bool ansi)
{
	const sr_stats_shm *a = &s->agg;
	char now[32], avg[32], buf[32];

	human(now, sizeof(now), r->steps_per_sec);
	human(avg, sizeof(avg), r->avg_steps_per_sec);
	if (ansi)
		fputs("\033[H\033[2J", f); /* cursor home, clear screen */
	fprintf(f, "stepring top: pool '%s' (pid %lld)   env %.64s   %u envs, %u %s, batch %u, %s\n",
		t->name, (long long)a->pid, a->env_id, a->num_envs, a->num_threads,
		a->worker_kind == SR_STATS_WORKERS_THREADS ? "threads" : "worker processes",
		a->batch_size, a->mode ? "async" : "sync");
	fprintf(f, "uptime %8.1f s   steps %llu   steps/s %s (avg %s)\n", r->uptime_s,
		(unsigned long long)a->steps, now, avg);
	fprintf(f, "batch latency   p50 %.1f us   p99 %.1f us   batches %llu\n", a->p50_us, a->p99_us,
		(unsigned long long)a->batches);
	fprintf(f, "episodes %llu   mean return %.2f   mean length %.1f\n",
		(unsigned long long)a->episodes, a->mean_return, a->mean_length);
	fprintf(f, "ring  capacity %llu   pending %llu (%.0f%%)   replay fill %.0f%%\n",
		(unsigned long long)a->ring_capacity,
		(unsigned long long)(a->ring_head >= a->ring_cursor ? a->ring_head - a->ring_cursor : 0),
		100 * r->pending_frac, 100 * r->replay_frac);
	fprintf(f, "checkpoint  %s   completed %llu   last %.1f MiB\n", ckpt_name(a->ckpt_state),
		(unsigned long long)a->ckpt_count, (double)a->ckpt_bytes / (1024.0 * 1024.0));
	if (a->nonfinite_rows)
		fprintf(f, "non-finite rows %llu (NaN or infinity in obs or reward; the first from "
			"env %llu)\n", (unsigned long long)a->nonfinite_rows,
			(unsigned long long)(a->nonfinite_env ? a->nonfinite_env - 1 : 0));
	if (a->worker_kind != SR_STATS_WORKERS_THREADS)
		fprintf(f, "processes   %s   faults %llu   restarts %llu   fault rows %llu\n",
			kind_name(a), (unsigned long long)a->faults,
			(unsigned long long)a->restarts, (unsigned long long)a->fault_rows);
	fprintf(f, "\n%6s %5s %10s %5s\n", "worker", "cpu", "steps/s", "util");
	for (uint32_t i = 0; i < s->nw; i++) {
		char bar[21];
		int fill = (int)(r->util[i] * 20 + 0.5);

		for (int k = 0; k < 20; k++)
			bar[k] = k < fill ? '#' : '.';
		bar[20] = '\0';
		human(buf, sizeof(buf), r->wsps[i]);
		if (s->w[i].cpu == UINT64_MAX)
			fprintf(f, "%6u %5s %10s %4.0f%% [%s]\n", i, "-", buf, 100 * r->util[i], bar);
		else
			fprintf(f, "%6u %5llu %10s %4.0f%% [%s]\n", i,
				(unsigned long long)s->w[i].cpu, buf, 100 * r->util[i], bar);
	}
	fflush(f);
}

/* Has the pool ended? Sets *why. */
static bool ended(const struct top *t, const char **why)
{
	uint32_t state;

	if (rd(t, &state, sizeof(state), offsetof(sr_stats_shm, state))) {
		*why = "the pool's statistics segment was truncated";
		return true;
	}
	if (state == SR_STATS_STATE_ENDED) {
		*why = "the pool ended";
		return true;
	}
	if (!seg_exists(t->seg)) {
		*why = "the pool's statistics segment is gone";
		return true;
	}
	if (!pool_alive(t)) {
		*why = "the pool's process is gone";
		return true;
	}
	return false;
}

static void sleep_s(double s)
{
	struct timespec ts;

	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !stop_flag)
		;
}

int cmd_top(int argc, char **argv)
{
	struct top t = {.fd = -1};
	struct snap *prev, *cur, *tmp;
	struct rates r;
	const char *val = NULL, *name = NULL, *why = NULL;
	double interval = 1.0;
	long long count = 0;
	bool once = false, plain = false, ansi, have_prev = false;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--interval", &val)) {
			interval = cli_double("--interval", val, 0.01, 3600);
		} else if (cli_opt(argc, argv, &i, "--count", &val)) {
			count = cli_int("--count", val, 1, 1000000000);
		} else if (cli_opt(argc, argv, &i, "--once", NULL)) {
			once = true;
		} else if (cli_opt(argc, argv, &i, "--plain", NULL)) {
			plain = true;
		} else if (argv[i][0] == '-') {
			cli_unknown("top", argv[i]);
		} else if (!name) {
			name = argv[i];
		} else {
			cli_die("top: one pool name at most ('%s' and '%s')", name, argv[i]);
		}
	}
	if (name) {
		set_names(&t, name);
	} else {
		char live[8][256];
		int n = find_live(live, 8);

		if (n == 0)
			cli_die("top: no running pool publishes statistics (name one, or create "
				"the pool with a ring name)");
		if (n > 1)
			cli_die("top: %d pools are running (%s, %s%s); name one", n, live[0], live[1],
				n > 2 ? ", ..." : "");
		set_names(&t, live[0]);
	}
	err = attach(&t, &why);
	if (err)
		cli_die("top: cannot attach to pool '%s' (%s): %s", t.name, t.seg + 1, why);

	prev = calloc(1, sizeof(*prev));
	cur = calloc(1, sizeof(*cur));
	if (!prev || !cur)
		cli_die("top: out of memory");
	ansi = !plain && !once && isatty(STDOUT_FILENO);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	for (long long n = 0;; n++) {
		bool done = ended(&t, &why);

		if (!snapshot(&t, cur)) {
			/* A writer stuck mid-update: only a dead owner does that. */
			if (done)
				break;
			fprintf(stderr, "stepring: top: statistics of '%s' are not settling; retrying\n",
				t.name);
		} else {
			compute(have_prev ? prev : NULL, cur, &r);
			if (ansi || (once && !plain))
				print_screen(stdout, &t, cur, &r, ansi);
			else
				print_plain(stdout, &t, cur, &r);
			tmp = prev;
			prev = cur;
			cur = tmp;
			have_prev = true;
		}
		if (done || once || stop_flag || (count && n + 1 >= count))
			break;
		sleep_s(interval);
	}
	if (why && !stop_flag && ended(&t, &why))
		printf("top %s: %s\n", t.name, why);
	free(prev);
	free(cur);
	detach(&t);
	return 0;
}

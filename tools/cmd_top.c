/*
 * `stepring top [NAME]`: a live view of a running pool, from another
 * process.
 *
 * DESIGN
 * The block is read with the shared reader (tools/stats_read.c: pread,
 * never a mapping; only our uid's blocks; the seqlock snapshot; liveness
 * by the creator lock). Each refresh takes a snapshot; rates are
 * differences between two snapshots over the block's own clock.
 *
 * The pool has ended, and top exits with status 0, when the block says
 * SR_STATS_STATE_ENDED, when the segment name is gone (the pool unlinks it
 * on destroy), or when nobody holds the block's creator lock any more (a
 * crash; the lock works across PID namespaces, a pid does not).
 *
 * Output: with stdout on a terminal, the screen is redrawn in place with
 * ANSI escapes; otherwise (or with --plain) one line per refresh. With
 * --out FILE, each refresh also appends one JSON line (stepring.top/1) to
 * FILE: the time series that tools/plot_timeline.py draws.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "stats_read.h"
#include "stepring.h"

int cmd_top(int argc, char **argv);

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
		"                    [--out FILE.jsonl]\n"
		"\n"
		"Live view of a running pool's statistics (steps/s, batch latency P50/P99,\n"
		"per-worker utilisation, ring fill, checkpoint state), read-only from shared\n"
		"memory. NAME is the pool's ring name (its statistics are in NAME.stats);\n"
		"without NAME, the only running pool is used. Exits 0 when the pool ends.\n"
		"\n"
		"  --interval S  seconds between refreshes (default 1)\n"
		"  --once        print one snapshot and exit\n"
		"  --count N     exit after N refreshes\n"
		"  --plain       one line per refresh even on a terminal\n"
		"  --out FILE    also append one JSON line per refresh to FILE (a time series;\n"
		"                plot: /usr/bin/python3 tools/plot_timeline.py FILE)\n");
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

/* Process workers: every worker a process, or worker 0 inline. */
static const char *kind_name(const sr_stats_shm *a)
{
	return a->worker_kind == SR_STATS_WORKERS_PROCS_INLINE ? "inline" : "all";
}

static void print_plain(FILE *f, const struct stats_src *t, const struct stats_snap *s,
			 const struct stats_rates *r)
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

static void print_screen(FILE *f, const struct stats_src *t, const struct stats_snap *s,
			 const struct stats_rates *r,
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
	struct stats_src t = {.fd = -1};
	struct stats_snap *prev, *cur, *tmp;
	struct stats_rates r;
	const char *val = NULL, *name = NULL, *why = NULL, *out_path = NULL;
	double interval = 1.0;
	long long count = 0;
	bool once = false, plain = false, ansi, have_prev = false;
	FILE *out = NULL;
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
		} else if (cli_opt(argc, argv, &i, "--out", &val)) {
			if (!val[0])
				cli_die("--out: empty file name");
			out_path = val;
		} else if (argv[i][0] == '-') {
			cli_unknown("top", argv[i]);
		} else if (!name) {
			name = argv[i];
		} else {
			cli_die("top: one pool name at most ('%s' and '%s')", name, argv[i]);
		}
	}
	if (name) {
		if (stats_set_names(&t, name))
			cli_die("top: '%s' is not a valid pool name", name);
	} else {
		char live[8][256];
		int n = stats_find_live(live, 8);

		if (n == 0)
			cli_die("top: no running pool publishes statistics (name one, or create "
				"the pool with a ring name)");
		if (n > 1)
			cli_die("top: %d pools are running (%s, %s%s); name one", n, live[0], live[1],
				n > 2 ? ", ..." : "");
		stats_set_names(&t, live[0]);
	}
	err = stats_attach(&t, &why);
	if (err)
		cli_die("top: cannot attach to pool '%s' (%s): %s", t.name, t.seg + 1, why);
	if (out_path && !(out = fopen(out_path, "a")))
		cli_die("top: --out %s: %s", out_path, strerror(errno));

	prev = calloc(1, sizeof(*prev));
	cur = calloc(1, sizeof(*cur));
	if (!prev || !cur)
		cli_die("top: out of memory");
	ansi = !plain && !once && isatty(STDOUT_FILENO);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	for (long long n = 0;; n++) {
		bool done = stats_ended(&t, &why);

		if (!stats_snapshot(&t, cur)) {
			/* A writer stuck mid-update: only a dead owner does that. */
			if (done)
				break;
			fprintf(stderr, "stepring: top: statistics of '%s' are not settling; retrying\n",
				t.name);
		} else {
			stats_rates(have_prev ? prev : NULL, cur, &r);
			if (ansi || (once && !plain))
				print_screen(stdout, &t, cur, &r, ansi);
			else
				print_plain(stdout, &t, cur, &r);
			/* No update since the last refresh (a slow pool updates its
			 * block every 64 batches): no sample for the series. */
			if (out && (!have_prev || cur->agg.now_ns != prev->agg.now_ns)) {
				struct timeval tv;

				gettimeofday(&tv, NULL);
				stats_sample_json(out, t.name, cur, &r,
						  (double)tv.tv_sec + (double)tv.tv_usec / 1e6);
			}
			tmp = prev;
			prev = cur;
			cur = tmp;
			have_prev = true;
		}
		if (done || once || stop_flag || (count && n + 1 >= count))
			break;
		sleep_s(interval);
	}
	if (why && !stop_flag && stats_ended(&t, &why))
		printf("top %s: %s\n", t.name, why);
	if (out && fclose(out))
		fprintf(stderr, "stepring: top: --out %s: %s\n", out_path, strerror(errno));
	free(prev);
	free(cur);
	stats_detach(&t);
	return 0;
}

/*
 * Reading a pool's statistics block from another process (stats_read.h).
 *
 * DESIGN
 * A pool created with SR_POOL_F_RING_NAME publishes its statistics block
 * (include/stepring/stats.h) in the shared-memory segment "NAME.stats".
 * It is read with pread(2), never through a mapping: nothing a reader does
 * can disturb the pool, and a segment truncated under it (by its owner, or
 * a planted one) gives a short read, not SIGBUS. Only segments owned by
 * the reader's effective uid are read: another user's block is not
 * trusted, not even by root. A snapshot is:
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
 * (now_ns), so they do not depend on when the reader happens to wake up.
 *
 * A pool has ended when the block says SR_STATS_STATE_ENDED, when the
 * segment name is gone (the pool unlinks it on destroy), or when nobody
 * holds the block's creator lock any more (a crash: a stale segment, never
 * reported as live).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "machine.h" /* bench_json_escape */
#include "stats_read.h"
#include "stepring.h"

#define SHM_DIR "/dev/shm"

const char *const stats_share_names[STATS_SHARES] = {"env", "ring", "copy", "wait", "caller"};

int stats_set_names(struct stats_src *t, const char *arg)
{
	const size_t sl = strlen(STATS_SEG_SUFFIX);
	size_t n;

	while (*arg == '/')
		arg++;
	n = strlen(arg);
	if (n > sl && !strcmp(arg + n - sl, STATS_SEG_SUFFIX))
		n -= sl;
	if (n == 0 || n > STATS_NAME_MAX || memchr(arg, '/', n))
		return -EINVAL;
	snprintf(t->name, sizeof(t->name), "%.*s", (int)n, arg);
	snprintf(t->seg, sizeof(t->seg), "/%.*s%s", (int)n, arg, STATS_SEG_SUFFIX);
	return 0;
}

/* Read @len bytes at @off of the block: 0, or -ENODATA when the segment
 * was truncated under us, -errno. */
static int rd(const struct stats_src *t, void *buf, size_t len, size_t off)
{
	ssize_t got = pread(t->fd, buf, len, (off_t)off);

	if (got < 0)
		return -errno;
	return (size_t)got == len ? 0 : -ENODATA;
}

int stats_attach(struct stats_src *t, const char **why)
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
	if (t->id.version < SR_STATS_VERSION_MIN || t->id.version > SR_STATS_VERSION) {
		*why = "statistics block of another format version";
		goto err_close;
	}
	return 0;

err_close:
	close(t->fd);
	t->fd = -1;
	return -EPROTO;
}

void stats_detach(struct stats_src *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

bool stats_alive(const struct stats_src *t)
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

bool stats_ended(const struct stats_src *t, const char **why)
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
	if (!stats_alive(t)) {
		*why = "the pool's process is gone";
		return true;
	}
	return false;
}

bool stats_snapshot(const struct stats_src *t, struct stats_snap *out)
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

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

int stats_find_live(char names[][256], int max)
{
	const size_t sl = strlen(STATS_SEG_SUFFIX);
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct stats_src t = {.fd = -1};
		const char *why;

		if (len <= sl || strcmp(e->d_name + len - sl, STATS_SEG_SUFFIX) ||
		    len > STATS_NAME_MAX)
			continue;
		/* Names with bytes a terminal would interpret are not ours. */
		if (strspn(e->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				      "0123456789._-+=@,:") != len)
			continue;
		if (stats_set_names(&t, e->d_name))
			continue;
		/* attach refuses other users' blocks: only ours are found. */
		if (stats_attach(&t, &why) == 0) {
			if (t.id.state == SR_STATS_STATE_RUNNING && stats_alive(&t) && n < max)
				snprintf(names[n++], 256, "%s", t.name);
			stats_detach(&t);
		}
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), cmp_name);
	return n;
}

/* The trainer thread's shares over @dt ns (stats_read.h). */
static void shares(const sr_stats_shm *p, const sr_stats_shm *c, double dt, double *sh)
{
	double T = c->num_threads ? c->num_threads : 1, sum = 0, in_calls;

	sh[STATS_SHARE_ENV] = (double)(c->ns_env_step - p->ns_env_step) / (T * dt);
	sh[STATS_SHARE_RING] = (double)(c->ns_ring_publish - p->ns_ring_publish) / (T * dt);
	sh[STATS_SHARE_COPY] =
		(double)((c->ns_collect - p->ns_collect) + (c->ns_send - p->ns_send)) / dt;
	/* In the pool's calls: the batch latencies (sync: sr_pool_step; async:
	 * from the last send's return to recv's) and the sends. */
	in_calls = (double)((c->lat_sum_ns - p->lat_sum_ns) + (c->ns_send - p->ns_send)) / dt;
	sh[STATS_SHARE_CALLER] = in_calls < 1 ? 1 - in_calls : 0;
	for (int k = 0; k < STATS_SHARES; k++)
		if (k != STATS_SHARE_WAIT)
			sum += sh[k] > 0 ? sh[k] : (sh[k] = 0);
	if (sum > 1) {
		/* Overlap, or a timer that caught a preemption: scale to 1. */
		for (int k = 0; k < STATS_SHARES; k++)
			sh[k] /= sum;
		sh[STATS_SHARE_WAIT] = 0;
	} else {
		sh[STATS_SHARE_WAIT] = 1 - sum;
	}
}

void stats_rates(const struct stats_snap *prev, const struct stats_snap *cur,
		 struct stats_rates *r)
{
	static const struct stats_snap zero;
	const sr_stats_shm *a = &cur->agg;
	const struct stats_snap *p0 = prev ? prev : &zero;
	double dt, up = a->now_ns > a->start_ns ? (double)(a->now_ns - a->start_ns) / 1e9 : 0;
	double sum = 0;
	uint64_t dn;

	memset(r, 0, sizeof(*r));
	r->uptime_s = up;
	r->avg_steps_per_sec = up > 0 ? (double)a->steps / up : 0;
	if (prev && cur->agg.now_ns > prev->agg.now_ns) {
		dt = (double)(cur->agg.now_ns - prev->agg.now_ns) / 1e9;
		r->steps_per_sec = (double)(a->steps - prev->agg.steps) / dt;
	} else {
		dt = prev ? 0 : up;
		r->steps_per_sec = prev ? 0 : r->avg_steps_per_sec;
	}
	r->dt_s = dt;
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
	r->has_v2 = a->version >= 2;
	if (!r->has_v2 || dt <= 0)
		return;
	shares(&p0->agg, a, dt * 1e9, r->share);
	r->cpu_usage = (double)(a->cpu_ns - p0->agg.cpu_ns) / (dt * 1e9);
	dn = a->lat_count - p0->agg.lat_count;
	r->lat_mean_us = dn ? (double)(a->lat_sum_ns - p0->agg.lat_sum_ns) / 1e3 / (double)dn : 0;
}

const char *stats_worker_kind(uint32_t kind)
{
	return kind == SR_STATS_WORKERS_PROCS          ? "procs"
	       : kind == SR_STATS_WORKERS_PROCS_INLINE ? "procs_inline"
						       : "threads";
}

void stats_sample_json(FILE *f, const char *name, const struct stats_snap *s,
		       const struct stats_rates *r, double unix_s)
{
	const sr_stats_shm *a = &s->agg;
	char e_name[512], e_env[160], when[32];
	time_t sec = (time_t)unix_s;
	struct tm tm;

	gmtime_r(&sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	bench_json_escape(e_name, sizeof(e_name), name);
	{
		char id[sizeof(a->env_id) + 1];

		memcpy(id, a->env_id, sizeof(a->env_id));
		id[sizeof(a->env_id)] = '\0';
		bench_json_escape(e_env, sizeof(e_env), id);
	}
	fprintf(f, "{\"schema\":\"stepring.top/1\",\"time\":\"%s\",\"unix_s\":%.3f,"
		   "\"pool\":\"%s\",\"env\":\"%s\",\"pid\":%lld,\"envs\":%u,\"workers\":%u,"
		   "\"worker_kind\":\"%s\",\"batch\":%u,\"mode\":\"%s\",",
		when, unix_s, e_name, e_env, (long long)a->pid, a->num_envs, a->num_threads,
		stats_worker_kind(a->worker_kind), a->batch_size, a->mode ? "async" : "sync");
	if (a->mpi_size)
		fprintf(f, "\"rank\":%u,\"ranks\":%u,", a->mpi_rank, a->mpi_size);
	fprintf(f, "\"uptime_s\":%.3f,\"interval_s\":%.3f,\"steps\":%llu,\"steps_per_sec\":%.1f,"
		   "\"batches\":%llu,\"p50_us\":%.2f,\"p99_us\":%.2f,\"episodes\":%llu,"
		   "\"mean_return\":%.4f,\"mean_length\":%.2f,\"ring_pending\":%.4f,"
		   "\"replay_fill\":%.4f,\"ckpt_count\":%llu,\"nonfinite_rows\":%llu,"
		   "\"faults\":%llu,\"restarts\":%llu,\"fault_rows\":%llu,\"util\":%.4f",
		r->uptime_s, r->dt_s, (unsigned long long)a->steps, r->steps_per_sec,
		(unsigned long long)a->batches, a->p50_us, a->p99_us,
		(unsigned long long)a->episodes, a->mean_return, a->mean_length, r->pending_frac,
		r->replay_frac, (unsigned long long)a->ckpt_count,
		(unsigned long long)a->nonfinite_rows, (unsigned long long)a->faults,
		(unsigned long long)a->restarts, (unsigned long long)a->fault_rows, r->util_mean);
	if (r->has_v2) {
		fputs(",\"shares\":{", f);
		for (int k = 0; k < STATS_SHARES; k++)
			fprintf(f, "%s\"%s\":%.4f", k ? "," : "", stats_share_names[k], r->share[k]);
		fprintf(f, "},\"lat_mean_us\":%.2f,\"cpu_usage\":%.4f,\"rss_bytes\":%llu",
			r->lat_mean_us, r->cpu_usage, (unsigned long long)a->rss_bytes);
	}
	fputs(",\"worker_util\":[", f);
	for (uint32_t i = 0; i < s->nw; i++)
		fprintf(f, "%s%.4f", i ? "," : "", r->util[i]);
	fputs("]}\n", f);
	fflush(f);
}

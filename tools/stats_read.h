/*
 * Reading a live pool's statistics block (include/stepring/stats.h) from
 * another process: what `stepring top` and `stepring metrics` share.
 *
 * A block is read with pread(2), never through a mapping (a segment
 * truncated under the reader gives a short read, not SIGBUS), and only
 * when it is owned by the reader's effective uid (another user could plant
 * "x.stats"). Liveness is the block's creator lock (flock), which works
 * across PID namespaces where a pid does not. See tools/stats_read.c.
 */
#ifndef SR_TOOLS_STATS_READ_H
#define SR_TOOLS_STATS_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stepring/stats.h"

#define STATS_SEG_SUFFIX ".stats"
#define STATS_NAME_MAX 200 /* ring names longer than this are refused */

struct stats_src {
	char seg[256];   /* shm name with the leading '/' */
	char name[256];  /* ring name as the user knows it */
	int fd;          /* open read-only, never mapped; -1 when detached */
	sr_stats_shm id; /* the fields read at attach (workers[] not filled) */
};

/* One consistent copy of a block. */
struct stats_snap {
	sr_stats_shm agg; /* aggregate fields; agg.workers not filled */
	sr_stats_worker w[SR_STATS_MAX_WORKERS];
	uint32_t nw;      /* workers copied: min(num_threads, SR_STATS_MAX_WORKERS) */
};

/* "name", "/name", "name.stats" -> seg "/name.stats", name "name".
 * 0, or -EINVAL for an empty name, one with '/' inside, or a long one. */
int stats_set_names(struct stats_src *t, const char *arg);

/* Open @t->seg read-only and check it (regular file, our uid, size, magic,
 * a version in [SR_STATS_VERSION_MIN, SR_STATS_VERSION]). 0, or -errno
 * with *@why set to one short phrase. */
int stats_attach(struct stats_src *t, const char **why);
void stats_detach(struct stats_src *t);

/* Does somebody hold the block's creator lock? A block whose name is gone
 * belongs to a pool that ended; when it cannot be told: true. */
bool stats_alive(const struct stats_src *t);

/* Has the pool ended (state ENDED, name gone, nobody holds the lock, or
 * truncated)? Sets *@why when it has. */
bool stats_ended(const struct stats_src *t, const char **why);

/* Seqlock read of the aggregate fields, then the workers. False if no
 * consistent copy was had in many tries (a writer that died mid-update
 * leaves seq odd) or the segment was truncated. */
bool stats_snapshot(const struct stats_src *t, struct stats_snap *out);

/* Names of the live pools of this uid (state RUNNING, lock held), at most
 * @max, sorted. Returns the count. */
int stats_find_live(char names[][256], int max);

/* Where the trainer thread's wall-clock time went, as in docs/tuning.md's
 * breakdown: env = env time / threads, ring = ring time / threads, copy =
 * collect + send, caller = outside the pool's calls (the caller's own
 * work: its policy), wait = the rest (waiting for workers, wake-ups). */
enum {
	STATS_SHARE_ENV,
	STATS_SHARE_RING,
	STATS_SHARE_COPY,
	STATS_SHARE_WAIT,
	STATS_SHARE_CALLER,
	STATS_SHARES
};
extern const char *const stats_share_names[STATS_SHARES];

/* Rates between two snapshots, on the block's own clock (now_ns). */
struct stats_rates {
	double dt_s;                  /* the interval (uptime when there is no prev) */
	double uptime_s;
	double steps_per_sec, avg_steps_per_sec;
	double util[SR_STATS_MAX_WORKERS], wsps[SR_STATS_MAX_WORKERS];
	double util_mean;
	double pending_frac, replay_frac;
	bool has_v2;                  /* the block has the version 2 fields */
	double share[STATS_SHARES];   /* with has_v2 */
	double cpu_usage;             /* CPU-seconds per second of the pool's process */
	double lat_mean_us;           /* mean batch latency over the interval */
};

/* @prev NULL: since the start of the pool. */
void stats_rates(const struct stats_snap *prev, const struct stats_snap *cur,
		 struct stats_rates *r);

/* "threads", "procs" or "procs_inline". */
const char *stats_worker_kind(uint32_t kind);

/* One JSON line (schema stepring.top/1) of a sample: identity, counters,
 * rates and shares; @unix_s the wall-clock time of the sample. */
void stats_sample_json(FILE *f, const char *name, const struct stats_snap *s,
		       const struct stats_rates *r, double unix_s);

#endif

/*
 * Live statistics of a pool in shared memory, for `stepring top` and other
 * read-only observers in other processes.
 *
 * A pool created with SR_POOL_F_RING_NAME publishes this block in
 * a segment named "<ring_name>.stats" (shm_open, 0600). The pool thread and
 * the workers are the only writers; readers map it read-only, check magic
 * and version, and read it seqlock style: read `seq` (acquire), copy,
 * re-read `seq`; retry if it changed or is odd. Per-worker counters are
 * plain monotonic uint64 written with relaxed atomics (a reader may see a
 * slightly stale value, never a torn one). `state` goes to
 * SR_STATS_STATE_ENDED when the pool is destroyed, then the segment is
 * unlinked. The creator holds flock(LOCK_EX) on the segment for as long as
 * the pool lives (also after a fork, until the last descriptor closes):
 * a reader probing with flock(LOCK_SH | LOCK_NB) that gets EWOULDBLOCK
 * knows the pool is alive, in any PID namespace that shares /dev/shm. The
 * block is fully allocated before it gets its name. Readers should read
 * only blocks owned by their own uid, with pread rather than a mapping
 * (`stepring top` does both): an owner may truncate a segment at any time.
 *
 * Versions. 1: the fields up to worker_kind. 2: the time breakdown, the
 * sum and count of batch latencies, the process' CPU time and resident
 * set, and the MPI rank, in words that version 1 reserved (and left zero):
 * the layout and size did not change, so a reader of version 2 also reads
 * version 1 blocks (SR_STATS_VERSION_MIN), with those fields absent.
 */
#ifndef STEPRING_STATS_H
#define STEPRING_STATS_H

#include <stdint.h>

#define SR_STATS_MAGIC 0x5354415453525453ull /* "STSRSTATS" */
#define SR_STATS_VERSION 2u
#define SR_STATS_VERSION_MIN 1u /* the oldest version a reader of this one reads */
#define SR_STATS_MAX_WORKERS 256

enum {
	SR_STATS_STATE_RUNNING = 1,
	SR_STATS_STATE_ENDED = 2,
};

enum {
	SR_STATS_WORKERS_THREADS = 0,
	SR_STATS_WORKERS_PROCS = 1,        /* every worker a process */
	SR_STATS_WORKERS_PROCS_INLINE = 2, /* worker 0 inline, the others processes */
};

typedef struct sr_stats_worker {
	uint64_t steps;       /* env steps done by this worker */
	uint64_t ns_busy;     /* time stepping envs and publishing */
	uint64_t ns_idle;     /* time spinning or sleeping */
	uint64_t cpu;         /* the CPU it is bound to, or UINT64_MAX */
} sr_stats_worker;

typedef struct sr_stats_shm {
	uint64_t magic;
	uint32_t version;
	uint32_t state;         /* SR_STATS_STATE_* */
	uint64_t seq;           /* seqlock over the aggregate fields below */
	int64_t pid;            /* owner */
	char env_id[64];
	uint32_t num_envs, num_threads, batch_size, mode; /* mode 0 sync, 1 async */
	uint64_t start_ns;      /* CLOCK_MONOTONIC at create */
	uint64_t now_ns;        /* CLOCK_MONOTONIC of the last update */
	uint64_t steps;         /* env steps */
	uint64_t batches;       /* batches returned */
	uint64_t episodes;
	double mean_return, mean_length;
	double p50_us, p99_us;  /* batch latency over a recent window */
	uint64_t ring_capacity, ring_head, ring_cursor;
	uint32_t ckpt_state;    /* SR_CKPT_STATE_* (stepring/checkpoint.h) */
	uint32_t mpi_rank;      /* v2: the pool's rank in an MPI pool (mpi_size > 0) */
	uint64_t ckpt_count;    /* checkpoints completed */
	uint64_t ckpt_bytes;    /* bytes of the last checkpoint */
	/* The finite check (SR_POOL_F_CHECK_FINITE): rows flagged
	 * SR_SLOT_NONFINITE, and 1 + the env index of the first one (0:
	 * none). Zero in blocks of pools that predate them. */
	uint64_t nonfinite_rows;
	uint64_t nonfinite_env;
	/* Process workers (SR_POOL_F_PROCS; zero for threads): workers that
	 * died or hung, restarts, rows published as SR_SLOT_FAULT. */
	uint64_t faults, restarts, fault_rows;
	uint32_t worker_kind;   /* SR_STATS_WORKERS_* */
	uint32_t mpi_size;      /* v2: ranks of that MPI pool; 0: not part of one */
	/* v2: sr_pool_stats' time breakdown (ns summed over workers / the
	 * collector, include/stepring/pool.h). */
	uint64_t ns_env_step, ns_ring_publish, ns_collect, ns_wait, ns_send;
	/* v2: batch latencies (what p50_us / p99_us are taken from) counted and
	 * summed since create: a latency summary's _count and _sum. */
	uint64_t lat_count, lat_sum_ns;
	/* v2: the pool's process (worker processes not included): CPU time
	 * (CLOCK_PROCESS_CPUTIME_ID) and resident set, refreshed about every
	 * 0.25 s. */
	uint64_t cpu_ns, rss_bytes;
	uint64_t reserved[1];
	sr_stats_worker workers[SR_STATS_MAX_WORKERS];
} sr_stats_shm;

#endif

/*
 * stepring across MPI ranks: one run's envs spread over the ranks of a
 * communicator (Open MPI; launched with mpirun or srun).
 *
 * Installed only by a build with MPI (SR_CONFIG_WITH_MPI in
 * stepring/config.h); the other stepring headers never include <mpi.h>.
 * Compile with mpicc, or add MPI's include directory.
 *
 * A distributed pool has a global num_envs. Rank r of R hosts the
 * contiguous block of envs sr_mpi_env_range(num_envs, R, r) and steps
 * them in an ordinary local sr_pool whose env i is global env
 * first_env + i, seeded from (seed, first_env + i) (SR_POOL_F_FIRST_ENV):
 * the trajectories of global env e are the same for any number of ranks
 * and threads. Ranks step independently; nothing is exchanged per step.
 *
 * COLLECTIVE calls (marked so) must be made by every rank of the
 * communicator in the same order. They never wait forever: when a rank
 * does not arrive within the timeout (it died, or hangs), they return
 * -ETIMEDOUT with a message naming the call; an MPI error (a peer whose
 * connection broke) returns -EIO. The communicator is then unusable: the
 * caller should report sr_last_error() and MPI_Abort.
 *
 * Bad input is detected collectively: sr_mpi_pool_create compares the
 * options of every rank and fails on every rank, with the same message,
 * when they differ, when num_envs < ranks, or when any rank's local pool
 * cannot be created.
 */
#ifndef STEPRING_MPI_H
#define STEPRING_MPI_H

#include <mpi.h>

#include "stepring/common.h"
#include "stepring/pool.h"
#include "stepring/checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sr_mpi_opts.flags */
enum {
	SR_MPI_F_TIMEOUT = 1u << 0,  /* timeout_s is set (default 60 s, or $STEPRING_MPI_TIMEOUT) */
	SR_MPI_F_NO_SPLIT = 1u << 1, /* do not split the node's CPUs between its ranks */
};

typedef struct sr_mpi_opts {
	uint32_t flags;
	uint32_t reserved0;
	double timeout_s; /* collective calls give up after this many seconds */
} sr_mpi_opts;

SR_EXPORT void sr_mpi_opts_init(sr_mpi_opts *o);

typedef struct sr_mpi_pool sr_mpi_pool;

typedef struct sr_mpi_pool_info {
	uint32_t rank, size;             /* in the pool's communicator */
	uint32_t local_rank, local_size; /* among the ranks of this node */
	uint32_t node;                   /* index of this node (0 .. nodes - 1) */
	uint32_t nodes;
	uint64_t num_envs;               /* global */
	uint64_t first_env;              /* global index of this rank's env 0 */
	uint32_t local_envs;             /* envs hosted here */
	uint32_t num_threads;            /* of the local pool */
	char cpus[256];                  /* CPUs this rank's pool may use ("0-3") */
} sr_mpi_pool_info;

/**
 * The block of global envs rank @rank of @size hosts: envs
 * [*first, *first + *n), the first num_envs % size ranks one more than the
 * others. -EINVAL when num_envs < size (a rank would host none) or rank
 * >= size. Pure; needs no MPI (re-sharding a saved run uses it too).
 */
SR_EXPORT int sr_mpi_env_range(uint64_t num_envs, uint32_t size, uint32_t rank, uint64_t *first,
			       uint32_t *n);

/**
 * COLLECTIVE over @comm: create this rank's part of a pool of
 * @opts->num_envs global envs. Every rank passes the same options (env,
 * num_envs, seed, mode, autoreset; num_threads and the cpuset may differ).
 * opts->first_env must not be set (the pool sets it). The ranks on one
 * node split its allowed CPUs in contiguous blocks of cores (unless the
 * launcher already bound them to distinct CPUs, or SR_MPI_F_NO_SPLIT);
 * each rank's pool then places its workers there with the usual plan
 * (with a GPU, pass each rank its device_index, e.g. its local rank).
 * An async pool (0 < batch_size < num_envs) gets a local batch of
 * batch_size * local_envs / num_envs (at least 1). @mopts may be NULL. Returns 0 on every rank, or the
 * same error on every rank.
 */
SR_EXPORT int sr_mpi_pool_create(MPI_Comm comm, const sr_pool_opts *opts,
				 const sr_mpi_opts *mopts, sr_mpi_pool **out);
/** As sr_mpi_pool_create, with a Fortran handle (MPI_Comm_c2f; mpi4py's
 * comm.py2f()): for bindings that cannot pass an MPI_Comm. */
SR_EXPORT int sr_mpi_pool_create_f(int64_t fcomm, const sr_pool_opts *opts,
				   const sr_mpi_opts *mopts, sr_mpi_pool **out);
/** COLLECTIVE: destroy the local pool and free the communicator. NULL is a no-op. */
SR_EXPORT void sr_mpi_pool_destroy(sr_mpi_pool *mp);
/** COLLECTIVE: free the MPI parts and hand this rank's pool to the caller,
 * who destroys it with sr_pool_destroy (for bindings whose objects die in
 * no fixed order across ranks). Returns NULL for NULL. */
SR_EXPORT sr_pool *sr_mpi_pool_detach(sr_mpi_pool *mp);
/** This rank's pool (step it like any pool; its env_id are local). */
SR_EXPORT sr_pool *sr_mpi_pool_local(const sr_mpi_pool *mp);
SR_EXPORT int sr_mpi_pool_info_get(const sr_mpi_pool *mp, sr_mpi_pool_info *out);
/** A duplicate of the communicator the pool was created on (owned by the pool). */
SR_EXPORT MPI_Comm sr_mpi_pool_comm(const sr_mpi_pool *mp);

/** COLLECTIVE: wait for every rank (a heartbeat), with the timeout. */
SR_EXPORT int sr_mpi_pool_barrier(sr_mpi_pool *mp);

/**
 * COLLECTIVE: gather one fixed-size record per local env into global env
 * order at rank @root: rank r's @local (local_envs * @size bytes) lands at
 * @out + first_env * @size. @out (num_envs * @size bytes) is used at
 * @root only. For per-env hashes, returns, checkpoint indexes.
 */
SR_EXPORT int sr_mpi_pool_gather_envs(sr_mpi_pool *mp, const void *local, size_t size, void *out,
				      int root);

/**
 * COLLECTIVE: checkpoint the run into directory @dir (created if absent; a
 * file system every rank sees). Each rank writes its part,
 * dir/part-G-R.ckpt (generation G, rank R; sr_pool_checkpoint with @opts,
 * NULL for defaults), and waits until it is durable. Only when every part
 * is does rank 0 write dir/manifest (a temporary file, fsync, rename over
 * the old one, fsync of the directory) naming G and each part's global
 * env range; it then removes older generations' parts. A crash at any
 * point leaves the previous manifest with its parts, or the new one with
 * its parts. Async pools: call it with no step in flight. Returns the same
 * result on every rank.
 */
SR_EXPORT int sr_mpi_pool_checkpoint(sr_mpi_pool *mp, const char *dir, const sr_ckpt_opts *opts);
/**
 * COLLECTIVE: restore the run saved in @dir on this pool, whatever the
 * number of ranks that saved it: the manifest must name this run (env,
 * num_envs, seed) and its parts cover every env; each rank restores its
 * envs from the parts that hold them (sr_pool_restore_envs), bit-exactly.
 * Returns the same result on every rank; on error no rank's pool changed
 * (every part is read and checked first) unless a part turned bad between
 * the check and the restore.
 */
SR_EXPORT int sr_mpi_pool_restore(sr_mpi_pool *mp, const char *dir);

/*
 * Replay across ranks: a sampler on any rank draws uniformly from the
 * published slots of every rank's ring. The rings of this node (this
 * rank's own, and the other ranks' of the node, attached read-only through
 * their creator's descriptor) are read directly, zero copy. Every other
 * ring is exposed as an MPI window and read with passive-target one-sided
 * reads (MPI_Win_lock_all once per sampler, one MPI_Rget per target rank
 * and epoch, waited for with the timeout: a rank that hangs gives
 * -ETIMEDOUT), so the target's CPU does not serve it
 * (where the MPI transport does one-sided reads itself). The ring's
 * seqlock check is done on the copied bytes: after the columns, the
 * slot's seq is read again, and with it head and cursor (docs/ring.md,
 * R3); a slot that was not published, or was lapped while being read, is
 * drawn again. No torn transition is returned.
 */
enum {
	SR_MPI_REPLAY_F_FORCE_MPI = 1u << 0, /* every ring through MPI, this rank's own too
					      * (tests, benchmarks of the network path) */
	SR_MPI_REPLAY_F_NO_SHM = 1u << 1,    /* other ranks' rings through MPI even on this
					      * node (this rank's own stays direct) */
};

typedef struct sr_mpi_replay sr_mpi_replay;

/* Rows of a sample; the caller's arrays of n rows each (any may be NULL
 * except seq and rank). */
typedef struct sr_mpi_sample {
	float *obs;          /* n * obs_dim */
	float *prev_obs;     /* n * obs_dim: the env's previous slot's obs, when prev_valid */
	uint8_t *prev_valid; /* n: 1 when the slot has a previous slot of the same episode */
	uint8_t *action;     /* n * act_size: the action that led to obs */
	float *reward;
	uint8_t *terminated, *truncated;
	uint64_t *env;       /* global env index */
	uint32_t *rank;      /* the ring's rank */
	uint64_t *seq;       /* the slot's sequence in that ring */
	float *weight;       /* importance weights (prioritized; 1 for uniform) */
} sr_mpi_sample;

/** COLLECTIVE: expose every rank's pool ring and prepare a sampler. */
SR_EXPORT int sr_mpi_replay_create(sr_mpi_pool *mp, uint32_t flags, sr_mpi_replay **out);
/** COLLECTIVE */
SR_EXPORT void sr_mpi_replay_destroy(sr_mpi_replay *r);
/**
 * Not collective: draw @n transitions uniformly over the published slots
 * of the chosen ranks' rings (every rank's unless
 * sr_mpi_replay_set_sources chose). Rows are independent draws; their
 * order carries nothing (they come grouped by rank, in slot order, which
 * keeps the reads of one rank together). Returns n, -EAGAIN when no ring
 * has a slot yet (or the limiter refused), -EIO on an MPI error, -ETIMEDOUT
 * when a rank read through MPI did not answer within the timeout.
 */
SR_EXPORT int sr_mpi_replay_sample(sr_mpi_replay *r, uint32_t n, const sr_mpi_sample *out);
/** Bytes read through MPI so far, and slots drawn again after a failed check. */
SR_EXPORT void sr_mpi_replay_counters(const sr_mpi_replay *r, uint64_t *bytes, uint64_t *retries);
/** 1 when @rank's ring is read directly (mapped here: this rank's own, or
 * another rank's of this node), 0 when through MPI; -EINVAL for a bad rank.
 * A ring of this node that cannot be attached (another PID namespace, a
 * policy that forbids opening /proc/PID/fd) is read through MPI. */
SR_EXPORT int sr_mpi_replay_direct(const sr_mpi_replay *r, uint32_t rank);
/** Not collective: draw only from the rings of the ranks with @use[rank]
 * != 0 (size entries; NULL: every rank, the default), uniformly over their
 * slots: a learner that reads its node's rings only, a benchmark of one
 * path. -EINVAL when no rank is chosen. */
SR_EXPORT int sr_mpi_replay_set_sources(sr_mpi_replay *r, const uint8_t *use);

/**
 * Not collective: make this sampler prioritized (Schaul et al. 2016, as
 * sr_replay's): a sum-tree on this rank over every rank's ring slots (16
 * bytes a slot), fed with the slots the chosen rings consume (at the
 * largest priority so far, (max |p| + eps)^alpha); a batch is drawn
 * stratified (row i from the i-th of n equal slices of the total), a slot
 * lapped or PAD leaves the tree and its slice is drawn again; weights are
 * (N P(i))^-beta divided by the batch's largest. Call it before the first
 * sample. alpha >= 0, beta in [0, 1], eps > 0; -EINVAL otherwise.
 */
SR_EXPORT int sr_mpi_replay_prioritize(sr_mpi_replay *r, double alpha, double beta, double eps);
/** Prioritized: set the priorities of the rows (rank[j], seq[j]) of a
 * sample to (|prio[j]| + eps)^alpha. Keys whose slot has been lapped since
 * are ignored. Returns the number updated, -EINVAL (not prioritized, a NaN
 * priority or a bad rank: nothing changed). */
SR_EXPORT int sr_mpi_replay_update(sr_mpi_replay *r, const uint32_t *rank, const uint64_t *seq,
				   const float *prio, uint32_t n);

/*
 * Counters and a samples-per-insert limiter across ranks (Reverb's
 * SampleToInsertRatio, as sr_replay's limiter): inserts are the slots
 * every rank's ring consumed since sr_mpi_replay_create (read from their
 * cursors), samples the rows every rank's sampler returned (summed at
 * rank 0 with MPI_Accumulate). With spi = samples_per_insert, diff =
 * spi * inserts - samples must stay in [spi * min_size - error_buffer,
 * spi * min_size + error_buffer]: a sample of n waits (polling every 100
 * us, up to timeout_ms; forever if negative) or returns -EAGAIN, and a
 * producer rank asks sr_mpi_replay_can_insert before stepping. Every rank
 * that samples or produces calls sr_mpi_replay_limit with the same values.
 */
typedef struct sr_mpi_replay_counts {
	uint64_t inserts;     /* slots consumed by every rank's ring since create */
	uint64_t samples;     /* rows this sampler returned */
	uint64_t samples_all; /* rows every rank's sampler returned */
	uint64_t size;        /* prioritized: slots in the tree; uniform: in the windows */
	uint64_t bytes;       /* read through MPI by this sampler */
	uint64_t retries;     /* rows drawn again */
} sr_mpi_replay_counts;

/** Not collective: turn the limiter on for this rank's sampler / producer. */
SR_EXPORT int sr_mpi_replay_limit(sr_mpi_replay *r, double samples_per_insert, uint64_t min_size,
				  double error_buffer, int32_t timeout_ms);
/** 1 when inserting @n more keeps diff under the upper bound (always
 * without a limiter), 0 when not, or -errno. Reads every ring's cursor and
 * rank 0's sample count. */
SR_EXPORT int sr_mpi_replay_can_insert(sr_mpi_replay *r, uint64_t n);
/** Not collective: the counters, read now (every ring's cursor, rank 0's
 * sample count, after this sampler's own are complete there). */
SR_EXPORT int sr_mpi_replay_counts_get(sr_mpi_replay *r, sr_mpi_replay_counts *out);

/* Statistics of every rank (sr_mpi_pool_stats_get). */
typedef struct sr_mpi_pool_stats {
	sr_pool_stats total;  /* steps, episodes and times summed over the ranks;
			       * mean_return / mean_length: each rank's window
			       * weighted by its finished episodes */
	uint64_t steps_min, steps_max; /* one rank's env steps */
	uint32_t slowest_rank;         /* the rank with the fewest steps */
	uint32_t size;                 /* ranks */
} sr_mpi_pool_stats;

/**
 * COLLECTIVE: every rank's sr_pool_stats, reduced (on every rank).
 * @per_rank: NULL, or room for size entries, filled in rank order.
 */
SR_EXPORT int sr_mpi_pool_stats_get(sr_mpi_pool *mp, sr_mpi_pool_stats *out,
				    sr_pool_stats *per_rank);

#ifdef __cplusplus
}
#endif
#endif

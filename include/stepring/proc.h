/*
 * stepring process workers: the worker's side, for worker programs
 * written against the C ABI in another language (the Python worker,
 * python/stepring/_procworker.py, drives it through ctypes).
 *
 * A pool created with SR_POOL_F_PROCS spawns its worker
 * programs with the ring and the pool's command block inherited as file
 * descriptors and the environment variable STEPRING_PROC set. The worker
 * calls sr_proc_worker_open() once, builds its slice of envs
 * [first_env, first_env + n_envs) (seeded from the seed, each env's index
 * and the restart count, sr_proc_seed), calls sr_proc_worker_ready(),
 * then loops:
 *
 *   sr_proc_worker_wait(w, &cmd)   blocks until the next command
 *   write the rows of its envs in the command: env e in [cmd.lo,
 *     cmd.lo + cmd.n) (or e = cmd.ids[j], j < cmd.n) at slot cmd.row + j,
 *     j its position (a sync command: every env of the slice, env e at
 *     slot cmd.seq + e)
 *   sr_ring_publish(ring, cmd.row, cmd.n)
 *   sr_proc_worker_done(w, steps, ns_env)
 *
 * A row it does not publish (it crashed, hung, raised) is published by the
 * pool as a fault row: truncated = 1, flags SR_SLOT_FAULT, prev
 * SR_RING_NO_PREV. So a worker publishes its rows only once they are whole.
 * Before exiting on an error it calls sr_proc_worker_fail() with the reason
 * (a traceback), which the pool puts in its error message.
 *
 * Thread safety: one thread of the worker process uses the handle.
 */
#ifndef STEPRING_PROC_H
#define STEPRING_PROC_H

#include "stepring/common.h"
#include "stepring/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

enum sr_proc_cmd_kind {
	SR_PROC_CMD_STEP = 1,  /* step every env with its action */
	SR_PROC_CMD_RESET = 2, /* reset every env (mask NULL) or those with mask[env] != 0;
				* the others are observed into a SR_SLOT_PAD row */
	SR_PROC_CMD_STOP = 3,  /* exit */
};

typedef struct sr_proc_worker sr_proc_worker;

typedef struct sr_proc_info {
	uint32_t index;     /* worker index */
	uint32_t first_env; /* its envs: [first_env, first_env + n_envs) */
	uint32_t n_envs;
	uint32_t num_envs;  /* of the pool */
	uint32_t restarts;  /* how many times this worker was restarted before */
	uint32_t autoreset; /* enum sr_autoreset */
	uint32_t obs_dim;
	uint32_t act_size;
	uint64_t seed;
	uint64_t env_base;   /* global index of env 0 (a pool that is part of a larger
			      * run): env e is seeded as env_base + e */
	const void *payload; /* bytes handed by the pool at create, or NULL */
	size_t payload_len;
	sr_ring *ring;       /* the pool's ring, attached read-write */
	float *final_obs;    /* keep_final: num_envs * obs_dim floats (row = env), or NULL */
} sr_proc_info;

typedef struct sr_proc_cmd {
	uint32_t kind;        /* enum sr_proc_cmd_kind */
	uint32_t gen;
	uint64_t seq;         /* ids NULL: env e's row is at slot seq + e */
	const void *actions;  /* step: num_envs actions (act_size bytes each), row = env;
			       * only those of the command's envs are valid */
	const uint8_t *mask;  /* reset: num_envs bytes, or NULL for all */
	/* This worker's envs in the command: [lo, lo + n), a part of its slice
	 * (a sync command: all of it; an async batch group: its envs of the
	 * group), or with ids set the n envs ids[0 .. n) (ascending; a ragged
	 * async send). n may be 0: nothing to do but sr_proc_worker_done. */
	uint32_t lo, n;
	const uint32_t *ids;
	uint64_t row;         /* slot of the first env's row; the n rows are consecutive */
} sr_proc_cmd;

/**
 * Attach to the pool that spawned this process (STEPRING_PROC and the
 * inherited descriptors) and fill @info. Sets the parent-death signal
 * (SIGKILL) and exits at once if the pool's process is already gone.
 * Returns 0, -ENOENT (not started by a pool), -EBADMSG (not a command
 * block), -errno.
 */
SR_EXPORT int sr_proc_worker_open(sr_proc_worker **out, sr_proc_info *info);
/** The envs are built: the pool may send commands. */
SR_EXPORT void sr_proc_worker_ready(sr_proc_worker *w);
/**
 * Wait for the next command (spin, then futex_wait on shared memory; every
 * 200 ms it checks that the pool's process is alive). Returns 0, or
 * -ESHUTDOWN for STOP or when the pool's process is gone: exit then.
 */
SR_EXPORT int sr_proc_worker_wait(sr_proc_worker *w, sr_proc_cmd *cmd);
/** The command's rows are published: tell the pool. @steps and @ns_env go
 * to the worker's statistics. */
SR_EXPORT void sr_proc_worker_done(sr_proc_worker *w, uint64_t steps, uint64_t ns_env);
/** A finished episode (return, length) for the pool's statistics. */
SR_EXPORT void sr_proc_worker_episode(sr_proc_worker *w, double ret, uint64_t len);
/** Record why this worker is about to exit (kept to 4 KiB, the end kept). */
SR_EXPORT void sr_proc_worker_fail(sr_proc_worker *w, const char *msg);
/** Unmap everything (the process may also just exit). NULL is a no-op. */
SR_EXPORT void sr_proc_worker_close(sr_proc_worker *w);

/**
 * Worker 0's slice stepped inline, on the thread that calls sr_pool_step /
 * sr_pool_reset, in the trainer's process (SR_POOL_F_PROC_INLINE with
 * sr_pool_opts.proc_inline): the pool posts each command to the worker
 * processes, calls this with it, then waits for them. @info is the slice's
 * (info->restarts grows after each of its faults: rebuild the envs and
 * seed them from sr_proc_seed). It writes the rows of envs
 * [first_env, first_env + n_envs) at cmd->seq + env and publishes them
 * (sr_ring_publish), as a worker process does, and may report episodes
 * (sr_proc_worker_episode); it must not call sr_proc_worker_wait or _done.
 * Returns 0, or nonzero after sr_proc_worker_fail(w, why): its rows not
 * published become fault rows and the restart counts against the budget,
 * as for a worker process that died.
 */
typedef int (*sr_proc_inline_fn)(void *arg, sr_proc_worker *w, const sr_proc_info *info,
				 const sr_proc_cmd *cmd);

/**
 * The seed of env @index after @restarts restarts: @seed itself before any
 * restart (so that the first run matches thread workers: an env is seeded
 * from (seed, index)), then a value mixed from (seed, index, restarts).
 * Deterministic; the same inputs always give the same seed.
 */
SR_EXPORT uint64_t sr_proc_seed(uint64_t seed, uint32_t index, uint32_t restarts);

#ifdef __cplusplus
}
#endif
#endif

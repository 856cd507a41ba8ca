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
	/* Checkpoints (docs/checkpoint.md), with nothing in flight. They
	 * concern the whole slice and have no rows (n is 0): a worker ends
	 * SAVE and LOAD with sr_proc_worker_xchg_end, then, as for every
	 * command, sr_proc_worker_done (0 steps). */
	SR_PROC_CMD_SAVE = 4,  /* write the slice's env records into the exchange area */
	SR_PROC_CMD_LOAD = 5,  /* read records from it, check them and keep them aside */
	SR_PROC_CMD_COMMIT = 6, /* seq 1: the kept records become the envs; 0: drop them */
};

/*
 * The exchange area of SAVE and LOAD (sr_proc_worker_xchg), for a slice
 * of n envs, 8-byte aligned:
 *
 *   n records of 32 bytes, one per env (its bookkeeping):
 *       u64 ring sequence of its last row (UINT64_MAX: none), u64 length
 *       of the episode so far, f64 its return so far, u32 steps since its
 *       reset (TimeLimit; 0 where the env keeps its own), u8 done (its last
 *       step ended the episode: the next step resets it), u8 terminated,
 *       u8 truncated (of that step), u8 0
 *   n u64: the length of each env's state bytes
 *   the state bytes, env after env, each padded with zeros to 8 bytes
 *
 * The state bytes are what the worker needs to rebuild the env exactly,
 * RNG included: the C env worker writes an env's state (or its save()),
 * the Python worker the pickled env. SAVE: the worker fills the area and
 * calls sr_proc_worker_xchg_end(w, 0, bytes written, NULL); if the area
 * is too small, sr_proc_worker_xchg_end(w, -ENOBUFS, bytes needed, NULL)
 * (the pool grows it and asks again); an env that cannot be saved,
 * -errno with the reason. LOAD: the pool wrote the area; the worker
 * rebuilds every env aside, without touching the live ones, and ends
 * with 0 or -errno and the reason (a record that does not load).
 */

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
	void *out;           /* this worker's out area (sr_pool_opts.worker_out_size bytes,
			      * read by the trainer with sr_pool_worker_out), or NULL */
	size_t out_size;
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
	/* A reset of sr_pool_reset_ex (0 / NULL otherwise): which of its
	 * SR_RESET_F_SEED, _SEEDS, _OPTIONS, _PAYLOAD (stepring/pool.h) it
	 * carries. Each env the reset resets (mask) is first reseeded:
	 *  SEED:  from (reset_seed, env_base + env), as a fresh pool of that
	 *         seed seeds it (Python envs: reset(seed=reset_seed + env_base
	 *         + env), Gymnasium's rule);
	 *  SEEDS: where seed_mask is NULL or seed_mask[env] != 0, from
	 *         (seeds[env], 0) (Python: reset(seed=seeds[env])).
	 * OPTIONS: a built-in env's reset options, parsed (reset_b, its two
	 * bounds); PAYLOAD: the caller's bytes (a pickled options dict). */
	uint32_t reset_flags;
	uint32_t reserved0;
	uint64_t reset_seed;
	const uint64_t *seeds;     /* num_envs, row = env */
	const uint8_t *seed_mask;  /* num_envs bytes, or NULL */
	double reset_b[2];
	const void *payload;
	size_t payload_len;
} sr_proc_cmd;

/* The most bytes of a reset payload (sr_pool_reset_opts.payload). */
#define SR_PROC_RESET_PAYLOAD_MAX 65536u

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
/** SAVE / LOAD: this worker's exchange area (*@area, *@cap bytes), mapped
 * until the handle is closed. 0 or -errno. */
SR_EXPORT int sr_proc_worker_xchg(sr_proc_worker *w, void **area, size_t *cap);
/** The end of a SAVE or LOAD: @status 0 (@len: bytes written by a SAVE),
 * -ENOBUFS (@len: bytes a SAVE needs), or -errno with @msg (why; NULL for
 * none), which the pool's error message repeats. */
SR_EXPORT void sr_proc_worker_xchg_end(sr_proc_worker *w, int status, uint64_t len,
				       const char *msg);
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
 * as for a worker process that died. Checkpoints send it SAVE, LOAD and
 * COMMIT as well (no rows: see the exchange area above); a function that
 * does not handle them returns 0 and writes nothing, and the checkpoint
 * is then refused (-ENOTSUP).
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

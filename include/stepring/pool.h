/*
 * stepring pool: num_envs env instances stepped by hwloc-bound worker
 * threads, writing into the shared-memory ring; a collector forms batches.
 *
 * Sync mode (batch_size == num_envs): sr_pool_step(actions) steps every env
 * once; the batch holds env i at row i.
 * Async mode (batch_size < num_envs): sr_pool_send(actions, env_ids, n)
 * hands actions to the envs' workers and returns at once; sr_pool_recv()
 * returns the first batch_size envs whose step finished, env_id says which.
 * An env is never returned twice without a send in between. When
 * batch_size divides num_envs (and is at least num_threads), the envs form
 * num_envs / batch_size fixed groups of batch_size (each worker's slice is
 * cut into as many runs, one per group), an async reset queues them group
 * by group, and a send of a whole group (the last batch: env_ids NULL or
 * the same ids) is stepped like a sync slice per worker with no per-env
 * queueing: recv then returns the oldest group, the batch is a view of its
 * slots, and every env comes back once per num_envs / batch_size batches.
 * Any other send falls back to per-env queues, with the same contract.
 *
 * Batches are views valid until the next call on the pool. The pool is
 * driven from one thread (not thread safe across calls); its workers and
 * collector are internal.
 */
#ifndef STEPRING_POOL_H
#define STEPRING_POOL_H

#include "stepring/common.h"
#include "stepring/env.h"
#include "stepring/ring.h"
#include "stepring/proc.h"

#ifdef __cplusplus
extern "C" {
#endif

enum sr_autoreset {
	SR_AUTORESET_NEXT_STEP = 0, /* Gymnasium default: the step after a done returns the reset obs */
	SR_AUTORESET_SAME_STEP = 1, /* reset in the same step; the final obs is in batch->final_obs */
	SR_AUTORESET_DISABLED = 2,  /* never reset by itself; sr_pool_reset_mask() resets */
};

enum sr_bind {
	SR_BIND_CORE = 0, /* one worker per core, spread across NUMA nodes */
	SR_BIND_NUMA = 1, /* workers float within their NUMA node */
	SR_BIND_NONE = 2,
};

enum sr_device_kind {
	SR_DEVICE_HOST = 0,
	SR_DEVICE_CUDA = 1,
	SR_DEVICE_AUTO = 2, /* CUDA when a GPU answers, else host */
};

/* sr_pool_opts.flags: which optional members are set. */
enum {
	SR_POOL_F_SEED = 1u << 0,
	SR_POOL_F_CPUSET = 1u << 1,
	SR_POOL_F_RING_NAME = 1u << 2, /* publish the ring (and stats) under ring_name */
	SR_POOL_F_FINAL_OBS = 1u << 3, /* keep final_obs (implied by SAME_STEP) */
	SR_POOL_F_TOPOLOGY = 1u << 4,  /* use topology_xml / synthetic instead of the machine */
	SR_POOL_F_BIND_CALLER = 1u << 5, /* bind the calling thread where the plan puts worker 0
					  * (it steps worker 0's envs inside step/recv) */
	/* 1u << 6 .. 1u << 8: not used (experiment knobs are environment
	 * variables, docs/tuning.md: STEPRING_POOL_KNOBS). */
	SR_POOL_F_FIRST_ENV = 1u << 9, /* first_env is set: this pool is one part of
					* a larger run (a rank of stepring/mpi.h) */
	SR_POOL_F_PROCS = 1u << 10, /* workers are processes (docs/procs.md): num_threads
				    * worker processes, each owning a slice of envs;
				    * one that crashes or hangs is restarted and its
				    * rows come back as SR_SLOT_FAULT rows. Sync pools
				    * (batch_size = num_envs) only, for now. */
	SR_POOL_F_PROC_INLINE = 1u << 11, /* with SR_POOL_F_PROCS: worker 0's envs are
					   * stepped on the calling thread, in this
					   * process, while the num_threads - 1 worker
					   * processes step theirs (num_threads CPUs, not
					   * num_threads + 1). Faster on few CPUs; worker
					   * 0's envs lose crash isolation (a segfault or
					   * a hang there is the trainer's). C envs of
					   * env/spec, or proc_inline's. docs/procs.md */
	SR_POOL_F_CHECK_FINITE = 1u << 12, /* check every published row's obs and reward
					    * for NaN and infinity: such rows get
					    * SR_SLOT_NONFINITE, are counted (sr_pool_stats
					    * .nonfinite_rows) and the first names its env
					    * (sr_last_error and one line on stderr). On by
					    * default; the environment variable
					    * STEPRING_CHECK_FINITE=0 or 1 changes the default,
					    * these two flags override it (docs/envs.md) */
	SR_POOL_F_NO_CHECK_FINITE = 1u << 13, /* no finite check (rows never get
					       * SR_SLOT_NONFINITE) */
};

typedef struct sr_pool_opts {
	uint32_t flags;
	uint32_t num_envs;       /* >= 1 */
	const char *env;         /* id or short name (sr_env_find); ignored when spec is set */
	const sr_env_spec *spec; /* or a spec (e.g. from sr_env_load_plugin) */
	uint32_t num_threads;    /* 0: chosen from the work (num_envs x the env's step
				  * cost measured at create: one thread per 100 us of
				  * it, 1 to one per core; sr_pool_info.threads_note) */
	uint32_t batch_size;     /* 0 or num_envs: sync; < num_envs: async */
	uint64_t seed;           /* with SR_POOL_F_SEED; default 0 */
	uint32_t autoreset;      /* enum sr_autoreset */
	uint32_t bind;           /* enum sr_bind */
	const char *cpuset;      /* with SR_POOL_F_CPUSET: "0-3,8" (like taskset -c) */
	uint64_t ring_capacity;  /* slots (power of two); 0: default (>= 4 batches) */
	const char *ring_name;   /* with SR_POOL_F_RING_NAME */
	uint32_t device;         /* enum sr_device_kind */
	int32_t device_index;    /* GPU ordinal */
	const char *topology;    /* with SR_POOL_F_TOPOLOGY: hwloc synthetic description */
	uint64_t first_env;      /* with SR_POOL_F_FIRST_ENV: the global index of env 0;
				  * env i is seeded from (seed, first_env + i), so
				  * parts of a run seed like one pool of all its envs.
				  * Batches' env_id stay local (0 .. num_envs - 1). */
	/* With SR_POOL_F_PROCS (docs/procs.md). */
	const char *const *worker_argv; /* NULL: the stepring-worker program (C envs:
					 * built-in or plugin); else the program to run
					 * (argv[0] a path), e.g. the Python worker */
	const void *worker_payload;   /* bytes every worker reads at start, or NULL */
	size_t worker_payload_len;
	uint32_t step_timeout_ms;     /* a worker silent this long in one command is
				       * killed and restarted; 0: never */
	uint32_t max_restarts;        /* restarts over the pool's life; 0: 100. Past it
				       * step / reset return -EOWNERDEAD */
	sr_proc_inline_fn proc_inline; /* with SR_POOL_F_PROC_INLINE: steps worker 0's
					* envs (a Python slice); NULL: the C env */
	void *proc_inline_arg;
	size_t worker_out_size;       /* bytes of each worker's out area (sr_proc_info.out,
				       * sr_pool_worker_out), at most 256 MiB; 0: none */
} sr_pool_opts;

/** Defaults: sync, NEXT_STEP, bind core, host device, seed 0. */
SR_EXPORT void sr_pool_opts_init(sr_pool_opts *o);

typedef struct sr_pool sr_pool;

typedef struct sr_batch {
	uint32_t n;                /* rows */
	uint32_t obs_dim;
	const float *obs;          /* n * obs_dim */
	const float *reward;       /* n */
	const uint8_t *terminated; /* n, 0/1 */
	const uint8_t *truncated;  /* n, 0/1 */
	const uint32_t *env_id;    /* n */
	const float *final_obs;    /* SAME_STEP or SR_POOL_F_FINAL_OBS: n * obs_dim, rows
				    * valid where terminated|truncated; else NULL */
	uint64_t first_seq;        /* ring sequence of row 0 when the rows are ring slots */
	uint32_t nonfinite;        /* rows of this batch flagged SR_SLOT_NONFINITE (a NaN or
				    * an infinity in the obs or the reward); 0 without the
				    * finite check. Those rows are the ones where
				    * !isfinite(reward) or any !isfinite(obs) */
	uint32_t reserved0;
} sr_batch;

/**
 * Create a pool: validate the options, place and start the workers, seed
 * every instance from (seed, env index). Returns 0, -EINVAL (0 envs, batch
 * > envs, more threads than the cpuset allows, bad cpuset, an unknown
 * name in STEPRING_POOL_KNOBS (docs/tuning.md) ...), -ENOENT
 * (unknown env), -ENOMEM (also: RLIMIT_AS leaves no room for a worker
 * thread's stack or the ring's mapping), -EAGAIN (the system refused a
 * worker thread or process: RLIMIT_NPROC, kernel.threads-max); the reason,
 * with the limit and its value, is in sr_last_error().
 */
SR_EXPORT int sr_pool_create(const sr_pool_opts *opts, sr_pool **out);
/** Stop the threads and free everything. NULL is a no-op. */
SR_EXPORT void sr_pool_destroy(sr_pool *p);

/*
 * The step calls. Common rules:
 *
 * - One thread drives a pool: these calls (and sr_pool_checkpoint,
 *   sr_pool_restore, sr_pool_destroy) must not run concurrently on one
 *   pool. The pool's own workers are the only other threads involved.
 * - A batch (*out) is a view into the ring: valid until the next call on
 *   the pool; copy what must outlive it.
 * - The caller's buffers (actions, env_ids, mask) are read before the call
 *   returns and not kept.
 * - On a failed call the reason is in sr_last_error(). -EINVAL is always a
 *   refused call: nothing was stepped, the pool is unchanged. Any other
 *   error came from stepping: see each call, and these, common to the calls
 *   that return a batch (reset, step, reset_mask, recv):
 *   - a pool whose batches land on a device (sr_pool_opts.device CUDA):
 *     the device's errors, -EIO (a copy failed) or -ENOMEM; the envs
 *     were stepped, their batch is not returned;
 *   - process workers: a worker that crashes or hangs is not an error
 *     while the restart budget lasts (its rows come back flagged
 *     SR_SLOT_FAULT, the call returns 0), unless starting it again fails
 *     (the spawn's -errno, such as -EAGAIN or -ENOMEM, with the reason);
 *     past the budget -EOWNERDEAD, from this and every later call.
 *   A non-finite observation or reward is not an error either: the row is
 *   flagged SR_SLOT_NONFINITE (sr_batch.nonfinite counts them) and the
 *   first one is reported once on stderr and in sr_last_error().
 * - Blocking: a call that waits for workers spins briefly, then sleeps
 *   (futex); the calling thread steps worker 0's envs itself meanwhile
 *   unless the pool was planned without it (see docs/pool.md). Nothing
 *   here waits on I/O, and no call waits forever: every worker either
 *   publishes its rows or (process workers) is declared dead.
 */

/**
 * Reset every env.
 *
 * Sync pool: resets all envs on their workers and waits for them; *@out
 * gets every env, row i = env i, flags SR_SLOT_FIRST. Async pool: drops
 * whatever was in flight (results not yet received are discarded), queues
 * a reset of every env and returns without waiting (*@out, if not NULL,
 * is set to NULL); sr_pool_recv then returns the reset observations.
 *
 * Returns 0; -EINVAL (@p NULL; sync: @out NULL); -EOWNERDEAD (process
 * workers: a worker died past the restart budget, see stepring/proc.h;
 * every later call says the same); -ENOMEM.
 * Blocks (sync) until every env is reset; async: never.
 */
SR_EXPORT int sr_pool_reset(sr_pool *p, const sr_batch **out);

/**
 * Sync step: step every env once with @actions (num_envs actions of
 * sr_env_action_size bytes, row i for env i). Autoreset follows
 * sr_pool_opts.autoreset. *@out gets every env, row i = env i.
 *
 * Every action is checked before anything is stepped: discrete actions
 * outside [0, act_n) and NaN or infinite box values give -EINVAL. Finite
 * box values outside [act_low, act_high] are stepped: the env clips them
 * (as Gymnasium's Pendulum and MountainCarContinuous do).
 *
 * Returns 0; -EINVAL (NULL argument, an async pool, a bad action);
 * -EOWNERDEAD (process workers, as sr_pool_reset).
 * Blocks until every env has stepped and its row is published.
 */
SR_EXPORT int sr_pool_step(sr_pool *p, const void *actions, const sr_batch **out);

/**
 * Async: hand @n actions to envs @env_ids (NULL: the envs of the last batch
 * received, in its row order, and @n must be its size) and return at once;
 * the workers step them while the caller works. Each env takes one action
 * at a time: an env with an action in flight (sent, not yet received) is
 * refused. A whole group sent back (see the contract above) goes by the
 * group command path, any other set by per-env queues.
 *
 * Returns 0; -EINVAL (NULL @p or @actions, a sync pool, an env id out of
 * range or repeated or already in flight, @n wrong for env_ids NULL, a bad
 * action: nothing is sent); -EOWNERDEAD (process workers). @n == 0 sends
 * nothing and returns 0.
 * Never blocks on the workers (queues are sized for every env).
 */
SR_EXPORT int sr_pool_send(sr_pool *p, const void *actions, const uint32_t *env_ids, uint32_t n);

/**
 * Async: wait for batch_size envs whose step (or reset) finished and return
 * them in *@out; env_id says which env each row is. An env is returned once
 * per send. With batch groups the batch is the oldest group, whole.
 *
 * Returns 0; -EINVAL (NULL argument, a sync pool, fewer than batch_size
 * envs in flight: that recv could never complete); -EOWNERDEAD (process
 * workers).
 * Blocks until batch_size envs are ready; the calling thread steps worker
 * 0's share of them meanwhile.
 */
SR_EXPORT int sr_pool_recv(sr_pool *p, const sr_batch **out);

/**
 * Sync pool with autoreset DISABLED (or any sync pool): reset the envs where
 * @mask[i] != 0 (num_envs bytes); the others keep their episode and show
 * their current observation. *@out gets every env, row i = env i.
 *
 * Returns 0; -EINVAL (NULL argument, an async pool); -EOWNERDEAD (process
 * workers). Blocks as sr_pool_step.
 */
SR_EXPORT int sr_pool_reset_mask(sr_pool *p, const uint8_t *mask, const sr_batch **out);

/* sr_pool_reset_opts.flags: which members are set. */
enum {
	SR_RESET_F_MASK = 1u << 0,    /* reset only the envs where mask[i] != 0 */
	SR_RESET_F_SEED = 1u << 1,    /* reseed each reset env i from (seed, first_env + i) */
	SR_RESET_F_SEEDS = 1u << 2,   /* reseed each reset env i from (seeds[i], 0) first */
	SR_RESET_F_OPTIONS = 1u << 3, /* the env's reset options */
	SR_RESET_F_PAYLOAD = 1u << 4, /* process pools: bytes for each worker's reset */
};

typedef struct sr_pool_reset_opts {
	uint32_t flags;
	uint32_t reserved0;
	const uint8_t *mask;      /* SR_RESET_F_MASK: num_envs bytes */
	uint64_t seed;            /* SR_RESET_F_SEED: as sr_pool_opts.seed (a fresh
				   * pool of this seed starts the same episodes) */
	const uint64_t *seeds;    /* SR_RESET_F_SEEDS: num_envs seeds (equal seeds,
				   * equal episodes, as Gymnasium's seed lists) */
	const uint8_t *seed_mask; /* with SEEDS: reseed only where != 0 (NULL: all) */
	const char *options;      /* SR_RESET_F_OPTIONS: "key=value,...", Gymnasium's
				   * reset options of the env: "low", "high" for
				   * CartPole, Acrobot, MountainCar(Continuous);
				   * "x_init", "y_init" for Pendulum. They apply to
				   * this reset only (autoresets use the defaults) */
	/* SR_RESET_F_PAYLOAD (process pools, SR_POOL_F_PROCS): payload_len bytes,
	 * at most SR_PROC_RESET_PAYLOAD_MAX, copied into the command block and
	 * handed to every worker with this reset (sr_proc_cmd.payload): the
	 * Python worker reads a pickled options dict for its envs' reset. Read
	 * only when the flag is set (callers built before it never set it). */
	const void *payload;
	size_t payload_len;
} sr_pool_reset_opts;

/** Zeroes: a plain reset of every env. */
SR_EXPORT void sr_pool_reset_opts_init(sr_pool_reset_opts *o);
/**
 * Reset with options (sync pools; an async pool takes flags 0 only, which is
 * sr_pool_reset): reseed, then reset, the envs of the mask (all without
 * one); the others keep their episode and show their current obs. Every
 * option is checked before anything changes: -EINVAL (unknown flag, NULL
 * member, SEED with SEEDS, an env without reset options, an unknown or
 * non-finite option, low > high, a payload on a thread pool or beyond
 * SR_PROC_RESET_PAYLOAD_MAX), the reason in sr_last_error(). Process pools
 * carry the seeds, options and payload to their workers in the command
 * block (no restart): a C worker reseeds and resets its envs exactly as a
 * thread pool does, so the rows are the same.
 */
SR_EXPORT int sr_pool_reset_ex(sr_pool *p, const sr_pool_reset_opts *o, const sr_batch **out);

/**
 * Set env parameters ("gravity=12,force_mag=5": the ones of the env type
 * with SR_ENV_PARAM_LIVE, sr_env_param_at) of every env of a sync pool with
 * its envs on threads, between steps: the next step (and reset) uses them,
 * as a Gymnasium env's next step uses an attribute set on it. One value per
 * pool: the pool's copy of the spec holds it (sr_pool_info's spec reads it
 * back). Checked before anything changes: -EINVAL for an unknown or
 * read-only parameter, a non-finite value, an async pool (envs in flight);
 * -ENOTSUP for process workers (each keeps the spec it started with). A
 * checkpoint records the parameters: it restores into a pool with the same.
 */
SR_EXPORT int sr_pool_set_params(sr_pool *p, const char *params);

/* What a pool is, from sr_pool_info_get(). Fields may be added at the end:
 * a caller sets size to the sizeof it was compiled with. */
typedef struct sr_pool_info {
	uint32_t size;            /* in: sizeof(sr_pool_info) as the caller knows it */
	uint32_t num_envs;
	uint32_t num_threads;     /* workers; worker 0 runs on the calling thread
				   * unless the pool was planned without it */
	uint32_t batch_size;      /* rows per batch: num_envs for a sync pool */
	uint32_t batch_groups;    /* async: how many batch groups the envs form
				   * (num_envs / batch_size when batch_size divides
				   * num_envs and is at least num_threads: sends of a
				   * whole batch then go by group, see the contract
				   * above); 0 for a sync pool or a batch that does
				   * not tile the envs */
	uint32_t autoreset;       /* enum sr_autoreset */
	uint32_t device;          /* SR_DEVICE_HOST or SR_DEVICE_CUDA (AUTO resolved) */
	uint32_t reserved0;
	uint64_t first_env;       /* the global index of env 0 (SR_POOL_F_FIRST_ENV), or 0 */
	const sr_env_spec *spec;  /* the env; valid for the pool's life */
	sr_ring *ring;            /* the ring the batches are views of (replay reads
				   * it); owned by the pool */
	const char *threads_note; /* how the thread count was chosen, for people:
				   * "1 (default: 8 envs x 31 ns a step = 0.2 us a
				   * batch; ...)" or "4 (asked for)"; valid for the
				   * pool's life */
} sr_pool_info;

/**
 * Describe @p into @info: set info->size first; the library fills what
 * both sides know and zeroes the rest. Returns 0, or -EINVAL (NULL
 * argument, info->size smaller than the first two fields). Pool thread,
 * like every call on the pool; never blocks.
 */
SR_EXPORT int sr_pool_info_get(const sr_pool *p, sr_pool_info *info);

typedef struct sr_pool_stats {
	uint64_t steps;           /* env steps since create */
	uint64_t episodes;        /* finished episodes */
	double mean_return;       /* over the last 100 finished episodes */
	double mean_length;
	/* Time breakdown, nanoseconds summed over workers / the collector. */
	uint64_t ns_env_step;
	uint64_t ns_ring_publish;
	uint64_t ns_collect;      /* forming batches (recv / step), less the waits */
	uint64_t ns_wait;         /* workers idle; recv waiting for the workers */
	uint64_t ns_send;         /* async: in sr_pool_send (checking and queueing actions) */
	/* The finite check (SR_POOL_F_CHECK_FINITE). Non-finite rewards never
	 * enter mean_return (with or without the check). */
	uint64_t nonfinite_rows;  /* rows flagged SR_SLOT_NONFINITE since create */
	int64_t nonfinite_env;    /* the env of the first one (index), or -1 */
	uint32_t check_finite;    /* 1: the check is on */
	uint32_t reserved0;
} sr_pool_stats;

SR_EXPORT int sr_pool_stats_get(const sr_pool *p, sr_pool_stats *out);

/* Process workers' faults (SR_POOL_F_PROCS; all zero otherwise). */
typedef struct sr_pool_faults {
	uint64_t faults;      /* worker processes that died or hung */
	uint64_t restarts;    /* worker processes started again */
	uint64_t fault_rows;  /* rows published as SR_SLOT_FAULT (interrupted env steps) */
	char last[1024];      /* the last fault: envs, worker, pid, cause; or "" */
} sr_pool_faults;

/** Fault counters of a pool; 0 or -EINVAL. */
SR_EXPORT int sr_pool_faults_get(const sr_pool *p, sr_pool_faults *out);

/**
 * Process pools: worker @worker's out area in the command block
 * (sr_pool_opts.worker_out_size bytes; the worker's sr_proc_info.out),
 * where a worker leaves what the trainer reads after a command (the Python
 * worker: its envs' non-empty info dicts, pickled). *@out is NULL and
 * *@size 0 without one. Read it between commands: a worker writes it while
 * it runs one, and its completion (acquired before step / reset return)
 * orders the writes before. The area of a worker that faulted holds
 * whatever it wrote before it died. 0, or -EINVAL (NULL argument, not a
 * process pool, worker out of range).
 */
SR_EXPORT int sr_pool_worker_out(const sr_pool *p, uint32_t worker, void **out, size_t *size);

/* One worker's share of the statistics: in sync mode every batch waits for
 * the slowest worker, so a worker whose steps cost more per env (another
 * process on its CPU, a slower core) shows here first. */
typedef struct sr_pool_worker_stats {
	uint64_t steps;           /* env steps this worker made (resets included) */
	uint64_t ns_env_step;     /* inside the env's step / reset */
	uint64_t ns_ring_publish; /* reservation, bookkeeping, publishing */
	uint64_t ns_idle;         /* waiting for work (worker 0 inline: not stepping) */
	uint32_t first_env;       /* its envs: [first_env, first_env + num_envs) */
	uint32_t num_envs;
	int32_t cpu;              /* the CPU it is bound to, or -ENOENT when it is not
				   * bound to one CPU (bind numa or none; worker 0,
				   * the calling thread, unless SR_POOL_F_BIND_CALLER) */
	uint32_t rows;            /* envs it steps now in each sync batch (batch
				   * groups: each round of the groups): its own
				   * less or plus what rebalancing moved to or from
				   * its neighbours (docs/tuning.md);
				   * async per-env queues: num_envs */
	int32_t pid;              /* SR_POOL_F_PROCS: the worker's process id (-1
				   * while it is restarted); 0 for a thread */
	uint32_t restarts;        /* SR_POOL_F_PROCS: times it was restarted */
} sr_pool_worker_stats;

/** Statistics of worker @worker (0 .. num_threads - 1); -EINVAL
 * for a worker that does not exist. Counters are read without stopping the
 * worker (each is exact, the set is not a snapshot). */
SR_EXPORT int sr_pool_worker_stats_get(const sr_pool *p, uint32_t worker,
				       sr_pool_worker_stats *out);

#ifdef __cplusplus
}
#endif
#endif

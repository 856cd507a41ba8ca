/*
 * Internal layout of a pool (runtime/pool.c, worker.c, collector.c).
 *
 * This header is the contract for code that needs to look inside a pool:
 * the checkpoint engine snapshots and restores the env states, the
 * elapsed-step counters, the episode accumulators and the statistics; the
 * collector lands batches on the host or on an sr_device (collector.c).
 *
 * OWNERSHIP (see docs/pool.md for the whole design)
 *
 *  - Env i belongs to exactly one worker for the life of the pool: worker w
 *    owns the contiguous slice [w->first_env, w->first_env + w->n_envs).
 *    Its state bytes live in w->states (one allocation per worker, first
 *    touched by the bound worker thread), together with the per-env
 *    bookkeeping, as arrays indexed by i - first_env (struct of arrays,
 *    so the per-step bookkeeping runs as vector loops): prev_seq,
 *    elapsed, done, done_term, done_trunc, ep_ret, ep_len.
 *  - Worker 0 is "inline": the thread that calls sr_pool_step/recv/reset
 *    steps worker 0's slice itself. Workers 1..T-1 are pthreads bound by
 *    the placement plan. So num_threads = T uses T CPUs, not T + 1.
 *  - Episode accumulators (w->ep_ret / ep_len: return, length) are updated
 *    by the env's worker as it steps; a finished episode goes into the
 *    worker's SPSC episode queue, and the pool thread merges those into the
 *    statistics window (pool->stats) after each batch.
 *
 * QUIESCENT POINTS: between two pool calls in sync mode, and in async mode
 * once every sent env has been received (n_inflight == 0: a worker
 * publishes same-step extras before the rows, and touches no env state
 * after publishing them), no worker touches any of this, so the checkpoint
 * engine may read or write it from the calling thread. sr__pool_quiesce()
 * forces such a point in async mode by waiting for and DROPPING the
 * results in flight (what sr_pool_reset does).
 */
#ifndef SR_POOL_INTERNAL_H
#define SR_POOL_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>

#include "sr_base.h"
#include "stepring/pool.h"
#include "stepring/device.h"
#include "stepring/stats.h"

/*
 * Placement plan (affinity.c, the only file that includes hwloc.h).
 * Worker w runs on plan->w[w]; worker 0 is the calling thread, which the
 * pool does not bind (its entry says where it should live).
 */
struct sr__plan_worker {
	int32_t cpu;    /* OS index of the PU it is bound to (bind core), or -1 */
	int32_t core;   /* logical index of its core, or -1 (bind none) */
	int32_t numa;   /* OS index of its NUMA node, or -1 */
	int32_t pack;   /* logical index of its package, or -1 */
	char cpus[256]; /* cpuset it is bound to, as a list ("0-7"), "" = unbound */
};

struct sr__plan {
	uint32_t nthreads; /* workers planned */
	uint32_t ncores;   /* cores with at least one allowed PU */
	uint32_t npus;     /* allowed PUs */
	uint32_t nnuma;    /* NUMA nodes holding allowed PUs */
	uint32_t bind;     /* enum sr_bind */
	char allowed[256]; /* allowed cpuset as a list */
	char near[256];    /* CPUs near the batch's device as given, or "" */
	char warning[256]; /* non-fatal remark ("2 threads per core"), or "" */
	struct sr__plan_worker w[]; /* nthreads */
};

/*
 * Compute the placement plan. @topology: NULL for this machine, an hwloc
 * synthetic description ("pack:2 numa:2 core:8 pu:2") or the path of an
 * hwloc XML export (ends in ".xml"). @cpuset: NULL or a list like "0-3,8"
 * restricting the PUs (like taskset -c). @num_threads: 0 = one per allowed
 * physical core. Workers are spread over the NUMA nodes in proportion to
 * their allowed cores, then over cores in order; more threads than cores
 * use the second PU of each core (warning), more threads than PUs is
 * -EINVAL. @near: NULL or a list of the CPUs near the device the batches
 * go to (a GPU's local CPUs): worker 0 (the calling thread, which is the
 * collector) is then the planned worker that runs there, the first one in
 * plan order, by exchanging two entries (the spread is unchanged); with
 * no planned worker there, plan->warning says so. Ignored with bind none.
 * Pure: reads the topology, binds nothing. Returns 0, -EINVAL (bad
 * description, cpuset, near list, thread count), -ENOMEM; *@out is freed
 * with sr__plan_free().
 */
int sr__plan_compute(const char *topology, const char *cpuset, const char *near,
		     uint32_t num_threads, uint32_t bind, struct sr__plan **out);
void sr__plan_free(struct sr__plan *plan);
/* Print the plan as text, one line per worker. */
void sr__plan_print(const struct sr__plan *plan, FILE *f);
/* Bind the calling thread as worker @w of @plan says (no-op for bind none
 * or empty cpus). 0 or -errno (the pool treats failure as a warning). */
int sr__bind_self(const struct sr__plan_worker *w);
/* The CPUs worker @w of a plan is bound to, as a cpu_set_t (empty: not
 * bound). 0, -EINVAL, -ENOMEM. */
int sr__plan_cpuset(const struct sr__plan_worker *w, cpu_set_t *out);

#define SR__EPWIN 100 /* episode statistics window */
#define SR__DRAIN_MIN 128 /* async: a worker thread's drains are not capped below this */

/* Entries of an async queue: env index, plus this bit for "reset it". */
#define SR__Q_RESET 0x80000000u

/* An env's reset with bounds (Gymnasium's reset options; envs.h). */
typedef void (*sr__reset_fn)(const sr_env_spec *spec, void *states, size_t n, const double *b,
			     float *obs);

/*
 * Worker command k of the pool thread (worker.c; collector.c, "Batch
 * groups"), in p->cmds.rec[k % p->cmds.ngroups]: a sync step, reset or reset mask
 * (a sync pool has one group), or an async batch group's step or reset.
 * Written before the release store of p->cmds.sent = k + 1; the slot is
 * rewritten for command k + G only after every worker has finished
 * command k (its batch was received).
 */
struct sr__grp_cmd {
	/* Each record on lines of its own (pool.c create_commands): the
	 * workers read one while the pool thread writes the next. */
	_Alignas(SR_CACHELINE) uint32_t g; /* group: every worker's local envs
					    * [g * m, (g + 1) * m) */
	uint32_t reset;      /* 1: reset those envs, 0: step them */
	uint64_t seq;        /* first slot of the group's batch_size contiguous slots */
	const unsigned char *acts; /* step: batch_size * act_size, in batch row order:
				    * acts_buf (async), or the caller's array (sync:
				    * the call returns after the command is done) */
	const uint8_t *mask; /* reset: NULL (every env), or one byte per env of the
			      * pool: 0 = observed only, a SR_SLOT_PAD slot (sync) */
	/* reset with reset options (sr_pool_reset_ex): the env's bounded
	 * reset and its bounds; NULL: spec.reset. */
	sr__reset_fn reset_fn;
	double reset_b[2];
	unsigned char *acts_buf; /* async: the command's copy of the actions */
	int32_t *shift;      /* num_threads: rebalancing's boundaries for this
			      * command (see sr__rebalance.shift), fixed at its send */
	uint32_t kgen;       /* the worker kind's own number for the command
			      * (process workers: its record in the command block) */
};

/*
 * A kind of worker: the seam between the pool and what steps its envs.
 *
 * A worker is a thing that receives commands and publishes slots, in sync
 * and in async mode alike:
 *  - commands (sync steps, resets and reset masks; async batch groups):
 *    the pool thread reserves a command's slots on the ring and writes the
 *    command (p->cmds.rec[k % ngroups]: a step with actions, or a reset,
 *    optionally masked), then `send`s it; the workers step or reset their
 *    envs straight into their rows of those slots and publish them (the
 *    ring's R1); `wait` returns when command k is done and every one of its
 *    rows is published, and the collector then consumes them. Several
 *    commands may be in flight (batch groups: one per group).
 *  - ragged async sends (envs that are not a whole group): `send_envs`
 *    hands the workers a set of envs with their actions; each env's result
 *    row is published in the ring when it is stepped, and the collector
 *    returns rows in ring order, calling `advance` while the row it needs
 *    next is not published.
 * Finished episodes come back through `episodes`. The pool (pool.c,
 * collector.c), its statistics and its teardown go through p->workers.kind only.
 *
 * Kinds:
 *  - sr__kind_thread (worker.c): worker 0 inline on the pool thread,
 *    workers 1..T-1 pthreads bound by the placement plan, sleeping on
 *    their go word; envs in this process. Ragged sends go through per-env
 *    SPSC queues and a per-env action mailbox.
 *  - sr__kind_proc (pool_procs.c): worker processes attached to the ring
 *    and to a command block in shared memory (runtime/proc.h), worker 0
 *    optionally inline; every command and every ragged send is a record
 *    of the block's command ring; a worker that dies or hangs is a fault:
 *    its rows are published as SR_SLOT_FAULT and it is restarted.
 * A pool member on another MPI rank would be one more kind.
 */
struct sr__env_recs;
struct sr__worker_kind {
	const char *name;
	/* The envs' states live in this process (sr__env_state): checkpoints,
	 * reset seeds and reset options need it. */
	bool local_state;
	/* Start the workers: each one's envs created and seeded, ready for
	 * commands. 0 or -errno (stop still runs, from sr_pool_destroy). */
	int (*start)(sr_pool *p, const sr_pool_opts *o);
	/* Send command p->cmds.issued, written by the caller, and count it
	 * issued. 0, or -errno when the workers cannot take it (process
	 * workers past their restart budget: nothing was issued). Pool thread. */
	int (*send)(sr_pool *p);
	/* Wait until command @k is done and its rows published; *@t: the
	 * clock at the end. 0, or -errno when the command faulted (its rows
	 * are published all the same, some as SR_SLOT_FAULT). Pool thread. */
	int (*wait)(sr_pool *p, uint64_t k, uint64_t *t);
	/* Async, a ragged send: step envs @ids[0 .. @n) with @actions (in the
	 * same order, act_size bytes each), or with @actions NULL reset them;
	 * @ids NULL: envs 0 .. n-1. The pool has checked the ids and the
	 * actions and marked the envs in flight. 0 or -errno (nothing sent).
	 * Pool thread. */
	int (*send_envs)(sr_pool *p, const void *actions, const uint32_t *ids, uint32_t n);
	/* Async recv and drain: the collector needs ring slot @pos. Run up to
	 * @max envs of the work queued for an inline worker 0 and return how
	 * many (> 0); with none to run, wait until slot @pos is published
	 * (or, process workers, until the oldest command in flight is done)
	 * and return 0, adding the wait to *@tw; -errno when the workers
	 * failed for good. Pool thread. */
	int (*advance)(sr_pool *p, uint64_t pos, uint32_t max, uint64_t *tw);
	/* Merge the episodes the workers finished into p->stats. Pool thread. */
	void (*episodes)(sr_pool *p);
	/* Stop the workers and free what start made (a partial start too). */
	void (*stop)(sr_pool *p);
	/* Optional (NULL: nothing to add): worker @w's process id and
	 * restarts into @out; the pool's faults into @out (zeroed by the
	 * caller). */
	void (*worker_info)(const sr_pool *p, uint32_t w, sr_pool_worker_stats *out);
	void (*faults)(const sr_pool *p, sr_pool_faults *out);
	/* Checkpoints of envs that live in the workers (local_state false;
	 * NULL: none). ckpt_save: every env's state record and bookkeeping,
	 * in env order (ckpt_internal.h). ckpt_load: put them in the workers,
	 * all or none, and @steps as the step count. Pool thread, quiescent. */
	int (*ckpt_save)(sr_pool *p, struct sr__env_recs *out);
	int (*ckpt_load)(sr_pool *p, const struct sr__env_recs *in, uint64_t steps);
	/* Optional, kinds without local_state (NULL: sr_pool_reset_ex refuses
	 * seeds and options): the next command, a reset, carries @o's seeds,
	 * seed mask and payload, and with @b (the parsed SR_RESET_F_OPTIONS)
	 * the reset options, to the workers; @o was checked (NULL: forget
	 * them, the reset was not sent). Pool thread. */
	void (*reset_next)(sr_pool *p, const sr_pool_reset_opts *o, const double *b);
};
extern const struct sr__worker_kind sr__kind_thread, sr__kind_proc;

struct sr__worker {
	/* --- read-mostly, set at create --- */
	struct sr_pool *pool;
	uint32_t index;
	uint32_t first_env;
	uint32_t n_envs;
	int32_t cpu;      /* bound CPU (bind core) or -1 */
	pthread_t thread; /* unused for worker 0 (inline) */
	bool started;
	uint32_t *q;      /* async queue entries (see below) */
	uint32_t q_mask;
	uint32_t grp_m;   /* envs of this worker in each group, >= 1 (batch_size >=
			   * threads; sync: its slice); 0: no groups */
	uint32_t grp_off; /* ... and the batch row of the first of them */

	/* Memory owned by the worker, allocated by its own thread after it is
	 * bound (first touch puts it on the worker's NUMA node). */
	void *mem;                  /* one allocation holding everything below */
	unsigned char *states;      /* n_envs * spec.state_size */
	/* Per-env bookkeeping, index i - first_env (see OWNERSHIP). */
	uint64_t *prev_seq;         /* ring seq of the env's last slot (SR_RING_NO_PREV after reset) */
	uint32_t *elapsed;          /* steps since the last reset: TimeLimit truncation */
	uint8_t *done;              /* the last step ended the episode (terminated | truncated) */
	uint8_t *done_term;         /* ... by termination (DISABLED mode repeats it) */
	uint8_t *done_trunc;        /* ... by truncation */
	double *ep_ret;             /* return of the current episode so far */
	uint64_t *ep_len;           /* its length */
	uint8_t *need;              /* bookkeeping scratch: rows that need the slow path */
	double *reward_scratch;     /* n_envs: the env writes double rewards */
	uint32_t *run_env;          /* 3 * n_envs: async drain runs (lo, len, seq offset) */
	uint8_t *mark;              /* n_envs: async drain, envs popped (1 step, 2 reset) */
	uint32_t *done_loc;         /* n_envs: SAME_STEP envs that finished this slice */
	uint64_t *done_seq;         /* ... and their slot sequences */
	uint32_t *fix;              /* 2 * n_envs: bookkeeping, the rows that need more */
	int alloc_err;

	/* --- finished episodes: SPSC, this worker produces (release on
	 * eps_head), the pool thread merges (acquire). Capacity >= n_envs:
	 * between two merges an env finishes at most one episode. --- */
	double *eps;               /* 2 per entry: return, length */
	uint32_t eps_mask;
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_head;
	uint32_t eps_tail_seen;    /* worker's copy of eps_tail (reloaded when full) */
	uint64_t eps_dropped;      /* never expected; counted, not stored */
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_tail; /* written by the pool thread */

	/* --- async queue: single producer (pool thread), single consumer
	 * (this worker). Free-running indices; capacity >= n_envs, and an env
	 * is never queued twice, so it cannot overflow. q and q_mask are
	 * with the read-mostly fields above. --- */
	uint32_t q_next; /* pool thread: next entry to write; published as q_head at the kick */
	_Alignas(SR_CACHELINE) _Atomic uint32_t q_head; /* written by the pool thread */
	_Alignas(SR_CACHELINE) _Atomic uint32_t q_tail; /* written by the worker */

	/* --- commands this worker has finished. grp_next is
	 * its own (the pool thread's for inline worker 0); grp_done is stored
	 * (release) after the group's rows are published, for recv. --- */
	uint64_t grp_next;
	_Alignas(SR_CACHELINE) _Atomic uint64_t grp_done;

	/* --- wake-up word: the pool thread bumps it (release) after setting
	 * a command; the worker futex-waits on it. --- */
	_Alignas(SR_CACHELINE) _Atomic uint32_t go;
	_Atomic uint32_t sleeping; /* worker is (about to be) in futex_wait(go) */

	/* --- counters, written by this worker only (relaxed), read by
	 * stats and the shm block --- */
	_Alignas(SR_CACHELINE) _Atomic uint64_t steps;
	_Atomic uint64_t ns_env;   /* inside spec->step / reset */
	_Atomic uint64_t ns_ring;  /* reserve, bookkeeping, publish */
	_Atomic uint64_t ns_idle;  /* spinning or sleeping; inline worker 0: not stepping */
	_Atomic uint64_t nonfinite; /* rows it flagged SR_SLOT_NONFINITE */
	uint64_t mark_ns, mark_busy; /* inline worker 0: wall clock and busy time at the last account */
	sr_stats_worker *shm;      /* this worker's slot in the stats block, or NULL */
	char pad_end[SR_CACHELINE];
};

/*
 * Commands to the workers (worker.c; pool.c writes them): command k is
 * rec[k % ngroups], written by the pool thread before the release store
 * of sent = k + 1. rec and ngroups are read-mostly (set at create); sent
 * is on a line of its own, with issued, which the pool thread writes with
 * it, so that the workers' read-mostly lines stay clean.
 */
struct sr__cmds {
	struct sr__grp_cmd *rec; /* ngroups records, or NULL */
	uint32_t ngroups;        /* num_envs / batch_size (sync: 1), or 0 (async batches
				  * that do not tile the envs: no commands) */
	/* Published (release, by the pool thread; acquire, by the workers). */
	_Alignas(SR_CACHELINE) _Atomic uint64_t sent;
	uint64_t issued;         /* commands written (sent's value; pool thread) */
};

/*
 * Rebalancing (worker.c rebalance, at each step command; pool thread):
 * shift[w] moves the boundary between the rows stepped by workers w and
 * w+1 (> 0: worker w steps the first shift[w] envs of w+1's share; < 0:
 * w+1 steps the last -shift[w] of w's); shift[T-1] is 0. A command's
 * shares are the workers' envs of its group (sync: the slices); each
 * command takes a copy at its send (sr__grp_cmd.shift), which is what the
 * workers read, so this part is the pool thread's alone (sr__worker_rows
 * reads shift relaxed from any thread, for statistics).
 */
struct sr__rebalance {
	bool on;               /* set at create: sync steps and batch groups move them */
	_Atomic int32_t *shift; /* num_threads */
	uint32_t n;            /* step commands since the last look */
	uint64_t *mark;        /* 2 per worker at the last look: steps, ns_env + ns_ring */
	double *inv;           /* per worker: steps per busy ns since the last look */
};

/*
 * Placement (pool.c at create, from affinity.c's plan; read-only after):
 * where each worker runs and which worker owns each env.
 */
struct sr__placement {
	struct sr__plan *plan; /* affinity.c */
	bool caller_bound;     /* SR_POOL_F_BIND_CALLER bound the calling thread (worker 0) */
	uint32_t *env_worker;  /* num_envs: env -> worker index */
};

/*
 * The stats block in shared memory (stats_shm.c; SR_POOL_F_RING_NAME), for
 * `stepring top`: blk is NULL without one.
 */
struct sr__stats_block {
	struct sr_stats_shm *blk;
	size_t len;
	char *name;
	int fd;            /* holds the block's creator lock (liveness) */
	uint64_t start_ns; /* when the pool was created */
};

/*
 * Async sends in flight (pool.c sends, collector.c receives; pool thread
 * only): which envs have an action out, the last batch (a send with env
 * ids NULL sends it back), and the batch groups' progress.
 */
struct sr__flight {
	uint8_t *inflight;    /* num_envs: env sent and not yet received */
	uint32_t n_inflight;
	uint32_t *last_ids;   /* env ids of the last batch (send with NULL) */
	uint32_t last_n;
	bool sent_since_recv; /* a send came after the last recv */
	bool grp_on;          /* everything in flight is batch groups (recv by group) */
	int32_t grp_last;     /* group of the last batch, or -1 */
	uint64_t grp_recvd;   /* commands whose batch recv returned (grp_on) */
};

/*
 * The collector (collector.c; pool thread only): the batch it exposes,
 * the device the batch goes to, and the pool thread's own timing and
 * batch latencies (stats, the stats block, rebalancing).
 */
struct sr__collector {
	sr_device *dev;      /* CUDA: where batches land (land_batch); NULL: host */
	sr_device_batch *cur; /* the device batch `batch` shows, or NULL */
	void *stage;         /* staging columns of max rows: copies and gathers */
	float *obs, *reward;
	uint32_t *env_id;
	uint8_t *term, *trunc;
	uint32_t dev_kind;   /* enum sr_device_kind asked for */
	int32_t dev_index;
	uint64_t *gather;    /* batch_size seqs when a batch is not one range */
	float *final_stage;  /* async: final obs rows in batch order */
	uint64_t ns_collect, ns_wait, ns_send;
	sr_batch batch;
	double lat_us[256];  /* recent batch latencies for the stats block */
	uint32_t lat_n;
	uint64_t call_t0;    /* async: when the last send returned (0: none) */
};

/*
 * Episode statistics (collector.c, pool thread; checkpointed): the last
 * SR__EPWIN finished episodes, merged from the workers' episode queues
 * after each batch, and the batches returned.
 */
struct sr__ep_stats {
	double ret[SR__EPWIN], len[SR__EPWIN]; /* ring of the last ones: return, length */
	uint64_t episodes;                     /* finished since create (or as restored) */
	uint64_t batches;                      /* batches returned */
};

/* A finished episode into the window. */
static inline void sr__ep_stats_add(struct sr__ep_stats *s, double ret, double len)
{
	uint32_t k = (uint32_t)(s->episodes % SR__EPWIN);

	s->ret[k] = ret;
	s->len[k] = len;
	s->episodes++;
}

/*
 * The finite check (SR_POOL_F_CHECK_FINITE; collector.c, "Finite check").
 * on is read by the workers for every row range they write; the rest is
 * written at most once (first, told) or only with process workers
 * (pool_rows), so the line stays clean in the workers' caches.
 */
struct sr__finite {
	bool on;                  /* set at create */
	bool told;                /* pool thread: the first one was reported */
	/* The first non-finite row, as 1 + its env index | SR__NF_OBS /
	 * SR__NF_REW (what was not finite); 0: none yet. Set once
	 * (compare-exchange from 0) by whichever thread finds it. */
	_Atomic uint64_t first;
	uint64_t pool_rows;       /* pool thread: rows it flagged (process workers) */
};

/*
 * Configuration (pool.c sr_pool_create, from the options and the
 * environment): written by the creating thread before any worker starts,
 * read-only after, by every thread. No ordering of its own: a worker
 * thread sees it through pthread_create, a worker process gets what it
 * needs in its start options (pool_procs.c). It is the first thing in the
 * pool, on lines that are never written while the pool runs.
 */
struct sr__pool_cfg {
	sr_env_spec spec;
	uint32_t num_envs, num_threads, batch_size;
	char threads_note[200]; /* how num_threads was chosen (sr_pool_info) */
	bool async;             /* batch_size < num_envs */
	uint32_t autoreset;     /* enum sr_autoreset */
	bool keep_final;        /* final_obs kept (SAME_STEP or SR_POOL_F_FINAL_OBS) */
	uint64_t seed;
	uint64_t env_base;      /* SR_POOL_F_FIRST_ENV: global index of env 0 (seeding only) */
	uint32_t knobs;         /* SR__KNOB_* */
	size_t act_size;        /* bytes of one env's action */
	uint32_t obs_dim;
	uint32_t spin_iters;    /* spin before futex_wait */
	uint32_t max_slice;     /* the most envs any worker owns */
};

/*
 * The ring and its columns (pool.c at create; read-only after, by every
 * thread). The column pointers are cached because every row range a
 * worker or the collector touches goes through them. The slots they
 * point into are ordered by the ring's protocol (reserve, publish R1,
 * consume: stepring/ring.h), not by this part.
 */
struct sr__ring_cols {
	sr_ring *r;
	uint64_t cap; /* slots, a power of two */
	float *obs, *rew;
	uint8_t *act, *term, *trunc, *flags;
	uint32_t *env;
	uint64_t *prev;
};

/*
 * The workers (worker.c for threads, pool_procs.c for processes). kind, w
 * and first_thread are set at create and read-only after; each record in
 * w says who writes which of its fields (struct sr__worker). stop and
 * n_ready are the thread kind's lifecycle words: written once per worker
 * (n_ready) or once (stop), on the same read-mostly line.
 */
struct sr__workers {
	const struct sr__worker_kind *kind; /* what the workers are (threads, processes) */
	struct sr__worker *w;  /* num_threads records; w[0] is inline unless SR__KNOB_NO_INLINE */
	uint32_t first_thread; /* 1: worker 0 runs on the calling thread; 0: all are threads */
	/* Set by thread_stop (relaxed) before it kicks every worker; a worker
	 * reads it after waking (ordered by the go word's acquire, G1). */
	_Atomic uint32_t stop;
	/* Worker threads that have allocated their memory: each adds 1 once
	 * (release, S0); the creating thread waits for all (acquire, S1). */
	_Atomic uint32_t n_ready;
};

/*
 * The pool thread's wake-up word (worker.c, E0/E1): a worker thread bumps
 * evt after each publish (and once when it has started); the pool thread,
 * when it has spun enough, sets sleeping and futex-waits on evt. seq_cst
 * on both sides (Dekker). On a line of its own: every drain writes it.
 */
struct sr__recv_wake {
	_Atomic uint32_t evt;
	_Atomic uint32_t sleeping;
};

/*
 * Buffers beside the ring (pool.c at create). The pointers and drain_max
 * are set at create and read by the workers: a line of their own, not the
 * wake word's (bumped by every drain) nor the flight's (written by every
 * call). What they point to:
 *  - async_act, num_envs * act_size: an env's action, written by the pool
 *    thread before it queues the env, read by the env's worker after the
 *    queue's acquire (A0/A1, worker.c).
 *  - final_env, num_envs * obs_dim (keep_final): an env's final
 *    observation, written by the env's worker before it publishes the
 *    env's row, read by the collector after the ring's acquire (R1).
 *    Process workers: the command block's (pool_procs.c).
 */
struct sr__side {
	unsigned char *async_act;
	uint32_t drain_max; /* async: most envs a worker thread steps per reservation */
	float *final_env;
};

struct sr_pool {
	struct sr__pool_cfg cfg; /* set at create, read-only after */
	struct sr__placement place; /* where the workers run */
	struct sr__ring_cols ring;  /* the ring and its columns */
	struct sr__workers workers; /* what the workers are, their records */
	struct sr__finite fin; /* the finite check (read by the workers; written rarely) */

	_Alignas(SR_CACHELINE) struct sr__recv_wake wake; /* a line of its own */
	_Alignas(SR_CACHELINE) struct sr__side side;      /* a line of its own */

	struct sr__cmds cmds; /* commands to the workers */

	/* --- async sends in flight (pool.c send, collector.c recv; pool
	 * thread only) --- */
	_Alignas(SR_CACHELINE) struct sr__flight flight;

	struct sr__rebalance rb;  /* the shares' boundaries */
	struct sr__collector col; /* the batch, its device, the pool thread's timing */

	struct sr__ep_stats stats; /* episodes and batches (collector.c) */

	/* --- checkpoint state (pool_ckpt.c), made at the first checkpoint,
	 * or NULL; pool thread only --- */
	struct sr__pool_ckpt *ckpt;

	/* --- process workers (SR_POOL_F_PROCS, pool_procs.c), or NULL --- */
	struct sr__procs *procs;
	uint8_t *procs_mark;      /* async: num_envs, a ragged send's envs (scratch) */

	struct sr__stats_block shm; /* the stats block in shared memory */
};

/* The record of command @k. The group count is usually a power of two (1
 * for a sync pool): a mask then, not a 64-bit division (tens of cycles, on
 * the path of every command, several times). */
static inline struct sr__grp_cmd *sr__cmd_rec(const sr_pool *p, uint64_t k)
{
	const uint32_t n = p->cmds.ngroups;

	return &p->cmds.rec[(n & (n - 1)) == 0 ? k & (n - 1) : k % n];
}

/*
 * Experiment knobs: ways of running a pool that benchmarks compare against
 * the default, not options a user needs (docs/tuning.md). sr_pool_create
 * reads them from STEPRING_POOL_KNOBS (a comma list of the names below);
 * tests pass them to sr__pool_create_knobs.
 */
enum {
	SR__KNOB_NO_INLINE = 1u << 0,       /* "no-inline": worker 0 is a thread too; the
					     * calling thread only sends, collects and
					     * waits (one more thread than CPUs planned) */
	SR__KNOB_NO_BATCH_GROUPS = 1u << 1, /* "no-batch-groups": async per-env queues
					     * only (recv returns whichever envs are
					     * ready first) */
	SR__KNOB_NO_REBALANCE = 1u << 2,    /* "no-rebalance": each worker steps exactly
					     * its own envs */
};
/* Parse a knob list ("no-inline,no-rebalance"; NULL or "": none); 0 or
 * -EINVAL naming the unknown word. */
int sr__pool_knobs_parse(const char *s, uint32_t *out);
/* sr_pool_create with @knobs instead of the environment's. */
int sr__pool_create_knobs(const sr_pool_opts *o, uint32_t knobs, sr_pool **out);

/* --- worker.c (the thread kind's internals) --- */
/* The state of env @env (in its owner worker's memory): the pool thread may
 * touch it between commands only. */
void *sr__env_state(sr_pool *p, uint32_t env);
/* Envs worker @w steps now in each round of the commands (each sync
 * step; async, one command per group): its envs and the shifts at its two
 * ends; relaxed loads, any thread. */
static inline uint32_t sr__worker_rows(const sr_pool *p, uint32_t w)
{
	int32_t lo = w ? atomic_load_explicit(&p->rb.shift[w - 1], memory_order_relaxed) : 0;
	int32_t hi = atomic_load_explicit(&p->rb.shift[w], memory_order_relaxed);
	int32_t per = p->cmds.ngroups ? (int32_t)p->cmds.ngroups : 1; /* once per group */

	return (uint32_t)((int32_t)p->workers.w[w].n_envs + per * (hi - lo));
}
/* The boundaries for the next step command (rebalancing looks every
 * SR__RB_EVERY of them), into @shift (num_threads). Pool thread only. */
void sr__grp_shifts(sr_pool *p, int32_t *shift);
/* pool.c: mark group @g's envs in flight (1) or not (0). */
void sr__grp_mark(sr_pool *p, uint32_t g, uint8_t v);

/* --- collector.c: the finite check --- */
/* SR__NF_ENV_MASK, SR__NF_OBS, SR__NF_REW: internal.h. */
/* The default of the check: on, unless STEPRING_CHECK_FINITE=0. */
bool sr__check_finite_default(void);
/* Rows flagged SR_SLOT_NONFINITE so far (relaxed loads, any thread). */
uint64_t sr__nonfinite_rows(const sr_pool *p);
/* Process workers that do not check their own rows (a Python worker):
 * check rows [seq, seq + n) (published, not consumed), flag and count
 * the non-finite ones. Pool thread. */
void sr__nonfinite_scan(sr_pool *p, uint64_t seq, uint32_t n);

/* --- collector.c --- */
int sr__collector_open(sr_pool *p);
void sr__collector_close(sr_pool *p);
/* Sync: consume everything published (pads, batch, extras) and expose
 * slots [seq, seq + num_envs) as the batch. *@t: the clock when the
 * workers finished (the kind's wait), then when the batch is formed. */
int sr__collect_sync(sr_pool *p, uint64_t seq, uint64_t *t, const sr_batch **out);
/* Async: wait for batch_size ready envs and expose them; *@t gets the
 * clock at the end. */
int sr__collect_async(sr_pool *p, uint64_t *t, const sr_batch **out);
/* Async: wait until nothing is in flight and drop what is published. */
void sr__collect_drain(sr_pool *p);

/* --- stats_shm.c --- */
int sr__stats_shm_open(sr_pool *p, const char *ring_name);
void sr__stats_shm_update(sr_pool *p);
/* The same at once (not every 64 batches): a fault is news. */
void sr__stats_shm_update_now(sr_pool *p);
void sr__stats_shm_close(sr_pool *p);

/* --- pool.c --- */
/* Async: wait for the results in flight and drop them; sync: no-op. */
void sr__pool_quiesce(sr_pool *p);

/* --- pool_ckpt.c --- */
/* Wait for this pool's checkpoint in flight and free p->ckpt. */
void sr__pool_ckpt_close(sr_pool *p);

#endif

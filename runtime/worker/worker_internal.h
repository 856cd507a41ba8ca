/*
 * The worker seam (runtime/worker/): what steps a pool's envs, as the pool
 * sees it. The pool (runtime/pool/) calls a kind of worker only through
 * its ops table (struct sr__worker_kind); the kinds (worker/thread.c,
 * worker/proc_kind.c) see the pool's layout (pool_internal.h) and its
 * services. Also here: the worker records the pool keeps (one per
 * worker, with its slice, its counters and, for the thread kind, its
 * envs' memory and queues) and the command records the pool writes.
 */
#ifndef SR_WORKER_INTERNAL_H
#define SR_WORKER_INTERNAL_H

#include <pthread.h>

#include "ckpt_internal.h"
#include "sr_base.h"
#include "stepring/env.h"
#include "stepring/pool.h"
#include "stepring/stats.h"

struct sr_pool;

/*
 * Stepping envs into ring rows (the C workers: threads and the C env
 * worker of process pools; worker/book_pvt.h has the code).
 *
 * struct sr__slice: a worker's envs, their states and per-env
 * bookkeeping, struct of arrays (so the bookkeeping runs as vector
 * loops), index = the env's place in its worker's slice. Written by the
 * worker that steps them, read and written by checkpoints at quiescent
 * points (the pool's, pool/snapshot.c and restore.c; a process
 * worker's SAVE and LOAD).
 */
struct sr__slice {
	unsigned char *states;  /* n * spec.state_size */
	uint64_t *prev_seq;     /* ring seq of the env's last slot (SR_RING_NO_PREV after reset) */
	uint32_t *elapsed;      /* steps since the last reset: TimeLimit truncation */
	uint8_t *done;          /* the last step ended the episode (terminated | truncated) */
	uint8_t *done_term;     /* ... by termination (DISABLED mode repeats it) */
	uint8_t *done_trunc;    /* ... by truncation */
	double *ep_ret;         /* return of the current episode so far */
	uint64_t *ep_len;       /* its length */
	double *rew;            /* scratch: the env writes double rewards */
};

/* Env @i's bookkeeping as a checkpoint's env record (ckpt_internal.h) and
 * back: the one mapping of the pool's checkpoints (thread workers) and a
 * process worker's SAVE and LOAD. get sets only the record's fields it
 * has (the caller zeroes the rest). */
static inline void sr__slice_rec_get(const struct sr__slice *s, uint32_t i,
				     struct sr__ckpt_env_rec *er)
{
	er->prev_seq = s->prev_seq[i];
	er->ep_len = s->ep_len[i];
	er->ep_ret = s->ep_ret[i];
	er->elapsed = s->elapsed[i];
	er->done = s->done[i];
	er->term = s->done_term[i];
	er->trunc = s->done_trunc[i];
}

static inline void sr__slice_rec_put(struct sr__slice *s, uint32_t i,
				     const struct sr__ckpt_env_rec *er)
{
	s->prev_seq[i] = er->prev_seq;
	s->ep_len[i] = er->ep_len;
	s->ep_ret[i] = er->ep_ret;
	s->elapsed[i] = er->elapsed;
	s->done[i] = er->done;
	s->done_term[i] = er->term;
	s->done_trunc[i] = er->trunc;
}

/*
 * A queue of finished episodes (return, length), single producer (the
 * worker that stepped the envs), single consumer (the pool thread, or a
 * process pool's trainer): two doubles per entry, free-running head and
 * tail. Where it lives differs (a thread worker's record and memory; a
 * worker process's record and area of the command block): struct
 * sr__eps_q is the producer's handle on it. Orders (P0/P1 for threads,
 * PC3 for processes): the producer writes an entry, then stores head
 * (release); the consumer loads head (acquire), reads the entries, then
 * stores tail (release); the producer loads tail (acquire) before it
 * reuses an entry.
 */
struct sr__eps_q {
	double *e;              /* 2 per entry */
	uint32_t mask;          /* entries - 1, a power of two */
	uint32_t tail_seen;     /* the producer's copy of *tail (reloaded when full) */
	_Atomic uint32_t *head; /* the producer's */
	_Atomic uint32_t *tail; /* the consumer's */
	uint64_t dropped;       /* never expected: the consumer merges after every command */
};

/* Producer: one finished episode. The consumer's tail is read only when
 * the queue looks full, so its cache line does not bounce once per
 * episode. */
static inline __attribute__((always_inline)) void sr__eps_push(struct sr__eps_q *q, double ret,
								uint64_t len)
{
	uint32_t h = atomic_load_explicit(q->head, memory_order_relaxed);

	if (h - q->tail_seen > q->mask)
		q->tail_seen = atomic_load_explicit(q->tail, memory_order_acquire);
	if (h - q->tail_seen > q->mask) {
		q->dropped++;
		return;
	}
	q->e[2 * (h & q->mask)] = ret;
	q->e[2 * (h & q->mask) + 1] = (double)len;
	/* P0 / PC3: release pairs with the consumer's acquire in sr__eps_take. */
	atomic_store_explicit(q->head, h + 1, memory_order_release);
}

/* Consumer: every episode queued since the last call, in order, to
 * @fn(@arg, return, length). */
static inline void sr__eps_take(const double *e, uint32_t mask, _Atomic uint32_t *head,
				_Atomic uint32_t *tail, void (*fn)(void *, double, double),
				void *arg)
{
	uint32_t t = atomic_load_explicit(tail, memory_order_relaxed);
	/* P1 / PC3: acquire pairs with the producer's release of head. */
	uint32_t h = atomic_load_explicit(head, memory_order_acquire);

	if (t == h)
		return; /* no store: keep the line clean in the producer's cache */
	for (; t != h; t++)
		fn(arg, e[2 * (t & mask)], e[2 * (t & mask) + 1]);
	/* Entries read before the producer may reuse them. */
	atomic_store_explicit(tail, h, memory_order_release);
}

/* What the worker that steps rows keeps of its own: bookkeeping scratch,
 * its same-step list, its count of the rows it flagged non-finite (it is
 * that counter's single writer), its episode queue. Sized for every env
 * it may step. */
struct sr__book_x {
	uint8_t *need;               /* rows that need the slow path */
	uint32_t *fix;               /* 2 per env: the rows that need more */
	uint32_t *done_loc;          /* SAME_STEP: local envs that finished ... */
	uint64_t *done_seq;          /* ... and their slot sequences */
	_Atomic uint64_t *nonfinite; /* rows it flagged SR_SLOT_NONFINITE */
	struct sr__eps_q eps;        /* the episodes it finishes */
};

/* The settings of stepping, the same for every call: set at create,
 * read-only after. */
struct sr__book {
	const sr_env_spec *spec;
	uint32_t od;                /* floats per obs row */
	uint32_t trunc_at;          /* truncated once elapsed >= this (max_episode_steps
				     * - 1), or UINT32_MAX */
	size_t asz;                 /* bytes per action */
	uint32_t autoreset;         /* enum sr_autoreset */
	bool check;                 /* the finite check */
	float *final;               /* final observations, row = pool env (keep_final), or NULL */
	_Atomic uint64_t *nf_first; /* the first non-finite row (SR__NF_*), as one word */
};

/* Entries of an async queue: env index, plus this bit for "reset it". */
#define SR__Q_RESET 0x80000000u

/* An env's reset with bounds (Gymnasium's reset options; envs.h). */
typedef void (*sr__reset_fn)(const sr_env_spec *spec, void *states, size_t n, const double *b,
			     float *obs);

/*
 * Worker command k of the pool thread (thread.c; pool/collector.c, "Batch
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
 *  - sr__kind_thread (thread.c): worker 0 inline on the pool thread,
 *    workers 1..T-1 pthreads bound by the placement plan, sleeping on
 *    their go word; envs in this process. Ragged sends go through per-env
 *    SPSC queues and a per-env action mailbox.
 *  - sr__kind_proc (proc_kind.c): worker processes attached to the ring
 *    and to a command block in shared memory (proc_internal.h), worker 0
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
	/* Optional (NULL: each worker steps exactly its own envs of every
	 * command): the boundaries between the workers' rows for the step
	 * command being written, into @shift (num_threads; see struct
	 * sr__rebalance), which the command keeps. Pool thread. */
	void (*shares)(sr_pool *p, int32_t *shift);
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
	/* Optional (NULL: nothing to add, SR_STATS_WORKERS_THREADS): the
	 * stats block's fields that only the workers know (faults, restarts,
	 * fault_rows, worker_kind) into @s, while they run (before start and
	 * after stop: nothing, the block keeps what it said). Pool thread,
	 * inside the block's seqlock. */
	void (*stats_block)(const sr_pool *p, struct sr_stats_shm *s);
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
	struct sr__slice slice;     /* its envs' states and bookkeeping (see OWNERSHIP) */
	struct sr__book_x bx;       /* its scratch as the stepper of rows (bookkeeping,
				     * same-step list), sized for its neighbours' envs too */
	uint32_t *run_env;          /* 3 * n_envs: async drain runs (lo, len, seq offset) */
	uint8_t *mark;              /* n_envs: async drain, envs popped (1 step, 2 reset) */
	int alloc_err;

	/* --- finished episodes (bx.eps, struct sr__eps_q): SPSC, this
	 * worker produces (release on eps_head), the pool thread merges
	 * (acquire). Capacity >= the envs it may step: between two merges an
	 * env finishes at most one episode. --- */
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_head;
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

#endif
